// Client options, request shape, response fields and lastRateLimit.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Tocsin, TocsinError } from "../../dist/esm/index.js";
import { EVENT, REQUEST_ID, RecordingTocsin, fail, header, ok, rateLimitHeaders, scriptedFetch } from "./helpers.mjs";

const PARAMS = { channelName: "payments", title: "Payment failed" };

describe("construction", () => {
  test("an API key is required", () => {
    assert.throws(() => new Tocsin(""), TocsinError);
    assert.throws(() => new Tocsin(undefined), /API key is required/);
  });

  test("defaults: local base URL, 30 s timeout, 2 retries", () => {
    const tocsin = new Tocsin("key");
    assert.equal(tocsin.baseUrl, "http://127.0.0.1:8080");
    assert.equal(tocsin.timeout, 30_000);
    assert.equal(tocsin.maxRetries, 2);
    assert.equal(tocsin.lastRateLimit, null);
  });

  test("invalid timeout and maxRetries are refused", () => {
    for (const timeout of [0, -1, Number.NaN, Infinity, "100"]) {
      assert.throws(() => new Tocsin("key", { timeout }), /timeout must be/, `timeout ${timeout}`);
    }
    for (const maxRetries of [-1, 1.5, Number.NaN]) {
      assert.throws(() => new Tocsin("key", { maxRetries }), /maxRetries must be/, `maxRetries ${maxRetries}`);
    }
  });

  test("the API key does not show up when the client is logged", () => {
    const tocsin = new Tocsin("secret-key-123");
    assert.doesNotMatch(JSON.stringify(tocsin), /secret-key-123/);
    assert.equal(Object.values(tocsin).includes("secret-key-123"), false);
  });
});

describe("requests", () => {
  test("the default base URL is used when none is given", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    await new Tocsin("key", { fetch }).events.create(PARAMS);
    assert.equal(calls[0].url, "http://127.0.0.1:8080/v1/events");
  });

  test("a custom base URL keeps its path prefix and loses trailing slashes", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    await new Tocsin("key", { fetch, baseUrl: "https://alerts.example.com/tocsin//" }).events.create(PARAMS);
    assert.equal(calls[0].url, "https://alerts.example.com/tocsin/v1/events");
  });

  test("sends the key as a bearer token, JSON content type and the body", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    await new Tocsin("tk_abc", { fetch }).events.create({ ...PARAMS, tags: ["eu"], notify: false });
    const [call] = calls;
    assert.equal(call.init.method, "POST");
    assert.equal(header(call, "Authorization"), "Bearer tk_abc");
    assert.equal(header(call, "Content-Type"), "application/json");
    assert.equal(header(call, "Accept"), "application/json");
    assert.deepEqual(call.body, { ...PARAMS, tags: ["eu"], notify: false });
  });

  test("a GET has no body and no content type", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT, { status: 200 }));
    await new Tocsin("key", { fetch }).events.get("evt_1");
    assert.equal(calls[0].init.body, undefined);
    assert.equal(header(calls[0], "Content-Type"), undefined);
  });

  test("the caller's idempotency key is sent as Idempotency-Key", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    await new Tocsin("key", { fetch }).events.create(PARAMS, { idempotencyKey: "order-42" });
    assert.equal(header(calls[0], "Idempotency-Key"), "order-42");
  });

  test("extra headers are sent and override the client's own whatever their case", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    await new Tocsin("key", { fetch }).events.create(PARAMS, {
      headers: { "X-Trace": "t-1", accept: "application/problem+json" },
    });
    assert.equal(header(calls[0], "X-Trace"), "t-1");
    assert.equal(header(calls[0], "Accept"), "application/problem+json");
    const acceptHeaders = Object.keys(calls[0].headers).filter((name) => name.toLowerCase() === "accept");
    assert.equal(acceptHeaders.length, 1);
  });

  test("a custom fetch replaces the global one for every call", async (t) => {
    const original = globalThis.fetch;
    let globalCalls = 0;
    globalThis.fetch = async () => {
      globalCalls++;
      throw new Error("global fetch must not be used");
    };
    t.after(() => {
      globalThis.fetch = original;
    });

    const { fetch, calls } = scriptedFetch(
      ok(EVENT),
      ok(EVENT, { status: 200 }),
      ok({ user_id: "u1", properties: {}, aliases: [], createdAt: "x", updatedAt: "x" }, { status: 200 }),
      ok({ devices: [] }, { status: 200 }),
    );
    const tocsin = new Tocsin("key", { fetch });
    await tocsin.events.create(PARAMS);
    await tocsin.events.get("evt_1");
    await tocsin.identify({ user_id: "u1" });
    await tocsin.devices.list();
    assert.equal(calls.length, 4);
    assert.equal(globalCalls, 0);
  });

  test("without a custom fetch the global fetch is used, looked up at call time", async (t) => {
    const original = globalThis.fetch;
    t.after(() => {
      globalThis.fetch = original;
    });
    const tocsin = new Tocsin("key");
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    globalThis.fetch = fetch; // installed after the client was built, like a late polyfill
    const res = await tocsin.events.create(PARAMS);
    assert.equal(calls.length, 1);
    assert.equal(res.data.id, "evt_1");
  });

  test("a runtime without fetch gets a clear error, not a retry loop", async (t) => {
    const original = globalThis.fetch;
    delete globalThis.fetch;
    t.after(() => {
      globalThis.fetch = original;
    });
    const tocsin = new RecordingTocsin("key");
    await assert.rejects(tocsin.events.create(PARAMS), (error) => {
      assert.ok(error instanceof TocsinError);
      assert.match(error.message, /No global fetch/);
      return true;
    });
    assert.deepEqual(tocsin.sleeps, []);
  });
});

