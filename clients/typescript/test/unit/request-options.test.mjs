// The options every method takes, checked on every method: the client's
// identification headers, defaultHeaders and per-call headers, a per-call
// timeout, maxRetries and signal. Timers here are tens of milliseconds;
// nothing asserts how fast anything ran.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

import { AbortError, CLIENT_ID, TimeoutError, Tocsin, TocsinError, VERSION, isTocsinError } from "../../dist/esm/index.js";
import { EVENT, RecordingTocsin, fail, header, ok, rateLimitHeaders, scriptedFetch } from "./helpers.mjs";

const PARAMS = { channelName: "payments", title: "Payment failed" };
const PACKAGE_VERSION = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version;

const sse = () =>
  new Response(`id: e1\nevent: event\ndata: ${JSON.stringify(EVENT)}\n\n`, {
    status: 200,
    headers: { "Content-Type": "text/event-stream", ...rateLimitHeaders() },
  });

/** Reads a stream until its first event (then leaves) or its end. */
async function firstEvent(stream) {
  for await (const event of stream) return event;
  return undefined;
}

/**
 * Every method, as `call(tocsin, options)`, with a response it accepts.
 * A stream's call resolves once it has its first event or has ended.
 */
const METHODS = {
  "events.create": { call: (t, o) => t.events.create(PARAMS, o), response: () => ok(EVENT) },
  "events.get": { call: (t, o) => t.events.get("evt_1", o), response: () => ok(EVENT, { status: 200 }) },
  "events.list": { call: (t, o) => t.events.list({ channel: "payments" }, o), response: () => ok({ items: [EVENT], nextCursor: null }, { status: 200 }) },
  "events.stream": { stream: true, call: (t, o) => firstEvent(t.events.stream({}, o)), response: sse },
  "devices.register": { call: (t, o) => t.devices.register({ token: "ab12", environment: "sandbox" }, o), response: () => ok({ id: "d1" }) },
  "devices.list": { call: (t, o) => t.devices.list(o), response: () => ok({ devices: [] }, { status: 200 }) },
  "devices.update": { call: (t, o) => t.devices.update("d1", { minPriority: "high" }, o), response: () => ok({ id: "d1" }, { status: 200 }) },
  "devices.delete": { call: (t, o) => t.devices.delete("d1", o), response: () => ok({ id: "d1", deleted: true }, { status: 200 }) },
  "channels.list": { call: (t, o) => t.channels.list(o), response: () => ok({ items: [] }, { status: 200 }) },
  "users.get": { call: (t, o) => t.users.get("user_7", o), response: () => ok({ user_id: "user_7" }, { status: 200 }) },
  "stats.events": { call: (t, o) => t.stats.events({}, o), response: () => ok({ buckets: [] }, { status: 200 }) },
  identify: { call: (t, o) => t.identify({ user_id: "user_7" }, o), response: () => ok({ user_id: "user_7" }, { status: 200 }) },
  request: { call: (t, o) => t.request({ method: "GET", path: "/v1/healthz" }, o), response: () => ok({}, { status: 200 }) },
};

/** A fetch that settles only when its signal aborts, as real fetches do; records each call's signal. */
function fetchUntilAborted() {
  const signals = [];
  const fetch = (_url, init) => {
    signals.push(init.signal);
    return new Promise((_resolve, reject) => {
      init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
    });
  };
  return { fetch, signals };
}

/** A client whose waits between attempts last until the call's signal aborts. */
class StuckSleepTocsin extends Tocsin {
  sleeps = 0;

  sleep() {
    this.sleeps++;
    return new Promise(() => {});
  }
}

describe("identification", () => {
  test("VERSION is package.json's version and CLIENT_ID is tocsin-js/VERSION", () => {
    assert.equal(VERSION, PACKAGE_VERSION, "src/version.ts must say package.json's version");
    assert.equal(CLIENT_ID, `tocsin-js/${PACKAGE_VERSION}`);
  });

  for (const [name, method] of Object.entries(METHODS)) {
    test(`${name} sends User-Agent and X-Tocsin-Client: tocsin-js/<version>`, async () => {
      const { fetch, calls } = scriptedFetch(method.response());
      await method.call(new Tocsin("key", { fetch }), {});
      assert.equal(header(calls[0], "User-Agent"), `tocsin-js/${PACKAGE_VERSION}`);
      assert.equal(header(calls[0], "X-Tocsin-Client"), `tocsin-js/${PACKAGE_VERSION}`);
    });
  }
});

