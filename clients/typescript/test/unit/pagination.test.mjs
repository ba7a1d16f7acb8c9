// events.list: one page when awaited, every item of every page when
// iterated, the filters in the query, and the cursor followed to the end.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { ApiError, Page, PagePromise, Tocsin, TocsinError } from "../../dist/esm/index.js";
import { EVENT, RecordingTocsin, fail, ok, scriptedFetch } from "./helpers.mjs";

const event = (n) => ({ ...EVENT, id: `evt_${n}`, title: `Event ${n}` });
const page = (numbers, nextCursor) => ok({ items: numbers.map(event), nextCursor }, { status: 200 });

function client(...script) {
  const { fetch, calls } = scriptedFetch(...script);
  return { tocsin: new Tocsin("key", { fetch, baseUrl: "http://tocsin.test" }), calls };
}

const query = (call) => Object.fromEntries(new URL(call.url).searchParams);

describe("events.list", () => {
  test("awaited, it is one page: items, nextCursor and the response fields", async () => {
    const { tocsin, calls } = client(page([3, 2], "c2"));
    const first = await tocsin.events.list({ limit: 2 });
    assert.ok(first instanceof Page);
    assert.deepEqual(first.items.map((e) => e.id), ["evt_3", "evt_2"]);
    assert.equal(first.nextCursor, "c2");
    assert.equal(first.hasNextPage(), true);
    assert.deepEqual(first.data, { items: [event(3), event(2)], nextCursor: "c2" });
    assert.equal(first.statusCode, 200);
    assert.equal(typeof first.requestId, "string");
    assert.equal(first.rateLimit.limit, 100);
    assert.equal(calls.length, 1, "awaiting fetches the first page only");
    assert.equal(calls[0].init.method, "GET");
    assert.equal(calls[0].url, "http://tocsin.test/v1/events?limit=2");
  });

  test("it is a real Promise", async () => {
    const { tocsin } = client(page([1], null));
    const promise = tocsin.events.list();
    assert.ok(promise instanceof Promise);
    assert.ok(promise instanceof PagePromise);
    const chained = promise.then((p) => p.items.length);
    assert.equal(chained instanceof PagePromise, false);
    assert.equal(await chained, 1);
  });

  test("iterated, it yields every item of every page in order, following nextCursor with the same filters", async () => {
    const { tocsin, calls } = client(page([6, 5], "c2"), page([4, 3], "c3"), page([2, 1], null));
    const ids = [];
    for await (const e of tocsin.events.list({ channel: "payments", limit: 2 })) ids.push(e.id);
    assert.deepEqual(ids, ["evt_6", "evt_5", "evt_4", "evt_3", "evt_2", "evt_1"]);
    assert.deepEqual(calls.map(query), [
      { channel: "payments", limit: "2" },
      { channel: "payments", limit: "2", cursor: "c2" },
      { channel: "payments", limit: "2", cursor: "c3" },
    ]);
  });

  test("a page is iterable too: its items, then the following pages'", async () => {
    const { tocsin, calls } = client(page([4, 3], "c2"), page([2, 1], null));
    const first = await tocsin.events.list({ limit: 2 });
    const ids = [];
    for await (const e of first) ids.push(e.id);
    assert.deepEqual(ids, ["evt_4", "evt_3", "evt_2", "evt_1"]);
    assert.equal(calls.length, 2);
  });

  test("iteration fetches a page only when the loop gets to it", async () => {
    const { tocsin, calls } = client(page([4, 3], "c2"), page([2, 1], null));
    for await (const e of tocsin.events.list()) {
      assert.equal(e.id, "evt_4");
      break;
    }
    assert.equal(calls.length, 1);
  });

  test("nextPage() fetches the next page; on the last page it rejects", async () => {
    const { tocsin, calls } = client(page([2], "c2"), page([1], null));
    const first = await tocsin.events.list({ tag: "eu" });
    const second = await first.nextPage();
    assert.deepEqual(second.items.map((e) => e.id), ["evt_1"]);
    assert.equal(second.nextCursor, null);
    assert.equal(second.hasNextPage(), false);
    assert.deepEqual(query(calls[1]), { tag: "eu", cursor: "c2" });
    await assert.rejects(second.nextPage(), /last page/);
    assert.equal(calls.length, 2);
  });

  test("an empty first page iterates to nothing", async () => {
    const { tocsin } = client(page([], null));
    const ids = [];
    for await (const e of tocsin.events.list()) ids.push(e.id);
    assert.deepEqual(ids, []);
  });

  test("a cursor repeated by the service stops the iteration instead of looping", async () => {
    const { tocsin } = client(page([2], "c2"), page([1], "c2"));
    const ids = [];
    await assert.rejects(async () => {
      for await (const e of tocsin.events.list()) ids.push(e.id);
    }, /same cursor/);
    assert.deepEqual(ids, ["evt_2", "evt_1"]);
  });

  test("every filter is sent; Dates as RFC 3339 UTC, strings as given", async () => {
    const { tocsin, calls } = client(page([], null));
    await tocsin.events.list({
      channel: "pay ments",
      tag: "eu&us",
      userId: "user/7",
      q: "Card declined",
      since: new Date(Date.UTC(2026, 10, 23, 6, 0, 0, 123)),
      until: "2026-11-23T07:00:00.5+01:00",
      limit: 100,
      cursor: "opaque=/+",
    });
    assert.deepEqual(query(calls[0]), {
      channel: "pay ments",
      tag: "eu&us",
      userId: "user/7",
      q: "Card declined",
      since: "2026-11-23T06:00:00.123Z",
      until: "2026-11-23T07:00:00.5+01:00",
      limit: "100",
      cursor: "opaque=/+",
    });
  });

  test("filters left undefined or null are not sent", async () => {
    const { tocsin, calls } = client(page([], null));
    await tocsin.events.list({ channel: undefined, tag: null, q: "x" });
    assert.equal(calls[0].url, "http://tocsin.test/v1/events?q=x");
  });

  test("an invalid Date rejects without sending anything", async () => {
    const { tocsin, calls } = client();
    await assert.rejects(tocsin.events.list({ since: new Date("nope") }), (error) => {
      assert.ok(error instanceof TocsinError);
      assert.match(error.message, /since is an invalid Date/);
      return true;
    });
    assert.equal(calls.length, 0);
  });

  test("an error on a later page is thrown from the loop after the earlier items", async () => {
    const { tocsin } = client(page([2], "c2"), fail(400, "invalid cursor", { details: [{ path: ["query", "cursor"], message: "bad" }] }));
    const ids = [];
    await assert.rejects(async () => {
      for await (const e of tocsin.events.list()) ids.push(e.id);
    }, (error) => error instanceof ApiError && error.statusCode === 400);
    assert.deepEqual(ids, ["evt_2"]);
  });

  test("each page goes through the retry loop", async () => {
    const { fetch, calls } = scriptedFetch(page([2], "c2"), fail(503, "store unavailable"), page([1], null));
    const tocsin = new RecordingTocsin("key", { fetch });
    const ids = [];
    for await (const e of tocsin.events.list()) ids.push(e.id);
    assert.deepEqual(ids, ["evt_2", "evt_1"]);
    assert.equal(calls.length, 3);
    assert.equal(tocsin.sleeps.length, 1);
    assert.deepEqual(query(calls[2]), { cursor: "c2" });
  });

  test("per-call options apply to every page", async () => {
    const { tocsin, calls } = client(page([2], "c2"), page([1], null));
    for await (const _ of tocsin.events.list({}, { headers: { "X-Trace": "t1" } })) {
      // drain
    }
    assert.deepEqual(calls.map((c) => c.headers["X-Trace"]), ["t1", "t1"]);
  });

  test("a failed first page rejects the awaited promise", async () => {
    const { tocsin } = client(fail(401, "invalid API key"));
    await assert.rejects(tocsin.events.list(), (error) => error instanceof ApiError && error.statusCode === 401);
  });
});

