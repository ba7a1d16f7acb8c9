// Each call of the public surface: method, path, body and the typed result.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { NotFoundError, Tocsin, TocsinError, ValidationError } from "../../dist/esm/index.js";
import { EVENT, fail, ok, scriptedFetch } from "./helpers.mjs";

const DEVICE = {
  id: "dev_1",
  token: "a1b2c3",
  environment: "sandbox",
  name: "Ops iPhone",
  channels: ["payments"],
  tags: ["eu"],
  minPriority: "normal",
  quietHours: { start: "22:00", end: "07:00", timeZone: "Europe/Berlin", allowPriority: "high" },
  burst: { max: 5, perMinutes: 10 },
  active: true,
  deactivatedReason: null,
  createdAt: "2025-01-01T00:00:00Z",
  updatedAt: "2025-01-01T00:00:00Z",
};

function client(...script) {
  const { fetch, calls } = scriptedFetch(...script);
  return { tocsin: new Tocsin("key", { fetch, baseUrl: "http://tocsin.test" }), calls };
}

describe("events", () => {
  test("create posts every field to /v1/events", async () => {
    const params = {
      channelName: "payments",
      title: "Payment failed",
      description: "Card declined",
      icon: "💸",
      tags: ["eu", "card"],
      metadata: { amount: 1999, currency: "EUR", nested: { ok: false } },
      userId: "user_7",
      notify: false,
      source: "billing-worker",
    };
    const { tocsin, calls } = client(ok({ ...EVENT, ...params, id: "evt_9" }));
    const res = await tocsin.events.create(params);
    assert.equal(calls[0].url, "http://tocsin.test/v1/events");
    assert.equal(calls[0].init.method, "POST");
    assert.deepEqual(calls[0].body, params);
    assert.equal(res.data.id, "evt_9");
    assert.equal(res.data.icon, "💸");
  });

  test("create returns the notification state without deliveries", async () => {
    const { tocsin } = client(ok({ ...EVENT, notification: { state: "skipped" } }));
    const res = await tocsin.events.create({ channelName: "c", title: "t", notify: false });
    assert.deepEqual(res.data.notification, { state: "skipped" });
  });

  test("get returns the notification state with every delivery", async () => {
    const notification = {
      state: "failed",
      deliveries: [
        { deviceId: "dev_1", state: "delivered", attempts: 1, error: null, updatedAt: "2025-01-01T00:00:01Z" },
        { deviceId: "dev_2", state: "failed", attempts: 3, error: "BadDeviceToken", updatedAt: "2025-01-01T00:00:05Z" },
        {
          destinationId: "dst_1",
          state: "delivered",
          reason: null,
          summaryId: null,
          attempts: 1,
          error: null,
          provider: "slack",
          updatedAt: "2025-01-01T00:00:02Z",
        },
      ],
    };
    const { tocsin } = client(ok({ ...EVENT, notification }, { status: 200 }));
    const res = await tocsin.events.get("evt_1");
    assert.deepEqual(res.data.notification, notification);
  });

  test("get fetches /v1/events/{id} with the id encoded", async () => {
    const { tocsin, calls } = client(ok(EVENT, { status: 200 }));
    const res = await tocsin.events.get("evt/1 ?");
    assert.equal(calls[0].url, "http://tocsin.test/v1/events/evt%2F1%20%3F");
    assert.equal(calls[0].init.method, "GET");
    assert.equal(res.data.id, "evt_1");
  });

  test("get of an unknown id is an ApiError 404", async () => {
    const { tocsin } = client(fail(404, "event not found"));
    await assert.rejects(tocsin.events.get("nope"), (error) => error.statusCode === 404 && error.message === "event not found");
  });

  test("get refuses an empty id without sending anything", async () => {
    const { tocsin, calls } = client();
    await assert.rejects(tocsin.events.get(""), TocsinError);
    assert.equal(calls.length, 0);
  });

  test("create sends parser, url and icon shortcodes as given, and returns descriptionHtml", async () => {
    const params = {
      channelName: "payments",
      title: "Refund",
      description: "**Refunded** order #1042",
      parser: "markdown",
      url: "https://billing.example.com/orders/1042",
      icon: ":moneybag:",
    };
    const answer = { ...EVENT, ...params, icon: "💰", descriptionHtml: "<p><strong>Refunded</strong> order #1042</p>\n" };
    const { tocsin, calls } = client(ok(answer));
    const res = await tocsin.events.create(params);
    assert.deepEqual(calls[0].body, params);
    assert.equal(res.data.icon, "💰");
    assert.equal(res.data.parser, "markdown");
    assert.equal(res.data.descriptionHtml, answer.descriptionHtml);
    assert.equal(res.data.url, params.url);
  });

  test("create sends a Date timestamp as RFC 3339, and strings and Unix seconds as given", async () => {
    const { tocsin, calls } = client(ok(EVENT), ok(EVENT), ok(EVENT));
    const at = new Date(Date.UTC(2026, 2, 1, 9, 30, 0, 123));
    const params = { channelName: "c", title: "t", timestamp: at };
    await tocsin.events.create(params);
    await tocsin.events.create({ channelName: "c", title: "t", timestamp: "2026-03-01T10:30:00+01:00" });
    await tocsin.events.create({ channelName: "c", title: "t", timestamp: 1772357400.5 });
    assert.equal(calls[0].body.timestamp, "2026-03-01T09:30:00.123Z");
    assert.equal(calls[1].body.timestamp, "2026-03-01T10:30:00+01:00");
    assert.equal(calls[2].body.timestamp, 1772357400.5);
    assert.ok(params.timestamp instanceof Date, "the caller's params are left as they were");
  });

  test("create refuses an invalid Date timestamp without sending anything", async () => {
    const { tocsin, calls } = client();
    await assert.rejects(tocsin.events.create({ channelName: "c", title: "t", timestamp: new Date("nope") }), (error) => {
      assert.ok(error instanceof TocsinError);
      assert.match(error.message, /timestamp is an invalid Date/);
      return true;
    });
    assert.equal(calls.length, 0);
  });

  test("a timestamp in the future is the service's ValidationError at timestamp", async () => {
    const details = [{ path: ["timestamp"], message: "must not be in the future" }];
    const { tocsin, calls } = client(fail(400, "validation failed", { details }), fail(400, "unused"));
    await assert.rejects(tocsin.events.create({ channelName: "c", title: "t", timestamp: new Date(Date.now() + 60_000) }), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.deepEqual(error.details, details);
      return true;
    });
    assert.equal(calls.length, 1);
  });
});

