// Turning one HTTP response into a typed result or the matching error class.

import {
  ApiError,
  AuthenticationError,
  ConflictError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  TocsinError,
  ValidationError,
} from "./errors.js";
import { parseRateLimit, parseRetryAfter, type HeaderReader, type RateLimit } from "./rate-limit.js";
import type { ValidationErrorDetail } from "./types.js";

/** The result of a successful call. */
export interface TocsinResponse<T> {
  /** The `data` of the success envelope. */
  data: T;
  /** The `requestId` of the response (for support and the server's logs). */
  requestId: string;
  /** True when the service replayed the stored response of an earlier request with the same Idempotency-Key. */
  wasReplayed: boolean;
  /** The key's rate limit after this request; null only if the response lacked the headers. */
  rateLimit: RateLimit | null;
  /** HTTP status, e.g. 201 for a new device and 200 for a re-registered one; 0 when not sent. */
  statusCode: number;
  /**
   * False when the client is `disabled`: nothing went over the network and
   * `data` is what the client made up in the service's place (see the
   * README's "Disabled client"). True for every answer of the service.
   */
  sent: boolean;
}

/** A received response: status, headers and the body text. */
export interface RawResponse {
  status: number;
  headers: HeaderReader;
  text: string;
}

function parseJson(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function requestIdOf(body: unknown, headers: HeaderReader): string | undefined {
  if (isObject(body) && typeof body.requestId === "string") return body.requestId;
  return headers.get("x-request-id") ?? undefined;
}

/** Keeps only well-formed entries: a bad element must not hide the rest. */
function parseDetails(value: unknown): ValidationErrorDetail[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((item): ValidationErrorDetail[] => {
    if (!isObject(item) || !Array.isArray(item.path)) return [];
    return [{ path: item.path.map(String), message: typeof item.message === "string" ? item.message : "" }];
  });
}

/** Rate limit and Retry-After of any response, read once per attempt. */
export function responseMeta(raw: RawResponse, nowMs: number = Date.now()) {
  return {
    rateLimit: parseRateLimit(raw.headers, nowMs),
    retryAfter: parseRetryAfter(raw.headers, nowMs),
  };
}

/** Reads a 2xx response. Throws {@link TocsinError} when the body is not a success envelope. */
export function parseSuccess<T>(raw: RawResponse, rateLimit: RateLimit | null): TocsinResponse<T> {
  const body = parseJson(raw.text);
  if (!isObject(body) || body.success !== true || !("data" in body)) {
    throw new TocsinError(
      `Unexpected response from the service (HTTP ${raw.status}): not a success envelope`,
    );
  }
  return {
    data: body.data as T,
    // The service always sends one; "" only if something in between dropped it.
    requestId: requestIdOf(body, raw.headers) ?? "",
    wasReplayed: raw.headers.get("x-idempotent-replay")?.toLowerCase() === "true",
    rateLimit,
    statusCode: raw.status,
    sent: true,
  };
}

/** Builds the error for a non-2xx response. */
export function errorFromResponse(
  raw: RawResponse,
  meta: { rateLimit: RateLimit | null; retryAfter: number | undefined },
  nowMs: number = Date.now(),
): ApiError {
  const body = parseJson(raw.text);
  const serverMessage = isObject(body) && typeof body.error === "string" ? body.error : undefined;
  const init = {
    statusCode: raw.status,
    // A proxy in front of the service may answer with HTML; keep the status readable.
    message: serverMessage ?? `HTTP ${raw.status}`,
    requestId: requestIdOf(body, raw.headers),
    rateLimit: meta.rateLimit ?? undefined,
    body: body ?? raw.text,
  };

  if (raw.status === 400) {
    return new ValidationError({ ...init, details: isObject(body) ? parseDetails(body.details) : [] });
  }
  if (raw.status === 401) return new AuthenticationError(init);
  if (raw.status === 403) return new PermissionDeniedError(init);
  if (raw.status === 404) return new NotFoundError(init);
  if (raw.status === 409 || raw.status === 422) return new ConflictError(init);
  if (raw.status >= 500 && raw.status <= 599) return new InternalServerError(init);
  if (raw.status === 429) {
    // RateLimitError promises a rate limit. If the headers were stripped, the
    // honest summary is "none left until Retry-After (or now)".
    const waitMs = (meta.retryAfter ?? 0) * 1000;
    const rateLimit = meta.rateLimit ?? {
      limit: 0,
      remaining: 0,
      reset: Math.ceil((nowMs + waitMs) / 1000),
      resetIn: waitMs,
    };
    return new RateLimitError({ ...init, rateLimit, retryAfter: meta.retryAfter });
  }
  return new ApiError(init);
}
