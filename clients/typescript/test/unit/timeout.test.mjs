// The timeout: it aborts the request, covers reading the body, and a per-call
// value overrides the client's. Timers here are tens of milliseconds; nothing
// asserts how fast anything ran.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { TimeoutError, Tocsin } from "../../dist/esm/index.js";
import { EVENT, delay, ok, scriptedFetch } from "./helpers.mjs";

const PARAMS = { channelName: "payments", title: "Payment failed" };

/** A fetch that settles only when its signal aborts, as real fetches do. */
function fetchUntilAborted(seen) {
  return (_url, init) => {
    seen.push(init.signal);
    return new Promise((_resolve, reject) => {
      init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
    });
  };
}

describe("timeout", () => {
  test("aborts the request through its signal and throws TimeoutError", async () => {
    const signals = [];
    const tocsin = new Tocsin("key", { fetch: fetchUntilAborted(signals), timeout: 20, maxRetries: 0 });
    await assert.rejects(tocsin.events.create(PARAMS), (error) => error instanceof TimeoutError && error.timeout === 20);
    assert.equal(signals.length, 1);
    assert.equal(signals[0].aborted, true);
  });

  test("still fires when a custom fetch ignores the signal", async () => {
    const fetch = () => new Promise(() => {});
    const tocsin = new Tocsin("key", { fetch, timeout: 20, maxRetries: 0 });
    await assert.rejects(tocsin.events.create(PARAMS), TimeoutError);
  });

  test("covers reading the body, not only the headers", async () => {
    const slowBody = { status: 201, headers: new Headers(), text: () => new Promise(() => {}) };
    const { fetch } = scriptedFetch(slowBody);
    const tocsin = new Tocsin("key", { fetch, timeout: 20, maxRetries: 0 });
    await assert.rejects(tocsin.events.create(PARAMS), TimeoutError);
  });

  test("a per-call timeout shorter than the client's wins", async () => {
    const signals = [];
    const tocsin = new Tocsin("key", { fetch: fetchUntilAborted(signals), timeout: 60_000, maxRetries: 0 });
    await assert.rejects(tocsin.events.create(PARAMS, { timeout: 20 }), (error) => error.timeout === 20);
  });

  test("a per-call timeout longer than the client's wins", async () => {
    // The response comes after 60 ms: too late for the client's 10 ms, in time for the call's 10 s.
    const { fetch } = scriptedFetch(async () => {
      await delay(60);
      return ok(EVENT);
    });
    const tocsin = new Tocsin("key", { fetch, timeout: 10, maxRetries: 0 });
    const res = await tocsin.events.create(PARAMS, { timeout: 10_000 });
    assert.equal(res.data.id, "evt_1");
  });

  test("the client's timeout applies when the call sets none", async () => {
    const { fetch } = scriptedFetch(async () => {
      await delay(60);
      return ok(EVENT);
    });
    const tocsin = new Tocsin("key", { fetch, timeout: 10, maxRetries: 0 });
    await assert.rejects(tocsin.events.create(PARAMS), (error) => error instanceof TimeoutError && error.timeout === 10);
  });

  test("an invalid per-call timeout is refused before any request", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    const tocsin = new Tocsin("key", { fetch });
    await assert.rejects(tocsin.events.create(PARAMS, { timeout: 0 }), /timeout must be/);
    assert.equal(calls.length, 0);
  });

  test("a response in time does not leave the signal aborted later", async () => {
    const signals = [];
    const { fetch } = scriptedFetch((_url, init) => {
      signals.push(init.signal);
      return ok(EVENT);
    });
    await new Tocsin("key", { fetch, timeout: 20 }).events.create(PARAMS);
    await delay(40);
    assert.equal(signals[0].aborted, false);
  });
});
