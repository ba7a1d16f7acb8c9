"""`Tocsin` and `AsyncTocsin`: the clients users build. Each holds its
resources and the one call that is not a resource's (`identify`); the
request loop is in `_base_client`."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Union

import httpx

from ._base_client import AsyncAPIClient, SyncAPIClient
from ._config import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, Timeout
from ._models import Identity
from ._operation import call
from ._exceptions import TocsinError
from ._request import CallSpec, Headers, QueryValue, RequestOptions
from ._response import TocsinResponse
from .resources import (
    AsyncChannels,
    AsyncDevices,
    AsyncEvents,
    AsyncStats,
    AsyncUsers,
    Channels,
    Devices,
    Events,
    Stats,
    Users,
)


def _raw(
    method: str,
    path: str,
    query: Optional[Mapping[str, QueryValue]],
    body: Optional[Mapping[str, Any]],
) -> CallSpec[Any]:
    if not path.startswith("/"):
        raise TocsinError(f"path must start with / (below base_url), got {path!r}")
    return CallSpec(method=method.upper(), path=path, cast=lambda data: data, query=query, body=body)


def _identify(
    user_id: str, properties: Optional[Mapping[str, Any]], aliases: Optional[Sequence[str]]
) -> CallSpec[Identity]:
    body: Dict[str, Any] = {
        "user_id": user_id,
        "properties": properties,
        "aliases": list(aliases) if aliases is not None else None,
    }
    return call("identify", Identity.from_json, body=body)


class Tocsin(SyncAPIClient):
    """Client for a Tocsin server.

        client = Tocsin()  # TOCSIN_API_KEY and TOCSIN_BASE_URL from the environment
        client = Tocsin("tk_...", base_url="https://tocsin.internal.example.com")
        client.events.create(channel_name="payments", title="Payment failed")

    `base_url` is the server's root, without /v1 (default TOCSIN_BASE_URL,
    else http://127.0.0.1:8080). `timeout` is in seconds (or an
    httpx.Timeout), per attempt. `max_retries` retries after connection
    errors, 409 in flight, 429 and 5xx; 0 turns retries off. `http_client`
    replaces the httpx.Client (proxies, certificates, a test transport); the
    client closes only the one it made. Use it as a context manager, or call
    `close()`, to close its connections.
    """

    events: Events
    devices: Devices
    channels: Channels
    users: Users
    stats: Stats

    def __init__(
        self,
        api_key: Optional[str] = None,
        *,
        base_url: Union[str, httpx.URL, None] = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_headers: Optional[Mapping[str, str]] = None,
        http_client: Optional[httpx.Client] = None,
    ) -> None:
        super().__init__(
            api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            default_headers=default_headers,
            http_client=http_client,
        )
        self.events = Events(self)
        self.devices = Devices(self)
        self.channels = Channels(self)
        self.users = Users(self)
        self.stats = Stats(self)

    def identify(
        self,
        *,
        user_id: str,
        properties: Optional[Mapping[str, Any]] = None,
        aliases: Optional[Sequence[str]] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Identity]:
        """`POST /v1/identify`: creates or updates a user identity. Properties
        are merged into the stored ones; aliases are added."""
        return self._request(
            _identify(user_id, properties, aliases),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, QueryValue]] = None,
        body: Optional[Mapping[str, Any]] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Any]:
        """Sends one call of a route this version does not wrap (the admin
        API, a route newer than the client) through the same request loop:
        the key, retries, idempotency key and errors work as for any call.
        `path` is below `base_url` (e.g. "/admin/v1/organizations"), its
        segments encoded; `query` and `body` use the API's names; `data` is
        the envelope's `data` as parsed JSON."""
        return self._request(
            _raw(method, path, query, body),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )


class AsyncTocsin(AsyncAPIClient):
    """The async twin of `Tocsin`, on an httpx.AsyncClient; every call is
    awaited.

        async with AsyncTocsin() as client:
            await client.events.create(channel_name="payments", title="Payment failed")
    """

    events: AsyncEvents
    devices: AsyncDevices
    channels: AsyncChannels
    users: AsyncUsers
    stats: AsyncStats

    def __init__(
        self,
        api_key: Optional[str] = None,
        *,
        base_url: Union[str, httpx.URL, None] = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_headers: Optional[Mapping[str, str]] = None,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        super().__init__(
            api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            default_headers=default_headers,
            http_client=http_client,
        )
        self.events = AsyncEvents(self)
        self.devices = AsyncDevices(self)
        self.channels = AsyncChannels(self)
        self.users = AsyncUsers(self)
        self.stats = AsyncStats(self)

    async def identify(
        self,
        *,
        user_id: str,
        properties: Optional[Mapping[str, Any]] = None,
        aliases: Optional[Sequence[str]] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Identity]:
        """`POST /v1/identify`: see `Tocsin.identify`."""
        return await self._request(
            _identify(user_id, properties, aliases),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, QueryValue]] = None,
        body: Optional[Mapping[str, Any]] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Any]:
        """A call of a route this version does not wrap: see `Tocsin.request`."""
        return await self._request(
            _raw(method, path, query, body),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )
