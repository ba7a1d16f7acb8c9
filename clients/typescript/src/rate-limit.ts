// Reading the rate-limit and Retry-After headers that every response carries.

/** The rate limit of the API key, as reported by one response. */
export interface RateLimit {
  /** Requests allowed in the window. */
  limit: number;
  /** Requests left in the current window. */
  remaining: number;
  /** When the window resets, in Unix seconds. */
  reset: number;
  /** Milliseconds from when the response arrived until `reset` (never negative). */
  resetIn: number;
}

/** The minimal view of response headers the client needs (a `Headers` fits). */
export interface HeaderReader {
  get(name: string): string | null;
}

function headerNumber(headers: HeaderReader, name: string): number | undefined {
  const raw = headers.get(name);
  if (raw === null || raw.trim() === "") return undefined;
  const value = Number(raw);
  return Number.isFinite(value) ? value : undefined;
}

/**
 * Reads `X-RateLimit-*`. Returns null unless all three headers are present and
 * numeric, so callers never see a half-filled object.
 */
export function parseRateLimit(headers: HeaderReader, nowMs: number = Date.now()): RateLimit | null {
  const limit = headerNumber(headers, "x-ratelimit-limit");
  const remaining = headerNumber(headers, "x-ratelimit-remaining");
  const reset = headerNumber(headers, "x-ratelimit-reset");
  if (limit === undefined || remaining === undefined || reset === undefined) return null;
  return { limit, remaining, reset, resetIn: Math.max(0, reset * 1000 - nowMs) };
}

/**
 * Reads `Retry-After` in seconds. The service sends delta-seconds; an HTTP
 * date is accepted too because proxies in front of a self-hosted instance may
 * send one.
 */
export function parseRetryAfter(headers: HeaderReader, nowMs: number = Date.now()): number | undefined {
  const raw = headers.get("retry-after");
  if (raw === null || raw.trim() === "") return undefined;
  const trimmed = raw.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - nowMs) / 1000));
}