describe("defaultHeaders and per-call headers", () => {
  for (const [name, method] of Object.entries(METHODS)) {
    test(`${name}: defaultHeaders over the client's own, the call's over both; null removes one`, async () => {
      const { fetch, calls } = scriptedFetch(method.response(), method.response());
      const tocsin = new Tocsin("key", {
        fetch,
        defaultHeaders: { "X-Team": "payments", "X-Env": "staging", "x-tocsin-client": "my-wrapper/2.0", "User-Agent": null },
      });
      await method.call(tocsin, {});
      await method.call(tocsin, { headers: { "x-team": "billing", "X-Env": null, "X-Trace": "t-1" } });

      const [first, second] = calls;
      assert.equal(header(first, "X-Team"), "payments");
      assert.equal(header(first, "X-Env"), "staging");
      assert.equal(header(first, "X-Tocsin-Client"), "my-wrapper/2.0");
      assert.equal(Object.keys(first.headers).filter((key) => key.toLowerCase() === "x-tocsin-client").length, 1);
      assert.equal(header(first, "User-Agent"), undefined);
      assert.equal(header(first, "Authorization"), "Bearer key", "the client's own headers stay");

      assert.equal(header(second, "X-Team"), "billing");
      assert.equal(header(second, "X-Env"), undefined);
      assert.equal(header(second, "X-Trace"), "t-1");
      assert.equal(header(second, "X-Tocsin-Client"), "my-wrapper/2.0");
    });
  }

  test("a call's headers apply to that call only", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT), ok(EVENT));
    const tocsin = new Tocsin("key", { fetch, defaultHeaders: { "X-Team": "payments" } });
    await tocsin.events.create(PARAMS, { headers: { "X-Team": "billing" } });
    await tocsin.events.create(PARAMS);
    assert.equal(header(calls[1], "X-Team"), "payments");
  });

  test("defaultHeaders are copied: changing the object later changes nothing", async () => {
    const defaults = { "X-Team": "payments" };
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    const tocsin = new Tocsin("key", { fetch, defaultHeaders: defaults });
    defaults["X-Team"] = "changed";
    await tocsin.events.create(PARAMS);
    assert.equal(header(calls[0], "X-Team"), "payments");
  });

  test("a header value that is not a string or null is refused before anything is sent", async () => {
    assert.throws(() => new Tocsin("key", { defaultHeaders: { "X-Count": 5 } }), /defaultHeaders "X-Count" must be a string/);
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    await assert.rejects(new Tocsin("key", { fetch }).events.create(PARAMS, { headers: { "X-Count": 5 } }), TocsinError);
    assert.equal(calls.length, 0);
  });
});

describe("per-call timeout", () => {
  for (const [name, method] of Object.entries(METHODS)) {
    test(`${name} times out after the call's timeout, not the client's`, async () => {
      const { fetch, signals } = fetchUntilAborted();
      const tocsin = new Tocsin("key", { fetch, timeout: 60_000, maxRetries: 0 });
      await assert.rejects(method.call(tocsin, { timeout: 20 }), (error) => error instanceof TimeoutError && error.timeout === 20);
      assert.equal(signals.length, 1);
      assert.equal(signals[0].aborted, true);
    });
  }
});