describe("identify", () => {
  test("posts user_id, properties and aliases to /v1/identify", async () => {
    const params = { user_id: "user_7", properties: { plan: "pro", seats: 3 }, aliases: ["ada@example.com"] };
    const identity = { ...params, createdAt: "2025-01-01T00:00:00Z", updatedAt: "2025-01-02T00:00:00Z" };
    const { tocsin, calls } = client(ok(identity, { status: 200 }));
    const res = await tocsin.identify(params, { idempotencyKey: "id-1" });
    assert.equal(calls[0].url, "http://tocsin.test/v1/identify");
    assert.equal(calls[0].init.method, "POST");
    assert.deepEqual(calls[0].body, params);
    assert.equal(calls[0].headers["Idempotency-Key"], "id-1");
    assert.deepEqual(res.data, identity);
    assert.equal(res.statusCode, 200);
  });
});

describe("devices", () => {
  test("register posts to /v1/devices and reports 201 for a new device", async () => {
    const params = { token: "a1b2c3", environment: "sandbox", name: "Ops iPhone", channels: ["payments"] };
    const { tocsin, calls } = client(ok(DEVICE, { status: 201 }));
    const res = await tocsin.devices.register(params);
    assert.equal(calls[0].url, "http://tocsin.test/v1/devices");
    assert.equal(calls[0].init.method, "POST");
    assert.deepEqual(calls[0].body, params);
    assert.deepEqual(res.data, DEVICE);
    assert.equal(res.statusCode, 201);
  });

  test("register sends the alert rules as given", async () => {
    const params = {
      token: "a1b2c3",
      environment: "sandbox",
      tags: ["eu"],
      minPriority: "normal",
      quietHours: { start: "22:00", end: "07:00", timeZone: "Europe/Berlin" },
      burst: { max: 5, perMinutes: 10 },
    };
    const { tocsin, calls } = client(ok(DEVICE, { status: 201 }));
    const res = await tocsin.devices.register(params);
    assert.deepEqual(calls[0].body, params);
    assert.deepEqual(res.data.quietHours, DEVICE.quietHours);
    assert.deepEqual(res.data.burst, DEVICE.burst);
  });

  test("register of a known token reports 200", async () => {
    const { tocsin } = client(ok(DEVICE, { status: 200 }));
    const res = await tocsin.devices.register({ token: "a1b2c3", environment: "sandbox" });
    assert.equal(res.statusCode, 200);
  });

  test("list gets /v1/devices", async () => {
    const { tocsin, calls } = client(ok({ devices: [DEVICE] }, { status: 200 }));
    const res = await tocsin.devices.list({ headers: { "X-Trace": "1" } });
    assert.equal(calls[0].url, "http://tocsin.test/v1/devices");
    assert.equal(calls[0].init.method, "GET");
    assert.equal(calls[0].headers["X-Trace"], "1");
    assert.deepEqual(res.data.devices, [DEVICE]);
  });

  test("update sends PATCH /v1/devices/{id} with the changes and returns the device", async () => {
    const changes = { minPriority: "high", burst: { max: 3, perMinutes: 5 } };
    const updated = { ...DEVICE, ...changes };
    const { tocsin, calls } = client(ok(updated, { status: 200 }));
    const res = await tocsin.devices.update("dev_1", changes);
    assert.equal(calls[0].url, "http://tocsin.test/v1/devices/dev_1");
    assert.equal(calls[0].init.method, "PATCH");
    assert.equal(calls[0].headers["Content-Type"], "application/json");
    assert.deepEqual(calls[0].body, changes);
    assert.deepEqual(res.data, updated);
    assert.equal(res.statusCode, 200);
  });

  test("update sends null to clear a field and leaves out what is undefined", async () => {
    const { tocsin, calls } = client(ok(DEVICE, { status: 200 }));
    await tocsin.devices.update("dev_1", { tags: null, quietHours: null, name: undefined, burst: undefined });
    // Exactly what went on the wire: an absent field keeps its value on the
    // service, so `name: undefined` must not turn into `"name": null`.
    assert.equal(calls[0].init.body, '{"tags":null,"quietHours":null}');
  });

  test("update encodes the id and refuses an empty one without sending anything", async () => {
    const { tocsin, calls } = client(ok(DEVICE, { status: 200 }));
    await tocsin.devices.update("dev/1 ?", { name: "x" });
    assert.equal(calls[0].url, "http://tocsin.test/v1/devices/dev%2F1%20%3F");
    await assert.rejects(tocsin.devices.update("", { name: "x" }), /id must be a non-empty string/);
    assert.equal(calls.length, 1);
  });

  test("update of an unknown device is a NotFoundError and is not retried", async () => {
    const { tocsin, calls } = client(fail(404, "device not found"), fail(404, "unused"));
    await assert.rejects(tocsin.devices.update("nope", { minPriority: "low" }), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.message, "device not found");
      return true;
    });
    assert.equal(calls.length, 1);
  });

  test("update with a bad value is a ValidationError naming the field", async () => {
    const details = [{ path: ["quietHours", "timeZone"], message: "unknown time zone" }];
    const { tocsin, calls } = client(fail(400, "validation failed", { details }), fail(400, "unused"));
    const quietHours = { start: "22:00", end: "07:00", timeZone: "Mars/Olympus" };
    await assert.rejects(tocsin.devices.update("dev_1", { quietHours }), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.deepEqual(error.details, details);
      return true;
    });
    assert.equal(calls.length, 1);
  });

  test("delete sends DELETE /v1/devices/{id}", async () => {
    const { tocsin, calls } = client(ok({ id: "dev_1", deleted: true }, { status: 200 }));
    const res = await tocsin.devices.delete("dev_1");
    assert.equal(calls[0].url, "http://tocsin.test/v1/devices/dev_1");
    assert.equal(calls[0].init.method, "DELETE");
    assert.equal(calls[0].init.body, undefined);
    assert.deepEqual(res.data, { id: "dev_1", deleted: true });
  });

  test("delete refuses an empty id without sending anything", async () => {
    const { tocsin, calls } = client();
    await assert.rejects(tocsin.devices.delete(""), /id must be a non-empty string/);
    assert.equal(calls.length, 0);
  });
});

