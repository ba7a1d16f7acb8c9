"""`client.events`: recording events and reading them back, a page at a
time, every page in turn, or live as they are recorded."""

from __future__ import annotations

from datetime import datetime
from typing import Any, AsyncIterator, Dict, Iterator, Mapping, Optional, Sequence, Union

from .._config import Timeout
from .._exceptions import TocsinError
from .._models import Event, EventList, EventParser, EventPriority
from .._operation import call
from .._request import CallSpec, Headers, RequestOptions, rfc3339
from .._response import TocsinResponse
from .._streaming import DEFAULT_IDLE_TIMEOUT, AsyncEventStream, EventStream, StreamSettings
from ._resource import AsyncResource, SyncResource
from .stats import Instant

#: When an event happened (`events.create(timestamp=...)`): a timezone-aware
#: datetime, an RFC 3339 string passed as is, or Unix seconds.
Timestamp = Union[datetime, str, int, float]


def _create(fields: Dict[str, Any]) -> CallSpec[Event]:
    if fields["tags"] is not None:
        fields["tags"] = list(fields["tags"])
    if isinstance(fields["timestamp"], datetime):
        fields["timestamp"] = rfc3339("timestamp", fields["timestamp"])
    return call("createEvent", Event.from_json, body=fields)


def _list(query: Dict[str, Any]) -> CallSpec[EventList]:
    return call("listEvents", EventList.from_json, query=query)


def _stream_settings(
    channel: Optional[str],
    last_event_id: Optional[str],
    idle_timeout: float,
    timeout: Optional[Timeout],
    extra_headers: Optional[Headers],
) -> StreamSettings:
    return StreamSettings(
        query={"channel": channel},
        last_event_id=last_event_id,
        options=RequestOptions(timeout=timeout, extra_headers=extra_headers),
        idle_timeout=idle_timeout,
    )


def _following(cursor: Optional[str], page: EventList) -> Optional[str]:
    """The cursor of the page after `page` (requested with `cursor`), or
    None after the last. A server answering with the cursor it was given
    would make the iteration endless, so that is an error."""
    if page.next_cursor is not None and page.next_cursor == cursor:
        raise TocsinError(f"The service returned the same cursor again ({cursor})")
    return page.next_cursor


