// Error classes: one per kind of failure, so callers branch with `instanceof`.
//
//   TocsinError
//   ├── ApiError            the service answered with an error status
//   │   ├── ValidationError 400, with the list of faults
//   │   └── RateLimitError  429, with the rate limit and Retry-After
//   ├── TimeoutError        no answer within the timeout
//   └── ConnectionError     no answer at all (DNS, refused, reset…)
//
// Each class sets `name` explicitly rather than from `constructor.name`,
// which minifiers rename.

import type { RateLimit } from "./rate-limit.js";
import type { ValidationErrorDetail } from "./types.js";

/** Base class of every error this package throws. */
export class TocsinError extends Error {
  /** `options.cause` is kept as the standard `error.cause`. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TocsinError";
  }
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
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ConnectionError";
  }
}
