// events.stream: events parsed from an SSE body read through fetch,
// reconnection with Last-Event-ID and backoff, which errors end it, and that
// leaving the loop or aborting the signal closes the request.

import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { describe, test } from "node:test";

import { ApiError, ConnectionError, RateLimitError, TimeoutError, Tocsin, TocsinError } from "../../dist/esm/index.js";
import { EVENT, RecordingTocsin, fail, header, rateLimitHeaders, scriptedFetch } from "./helpers.mjs";

const encoder = new TextEncoder();
const event = (n) => ({ ...EVENT, id: `e${n}`, title: `Event ${n}` });
const frame = (n) => `id: e${n}\nevent: event\ndata: ${JSON.stringify(event(n))}\n\n`;
const refused = () => new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") });

/**
 * An SSE response whose body the test writes to: `send(text)`, `end()`,
 * `break(error)`. `cancelled` tells whether the client closed it.
 */
function sseBody(...initial) {
  let controller;
  const body = {
    cancelled: false,
    send: (text) => controller.enqueue(encoder.encode(text)),
    end: () => controller.close(),
    break: (error = new TypeError("terminated")) => controller.error(error),
  };
  const stream = new ReadableStream({
    start(c) {
      controller = c;
      for (const text of initial) c.enqueue(encoder.encode(text));
    },
    cancel() {
      body.cancelled = true;
    },
  });
  body.response = (headers = {}) =>
    new Response(stream, { status: 200, headers: { "Content-Type": "text/event-stream", ...rateLimitHeaders(), ...headers } });
  return body;
}

/** A body that already holds `texts` and then ends. */
const ended = (...texts) => {
  const body = sseBody(...texts);
  body.end();
  return body.response();
};

/** Reads events until `count` are in (then leaves the loop) or the stream ends. */
async function take(stream, count = Infinity) {
  const events = [];
  if (count === 0) return events;
  for await (const e of stream) {
    events.push(e.id);
    if (events.length >= count) break;
  }
  return events;
}

function client(options, ...script) {
  const { fetch, calls } = scriptedFetch(...script);
  return { tocsin: new RecordingTocsin("tk_key", { fetch, baseUrl: "http://tocsin.test", ...options }), calls };
}

