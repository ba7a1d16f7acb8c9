// The read side of the packed client against a real ingest process
// (embedded mode, SQLite): events.list and its pagination, the filters,
// channels.list, users.get, stats.events and events.stream, including a
// stream that survives a restart of the server.
//
//   INGEST_BIN=../../target/debug/ingest npm run test:integration
//
// This file has its own ingest, so it knows every event in the project.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { countingFetch, installPackedClient, startIngest } from "./helpers.mjs";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
// Guards against a hang, never a speed assertion.
const STREAM_TEST = { timeout: 120_000 };

let ingest;
let client;
let apiKey;
let tocsin;
/** Every event this file recorded, oldest first. */
const recorded = [];

before(async () => {
  ingest = await startIngest();
  // 120 events and their pages exceed the default 100 requests a minute.
  apiKey = await ingest.createKey({ rateLimit: 100_000 });
  client = await installPackedClient();
  tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
});

after(async () => {
  await ingest?.stop();
  await client?.cleanup();
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Records an event (notify off: there are no devices) and remembers it. */
async function record(fields, via = tocsin) {
  const { data } = await via.events.create({ notify: false, ...fields });
  recorded.push(data);
  return data;
}

/** Microseconds since the epoch of an RFC 3339 timestamp, exactly (Date keeps only milliseconds). */
function micros(timestamp) {
  const match = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(timestamp);
  assert.ok(match, `RFC 3339 timestamp: ${timestamp}`);
  const [, seconds, fraction = "", zone] = match;
  return BigInt(Date.parse(`${seconds}${zone}`)) * 1000n + BigInt((fraction + "000000").slice(0, 6));
}

const ids = (events) => events.map((event) => event.id);
/** Newest first, as the service lists them. */
const newestFirst = (events) => [...events].reverse();

describe("events.list", () => {
  const channel = "it-list";
  let created;

  before(async () => {
    created = [];
    for (let i = 0; i < 120; i++) created.push(await record({ channelName: channel, title: `List ${i}` }));
  });

  test("a page holds `limit` events, newest first, and a cursor to the next", async () => {
    const page = await tocsin.events.list({ channel, limit: 50 });
    assert.ok(page instanceof client.esm.Page);
    assert.equal(page.statusCode, 200);
    assert.deepEqual(ids(page.items), ids(newestFirst(created)).slice(0, 50));
    assert.equal(typeof page.nextCursor, "string");
    assert.equal(page.hasNextPage(), true);
    assert.deepEqual(page.items[0], created.at(-1), "a listed event is the event as created");
  });

  test("iterating with limit 50 pages through all 120 events, each once, in order, in 3 requests", async () => {
    const counter = countingFetch();
    const counted = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    const seen = [];
    for await (const event of counted.events.list({ channel, limit: 50 })) seen.push(event.id);
    assert.equal(seen.length, 120);
    assert.equal(new Set(seen).size, 120, "no event twice");
    assert.deepEqual(seen, ids(newestFirst(created)));
    assert.equal(counter.calls, 3);
  });

  test("page by page: 50, 50, 20, and the last page has nextCursor null", async () => {
    const sizes = [];
    let page = await tocsin.events.list({ channel, limit: 50 });
    sizes.push(page.items.length);
    while (page.hasNextPage()) {
      page = await page.nextPage();
      sizes.push(page.items.length);
    }
    assert.deepEqual(sizes, [50, 50, 20]);
    assert.equal(page.nextCursor, null);
  });

  test("a cursor from one page, given to a new list call, continues from there", async () => {
    const first = await tocsin.events.list({ channel, limit: 50 });
    const second = await tocsin.events.list({ channel, limit: 50, cursor: first.nextCursor });
    assert.deepEqual(ids(second.items), ids(newestFirst(created)).slice(50, 100));
  });

  test("without a limit a page holds the service's default of 50", async () => {
    const page = await tocsin.events.list({ channel });
    assert.equal(page.items.length, 50);
  });

  test("a limit out of range is a ValidationError naming the query parameter", async () => {
    const { ValidationError } = client.esm;
    for (const limit of [0, 101]) {
      await assert.rejects(tocsin.events.list({ channel, limit }), (error) => {
        assert.ok(error instanceof ValidationError, `limit ${limit}: ${error}`);
        assert.ok(error.details.some((detail) => JSON.stringify(detail.path) === '["query","limit"]'), JSON.stringify(error.details));
        return true;
      });
    }
  });
});

describe("events.list filters", () => {
  const channel = "it-filter";
  let payment;
  let signup;
  let refund;

  before(async () => {
    // A few milliseconds apart, so the millisecond Dates below fall between them.
    payment = await record({ channelName: channel, title: "Payment failed", tags: ["eu"], userId: "u_filter_1" });
    await sleep(5);
    signup = await record({ channelName: channel, title: "Signup", description: "came from the PAYMENT page", tags: ["us"], userId: "u_filter_2" });
    await sleep(5);
    refund = await record({ channelName: channel, title: "Refund", tags: ["eu", "card"], userId: "u_filter_1" });
    // The same user and tag on another channel: filters combine with channel.
    await record({ channelName: "it-filter-other", title: "Payment elsewhere", tags: ["eu"], userId: "u_filter_1" });
  });

  const list = async (params) => {
    const seen = [];
    for await (const event of tocsin.events.list(params)) seen.push(event.id);
    return seen;
  };

  test("channel", async () => {
    assert.deepEqual(await list({ channel }), ids([refund, signup, payment]));
  });

  test("tag", async () => {
    assert.deepEqual(await list({ channel, tag: "eu" }), ids([refund, payment]));
    assert.deepEqual(await list({ channel, tag: "card" }), ids([refund]));
  });

  test("userId", async () => {
    assert.deepEqual(await list({ channel, userId: "u_filter_1" }), ids([refund, payment]));
    const everywhere = await list({ userId: "u_filter_1" });
    assert.equal(everywhere.length, 3);
  });

  test("q matches title or description, ignoring case", async () => {
    assert.deepEqual(await list({ channel, q: "payment" }), ids([signup, payment]));
    assert.deepEqual(await list({ channel, q: "REFUND" }), ids([refund]));
    assert.deepEqual(await list({ channel, q: "no such words" }), []);
  });

  test("since (inclusive) and until (exclusive) as the service's own timestamps", async () => {
    assert.deepEqual(await list({ channel, since: signup.createdAt }), ids([refund, signup]));
    assert.deepEqual(await list({ channel, until: signup.createdAt }), ids([payment]));
    assert.deepEqual(await list({ channel, since: signup.createdAt, until: refund.createdAt }), ids([signup]));
  });

  test("since and until as Dates", async () => {
    // A Date drops the microseconds: since falls just before payment, until just before refund.
    const since = new Date(Date.parse(payment.createdAt));
    const until = new Date(Date.parse(refund.createdAt));
    assert.deepEqual(await list({ channel, since, until }), ids([signup, payment]));
  });

  test("filters combine", async () => {
    assert.deepEqual(await list({ channel, tag: "eu", userId: "u_filter_1", q: "refund", since: payment.createdAt }), ids([refund]));
  });

  test("a since that is not a timestamp is a ValidationError", async () => {
    await assert.rejects(tocsin.events.list({ since: "yesterday" }), (error) => {
      assert.ok(error instanceof client.esm.ValidationError);
      assert.ok(error.details.some((detail) => JSON.stringify(detail.path) === '["query","since"]'), JSON.stringify(error.details));
      return true;
    });
  });
});

describe("channels.list", () => {
  test("lists every channel with its event count and last event, most recently active first", async () => {
    await record({ channelName: "it-channels-latest", title: "Latest" });
    const res = await tocsin.channels.list();
    assert.equal(res.statusCode, 200);

    const byChannel = new Map();
    for (const event of recorded) byChannel.set(event.channelName, [...(byChannel.get(event.channelName) ?? []), event]);
    const expected = [...byChannel].map(([name, events]) => ({ name, eventCount: events.length, lastEventAt: events.at(-1).createdAt }));
    expected.sort((a, b) => Number(micros(b.lastEventAt) - micros(a.lastEventAt)));

    assert.deepEqual(res.data.items.map((channel) => channel.name), expected.map((channel) => channel.name));
    for (const [i, channel] of res.data.items.entries()) {
      assert.equal(channel.eventCount, expected[i].eventCount, channel.name);
      assert.equal(micros(channel.lastEventAt), micros(expected[i].lastEventAt), channel.name);
    }
    assert.equal(res.data.items[0].name, "it-channels-latest");
  });
});

describe("users.get", () => {
  test("returns the identity as identify left it, for an id that needs encoding", async () => {
    const userId = "it user/ä?#1";
    const identified = await tocsin.identify({ user_id: userId, properties: { plan: "pro", seats: 3 }, aliases: ["ada@example.com"] });
    const res = await tocsin.users.get(userId);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.data, identified.data);
  });

  test("an unknown user is a NotFoundError and is not retried", async () => {
    const { ApiError, NotFoundError, Tocsin } = client.esm;
    const counter = countingFetch();
    const counted = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(counted.users.get("it-nobody"), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.ok(error instanceof ApiError);
      assert.equal(error.statusCode, 404);
      assert.match(error.message, /user/i, "the 404 is about the user, not a missing route");
      return true;
    });
    assert.equal(counter.calls, 1);
  });
});

describe("stats.events", () => {
  const channel = "it-stats";

  before(async () => {
    for (let i = 0; i < 3; i++) await record({ channelName: channel, title: `Stats ${i}` });
  });

  /** What the buckets must hold: each aligned, one `size` apart, counting the recorded events in it. */
  function checkBuckets(buckets, size, events) {
    assert.ok(buckets.length > 0);
    for (const [i, bucket] of buckets.entries()) {
      const start = Date.parse(bucket.start);
      assert.equal(start % size, 0, `bucket ${bucket.start} is aligned to the UTC ${size === HOUR ? "hour" : "day"}`);
      if (i > 0) assert.equal(start - Date.parse(buckets[i - 1].start), size, "oldest first, none missing");
      const from = BigInt(start) * 1000n;
      const to = BigInt(start + size) * 1000n;
      const expected = events.filter((event) => micros(event.createdAt) >= from && micros(event.createdAt) < to).length;
      assert.equal(bucket.count, expected, `count of the bucket at ${bucket.start}`);
    }
  }

  test("by default: the last 24 hours by hour, empty hours included", async () => {
    const res = await tocsin.stats.events({ channel });
    assert.equal(res.statusCode, 200);
    const { buckets } = res.data;
    assert.ok(buckets.length === 24 || buckets.length === 25, `${buckets.length} hourly buckets`);
    checkBuckets(buckets, HOUR, recorded.filter((event) => event.channelName === channel));
    assert.equal(buckets.reduce((sum, bucket) => sum + bucket.count, 0), 3);
  });

  test("by day, with since and until as Dates", async () => {
    const until = new Date(Date.now() + DAY);
    const since = new Date(Date.now() - 3 * DAY);
    const res = await tocsin.stats.events({ channel, bucket: "day", since, until });
    checkBuckets(res.data.buckets, DAY, recorded.filter((event) => event.channelName === channel));
    assert.equal(res.data.buckets.reduce((sum, bucket) => sum + bucket.count, 0), 3);
  });

  test("without a channel it counts every event of the project", async () => {
    const res = await tocsin.stats.events({ bucket: "hour", since: new Date(Date.now() - 2 * HOUR), until: new Date(Date.now() + HOUR) });
    checkBuckets(res.data.buckets, HOUR, recorded);
    assert.equal(res.data.buckets.reduce((sum, bucket) => sum + bucket.count, 0), recorded.length);
  });

  test("a range of more than 1000 buckets comes a page at a time, nextSince naming the rest", async () => {
    const until = new Date(Date.now() + HOUR);
    const since = new Date(until.getTime() - 1200 * HOUR);
    const first = await tocsin.stats.events({ channel, bucket: "hour", since, until });
    assert.equal(first.data.buckets.length, 1000);
    assert.equal(typeof first.data.nextSince, "string");
    const rest = await tocsin.stats.events({ channel, bucket: "hour", since: first.data.nextSince, until });
    assert.equal(rest.data.nextSince, null);
    assert.equal(Date.parse(rest.data.buckets[0].start), Date.parse(first.data.nextSince));
    const all = [...first.data.buckets, ...rest.data.buckets];
    checkBuckets(all, HOUR, recorded.filter((event) => event.channelName === channel));
    assert.equal(all.reduce((sum, bucket) => sum + bucket.count, 0), 3);
  });
});

