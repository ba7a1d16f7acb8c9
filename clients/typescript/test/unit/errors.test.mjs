// Every error class: which response or failure produces it, what it carries,
// that `instanceof` works in both the ESM and the CommonJS build, and that
// isTocsinError recognises the errors of either build.

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, test } from "node:test";

import * as esm from "../../dist/esm/index.js";
import { fail, rateLimitHeaders, RecordingTocsin, REQUEST_ID, scriptedFetch } from "./helpers.mjs";

const cjs = createRequire(import.meta.url)("../../dist/cjs/index.js");
const {
  ApiError,
  AuthenticationError,
  ConflictError,
  ConnectionError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  TimeoutError,
  TocsinError,
  Tocsin,
  ValidationError,
  isTocsinError,
} = esm;

const PARAMS = { channelName: "payments", title: "Payment failed" };

/** Runs one call against a scripted fetch with retries off and returns what it threw. */
async function errorFor(response, build = esm) {
  const { fetch } = scriptedFetch(response);
  const tocsin = new build.Tocsin("key", { fetch, maxRetries: 0 });
  try {
    await tocsin.events.create(PARAMS);
  } catch (error) {
    return error;
  }
  assert.fail("the call should have failed");
}

describe("ApiError", () => {
  test("a 401 is an AuthenticationError, an ApiError with status, server message, requestId and rate limit", async () => {
    const reset = 2_000_000_000;
    const error = await errorFor(fail(401, "invalid API key", { headers: rateLimitHeaders({ limit: 5, remaining: 4, reset }) }));
    assert.equal(error.constructor, AuthenticationError);
    assert.ok(error instanceof ApiError);
    assert.ok(error instanceof TocsinError);
    assert.ok(error instanceof Error);
    assert.equal(error instanceof ValidationError, false);
    assert.equal(error instanceof RateLimitError, false);
    assert.equal(error.name, "AuthenticationError");
    assert.equal(error.statusCode, 401);
    assert.equal(error.message, "invalid API key");
    assert.equal(error.requestId, REQUEST_ID);
    assert.equal(error.rateLimit.limit, 5);
    assert.equal(error.rateLimit.remaining, 4);
    assert.equal(error.rateLimit.reset, reset);
    assert.deepEqual(error.body, { success: false, error: "invalid API key", requestId: REQUEST_ID });
  });

  test("a 404 is a NotFoundError, an ApiError with statusCode 404", async () => {
    const error = await errorFor(fail(404, "user not found"));
    assert.equal(error.constructor, NotFoundError);
    assert.ok(error instanceof ApiError);
    assert.equal(error.name, "NotFoundError");
    assert.equal(error.statusCode, 404);
    assert.equal(error.message, "user not found");
    assert.equal(error.requestId, REQUEST_ID);
  });

  for (const [status, message, className] of [
    [403, "this API key lacks the events:read scope", "PermissionDeniedError"],
    [409, "a request with this idempotency key is in flight", "ConflictError"],
    [422, "idempotency key reused with a different body", "ConflictError"],
    [500, "internal server error", "InternalServerError"],
    [502, "bad gateway", "InternalServerError"],
    [503, "store unavailable", "InternalServerError"],
    [599, "network connect timeout", "InternalServerError"],
  ]) {
    test(`a ${status} is a ${className}, an ApiError with statusCode ${status}`, async () => {
      const error = await errorFor(fail(status, message));
      assert.equal(error.constructor, esm[className]);
      assert.equal(error.name, className);
      assert.ok(error instanceof ApiError);
      assert.equal(error.statusCode, status);
      assert.equal(error.message, message);
      assert.equal(error.requestId, REQUEST_ID);
    });
  }

  for (const [status, message] of [
    [405, "method not allowed"],
    [413, "body too large"],
    [415, "unsupported content type"],
    [418, "a status the client has no class for"],
  ]) {
    test(`a ${status} is a plain ApiError with statusCode ${status}`, async () => {
      const error = await errorFor(fail(status, message));
      assert.equal(error.constructor, ApiError);
      assert.equal(error.name, "ApiError");
      assert.equal(error.statusCode, status);
      assert.equal(error.message, message);
    });
  }

  test("rateLimit is undefined when the response had no rate-limit headers", async () => {
    const error = await errorFor(new Response(JSON.stringify({ success: false, error: "boom", requestId: "r" }), { status: 500 }));
    assert.equal(error.rateLimit, undefined);
    assert.equal(error.requestId, "r");
  });

  test("a non-JSON error body keeps the status readable and the text in body", async () => {
    const error = await errorFor(new Response("<html>Bad Gateway</html>", { status: 502, headers: { "X-Request-Id": "proxy-1" } }));
    assert.ok(error instanceof ApiError);
    assert.equal(error.statusCode, 502);
    assert.equal(error.message, "HTTP 502");
    assert.equal(error.body, "<html>Bad Gateway</html>");
    assert.equal(error.requestId, "proxy-1");
  });
});

