// The packed client's SDK conventions (those of openai-node and stripe-node)
// against a real ingest process: configuration from the environment, an
// error class per status (a real 403 from a key without the scope),
// isTocsinError across the ESM and CommonJS builds loaded together, headers
// (defaults, per call, the client's identification and a browser's CORS
// preflight for them), per-call signals, and a disabled client that sends
// nothing.
//
//   INGEST_BIN=../../target/debug/ingest npm run test:integration

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { withEnv } from "../env.mjs";
import { countingFetch, freePort, installPackedClient, startIngest } from "./helpers.mjs";

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Guards against a hang, never a speed assertion.
const STREAM_TEST = { timeout: 60_000 };
const PAGE_ORIGIN = "http://app.test";

let ingest;
let client;
let apiKey;
/** A key that may only record events and identify users (scope events:write). */
let writeOnlyKey;

before(async () => {
  ingest = await startIngest({ INGEST_CORS_ORIGINS: PAGE_ORIGIN });
  apiKey = await ingest.createKey();
  writeOnlyKey = await ingest.createKey({ scopes: ["events:write"] });
  client = await installPackedClient();
});

after(async () => {
  await ingest?.stop();
  await client?.cleanup();
});

/** A fetch that records the headers of every request and sends it on with the real fetch. */
function recordingFetch() {
  const requests = [];
  const fetch = (url, init) => {
    requests.push({ url, headers: { ...init.headers } });
    return globalThis.fetch(url, init);
  };
  return { fetch, requests };
}

const unique = (label) => `${label} ${Date.now()}-${Math.random().toString(16).slice(2)}`;

describe("configuration from the environment", () => {
  test("TOCSIN_API_KEY and TOCSIN_BASE_URL are enough, in both builds", async () => {
    await withEnv({ TOCSIN_API_KEY: apiKey, TOCSIN_BASE_URL: ingest.baseUrl }, async () => {
      for (const build of [client.esm, client.cjs]) {
        const tocsin = new build.Tocsin();
        assert.equal(tocsin.baseUrl, ingest.baseUrl);
        const res = await tocsin.events.create({ channelName: "it-env", title: "From the environment", notify: false });
        assert.equal(res.statusCode, 201);
        assert.equal(res.sent, true);
      }
    });
  });

  test("a ConnectionError names the URL it tried, also when it came from TOCSIN_BASE_URL", async () => {
    const url = `http://127.0.0.1:${await freePort()}/tocsin`;
    await withEnv({ TOCSIN_API_KEY: apiKey, TOCSIN_BASE_URL: url }, async () => {
      const { Tocsin, ConnectionError } = client.esm;
      await assert.rejects(new Tocsin({ maxRetries: 0 }).channels.list(), (error) => {
        assert.ok(error instanceof ConnectionError);
        assert.equal(error.url, `${url}/v1/channels`);
        assert.ok(error.message.includes(`${url}/v1/channels`), error.message);
        assert.match(error.message, /ECONNREFUSED/);
        return true;
      });
    });
  });
});