describe("events.stream", () => {
  test("yields the events of the stream, skipping comments and other message types", async () => {
    const body = sseBody("retry: 1000\n: keep-alive\n\n", frame(1), "event: ping\ndata: {}\n\n", "data: untyped\n\n", frame(2));
    const { tocsin, calls } = client({}, body.response());
    const events = [];
    for await (const e of tocsin.events.stream()) {
      events.push(e);
      if (events.length === 2) break;
    }
    assert.deepEqual(events, [event(1), event(2)]);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].url, "http://tocsin.test/v1/stream");
    assert.equal(calls[0].init.method, "GET");
    assert.equal(header(calls[0], "Authorization"), "Bearer tk_key");
    assert.equal(header(calls[0], "Accept"), "text/event-stream");
    assert.equal(header(calls[0], "Last-Event-ID"), undefined);
  });

  test("channel goes in the query and lastEventId in the Last-Event-ID header", async () => {
    const { tocsin, calls } = client({}, ended(frame(1)), ended(frame(2)));
    assert.deepEqual(await take(tocsin.events.stream({ channel: "pay ments", lastEventId: "e0" }), 1), ["e1"]);
    assert.equal(calls[0].url, "http://tocsin.test/v1/stream?channel=pay+ments");
    assert.equal(header(calls[0], "Last-Event-ID"), "e0");
  });

  test("leaving the loop aborts the request and cancels the body", async () => {
    const body = sseBody(frame(1));
    const { tocsin, calls } = client({}, body.response());
    assert.deepEqual(await take(tocsin.events.stream(), 1), ["e1"]);
    assert.equal(calls[0].init.signal.aborted, true);
    assert.equal(body.cancelled, true);
  });

  test("reconnects after the server ends the response, with Last-Event-ID and the server's retry delay", async () => {
    const { tocsin, calls } = client({}, ended("retry: 2000\n\n", frame(1), frame(2)), ended(frame(3)));
    assert.deepEqual(await take(tocsin.events.stream(), 3), ["e1", "e2", "e3"]);
    assert.equal(header(calls[1], "Last-Event-ID"), "e2");
    assert.equal(tocsin.sleeps.length, 1);
    assert.ok(tocsin.sleeps[0] >= 1500 && tocsin.sleeps[0] <= 2000, `waited ${tocsin.sleeps[0]}`);
  });

  test("a message cut off by a broken connection is asked for again", async () => {
    const first = sseBody(frame(1), frame(2).slice(0, 30));
    const { tocsin, calls } = client({}, first.response(), ended(frame(2), frame(3)));
    const stream = tocsin.events.stream();
    const seen = [];
    for await (const e of stream) {
      seen.push(e.id);
      if (seen.length === 1) first.break();
      if (seen.length === 3) break;
    }
    assert.deepEqual(seen, ["e1", "e2", "e3"]);
    assert.equal(header(calls[1], "Last-Event-ID"), "e1", "the id of the cut message does not count");
    assert.equal(stream.lastEventId, "e3");
  });

  test("reconnects through refused connections and 5xx; a connection that opens resets the backoff", async () => {
    const { tocsin, calls } = client({}, ended(frame(1)), refused(), ended(), new Response("bad gateway", { status: 502 }), ended(frame(2)));
    assert.deepEqual(await take(tocsin.events.stream(), 2), ["e1", "e2"]);
    assert.equal(calls.length, 5);
    for (const call of calls.slice(1)) assert.equal(header(call, "Last-Event-ID"), "e1");
    const [afterDrop, afterRefused, afterEmpty, afterBadGateway] = tocsin.sleeps;
    // A drop of a working connection waits the base delay; failures in a row double it.
    assert.ok(afterDrop >= 375 && afterDrop <= 500, `after drop ${afterDrop}`);
    assert.ok(afterRefused >= 375 && afterRefused <= 500, `after refused ${afterRefused}`);
    assert.ok(afterEmpty >= 375 && afterEmpty <= 500, `a connection that opened resets the backoff: ${afterEmpty}`);
    assert.ok(afterBadGateway >= 375 && afterBadGateway <= 500, `after 502 ${afterBadGateway}`);
  });

  test("consecutive failures double the wait", async () => {
    const { tocsin } = client({}, ended(frame(1)), refused(), refused(), refused(), ended(frame(2)));
    assert.deepEqual(await take(tocsin.events.stream(), 2), ["e1", "e2"]);
    const [, first, second, third] = tocsin.sleeps;
    assert.ok(first >= 375 && first <= 500, `${first}`);
    assert.ok(second >= 750 && second <= 1000, `${second}`);
    assert.ok(third >= 1500 && third <= 2000, `${third}`);
  });

  test("a retry: 0 from the server still leaves a pause between attempts", async () => {
    const { tocsin } = client({}, ended("retry: 0\n\n", frame(1)), refused(), ended(frame(2)));
    assert.deepEqual(await take(tocsin.events.stream(), 2), ["e1", "e2"]);
    assert.ok(tocsin.sleeps.every((ms) => ms >= 75), `waits ${tocsin.sleeps}`);
  });

  test("once it has opened, reconnection does not give up after maxRetries", async () => {
    const { tocsin, calls } = client({ maxRetries: 0 }, ended(frame(1)), refused(), refused(), refused(), refused(), ended(frame(2)));
    assert.deepEqual(await take(tocsin.events.stream(), 2), ["e1", "e2"]);
    assert.equal(calls.length, 6);
  });

  test("before it has opened, the client's maxRetries applies", async () => {
    const { tocsin, calls } = client({ maxRetries: 1 }, refused(), refused(), ended(frame(1)));
    await assert.rejects(take(tocsin.events.stream()), ConnectionError);
    assert.equal(calls.length, 2);
  });

  for (const status of [401, 403]) {
    test(`a ${status} is thrown, not retried`, async () => {
      const { tocsin, calls } = client({}, fail(status, "denied"), ended(frame(1)));
      await assert.rejects(take(tocsin.events.stream()), (error) => error instanceof ApiError && error.statusCode === status);
      assert.equal(calls.length, 1);
    });

    test(`a ${status} on reconnection is thrown after the events before it`, async () => {
      const { tocsin, calls } = client({}, ended(frame(1)), fail(status, "key revoked"), ended(frame(2)));
      const seen = [];
      await assert.rejects(async () => {
        for await (const e of tocsin.events.stream()) seen.push(e.id);
      }, (error) => error instanceof ApiError && error.statusCode === status && error.message === "key revoked");
      assert.deepEqual(seen, ["e1"]);
      assert.equal(calls.length, 2);
    });
  }

  test("a 429 (too many open streams) waits Retry-After and tries again", async () => {
    const { tocsin, calls } = client({}, fail(429, "too many streams", { headers: { "Retry-After": "7" } }), ended(frame(1)));
    assert.deepEqual(await take(tocsin.events.stream(), 1), ["e1"]);
    assert.equal(calls.length, 2);
    assert.deepEqual(tocsin.sleeps, [7000]);
  });

  test("a 429 beyond maxRetries before opening is a RateLimitError", async () => {
    const { tocsin } = client({ maxRetries: 0 }, fail(429, "too many streams", { headers: { "Retry-After": "7" } }));
    await assert.rejects(take(tocsin.events.stream()), RateLimitError);
  });

  test("aborting the signal while waiting for events ends the loop without an error", async () => {
    const body = sseBody(frame(1));
    const { tocsin, calls } = client({}, body.response());
    const controller = new AbortController();
    const seen = [];
    setTimeout(() => controller.abort(), 30);
    for await (const e of tocsin.events.stream({ signal: controller.signal })) seen.push(e.id);
    assert.deepEqual(seen, ["e1"]);
    assert.equal(calls[0].init.signal.aborted, true);
    assert.equal(body.cancelled, true);
  });

  test("aborting the signal during the wait before a reconnection ends the loop at once", async () => {
    class NeverWakes extends Tocsin {
      sleep() {
        return new Promise(() => {});
      }
    }
    const { fetch, calls } = scriptedFetch(ended(frame(1)), ended(frame(2)));
    const tocsin = new NeverWakes("key", { fetch });
    const controller = new AbortController();
    const seen = [];
    setTimeout(() => controller.abort(), 30);
    for await (const e of tocsin.events.stream({ signal: controller.signal })) seen.push(e.id);
    assert.deepEqual(seen, ["e1"]);
    assert.equal(calls.length, 1);
  });

  test("an aborted signal sends nothing", async () => {
    const { tocsin, calls } = client({});
    assert.deepEqual(await take(tocsin.events.stream({ signal: AbortSignal.abort() })), []);
    assert.equal(calls.length, 0);
  });

  test("aborting while connecting ends the loop, even with a fetch that ignores its signal", async () => {
    const { tocsin } = client({}, () => new Promise(() => {}));
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 30);
    assert.deepEqual(await take(tocsin.events.stream({ signal: controller.signal })), []);
  });

  test("a connection silent for longer than idleTimeout is replaced", async () => {
    const silent = sseBody(frame(1));
    const { tocsin, calls } = client({}, silent.response(), ended(frame(2)));
    assert.deepEqual(await take(tocsin.events.stream({}, { idleTimeout: 40 }), 2), ["e1", "e2"]);
    assert.equal(silent.cancelled, true);
    assert.equal(header(calls[1], "Last-Event-ID"), "e1");
  });

  test("a consumer slower than idleTimeout does not make the connection look dead", async () => {
    const body = sseBody(frame(1), frame(2));
    const { tocsin, calls } = client({}, body.response());
    const seen = [];
    for await (const e of tocsin.events.stream({}, { idleTimeout: 30 })) {
      seen.push(e.id);
      if (seen.length === 2) break;
      await new Promise((resolve) => setTimeout(resolve, 90));
    }
    assert.deepEqual(seen, ["e1", "e2"]);
    assert.equal(calls.length, 1);
  });

  test("a consumer that stops after the first of several events in one chunk resumes after that one", async () => {
    const { tocsin, calls } = client({}, ended(frame(1) + frame(2) + frame(3)), ended(frame(2)));
    const stream = tocsin.events.stream();
    assert.deepEqual(await take(stream, 1), ["e1"]);
    assert.equal(stream.lastEventId, "e1");
    assert.deepEqual(await take(stream, 1), ["e2"]);
    assert.equal(header(calls[1], "Last-Event-ID"), "e1");
  });

  test("an id-only block counts once the connection is over", async () => {
    const { tocsin, calls } = client({}, ended(frame(1), "id: e1b\n\n"), ended(frame(2)));
    assert.deepEqual(await take(tocsin.events.stream(), 2), ["e1", "e2"]);
    assert.equal(header(calls[1], "Last-Event-ID"), "e1b");
  });

  test("keep-alive comments keep a connection from counting as idle", async () => {
    const body = sseBody(frame(1));
    const { tocsin, calls } = client({}, body.response());
    const timer = setInterval(() => body.send(": keep-alive\n"), 10);
    setTimeout(() => body.send(frame(2)), 150);
    try {
      assert.deepEqual(await take(tocsin.events.stream({}, { idleTimeout: 60 }), 2), ["e1", "e2"]);
    } finally {
      clearInterval(timer);
    }
    assert.equal(calls.length, 1);
  });

  test("no response headers within the timeout is a TimeoutError", async () => {
    const { tocsin } = client({ timeout: 20, maxRetries: 0 }, () => new Promise(() => {}));
    await assert.rejects(take(tocsin.events.stream()), (error) => error instanceof TimeoutError && error.timeout === 20);
  });

  test("the timeout does not cut a stream that stays open longer", async () => {
    const body = sseBody(frame(1));
    const { tocsin, calls } = client({ timeout: 20 }, body.response());
    setTimeout(() => body.send(frame(2)), 80);
    assert.deepEqual(await take(tocsin.events.stream(), 2), ["e1", "e2"]);
    assert.equal(calls.length, 1);
  });

  test("a success that is not an event stream is thrown, not retried", async () => {
    const json = new Response('{"success":true}', { status: 200, headers: { "Content-Type": "application/json" } });
    const { tocsin, calls } = client({}, json);
    await assert.rejects(take(tocsin.events.stream()), (error) => error instanceof TocsinError && /Expected an event stream/.test(error.message));
    assert.equal(calls.length, 1);
  });

  test("204 No Content ends the stream", async () => {
    const { tocsin, calls } = client({}, new Response(null, { status: 204 }));
    assert.deepEqual(await take(tocsin.events.stream()), []);
    assert.equal(calls.length, 1);
  });

  test("a fetch without a readable body is refused with a clear error", async () => {
    const noBody = { status: 200, headers: new Headers({ "Content-Type": "text/event-stream" }), text: async () => "" };
    const { tocsin } = client({}, noBody);
    await assert.rejects(take(tocsin.events.stream()), /no readable body/);
  });

  test("an event that is not JSON is thrown", async () => {
    const { tocsin } = client({}, ended("event: event\ndata: {oops\n\n"));
    await assert.rejects(take(tocsin.events.stream()), /not JSON/);
  });

  test("lastEventId follows the events, and iterating again resumes after it", async () => {
    const { tocsin, calls } = client({}, ended(frame(1), frame(2)), ended(frame(3)));
    const stream = tocsin.events.stream();
    assert.equal(stream.lastEventId, undefined);
    assert.deepEqual(await take(stream, 2), ["e1", "e2"]);
    assert.equal(stream.lastEventId, "e2");
    assert.deepEqual(await take(stream, 1), ["e3"]);
    assert.equal(header(calls[1], "Last-Event-ID"), "e2");
  });

  test("the stream's rate-limit headers update lastRateLimit", async () => {
    const body = sseBody(frame(1));
    const { fetch } = scriptedFetch(body.response(rateLimitHeaders({ limit: 9, remaining: 4 })));
    const tocsin = new Tocsin("key", { fetch });
    await take(tocsin.events.stream(), 1);
    assert.equal(tocsin.lastRateLimit.limit, 9);
    assert.equal(tocsin.lastRateLimit.remaining, 4);
  });

  test("an invalid idleTimeout is refused", () => {
    const { tocsin } = client({});
    assert.throws(() => tocsin.events.stream({}, { idleTimeout: 0 }), /idleTimeout must be/);
  });
});