describe("users.list", () => {
  const user = (n) => ({
    userId: `user_${n}`,
    properties: { plan: "pro" },
    aliases: [],
    firstSeenAt: "2025-01-01T00:00:00Z",
    lastSeenAt: "2025-01-01T00:00:00Z",
    eventCount: n,
    createdAt: "2025-01-01T00:00:00Z",
    updatedAt: "2025-01-01T00:00:00Z",
  });
  const users = (numbers, nextCursor) => ok({ items: numbers.map(user), nextCursor }, { status: 200 });

  test("awaited, it is one Page; iterated, every user of every page, the filters kept", async () => {
    const { tocsin, calls } = client(users([3, 2], "c2"), users([3, 2], "c2"), users([1], null));
    const first = await tocsin.users.list({ property: "plan:pro", limit: 2 });
    assert.ok(first instanceof Page);
    assert.deepEqual(first.items.map((u) => u.userId), ["user_3", "user_2"]);
    assert.equal(first.nextCursor, "c2");
    const seen = [];
    for await (const u of tocsin.users.list({ property: "plan:pro", limit: 2 })) seen.push(u.userId);
    assert.deepEqual(seen, ["user_3", "user_2", "user_1"]);
    assert.equal(calls.length, 3);
    assert.deepEqual(query(calls[2]), { property: "plan:pro", limit: "2", cursor: "c2" });
  });

  test("nextPage() asks for the page after, and the last page says so", async () => {
    const { tocsin, calls } = client(users([2], "c2"), users([1], null));
    const last = await (await tocsin.users.list({ q: "user" })).nextPage();
    assert.deepEqual(query(calls[1]), { q: "user", cursor: "c2" });
    assert.equal(last.hasNextPage(), false);
    await assert.rejects(last.nextPage(), TocsinError);
  });
});
