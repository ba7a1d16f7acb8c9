// The retry loop: what is retried, how long it waits, how often, and that a
// retried POST always carries one and the same Idempotency-Key.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { ApiError, ConflictError, ConnectionError, RateLimitError, TimeoutError, Tocsin } from "../../dist/esm/index.js";
import { backoffDelay, DEFAULT_RETRY_POLICY, isRetryableStatus, retryDelay } from "../../dist/esm/retry.js";
import { EVENT, RecordingTocsin, UUID_RE, fail, header, ok, scriptedFetch } from "./helpers.mjs";

const PARAMS = { channelName: "payments", title: "Payment failed" };
const connectionRefused = () => new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") });

describe("schedule", () => {
  test("backoff doubles from 500 ms up to 8 s, less up to 25% jitter", () => {
    const noJitter = () => 0;
    const fullJitter = () => 1;
    assert.deepEqual([0, 1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, noJitter)), [500, 1000, 2000, 4000, 8000, 8000, 8000]);
    assert.deepEqual([0, 1, 2, 3, 4].map((n) => backoffDelay(n, fullJitter)), [375, 750, 1500, 3000, 6000]);
    assert.equal(backoffDelay(1, () => 0.5), 875);
  });

  test("Retry-After wins over backoff and is capped at 60 s", () => {
    assert.equal(retryDelay(0, 3, () => 0), 3000);
    assert.equal(retryDelay(5, 0, () => 0), 0);
    assert.equal(retryDelay(0, 3600, () => 0), DEFAULT_RETRY_POLICY.maxRetryAfter);
    assert.equal(DEFAULT_RETRY_POLICY.maxRetryAfter, 60_000);
    assert.equal(retryDelay(2, undefined, () => 0), 2000);
  });

  test("which statuses are retryable", () => {
    for (const status of [429, 500, 502, 503, 504]) assert.equal(isRetryableStatus(status, false), true, `${status}`);
    assert.equal(isRetryableStatus(409, true), true);
    assert.equal(isRetryableStatus(409, true, true), true);
    assert.equal(isRetryableStatus(409, true, false), false, "a 409 without Retry-After is no request in flight");
    assert.equal(isRetryableStatus(409, false), false);
    for (const status of [400, 401, 403, 404, 405, 413, 415, 422]) {
      assert.equal(isRetryableStatus(status, true), false, `${status}`);
    }
  });
});