describe("ValidationError", () => {
  test("a 400 carries every detail with its path", async () => {
    const details = [
      { path: ["channelName"], message: "missing required field" },
      { path: ["tags", "1"], message: "expected a string" },
    ];
    const error = await errorFor(fail(400, "validation failed", { details }));
    assert.ok(error instanceof ValidationError);
    assert.ok(error instanceof ApiError);
    assert.ok(error instanceof TocsinError);
    assert.equal(error.name, "ValidationError");
    assert.equal(error.statusCode, 400);
    assert.equal(error.message, "validation failed");
    assert.equal(error.requestId, REQUEST_ID);
    assert.deepEqual(error.details, details);
  });

  test("a 400 without details (malformed JSON) has an empty list", async () => {
    const error = await errorFor(fail(400, "malformed JSON body"));
    assert.ok(error instanceof ValidationError);
    assert.deepEqual(error.details, []);
  });

  test("path elements become strings and malformed entries are dropped", async () => {
    const details = [{ path: ["tags", 2], message: "bad" }, { message: "no path" }, "junk", { path: ["title"] }];
    const error = await errorFor(fail(400, "validation failed", { details }));
    assert.deepEqual(error.details, [
      { path: ["tags", "2"], message: "bad" },
      { path: ["title"], message: "" },
    ]);
  });
});

describe("RateLimitError", () => {
  test("a 429 carries the rate limit and Retry-After in seconds", async () => {
    const reset = Math.floor(Date.now() / 1000) + 20;
    const error = await errorFor(
      fail(429, "rate limit exceeded", {
        headers: { ...rateLimitHeaders({ limit: 3, remaining: 0, reset }), "Retry-After": "20" },
      }),
    );
    assert.ok(error instanceof RateLimitError);
    assert.ok(error instanceof ApiError);
    assert.equal(error.name, "RateLimitError");
    assert.equal(error.statusCode, 429);
    assert.equal(error.message, "rate limit exceeded");
    assert.equal(error.retryAfter, 20);
    assert.equal(error.rateLimit.limit, 3);
    assert.equal(error.rateLimit.remaining, 0);
    assert.equal(error.rateLimit.reset, reset);
  });

  test("retryAfter is undefined when the server did not send it", async () => {
    const error = await errorFor(fail(429, "rate limit exceeded"));
    assert.equal(error.retryAfter, undefined);
    assert.equal(typeof error.rateLimit.remaining, "number");
  });

  test("rateLimit is still set when the headers were stripped", async () => {
    const response = new Response(JSON.stringify({ success: false, error: "slow down", requestId: "r" }), {
      status: 429,
      headers: { "Retry-After": "7" },
    });
    const before = Math.floor(Date.now() / 1000);
    const error = await errorFor(response);
    assert.ok(error instanceof RateLimitError);
    assert.equal(error.rateLimit.remaining, 0);
    assert.equal(error.rateLimit.resetIn, 7000);
    assert.ok(error.rateLimit.reset >= before + 7 && error.rateLimit.reset <= before + 9, `reset ${error.rateLimit.reset}`);
  });
});

