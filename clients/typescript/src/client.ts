// The Tocsin client: configuration, and the one request loop every call goes
// through (headers, idempotency key, timeout, signal, retries, rate-limit
// tracking, and the disabled client's offline answers).

import { abortable, abortError, linkSignal, throwIfAborted } from "./abort.js";
import { notSent, offlineIdentity } from "./disabled.js";
import { readEnv } from "./env.js";
import { ConnectionError, TimeoutError, TocsinError, describeCause } from "./errors.js";
import { generateIdempotencyKey } from "./idempotency.js";
import type { RateLimit } from "./rate-limit.js";
import { Channels } from "./resources/channels.js";
import { Devices } from "./resources/devices.js";
import { Events } from "./resources/events.js";
import { Insights } from "./resources/insights.js";
import { Stats } from "./resources/stats.js";
import { liveStream, type LiveStream, type StreamOptions } from "./resources/stream.js";
import { Users } from "./resources/users.js";
import {
  errorFromResponse,
  parseSuccess,
  responseMeta,
  type RawResponse,
  type TocsinResponse,
} from "./response.js";
import { isRetryableStatus, retryDelay } from "./retry.js";
import type { SseMessage } from "./sse/parser.js";
import { readEventStream } from "./sse/stream.js";
import type { EventStreamParams, IdentifyParams, Identity } from "./types.js";
import { VERSION } from "./version.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";
export const DEFAULT_TIMEOUT = 30_000;
export const DEFAULT_MAX_RETRIES = 2;

/** What the client passes to `fetch`. Every standard `fetch` accepts it. */
export interface FetchInit {
  method: string;
  headers: Record<string, string>;
  body?: string;
  signal: AbortSignal;
}

/** What the client reads from a `fetch` response. Every standard `Response` has it. */
export interface FetchResponse {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
  /** The body as a stream; only `events.stream` reads it, and fails without it. */
  body?: ReadableStream<Uint8Array> | null;
}

/** A `fetch` implementation: the global one, undici's, node-fetch, a test double… */
export type Fetch = (url: string, init: FetchInit) => Promise<FetchResponse>;

/** What identifies this client to the service, in `User-Agent` and `X-Tocsin-Client`. */
export const CLIENT_ID = `tocsin-js/${VERSION}`;

/**
 * Headers to add to requests. Names are compared case-insensitively; a
 * value replaces the client's own header of that name, `null` removes it,
 * `undefined` leaves it as it is.
 */
export type RequestHeaders = Record<string, string | null | undefined>;

/** Settings of a {@link Tocsin} client. */
export interface ClientOptions {
  /**
   * The API key. Default: the `TOCSIN_API_KEY` environment variable (where
   * the runtime has one). A key given as the constructor's first argument wins.
   */
  apiKey?: string | undefined;
  /**
   * Where the service listens. Default: the `TOCSIN_BASE_URL` environment
   * variable, else `http://127.0.0.1:8080`. A path prefix (reverse proxy) is kept.
   */
  baseUrl?: string | undefined;
  /** Per-attempt timeout in milliseconds. Default 30000. */
  timeout?: number;
  /** Replaces the global `fetch` for every call. */
  fetch?: Fetch;
  /** Retries after a retryable failure (429, 409 in flight, 5xx, timeout, connection error). Default 2; 0 turns retries off. */
  maxRetries?: number;
  /** Sent with every call, over the client's own headers; a call's `headers` override these. */
  defaultHeaders?: RequestHeaders;
  /**
   * Sends nothing: every call resolves at once with `sent: false` and what
   * the service would have answered for a project that records nothing (no
   * API key needed). For tests and development.
   */
  disabled?: boolean;
}

