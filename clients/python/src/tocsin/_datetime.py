"""Reading the service's RFC 3339 timestamps into aware datetimes.

`datetime.fromisoformat` before Python 3.11 takes neither a `Z` nor a
fraction of other than 3 or 6 digits, both of which RFC 3339 allows.
"""

from __future__ import annotations

import re
from datetime import datetime

_FRACTION = re.compile(r"\.(\d+)")


def parse_datetime(value: str) -> datetime:
    """An RFC 3339 timestamp (`2026-11-22T10:00:00.000+00:00`, `...Z`) as an
    aware datetime. Raises ValueError for anything else."""
    if not isinstance(value, str):
        raise ValueError(f"not a timestamp: {value!r}")
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    parsed = datetime.fromisoformat(text.replace("t", "T", 1) if "T" not in text else text)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a UTC offset: {value!r}")
    return parsed
