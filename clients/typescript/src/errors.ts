// Error classes: one per kind of failure, so callers branch with `instanceof`
// (or `isTocsinError` when both builds may be loaded).
//
//   TocsinError
//   ├── ApiError                  the service answered with an error status
//   │   ├── ValidationError       400, with the list of faults
//   │   ├── AuthenticationError   401, missing or unknown key
//   │   ├── PermissionDeniedError 403, the key lacks the scope
//   │   ├── NotFoundError         404, the resource does not exist
//   │   ├── ConflictError         409 and 422, idempotency key conflicts
//   │   ├── RateLimitError        429, with the rate limit and Retry-After
//   │   └── InternalServerError   5xx
//   ├── TimeoutError              no answer within the timeout
//   ├── ConnectionError           no answer at all (DNS, refused, reset…)
//   └── AbortError                the caller's signal aborted the call
//
// Each class sets `name` explicitly rather than from `constructor.name`,
// which minifiers rename.

import type { RateLimit } from "./rate-limit.js";
import type { ValidationErrorDetail } from "./types.js";

/**
 * Marks every error of this package. `Symbol.for` gives the same symbol in
 * every copy of the package a program loads (the ESM and the CommonJS build,
 * two installed versions), where `instanceof` only knows its own copy's classes.
 */
const TOCSIN_ERROR = Symbol.for("@tocsin/client.error");

/** Base class of every error this package throws. */
export class TocsinError extends Error {
  /** `options.cause` is kept as the standard `error.cause`. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TocsinError";
  }
}

// On the prototype, not the instance: it does not show up in logs or JSON.
Object.defineProperty(TocsinError.prototype, TOCSIN_ERROR, { value: true });

/**
 * Whether `value` is an error thrown by `@tocsin/client`, whichever build or
 * copy of the package threw it. Prefer it to `instanceof TocsinError` in code
 * that may receive errors from the other build (an ESM app whose CommonJS
 * dependency also uses the client).
 */
export function isTocsinError(value: unknown): value is TocsinError {
  return typeof value === "object" && value !== null && (value as { [TOCSIN_ERROR]?: unknown })[TOCSIN_ERROR] === true;
}

/** Fields of an error response that every {@link ApiError} carries. */
export interface ApiErrorInit {
  statusCode: number;
  /** The server's `error` message. */
  message: string;
  requestId?: string | undefined;
  rateLimit?: RateLimit | undefined;
  /** The parsed response body, or its text when it was not JSON. */
  body?: unknown;
}

/** The service answered with a non-2xx status. */
export class ApiError extends TocsinError {
  /** HTTP status code. */
  readonly statusCode: number;
  /** The `requestId` of the response (for support and the server's logs). */
  readonly requestId: string | undefined;
  /** The rate limit reported by the response, when its headers were present. */
  readonly rateLimit: RateLimit | undefined;
  /** The parsed response body, or its text when it was not JSON. */
  readonly body: unknown;

  constructor(init: ApiErrorInit) {
    super(init.message);
    this.name = "ApiError";
    this.statusCode = init.statusCode;
    this.requestId = init.requestId;
    this.rateLimit = init.rateLimit;
    this.body = init.body;
  }
}

/** 400: the request was rejected by validation (or was not valid JSON). */
export class ValidationError extends ApiError {
  /** Every fault found, each with the JSON path of its field. Empty for malformed JSON. */
  readonly details: ValidationErrorDetail[];

  constructor(init: ApiErrorInit & { details: ValidationErrorDetail[] }) {
    super(init);
    this.name = "ValidationError";
    this.details = init.details;
  }
}

/** 401: no API key was sent, or the service does not know it (revoked, mistyped, another server's). */
export class AuthenticationError extends ApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = "AuthenticationError";
  }
}

/** 403: the API key is valid but lacks the scope the call needs (e.g. `events:read`). */
export class PermissionDeniedError extends ApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = "PermissionDeniedError";
  }
}

/** 404: what the call names (an event, a device, a user…) does not exist in the key's project. */
export class NotFoundError extends ApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = "NotFoundError";
  }
}

/**
 * 409 or 422: the request conflicts with an earlier one with the same
 * Idempotency-Key. 409: that request is still in flight (retried when retries
 * are on, so seen only once they run out), or, without Retry-After, the
 * project already has its 100 insights (not retried); 422: the key was used
 * with a different body, which no retry can fix.
 */
export class ConflictError extends ApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = "ConflictError";
  }
}

/** 429: the API key's rate limit is exhausted. */
export class RateLimitError extends ApiError {
  /** Always set; see {@link RateLimitError.retryAfter} for when to try again. */
  declare readonly rateLimit: RateLimit;
  /** Seconds to wait before retrying, when the server sent `Retry-After`. */
  readonly retryAfter: number | undefined;

  constructor(init: ApiErrorInit & { rateLimit: RateLimit; retryAfter?: number | undefined }) {
    super(init);
    this.name = "RateLimitError";
    this.retryAfter = init.retryAfter;
  }
}

/** 5xx: the service (or a proxy in front of it) failed; retried, so seen once the retries run out. */
export class InternalServerError extends ApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = "InternalServerError";
  }
}

/** The request was aborted because no complete response arrived in time. */
export class TimeoutError extends TocsinError {
  /** The timeout that expired, in milliseconds. */
  readonly timeout: number;

  constructor(timeout: number) {
    super(`Request timed out after ${timeout} ms`);
    this.name = "TimeoutError";
    this.timeout = timeout;
  }
}

/** The request could not reach the service, or the connection broke. */
export class ConnectionError extends TocsinError {
  /** The URL the client tried to reach (also in the message), when the error came from a request. */
  readonly url: string | undefined;

  constructor(message: string, options?: { cause?: unknown; url?: string | undefined }) {
    super(message, options);
    this.name = "ConnectionError";
    this.url = options?.url;
  }
}

/**
 * The `signal` given to the call aborted it. Its `name` is "AbortError",
 * like the errors of `fetch` and other abortable APIs, so code that checks
 * `error.name === "AbortError"` keeps working; `cause` is the signal's reason.
 */
export class AbortError extends TocsinError {
  constructor(options?: { cause?: unknown }) {
    super("The request was aborted", options);
    this.name = "AbortError";
  }
}

/** A short description of a thrown value for an error message. */
export function describeCause(error: unknown): string {
  if (error instanceof Error) {
    // Node's fetch says only "fetch failed" and keeps the reason (ECONNREFUSED…) in `cause`.
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
  }
  return String(error);
}