/** Settings of one call. */
export interface RequestOptions {
  /** Overrides the client's timeout for this call, in milliseconds (each attempt). */
  timeout?: number;
  /** Overrides the client's maxRetries for this call. */
  maxRetries?: number;
  /**
   * Aborts the call, retries and the waits between them included: it then
   * rejects with an `AbortError`. (A stream ends without an error instead.)
   */
  signal?: AbortSignal | undefined;
  /** Extra headers, over the client's own and its `defaultHeaders` (see {@link RequestHeaders}). */
  headers?: RequestHeaders;
}

/** Settings of one POST (or of `insights.increment`, the one PATCH that is not idempotent by itself). */
export interface PostRequestOptions extends RequestOptions {
  /**
   * Makes the call safe to repeat: the service stores the first response for
   * 24 hours and replays it for the same key. When omitted and retries are on,
   * the client generates one for the call and reuses it on every retry.
   */
  idempotencyKey?: string;
}

/** Settings of a Server-Sent Events stream opened with {@link Tocsin.streamMessages}. */
export interface MessageStreamOptions extends RequestOptions {
  /** Milliseconds without a byte (keep-alives count) after which a connection is replaced. */
  idleTimeout: number;
  /** Resume after this event ID (sent as `Last-Event-ID`). */
  lastEventId?: string | undefined;
  /** Ends the stream, without an error, when aborted. */
  signal?: AbortSignal | undefined;
}

/**
 * The messages of a Server-Sent Events stream. Each iteration opens a
 * connection and resumes after the last event ID seen so far.
 */
export interface MessageStream extends AsyncIterable<SseMessage> {
  /** The latest event ID received (or given), undefined before any. */
  readonly lastEventId: string | undefined;
}

/**
 * One call, as resources describe it to {@link Tocsin.request}. `T` is the
 * type of `offline`'s answer; it defaults to `any` so that a spec typed
 * without it still serves a call of any response type.
 */
export interface RequestSpec<T = any> {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  /** Path below the base URL, starting with `/`. */
  path: string;
  /** Sent as JSON. */
  body?: unknown;
  /**
   * The call is not idempotent by itself, so a retry must carry an
   * `Idempotency-Key` (the caller's, or one generated for the call when
   * retries are on). Default: true for POST, false for the other methods.
   */
  needsIdempotencyKey?: boolean;
  /**
   * What a disabled client answers instead (it may throw, as a lookup of
   * something that does not exist does). Without it, a disabled client
   * rejects the call with a TocsinError.
   */
  offline?: () => T;
}

/** The settings of one call that its options may override. */
interface CallSettings {
  timeout: number;
  maxRetries: number;
}

/** One attempt's request. */
interface AttemptRequest {
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  timeout: number;
  signal: AbortSignal | undefined;
}

/** Outcome of one attempt: either a result, or an error and whether another attempt may help. */
type Attempt<T> =
  | { ok: true; response: TocsinResponse<T> }
  | { ok: false; error: TocsinError; retryable: boolean; retryAfter?: number | undefined };

// setTimeout fires at once for delays beyond a signed 32-bit int.
const MAX_TIMER_MS = 2_147_483_647;

function checkTimeout(timeout: number, what: string): number {
  if (typeof timeout !== "number" || !(timeout > 0) || timeout > MAX_TIMER_MS) {
    throw new TocsinError(`${what} must be a number of milliseconds between 1 and ${MAX_TIMER_MS}, got ${String(timeout)}`);
  }
  return timeout;
}

function checkMaxRetries(maxRetries: number): number {
  if (!Number.isInteger(maxRetries) || maxRetries < 0) {
    throw new TocsinError(`maxRetries must be a non-negative integer, got ${String(maxRetries)}`);
  }
  return maxRetries;
}

/**
 * The base URL without trailing slashes, so "/v1/…" joins cleanly. Refused
 * here rather than failing (and being retried) as a ConnectionError on every
 * call: anything but an absolute http(s) URL, or a path (same-origin calls
 * from a page). `source` says where the value came from.
 */
