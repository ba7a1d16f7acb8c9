"""The official Python client for Tocsin, the self-hosted event alerting
service.

    from tocsin import Tocsin

    client = Tocsin()  # TOCSIN_API_KEY and TOCSIN_BASE_URL from the environment
    client.events.create(channel_name="payments", title="Payment failed")

Everything a caller may use is exported here and in `tocsin.types`; the
modules whose names start with `_` are internal.
"""

from . import types
from ._client import AsyncTocsin, Tocsin
from ._config import DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from ._exceptions import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    ConflictError,
    FieldError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    TocsinError,
    ValidationError,
)
from ._rate_limit import RateLimit
from ._request import CLIENT_ID
from ._response import TocsinResponse
from ._streaming import (
    DEFAULT_IDLE_TIMEOUT,
    AsyncEventStream,
    AsyncLiveStream,
    EventStream,
    LiveStream,
)
from ._types import NOT_GIVEN, NotGiven
from ._version import __version__

__all__ = [
    "Tocsin",
    "AsyncTocsin",
    "TocsinResponse",
    "RateLimit",
    "EventStream",
    "AsyncEventStream",
    "LiveStream",
    "AsyncLiveStream",
    "TocsinError",
    "APIError",
    "ValidationError",
    "FieldError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "RateLimitError",
    "InternalServerError",
    "APIConnectionError",
    "APITimeoutError",
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_IDLE_TIMEOUT",
    "CLIENT_ID",
    "NOT_GIVEN",
    "NotGiven",
    "__version__",
    "types",
]