/**
 * A fetch for the stream client that reports each connection the stream
 * opens (the promise of its response) and can hold back reconnections.
 */
function streamFetch() {
  const connections = [];
  let waiters = [];
  let gate = null;
  const fetch = async (url, init) => {
    const index = connections.length;
    const connection = { url, headers: { ...init.headers } };
    connections.push(connection);
    if (index > 0 && gate) await gate.promise;
    connection.response = await globalThis.fetch(url, init);
    for (const waiter of waiters) waiter();
    waiters = [];
    return connection.response;
  };
  return {
    fetch,
    connections,
    /** Resolves once `count` connections have their response headers. */
    opened(count = 1) {
      return new Promise((resolve) => {
        const check = () => (connections.filter((c) => c.response).length >= count ? resolve() : waiters.push(check));
        check();
      });
    },
    /** Holds reconnections back until `release()`. */
    hold() {
      let release;
      gate = { promise: new Promise((resolve) => (release = resolve)) };
      return () => {
        gate = null;
        release();
      };
    },
  };
}

describe("events.stream", () => {
  test("receives an event recorded after it opened", STREAM_TEST, async () => {
    const watcher = streamFetch();
    const streamClient = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: watcher.fetch });
    const events = streamClient.events.stream()[Symbol.asyncIterator]();
    const next = events.next();
    await watcher.opened();
    assert.equal(watcher.connections[0].response.headers.get("content-type").split(";")[0], "text/event-stream");

    const created = await record({ channelName: "it-stream", title: "Live", tags: ["live"], metadata: { n: 1 } });
    const { value, done } = await next;
    assert.equal(done, false);
    assert.deepEqual(value, created, "the streamed event is the event as created");
    await events.return();
  });

  test("with a channel, only that channel's events arrive", STREAM_TEST, async () => {
    const watcher = streamFetch();
    const streamClient = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: watcher.fetch });
    const events = streamClient.events.stream({ channel: "it-stream-wanted" })[Symbol.asyncIterator]();
    const next = events.next();
    await watcher.opened();
    await record({ channelName: "it-stream-other", title: "Not for this stream" });
    const wanted = await record({ channelName: "it-stream-wanted", title: "For this stream" });
    assert.equal((await next).value.id, wanted.id);
    await events.return();
  });

  test("lastEventId replays the events recorded after it, oldest first, then goes live", STREAM_TEST, async () => {
    const channel = "it-stream-resume";
    const first = await record({ channelName: channel, title: "Before 1" });
    const second = await record({ channelName: channel, title: "Before 2" });
    const third = await record({ channelName: channel, title: "Before 3" });
    const events = tocsin.events.stream({ channel, lastEventId: first.id })[Symbol.asyncIterator]();
    const seen = [];
    seen.push((await events.next()).value.id, (await events.next()).value.id);
    const live = await record({ channelName: channel, title: "Live after the replay" });
    seen.push((await events.next()).value.id);
    await events.return();
    assert.deepEqual(seen, ids([second, third, live]));
  });

  test("a server restart drops the connection; the stream reconnects with Last-Event-ID and loses or repeats nothing", STREAM_TEST, async () => {
    const channel = "it-stream-restart";
    const watcher = streamFetch();
    const streamClient = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: watcher.fetch });
    const stream = streamClient.events.stream({ channel });
    const events = stream[Symbol.asyncIterator]();
    const received = [];
    const receive = async () => {
      const { value, done } = await events.next();
      assert.equal(done, false, "the stream goes on");
      received.push(value.id);
      return value;
    };

    const next = receive();
    await watcher.opened();
    const a = await record({ channelName: channel, title: "A" });
    await next;
    const b = await record({ channelName: channel, title: "B" });
    await receive();
    assert.equal(stream.lastEventId, b.id);

    // Reconnections wait until C and D are recorded by the new process, so
    // those two can only come through the replay after Last-Event-ID.
    const release = watcher.hold();
    const pending = receive();
    await ingest.restart();
    const c = await record({ channelName: channel, title: "C" });
    const d = await record({ channelName: channel, title: "D" });
    release();
    await pending;
    await receive();

    assert.ok(watcher.connections.length >= 2, "it reconnected");
    for (const connection of watcher.connections.slice(1)) {
      const lastEventId = Object.entries(connection.headers).find(([name]) => name.toLowerCase() === "last-event-id")?.[1];
      assert.equal(lastEventId, b.id, "every reconnection resumes after B");
    }

    // And the new connection is live.
    const e = await record({ channelName: channel, title: "E" });
    await receive();
    assert.deepEqual(received, ids([a, b, c, d, e]));
    await events.return();
  });

  test("aborting the signal ends the loop without an error", STREAM_TEST, async () => {
    const channel = "it-stream-abort";
    const watcher = streamFetch();
    const streamClient = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: watcher.fetch });
    const controller = new AbortController();
    const seen = [];
    const loop = (async () => {
      for await (const event of streamClient.events.stream({ channel, signal: controller.signal })) {
        seen.push(event.id);
        controller.abort();
      }
    })();
    await watcher.opened();
    const only = await record({ channelName: channel, title: "Only one" });
    await loop;
    assert.deepEqual(seen, [only.id]);
    assert.equal(watcher.connections.length, 1);
  });

  test("an unknown key is a 401 ApiError, thrown and not retried", STREAM_TEST, async () => {
    const { ApiError, Tocsin } = client.esm;
    const counter = countingFetch();
    const stranger = new Tocsin("tk_not_a_real_key", { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(async () => {
      for await (const _event of stranger.events.stream()) assert.fail("no event for an unknown key");
    }, (error) => error instanceof ApiError && error.statusCode === 401);
    assert.equal(counter.calls, 1);
  });

  test("the CommonJS build streams too", STREAM_TEST, async () => {
    const watcher = streamFetch();
    const streamClient = new client.cjs.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: watcher.fetch });
    const events = streamClient.events.stream({ channel: "it-stream-cjs" })[Symbol.asyncIterator]();
    const next = events.next();
    await watcher.opened();
    const created = await record({ channelName: "it-stream-cjs", title: "CommonJS" });
    assert.equal((await next).value.id, created.id);
    await events.return();
  });
});
