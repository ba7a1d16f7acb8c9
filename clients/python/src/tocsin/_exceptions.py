"""The errors the client raises: a class per kind, so callers branch with
`except`. Named as openai-python names them.

    TocsinError
    ├── APIError                  the service answered with an error status
    │   ├── ValidationError       400, with the list of faults
    │   ├── AuthenticationError   401, missing or unknown key
    │   ├── PermissionDeniedError 403, the key lacks the scope
    │   ├── NotFoundError         404
    │   ├── ConflictError         409 and 422, idempotency key conflicts
    │   ├── RateLimitError        429, with the rate limit and Retry-After
    │   └── InternalServerError   5xx
    └── APIConnectionError        no answer (refused, reset, DNS…)
        └── APITimeoutError       no answer in time

Every `APIError` message names the request id, so a log line is enough to
find the request in the server's logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, NamedTuple, Optional, Tuple

if TYPE_CHECKING:
    from ._rate_limit import RateLimit

__all__ = [
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
]


class TocsinError(Exception):
    """Base class of every error this package raises (a bad setting too)."""


class APIError(TocsinError):
    """The service answered with a non-2xx status."""

    #: The HTTP status code.
    status: int
    #: The server's `error` text (or `HTTP <status>` when the body had none,
    #: e.g. a proxy's HTML page).
    message: str
    #: The response's request id, for the server's logs and bug reports.
    request_id: Optional[str]
    #: The parsed JSON body, or its text when it was not JSON.
    body: object
    #: The rate limit the response reported, when it had the headers.
    rate_limit: Optional[RateLimit]

    def __init__(
        self,
        message: str,
        *,
        status: int,
        request_id: Optional[str],
        body: object,
        rate_limit: Optional[RateLimit] = None,
    ) -> None:
        rid = request_id if request_id else "none"
        super().__init__(f"{status} {message} (request id: {rid})")
        self.status = status
        self.message = message
        self.request_id = request_id
        self.body = body
        self.rate_limit = rate_limit


class FieldError(NamedTuple):
    """One fault of a `ValidationError`: a `(path, message)` pair."""

    #: Where the faulty value is, e.g. `("channelName",)`, `("tags", "2")` or
    #: `("query", "limit")`; the names are the API's (camelCase).
    path: Tuple[str, ...]
    message: str


class ValidationError(APIError):
    """400: the request was refused by validation (or was not valid JSON)."""

    #: Every fault found; empty for malformed JSON.
    details: List[FieldError]

    def __init__(
        self,
        message: str,
        *,
        status: int,
        request_id: Optional[str],
        body: object,
        rate_limit: Optional[RateLimit] = None,
        details: List[FieldError],
    ) -> None:
        super().__init__(
            message, status=status, request_id=request_id, body=body, rate_limit=rate_limit
        )
        self.details = details


class AuthenticationError(APIError):
    """401: no API key was sent, or the server does not know it (revoked, mistyped)."""


class PermissionDeniedError(APIError):
    """403: the key is valid but lacks the scope the call needs (e.g. `events:read`)."""


class NotFoundError(APIError):
    """404: the event, device, user or insight does not exist in the key's project."""


class ConflictError(APIError):
    """409: a request with the same Idempotency-Key is still in flight (retried,
    so seen once retries run out), or, without Retry-After, the project
    already has its 100 insights (not retried); 422: the key was used with
    another body."""


class RateLimitError(APIError):
    """429: the key's rate limit is used up."""

    #: Always set: from the headers, or "none left until Retry-After" when a
    #: proxy stripped them.
    rate_limit: RateLimit
    #: Seconds to wait before trying again, when the server sent Retry-After.
    retry_after: Optional[float]

    def __init__(
        self,
        message: str,
        *,
        status: int,
        request_id: Optional[str],
        body: object,
        rate_limit: RateLimit,
        retry_after: Optional[float],
    ) -> None:
        super().__init__(
            message, status=status, request_id=request_id, body=body, rate_limit=rate_limit
        )
        self.retry_after = retry_after


class InternalServerError(APIError):
    """5xx: the service, or a proxy in front of it, failed. Retried, so seen
    once retries run out."""


class APIConnectionError(TocsinError):
    """The service could not be reached, or the connection broke mid-answer.
    `__cause__` is httpx's error."""

    #: The URL the client tried (also in the message).
    url: str

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class APITimeoutError(APIConnectionError):
    """No answer within the timeout."""