function checkBaseUrl(value: unknown, source: string): string {
  if (typeof value !== "string") throw new TocsinError(`${source} must be a string, got ${typeof value}`);
  const text = value.trim();
  const trimmed = text.replace(/\/+$/, "");
  if (text.startsWith("/") && !text.startsWith("//")) return trimmed;
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    throw new TocsinError(`${source} must be an absolute http(s) URL such as ${DEFAULT_BASE_URL}, got ${JSON.stringify(value)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TocsinError(`${source} must be an http(s) URL such as ${DEFAULT_BASE_URL}, got ${JSON.stringify(value)}`);
  }
  if (url.username !== "" || url.password !== "") {
    // fetch refuses such URLs; and the key goes in apiKey, not the URL.
    throw new TocsinError(`${source} must not contain a user name or password`);
  }
  if (url.search !== "" || url.hash !== "") {
    throw new TocsinError(`${source} must not have a query or fragment: paths are appended to it`);
  }
  return trimmed;
}

/** TOCSIN_BASE_URL when it is set, else the default. */
function baseUrlFromEnv(): string {
  const fromEnv = readEnv("TOCSIN_BASE_URL");
  return fromEnv === undefined ? DEFAULT_BASE_URL : checkBaseUrl(fromEnv, "TOCSIN_BASE_URL");
}

function hasHeader(headers: Record<string, string>, name: string): boolean {
  const lower = name.toLowerCase();
  return Object.keys(headers).some((key) => key.toLowerCase() === lower);
}

/** Sets a header, replacing any spelling of the same name; null removes it. */
function setHeader(headers: Record<string, string>, name: string, value: string | null): void {
  const lower = name.toLowerCase();
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === lower) delete headers[key];
  }
  if (value !== null) headers[name] = value;
}

/** Applies caller headers over `headers` (see {@link RequestHeaders}). */
function applyHeaders(headers: Record<string, string>, extra: RequestHeaders | undefined, what: string): void {
  for (const [name, value] of Object.entries(extra ?? {})) {
    if (value === undefined) continue;
    if (value !== null && typeof value !== "string") {
      throw new TocsinError(`${what} ${JSON.stringify(name)} must be a string, or null to remove it; got ${typeof value}`);
    }
    setHeader(headers, name, value);
  }
}

/**
 * Client for a Tocsin server.
 *
 * ```ts
 * const tocsin = new Tocsin(apiKey, { baseUrl: "https://tocsin.example.com" });
 * const tocsin = new Tocsin(); // TOCSIN_API_KEY and TOCSIN_BASE_URL from the environment
 * const { data } = await tocsin.events.create({ channelName: "payments", title: "Payment failed" });
 * ```
 */
export class Tocsin {
  /** `POST /v1/events`, `GET /v1/events`, `GET /v1/events/{id}`, `GET /v1/stream`. */
  readonly events: Events;
  /** `POST /v1/devices`, `GET /v1/devices`, `PATCH /v1/devices/{id}`, `DELETE /v1/devices/{id}`. */
  readonly devices: Devices;
  /** `GET /v1/channels`. */
  readonly channels: Channels;
  /** `GET /v1/users`, `GET /v1/users/{userId}`. */
  readonly users: Users;
  /** `POST /v1/insights`, `PATCH /v1/insights`, `GET /v1/insights`, `DELETE /v1/insights/{title}`. */
  readonly insights: Insights;
  /** `GET /v1/stats/events`. */
  readonly stats: Stats;

  #lastRateLimit: RateLimit | null = null;

  readonly baseUrl: string;
  readonly timeout: number;
  readonly maxRetries: number;
  /** True when the client sends nothing (the `disabled` option). */
  readonly disabled: boolean;

  readonly #apiKey: string;
  readonly #fetch: Fetch;
  readonly #defaultHeaders: RequestHeaders;

  /** Reads the API key from `options.apiKey` or the `TOCSIN_API_KEY` environment variable. */
  constructor(options?: ClientOptions);
  /** `apiKey` wins over `options.apiKey`; undefined reads `TOCSIN_API_KEY`. */
  constructor(apiKey: string | undefined, options?: ClientOptions);
  constructor(apiKeyOrOptions?: string | ClientOptions, maybeOptions?: ClientOptions) {
    const optionsFirst = typeof apiKeyOrOptions === "object" && apiKeyOrOptions !== null;
    if (optionsFirst && maybeOptions !== undefined) {
      throw new TocsinError("Pass the options once: new Tocsin(options) or new Tocsin(apiKey, options)");
    }
    const options: ClientOptions = (optionsFirst ? apiKeyOrOptions : maybeOptions) ?? {};
    const positionalKey = optionsFirst ? undefined : apiKeyOrOptions;

    if (options.disabled !== undefined && typeof options.disabled !== "boolean") {
      throw new TocsinError(`disabled must be true or false, got ${String(options.disabled)}`);
    }
    this.disabled = options.disabled === true;
    // An explicit "" is a mistake (an empty variable passed on), not a request for the default.
    const apiKey = positionalKey ?? options.apiKey ?? readEnv("TOCSIN_API_KEY");
    if (!this.disabled && (typeof apiKey !== "string" || apiKey === "")) {
      throw new TocsinError(
        "An API key is required: new Tocsin(apiKey), the apiKey option or the TOCSIN_API_KEY environment variable " +
          "(or disabled: true to send nothing)",
      );
    }
    this.#apiKey = typeof apiKey === "string" ? apiKey : "";

    this.baseUrl = options.baseUrl !== undefined ? checkBaseUrl(options.baseUrl, "baseUrl") : baseUrlFromEnv();
    this.timeout = checkTimeout(options.timeout ?? DEFAULT_TIMEOUT, "timeout");
    this.maxRetries = checkMaxRetries(options.maxRetries ?? DEFAULT_MAX_RETRIES);
    this.#defaultHeaders = { ...options.defaultHeaders };
    applyHeaders({}, this.#defaultHeaders, "defaultHeaders"); // refuses a bad value now, not at the first call
    // Looked up at call time, not stored: a browser's fetch throws "Illegal
    // invocation" when called detached from globalThis, and a polyfill may be
    // installed after the client is built.
    this.#fetch =
      options.fetch ??
      ((url, init) => {
        if (typeof globalThis.fetch !== "function") {
          throw new TocsinError("No global fetch in this runtime; pass one as the `fetch` option");
        }
        return globalThis.fetch(url, init);
      });

    this.events = new Events(this);
    this.devices = new Devices(this);
    this.channels = new Channels(this);
    this.users = new Users(this);
    this.insights = new Insights(this);
    this.stats = new Stats(this);
  }

  /** The rate limit reported by the latest response of any call (errors included), or null before the first. */
  get lastRateLimit(): RateLimit | null {
    return this.#lastRateLimit;
  }

  /** `POST /v1/identify`: creates or updates a user identity with properties and aliases. */
  async identify(params: IdentifyParams, options?: PostRequestOptions): Promise<TocsinResponse<Identity>> {
    return this.request<Identity>(
      { method: "POST", path: "/v1/identify", body: params, offline: () => offlineIdentity(params) },
      options,
    );
  }

  /**
   * `GET /v1/stream`: every message of the project's live stream from now
   * on — events as they are recorded, and its insights as they are set,
   * incremented or deleted — over Server-Sent Events, reconnecting like
   * `events.stream` (which yields the events alone). `message.type` tells
   * the kinds apart and narrows `message.data`:
   *
   * ```ts
   * for await (const message of tocsin.stream({ signal })) {
   *   if (message.type === "event") console.log(message.data.title);
   *   else if (message.type === "insight") console.log(message.data.title, message.data.value);
   *   else console.log(`${message.data.title} deleted`); // "insight-deleted"
   * }
   * ```
   *
   * `channel` narrows the events only: every insight change arrives. Insight
   * messages are not replayed after a reconnection or with `lastEventId`;
   * `insights.list` has them as they stand.
   */
  stream(params: EventStreamParams = {}, options: StreamOptions = {}): LiveStream {
    return liveStream(this, params, options);
  }

  /**
   * Sends one call through the shared request loop. The resource methods use
   * it; it is public for endpoints this version does not wrap yet. A disabled
   * client answers with `spec.offline()`, or rejects when there is none.
   */
  async request<T>(spec: RequestSpec<T>, options: PostRequestOptions = {}): Promise<TocsinResponse<T>> {
    const { timeout, maxRetries } = this.#callSettings(options);
    const { signal } = options;
    const body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
    const needsKey = spec.needsIdempotencyKey ?? spec.method === "POST";
    const headers = this.#headers(needsKey, options, maxRetries, body !== undefined);
    throwIfAborted(signal);
    if (this.disabled) {
      if (!spec.offline) {
        throw new TocsinError(`The client is disabled (disabled: true): ${spec.method} ${spec.path} was not sent, and has no offline answer`);
      }
      return notSent(spec.offline());
    }

    const url = this.baseUrl + spec.path;
    const hasIdempotencyKey = hasHeader(headers, "Idempotency-Key");
    for (let retry = 0; ; retry++) {
      const attempt = await this.#attempt<T>(url, { method: spec.method, headers, body, timeout, signal }, hasIdempotencyKey);
      if (attempt.ok) return attempt.response;
      if (!attempt.retryable || retry >= maxRetries) throw attempt.error;
      await abortable(this.sleep(retryDelay(retry, attempt.retryAfter), signal), signal);
    }
  }

  /**
   * Opens a Server-Sent Events stream below the base URL, reconnecting after
   * drops (see `events.stream`, which wraps this). Public, like
   * {@link request}, for streams this version does not wrap yet.
   */
  streamMessages(path: string, options: MessageStreamOptions): MessageStream {
    const { timeout, maxRetries } = this.#callSettings(options);
    const idleTimeout = checkTimeout(options.idleTimeout, "idleTimeout");
    const headers = this.#headers(false, options, maxRetries, false, { Accept: "text/event-stream" });
    let lastEventId = options.lastEventId;
    if (this.disabled) {
      // Like a stream of a project where nothing happens: no events, open until stopped.
      return {
        get lastEventId() {
          return lastEventId;
        },
        [Symbol.asyncIterator]: () => untilAborted(options.signal),
      };
    }
    const connection = {
      url: this.baseUrl + path,
      headers,
      fetch: this.#fetch,
      timeout,
      idleTimeout,
      maxRetries,
      signal: options.signal,
      sleep: (ms: number, signal?: AbortSignal) => this.sleep(ms, signal),
      onRateLimit: (rateLimit: RateLimit) => {
        this.#lastRateLimit = rateLimit;
      },
      onLastEventId: (id: string) => {
        lastEventId = id === "" ? undefined : id;
      },
    };
    return {
      get lastEventId() {
        return lastEventId;
      },
      [Symbol.asyncIterator]: () => readEventStream({ ...connection, lastEventId }),
    };
  }

  /**
   * Waits between attempts. Protected so tests (and callers with their own
   * scheduler) can replace it without waiting for real. `signal` aborts the
   * call: the wait may end early then (callers do not rely on it).
   */
  protected sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** The client's timeout and maxRetries, or the call's; refuses invalid ones before anything is sent. */
  #callSettings(options: RequestOptions): CallSettings {
    return {
      timeout: options.timeout === undefined ? this.timeout : checkTimeout(options.timeout, "timeout"),
      maxRetries: options.maxRetries === undefined ? this.maxRetries : checkMaxRetries(options.maxRetries),
    };
  }

  /**
   * Built once per call, so every retry sends the same Idempotency-Key. From
   * the bottom: the client's own headers (and `own`, the call's), then
   * `defaultHeaders`, then the call's `headers`.
   */
  #headers(
    needsKey: boolean,
    options: PostRequestOptions,
    maxRetries: number,
    hasBody: boolean,
    own: Record<string, string> = {},
  ): Record<string, string> {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#apiKey}`,
      Accept: "application/json",
      // Where the runtime lets a page set it; X-Tocsin-Client always gets through.
      "User-Agent": CLIENT_ID,
      "X-Tocsin-Client": CLIENT_ID,
    };
    if (hasBody) headers["Content-Type"] = "application/json";
    for (const [name, value] of Object.entries(own)) setHeader(headers, name, value);

    let key = options.idempotencyKey;
    // A POST (or another call that is not idempotent) that may be retried
    // must carry a key, or a retry after a lost response would create a
    // second event, or add an increment twice. No retries, no need.
    if (key === undefined && needsKey && maxRetries > 0) {
      key = generateIdempotencyKey();
    }
    if (key !== undefined) headers["Idempotency-Key"] = key;

    applyHeaders(headers, this.#defaultHeaders, "defaultHeaders");
    applyHeaders(headers, options.headers, "header");
    return headers;
  }

  async #attempt<T>(url: string, req: AttemptRequest, hasIdempotencyKey: boolean): Promise<Attempt<T>> {
    let raw: RawResponse;
    try {
      raw = await this.#send(url, req);
    } catch (error) {
      if (error instanceof TimeoutError || error instanceof ConnectionError) {
        return { ok: false, error, retryable: true };
      }
      return { ok: false, error: error as TocsinError, retryable: false };
    }

    const meta = responseMeta(raw);
    if (meta.rateLimit) this.#lastRateLimit = meta.rateLimit;

    if (raw.status >= 200 && raw.status < 300) {
      try {
        return { ok: true, response: parseSuccess<T>(raw, meta.rateLimit) };
      } catch (error) {
        return { ok: false, error: error as TocsinError, retryable: false };
      }
    }
    return {
      ok: false,
      error: errorFromResponse(raw, meta),
      retryable: isRetryableStatus(raw.status, hasIdempotencyKey, meta.retryAfter !== undefined),
      retryAfter: meta.retryAfter,
    };
  }

  /**
   * One HTTP exchange, body included, under the timeout and the caller's
   * signal. Either aborts the request through its own signal and also wins
   * a race against it, so a custom fetch that ignores `signal` still cannot
   * hang the caller.
   */
  async #send(url: string, req: AttemptRequest): Promise<RawResponse> {
    const controller = new AbortController();
    const unlink = linkSignal(req.signal, controller);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new TimeoutError(req.timeout));
      }, req.timeout);
    });
    timedOut.catch(() => {}); // observed through the races below

    try {
      const init: FetchInit = { method: req.method, headers: { ...req.headers }, signal: controller.signal };
      if (req.body !== undefined) init.body = req.body;
      const response = await abortable(Promise.race([this.#fetch(url, init), timedOut]), req.signal);
      const text = await abortable(Promise.race([response.text(), timedOut]), req.signal);
      return { status: response.status, headers: response.headers, text };
    } catch (error) {
      if (req.signal?.aborted) throw abortError(req.signal);
      if (error instanceof TocsinError) throw error;
      // fetch rejects with its own AbortError when the timer aborts it, which
      // can be seen before the timer's rejection.
      if (controller.signal.aborted) throw new TimeoutError(req.timeout);
      throw new ConnectionError(`Could not reach ${url}: ${describeCause(error)}`, { cause: error, url });
    } finally {
      clearTimeout(timer);
      unlink();
    }
  }
}

/** An async iterator that yields nothing and ends when `signal` aborts (never without one). */
async function* untilAborted(signal: AbortSignal | undefined): AsyncGenerator<never, void, undefined> {
  await new Promise<void>((resolve) => {
    if (signal?.aborted) resolve();
    else signal?.addEventListener("abort", () => resolve(), { once: true });
  });
}
