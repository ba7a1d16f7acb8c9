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
