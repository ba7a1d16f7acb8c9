// Insights, users and history against a real ingest process (embedded mode,
// SQLite), with the packed client: insights.set/increment/list/delete,
// increments racing each other, users.list and its filters and pages,
// events recorded into the past (`timestamp`), the event fields LogSnag's
// track has (icon shortcodes, markdown, url), and tocsin.stream carrying
// insight changes beside events.
//
//   INGEST_BIN=../../target/debug/ingest npm run test:integration
//
// This file has its own ingest, so the project's insights are its own.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { countingFetch, installPackedClient, startIngest } from "./helpers.mjs";

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Guards against a hang, never a speed assertion.
const STREAM_TEST = { timeout: 60_000 };

let ingest;
let client;
let apiKey;
let tocsin;

before(async () => {
  ingest = await startIngest();
  // The concurrent increments alone exceed the default 100 requests a minute.
  apiKey = await ingest.createKey({ rateLimit: 100_000 });
  client = await installPackedClient();
  tocsin = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
});

after(async () => {
  await ingest?.stop();
  await client?.cleanup();
});

const unique = (label) => `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

describe("insights against ingest", () => {
  test("set creates an insight (201), set again replaces its value (200) and keeps its icon", async () => {
    const title = unique("Revenue today");
    const created = await tocsin.insights.set(title, 1250, { icon: ":moneybag:" });
    assert.equal(created.statusCode, 201);
    assert.match(created.requestId, UUID_RE);
    assert.equal(created.wasReplayed, false);
    assert.ok(created.rateLimit && created.rateLimit.limit > 0);
    const { createdAt, updatedAt, ...fields } = created.data;
    assert.deepEqual(fields, { title, value: 1250, icon: "💰" }, "the shortcode is stored as the emoji");
    assert.equal(createdAt, updatedAt);

    const updated = await tocsin.insights.set(title, 1300.5);
    assert.equal(updated.statusCode, 200);
    assert.equal(updated.data.value, 1300.5);
    assert.equal(updated.data.icon, "💰", "an icon left out stays");
    assert.equal(updated.data.createdAt, createdAt);
    assert.ok(Date.parse(updated.data.updatedAt) >= Date.parse(createdAt));

    const text = await tocsin.insights.set(title, "green");
    assert.equal(text.data.value, "green");
    const flag = await tocsin.insights.set(title, false, { icon: "🚦" });
    assert.equal(flag.data.value, false);
    assert.equal(flag.data.icon, "🚦");
  });

  test("increment creates a missing insight holding the amount (201), then adds (200)", async () => {
    const title = unique("Active trials");
    const first = await tocsin.insights.increment(title, 2, { icon: "🧪" });
    assert.equal(first.statusCode, 201);
    assert.equal(first.data.value, 2);
    assert.equal(first.data.icon, "🧪");
    const second = await tocsin.insights.increment(title, -5);
    assert.equal(second.statusCode, 200);
    assert.equal(second.data.value, -3);
    const fraction = await tocsin.insights.increment(title, 0.5);
    assert.equal(fraction.data.value, -2.5);
  });

  test("concurrent increments from several clients add up exactly", async () => {
    const title = unique("Signups");
    await tocsin.insights.set(title, 0);
    const clients = Array.from({ length: 4 }, () => new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl }));
    const increments = Array.from({ length: 60 }, (_, i) => clients[i % clients.length].insights.increment(title, i % 3 === 0 ? 2 : 1));
    const answers = await Promise.all(increments);
    const expected = Array.from({ length: 60 }, (_, i) => (i % 3 === 0 ? 2 : 1)).reduce((a, b) => a + b, 0);
    // Every answer is the value right after its own increment: all different, the largest the total.
    const values = answers.map((answer) => answer.data.value).sort((a, b) => a - b);
    assert.equal(new Set(values).size, values.length, `each increment was applied on its own: ${values}`);
    assert.equal(values.at(-1), expected);
    const listed = (await tocsin.insights.list()).data.insights.find((insight) => insight.title === title);
    assert.equal(listed.value, expected);
  });

  test("an increment retried with its idempotency key is replayed, not added twice", async () => {
    const title = unique("Orders");
    const key = unique("order-1042");
    const first = await tocsin.insights.increment(title, 1, { idempotencyKey: key });
    const again = await tocsin.insights.increment(title, 1, { idempotencyKey: key });
    assert.equal(first.wasReplayed, false);
    assert.equal(again.wasReplayed, true);
    assert.deepEqual(again.data, first.data);
    const listed = (await tocsin.insights.list()).data.insights.find((insight) => insight.title === title);
    assert.equal(listed.value, 1);
  });

  test("incrementing a string is a ValidationError at value, not retried, and changes nothing", async () => {
    const { Tocsin, ValidationError, ApiError } = client.esm;
    const title = unique("Build");
    await tocsin.insights.set(title, "green");
    const counter = countingFetch();
    const counted = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(counted.insights.increment(title, 1), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.ok(error instanceof ApiError);
      assert.equal(error.statusCode, 400);
      assert.match(error.requestId, UUID_RE);
      const paths = error.details.map((detail) => JSON.stringify(detail.path));
      assert.deepEqual(paths, ['["value"]']);
      assert.match(error.details[0].message, /string/);
      return true;
    });
    assert.equal(counter.calls, 1, "a 400 is not retried");
    const listed = (await tocsin.insights.list()).data.insights.find((insight) => insight.title === title);
    assert.equal(listed.value, "green");
  });

  test("a sum beyond 2^53 − 1 is a ValidationError at value.$inc", async () => {
    const title = unique("Huge");
    await tocsin.insights.set(title, Number.MAX_SAFE_INTEGER - 1);
    await assert.rejects(tocsin.insights.increment(title, 2), (error) => {
      assert.ok(error instanceof client.esm.ValidationError);
      assert.ok(error.details.some((detail) => JSON.stringify(detail.path) === '["value","$inc"]'), JSON.stringify(error.details));
      return true;
    });
  });

  test("list answers every insight in the order they were created", async () => {
    const titles = [unique("List a"), unique("List b"), unique("List c")];
    for (const title of titles) await tocsin.insights.set(title, 1);
    await tocsin.insights.increment(titles[0], 1); // a change does not move it
    const res = await tocsin.insights.list();
    assert.equal(res.statusCode, 200);
    const listed = res.data.insights.map((insight) => insight.title).filter((title) => titles.includes(title));
    assert.deepEqual(listed, titles);
    for (const insight of res.data.insights) {
      assert.deepEqual(Object.keys(insight).sort(), ["createdAt", "icon", "title", "updatedAt", "value"]);
    }
  });

  test("delete removes it (title URL-encoded); deleting it again is a NotFoundError, not retried", async () => {
    const { Tocsin, NotFoundError, ApiError } = client.esm;
    const title = unique("EU / revenue? #1 100%");
    await tocsin.insights.set(title, 7);
    const res = await tocsin.insights.delete(title);
    assert.equal(res.statusCode, 200);
    assert.equal(res.data.title, title);
    assert.equal(res.data.deleted, true);
    assert.ok(!Number.isNaN(Date.parse(res.data.deletedAt)));
    const listed = (await tocsin.insights.list()).data.insights;
    assert.equal(listed.some((insight) => insight.title === title), false);

    const counter = countingFetch();
    const counted = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(counted.insights.delete(title), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.ok(error instanceof ApiError);
      assert.equal(error.statusCode, 404);
      assert.match(error.message, /insight/i, "the 404 is about the insight, not a missing route");
      return true;
    });
    assert.equal(counter.calls, 1);
  });

  test("the CommonJS build sets and lists the same way", async () => {
    const cjs = new client.cjs.Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const title = unique("CommonJS");
    assert.equal((await cjs.insights.set(title, 1)).statusCode, 201);
    assert.equal((await cjs.insights.increment(title, 1)).data.value, 2);
    assert.ok((await cjs.insights.list()).data.insights.some((insight) => insight.title === title));
  });
});

describe("users against ingest", () => {
  const prefix = unique("it-users");
  const ids = [];

  before(async () => {
    // Five users, seen one after another: the last is the most recently seen.
    for (let i = 0; i < 5; i++) {
      const userId = `${prefix}-${i}`;
      ids.push(userId);
      await tocsin.identify({ user_id: userId, properties: { plan: i % 2 === 0 ? "pro" : "free", seats: i }, aliases: [`${userId}@example.com`] });
      await tocsin.events.create({ channelName: "it-users", title: `Signed in ${i}`, userId, notify: false });
    }
  });

  test("list pages through the users most recently seen first, each once", async () => {
    const counter = countingFetch();
    const counted = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    const first = await counted.users.list({ q: prefix, limit: 2 });
    assert.ok(first instanceof client.esm.Page);
    assert.equal(first.statusCode, 200);
    assert.deepEqual(first.items.map((user) => user.userId), [ids[4], ids[3]]);
    assert.equal(typeof first.nextCursor, "string");

    counter.calls = 0;
    const seen = [];
    for await (const user of counted.users.list({ q: prefix, limit: 2 })) seen.push(user.userId);
    assert.deepEqual(seen, [...ids].reverse());
    assert.equal(counter.calls, 3, "pages of 2, 2 and 1");

    const sizes = [];
    let page = await counted.users.list({ q: prefix, limit: 2 });
    sizes.push(page.items.length);
    while (page.hasNextPage()) {
      page = await page.nextPage();
      sizes.push(page.items.length);
    }
    assert.deepEqual(sizes, [2, 2, 1]);
    assert.equal(page.nextCursor, null);
  });

  test("each listed user has its properties, aliases and counters", async () => {
    const [user] = (await tocsin.users.list({ q: ids[2] })).items;
    assert.equal(user.userId, ids[2]);
    assert.deepEqual(user.properties, { plan: "pro", seats: 2 });
    assert.deepEqual(user.aliases, [`${ids[2]}@example.com`]);
    assert.equal(user.eventCount, 1);
    assert.ok(Date.parse(user.firstSeenAt) <= Date.parse(user.lastSeenAt));
    assert.ok(!Number.isNaN(Date.parse(user.createdAt)));
    assert.ok(!Number.isNaN(Date.parse(user.updatedAt)));
  });

  test("q matches the id or an alias, ignoring case; property matches a string or a number", async () => {
    const byAlias = [];
    for await (const user of tocsin.users.list({ q: `${prefix}-3@EXAMPLE` })) byAlias.push(user.userId);
    assert.deepEqual(byAlias, [ids[3]]);

    const pro = [];
    for await (const user of tocsin.users.list({ q: prefix, property: "plan:pro" })) pro.push(user.userId);
    assert.deepEqual(pro, [ids[4], ids[2], ids[0]]);

    const seats = [];
    for await (const user of tocsin.users.list({ q: prefix, property: "seats:3" })) seats.push(user.userId);
    assert.deepEqual(seats, [ids[3]]);

    assert.deepEqual((await tocsin.users.list({ q: `${prefix}-nobody` })).items, []);
  });

  test("a property without a colon, or a limit out of range, is a ValidationError naming the parameter", async () => {
    const { ValidationError } = client.esm;
    for (const [params, parameter] of [[{ property: "plan" }, "property"], [{ limit: 101 }, "limit"]]) {
      await assert.rejects(tocsin.users.list(params), (error) => {
        assert.ok(error instanceof ValidationError, `${JSON.stringify(params)}: ${error}`);
        assert.ok(error.details.some((detail) => JSON.stringify(detail.path) === JSON.stringify(["query", parameter])), JSON.stringify(error.details));
        return true;
      });
    }
  });

  test("get by an alias answers the user, with its counters", async () => {
    const res = await tocsin.users.get(`${ids[1]}@example.com`);
    assert.equal(res.statusCode, 200);
    assert.equal(res.data.user_id, ids[1]);
    assert.equal(res.data.eventCount, 1);
    assert.deepEqual(res.data.properties, { plan: "free", seats: 1 });
    const listed = (await tocsin.users.list({ q: ids[1] })).items[0];
    assert.equal(res.data.firstSeenAt, listed.firstSeenAt);
    assert.equal(res.data.lastSeenAt, listed.lastSeenAt);
  });
});

describe("history and the event fields of LogSnag's track", () => {
  test("an event with a Date timestamp is recorded at that time, never pushed, and listed at its time", async () => {
    const channel = unique("it-history");
    const userId = unique("it-history-user");
    const at = new Date(Date.now() - 3 * 86_400_000);
    at.setUTCMilliseconds(123);
    const res = await tocsin.events.create({ channelName: channel, title: "Imported", timestamp: at, notify: true, userId });
    assert.equal(res.statusCode, 201);
    assert.equal(Date.parse(res.data.createdAt), at.getTime(), `createdAt ${res.data.createdAt}`);
    assert.equal(res.data.notify, false, "history is never pushed, whatever notify says");
    assert.equal(res.data.notification.state, "skipped");

    const now = await tocsin.events.create({ channelName: channel, title: "Now", notify: false, userId });
    const listed = [];
    for await (const event of tocsin.events.list({ channel })) listed.push(event.id);
    assert.deepEqual(listed, [now.data.id, res.data.id], "newest first, by when they happened");
    const before = [];
    for await (const event of tocsin.events.list({ channel, until: new Date(at.getTime() + 1) })) before.push(event.id);
    assert.deepEqual(before, [res.data.id]);

    const user = (await tocsin.users.get(userId)).data;
    assert.equal(Date.parse(user.firstSeenAt), at.getTime(), "the user was first seen when the imported event happened");
    assert.equal(user.eventCount, 2);
  });

  test("a timestamp as Unix seconds or an RFC 3339 string works too; one in the future is a ValidationError", async () => {
    const seconds = Math.floor(Date.now() / 1000) - 3600;
    const bySeconds = await tocsin.events.create({ channelName: "it-history", title: "Seconds", timestamp: seconds });
    assert.equal(Date.parse(bySeconds.data.createdAt), seconds * 1000);
    const text = new Date(Date.now() - 7200_000).toISOString();
    const byText = await tocsin.events.create({ channelName: "it-history", title: "Text", timestamp: text });
    assert.equal(Date.parse(byText.data.createdAt), Date.parse(text));
    await assert.rejects(tocsin.events.create({ channelName: "it-history", title: "Future", timestamp: new Date(Date.now() + 3_600_000) }), (error) => {
      assert.ok(error instanceof client.esm.ValidationError);
      assert.ok(error.details.some((detail) => JSON.stringify(detail.path) === '["timestamp"]'), JSON.stringify(error.details));
      return true;
    });
  });

  test(":moneybag: comes back as 💰; markdown comes back rendered and sanitised; url as sent", async () => {
    const res = await tocsin.events.create({
      channelName: "it-fields",
      title: "Refund",
      icon: ":moneybag:",
      parser: "markdown",
      description: "**Refunded** <script>alert(1)</script>",
      url: "https://billing.example.com/orders/1042",
      notify: false,
    });
    assert.equal(res.data.icon, "💰");
    assert.equal(res.data.parser, "markdown");
    assert.match(res.data.descriptionHtml, /<strong>Refunded<\/strong>/);
    assert.doesNotMatch(res.data.descriptionHtml, /<script/);
    assert.equal(res.data.url, "https://billing.example.com/orders/1042");
    const plain = await tocsin.events.create({ channelName: "it-fields", title: "Plain", description: "**as is**", notify: false });
    assert.equal(plain.data.parser, "text");
    assert.equal(plain.data.descriptionHtml, null);
    assert.equal(plain.data.url, null);
    assert.deepEqual((await tocsin.events.get(res.data.id)).data.descriptionHtml, res.data.descriptionHtml);
  });

  test("an unknown shortcode or a URL that is not http(s) is a ValidationError naming the field", async () => {
    await assert.rejects(
      tocsin.events.create({ channelName: "it-fields", title: "t", icon: ":no_such_emoji:", url: "ftp://example.com/x" }),
      (error) => {
        assert.ok(error instanceof client.esm.ValidationError);
        const paths = error.details.map((detail) => JSON.stringify(detail.path));
        assert.ok(paths.includes('["icon"]') && paths.includes('["url"]'), `details: ${paths}`);
        return true;
      },
    );
  });
});

/** A fetch that resolves `opened` once the stream's response headers are in. */
function openedFetch() {
  let resolve;
  const opened = new Promise((ok) => (resolve = ok));
  return {
    opened,
    fetch: async (url, init) => {
      const response = await globalThis.fetch(url, init);
      resolve();
      return response;
    },
  };
}

describe("the insight limit against ingest", () => {
  test("a project's 101st insight is a ConflictError, answered at once and not retried", async () => {
    const { Tocsin, ConflictError } = client.esm;
    const existing = (await tocsin.insights.list()).data.insights.length;
    const filler = [];
    for (let i = existing; i < 100; i++) {
      const title = unique(`Filler ${i}`);
      filler.push(title);
      await tocsin.insights.set(title, i);
    }
    try {
      const counter = countingFetch();
      const counted = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
      for (const call of [() => counted.insights.set("One too many", 1), () => counted.insights.increment("One too many", 1)]) {
        counter.calls = 0;
        await assert.rejects(call(), (error) => {
          assert.ok(error instanceof ConflictError, String(error));
          assert.equal(error.statusCode, 409);
          assert.match(error.message, /100 insights/);
          return true;
        });
        assert.equal(counter.calls, 1, "no Retry-After: no request in flight, nothing to wait for");
      }
    } finally {
      for (const title of filler) await tocsin.insights.delete(title);
    }
  });
});

describe("tocsin.stream against ingest", () => {
  test("yields insight changes and events as they happen; events.stream skips the insights", STREAM_TEST, async () => {
    const channel = unique("it-live");
    const title = unique("Live revenue");
    const all = openedFetch();
    const eventsOnly = openedFetch();
    const messages = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: all.fetch }).stream({ channel });
    const events = new client.esm.Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: eventsOnly.fetch }).events.stream({ channel });
    const messageIterator = messages[Symbol.asyncIterator]();
    const eventIterator = events[Symbol.asyncIterator]();
    // Insight changes go to every stream whatever its channel: skip those of other tests' insights.
    const nextMessage = async () => {
      for (;;) {
        const { value, done } = await messageIterator.next();
        assert.equal(done, false, "the stream goes on");
        if (value.type === "event" || value.data.title === title) return value;
      }
    };
    const firstMessage = nextMessage();
    const firstEvent = eventIterator.next();
    await Promise.all([all.opened, eventsOnly.opened]);

    const set = await tocsin.insights.set(title, 10, { icon: "💰" });
    const inserted = await firstMessage;
    assert.equal(inserted.type, "insight");
    assert.deepEqual(inserted.data, set.data, "the message is the insight as the set answered it");

    const incremented = await tocsin.insights.increment(title, 5);
    let message = await nextMessage();
    // A poll may have folded several changes together; the latest value is what counts.
    while (message.type === "insight" && message.data.value !== 15) message = await nextMessage();
    assert.deepEqual(message, { type: "insight", data: incremented.data });

    const deleted = await tocsin.insights.delete(title);
    message = await nextMessage();
    assert.deepEqual(message, { type: "insight-deleted", data: deleted.data });

    const recorded = await tocsin.events.create({ channelName: channel, title: "After the insights", notify: false });
    message = await nextMessage();
    assert.equal(message.type, "event");
    assert.equal(message.id, recorded.data.id);
    assert.deepEqual(message.data, recorded.data);
    assert.equal(messages.lastEventId, recorded.data.id);

    const { value: event } = await firstEvent;
    assert.deepEqual(event, recorded.data, "events.stream went past the insight messages to the event");
    assert.equal(events.lastEventId, recorded.data.id);
    await Promise.all([messageIterator.return(), eventIterator.return()]);
  });
});
