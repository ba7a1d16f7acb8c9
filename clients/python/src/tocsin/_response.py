"""Turning one HTTP answer into a typed result, or into the error class of
its kind together with whether another attempt may help."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Optional, TypeVar, Union

import httpx

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
from ._rate_limit import RateLimit, parse_retry_after
from ._retry import is_retryable_status

T = TypeVar("T")


@dataclass(frozen=True)
class TocsinResponse(Generic[T]):
    """The result of a successful call."""

    #: The `data` of the success envelope, as a typed object.
    data: T
    #: The key's rate limit after this request; None only when the response
    #: lacked the headers.
    rate_limit: Optional[RateLimit]
    #: The server's request id (also in its logs); quote it in bug reports.
    request_id: str
    #: True when the server replayed the stored answer of an earlier request
    #: with the same Idempotency-Key instead of doing the work again.
    was_replayed: bool
    #: The HTTP status, e.g. 201 for a new device and 200 for a known one.
    status_code: int


@dataclass(frozen=True)
class Failure:
    """A failed attempt: the error to raise if it is the last, and whether
    the retry schedule may try again."""

    error: TocsinError
    retryable: bool
    retry_after: Optional[float] = None


def _json_body(response: httpx.Response) -> Any:
    try:
        return json.loads(response.content) if response.content else None
    except ValueError:
        return None


def _request_id(body: Any, response: httpx.Response) -> Optional[str]:
    if isinstance(body, dict) and isinstance(body.get("requestId"), str):
        return str(body["requestId"])
    header = response.headers.get("x-request-id")
    return header if isinstance(header, str) else None


def read_response(
    response: httpx.Response,
    cast: Callable[[Any], T],
    *,
    rate_limit: Optional[RateLimit],
    has_idempotency_key: bool,
) -> Union[TocsinResponse[T], Failure]:
    """The result of a 2xx answer, or the Failure of any other."""
    if not 200 <= response.status_code <= 299:
        retry_after = parse_retry_after(response.headers)
        return Failure(
            error=error_from_response(response, rate_limit=rate_limit, retry_after=retry_after),
            retryable=is_retryable_status(
                response.status_code, has_idempotency_key, retry_after is not None
            ),
            retry_after=retry_after,
        )
    body = _json_body(response)
    if not isinstance(body, dict) or body.get("success") is not True or "data" not in body:
        raise TocsinError(
            f"Unexpected answer from {response.request.url} (HTTP {response.status_code}): "
            "not a Tocsin success envelope. Is base_url the Tocsin server's root?"
        )
    try:
        data = cast(body["data"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TocsinError(
            f"Unexpected answer from {response.request.url}: its data does not have the "
            f"documented shape ({type(exc).__name__}: {exc})"
        ) from exc
    return TocsinResponse(
        data=data,
        rate_limit=rate_limit,
        # The service always sends one; "" only if something in between dropped it.
        request_id=_request_id(body, response) or "",
        was_replayed=response.headers.get("x-idempotent-replay", "").lower() == "true",
        status_code=response.status_code,
    )


def _details(body: Any) -> List[FieldError]:
    """The well-formed entries of `details`: one bad element must not hide the rest."""
    raw = body.get("details") if isinstance(body, dict) else None
    if not isinstance(raw, list):
        return []
    details: List[FieldError] = []
    for item in raw:
        if isinstance(item, dict) and isinstance(item.get("path"), list):
            message = item.get("message")
            details.append(
                FieldError(
                    path=tuple(str(part) for part in item["path"]),
                    message=message if isinstance(message, str) else "",
                )
            )
    return details


_BY_STATUS: Dict[int, type[APIError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: ConflictError,
}


def error_from_response(
    response: httpx.Response,
    *,
    rate_limit: Optional[RateLimit] = None,
    retry_after: Optional[float] = None,
) -> APIError:
    """The error of the class that matches the status."""
    status = response.status_code
    body = _json_body(response)
    server_message = body.get("error") if isinstance(body, dict) else None
    # A proxy in front of the service may answer with HTML: keep the status readable.
    message = server_message if isinstance(server_message, str) else f"HTTP {status}"
    request_id = _request_id(body, response)
    kept_body: object = body if body is not None else response.text

    if status == 400:
        return ValidationError(
            message,
            status=status,
            request_id=request_id,
            body=kept_body,
            rate_limit=rate_limit,
            details=_details(body),
        )
    if status == 429:
        if rate_limit is None:
            # RateLimitError promises a rate limit. With the headers stripped,
            # the honest summary is "none left until Retry-After (or now)".
            wait = retry_after or 0.0
            now = time.time()
            rate_limit = RateLimit(limit=0, remaining=0, reset=int(now + wait + 0.999), reset_in=wait)
        return RateLimitError(
            message,
            status=status,
            request_id=request_id,
            body=kept_body,
            rate_limit=rate_limit,
            retry_after=retry_after,
        )
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = InternalServerError if 500 <= status <= 599 else APIError
    return cls(message, status=status, request_id=request_id, body=kept_body, rate_limit=rate_limit)


def transport_failure(exc: httpx.TransportError, request: httpx.Request) -> Failure:
    """A request that got no answer. Retryable: with the POST's Idempotency-Key
    a retry cannot record the event twice, even if the lost attempt did."""
    url = str(request.url)
    if isinstance(exc, httpx.TimeoutException):
        error: APIConnectionError = APITimeoutError(
            f"{request.method} {url} timed out ({type(exc).__name__})", url=url
        )
    else:
        error = APIConnectionError(f"Could not reach {url}: {exc or type(exc).__name__}", url=url)
    error.__cause__ = exc
    return Failure(error=error, retryable=True)


__all__ = [
    "TocsinResponse",
    "Failure",
    "read_response",
    "error_from_response",
    "transport_failure",
]