describe("responses", () => {
  test("carry data, requestId, wasReplayed, rateLimit and statusCode", async () => {
    const reset = Math.floor(Date.now() / 1000) + 42;
    const { fetch } = scriptedFetch(ok(EVENT, { headers: rateLimitHeaders({ limit: 100, remaining: 57, reset }) }));
    const before = Date.now();
    const res = await new Tocsin("key", { fetch }).events.create(PARAMS);
    const after = Date.now();

    assert.deepEqual(res.data, EVENT);
    assert.equal(res.requestId, REQUEST_ID);
    assert.equal(res.wasReplayed, false);
    assert.equal(res.statusCode, 201);
    assert.equal(res.rateLimit.limit, 100);
    assert.equal(res.rateLimit.remaining, 57);
    assert.equal(res.rateLimit.reset, reset);
    // resetIn is measured when the response arrives.
    assert.ok(res.rateLimit.resetIn <= reset * 1000 - before, `resetIn ${res.rateLimit.resetIn}`);
    assert.ok(res.rateLimit.resetIn >= reset * 1000 - after, `resetIn ${res.rateLimit.resetIn}`);
    for (const value of Object.values(res.rateLimit)) assert.equal(typeof value, "number");
  });

  test("X-Idempotent-Replay: true sets wasReplayed", async () => {
    const { fetch } = scriptedFetch(ok(EVENT, { headers: { "X-Idempotent-Replay": "true" } }));
    const res = await new Tocsin("key", { fetch }).events.create(PARAMS, { idempotencyKey: "k" });
    assert.equal(res.wasReplayed, true);
  });

  test("rateLimit is null when the headers are missing", async () => {
    const response = new Response(JSON.stringify({ success: true, data: EVENT, requestId: REQUEST_ID }), { status: 201 });
    const { fetch } = scriptedFetch(response);
    const res = await new Tocsin("key", { fetch }).events.create(PARAMS);
    assert.equal(res.rateLimit, null);
  });

  test("requestId falls back to the X-Request-Id header", async () => {
    const response = new Response(JSON.stringify({ success: true, data: EVENT }), {
      status: 201,
      headers: { "X-Request-Id": "from-header" },
    });
    const { fetch } = scriptedFetch(response);
    const res = await new Tocsin("key", { fetch }).events.create(PARAMS);
    assert.equal(res.requestId, "from-header");
  });

  test("a 2xx that is not a success envelope is a TocsinError", async () => {
    const { fetch } = scriptedFetch(new Response("<html>hello</html>", { status: 200 }));
    await assert.rejects(new Tocsin("key", { fetch }).events.get("evt_1"), (error) => {
      assert.ok(error instanceof TocsinError);
      assert.match(error.message, /not a success envelope/);
      return true;
    });
  });
});

describe("lastRateLimit", () => {
  test("is null before the first response and follows the latest one", async () => {
    const { fetch } = scriptedFetch(
      ok(EVENT, { headers: rateLimitHeaders({ limit: 10, remaining: 9, reset: 2_000_000_000 }) }),
      ok(EVENT, { headers: rateLimitHeaders({ limit: 10, remaining: 8, reset: 2_000_000_000 }) }),
    );
    const tocsin = new Tocsin("key", { fetch });
    assert.equal(tocsin.lastRateLimit, null);
    const first = await tocsin.events.create(PARAMS);
    assert.deepEqual(tocsin.lastRateLimit, first.rateLimit);
    assert.equal(tocsin.lastRateLimit.remaining, 9);
    await tocsin.events.create(PARAMS);
    assert.equal(tocsin.lastRateLimit.remaining, 8);
  });

  test("is updated by error responses too", async () => {
    const { fetch } = scriptedFetch(
      fail(401, "invalid API key", { headers: rateLimitHeaders({ limit: 10, remaining: 3, reset: 2_000_000_000 }) }),
    );
    const tocsin = new Tocsin("key", { fetch });
    await assert.rejects(tocsin.events.create(PARAMS));
    assert.equal(tocsin.lastRateLimit.remaining, 3);
    assert.equal(tocsin.lastRateLimit.limit, 10);
  });

  test("is kept when a later response has no rate-limit headers", async () => {
    const bare = new Response(JSON.stringify({ success: true, data: EVENT, requestId: REQUEST_ID }), { status: 201 });
    const { fetch } = scriptedFetch(ok(EVENT, { headers: rateLimitHeaders({ remaining: 5 }) }), bare);
    const tocsin = new Tocsin("key", { fetch });
    await tocsin.events.create(PARAMS);
    await tocsin.events.create(PARAMS);
    assert.equal(tocsin.lastRateLimit.remaining, 5);
  });

  test("is updated by every attempt of a retried call", async () => {
    const { fetch } = scriptedFetch(
      fail(503, "store unavailable", { headers: rateLimitHeaders({ remaining: 7 }) }),
      fail(503, "store unavailable", { headers: rateLimitHeaders({ remaining: 6 }) }),
      fail(503, "store unavailable", { headers: rateLimitHeaders({ remaining: 5 }) }),
    );
    const tocsin = new RecordingTocsin("key", { fetch });
    await assert.rejects(tocsin.events.create(PARAMS));
    assert.equal(tocsin.lastRateLimit.remaining, 5);
  });
});

test("lastRateLimit cannot be overwritten by callers", () => {
  const tocsin = new Tocsin("key");
  assert.throws(() => {
    tocsin.lastRateLimit = { limit: 1, remaining: 1, reset: 1, resetIn: 1 };
  }, TypeError);
  assert.equal(tocsin.lastRateLimit, null);
});
