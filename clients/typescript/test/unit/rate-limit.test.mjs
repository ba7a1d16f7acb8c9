// Reading X-RateLimit-* and Retry-After.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { parseRateLimit, parseRetryAfter } from "../../dist/esm/rate-limit.js";

const NOW = 1_700_000_000_000; // ms

describe("parseRateLimit", () => {
  test("reads all three headers as numbers and computes resetIn from now", () => {
    const headers = new Headers({ "X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "42", "X-RateLimit-Reset": "1700000030" });
    assert.deepEqual(parseRateLimit(headers, NOW), { limit: 100, remaining: 42, reset: 1_700_000_030, resetIn: 30_000 });
  });

  test("resetIn is never negative", () => {
    const headers = new Headers({ "X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1699999990" });
    assert.equal(parseRateLimit(headers, NOW).resetIn, 0);
  });

  test("is null unless every header is present and numeric", () => {
    const full = { "X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000030" };
    for (const name of Object.keys(full)) {
      const missing = { ...full };
      delete missing[name];
      assert.equal(parseRateLimit(new Headers(missing), NOW), null, `without ${name}`);
      assert.equal(parseRateLimit(new Headers({ ...full, [name]: "soon" }), NOW), null, `${name} not a number`);
      assert.equal(parseRateLimit(new Headers({ ...full, [name]: "" }), NOW), null, `${name} empty`);
    }
  });
});

describe("parseRetryAfter", () => {
  test("reads delta-seconds", () => {
    assert.equal(parseRetryAfter(new Headers({ "Retry-After": "17" }), NOW), 17);
    assert.equal(parseRetryAfter(new Headers({ "Retry-After": "0" }), NOW), 0);
  });

  test("reads an HTTP date as seconds from now", () => {
    const date = new Date(NOW + 5_000).toUTCString();
    assert.equal(parseRetryAfter(new Headers({ "Retry-After": date }), NOW), 5);
    const past = new Date(NOW - 5_000).toUTCString();
    assert.equal(parseRetryAfter(new Headers({ "Retry-After": past }), NOW), 0);
  });

  test("is undefined when absent or unreadable", () => {
    assert.equal(parseRetryAfter(new Headers(), NOW), undefined);
    assert.equal(parseRetryAfter(new Headers({ "Retry-After": "later" }), NOW), undefined);
  });
});
