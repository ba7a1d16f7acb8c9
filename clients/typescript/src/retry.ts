// When to retry a failed attempt, and how long to wait before doing so.

/** Tuning of the retry schedule. The defaults suit a self-hosted service. */
export interface RetryPolicy {
  /** Backoff before the first retry, in ms; doubles for each retry after it. */
  initialDelay: number;
  /** Ceiling of the exponential backoff, in ms. */
  maxDelay: number;
  /**
   * Ceiling on a server's `Retry-After`, in ms. A caller awaiting one call
   * should not hang for minutes because a proxy said so; past this the retry
   * most likely fails again and the caller gets the error.
   */
  maxRetryAfter: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  initialDelay: 500,
  maxDelay: 8_000,
  maxRetryAfter: 60_000,
});

/** Share of the backoff removed at random, so clients that failed together do not retry together. */
const JITTER = 0.25;

/**
 * Exponential backoff with jitter before retry number `retry` (0 for the
 * first retry): `min(initialDelay * 2^retry, maxDelay)`, less up to 25%.
 * The ranges of successive retries do not overlap, so the schedule always grows.
 */
export function backoffDelay(
  retry: number,
  random: () => number = Math.random,
  policy: RetryPolicy = DEFAULT_RETRY_POLICY,
): number {
  const base = Math.min(policy.initialDelay * 2 ** retry, policy.maxDelay);
  return base * (1 - random() * JITTER);
}

/**
 * The wait before retry number `retry`. The server's `Retry-After` wins when
 * it sent one (it knows when the window resets or the first request ends),
 * capped at `maxRetryAfter`; otherwise exponential backoff.
 */
export function retryDelay(
  retry: number,
  retryAfterSeconds: number | undefined,
  random: () => number = Math.random,
  policy: RetryPolicy = DEFAULT_RETRY_POLICY,
): number {
  if (retryAfterSeconds !== undefined) {
    return Math.min(retryAfterSeconds * 1000, policy.maxRetryAfter);
  }
  return backoffDelay(retry, random, policy);
}

/**
 * Whether an error status is worth another attempt.
 *
 * - 429: the window resets; the request was not processed.
 * - 409 with an Idempotency-Key and a Retry-After: the first request with
 *   that key is still in flight; once it ends, the retry gets its stored
 *   response (a replay). Without a key, or without Retry-After (a project
 *   that already has its 100 insights), a 409 is a real conflict and
 *   retrying cannot help.
 * - 5xx: the server or something in front of it failed; safe to retry because
 *   every retried POST carries an Idempotency-Key.
 *
 * Every other 4xx (including 422, same key with a different body) fails the
 * same way however often it is sent.
 */
export function isRetryableStatus(status: number, hasIdempotencyKey: boolean, hasRetryAfter = true): boolean {
  if (status === 429) return true;
  if (status === 409) return hasIdempotencyKey && hasRetryAfter;
  return status >= 500 && status <= 599;
}
