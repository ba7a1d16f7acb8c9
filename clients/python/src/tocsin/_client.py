"""`Tocsin` and `AsyncTocsin`: the clients users build. Each holds its
resources and the one call that is not a resource's (`identify`); the
request loop is in `_base_client`."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Dict, Mapping, Optional, Sequence

from ._base_client import AsyncAPIClient, SyncAPIClient
from ._config import Timeout
from ._models import Identity
from ._operation import call
from ._exceptions import TocsinError
from ._request import CallSpec, Headers, QueryValue, RequestOptions
from ._response import TocsinResponse
from ._streaming import DEFAULT_IDLE_TIMEOUT, AsyncLiveStream, LiveStream
from .resources import (
    AsyncChannels,
    AsyncDevices,
    AsyncEvents,
    AsyncInsights,
    AsyncStats,
    AsyncUsers,
    Channels,
    Devices,
    Events,
    Insights,
    Stats,
    Users,
)
from .resources.events import _stream_settings


def _raw(
    method: str,
    path: str,
    query: Optional[Mapping[str, QueryValue]],
    body: Optional[Mapping[str, Any]],
    idempotency_key: Optional[str],
) -> CallSpec[Any]:
    if not path.startswith("/"):
        raise TocsinError(f"path must start with / (below base_url), got {path!r}")
    method = method.upper()
    # Every POST carries a key; another method when the caller gives one
    # (`PATCH /v1/insights`, an increment, is not idempotent either).
    keyed = method == "POST" or idempotency_key is not None
    return CallSpec(
        method=method, path=path, cast=lambda data: data, query=query, body=body, keyed=keyed
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

    # Made on first use, as openai-python does: a client that only records
    # events never builds the others.
    @cached_property
    def events(self) -> Events:
        """`POST /v1/events`, `GET /v1/events`, `GET /v1/events/{id}`, `GET /v1/stream`."""
        return Events(self)

    @cached_property
    def devices(self) -> Devices:
        """`POST /v1/devices`, `GET /v1/devices`, `DELETE /v1/devices/{id}`, `GET /v1/webpush/key`."""
        return Devices(self)

    @cached_property
    def channels(self) -> Channels:
        """`GET /v1/channels`."""
        return Channels(self)

    @cached_property
    def users(self) -> Users:
        """`GET /v1/users`, `GET /v1/users/{userId}`."""
        return Users(self)

    @cached_property
    def insights(self) -> Insights:
        """`POST /v1/insights`, `PATCH /v1/insights`, `GET /v1/insights`,
        `DELETE /v1/insights/{title}`."""
        return Insights(self)

    @cached_property
    def stats(self) -> Stats:
        """`GET /v1/stats/events`."""
        return Stats(self)

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

    def stream(
        self,
        *,
        channel: Optional[str] = None,
        last_event_id: Optional[str] = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> LiveStream:
        """`GET /v1/stream`: every message of the project's live stream from
        now on — each event recorded (an `Event`), each insight set or
        incremented (an `Insight`) or deleted (an `InsightDeleted`) — as
        `events.stream` reconnects (which yields the events alone). `channel`
        narrows the events only: every insight change arrives. Insight
        messages are not replayed after a reconnection or `last_event_id`;
        `insights.list` has them as they stand. See `LiveStream`."""
        return LiveStream(
            self, _stream_settings(channel, last_event_id, idle_timeout, timeout, extra_headers)
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
        the key, retries, idempotency key and errors work as for any call
        (a POST always carries a key; another method when one is given).
        `path` is below `base_url` (e.g. "/admin/v1/organizations"), its
        segments encoded; `query` and `body` use the API's names; `data` is
        the envelope's `data` as parsed JSON."""
        return self._request(
            _raw(method, path, query, body, idempotency_key),
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

    @cached_property
    def events(self) -> AsyncEvents:
        """See `Tocsin.events`."""
        return AsyncEvents(self)

    @cached_property
    def devices(self) -> AsyncDevices:
        """See `Tocsin.devices`."""
        return AsyncDevices(self)

    @cached_property
    def channels(self) -> AsyncChannels:
        """See `Tocsin.channels`."""
        return AsyncChannels(self)

    @cached_property
    def users(self) -> AsyncUsers:
        """See `Tocsin.users`."""
        return AsyncUsers(self)

    @cached_property
    def insights(self) -> AsyncInsights:
        """See `Tocsin.insights`."""
        return AsyncInsights(self)

    @cached_property
    def stats(self) -> AsyncStats:
        """See `Tocsin.stats`."""
        return AsyncStats(self)

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

    def stream(
        self,
        *,
        channel: Optional[str] = None,
        last_event_id: Optional[str] = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> AsyncLiveStream:
        """`GET /v1/stream`: see `Tocsin.stream`; iterate with `async for`."""
        return AsyncLiveStream(
            self, _stream_settings(channel, last_event_id, idle_timeout, timeout, extra_headers)
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
            _raw(method, path, query, body, idempotency_key),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )
