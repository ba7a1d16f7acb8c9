// Idempotency keys where crypto.randomUUID is missing (Node 18 without a
// flag, browsers on plain http).

import assert from "node:assert/strict";
import { webcrypto } from "node:crypto";
import { test } from "node:test";

import { generateIdempotencyKey } from "../../dist/esm/idempotency.js";
import { UUID_RE } from "./helpers.mjs";

test("uses crypto.randomUUID when there is one", () => {
  assert.equal(generateIdempotencyKey({ randomUUID: () => "from-random-uuid" }), "from-random-uuid");
  assert.match(generateIdempotencyKey(), UUID_RE);
});

test("falls back to getRandomValues and still builds a v4 UUID", () => {
  let used = 0;
  const crypto = {
    getRandomValues(bytes) {
      used++;
      // Node 18 has no global crypto without a flag; node:crypto's is the same API.
      return webcrypto.getRandomValues(bytes);
    },
  };
  const keys = new Set(Array.from({ length: 50 }, () => generateIdempotencyKey(crypto)));
  assert.equal(used, 50);
  assert.equal(keys.size, 50);
  for (const key of keys) assert.match(key, UUID_RE);
});

test("falls back to Math.random without Web Crypto", () => {
  const keys = new Set(Array.from({ length: 50 }, () => generateIdempotencyKey(undefined)));
  assert.equal(keys.size, 50);
  for (const key of keys) assert.match(key, UUID_RE);
});
