"""The request loop every call goes through — send, read, retry with backoff,
note the rate limit — once for httpx.Client and once for httpx.AsyncClient.
Everything but the I/O (what to send, what an answer means, how long to
wait) lives in `_request`, `_response` and `_retry`, so the two loops differ
only by `await`."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Generic, Mapping, Optional, Type, TypeVar, Union

import anyio
import httpx

from ._config import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    ClientConfig,
    Timeout,
    check_max_retries,
    resolve_api_key,
    resolve_base_url,
    resolve_timeout,
)
from ._exceptions import TocsinError
from ._rate_limit import RateLimit, parse_rate_limit
from ._request import CallSpec, RequestOptions, build_request
from ._response import Failure, TocsinResponse, read_response, transport_failure
from ._retry import RetryBudget

T = TypeVar("T")
Self = TypeVar("Self", bound="BaseClient[Any]")
#: httpx.Client or httpx.AsyncClient.
HttpT = TypeVar("HttpT", httpx.Client, httpx.AsyncClient)


class BaseClient(Generic[HttpT]):
    """Settings, the httpx client and the last known rate limit, shared by
    both clients. The one constructor of `Tocsin` and `AsyncTocsin`."""

    #: httpx.Client or httpx.AsyncClient: what `http_client` must be, and
    #: what the client makes when it is not given.
    _http_type: Type[HttpT]
    _http: HttpT
    #: Made by the client, so closed by it; one passed in belongs to the caller.
    _owns_http: bool
    _config: ClientConfig
    _last_rate_limit: Optional[RateLimit]

    def __init__(
        self,
        api_key: Optional[str] = None,
        *,
        base_url: Union[str, httpx.URL, None] = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_headers: Optional[Mapping[str, str]] = None,
        http_client: Optional[HttpT] = None,
    ) -> None:
        if http_client is not None and not isinstance(http_client, self._http_type):
            raise TocsinError(
                f"http_client must be an httpx.{self._http_type.__name__} "
                "(Tocsin takes an httpx.Client, AsyncTocsin an httpx.AsyncClient)"
            )
        self._config = ClientConfig(
            api_key=resolve_api_key(api_key),
            base_url=resolve_base_url(base_url),
            timeout=resolve_timeout(timeout),
            max_retries=check_max_retries(max_retries),
            default_headers=dict(default_headers or {}),
        )
        self._last_rate_limit = None
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else self._http_type()

    @property
    def base_url(self) -> str:
        """The server's root, without /v1 and without a trailing slash."""
        return self._config.base_url

    @property
    def timeout(self) -> httpx.Timeout:
        return self._config.timeout

    @property
    def max_retries(self) -> int:
        return self._config.max_retries

    @property
    def last_rate_limit(self) -> Optional[RateLimit]:
        """The rate limit the latest response of any call reported (error
        responses too); None before the first."""
        return self._last_rate_limit

    def _note_rate_limit(self, response: httpx.Response) -> Optional[RateLimit]:
        rate_limit = parse_rate_limit(response.headers)
        if rate_limit is not None:
            self._last_rate_limit = rate_limit
        return rate_limit

    def _read(
        self, response: httpx.Response, spec: CallSpec[T], has_key: bool
    ) -> Union[TocsinResponse[T], Failure]:
        return read_response(
            response,
            spec.cast,
            rate_limit=self._note_rate_limit(response),
            has_idempotency_key=has_key,
        )


class SyncAPIClient(BaseClient[httpx.Client]):
    """The blocking request loop, on an httpx.Client."""

    _http_type = httpx.Client

    @staticmethod
    def _sleep(seconds: float) -> None:
        """Waits before a retry; replaced in tests, to retry without waiting."""
        time.sleep(seconds)

    def _request(self, spec: CallSpec[T], options: RequestOptions) -> TocsinResponse[T]:
        request, has_key = build_request(self._http, self._config, spec, options)
        budget = RetryBudget(self._config.max_retries)
        while True:
            try:
                response = self._http.send(request)
            except httpx.TransportError as exc:
                outcome: Union[TocsinResponse[T], Failure] = transport_failure(exc, request)
            else:
                outcome = self._read(response, spec, has_key)
            if isinstance(outcome, TocsinResponse):
                return outcome
            delay = budget.next_delay(outcome.retryable, outcome.retry_after)
            if delay is None:
                raise outcome.error
            self._sleep(delay)

    def close(self) -> None:
        """Closes the connections, unless the httpx.Client was passed in (its
        owner closes it)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


class AsyncAPIClient(BaseClient[httpx.AsyncClient]):
    """The same loop with `await`, on an httpx.AsyncClient."""

    _http_type = httpx.AsyncClient

    @staticmethod
    async def _sleep(seconds: float) -> None:
        """Waits before a retry, under asyncio or trio; replaced in tests."""
        await anyio.sleep(seconds)

    async def _request(self, spec: CallSpec[T], options: RequestOptions) -> TocsinResponse[T]:
        request, has_key = build_request(self._http, self._config, spec, options)
        budget = RetryBudget(self._config.max_retries)
        while True:
            try:
                response = await self._http.send(request)
            except httpx.TransportError as exc:
                outcome: Union[TocsinResponse[T], Failure] = transport_failure(exc, request)
            else:
                outcome = self._read(response, spec, has_key)
            if isinstance(outcome, TocsinResponse):
                return outcome
            delay = budget.next_delay(outcome.retryable, outcome.retry_after)
            if delay is None:
                raise outcome.error
            await self._sleep(delay)

    async def close(self) -> None:
        """Closes the connections, unless the httpx.AsyncClient was passed in."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self: Self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()
