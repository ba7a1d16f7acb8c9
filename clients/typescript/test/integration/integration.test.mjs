// The packed client against a real ingest process (embedded mode).
//
//   INGEST_BIN=../../target/debug/ingest npm run test:integration
//
// Fails, never skips, when the binary is missing.

import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { after, before, describe, test } from "node:test";

import { countingFetch, installPackedClient, startIngest } from "./helpers.mjs";

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NOTIFICATION_STATES = ["pending", "queued", "delivered", "failed", "skipped"];

let ingest;
let client;
let apiKey;

before(async () => {
  // Start the server first: if the binary is missing this throws its message
  // and every test below fails with it.
  ingest = await startIngest();
  apiKey = await ingest.createKey();
  client = await installPackedClient();
});

after(async () => {
  await ingest?.stop();
  await client?.cleanup();
});

const event = (suffix = "") => ({
  channelName: "it-payments",
  title: `Payment failed${suffix}`,
  description: "Card declined",
  icon: "💸",
  tags: ["eu", "card"],
  metadata: { amount: 1999, currency: "EUR" },
  userId: "user_7",
  notify: false,
  source: "integration-test",
  priority: "high",
});

describe("packed client against ingest", () => {
  test("the tarball holds both builds, their declarations and the README, and no sources", () => {
    const files = readdirSync(client.installedAt, { recursive: true }).map(String);
    const expectedFiles = [
      "README.md", "package.json", "dist/cjs/package.json",
      "dist/esm/index.js", "dist/esm/index.d.ts", "dist/cjs/index.js", "dist/cjs/index.d.ts",
      // types.d.ts imports the generated schemas: without them every request
      // and response type would silently resolve to `any` for users.
      "dist/esm/generated/openapi.d.ts", "dist/cjs/generated/openapi.d.ts",
    ];
    for (const expected of expectedFiles) {
      assert.ok(files.includes(expected), `${expected} is in the tarball`);
    }
    assert.equal(files.some((file) => file.startsWith("src") || file.startsWith("test") || file.startsWith("scripts")), false);
  });

  test("events.create records an event and reports request id, replay flag and rate limit", async () => {
    const { Tocsin } = client.esm;
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const res = await tocsin.events.create(event(" create"));

    assert.equal(res.statusCode, 201);
    assert.equal(typeof res.data.id, "string");
    assert.ok(res.data.id.length > 0);
    assert.equal(res.data.channelName, "it-payments");
    assert.equal(res.data.title, "Payment failed create");
    assert.equal(res.data.description, "Card declined");
    assert.equal(res.data.icon, "💸");
    assert.deepEqual(res.data.tags, ["eu", "card"]);
    assert.deepEqual(res.data.metadata, { amount: 1999, currency: "EUR" });
    assert.equal(res.data.userId, "user_7");
    assert.equal(res.data.notify, false);
    assert.equal(res.data.source, "integration-test");
    assert.equal(res.data.priority, "high");
    assert.ok(!Number.isNaN(Date.parse(res.data.createdAt)), `createdAt ${res.data.createdAt}`);
    assert.match(res.requestId, UUID_RE);
    assert.equal(res.wasReplayed, false);

    assert.ok(res.rateLimit, "rate-limit headers present");
    for (const value of Object.values(res.rateLimit)) assert.equal(typeof value, "number");
    assert.ok(res.rateLimit.limit > 0);
    assert.ok(res.rateLimit.remaining < res.rateLimit.limit);
    assert.ok(res.rateLimit.reset * 1000 > Date.now() - 1_000, "reset is a Unix time in seconds, not in the past");
    assert.deepEqual(tocsin.lastRateLimit, res.rateLimit);
  });

  test("optional fields come back as null or empty when left out", async () => {
    const tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const res = await tocsin.events.create({ channelName: "it-minimal", title: "Minimal", notify: false });
    assert.equal(res.data.description, null);
    assert.equal(res.data.icon, null);
    assert.deepEqual(res.data.tags, []);
    assert.equal(res.data.userId, null);
    assert.equal(res.data.source, null);
    assert.equal(res.data.priority, "normal");
  });

  test("the same idempotency key replays the first response", async () => {
    const tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const key = `it-replay-${Date.now()}`;
    const first = await tocsin.events.create(event(" replay"), { idempotencyKey: key });
    const second = await tocsin.events.create(event(" replay"), { idempotencyKey: key });
    assert.equal(first.wasReplayed, false);
    assert.equal(second.wasReplayed, true);
    assert.equal(second.data.id, first.data.id);
    assert.deepEqual(second.data, first.data);
    assert.equal(second.statusCode, 201);
  });

  test("the same idempotency key with another body is a 422 and is not retried", async () => {
    const counter = countingFetch();
    const tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    const key = `it-mismatch-${Date.now()}`;
    await tocsin.events.create(event(" one"), { idempotencyKey: key });
    counter.calls = 0;
    await assert.rejects(tocsin.events.create(event(" two"), { idempotencyKey: key }), (error) => {
      assert.ok(error instanceof client.esm.ApiError);
      assert.equal(error.statusCode, 422);
      assert.match(error.requestId, UUID_RE);
      return true;
    });
    assert.equal(counter.calls, 1);
  });

  test("invalid fields are a ValidationError listing every fault with its path", async () => {
    const { Tocsin, ValidationError, ApiError } = client.esm;
    const counter = countingFetch();
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(tocsin.events.create({ title: "No channel", tags: ["ok", 5], priority: "urgent" }), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.ok(error instanceof ApiError);
      assert.equal(error.statusCode, 400);
      assert.equal(typeof error.message, "string");
      assert.ok(error.message.length > 0);
      assert.match(error.requestId, UUID_RE);
      const paths = error.details.map((detail) => JSON.stringify(detail.path));
      assert.ok(paths.includes('["channelName"]'), `details: ${paths}`);
      assert.ok(paths.includes('["tags","1"]'), `details: ${paths}`);
      assert.ok(paths.includes('["priority"]'), `details: ${paths}`);
      for (const detail of error.details) assert.equal(typeof detail.message, "string");
      return true;
    });
    assert.equal(counter.calls, 1, "a 400 is not retried");
  });

  test("an unknown API key is a 401 ApiError and is not retried", async () => {
    const { Tocsin, ApiError, ValidationError, RateLimitError } = client.esm;
    const counter = countingFetch();
    const tocsin = new Tocsin("tk_not_a_real_key", { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(tocsin.events.create(event(" 401")), (error) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error instanceof ValidationError, false);
      assert.equal(error instanceof RateLimitError, false);
      assert.equal(error.statusCode, 401);
      assert.ok(error.message.length > 0);
      assert.match(error.requestId, UUID_RE);
      return true;
    });
    assert.equal(counter.calls, 1);
  });

  test("a key over its rate limit gets a RateLimitError with the limit and Retry-After", async () => {
    const { Tocsin, RateLimitError } = client.esm;
    const limitedKey = await ingest.createKey({ rateLimit: 3 });
    const tocsin = new Tocsin(limitedKey, { baseUrl: ingest.baseUrl, maxRetries: 0 });

    const remaining = [];
    for (let i = 0; i < 3; i++) {
      const res = await tocsin.events.create(event(` limited ${i}`));
      assert.equal(res.rateLimit.limit, 3);
      remaining.push(res.rateLimit.remaining);
    }
    assert.deepEqual([...remaining].sort((a, b) => b - a), remaining, `remaining only goes down: ${remaining}`);

    await assert.rejects(tocsin.events.create(event(" limited 3")), (error) => {
      assert.ok(error instanceof RateLimitError);
      assert.equal(error.statusCode, 429);
      assert.equal(error.rateLimit.limit, 3);
      assert.equal(error.rateLimit.remaining, 0);
      assert.equal(typeof error.retryAfter, "number");
      assert.ok(error.retryAfter > 0, `retryAfter ${error.retryAfter}`);
      assert.ok(error.rateLimit.resetIn >= 0);
      assert.match(error.requestId, UUID_RE);
      assert.deepEqual(tocsin.lastRateLimit, error.rateLimit);
      return true;
    });
  });

  test("identify creates a user identity with properties and aliases", async () => {
    const tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const userId = `it-user-${Date.now()}`;
    const res = await tocsin.identify({ user_id: userId, properties: { plan: "pro", seats: 3 }, aliases: ["ada@example.com"] });
    assert.equal(res.statusCode, 200);
    assert.equal(res.data.user_id, userId);
    assert.deepEqual(res.data.properties, { plan: "pro", seats: 3 });
    assert.ok(res.data.aliases.includes("ada@example.com"));
    assert.ok(!Number.isNaN(Date.parse(res.data.createdAt)));
    assert.ok(!Number.isNaN(Date.parse(res.data.updatedAt)));
    assert.match(res.requestId, UUID_RE);
  });

  test("events.create reports the notification state without deliveries", async () => {
    const tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const res = await tocsin.events.create(event(" notification"));
    assert.ok(NOTIFICATION_STATES.includes(res.data.notification.state), `state ${res.data.notification.state}`);
    assert.equal(res.data.notification.deliveries, undefined);
  });

  test("events.get returns a created event with its notification state and deliveries", async () => {
    const tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const created = await tocsin.events.create(event(" lookup"));
    const res = await tocsin.events.get(created.data.id);

    assert.equal(res.statusCode, 200);
    assert.match(res.requestId, UUID_RE);
    const { notification, ...fields } = res.data;
    const { notification: _createdNotification, ...createdFields } = created.data;
    assert.deepEqual(fields, createdFields);
    assert.ok(NOTIFICATION_STATES.includes(notification.state), `state ${notification.state}`);
    assert.ok(Array.isArray(notification.deliveries), `deliveries: ${JSON.stringify(notification.deliveries)}`);
    for (const delivery of notification.deliveries) {
      // Exactly one recipient: a device (a push) or a destination (a message).
      const recipients = [delivery.deviceId, delivery.destinationId].filter((id) => id !== undefined);
      assert.equal(recipients.length, 1, `one of deviceId, destinationId: ${JSON.stringify(delivery)}`);
      assert.match(recipients[0], UUID_RE);
      assert.equal(typeof delivery.state, "string");
      assert.equal(typeof delivery.attempts, "number");
      assert.ok(delivery.error === null || typeof delivery.error === "string");
      assert.ok(!Number.isNaN(Date.parse(delivery.updatedAt)));
    }
  });

  test("events.get of an unknown id is a 404 ApiError and is not retried", async () => {
    const { Tocsin, ApiError, ValidationError } = client.esm;
    const counter = countingFetch();
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(tocsin.events.get("01890000-0000-7000-8000-000000000000"), (error) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error instanceof ValidationError, false);
      assert.equal(error.statusCode, 404);
      assert.ok(error.message.length > 0);
      assert.match(error.requestId, UUID_RE);
      return true;
    });
    assert.equal(counter.calls, 1, "a 404 is not retried");
  });

  test("the CommonJS build works the same, errors included", async () => {
    const { Tocsin, ValidationError, TocsinError } = client.cjs;
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const res = await tocsin.events.create(event(" cjs"));
    assert.equal(res.statusCode, 201);
    await assert.rejects(tocsin.events.create({ channelName: "it", title: 5 }), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.ok(error instanceof TocsinError);
      assert.ok(error.details.some((detail) => JSON.stringify(detail.path) === '["title"]'));
      return true;
    });
  });

  test("a server that is not listening is a ConnectionError", async () => {
    const { Tocsin, ConnectionError } = client.esm;
    const tocsin = new Tocsin(apiKey, { baseUrl: "http://127.0.0.1:9", maxRetries: 0 });
    await assert.rejects(tocsin.events.create(event(" offline")), ConnectionError);
  });
});

