// The Tocsin client: configuration, and the one request loop every call goes
// through (headers, idempotency key, timeout, retries, rate-limit tracking).

import { ConnectionError, TimeoutError, TocsinError } from "./errors.js";
import { generateIdempotencyKey } from "./idempotency.js";
import type { RateLimit } from "./rate-limit.js";
import { Devices } from "./resources/devices.js";
import { Events } from "./resources/events.js";
import {
  errorFromResponse,
  parseSuccess,
  responseMeta,
  type RawResponse,
  type TocsinResponse,
} from "./response.js";
import { isRetryableStatus, retryDelay } from "./retry.js";
import type { IdentifyParams, Identity } from "./types.js";

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
}

/** A `fetch` implementation: the global one, undici's, node-fetch, a test double… */
export type Fetch = (url: string, init: FetchInit) => Promise<FetchResponse>;

/** Settings of a {@link Tocsin} client. */
export interface ClientOptions {
  /** Where the service listens. Default `http://127.0.0.1:8080`. A path prefix (reverse proxy) is kept. */
  baseUrl?: string;
  /** Per-attempt timeout in milliseconds. Default 30000. */
  timeout?: number;
  /** Replaces the global `fetch` for every call. */
  fetch?: Fetch;
  /** Retries after a retryable failure (429, 409 in flight, 5xx, timeout, connection error). Default 2; 0 turns retries off. */
  maxRetries?: number;
}

/** Settings of one call. */
export interface RequestOptions {
  /** Overrides the client's timeout for this call, in milliseconds. */
  timeout?: number;
  /** Extra headers; they override the client's own (names compared case-insensitively). */
  headers?: Record<string, string>;
}

/** Settings of one POST. */
export interface PostRequestOptions extends RequestOptions {
  /**
   * Makes the call safe to repeat: the service stores the first response for
   * 24 hours and replays it for the same key. When omitted and retries are on,
   * the client generates one for the call and reuses it on every retry.
   */
  idempotencyKey?: string;
}

/** One call, as resources describe it to {@link Tocsin.request}. */
export interface RequestSpec {
  method: "GET" | "POST" | "DELETE";
  /** Path below the base URL, starting with `/`. */
  path: string;
  /** Sent as JSON. */
  body?: unknown;
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

function hasHeader(headers: Record<string, string>, name: string): boolean {
  const lower = name.toLowerCase();
  return Object.keys(headers).some((key) => key.toLowerCase() === lower);
}

/** Sets a header, replacing any spelling of the same name. */
function setHeader(headers: Record<string, string>, name: string, value: string): void {
  const lower = name.toLowerCase();
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === lower) delete headers[key];
  }
  headers[name] = value;
}

/**
 * Client for a Tocsin server.
 *
 * ```ts
 * const tocsin = new Tocsin(apiKey, { baseUrl: "https://tocsin.example.com" });
 * const { data } = await tocsin.events.create({ channelName: "payments", title: "Payment failed" });
 * ```
 */
export class Tocsin {
  /** `POST /v1/events`, `GET /v1/events/{id}`. */
  readonly events: Events;
  /** `POST /v1/devices`, `GET /v1/devices`, `DELETE /v1/devices/{id}`. */
  readonly devices: Devices;

  #lastRateLimit: RateLimit | null = null;

  readonly baseUrl: string;
  readonly timeout: number;
  readonly maxRetries: number;

  readonly #apiKey: string;
  readonly #fetch: Fetch;

  constructor(apiKey: string, options: ClientOptions = {}) {
    if (typeof apiKey !== "string" || apiKey === "") {
      throw new TocsinError("An API key is required: new Tocsin(apiKey, options)");
    }
    this.#apiKey = apiKey;
    // A path prefix is kept; only trailing slashes go, so "/v1/…" joins cleanly.
    this.baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.timeout = checkTimeout(options.timeout ?? DEFAULT_TIMEOUT, "timeout");
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    if (!Number.isInteger(maxRetries) || maxRetries < 0) {
      throw new TocsinError(`maxRetries must be a non-negative integer, got ${String(maxRetries)}`);
    }
    this.maxRetries = maxRetries;
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
  }