// The same over real HTTP, with Node's own fetch: what a closed request and a
// dropped connection look like from the server's side.
describe("events.stream over HTTP", () => {
  /** A local SSE server; `onRequest(req, res, n)` handles the n-th request (from 0). */
  async function sseServer(onRequest) {
    const requests = [];
    const server = createServer((req, res) => {
      requests.push({ url: req.url, headers: req.headers, closed: once(res, "close") });
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-store" });
      onRequest(req, res, requests.length - 1);
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const baseUrl = `http://127.0.0.1:${server.address().port}`;
    const close = async () => {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    };
    return { baseUrl, requests, close };
  }

  test("leaving the loop closes the connection on the server's side", { timeout: 10_000 }, async () => {
    const server = await sseServer((_req, res) => res.write("retry: 1000\n\n" + frame(1)));
    try {
      const tocsin = new RecordingTocsin("key", { baseUrl: server.baseUrl });
      assert.deepEqual(await take(tocsin.events.stream(), 1), ["e1"]);
      await server.requests[0].closed; // hangs (and the test times out) if the request stays open
      assert.equal(server.requests.length, 1);
    } finally {
      await server.close();
    }
  });

  test("a connection the server drops is reopened with Last-Event-ID, and frames split across writes parse", async () => {
    const server = await sseServer((req, res, n) => {
      if (n === 0) {
        const bytes = encoder.encode(frame(1) + frame(2));
        // One byte per write, flushed apart, then the connection is cut.
        let i = 0;
        const next = () => {
          if (i === bytes.length) return res.destroy();
          res.write(bytes.slice(i, i + 1));
          i++;
          setImmediate(next);
        };
        next();
      } else {
        res.write(frame(3));
      }
    });
    try {
      const tocsin = new RecordingTocsin("key", { baseUrl: server.baseUrl });
      assert.deepEqual(await take(tocsin.events.stream({ channel: "payments" }), 3), ["e1", "e2", "e3"]);
      assert.equal(server.requests.length, 2);
      assert.equal(server.requests[0].url, "/v1/stream?channel=payments");
      assert.equal(server.requests[0].headers["last-event-id"], undefined);
      assert.equal(server.requests[1].headers["last-event-id"], "e2");
      assert.equal(server.requests[1].headers.authorization, "Bearer key");
    } finally {
      await server.close();
    }
  });

  test("aborting the signal closes the connection on the server's side", { timeout: 10_000 }, async () => {
    const server = await sseServer((_req, res) => res.write(": keep-alive\n\n"));
    try {
      const tocsin = new RecordingTocsin("key", { baseUrl: server.baseUrl });
      const controller = new AbortController();
      const loop = take(tocsin.events.stream({ signal: controller.signal }));
      while (server.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      controller.abort();
      assert.deepEqual(await loop, []);
      await server.requests[0].closed;
    } finally {
      await server.close();
    }
  });
});

describe("tocsin.stream: events and insight changes", () => {
  const insight = (title, value) => ({ title, value, icon: null, createdAt: "2026-11-23T06:40:00Z", updatedAt: "2026-11-23T06:40:00Z" });
  const insightFrame = (title, value) => `event: insight\ndata: ${JSON.stringify(insight(title, value))}\n\n`;
  const deletedFrame = (title) =>
    `event: insight-deleted\ndata: ${JSON.stringify({ title, deleted: true, deletedAt: "2026-11-23T06:41:00Z" })}\n\n`;

  async function messages(stream, count) {
    const seen = [];
    for await (const message of stream) {
      seen.push(message);
      if (seen.length >= count) break;
    }
    return seen;
  }

  test("yields every kind of message, typed, in order; unknown kinds are skipped", async () => {
    const body = sseBody(frame(1), insightFrame("Revenue", 1250), "event: ping\ndata: {}\n\n", deletedFrame("Revenue"), frame(2));
    const { tocsin, calls } = client({}, body.response());
    const seen = await messages(tocsin.stream(), 4);
    assert.deepEqual(seen, [
      { type: "event", id: "e1", data: event(1) },
      { type: "insight", data: insight("Revenue", 1250) },
      { type: "insight-deleted", data: { title: "Revenue", deleted: true, deletedAt: "2026-11-23T06:41:00Z" } },
      { type: "event", id: "e2", data: event(2) },
    ]);
    assert.equal(calls[0].url, "http://tocsin.test/v1/stream");
    assert.equal(header(calls[0], "Accept"), "text/event-stream");
  });

  test("insight messages have no id: lastEventId stays the last event's, and a resume sends it", async () => {
    const { tocsin, calls } = client({}, ended(frame(1), insightFrame("Trials", 2), insightFrame("Trials", 3)), ended(frame(2)));
    const stream = tocsin.stream({ channel: "payments" });
    const seen = await messages(stream, 4);
    assert.deepEqual(seen.map((m) => m.type), ["event", "insight", "insight", "event"]);
    assert.equal(seen[2].data.value, 3);
    assert.equal(calls[0].url, "http://tocsin.test/v1/stream?channel=payments");
    assert.equal(header(calls[1], "Last-Event-ID"), "e1", "the insights in between did not move the resume point");
    assert.equal(stream.lastEventId, "e2");
  });

  test("events.stream skips insight messages, even unreadable ones, and yields the events", async () => {
    const { tocsin } = client({}, ended(insightFrame("Revenue", 1), frame(1), "event: insight\ndata: {oops\n\n", deletedFrame("Revenue"), frame(2)));
    const stream = tocsin.events.stream();
    assert.deepEqual(await take(stream, 2), ["e1", "e2"]);
    assert.equal(stream.lastEventId, "e2");
  });

  test("an insight message that is not JSON is thrown by tocsin.stream", async () => {
    const { tocsin } = client({}, ended("event: insight\ndata: {oops\n\n"));
    await assert.rejects(messages(tocsin.stream(), 1), /insight message that is not JSON/);
  });

  test("the signal in params or options ends it without an error", async () => {
    const body = sseBody(insightFrame("A", 1));
    const { tocsin } = client({}, body.response());
    const controller = new AbortController();
    const seen = [];
    for await (const message of tocsin.stream({}, { signal: controller.signal })) {
      seen.push(message.type);
      controller.abort();
    }
    assert.deepEqual(seen, ["insight"]);
    assert.equal(body.cancelled, true);
  });
});