describe("channels", () => {
  test("list gets /v1/channels", async () => {
    const items = [
      { name: "payments", eventCount: 12, lastEventAt: "2026-11-23T06:40:00.123456Z" },
      { name: "quiet", eventCount: 0, lastEventAt: null },
    ];
    const { tocsin, calls } = client(ok({ items }, { status: 200 }));
    const res = await tocsin.channels.list();
    assert.equal(calls[0].url, "http://tocsin.test/v1/channels");
    assert.equal(calls[0].init.method, "GET");
    assert.deepEqual(res.data.items, items);
  });
});

describe("users", () => {
  const identity = {
    user_id: "user/7 ä",
    properties: { plan: "pro" },
    aliases: ["ada@example.com"],
    createdAt: "2025-01-01T00:00:00Z",
    updatedAt: "2025-01-02T00:00:00Z",
  };

  test("get fetches /v1/users/{userId} with the id encoded", async () => {
    const { tocsin, calls } = client(ok(identity, { status: 200 }));
    const res = await tocsin.users.get("user/7 ä");
    assert.equal(calls[0].url, "http://tocsin.test/v1/users/user%2F7%20%C3%A4");
    assert.equal(calls[0].init.method, "GET");
    assert.deepEqual(res.data, identity);
  });

  test("an unknown user is a NotFoundError and is not retried", async () => {
    const { tocsin, calls } = client(fail(404, "user not found"), fail(404, "unused"));
    await assert.rejects(tocsin.users.get("nobody"), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.statusCode, 404);
      assert.equal(error.message, "user not found");
      return true;
    });
    assert.equal(calls.length, 1);
  });

  test("get refuses an empty id without sending anything", async () => {
    const { tocsin, calls } = client();
    await assert.rejects(tocsin.users.get(""), /userId must be a non-empty string/);
    assert.equal(calls.length, 0);
  });

  test("get of an alias answers the user with its counters", async () => {
    const user = { ...identity, user_id: "user_7", firstSeenAt: "2025-01-01T00:00:00Z", lastSeenAt: "2025-01-03T00:00:00Z", eventCount: 4 };
    const { tocsin, calls } = client(ok(user, { status: 200 }));
    const res = await tocsin.users.get("ada@example.com");
    assert.equal(calls[0].url, "http://tocsin.test/v1/users/ada%40example.com");
    assert.equal(res.data.eventCount, 4);
    assert.equal(res.data.firstSeenAt, user.firstSeenAt);
  });

  const USER = {
    userId: "user_7",
    properties: { plan: "pro" },
    aliases: ["ada@example.com"],
    firstSeenAt: "2025-01-01T00:00:00Z",
    lastSeenAt: "2025-01-03T00:00:00Z",
    eventCount: 4,
    createdAt: "2025-01-01T00:00:00Z",
    updatedAt: "2025-01-02T00:00:00Z",
  };

  test("list gets /v1/users with q, property, limit and cursor in the query", async () => {
    const { tocsin, calls } = client(ok({ items: [USER], nextCursor: null }, { status: 200 }));
    const page = await tocsin.users.list({ q: "ada", property: "plan:pro", limit: 20, cursor: "1.75" }, { headers: { "X-Trace": "1" } });
    assert.equal(calls[0].init.method, "GET");
    assert.equal(new URL(calls[0].url).pathname, "/v1/users");
    assert.deepEqual(Object.fromEntries(new URL(calls[0].url).searchParams), { q: "ada", property: "plan:pro", limit: "20", cursor: "1.75" });
    assert.equal(calls[0].headers["X-Trace"], "1");
    assert.deepEqual(page.items, [USER]);
    assert.equal(page.nextCursor, null);
    assert.equal(page.statusCode, 200);
  });

  test("list without filters sends no query", async () => {
    const { tocsin, calls } = client(ok({ items: [], nextCursor: null }, { status: 200 }));
    await tocsin.users.list();
    assert.equal(calls[0].url, "http://tocsin.test/v1/users");
  });

  test("a property without a colon is the service's ValidationError at query.property", async () => {
    const details = [{ path: ["query", "property"], message: "is not in the expected form" }];
    const { tocsin } = client(fail(400, "validation failed", { details }));
    await assert.rejects(tocsin.users.list({ property: "plan" }), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.deepEqual(error.details, details);
      return true;
    });
  });
});

