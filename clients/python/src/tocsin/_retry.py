"""When a failed attempt is worth another, and how long to wait first. The
one place that owns the retry schedule; the sync and async request loops and
the event stream all ask it."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Optional

#: Backoff before the first retry, in seconds; doubles for each retry after.
INITIAL_DELAY = 0.5
#: Ceiling of the exponential backoff.
MAX_DELAY = 8.0
#: Ceiling on a server's Retry-After. A caller waiting on one call should not
#: hang for minutes because a proxy said so; past this the retry most likely
#: fails again and the caller gets the error.
MAX_RETRY_AFTER = 60.0
#: Share of the backoff removed at random, so clients that failed together do
#: not retry together. Below one half, so successive waits never overlap.
JITTER = 0.25


def is_retryable_status(
    status: int, has_idempotency_key: bool, has_retry_after: bool = True
) -> bool:
    """Whether an error status may go away when the request is sent again.

    - 429: the window resets; the request was not processed.
    - 409 with an Idempotency-Key and a Retry-After: the first request with
      that key is still running; once it ends, the retry gets its stored
      answer (a replay). Without a key, or without Retry-After (a project
      that already has its 100 insights), a 409 is a real conflict that no
      retry fixes.
    - 5xx: the server or a proxy failed. Safe for POSTs too, since every
      retried POST carries an Idempotency-Key.

    Every other 4xx (422 among them: the same key with another body) fails
    the same way however often it is sent.
    """
    if status == 429:
        return True
    if status == 409:
        return has_idempotency_key and has_retry_after
    return 500 <= status <= 599


def backoff_delay(
    retry: int,
    *,
    initial: float = INITIAL_DELAY,
    ceiling: float = MAX_DELAY,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds before retry number `retry` (0 for the first):
    `min(initial * 2**retry, ceiling)`, less up to 25% at random."""
    base = min(initial * 2.0**retry, max(ceiling, initial))
    return base * (1 - rand() * JITTER)


def retry_delay(
    retry: int, retry_after: Optional[float], rand: Callable[[], float] = random.random
) -> float:
    """The server's Retry-After when it sent one (it knows when the window
    resets), capped; otherwise jittered exponential backoff."""
    if retry_after is not None:
        return min(retry_after, MAX_RETRY_AFTER)
    return backoff_delay(retry, rand=rand)


@dataclass
class RetryBudget:
    """The retries one call has left. `next_delay` says how long to sleep
    before the next attempt, or None when the failure is final."""

    max_retries: int
    used: int = 0

    def next_delay(self, retryable: bool, retry_after: Optional[float]) -> Optional[float]:
        if not retryable or self.used >= self.max_retries:
            return None
        delay = retry_delay(self.used, retry_after)
        self.used += 1
        return delay
