// A Server-Sent Events stream read with fetch, kept open across dropped
// connections: after a drop it reconnects with backoff and sends the last
// event ID it saw in `Last-Event-ID`, so the server replays what was missed.
//
// It is an async generator, so the consumer drives it: leaving a
// `for await` loop (break, return, throw) runs its `finally`, which aborts
// the HTTP request. An aborted `signal` ends it the same way, without an error.

import { linkSignal } from "../abort.js";
import type { FetchInit, FetchResponse } from "../client.js";
import { ConnectionError, TimeoutError, TocsinError, describeCause } from "../errors.js";
import type { RateLimit } from "../rate-limit.js";
import { errorFromResponse, responseMeta } from "../response.js";
import { DEFAULT_RETRY_POLICY, backoffDelay, isRetryableStatus, retryDelay } from "../retry.js";
import { SseParser, type SseMessage } from "./parser.js";

/** What {@link readEventStream} needs from the client. */
export interface StreamConnection {
  /** Full URL of the stream. */
  url: string;
  /** Request headers (authorization, accept…), without Last-Event-ID. */
  headers: Record<string, string>;
  fetch: (url: string, init: FetchInit) => Promise<FetchResponse>;
  /** Milliseconds to wait for the response headers of each connection attempt. */
  timeout: number;
  /** A connection that delivers no bytes for this long is treated as dead and replaced. */
  idleTimeout: number;
  /** Failed attempts in a row allowed before the first connection opens; afterwards there is no limit. */
  maxRetries: number;
  /** The event ID to resume after; sent as `Last-Event-ID` on the first attempt too. */
  lastEventId?: string | undefined;
  /** Ends the stream, without an error, when aborted. */
  signal?: AbortSignal | undefined;
  /** Waits between attempts (the client's replaceable sleep); the signal ends the wait early. */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Called with the rate limit of every response that carried one. */
  onRateLimit?: (rateLimit: RateLimit) => void;
  /** Called with each event ID seen, so the caller can resume later. */
  onLastEventId?: (id: string) => void;
}

/** A response that could not start the stream, and whether trying again may help. */
class AttemptFailed extends Error {
  constructor(
    readonly error: TocsinError,
    readonly retryable: boolean,
    readonly retryAfter?: number | undefined,
  ) {
    super(error.message);
  }
}

/** Floor of the wait between connections, in ms. */
const MIN_RECONNECT_DELAY = 100;

/** Thrown inside an attempt when the user's signal aborted it: the stream ends quietly. */
const STOPPED = Symbol("stopped");

/**
 * Yields every message of the stream, across reconnections, until the
 * signal aborts, the consumer stops, the server answers 204 (the standard's
 * "do not reconnect"), or an error retrying cannot fix (401, 403, 404, 400…),
 * which is thrown.
 */
export async function* readEventStream(conn: StreamConnection): AsyncGenerator<SseMessage, void, undefined> {
  const parser = new SseParser(conn.lastEventId ?? "");
  let lastEventId = parser.lastEventId;
  let opened = false;
  let failures = 0;
  // Aborted when the consumer stops, so a pending read or sleep ends at once.
  const stop = new AbortController();
  const unlink = linkSignal(conn.signal, stop);

  // What the consumer has been given. Set from each message before it is
  // yielded, not from the parser: one chunk can complete several messages,
  // and a consumer that stops after the first must not resume after the
  // last. Once a connection is over, every message it completed was
  // yielded, so the parser's ID (which counts id-only blocks) is taken.
  const setLastEventId = (id: string) => {
    if (id === lastEventId) return;
    lastEventId = id;
    conn.onLastEventId?.(id);
  };

  try {
    while (!stop.signal.aborted) {
      let retryAfter: number | undefined;
      // One per connection: aborting it closes that request, whoever stops it.
      const attempt = new AbortController();
      const unlinkAttempt = linkSignal(stop.signal, attempt);
      try {
        const body = await connect(conn, parser.lastEventId, attempt, stop.signal);
        if (body === null) return; // 204: the server asks not to reconnect
        opened = true;
        failures = 0;
        for await (const message of readBody(body, parser, conn, stop.signal)) {
          setLastEventId(message.lastEventId);
          yield message;
        }
        // The server ended the response: reconnect, as EventSource does.
        setLastEventId(parser.lastEventId);
      } catch (error) {
        if (error === STOPPED || stop.signal.aborted) return;
        if (!(error instanceof AttemptFailed)) throw error;
        setLastEventId(parser.lastEventId);
        if (!error.retryable) throw error.error;
        // Until the stream has opened once, the client's retry budget applies,
        // so a wrong base URL or a stopped server fails like any call. After
        // that the stream is known to work, and a long-lived consumer wants
        // it back however long a restart takes.
        if (!opened && failures >= conn.maxRetries) throw error.error;
        failures++;
        retryAfter = error.retryAfter;
      } finally {
        attempt.abort();
        unlinkAttempt();
      }
      parser.end();
      const waited = await untilStopped(conn.sleep(reconnectDelay(failures, retryAfter, parser.retry), stop.signal), stop.signal);
      if (!waited) return;
    }
  } finally {
    stop.abort();
    unlink();
  }
}

/**
 * The wait before the next attempt: a 429's Retry-After, else exponential
 * backoff from the server's `retry:` (or 500 ms) over the failures in a row.
 * After a drop of a working connection (no failure yet) it is the base delay.
 */