describe("insights", () => {
  const INSIGHT = {
    title: "Revenue today",
    value: 1250,
    icon: "💰",
    createdAt: "2026-11-23T06:40:00.000Z",
    updatedAt: "2026-11-23T06:40:00.000Z",
  };

  test("set posts title, value and icon to /v1/insights and reports 201 or 200", async () => {
    const { tocsin, calls } = client(ok(INSIGHT, { status: 201 }), ok({ ...INSIGHT, value: 1300 }, { status: 200 }));
    const created = await tocsin.insights.set("Revenue today", 1250, { icon: "💰", idempotencyKey: "rev-1", headers: { "X-Trace": "1" } });
    assert.equal(calls[0].url, "http://tocsin.test/v1/insights");
    assert.equal(calls[0].init.method, "POST");
    assert.deepEqual(calls[0].body, { title: "Revenue today", value: 1250, icon: "💰" });
    assert.equal(calls[0].headers["Idempotency-Key"], "rev-1");
    assert.equal(calls[0].headers["X-Trace"], "1");
    assert.equal(created.statusCode, 201);
    assert.deepEqual(created.data, INSIGHT);
    const updated = await tocsin.insights.set("Revenue today", 1300);
    assert.deepEqual(calls[1].body, { title: "Revenue today", value: 1300 }, "no icon: the insight keeps its own");
    assert.equal(updated.statusCode, 200);
    assert.equal(updated.data.value, 1300);
  });

  test("set takes strings and booleans too", async () => {
    const { tocsin, calls } = client(ok({ ...INSIGHT, value: "green" }), ok({ ...INSIGHT, value: false }));
    await tocsin.insights.set("Build", "green");
    await tocsin.insights.set("Maintenance", false);
    assert.deepEqual(calls.map((call) => call.body.value), ["green", false]);
  });

  test("increment sends PATCH /v1/insights with value {$inc}", async () => {
    const { tocsin, calls } = client(ok({ ...INSIGHT, title: "Active trials", value: 3 }, { status: 200 }));
    const res = await tocsin.insights.increment("Active trials", -1, { icon: ":test_tube:", timeout: 5_000 });
    assert.equal(calls[0].url, "http://tocsin.test/v1/insights");
    assert.equal(calls[0].init.method, "PATCH");
    assert.equal(calls[0].headers["Content-Type"], "application/json");
    assert.deepEqual(calls[0].body, { title: "Active trials", value: { $inc: -1 }, icon: ":test_tube:" });
    assert.equal(res.data.value, 3);
    assert.equal(res.statusCode, 200);
  });

  test("increment of a string is a ValidationError at value and is not retried", async () => {
    const details = [{ path: ["value"], message: "cannot increment this insight: its value is a string, not a number" }];
    const { tocsin, calls } = client(fail(400, "validation failed", { details }), fail(400, "unused"));
    await assert.rejects(tocsin.insights.increment("Build", 1), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.deepEqual(error.details, details);
      return true;
    });
    assert.equal(calls.length, 1);
  });

  test("list gets /v1/insights", async () => {
    const { tocsin, calls } = client(ok({ insights: [INSIGHT] }, { status: 200 }));
    const res = await tocsin.insights.list({ timeout: 1_000 });
    assert.equal(calls[0].url, "http://tocsin.test/v1/insights");
    assert.equal(calls[0].init.method, "GET");
    assert.deepEqual(res.data.insights, [INSIGHT]);
  });

  test("delete sends DELETE /v1/insights/{title} with the title encoded", async () => {
    const deleted = { title: "Revenue today / EU ?", deleted: true, deletedAt: "2026-11-23T06:41:00.000Z" };
    const { tocsin, calls } = client(ok(deleted, { status: 200 }));
    const res = await tocsin.insights.delete("Revenue today / EU ?");
    assert.equal(calls[0].url, "http://tocsin.test/v1/insights/Revenue%20today%20%2F%20EU%20%3F");
    assert.equal(calls[0].init.method, "DELETE");
    assert.equal(calls[0].init.body, undefined);
    assert.deepEqual(res.data, deleted);
  });

  test("delete of an unknown title is a NotFoundError; an empty title is refused unsent", async () => {
    const { tocsin, calls } = client(fail(404, "no insight with this title"), fail(404, "unused"));
    await assert.rejects(tocsin.insights.delete("nope"), NotFoundError);
    assert.equal(calls.length, 1);
    await assert.rejects(tocsin.insights.delete(""), /title must be a non-empty string/);
    assert.equal(calls.length, 1);
  });
});

