// Test doubles for the unit tests: a scripted fetch and a client that records
// its backoff sleeps instead of waiting.

import { Tocsin } from "../../dist/esm/index.js";

// The tests set the environment they need: a TOCSIN_API_KEY or
// TOCSIN_BASE_URL in the developer's shell must not change what they see.
delete process.env.TOCSIN_API_KEY;
delete process.env.TOCSIN_BASE_URL;

export { withEnv } from "../env.mjs";

export const REQUEST_ID = "0b9f4a52-7c1e-4a4e-9d1a-3f3c2a1b0c9d";
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Rate-limit headers as the service sends them, with a reset 30 s ahead. */
export function rateLimitHeaders({ limit = 100, remaining = 99, reset = Math.floor(Date.now() / 1000) + 30 } = {}) {
  return {
    "X-RateLimit-Limit": String(limit),
    "X-RateLimit-Remaining": String(remaining),
    "X-RateLimit-Reset": String(reset),
  };
}

/** A real `Response` with a JSON body and the headers every Tocsin response has. */
export function jsonResponse(status, body, headers = {}) {
  return new Response(JSON.stringify(body), {
    status,
    headers: {
      "Content-Type": "application/json",
      "X-Request-Id": REQUEST_ID,
      ...rateLimitHeaders(),
      ...headers,
    },
  });
}

export function ok(data, { status = 201, headers = {} } = {}) {
  return jsonResponse(status, { success: true, data, requestId: REQUEST_ID }, headers);
}

export function fail(status, error, { details, headers = {} } = {}) {
  const body = { success: false, error, requestId: REQUEST_ID };
  if (details) body.details = details;
  return jsonResponse(status, body, headers);
}

/**
 * A fetch that answers from a script, one entry per call: a Response, an
 * Error to reject with, or a function `(url, init) => Response | Promise`.
 * Records every call. Fails loudly if called more often than scripted.
 */
export function scriptedFetch(...script) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, init, headers: { ...init.headers }, body: init.body === undefined ? undefined : JSON.parse(init.body) });
    if (calls.length > script.length) throw new Error(`unexpected call #${calls.length} to ${init.method} ${url}`);
    const step = script[calls.length - 1];
    if (step instanceof Error) throw step;
    return typeof step === "function" ? step(url, init) : step;
  };
  return { fetch, calls };
}

/** Header lookup that ignores case, as HTTP does. */
export function header(call, name) {
  const entry = Object.entries(call.headers).find(([key]) => key.toLowerCase() === name.toLowerCase());
  return entry?.[1];
}

/** A client whose backoff sleeps are recorded and skipped. */
export class RecordingTocsin extends Tocsin {
  sleeps = [];

  sleep(ms) {
    this.sleeps.push(ms);
    return Promise.resolve();
  }
}

export const EVENT = Object.freeze({
  id: "evt_1",
  channelName: "payments",
  title: "Payment failed",
  description: null,
  icon: null,
  tags: [],
  metadata: {},
  userId: null,
  notify: true,
  source: null,
  priority: "normal",
  createdAt: "2025-01-01T00:00:00Z",
  notification: Object.freeze({ state: "queued" }),
});

/** Resolves after `ms` real milliseconds (only for the timeout tests). */
export const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