describe("per-call maxRetries", () => {
  for (const [name, method] of Object.entries(METHODS)) {
    test(`${name} retries as often as the call says, not the client`, async () => {
      const { fetch, calls } = scriptedFetch(fail(503, "down"), fail(503, "down"), fail(503, "down"), fail(503, "down"));
      const tocsin = new RecordingTocsin("key", { fetch, maxRetries: 3 });
      await assert.rejects(method.call(tocsin, { maxRetries: 1 }), (error) => error.statusCode === 503);
      assert.equal(calls.length, 2);
    });
  }

  test("maxRetries: 0 on a POST sends no generated Idempotency-Key", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    await new Tocsin("key", { fetch }).events.create(PARAMS, { maxRetries: 0 });
    assert.equal(header(calls[0], "Idempotency-Key"), undefined);
  });

  test("an invalid per-call maxRetries is refused before anything is sent", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    await assert.rejects(new Tocsin("key", { fetch }).events.create(PARAMS, { maxRetries: -1 }), /maxRetries must be/);
    assert.equal(calls.length, 0);
  });
});

describe("per-call signal", () => {
  for (const [name, method] of Object.entries(METHODS)) {
    const outcome = method.stream ? "ends the stream" : "rejects with AbortError";

    test(`${name}: an aborted signal sends nothing and ${outcome}`, async () => {
      const { fetch, calls } = scriptedFetch();
      const tocsin = new Tocsin("key", { fetch });
      const signal = AbortSignal.abort();
      if (method.stream) assert.equal(await method.call(tocsin, { signal }), undefined);
      else await assert.rejects(method.call(tocsin, { signal }), AbortError);
      assert.equal(calls.length, 0);
    });

    test(`${name}: aborting during the request aborts it and ${outcome}, without a retry`, async () => {
      const { fetch, signals } = fetchUntilAborted();
      const tocsin = new RecordingTocsin("key", { fetch });
      const controller = new AbortController();
      const call = method.call(tocsin, { signal: controller.signal });
      await new Promise((resolve) => setTimeout(resolve, 10));
      controller.abort(new Error("user left"));
      if (method.stream) {
        assert.equal(await call, undefined);
      } else {
        await assert.rejects(call, (error) => {
          assert.ok(error instanceof AbortError);
          assert.equal(error.cause.message, "user left");
          return true;
        });
      }
      assert.equal(signals.length, 1);
      assert.equal(signals[0].aborted, true);
      assert.deepEqual(tocsin.sleeps, []);
    });

    test(`${name}: aborting while waiting to retry ${outcome} at once`, async () => {
      const { fetch, calls } = scriptedFetch(fail(503, "down"), fail(503, "down"));
      const tocsin = new StuckSleepTocsin("key", { fetch });
      const controller = new AbortController();
      const call = method.call(tocsin, { signal: controller.signal });
      while (tocsin.sleeps === 0) await new Promise((resolve) => setTimeout(resolve, 1));
      controller.abort();
      if (method.stream) assert.equal(await call, undefined);
      else await assert.rejects(call, AbortError);
      assert.equal(calls.length, 1);
    });
  }

  test("a fetch that ignores its signal cannot keep an aborted call waiting", async () => {
    const tocsin = new Tocsin("key", { fetch: () => new Promise(() => {}) });
    const controller = new AbortController();
    const call = tocsin.events.create(PARAMS, { signal: controller.signal });
    controller.abort();
    await assert.rejects(call, AbortError);
  });

  test("the default wait between attempts stops at an abort: no further attempt", async () => {
    const { fetch, calls } = scriptedFetch(fail(503, "down"), ok(EVENT));
    const tocsin = new Tocsin("key", { fetch }); // the real sleep, about 0.5 s before the retry
    const controller = new AbortController();
    const call = tocsin.events.create(PARAMS, { signal: controller.signal });
    while (calls.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort();
    await assert.rejects(call, AbortError);
    await new Promise((resolve) => setTimeout(resolve, 700));
    assert.equal(calls.length, 1, "the retry was not sent after the abort");
  });

  test("AbortError is a TocsinError named AbortError, whose cause is the signal's reason", async () => {
    const reason = new Error("shutting down");
    const tocsin = new Tocsin("key", { fetch: scriptedFetch().fetch });
    await assert.rejects(tocsin.channels.list({ signal: AbortSignal.abort(reason) }), (error) => {
      assert.ok(error instanceof AbortError);
      assert.ok(error instanceof TocsinError);
      assert.ok(isTocsinError(error));
      assert.equal(error.name, "AbortError");
      assert.equal(error.message, "The request was aborted");
      assert.equal(error.cause, reason);
      return true;
    });
  });

  test("a signal that never aborts changes nothing, and its listeners are removed after the call", async () => {
    const controller = new AbortController();
    let listeners = 0;
    const signal = controller.signal;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = (...args) => {
      listeners++;
      add(...args);
    };
    signal.removeEventListener = (...args) => {
      listeners--;
      remove(...args);
    };
    const { fetch } = scriptedFetch(fail(503, "down"), ok(EVENT));
    const res = await new RecordingTocsin("key", { fetch }).events.create(PARAMS, { signal });
    assert.equal(res.data.id, "evt_1");
    assert.equal(listeners, 0);
  });
});

describe("events.list pages and events.stream", () => {
  const page = (ids, nextCursor) => ok({ items: ids.map((id) => ({ ...EVENT, id })), nextCursor }, { status: 200 });

  test("the headers of the call go with every page", async () => {
    const { fetch, calls } = scriptedFetch(page(["a"], "c1"), page(["b"], null));
    const tocsin = new Tocsin("key", { fetch, defaultHeaders: { "X-Team": "payments" } });
    const ids = [];
    for await (const event of tocsin.events.list({}, { headers: { "X-Trace": "t" } })) ids.push(event.id);
    assert.deepEqual(ids, ["a", "b"]);
    assert.equal(calls.length, 2);
    for (const call of calls) {
      assert.equal(header(call, "X-Trace"), "t");
      assert.equal(header(call, "X-Team"), "payments");
    }
  });

  test("the timeout and maxRetries of the call bound every page", async () => {
    const { fetch: hang } = fetchUntilAborted();
    const { fetch, calls } = scriptedFetch(page(["a"], "c1"), hang);
    const tocsin = new Tocsin("key", { fetch, timeout: 60_000, maxRetries: 2 });
    const ids = [];
    await assert.rejects(async () => {
      for await (const event of tocsin.events.list({}, { timeout: 20, maxRetries: 0 })) ids.push(event.id);
    }, (error) => error instanceof TimeoutError && error.timeout === 20);
    assert.deepEqual(ids, ["a"]);
    assert.equal(calls.length, 2, "the second page was not retried");
  });

  test("aborting between pages throws AbortError from the loop, after the earlier items, and fetches no more", async () => {
    const { fetch, calls } = scriptedFetch(page(["a", "b"], "c1"), page(["c"], null));
    const tocsin = new Tocsin("key", { fetch });
    const controller = new AbortController();
    const ids = [];
    await assert.rejects(async () => {
      for await (const event of tocsin.events.list({}, { signal: controller.signal })) {
        ids.push(event.id);
        if (event.id === "b") controller.abort();
      }
    }, AbortError);
    assert.deepEqual(ids, ["a", "b"]);
    assert.equal(calls.length, 1);
  });

  test("nextPage() keeps the call's options", async () => {
    const { fetch, calls } = scriptedFetch(page(["a"], "c1"));
    const controller = new AbortController();
    const first = await new Tocsin("key", { fetch }).events.list({}, { signal: controller.signal });
    controller.abort();
    await assert.rejects(first.nextPage(), AbortError);
    assert.equal(calls.length, 1);
  });

  test("events.stream takes its signal in params or in options; either ends it", async () => {
    for (const where of ["params", "options"]) {
      const body = new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode(`id: e1\nevent: event\ndata: ${JSON.stringify(EVENT)}\n\n`));
        },
      });
      const { fetch } = scriptedFetch(new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } }));
      const tocsin = new Tocsin("key", { fetch });
      const controller = new AbortController();
      const stream = where === "params"
        ? tocsin.events.stream({ signal: controller.signal }, { signal: new AbortController().signal })
        : tocsin.events.stream({ signal: new AbortController().signal }, { signal: controller.signal });
      const ids = [];
      for await (const event of stream) {
        ids.push(event.id);
        controller.abort();
      }
      assert.deepEqual(ids, [EVENT.id], where);
    }
  });
});
