// Where the API key and base URL come from: the constructor, the options, or
// TOCSIN_API_KEY and TOCSIN_BASE_URL; what a bad base URL does; and that a
// ConnectionError names the URL it tried.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { ConnectionError, Tocsin, TocsinError } from "../../dist/esm/index.js";
import { EVENT, RecordingTocsin, header, ok, scriptedFetch, withEnv } from "./helpers.mjs";

const PARAMS = { channelName: "payments", title: "Payment failed" };
const refused = () => new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") });

/** The bearer token and URL of one events.create made by `tocsin`. */
async function sent(makeClient) {
  const { fetch, calls } = scriptedFetch(ok(EVENT));
  await makeClient(fetch).events.create(PARAMS);
  return { token: header(calls[0], "Authorization"), url: calls[0].url };
}

describe("the API key", () => {
  test("without one, TOCSIN_API_KEY is sent as the bearer token", async () => {
    await withEnv({ TOCSIN_API_KEY: "tk_from_env" }, async () => {
      assert.equal((await sent((fetch) => new Tocsin({ fetch }))).token, "Bearer tk_from_env");
      assert.equal((await sent((fetch) => new Tocsin(undefined, { fetch }))).token, "Bearer tk_from_env");
      assert.equal((await sent((fetch) => new Tocsin(process.env.TOCSIN_OTHER, { fetch }))).token, "Bearer tk_from_env");
    });
  });

  test("a key given wins over TOCSIN_API_KEY; the constructor's argument wins over the apiKey option", async () => {
    await withEnv({ TOCSIN_API_KEY: "tk_from_env" }, async () => {
      assert.equal((await sent((fetch) => new Tocsin("tk_arg", { fetch }))).token, "Bearer tk_arg");
      assert.equal((await sent((fetch) => new Tocsin({ apiKey: "tk_option", fetch }))).token, "Bearer tk_option");
      assert.equal((await sent((fetch) => new Tocsin("tk_arg", { apiKey: "tk_option", fetch }))).token, "Bearer tk_arg");
    });
  });

  test("is read when the client is built, not at each call", async () => {
    const { fetch, calls } = scriptedFetch(ok(EVENT));
    const tocsin = await withEnv({ TOCSIN_API_KEY: "tk_first" }, () => new Tocsin({ fetch }));
    await withEnv({ TOCSIN_API_KEY: "tk_second" }, () => tocsin.events.create(PARAMS));
    assert.equal(header(calls[0], "Authorization"), "Bearer tk_first");
  });

  test("none anywhere is refused, and the message names TOCSIN_API_KEY", async () => {
    await withEnv({ TOCSIN_API_KEY: undefined }, () => {
      for (const make of [() => new Tocsin(), () => new Tocsin(undefined), () => new Tocsin({ baseUrl: "http://127.0.0.1:1" })]) {
        assert.throws(make, (error) => error instanceof TocsinError && /API key is required/.test(error.message) && /TOCSIN_API_KEY/.test(error.message));
      }
    });
  });

  test("a blank TOCSIN_API_KEY counts as unset, and surrounding whitespace is dropped", async () => {
    await withEnv({ TOCSIN_API_KEY: "  " }, () => {
      assert.throws(() => new Tocsin(), /API key is required/);
    });
    await withEnv({ TOCSIN_API_KEY: " tk_padded\n" }, async () => {
      assert.equal((await sent((fetch) => new Tocsin({ fetch }))).token, "Bearer tk_padded");
    });
  });

  test("an explicit empty key is refused, not replaced by TOCSIN_API_KEY", async () => {
    await withEnv({ TOCSIN_API_KEY: "tk_from_env" }, () => {
      assert.throws(() => new Tocsin(""), /API key is required/);
      assert.throws(() => new Tocsin({ apiKey: "" }), /API key is required/);
    });
  });

  test("options are given once: new Tocsin(options, options) is refused", () => {
    assert.throws(() => new Tocsin({ apiKey: "k" }, { timeout: 5 }), /Pass the options once/);
  });
});

