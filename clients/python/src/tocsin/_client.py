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
from ._request import CallSpec, Headers, RequestOptions
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