describe("error classes per status", () => {
  test("an unknown key is an AuthenticationError (401), not retried", async () => {
    for (const build of [client.esm, client.cjs]) {
      const counter = countingFetch();
      const tocsin = new build.Tocsin("tk_not_a_real_key", { baseUrl: ingest.baseUrl, fetch: counter.fetch });
      await assert.rejects(tocsin.events.create({ channelName: "it", title: "t" }), (error) => {
        assert.ok(error instanceof build.AuthenticationError);
        assert.ok(error instanceof build.ApiError);
        assert.equal(error.name, "AuthenticationError");
        assert.equal(error.statusCode, 401);
        assert.match(error.requestId, UUID_RE);
        return true;
      });
      assert.equal(counter.calls, 1);
    }
  });

  test("a key without events:read gets a PermissionDeniedError (403) naming the scope on every read, not retried", STREAM_TEST, async () => {
    const { Tocsin, PermissionDeniedError } = client.esm;
    const counter = countingFetch();
    const tocsin = new Tocsin(writeOnlyKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    const reads = {
      "events.list": () => tocsin.events.list(),
      "events.get": () => tocsin.events.get("01890000-0000-7000-8000-000000000000"),
      "channels.list": () => tocsin.channels.list(),
      "users.get": () => tocsin.users.get("user_7"),
      "stats.events": () => tocsin.stats.events(),
      "events.stream": async () => {
        for await (const _ of tocsin.events.stream()) assert.fail("no event");
      },
    };
    for (const [name, read] of Object.entries(reads)) {
      counter.calls = 0;
      await assert.rejects(read(), (error) => {
        assert.ok(error instanceof PermissionDeniedError, `${name}: ${error}`);
        assert.equal(error.name, "PermissionDeniedError");
        assert.equal(error.statusCode, 403);
        assert.match(error.message, /events:read/);
        assert.match(error.requestId, UUID_RE);
        return true;
      });
      assert.equal(counter.calls, 1, `${name} is not retried`);
    }
    // The same key still does what its scope allows.
    const res = await tocsin.events.create({ channelName: "it-scopes", title: "Written", notify: false });
    assert.equal(res.statusCode, 201);
  });

  test("a key without devices:write gets a PermissionDeniedError on devices.register", async () => {
    const { Tocsin, PermissionDeniedError } = client.cjs;
    const tocsin = new Tocsin(writeOnlyKey, { baseUrl: ingest.baseUrl });
    await assert.rejects(tocsin.devices.register({ token: "ab".repeat(32), environment: "sandbox" }), (error) => {
      assert.ok(error instanceof PermissionDeniedError);
      assert.match(error.message, /devices:write/);
      return true;
    });
  });

  test("an idempotency key reused with another body is a ConflictError (422), not retried", async () => {
    const { Tocsin, ConflictError } = client.esm;
    const counter = countingFetch();
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    const key = unique("it-conflict");
    await tocsin.events.create({ channelName: "it", title: "one", notify: false }, { idempotencyKey: key });
    counter.calls = 0;
    await assert.rejects(tocsin.events.create({ channelName: "it", title: "two", notify: false }, { idempotencyKey: key }), (error) => {
      assert.ok(error instanceof ConflictError);
      assert.equal(error.name, "ConflictError");
      assert.equal(error.statusCode, 422);
      return true;
    });
    assert.equal(counter.calls, 1);
  });

  test("an unknown event is a NotFoundError (404)", async () => {
    const { Tocsin, NotFoundError } = client.esm;
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    await assert.rejects(tocsin.events.get("01890000-0000-7000-8000-000000000000"), NotFoundError);
  });
});

describe("isTocsinError with both builds loaded", () => {
  test("recognises the errors either build throws, where instanceof only knows its own build's classes", async () => {
    const thrown = [];
    for (const build of [client.esm, client.cjs]) {
      const tocsin = new build.Tocsin(writeOnlyKey, { baseUrl: ingest.baseUrl });
      thrown.push(await tocsin.channels.list().catch((error) => error));
    }
    const [fromEsm, fromCjs] = thrown;
    assert.equal(fromEsm instanceof client.cjs.TocsinError, false);
    assert.equal(fromCjs instanceof client.esm.TocsinError, false);
    for (const checker of [client.esm, client.cjs]) {
      assert.equal(checker.isTocsinError(fromEsm), true);
      assert.equal(checker.isTocsinError(fromCjs), true);
      assert.equal(checker.isTocsinError(new Error("not ours")), false);
    }
    assert.equal(fromCjs.name, "PermissionDeniedError");
  });
});

describe("headers", () => {
  test("every request carries User-Agent and X-Tocsin-Client: tocsin-js/<version>", async () => {
    const { Tocsin, VERSION } = client.esm;
    const { version } = JSON.parse(await readFile(join(client.installedAt, "package.json"), "utf8"));
    assert.equal(VERSION, version, "the installed package's VERSION is its package.json version");
    const { fetch, requests } = recordingFetch();
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch });
    await tocsin.events.create({ channelName: "it-headers", title: "Headers", notify: false });
    await tocsin.channels.list();
    for (const request of requests) {
      assert.equal(request.headers["User-Agent"], `tocsin-js/${version}`);
      assert.equal(request.headers["X-Tocsin-Client"], `tocsin-js/${version}`);
    }
  });

  test("a browser may send every header the client sends: ingest's CORS preflight allows them", async () => {
    const { Tocsin } = client.esm;
    const { fetch, requests } = recordingFetch();
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch, defaultHeaders: { "X-Team": "payments" } });
    await tocsin.events.create({ channelName: "it-cors", title: "CORS", notify: false });
    const names = Object.keys(requests[0].headers).map((name) => name.toLowerCase());
    assert.ok(names.includes("x-tocsin-client") && names.includes("idempotency-key") && names.includes("x-team"), names.join());

    // What a browser asks before it sends them (it never asks for safelisted ones like Accept).
    const preflight = await globalThis.fetch(`${ingest.baseUrl}/v1/events`, {
      method: "OPTIONS",
      headers: {
        Origin: PAGE_ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": names.filter((name) => name !== "accept").sort().join(","),
      },
    });
    assert.ok(preflight.status === 200 || preflight.status === 204, `preflight answered ${preflight.status}`);
    assert.equal(preflight.headers.get("access-control-allow-origin"), PAGE_ORIGIN);
    const allowed = (preflight.headers.get("access-control-allow-headers") ?? "").split(",").map((name) => name.trim().toLowerCase());
    for (const name of names.filter((name) => name !== "accept")) assert.ok(allowed.includes(name), `${name} allowed: ${allowed.join()}`);
  });

  test("defaultHeaders reach the service, and a call's headers override them", async () => {
    const { Tocsin, AuthenticationError } = client.esm;
    // The key given to the client is wrong; the Authorization in defaultHeaders replaces it.
    const tocsin = new Tocsin("tk_wrong", { baseUrl: ingest.baseUrl, defaultHeaders: { Authorization: `Bearer ${apiKey}` } });
    const res = await tocsin.channels.list();
    assert.equal(res.statusCode, 200);
    await assert.rejects(tocsin.channels.list({ headers: { authorization: "Bearer tk_wrong_again" } }), AuthenticationError);
  });
});