// Steps of one device's life, in order (node:test runs a file's tests one after another).
describe("devices against ingest", () => {
  const token = `${Date.now().toString(16)}${"ab".repeat(32)}`.slice(0, 64);
  let tocsin;
  let registered;

  before(() => {
    tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
  });

  test("register makes a new device: 201", async () => {
    const res = await tocsin.devices.register({ token, environment: "sandbox", name: "IT iPhone", channels: ["it-payments"] });
    assert.equal(res.statusCode, 201);
    assert.match(res.requestId, UUID_RE);
    registered = res.data;
    assert.match(registered.id, UUID_RE);
    assert.equal(registered.token, token);
    assert.equal(registered.environment, "sandbox");
    assert.equal(registered.name, "IT iPhone");
    assert.deepEqual(registered.channels, ["it-payments"]);
    assert.equal(registered.active, true);
    assert.equal(registered.deactivatedReason, null);
    assert.ok(!Number.isNaN(Date.parse(registered.createdAt)), `createdAt ${registered.createdAt}`);
    assert.ok(!Number.isNaN(Date.parse(registered.updatedAt)), `updatedAt ${registered.updatedAt}`);
  });

  test("registering the same token again updates that device: 200, same id", async () => {
    const res = await tocsin.devices.register({ token, environment: "sandbox", name: "IT iPhone renamed" });
    assert.equal(res.statusCode, 200);
    assert.equal(res.data.id, registered.id);
    assert.equal(res.data.token, token);
    assert.equal(res.data.name, "IT iPhone renamed");
    assert.equal(res.data.channels, null, "channels left out means every channel");
    assert.equal(res.data.active, true);
    assert.equal(res.data.createdAt, registered.createdAt);
  });

  test("list returns the device once", async () => {
    const res = await tocsin.devices.list();
    assert.equal(res.statusCode, 200);
    assert.ok(Array.isArray(res.data.devices));
    const mine = res.data.devices.filter((device) => device.token === token);
    assert.equal(mine.length, 1, `devices: ${JSON.stringify(res.data.devices)}`);
    assert.equal(mine[0].id, registered.id);
    assert.equal(mine[0].name, "IT iPhone renamed");
    assert.equal(mine[0].deactivatedReason, null);
  });

  test("delete removes the device: deleted true, gone from the list", async () => {
    const res = await tocsin.devices.delete(registered.id);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.data, { id: registered.id, deleted: true });
    const list = await tocsin.devices.list();
    assert.equal(list.data.devices.some((device) => device.id === registered.id), false);
  });

  test("deleting it again is a 404 ApiError and is not retried", async () => {
    const { Tocsin, ApiError } = client.esm;
    const counter = countingFetch();
    const counted = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(counted.devices.delete(registered.id), (error) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.statusCode, 404);
      assert.ok(error.message.length > 0);
      assert.match(error.requestId, UUID_RE);
      return true;
    });
    assert.equal(counter.calls, 1);
  });
});