describe("the base URL", () => {
  test("without one, TOCSIN_BASE_URL is used; the option wins over it", async () => {
    await withEnv({ TOCSIN_BASE_URL: "https://tocsin.example.com/prefix/" }, async () => {
      const fromEnv = new Tocsin("key");
      assert.equal(fromEnv.baseUrl, "https://tocsin.example.com/prefix");
      assert.equal((await sent((fetch) => new Tocsin("key", { fetch }))).url, "https://tocsin.example.com/prefix/v1/events");
      assert.equal((await sent((fetch) => new Tocsin("key", { fetch, baseUrl: "http://127.0.0.1:9999" }))).url, "http://127.0.0.1:9999/v1/events");
    });
  });

  test("a blank TOCSIN_BASE_URL counts as unset", async () => {
    await withEnv({ TOCSIN_BASE_URL: "" }, () => {
      assert.equal(new Tocsin("key").baseUrl, "http://127.0.0.1:8080");
    });
  });

  test("an invalid TOCSIN_BASE_URL is refused when the client is built, naming the variable", async () => {
    await withEnv({ TOCSIN_BASE_URL: "localhost:8080" }, () => {
      assert.throws(() => new Tocsin("key"), (error) => error instanceof TocsinError && /^TOCSIN_BASE_URL must be an http\(s\) URL/.test(error.message));
    });
  });

  test("must be an absolute http(s) URL without credentials, query or fragment, or a path", () => {
    for (const [baseUrl, message] of [
      ["", /^baseUrl must be an absolute http\(s\) URL/],
      ["127.0.0.1:8080", /^baseUrl must be an absolute http\(s\) URL/],
      ["ftp://files.example.com", /^baseUrl must be an http\(s\) URL/],
      ["https://user:secret@tocsin.example.com", /must not contain a user name or password/],
      ["https://tocsin.example.com/?x=1", /must not have a query or fragment/],
      ["https://tocsin.example.com/#top", /must not have a query or fragment/],
      [8080, /^baseUrl must be a string/],
    ]) {
      assert.throws(() => new Tocsin("key", { baseUrl }), (error) => error instanceof TocsinError && message.test(error.message), String(baseUrl));
    }
    // A path: same-origin calls from a page served behind the same proxy.
    assert.equal(new Tocsin("key", { baseUrl: "/tocsin/" }).baseUrl, "/tocsin");
    assert.equal(new Tocsin("key", { baseUrl: "https://tocsin.example.com" }).baseUrl, "https://tocsin.example.com");
  });

  test("the refusal of a URL with credentials does not repeat them", () => {
    assert.throws(() => new Tocsin("key", { baseUrl: "https://user:s3cret@tocsin.example.com" }), (error) => !error.message.includes("s3cret"));
  });
});

describe("a runtime without an environment (a browser)", () => {
  /** Runs `fn` with globalThis.process hidden, as in a browser. Synchronous, so nothing else runs meanwhile. */
  function withoutProcess(fn) {
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, "process");
    Object.defineProperty(globalThis, "process", { value: undefined, configurable: true, writable: true });
    try {
      return fn();
    } finally {
      Object.defineProperty(globalThis, "process", descriptor);
    }
  }

  test("reads no variables: a key is required and the base URL is the default", async () => {
    await withEnv({ TOCSIN_API_KEY: "tk_from_env", TOCSIN_BASE_URL: "https://tocsin.example.com" }, () => {
      assert.throws(() => withoutProcess(() => new Tocsin()), /API key is required/);
      const tocsin = withoutProcess(() => new Tocsin("key"));
      assert.equal(tocsin.baseUrl, "http://127.0.0.1:8080");
    });
  });
});

describe("ConnectionError", () => {
  test("names the URL it tried, in its message and its url, for every method", async () => {
    const tocsin = new RecordingTocsin("key", { baseUrl: "http://127.0.0.1:9/prefix", maxRetries: 0, fetch: () => Promise.reject(refused()) });
    const calls = {
      "/v1/events": () => tocsin.events.create(PARAMS),
      "/v1/events/evt_1": () => tocsin.events.get("evt_1"),
      "/v1/events?limit=5": () => tocsin.events.list({ limit: 5 }),
      "/v1/devices": () => tocsin.devices.list(),
      "/v1/channels": () => tocsin.channels.list(),
      "/v1/users/u%201": () => tocsin.users.get("u 1"),
      "/v1/stats/events": () => tocsin.stats.events(),
      "/v1/identify": () => tocsin.identify({ user_id: "u" }),
      "/v1/stream": async () => {
        for await (const _ of tocsin.events.stream()) assert.fail("no event");
      },
    };
    for (const [path, call] of Object.entries(calls)) {
      const url = `http://127.0.0.1:9/prefix${path}`;
      await assert.rejects(call(), (error) => {
        assert.ok(error instanceof ConnectionError, `${path}: ${error}`);
        assert.equal(error.url, url);
        assert.ok(error.message.includes(url), error.message);
        assert.match(error.message, /ECONNREFUSED/);
        return true;
      });
    }
  });

  test("names the URL taken from TOCSIN_BASE_URL", async () => {
    await withEnv({ TOCSIN_BASE_URL: "http://127.0.0.1:9" }, async () => {
      const tocsin = new Tocsin("key", { maxRetries: 0, fetch: () => Promise.reject(refused()) });
      await assert.rejects(tocsin.channels.list(), (error) => error instanceof ConnectionError && error.url === "http://127.0.0.1:9/v1/channels");
    });
  });
});