class Events(SyncResource):
    def create(
        self,
        *,
        channel_name: str,
        title: str,
        description: Optional[str] = None,
        icon: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        user_id: Optional[str] = None,
        notify: Optional[bool] = None,
        source: Optional[str] = None,
        priority: Optional[EventPriority] = None,
        alert_key: Optional[str] = None,
        parser: Optional[EventParser] = None,
        url: Optional[str] = None,
        timestamp: Optional[Timestamp] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Event]:
        """`POST /v1/events`: records an event on a channel (created on first
        use) and, unless `notify=False`, pushes it to the project's devices.
        `priority` is "low" (quiet), "normal" (the default) or "high".
        `alert_key` (1-64 characters): the push replaces, on each device, the
        notification of any earlier event of the project with the same key
        instead of stacking up.

        `icon` is one emoji or its shortcode (`":moneybag:"`), stored and
        returned as the emoji. `parser="markdown"`: the description is
        markdown, and the event comes back with `description_html`, rendered
        and sanitised. `url` (http(s)): where tapping the alert leads.

        `timestamp`: when the event happened, to record history: a
        timezone-aware datetime (a naive one is refused, as for `since`), an
        RFC 3339 string or Unix seconds, not in the future; kept to the
        millisecond. Such an event is stored at that time and never pushed,
        whatever `notify` says (it comes back with `notify=False`)."""
        fields = dict(
            channel_name=channel_name,
            title=title,
            description=description,
            icon=icon,
            tags=tags,
            metadata=metadata,
            user_id=user_id,
            notify=notify,
            source=source,
            priority=priority,
            alert_key=alert_key,
            parser=parser,
            url=url,
            timestamp=timestamp,
        )
        return self._client._request(
            _create(fields),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    def get(
        self,
        id: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Event]:
        """`GET /v1/events/{id}`: an event with its notification state and the
        push to each device. An unknown id is a NotFoundError."""
        return self._client._request(
            call("getEvent", Event.from_json, path={"id": id}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    def list(
        self,
        *,
        channel: Optional[str] = None,
        tag: Optional[str] = None,
        user_id: Optional[str] = None,
        q: Optional[str] = None,
        since: Optional[Instant] = None,
        until: Optional[Instant] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[EventList]:
        """`GET /v1/events`: one page of the project's events, newest first.
        `data.next_cursor`, passed as `cursor`, gets the next page; it is None
        on the last. `q` searches title and description (case-insensitive);
        `since` is inclusive, `until` exclusive; `limit` is 1-100 (default 50).
        `list_all` walks every page for you."""
        query = dict(
            channel=channel, tag=tag, user_id=user_id, q=q, since=since, until=until,
            limit=limit, cursor=cursor,
        )  # fmt: skip
        return self._client._request(
            _list(query), RequestOptions(timeout=timeout, extra_headers=extra_headers)
        )

    def list_all(
        self,
        *,
        channel: Optional[str] = None,
        tag: Optional[str] = None,
        user_id: Optional[str] = None,
        q: Optional[str] = None,
        since: Optional[Instant] = None,
        until: Optional[Instant] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> Iterator[Event]:
        """Every event `list` would page through, newest first. The next page
        (same filters; `limit` is the page size) is requested only when the
        loop gets to it, so leaving the loop early requests no more."""
        while True:
            page = self.list(
                channel=channel, tag=tag, user_id=user_id, q=q, since=since, until=until,
                limit=limit, cursor=cursor, timeout=timeout, extra_headers=extra_headers,
            ).data  # fmt: skip
            yield from page.items
            cursor = _following(cursor, page)
            if cursor is None:
                return

    def stream(
        self,
        *,
        channel: Optional[str] = None,
        last_event_id: Optional[str] = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> EventStream:
        """`GET /v1/stream`: every event recorded in the project from now on
        (after `last_event_id` when given: those recorded since are replayed
        first), live. Reconnects by itself with `Last-Event-ID`; see
        `EventStream`. Nothing is sent until the loop starts."""
        return EventStream(
            self._client,
            _stream_settings(channel, last_event_id, idle_timeout, timeout, extra_headers),
        )


class AsyncEvents(AsyncResource):
    async def create(
        self,
        *,
        channel_name: str,
        title: str,
        description: Optional[str] = None,
        icon: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        user_id: Optional[str] = None,
        notify: Optional[bool] = None,
        source: Optional[str] = None,
        priority: Optional[EventPriority] = None,
        alert_key: Optional[str] = None,
        parser: Optional[EventParser] = None,
        url: Optional[str] = None,
        timestamp: Optional[Timestamp] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Event]:
        """`POST /v1/events`: see `Events.create`."""
        fields = dict(
            channel_name=channel_name,
            title=title,
            description=description,
            icon=icon,
            tags=tags,
            metadata=metadata,
            user_id=user_id,
            notify=notify,
            source=source,
            priority=priority,
            alert_key=alert_key,
            parser=parser,
            url=url,
            timestamp=timestamp,
        )
        return await self._client._request(
            _create(fields),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    async def get(
        self,
        id: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Event]:
        """`GET /v1/events/{id}`: see `Events.get`."""
        return await self._client._request(
            call("getEvent", Event.from_json, path={"id": id}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    async def list(
        self,
        *,
        channel: Optional[str] = None,
        tag: Optional[str] = None,
        user_id: Optional[str] = None,
        q: Optional[str] = None,
        since: Optional[Instant] = None,
        until: Optional[Instant] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[EventList]:
        """`GET /v1/events`: see `Events.list`."""
        query = dict(
            channel=channel, tag=tag, user_id=user_id, q=q, since=since, until=until,
            limit=limit, cursor=cursor,
        )  # fmt: skip
        return await self._client._request(
            _list(query), RequestOptions(timeout=timeout, extra_headers=extra_headers)
        )

    async def list_all(
        self,
        *,
        channel: Optional[str] = None,
        tag: Optional[str] = None,
        user_id: Optional[str] = None,
        q: Optional[str] = None,
        since: Optional[Instant] = None,
        until: Optional[Instant] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> AsyncIterator[Event]:
        """Every event `list` would page through: `async for event in
        client.events.list_all(channel="payments")`. See `Events.list_all`."""
        while True:
            page = (
                await self.list(
                    channel=channel, tag=tag, user_id=user_id, q=q, since=since, until=until,
                    limit=limit, cursor=cursor, timeout=timeout, extra_headers=extra_headers,
                )  # fmt: skip
            ).data
            for event in page.items:
                yield event
            cursor = _following(cursor, page)
            if cursor is None:
                return

    def stream(
        self,
        *,
        channel: Optional[str] = None,
        last_event_id: Optional[str] = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> AsyncEventStream:
        """`GET /v1/stream`: see `Events.stream`; iterate with `async for`."""
        return AsyncEventStream(
            self._client,
            _stream_settings(channel, last_event_id, idle_timeout, timeout, extra_headers),
        )
