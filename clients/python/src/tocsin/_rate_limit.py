"""Reading the `X-RateLimit-*` and `Retry-After` headers that responses carry."""

from __future__ import annotations

import email.utils
import math
import time
from dataclasses import dataclass
from typing import Optional

import httpx


@dataclass(frozen=True)
class RateLimit:
    """The API key's rate limit as one response reported it."""

    #: Requests allowed in the window.
    limit: int
    #: Requests left in the current window.
    remaining: int
    #: When the window resets, in Unix seconds.
    reset: int
    #: Seconds from when the response arrived until `reset`, never negative.
    #: (The TypeScript client's `resetIn` is in milliseconds; Python's
    #: timeouts and sleeps are in seconds, so this is too.)
    reset_in: float


def _header_int(headers: httpx.Headers, name: str) -> Optional[int]:
    raw = headers.get(name, "").strip()
    try:
        value = float(raw)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) else None


def parse_rate_limit(headers: httpx.Headers, now: Optional[float] = None) -> Optional[RateLimit]:
    """The rate limit, or None unless all three headers are there and numeric,
    so nobody sees a half-filled one."""
    limit = _header_int(headers, "x-ratelimit-limit")
    remaining = _header_int(headers, "x-ratelimit-remaining")
    reset = _header_int(headers, "x-ratelimit-reset")
    if limit is None or remaining is None or reset is None:
        return None
    now = time.time() if now is None else now
    return RateLimit(limit=limit, remaining=remaining, reset=reset, reset_in=max(0.0, reset - now))


def parse_retry_after(headers: httpx.Headers, now: Optional[float] = None) -> Optional[float]:
    """`Retry-After` in seconds. The service sends delta-seconds; an HTTP date
    is accepted too, since a proxy in front of a self-hosted server may send
    one."""
    raw = headers.get("retry-after", "").strip()
    if raw == "":
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        now = time.time() if now is None else now
        return max(0.0, math.ceil(when.timestamp() - now))
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
