// `disabled: true`: no network at all, and every method's answer says it was
// not sent — what the service would answer for a project that records
// nothing.

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, test } from "node:test";

import { AbortError, NotFoundError, Page, Tocsin, TocsinError } from "../../dist/esm/index.js";
import { EVENT, UUID_RE, ok, scriptedFetch, withEnv } from "./helpers.mjs";

const cjs = createRequire(import.meta.url)("../../dist/cjs/index.js");

/** A fetch that fails the test if anything calls it. */
function noNetwork() {
  const counter = { calls: 0 };
  counter.fetch = async (url) => {
    counter.calls++;
    throw new Error(`a disabled client fetched ${url}`);
  };
  return counter;
}

/** A disabled client on a fetch that must not be called, without an API key. */
function disabledClient(options = {}) {
  const network = noNetwork();
  return { tocsin: new Tocsin({ disabled: true, fetch: network.fetch, ...options }), network };
}

function assertNotSent(res) {
  assert.equal(res.sent, false);
  assert.equal(res.statusCode, 0);
  assert.equal(res.requestId, "");
  assert.equal(res.rateLimit, null);
  assert.equal(res.wasReplayed, false);
}

describe("disabled client", () => {
  test("needs no API key, and says it is disabled", async () => {
    await withEnv({ TOCSIN_API_KEY: undefined }, () => {
      const tocsin = new Tocsin({ disabled: true });
      assert.equal(tocsin.disabled, true);
      assert.equal(new Tocsin("key").disabled, false);
    });
  });

  test("disabled must be a boolean", () => {
    assert.throws(() => new Tocsin("key", { disabled: "yes" }), /disabled must be true or false/);
  });

  test("events.create returns the event it would have recorded, not sent, nothing pushed", async () => {
    const { tocsin, network } = disabledClient();
    const before = Date.now();
    const res = await tocsin.events.create({
      channelName: "payments",
      title: "Payment failed",
      description: "Card declined",
      icon: "💸",
      tags: ["eu"],
      metadata: { amount: 1999 },
      userId: "user_7",
      notify: true,
      source: "billing",
      priority: "high",
      alertKey: "payment-1042",
    });
    assertNotSent(res);
    const { id, createdAt, ...fields } = res.data;
    assert.match(id, UUID_RE);
    assert.ok(Date.parse(createdAt) >= before - 1 && Date.parse(createdAt) <= Date.now() + 1, createdAt);
    assert.deepEqual(fields, {
      channelName: "payments",
      title: "Payment failed",
      description: "Card declined",
      icon: "💸",
      tags: ["eu"],
      metadata: { amount: 1999 },
      userId: "user_7",
      notify: true,
      source: "billing",
      priority: "high",
      alertKey: "payment-1042",
      parser: "text",
      descriptionHtml: null,
      url: null,
      notification: { state: "skipped" },
    });
    assert.equal(network.calls, 0);
  });

  test("events.create with a timestamp returns the event at that time, notify false", async () => {
    const { tocsin } = disabledClient();
    const at = new Date(Date.UTC(2026, 2, 1, 9, 30, 0, 500)); // .5 s: exact in Unix seconds too
    for (const timestamp of [at, "2026-03-01T10:30:00.500+01:00", at.getTime() / 1000]) {
      const { data } = await tocsin.events.create({ channelName: "c", title: "t", notify: true, timestamp });
      assert.equal(data.createdAt, "2026-03-01T09:30:00.500Z", String(timestamp));
      assert.equal(data.notify, false, "history is never pushed");
      assert.equal(data.notification.state, "skipped");
    }
    const { data } = await tocsin.events.create({
      channelName: "c", title: "t", parser: "markdown", description: "**hi**", url: "https://example.com/1",
    });
    assert.equal(data.parser, "markdown");
    assert.equal(data.descriptionHtml, null, "only the service renders markdown");
    assert.equal(data.url, "https://example.com/1");
  });

  test("events.create fills what is left out as the service does", async () => {
    const { tocsin } = disabledClient();
    const { data } = await tocsin.events.create({ channelName: "c", title: "t" });
    assert.equal(data.description, null);
    assert.equal(data.icon, null);
    assert.deepEqual(data.tags, []);
    assert.deepEqual(data.metadata, {});
    assert.equal(data.userId, null);
    assert.equal(data.notify, true);
    assert.equal(data.source, null);
    assert.equal(data.priority, "normal");
    assert.equal(data.alertKey, null);
    assert.equal(data.parser, "text");
    assert.equal(data.descriptionHtml, null);
    assert.equal(data.url, null);
    const second = await tocsin.events.create({ channelName: "c", title: "t" });
    assert.notEqual(second.data.id, data.id, "each event gets its own id");
  });

  test("identify and devices.register return what they would have stored", async () => {
    const { tocsin, network } = disabledClient();
    const identity = await tocsin.identify({ user_id: "user_7", properties: { plan: "pro" }, aliases: ["ada@example.com"] });
    assertNotSent(identity);
    assert.equal(identity.data.user_id, "user_7");
    assert.deepEqual(identity.data.properties, { plan: "pro" });
    assert.deepEqual(identity.data.aliases, ["ada@example.com"]);
    assert.equal(identity.data.createdAt, identity.data.updatedAt);
    assert.equal(identity.data.firstSeenAt, identity.data.createdAt);
    assert.equal(identity.data.lastSeenAt, identity.data.createdAt);
    assert.equal(identity.data.eventCount, 0);

    const device = await tocsin.devices.register({ token: "ab12", environment: "sandbox" });
    assertNotSent(device);
    assert.match(device.data.id, UUID_RE);
    assert.equal(device.data.token, "ab12");
    assert.equal(device.data.environment, "sandbox");
    assert.equal(device.data.name, null);
    assert.equal(device.data.channels, null);
    assert.equal(device.data.active, true);
    assert.equal(device.data.deactivatedReason, null);
    assert.equal(device.data.tags, null);
    assert.equal(device.data.minPriority, "low");
    assert.equal(device.data.quietHours, null);
    assert.equal(device.data.burst, null);
    assert.equal(network.calls, 0);
  });

  test("devices.register returns the rules it would have stored, allowPriority defaulting to high", async () => {
    const { tocsin, network } = disabledClient();
    const rules = {
      tags: ["eu"],
      minPriority: "normal",
      quietHours: { start: "22:00", end: "07:00", timeZone: "Europe/Berlin" },
      burst: { max: 5, perMinutes: 10 },
    };
    const { data } = await tocsin.devices.register({ token: "ab12", environment: "sandbox", ...rules });
    assert.deepEqual(data.tags, ["eu"]);
    assert.equal(data.minPriority, "normal");
    assert.deepEqual(data.quietHours, { ...rules.quietHours, allowPriority: "high" });
    assert.deepEqual(data.burst, { max: 5, perMinutes: 10 });

    // null lets nothing through during quiet hours: kept, not replaced by the default.
    const strict = await tocsin.devices.register({
      token: "ab12",
      environment: "sandbox",
      quietHours: { ...rules.quietHours, allowPriority: null },
    });
    assert.equal(strict.data.quietHours.allowPriority, null);
    assert.equal(network.calls, 0);
  });

  test("lists are empty and not sent; events.list is a last page that iterates to nothing", async () => {
    const { tocsin, network } = disabledClient();
    const page = await tocsin.events.list({ channel: "payments", limit: 10 });
    assert.ok(page instanceof Page);
    assertNotSent(page);
    assert.deepEqual(page.items, []);
    assert.equal(page.nextCursor, null);
    assert.equal(page.hasNextPage(), false);
    for await (const _ of tocsin.events.list()) assert.fail("no event");

    const channels = await tocsin.channels.list();
    assertNotSent(channels);
    assert.deepEqual(channels.data, { items: [] });
    const devices = await tocsin.devices.list();
    assertNotSent(devices);
    assert.deepEqual(devices.data, { devices: [] });
    const stats = await tocsin.stats.events({ bucket: "day" });
    assertNotSent(stats);
    assert.deepEqual(stats.data, { buckets: [], nextSince: null });
    const users = await tocsin.users.list({ q: "ada" });
    assert.ok(users instanceof Page);
    assertNotSent(users);
    assert.deepEqual(users.data, { items: [], nextCursor: null });
    for await (const _ of tocsin.users.list()) assert.fail("no user");
    const insights = await tocsin.insights.list();
    assertNotSent(insights);
    assert.deepEqual(insights.data, { insights: [] });
    assert.equal(network.calls, 0);
  });

  test("insights.set and insights.increment return the insight they would have created", async () => {
    const { tocsin, network } = disabledClient();
    const set = await tocsin.insights.set("Revenue today", 1250, { icon: "💰", idempotencyKey: "k" });
    assertNotSent(set);
    const { createdAt, updatedAt, ...fields } = set.data;
    assert.deepEqual(fields, { title: "Revenue today", value: 1250, icon: "💰" });
    assert.equal(createdAt, updatedAt);
    assert.ok(!Number.isNaN(Date.parse(createdAt)));
    const incremented = await tocsin.insights.increment("Active trials", 2);
    assertNotSent(incremented);
    assert.equal(incremented.data.value, 2, "a project that records nothing has no insight: the increment creates it");
    assert.equal(incremented.data.icon, null);
    assert.equal(network.calls, 0);
  });

  test("tocsin.stream yields nothing and ends when its signal aborts", async () => {
    const { tocsin, network } = disabledClient();
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    for await (const _ of tocsin.stream({ signal: controller.signal })) assert.fail("no message");
    assert.equal(network.calls, 0);
  });

  test("a lookup by id is a NotFoundError that says the client is disabled", async () => {
    const { tocsin, network } = disabledClient();
    for (const [what, call] of [
      ["event evt_1", () => tocsin.events.get("evt_1")],
      ["user user_7", () => tocsin.users.get("user_7")],
      ["device d1", () => tocsin.devices.delete("d1")],
      ["device d2", () => tocsin.devices.update("d2", { minPriority: "high" })],
      ['insight "Revenue today"', () => tocsin.insights.delete("Revenue today")],
    ]) {
      await assert.rejects(call(), (error) => {
        assert.ok(error instanceof NotFoundError);
        assert.equal(error.statusCode, 404);
        assert.equal(error.requestId, undefined);
        assert.match(error.message, new RegExp(`^${what} not found: the client is disabled`));
        return true;
      });
    }
    assert.equal(network.calls, 0);
  });

  test("events.stream yields nothing, sends nothing, and ends when its signal aborts", async () => {
    const { tocsin, network } = disabledClient();
    for (const where of ["params", "options"]) {
      const controller = new AbortController();
      const stream = where === "params"
        ? tocsin.events.stream({ lastEventId: "e9", signal: controller.signal })
        : tocsin.events.stream({ lastEventId: "e9" }, { signal: controller.signal });
      setTimeout(() => controller.abort(), 20);
      for await (const _ of stream) assert.fail("no event");
      assert.equal(stream.lastEventId, "e9");
    }
    assert.equal(network.calls, 0);
  });

  test("request() without an offline answer rejects with a TocsinError; with one, returns it", async () => {
    const { tocsin, network } = disabledClient();
    await assert.rejects(tocsin.request({ method: "GET", path: "/v1/new-thing" }), (error) => {
      assert.ok(error instanceof TocsinError);
      assert.match(error.message, /disabled.*GET \/v1\/new-thing was not sent/);
      return true;
    });
    const res = await tocsin.request({ method: "GET", path: "/v1/new-thing", offline: () => ({ things: [] }) });
    assertNotSent(res);
    assert.deepEqual(res.data, { things: [] });
    assert.equal(network.calls, 0);
  });

  test("per-call options are still checked: an aborted signal is an AbortError, a bad timeout is refused", async () => {
    const { tocsin } = disabledClient();
    await assert.rejects(tocsin.events.create({ channelName: "c", title: "t" }, { signal: AbortSignal.abort() }), AbortError);
    await assert.rejects(tocsin.channels.list({ timeout: 0 }), /timeout must be/);
  });

  test("leaves lastRateLimit alone", async () => {
    const { tocsin } = disabledClient();
    await tocsin.events.create({ channelName: "c", title: "t" });
    assert.equal(tocsin.lastRateLimit, null);
  });

  test("the CommonJS build is disabled the same way", async () => {
    const network = noNetwork();
    const tocsin = new cjs.Tocsin({ disabled: true, fetch: network.fetch });
    const res = await tocsin.events.create({ channelName: "c", title: "t" });
    assertNotSent(res);
    await assert.rejects(tocsin.events.get("x"), cjs.NotFoundError);
    assert.equal(network.calls, 0);
  });

  test("without an injected fetch it still sends nothing (the global fetch is not called)", async (t) => {
    const original = globalThis.fetch;
    const network = noNetwork();
    globalThis.fetch = network.fetch;
    t.after(() => {
      globalThis.fetch = original;
    });
    const tocsin = new Tocsin({ disabled: true });
    await tocsin.events.create({ channelName: "c", title: "t" });
    await tocsin.devices.list();
    assert.equal(network.calls, 0);
  });
});

test("an enabled client's answers say they were sent", async () => {
  const { fetch } = scriptedFetch(ok(EVENT), ok({ items: [], nextCursor: null }, { status: 200 }));
  const tocsin = new Tocsin("key", { fetch });
  assert.equal((await tocsin.events.create({ channelName: "c", title: "t" })).sent, true);
  assert.equal((await tocsin.events.list()).sent, true);
});