describe("retry loop", () => {
  test("5xx is retried with growing, jittered backoff until it succeeds", async () => {
    const { fetch, calls } = scriptedFetch(fail(500, "boom"), fail(503, "store unavailable"), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    const res = await tocsin.events.create(PARAMS);
    assert.equal(res.data.id, "evt_1");
    assert.equal(calls.length, 3);
    assert.equal(tocsin.sleeps.length, 2);
    const [first, second] = tocsin.sleeps;
    assert.ok(first >= 375 && first <= 500, `first backoff ${first}`);
    assert.ok(second >= 750 && second <= 1000, `second backoff ${second}`);
  });

  test("after maxRetries the last error is thrown", async () => {
    const { fetch, calls } = scriptedFetch(fail(500, "first"), fail(500, "second"), fail(502, "third"), fail(500, "unused"));
    const tocsin = new RecordingTocsin("key", { fetch, maxRetries: 2 });
    await assert.rejects(tocsin.events.create(PARAMS), (error) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.statusCode, 502);
      assert.equal(error.message, "third");
      return true;
    });
    assert.equal(calls.length, 3);
    assert.equal(tocsin.sleeps.length, 2);
  });

  test("maxRetries sets the number of retries", async () => {
    const { fetch, calls } = scriptedFetch(...Array.from({ length: 6 }, () => fail(503, "down")));
    const tocsin = new RecordingTocsin("key", { fetch, maxRetries: 4 });
    await assert.rejects(tocsin.events.create(PARAMS), ApiError);
    assert.equal(calls.length, 5);
    assert.equal(tocsin.sleeps.length, 4);
    const ranges = [[375, 500], [750, 1000], [1500, 2000], [3000, 4000]];
    tocsin.sleeps.forEach((ms, i) => assert.ok(ms >= ranges[i][0] && ms <= ranges[i][1], `sleep ${i}: ${ms}`));
  });

  test("maxRetries: 0 makes one attempt and sends no generated key", async () => {
    const { fetch, calls } = scriptedFetch(fail(503, "down"), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch, maxRetries: 0 });
    await assert.rejects(tocsin.events.create(PARAMS), ApiError);
    assert.equal(calls.length, 1);
    assert.deepEqual(tocsin.sleeps, []);
    assert.equal(header(calls[0], "Idempotency-Key"), undefined);
  });

  test("429 waits for Retry-After, then succeeds", async () => {
    const { fetch, calls } = scriptedFetch(fail(429, "rate limit exceeded", { headers: { "Retry-After": "2" } }), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    const res = await tocsin.events.create(PARAMS);
    assert.equal(res.statusCode, 201);
    assert.equal(calls.length, 2);
    assert.deepEqual(tocsin.sleeps, [2000]);
  });

  test("a long Retry-After is capped", async () => {
    const { fetch } = scriptedFetch(fail(429, "rate limit exceeded", { headers: { "Retry-After": "3600" } }), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.events.create(PARAMS);
    assert.deepEqual(tocsin.sleeps, [60_000]);
  });

  test("429 without Retry-After falls back to backoff", async () => {
    const { fetch } = scriptedFetch(fail(429, "rate limit exceeded"), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.events.create(PARAMS);
    assert.ok(tocsin.sleeps[0] >= 375 && tocsin.sleeps[0] <= 500, `sleep ${tocsin.sleeps[0]}`);
  });

  test("a 429 that outlasts the retries surfaces as RateLimitError", async () => {
    const limited = () => fail(429, "rate limit exceeded", { headers: { "Retry-After": "1" } });
    const { fetch, calls } = scriptedFetch(limited(), limited());
    const tocsin = new RecordingTocsin("key", { fetch, maxRetries: 1 });
    await assert.rejects(tocsin.events.create(PARAMS), (error) => error instanceof RateLimitError && error.retryAfter === 1);
    assert.equal(calls.length, 2);
  });

  test("409 for a key still in flight is retried after Retry-After and replays", async () => {
    const { fetch, calls } = scriptedFetch(
      fail(409, "a request with this idempotency key is in progress", { headers: { "Retry-After": "1" } }),
      ok(EVENT, { headers: { "X-Idempotent-Replay": "true" } }),
    );
    const tocsin = new RecordingTocsin("key", { fetch });
    const res = await tocsin.events.create(PARAMS, { idempotencyKey: "order-42" });
    assert.equal(res.wasReplayed, true);
    assert.equal(calls.length, 2);
    assert.deepEqual(tocsin.sleeps, [1000]);
  });

  test("409 without Retry-After (a project's 101st insight) is not retried, even with a key", async () => {
    const { fetch, calls } = scriptedFetch(fail(409, "the project has 100 insights"), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    await assert.rejects(tocsin.insights.set("one too many", 1), (error) => error instanceof ConflictError && error.statusCode === 409);
    assert.equal(calls.length, 1);
    assert.match(header(calls[0], "Idempotency-Key"), UUID_RE);
    assert.deepEqual(tocsin.sleeps, []);
  });

  test("409 on a request without an Idempotency-Key is not retried", async () => {
    const { fetch, calls } = scriptedFetch(fail(409, "conflict"), ok(EVENT, { status: 200 }));
    const tocsin = new RecordingTocsin("key", { fetch });
    await assert.rejects(tocsin.events.get("evt_1"), (error) => error.statusCode === 409);
    assert.equal(calls.length, 1);
  });

  for (const status of [400, 401, 404, 405, 413, 415, 422]) {
    test(`${status} is never retried`, async () => {
      const { fetch, calls } = scriptedFetch(fail(status, "no"), ok(EVENT));
      const tocsin = new RecordingTocsin("key", { fetch });
      await assert.rejects(tocsin.events.create(PARAMS, { idempotencyKey: "k" }), (error) => error.statusCode === status);
      assert.equal(calls.length, 1);
      assert.deepEqual(tocsin.sleeps, []);
    });
  }

  test("connection errors are retried", async () => {
    const { fetch, calls } = scriptedFetch(connectionRefused(), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    const res = await tocsin.events.create(PARAMS);
    assert.equal(res.data.id, "evt_1");
    assert.equal(calls.length, 2);
    assert.equal(tocsin.sleeps.length, 1);
  });

  test("connection errors that persist surface as ConnectionError", async () => {
    const { fetch, calls } = scriptedFetch(connectionRefused(), connectionRefused(), connectionRefused());
    const tocsin = new RecordingTocsin("key", { fetch });
    await assert.rejects(tocsin.events.create(PARAMS), ConnectionError);
    assert.equal(calls.length, 3);
  });

  test("timeouts are retried", async () => {
    const { fetch, calls } = scriptedFetch(() => new Promise(() => {}), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch, timeout: 10 });
    const res = await tocsin.events.create(PARAMS);
    assert.equal(res.data.id, "evt_1");
    assert.equal(calls.length, 2);
  });

  test("timeouts that persist surface as TimeoutError", async () => {
    const hang = () => new Promise(() => {});
    const { fetch, calls } = scriptedFetch(hang, hang);
    const tocsin = new RecordingTocsin("key", { fetch, timeout: 10, maxRetries: 1 });
    await assert.rejects(tocsin.events.create(PARAMS), TimeoutError);
    assert.equal(calls.length, 2);
  });

  test("GET, PATCH and DELETE are retried too, without an Idempotency-Key", async () => {
    const { fetch, calls } = scriptedFetch(
      fail(503, "down"),
      ok(EVENT, { status: 200 }),
      connectionRefused(),
      ok({ id: "dev_1", minPriority: "high" }, { status: 200 }),
      connectionRefused(),
      ok({ id: "dev_1", deleted: true }, { status: 200 }),
    );
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.events.get("evt_1");
    const updated = await tocsin.devices.update("dev_1", { minPriority: "high" });
    await tocsin.devices.delete("dev_1");
    assert.equal(calls.length, 6);
    assert.deepEqual(calls.map((call) => call.init.method), ["GET", "GET", "PATCH", "PATCH", "DELETE", "DELETE"]);
    // The retried PATCH sends the same changes again: applied twice, they leave the device as once.
    assert.deepEqual(calls[3].body, calls[2].body);
    assert.equal(updated.data.minPriority, "high");
    for (const call of calls) assert.equal(header(call, "Idempotency-Key"), undefined);
  });

  test("the default sleep really waits between attempts (no override)", async () => {
    // Uses the real timer once, with Retry-After 0 so the test stays quick.
    const { fetch, calls } = scriptedFetch(fail(429, "limited", { headers: { "Retry-After": "0" } }), ok(EVENT));
    const res = await new Tocsin("key", { fetch }).events.create(PARAMS);
    assert.equal(res.statusCode, 201);
    assert.equal(calls.length, 2);
  });
});

describe("idempotency key across retries", () => {
  test("a POST gets a generated UUID key, the same on every attempt", async () => {
    const { fetch, calls } = scriptedFetch(fail(500, "boom"), connectionRefused(), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.events.create(PARAMS);
    const keys = calls.map((call) => header(call, "Idempotency-Key"));
    assert.equal(keys.length, 3);
    assert.match(keys[0], UUID_RE);
    assert.deepEqual(keys, [keys[0], keys[0], keys[0]]);
  });

  test("each call gets its own generated key", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.events.create(PARAMS);
    await tocsin.events.create(PARAMS);
    assert.notEqual(header(calls[0], "Idempotency-Key"), header(calls[1], "Idempotency-Key"));
  });

  test("the caller's key is reused on every retry", async () => {
    const { fetch, calls } = scriptedFetch(fail(503, "down"), fail(429, "limited", { headers: { "Retry-After": "0" } }), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.events.create(PARAMS, { idempotencyKey: "order-42" });
    assert.deepEqual(
      calls.map((call) => header(call, "Idempotency-Key")),
      ["order-42", "order-42", "order-42"],
    );
  });

  test("a key given as a raw header is kept and counts for 409 retries", async () => {
    const { fetch, calls } = scriptedFetch(fail(409, "in progress", { headers: { "Retry-After": "0" } }), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.events.create(PARAMS, { headers: { "idempotency-key": "raw-1" } });
    assert.deepEqual(calls.map((call) => header(call, "Idempotency-Key")), ["raw-1", "raw-1"]);
    assert.equal(Object.keys(calls[0].headers).filter((name) => name.toLowerCase() === "idempotency-key").length, 1);
  });

  test("identify and devices.register get keys too", async () => {
    const identity = { user_id: "u1", properties: {}, aliases: [], createdAt: "x", updatedAt: "x" };
    const { fetch, calls } = scriptedFetch(fail(500, "boom"), ok(identity, { status: 200 }), fail(500, "boom"), ok({ id: "dev_1" }));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.identify({ user_id: "u1" });
    await tocsin.devices.register({ token: "ab12", environment: "sandbox" });
    const keys = calls.map((call) => header(call, "Idempotency-Key"));
    keys.forEach((key) => assert.match(key, UUID_RE));
    assert.equal(keys[0], keys[1]);
    assert.equal(keys[2], keys[3]);
    assert.notEqual(keys[0], keys[2]);
  });

  test("insights.set gets a key, and so does insights.increment: the PATCH that is not idempotent", async () => {
    const insight = { title: "t", value: 1, icon: null, createdAt: "x", updatedAt: "x" };
    const { fetch, calls } = scriptedFetch(fail(500, "boom"), ok(insight), connectionRefused(), ok(insight, { status: 200 }));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.insights.set("t", 1);
    await tocsin.insights.increment("t", 1);
    assert.deepEqual(calls.map((call) => call.init.method), ["POST", "POST", "PATCH", "PATCH"]);
    const keys = calls.map((call) => header(call, "Idempotency-Key"));
    keys.forEach((key) => assert.match(key, UUID_RE));
    assert.equal(keys[0], keys[1]);
    assert.equal(keys[2], keys[3], "a retried increment carries the same key, so the service adds once");
    assert.notEqual(keys[0], keys[2]);
  });

  test("insights.increment sends the caller's key, and none of its own without retries", async () => {
    const insight = { title: "t", value: 1, icon: null, createdAt: "x", updatedAt: "x" };
    const { fetch, calls } = scriptedFetch(ok(insight), ok(insight));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.insights.increment("t", 1, { idempotencyKey: "signup-42" });
    await tocsin.insights.increment("t", 1, { maxRetries: 0 });
    assert.equal(header(calls[0], "Idempotency-Key"), "signup-42");
    assert.equal(header(calls[1], "Idempotency-Key"), undefined);
  });

  test("the body is the same on every attempt", async () => {
    const { fetch, calls } = scriptedFetch(fail(500, "boom"), ok(EVENT));
    const tocsin = new RecordingTocsin("key", { fetch });
    await tocsin.events.create({ ...PARAMS, metadata: { amount: 10 } });
    assert.equal(calls[0].init.body, calls[1].init.body);
  });
});