describe("stats", () => {
  const buckets = [
    { start: "2026-11-23T05:00:00Z", count: 0 },
    { start: "2026-11-23T06:00:00Z", count: 3 },
  ];

  test("events gets /v1/stats/events with no query by default", async () => {
    const { tocsin, calls } = client(ok({ buckets }, { status: 200 }));
    const res = await tocsin.stats.events();
    assert.equal(calls[0].url, "http://tocsin.test/v1/stats/events");
    assert.equal(calls[0].init.method, "GET");
    assert.deepEqual(res.data.buckets, buckets);
  });

  test("events sends channel, since, until and bucket", async () => {
    const { tocsin, calls } = client(ok({ buckets }, { status: 200 }));
    await tocsin.stats.events({
      channel: "payments",
      since: new Date(Date.UTC(2026, 10, 20)),
      until: "2026-11-23T00:00:00Z",
      bucket: "day",
    });
    assert.deepEqual(Object.fromEntries(new URL(calls[0].url).searchParams), {
      channel: "payments",
      since: "2026-11-20T00:00:00.000Z",
      until: "2026-11-23T00:00:00Z",
      bucket: "day",
    });
  });

  test("too many buckets is a ValidationError", async () => {
    const details = [{ path: ["query", "since"], message: "more than 1000 buckets" }];
    const { tocsin } = client(fail(400, "validation failed", { details }));
    await assert.rejects(tocsin.stats.events({ since: "2000-01-01T00:00:00Z" }), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.deepEqual(error.details, details);
      return true;
    });
  });

  test("an invalid Date rejects without sending anything", async () => {
    const { tocsin, calls } = client();
    await assert.rejects(tocsin.stats.events({ until: new Date(Number.NaN) }), /until is an invalid Date/);
    assert.equal(calls.length, 0);
  });
});