  /** The rate limit reported by the latest response of any call (errors included), or null before the first. */
  get lastRateLimit(): RateLimit | null {
    return this.#lastRateLimit;
  }

  /** `POST /v1/identify`: creates or updates a user identity with properties and aliases. */
  async identify(params: IdentifyParams, options?: PostRequestOptions): Promise<TocsinResponse<Identity>> {
    return this.request<Identity>({ method: "POST", path: "/v1/identify", body: params }, options);
  }

  /**
   * Sends one call through the shared request loop. The resource methods use
   * it; it is public for endpoints this version does not wrap yet.
   */
  async request<T>(spec: RequestSpec, options: PostRequestOptions = {}): Promise<TocsinResponse<T>> {
    const url = this.baseUrl + spec.path;
    const timeout = options.timeout === undefined ? this.timeout : checkTimeout(options.timeout, "timeout");
    const body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
    const headers = this.#headers(spec, options, body !== undefined);
    const hasIdempotencyKey = hasHeader(headers, "Idempotency-Key");

    for (let retry = 0; ; retry++) {
      const attempt = await this.#attempt<T>(url, { method: spec.method, headers, body, timeout }, hasIdempotencyKey);
      if (attempt.ok) return attempt.response;
      if (!attempt.retryable || retry >= this.maxRetries) throw attempt.error;
      await this.sleep(retryDelay(retry, attempt.retryAfter));
    }
  }

  /**
   * Waits between attempts. Protected so tests (and callers with their own
   * scheduler) can replace it without waiting for real.
   */
  protected sleep(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  /** Built once per call, so every retry sends the same Idempotency-Key. */
  #headers(spec: RequestSpec, options: PostRequestOptions, hasBody: boolean): Record<string, string> {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#apiKey}`,
      Accept: "application/json",
    };
    if (hasBody) headers["Content-Type"] = "application/json";

    let key = options.idempotencyKey;
    // A POST that may be retried must carry a key, or a retry after a lost
    // response would create a second event. No retries, no need.
    if (key === undefined && spec.method === "POST" && this.maxRetries > 0) {
      key = generateIdempotencyKey();
    }
    if (key !== undefined) headers["Idempotency-Key"] = key;

    for (const [name, value] of Object.entries(options.headers ?? {})) setHeader(headers, name, value);
    return headers;
  }

  async #attempt<T>(
    url: string,
    req: { method: string; headers: Record<string, string>; body: string | undefined; timeout: number },
    hasIdempotencyKey: boolean,
  ): Promise<Attempt<T>> {
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
      retryable: isRetryableStatus(raw.status, hasIdempotencyKey),
      retryAfter: meta.retryAfter,
    };
  }

  /**
   * One HTTP exchange, body included, under the timeout. The timer aborts the
   * request through its signal and also wins a race against it, so a custom
   * fetch that ignores `signal` still cannot hang the caller.
   */
  async #send(
    url: string,
    req: { method: string; headers: Record<string, string>; body: string | undefined; timeout: number },
  ): Promise<RawResponse> {
    const controller = new AbortController();
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
      const response = await Promise.race([this.#fetch(url, init), timedOut]);
      const text = await Promise.race([response.text(), timedOut]);
      return { status: response.status, headers: response.headers, text };
    } catch (error) {
      if (error instanceof TocsinError) throw error;
      // fetch rejects with its own AbortError when the timer aborts it, which
      // can be seen before the timer's rejection.
      if (controller.signal.aborted) throw new TimeoutError(req.timeout);
      throw new ConnectionError(`Could not reach ${url}: ${describe(error)}`, { cause: error });
    } finally {
      clearTimeout(timer);
    }
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    // Node's fetch says only "fetch failed" and keeps the reason (ECONNREFUSED…) in `cause`.
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
  }
  return String(error);
}