describe("per-call signal", () => {
  test("aborting while paging through events.list throws AbortError and requests no further page", async () => {
    const { Tocsin, AbortError } = client.esm;
    const channel = unique("it-abort-list").replace(/\s/g, "-");
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    for (let i = 0; i < 3; i++) await tocsin.events.create({ channelName: channel, title: `E${i}`, notify: false });

    const counter = countingFetch();
    const counted = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    const controller = new AbortController();
    const titles = [];
    await assert.rejects(async () => {
      for await (const event of counted.events.list({ channel, limit: 1 }, { signal: controller.signal })) {
        titles.push(event.title);
        controller.abort();
      }
    }, AbortError);
    assert.deepEqual(titles, ["E2"]);
    assert.equal(counter.calls, 1);
  });

  test("an already aborted signal sends nothing", async () => {
    const { Tocsin, AbortError } = client.cjs;
    const counter = countingFetch();
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl, fetch: counter.fetch });
    await assert.rejects(tocsin.events.create({ channelName: "it", title: "never" }, { signal: AbortSignal.abort() }), AbortError);
    assert.equal(counter.calls, 0);
  });

  test("a signal in the options ends a live events.stream", STREAM_TEST, async () => {
    const { Tocsin } = client.esm;
    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const channel = unique("it-abort-stream").replace(/\s/g, "-");
    const controller = new AbortController();
    const stream = tocsin.events.stream({ channel }, { signal: controller.signal });
    const received = [];
    const reading = (async () => {
      for await (const event of stream) {
        received.push(event.title);
        controller.abort();
      }
    })();
    // Record until the stream (which connects in the background) has seen one.
    for (let i = 0; received.length === 0 && i < 200; i++) {
      await tocsin.events.create({ channelName: channel, title: "Live", notify: false });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await reading;
    assert.deepEqual(received, ["Live"]);
  });
});

describe("disabled client", () => {
  test("sends nothing: what it 'records' never reaches the service", async () => {
    const { Tocsin } = client.esm;
    const counter = countingFetch();
    const disabled = new Tocsin({ disabled: true, baseUrl: ingest.baseUrl, fetch: counter.fetch });
    const title = unique("it-disabled");
    const res = await disabled.events.create({ channelName: "it-disabled", title, notify: false });
    assert.equal(res.sent, false);
    assert.equal(res.statusCode, 0);
    assert.equal(res.data.title, title);
    assert.equal((await disabled.events.list()).items.length, 0);
    assert.equal(counter.calls, 0);

    const tocsin = new Tocsin(apiKey, { baseUrl: ingest.baseUrl });
    const found = await tocsin.events.list({ q: title });
    assert.deepEqual(found.items, []);
    const { NotFoundError } = client.esm;
    // Its made-up id names no event either.
    await assert.rejects(tocsin.events.get(res.data.id), NotFoundError);
  });
});