function reconnectDelay(failures: number, retryAfter: number | undefined, serverRetry: number | undefined): number {
  // A `retry: 0` must not turn a server that is down into a busy loop.
  const initialDelay = Math.max(serverRetry ?? DEFAULT_RETRY_POLICY.initialDelay, MIN_RECONNECT_DELAY);
  const policy = { ...DEFAULT_RETRY_POLICY, initialDelay, maxDelay: Math.max(DEFAULT_RETRY_POLICY.maxDelay, initialDelay) };
  if (retryAfter !== undefined) return retryDelay(0, retryAfter, Math.random, policy);
  return backoffDelay(Math.max(0, failures - 1), Math.random, policy);
}

/**
 * One connection attempt up to the response headers, under the timeout,
 * with `controller` as the request's signal. Returns the body to read, null
 * for 204, or throws {@link AttemptFailed}, or STOPPED.
 */
async function connect(
  conn: StreamConnection,
  lastEventId: string,
  controller: AbortController,
  stop: AbortSignal,
): Promise<ReadableStream<Uint8Array> | null> {
  const headers = { ...conn.headers };
  if (lastEventId !== "") headers["Last-Event-ID"] = lastEventId;

  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new AttemptFailed(new TimeoutError(conn.timeout), true));
    }, conn.timeout);
  });
  timedOut.catch(() => {});
  // Also ends the wait when the consumer stops and a custom fetch ignores its signal.
  let onStop = () => {};
  const stopped = new Promise<never>((_, reject) => {
    onStop = () => reject(STOPPED);
    stop.addEventListener("abort", onStop, { once: true });
  });
  stopped.catch(() => {});

  let response: FetchResponse;
  try {
    response = await Promise.race([conn.fetch(conn.url, { method: "GET", headers, signal: controller.signal }), timedOut, stopped]);
    if (response.status === 204) return null;
    if (response.status < 200 || response.status > 299) {
      const text = await Promise.race([response.text(), timedOut, stopped]);
      const raw = { status: response.status, headers: response.headers, text };
      const meta = responseMeta(raw);
      if (meta.rateLimit) conn.onRateLimit?.(meta.rateLimit);
      throw new AttemptFailed(errorFromResponse(raw, meta), isRetryableStatus(response.status, false), meta.retryAfter);
    }
  } catch (error) {
    if (error instanceof AttemptFailed) throw error;
    if (stop.aborted) throw STOPPED;
    if (controller.signal.aborted) throw new AttemptFailed(new TimeoutError(conn.timeout), true);
    throw new AttemptFailed(
      new ConnectionError(`Could not reach ${conn.url}: ${describeCause(error)}`, { cause: error, url: conn.url }),
      true,
    );
  } finally {
    clearTimeout(timer);
    stop.removeEventListener("abort", onStop);
  }

  const rateLimit = responseMeta({ status: response.status, headers: response.headers, text: "" }).rateLimit;
  if (rateLimit) conn.onRateLimit?.(rateLimit);
  const contentType = response.headers.get("content-type") ?? "";
  if (!/^text\/event-stream\b/i.test(contentType.trim())) {
    // A proxy's login page or a wrong base URL: reconnecting would get the same.
    throw new AttemptFailed(
      new TocsinError(`Expected an event stream from ${conn.url}, got HTTP ${response.status} with Content-Type "${contentType}"`),
      false,
    );
  }
  if (!response.body) {
    throw new AttemptFailed(new TocsinError("The fetch in use returned no readable body; events.stream needs a fetch with streaming responses"), false);
  }
  return response.body;
}

/**
 * Reads one connection's body through the parser. Ends when the server ends
 * the response; throws {@link AttemptFailed} (retryable) when the connection
 * breaks or stays silent longer than `idleTimeout`, STOPPED when stopped.
 * Always releases the connection.
 */
async function* readBody(
  body: ReadableStream<Uint8Array>,
  parser: SseParser,
  { url, idleTimeout }: StreamConnection,
  stop: AbortSignal,
): AsyncGenerator<SseMessage, void, undefined> {
  const reader = body.getReader();
  // Cancelling the reader ends a pending read() and closes the request, also
  // with a custom fetch that ignores its signal.
  const cancel = () => {
    reader.cancel().catch(() => {});
  };
  // Runs only while waiting for the network: a consumer that takes its time
  // with an event does not make the connection look dead.
  let idle = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  stop.addEventListener("abort", cancel);
  try {
    for (;;) {
      let result: ReadableStreamReadResult<Uint8Array>;
      timer = setTimeout(() => {
        idle = true;
        cancel();
      }, idleTimeout);
      try {
        result = await reader.read();
      } catch (error) {
        if (stop.aborted) throw STOPPED;
        if (idle) throw idleFailure(url, idleTimeout);
        throw new AttemptFailed(
          new ConnectionError(`The event stream from ${url} broke: ${describeCause(error)}`, { cause: error, url }),
          true,
        );
      } finally {
        clearTimeout(timer);
      }
      if (stop.aborted) throw STOPPED;
      if (idle) throw idleFailure(url, idleTimeout);
      if (result.done) return;
      for (const message of parser.push(result.value)) yield message;
    }
  } finally {
    clearTimeout(timer);
    stop.removeEventListener("abort", cancel);
    cancel();
  }
}

function idleFailure(url: string, idleTimeout: number): AttemptFailed {
  return new AttemptFailed(new ConnectionError(`The event stream from ${url} sent nothing for ${idleTimeout} ms`, { url }), true);
}

/** Waits for `promise`: true once it settles, false as soon as `signal` aborts. */
function untilStopped(promise: Promise<void>, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve, reject) => {
    const onAbort = () => resolve(false);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener("abort", onAbort);
        resolve(true);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