describe("TimeoutError and ConnectionError", () => {
  test("a fetch that fails to connect becomes a ConnectionError with the cause and the URL it tried", async () => {
    const cause = new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED 127.0.0.1:1") });
    const error = await errorFor(cause);
    assert.ok(error instanceof ConnectionError);
    assert.ok(error instanceof TocsinError);
    assert.equal(error instanceof ApiError, false);
    assert.equal(error.name, "ConnectionError");
    assert.equal(error.cause, cause);
    assert.equal(error.url, "http://127.0.0.1:8080/v1/events");
    assert.match(error.message, /127\.0\.0\.1:8080\/v1\/events/);
    assert.match(error.message, /ECONNREFUSED/);
  });

  test("a body that breaks off while being read is a ConnectionError", async () => {
    const broken = {
      status: 201,
      headers: new Headers(),
      text: () => Promise.reject(new TypeError("terminated")),
    };
    const error = await errorFor(broken);
    assert.ok(error instanceof ConnectionError);
    assert.match(error.message, /terminated/);
    assert.equal(error.url, "http://127.0.0.1:8080/v1/events");
  });

  test("a request with no answer in time is a TimeoutError with the timeout", async () => {
    const fetch = () => new Promise(() => {});
    const tocsin = new Tocsin("key", { fetch, timeout: 15, maxRetries: 0 });
    await assert.rejects(tocsin.events.create(PARAMS), (error) => {
      assert.ok(error instanceof TimeoutError);
      assert.ok(error instanceof TocsinError);
      assert.equal(error.name, "TimeoutError");
      assert.equal(error.timeout, 15);
      assert.equal(error.message, "Request timed out after 15 ms");
      return true;
    });
  });
});

describe("prototype chains in both builds", () => {
  const chains = {
    ApiError: ["ApiError", "TocsinError"],
    ValidationError: ["ValidationError", "ApiError", "TocsinError"],
    AuthenticationError: ["AuthenticationError", "ApiError", "TocsinError"],
    PermissionDeniedError: ["PermissionDeniedError", "ApiError", "TocsinError"],
    NotFoundError: ["NotFoundError", "ApiError", "TocsinError"],
    ConflictError: ["ConflictError", "ApiError", "TocsinError"],
    RateLimitError: ["RateLimitError", "ApiError", "TocsinError"],
    InternalServerError: ["InternalServerError", "ApiError", "TocsinError"],
    TimeoutError: ["TimeoutError", "TocsinError"],
    ConnectionError: ["ConnectionError", "TocsinError"],
    AbortError: ["AbortError", "TocsinError"],
  };
  const samples = (build) => ({
    ApiError: new build.ApiError({ statusCode: 418, message: "m" }),
    ValidationError: new build.ValidationError({ statusCode: 400, message: "m", details: [] }),
    AuthenticationError: new build.AuthenticationError({ statusCode: 401, message: "m" }),
    PermissionDeniedError: new build.PermissionDeniedError({ statusCode: 403, message: "m" }),
    NotFoundError: new build.NotFoundError({ statusCode: 404, message: "m" }),
    ConflictError: new build.ConflictError({ statusCode: 409, message: "m" }),
    InternalServerError: new build.InternalServerError({ statusCode: 500, message: "m" }),
    RateLimitError: new build.RateLimitError({
      statusCode: 429,
      message: "m",
      rateLimit: { limit: 1, remaining: 0, reset: 1, resetIn: 0 },
    }),
    TimeoutError: new build.TimeoutError(5),
    ConnectionError: new build.ConnectionError("m"),
    AbortError: new build.AbortError(),
  });

  for (const [label, build] of [["ESM", esm], ["CommonJS", cjs]]) {
    test(`${label}: instanceof, name and stack match the class hierarchy`, () => {
      const all = ["TocsinError", ...Object.keys(chains)];
      for (const [className, error] of Object.entries(samples(build))) {
        assert.equal(error.name, className);
        assert.ok(error instanceof Error);
        assert.match(error.stack, new RegExp(`^${className}: (m|Request timed out|The request was aborted)`));
        for (const other of all) {
          assert.equal(error instanceof build[other], chains[className].includes(other), `${className} instanceof ${other}`);
        }
      }
    });
  }

  test("CommonJS: a failed call throws the CommonJS classes", async () => {
    const error = await errorFor(fail(400, "validation failed", { details: [] }), cjs);
    assert.ok(error instanceof cjs.ValidationError);
    assert.ok(error instanceof cjs.TocsinError);
  });
});