// A device's alert rules, set at registration and changed with devices.update
// (PATCH /v1/devices/{id}). Steps in order, like the block above.
describe("device rules against ingest", () => {
  const token = `${Date.now().toString(16)}${"cd".repeat(32)}`.slice(0, 64);
  const quietHours = { start: "22:00", end: "07:00", timeZone: "Europe/Berlin" };
  let tocsin;
  let device;

  before(() => {
    tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
  });

  after(async () => {
    // Later files have their own ingest, but this one's events would otherwise be pushed to it.
    if (device) await tocsin.devices.delete(device.id).catch(() => {});
  });

  test("register stores the rules and every answer shows them, allowPriority defaulting to high", async () => {
    const res = await tocsin.devices.register({
      token,
      environment: "sandbox",
      name: "IT rules",
      channels: ["it-rules"],
      tags: ["eu", "card"],
      minPriority: "normal",
      quietHours,
      burst: { max: 5, perMinutes: 10 },
    });
    assert.equal(res.statusCode, 201);
    device = res.data;
    assert.deepEqual(device.tags, ["eu", "card"]);
    assert.equal(device.minPriority, "normal");
    assert.deepEqual(device.quietHours, { ...quietHours, allowPriority: "high" });
    assert.deepEqual(device.burst, { max: 5, perMinutes: 10 });

    const listed = (await tocsin.devices.list()).data.devices.find((d) => d.id === device.id);
    assert.deepEqual(listed, device);
  });

  test("a device registered without rules shows their defaults", async () => {
    const plain = await tocsin.devices.register({ token: token.replace(/^./, "e"), environment: "sandbox" });
    try {
      assert.equal(plain.data.tags, null);
      assert.equal(plain.data.minPriority, "low");
      assert.equal(plain.data.quietHours, null);
      assert.equal(plain.data.burst, null);
    } finally {
      await tocsin.devices.delete(plain.data.id);
    }
  });

  test("update changes the field it is given and keeps every other", async () => {
    const res = await tocsin.devices.update(device.id, { minPriority: "high" });
    assert.equal(res.statusCode, 200);
    assert.match(res.requestId, UUID_RE);
    const { minPriority, updatedAt, ...rest } = res.data;
    const { minPriority: previous, updatedAt: _previous, ...kept } = device;
    assert.equal(previous, "normal");
    assert.equal(minPriority, "high");
    assert.deepEqual(rest, kept);
    assert.ok(Date.parse(updatedAt) >= Date.parse(device.updatedAt), `updatedAt ${updatedAt}`);

    const listed = (await tocsin.devices.list()).data.devices.find((d) => d.id === device.id);
    assert.deepEqual(listed, res.data, "the change is stored, not only answered");
    device = res.data;
  });

  test("an event below the device's minimum priority is filtered for it, with the reason", async () => {
    const { data: created } = await tocsin.events.create({ channelName: "it-rules", title: "Quiet one", tags: ["eu"], priority: "low" });
    // The notifier records the outcome shortly after the event; wait for it.
    const deadline = Date.now() + 30_000;
    let delivery;
    while (!delivery && Date.now() < deadline) {
      const { data } = await tocsin.events.get(created.id);
      delivery = data.notification.deliveries?.find((d) => d.deviceId === device.id);
      if (!delivery) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(delivery, "the device's delivery was recorded");
    assert.equal(delivery.state, "filtered");
    assert.equal(delivery.reason, "priority");
    assert.equal(delivery.summaryId, null);
    assert.equal(delivery.attempts, 0);
  });

  test("null clears a rule; a cleared minPriority is low; what is left out stays", async () => {
    const res = await tocsin.devices.update(device.id, { tags: null, minPriority: null, quietHours: null, burst: null });
    assert.equal(res.data.tags, null);
    assert.equal(res.data.minPriority, "low");
    assert.equal(res.data.quietHours, null);
    assert.equal(res.data.burst, null);
    assert.equal(res.data.name, "IT rules");
    assert.deepEqual(res.data.channels, ["it-rules"]);
    device = res.data;
  });

  test("quiet hours with allowPriority null let nothing through, and say so", async () => {
    const res = await tocsin.devices.update(device.id, { quietHours: { ...quietHours, allowPriority: null } });
    assert.deepEqual(res.data.quietHours, { ...quietHours, allowPriority: null });
    device = res.data;
  });

  test("an unknown device id is a NotFoundError and is not retried", async () => {
    const { Tocsin, NotFoundError } = client.esm;
    const counter = countingFetch();
    const counted = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(counted.devices.update("01890000-0000-7000-8000-000000000000", { minPriority: "high" }), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.statusCode, 404);
      assert.ok(error.message.length > 0);
      assert.match(error.requestId, UUID_RE);
      return true;
    });
    assert.equal(counter.calls, 1);
  });

  test("an unknown time zone is a ValidationError at quietHours.timeZone, and changes nothing", async () => {
    const { Tocsin, ValidationError } = client.esm;
    const counter = countingFetch();
    const counted = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    const bad = { name: "Not applied", quietHours: { start: "22:00", end: "07:00", timeZone: "Mars/Olympus" } };
    await assert.rejects(counted.devices.update(device.id, bad), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.equal(error.statusCode, 400);
      const paths = error.details.map((detail) => JSON.stringify(detail.path));
      assert.ok(paths.includes('["quietHours","timeZone"]'), `details: ${paths}`);
      return true;
    });
    assert.equal(counter.calls, 1, "a 400 is not retried");
    const listed = (await tocsin.devices.list()).data.devices.find((d) => d.id === device.id);
    assert.deepEqual(listed, device);
  });

  test("the CommonJS build updates the same way", async () => {
    const cjs = new client.cjs.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const res = await cjs.devices.update(device.id, { burst: { max: 2, perMinutes: 1 } });
    assert.deepEqual(res.data.burst, { max: 2, perMinutes: 1 });
  });
});