describe("isTocsinError", () => {
  test("is true for every error class of both builds, whichever build checks", () => {
    for (const thrower of [esm, cjs]) {
      const errors = [
        new thrower.TocsinError("m"),
        new thrower.ApiError({ statusCode: 418, message: "m" }),
        new thrower.ValidationError({ statusCode: 400, message: "m", details: [] }),
        new thrower.AuthenticationError({ statusCode: 401, message: "m" }),
        new thrower.PermissionDeniedError({ statusCode: 403, message: "m" }),
        new thrower.NotFoundError({ statusCode: 404, message: "m" }),
        new thrower.ConflictError({ statusCode: 422, message: "m" }),
        new thrower.RateLimitError({ statusCode: 429, message: "m", rateLimit: { limit: 1, remaining: 0, reset: 1, resetIn: 0 } }),
        new thrower.InternalServerError({ statusCode: 503, message: "m" }),
        new thrower.TimeoutError(5),
        new thrower.ConnectionError("m"),
        new thrower.AbortError(),
      ];
      for (const checker of [esm, cjs]) {
        for (const error of errors) assert.equal(checker.isTocsinError(error), true, `${error.name}`);
      }
    }
  });

  test("recognises what a call of the other build threw, where instanceof does not", async () => {
    const fromCjs = await errorFor(fail(403, "this API key lacks the events:read scope"), cjs);
    assert.equal(fromCjs instanceof PermissionDeniedError, false, "instanceof knows only its own build");
    assert.equal(isTocsinError(fromCjs), true);
    assert.equal(fromCjs.name, "PermissionDeniedError");
    const fromEsm = await errorFor(fail(401, "invalid API key"));
    assert.equal(cjs.isTocsinError(fromEsm), true);
  });

  test("is false for other errors and values, even one that borrows a Tocsin error's name", () => {
    const lookalike = new Error("m");
    lookalike.name = "ApiError";
    for (const value of [new Error("m"), new TypeError("m"), lookalike, { name: "TocsinError" }, "TocsinError", null, undefined, 0, ApiError]) {
      assert.equal(isTocsinError(value), false, String(value));
      assert.equal(cjs.isTocsinError(value), false, String(value));
    }
  });

  test("the brand is not an own property: it does not show up in logs or JSON", () => {
    const error = new ApiError({ statusCode: 418, message: "m" });
    assert.deepEqual(Object.getOwnPropertySymbols(error), []);
    assert.equal(JSON.stringify(error).includes("tocsin"), false);
  });
});

describe("ConflictError and InternalServerError after retries", () => {
  test("a 409 for a key still in flight that outlasts the retries is a ConflictError", async () => {
    const inFlight = () => fail(409, "a request with this idempotency key is in flight", { headers: { "Retry-After": "1" } });
    const { fetch, calls } = scriptedFetch(inFlight(), inFlight(), inFlight());
    const tocsin = new RecordingTocsin("key", { fetch });
    await assert.rejects(tocsin.events.create(PARAMS, { idempotencyKey: "k" }), ConflictError);
    assert.equal(calls.length, 3);
  });

  test("a 5xx that outlasts the retries is an InternalServerError", async () => {
    const { fetch, calls } = scriptedFetch(fail(503, "store unavailable"), fail(502, "bad gateway"), fail(500, "boom"));
    const tocsin = new RecordingTocsin("key", { fetch });
    await assert.rejects(tocsin.events.get("evt_1"), (error) => error instanceof InternalServerError && error.statusCode === 500);
    assert.equal(calls.length, 3);
  });

  test("401, 403 and 422 are not retried", async () => {
    for (const [status, ErrorClass] of [[401, AuthenticationError], [403, PermissionDeniedError], [422, ConflictError]]) {
      const { fetch, calls } = scriptedFetch(fail(status, "no"), fail(status, "no"));
      const tocsin = new RecordingTocsin("key", { fetch });
      await assert.rejects(tocsin.events.create(PARAMS), ErrorClass);
      assert.equal(calls.length, 1, `${status}`);
    }
  });
});
