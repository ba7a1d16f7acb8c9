"""`events.stream` and `client.stream`: `GET /v1/stream` over Server-Sent
Events, kept open across dropped connections. After a drop the stream
reconnects with backoff and sends the id of the last event it handed out in
`Last-Event-ID`, so the server replays what was recorded in between: no
event is lost or repeated.

The stream carries events (`event: event`, with an `id:`) and the changes of
the project's insights (`event: insight`, `event: insight-deleted`, without
one). `EventStream` yields the events alone; `LiveStream` yields all three,
as `StreamMessage` (an `Event`, an `Insight` or an `InsightDeleted`).

`StreamState` decides everything (what to send, what an answer means, how
long to wait); the stream classes only do the I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Dict,
    Generator,
    Generic,
    Iterator,
    List,
    Mapping,
    Optional,
    Type,
    TypeVar,
    Union,
)

import httpx

from ._config import resolve_timeout
from ._exceptions import APIConnectionError, TocsinError
from ._models import Event, Insight, InsightDeleted, StreamMessage
from ._rate_limit import parse_rate_limit, parse_retry_after
from ._request import CallSpec, RequestOptions, build_request
from ._response import Failure, error_from_response, transport_failure
from ._retry import INITIAL_DELAY, MAX_DELAY, backoff_delay, is_retryable_status, retry_delay
from ._sse import SseMessage, SseParser

if TYPE_CHECKING:
    from ._base_client import AsyncAPIClient, SyncAPIClient

#: The service sends a keep-alive at least every 15 s: a connection silent
#: for three of them is taken for dead and replaced.
DEFAULT_IDLE_TIMEOUT = 45.0
#: Floor of the wait between connections, so a server's `retry: 0` cannot
#: turn an outage into a busy loop.
MIN_RECONNECT_DELAY = 0.1

#: What a stream yields: an Event, or any StreamMessage.
M = TypeVar("M")

#: Each message type of the stream, and how its data is read.
_READERS: Dict[str, Callable[[Mapping[str, Any]], StreamMessage]] = {
    "event": Event.from_json,
    "insight": Insight.from_json,
    "insight-deleted": InsightDeleted.from_json,
}


def _no_data(_: object) -> None:
    """A stream's answer has no envelope to read."""


def _parse(message: SseMessage) -> StreamMessage:
    try:
        return _READERS[message.type](json.loads(message.data))
    except (ValueError, KeyError, TypeError) as exc:
        what = "an event" if message.type == "event" else f"an {message.type} message"
        raise TocsinError(
            f"The event stream sent {what} this client cannot read: {message.data[:200]!r}"
        ) from exc


def read_event(message: SseMessage) -> Optional[Event]:
    """The event of an `event` message; None for the other types, skipped
    unread (insight changes; types for later use, which old clients skip)."""
    if message.type != "event":
        return None
    event = _parse(message)
    assert isinstance(event, Event)
    return event


def read_message(message: SseMessage) -> Optional[StreamMessage]:
    """The data of a message of a known type; None for the others (types
    for later use: old clients skip them)."""
    if message.type not in _READERS:
        return None
    return _parse(message)


class StreamState(Generic[M]):
    """Where a stream stands across its connections. `read` turns a message
    into what the stream yields, or None to skip it."""

    def __init__(
        self,
        *,
        max_retries: int,
        last_event_id: Optional[str],
        read: Callable[[SseMessage], Optional[M]],
    ) -> None:
        self._read = read
        self._parser = SseParser(last_event_id or "")
        self._max_retries = max_retries
        self._opened = False
        self._failures = 0
        self.last_event_id = last_event_id or None

    def headers(self) -> Dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._parser.last_event_id:
            headers["Last-Event-ID"] = self._parser.last_event_id
        return headers

    def refusal(self, response: httpx.Response) -> Optional[Failure]:
        """The Failure of a response that cannot start the stream (its body
        read), or None for one that can. A 204 is handled by the caller."""
        if not 200 <= response.status_code <= 299:
            retry_after = parse_retry_after(response.headers)
            return Failure(
                error=error_from_response(
                    response,
                    rate_limit=parse_rate_limit(response.headers),
                    retry_after=retry_after,
                ),
                retryable=is_retryable_status(response.status_code, False),
                retry_after=retry_after,
            )
        content_type = response.headers.get("content-type", "")
        if not content_type.strip().lower().startswith("text/event-stream"):
            # A proxy's login page or a wrong base URL: reconnecting gets the same.
            return Failure(
                error=TocsinError(
                    f"Expected an event stream from {response.request.url}, got HTTP "
                    f"{response.status_code} with Content-Type {content_type!r}"
                ),
                retryable=False,
            )
        self._opened = True
        self._failures = 0
        return None

    def feed(self, chunk: bytes) -> List[M]:
        """What a chunk completed, read. Each event's id is taken as it is
        handed out (see `handed_out`), not here."""
        items = []
        for message in self._parser.push(chunk):
            item = self._read(message)
            if item is not None:
                items.append(item)
        return items

    def handed_out(self, item: M) -> None:
        # From the event, not the parser: one chunk can complete several
        # events, and a consumer that stops after the first must not resume
        # after the last. Insight messages carry no id: the position stays.
        if isinstance(item, Event):
            self.last_event_id = item.id

    def broken(self, exc: httpx.TransportError, request: httpx.Request) -> Failure:
        if isinstance(exc, httpx.ReadTimeout) and self._opened:
            return Failure(
                error=APIConnectionError(
                    f"The event stream from {request.url} went silent", url=str(request.url)
                ),
                retryable=True,
            )
        return transport_failure(exc, request)

    def next_delay(self, failure: Optional[Failure]) -> float:
        """Seconds to wait before the next connection, after one ended with
        `failure` (None: the server closed a working stream). Raises the
        failure's error when it is final: a status retrying cannot fix, or,
        before the stream has opened once, the client's retries used up, so
        a wrong base URL fails like any call. Once it has opened, it keeps
        reconnecting: a long-lived consumer wants it back however long a
        restart takes."""
        self._parser.end()
        if self._parser.last_event_id:
            # The connection is over, so everything it completed was handed out.
            self.last_event_id = self._parser.last_event_id
        initial = max(
            self._parser.retry if self._parser.retry is not None else INITIAL_DELAY,
            MIN_RECONNECT_DELAY,
        )
        if failure is None:
            return initial
        if not failure.retryable or (not self._opened and self._failures >= self._max_retries):
            raise failure.error
        self._failures += 1
        if failure.retry_after is not None:
            return retry_delay(0, failure.retry_after)
        return backoff_delay(self._failures - 1, initial=initial, ceiling=max(MAX_DELAY, initial))


@dataclass(frozen=True)
class StreamSettings:
    """What `events.stream` or `client.stream` was asked for."""

    query: Dict[str, Optional[str]]
    last_event_id: Optional[str]
    options: RequestOptions
    idle_timeout: float


class _StreamBase(Generic[M]):
    """What every stream holds: its settings and where it stands."""

    _state: StreamState[M]

    def __init__(
        self,
        client: Union["SyncAPIClient", "AsyncAPIClient"],
        stream: StreamSettings,
        read: Callable[[SseMessage], Optional[M]],
    ) -> None:
        self._settings = stream
        self._state = StreamState(
            max_retries=client.max_retries, last_event_id=stream.last_event_id, read=read
        )

    @property
    def last_event_id(self) -> Optional[str]:
        """The id of the latest event handed out (or the one given), to
        resume with later: `events.stream(last_event_id=...)`."""
        return self._state.last_event_id

    def _request(self, client: Union["SyncAPIClient", "AsyncAPIClient"]) -> httpx.Request:
        """The request of the next connection: the client's timeout for
        connecting, the idle timeout for every read (keep-alives included),
        so a dead connection is noticed; Last-Event-ID when there is one."""
        options, base = self._settings.options, client._config.timeout
        if options.timeout is not None:
            base = resolve_timeout(options.timeout)
        timeout = httpx.Timeout(
            base.connect, read=self._settings.idle_timeout, write=base.write, pool=base.pool
        )
        spec = CallSpec(
            method="GET", path="/v1/stream", cast=_no_data, query=self._settings.query
        )
        request, _ = build_request(
            client._http, client._config, spec, options, timeout=timeout, extra=self._state.headers()
        )
        return request


class _SyncStream(_StreamBase[M]):
    """The blocking stream, on the client's httpx.Client."""

    def __init__(
        self,
        client: "SyncAPIClient",
        stream: StreamSettings,
        read: Callable[[SseMessage], Optional[M]],
    ) -> None:
        super().__init__(client, stream, read)
        self._client = client
        self._iterator = self._run()

    def __iter__(self) -> Iterator[M]:
        return self

    def __next__(self) -> M:
        return next(self._iterator)

    def close(self) -> None:
        """Closes the connection; the loop ends."""
        self._iterator.close()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def _run(self) -> Generator[M, None, None]:
        client, state, http = self._client, self._state, self._client._http
        while True:
            request = self._request(client)
            failure: Optional[Failure] = None
            try:
                response = http.send(request, stream=True)
            except httpx.TransportError as exc:
                failure = transport_failure(exc, request)
            else:
                try:
                    client._note_rate_limit(response)
                    if response.status_code == 204:
                        return  # the standard's "do not reconnect"
                    if not 200 <= response.status_code <= 299:
                        response.read()
                    failure = state.refusal(response)
                    if failure is None:
                        for chunk in response.iter_bytes():
                            for item in state.feed(chunk):
                                state.handed_out(item)
                                yield item
                except httpx.TransportError as exc:
                    failure = state.broken(exc, request)
                finally:
                    response.close()
            client._sleep(state.next_delay(failure))


class _AsyncStream(_StreamBase[M]):
    """The same stream with `await`, on the client's httpx.AsyncClient."""

    def __init__(
        self,
        client: "AsyncAPIClient",
        stream: StreamSettings,
        read: Callable[[SseMessage], Optional[M]],
    ) -> None:
        super().__init__(client, stream, read)
        self._client = client
        self._iterator = self._run()

    def __aiter__(self) -> AsyncIterator[M]:
        return self

    async def __anext__(self) -> M:
        return await self._iterator.__anext__()

    async def close(self) -> None:
        """Closes the connection; the loop ends."""
        await self._iterator.aclose()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()

    async def _run(self) -> AsyncGenerator[M, None]:
        client, state, http = self._client, self._state, self._client._http
        while True:
            request = self._request(client)
            failure: Optional[Failure] = None
            try:
                response = await http.send(request, stream=True)
            except httpx.TransportError as exc:
                failure = transport_failure(exc, request)
            else:
                try:
                    client._note_rate_limit(response)
                    if response.status_code == 204:
                        return
                    if not 200 <= response.status_code <= 299:
                        await response.aread()
                    failure = state.refusal(response)
                    if failure is None:
                        async for chunk in response.aiter_bytes():
                            for item in state.feed(chunk):
                                state.handed_out(item)
                                yield item
                except httpx.TransportError as exc:
                    failure = state.broken(exc, request)
                finally:
                    await response.aclose()
            await client._sleep(state.next_delay(failure))


class EventStream(_SyncStream[Event]):
    """The project's events as they are recorded, as an iterator (the
    stream's insight messages are skipped: `client.stream` yields them).
    Leaving the loop does not close the connection by itself in every
    Python: use it as a context manager, or call `close()`.

        with client.events.stream(channel="payments") as stream:
            for event in stream:
                print(event.title)
    """

    def __init__(self, client: "SyncAPIClient", stream: StreamSettings) -> None:
        super().__init__(client, stream, read_event)

    def __enter__(self) -> "EventStream":
        return self


class AsyncEventStream(_AsyncStream[Event]):
    """The async twin of `EventStream`:

    async with client.events.stream(channel="payments") as stream:
        async for event in stream:
            print(event.title)
    """

    def __init__(self, client: "AsyncAPIClient", stream: StreamSettings) -> None:
        super().__init__(client, stream, read_event)

    async def __aenter__(self) -> "AsyncEventStream":
        return self


class LiveStream(_SyncStream[StreamMessage]):
    """Every message of the project's live stream, as an iterator: each
    event recorded (an `Event`), each insight set or incremented (an
    `Insight`, as `insights.list` lists it) and each insight deleted (an
    `InsightDeleted`). Tell them apart with `isinstance`:

        with client.stream() as stream:
            for message in stream:
                if isinstance(message, tocsin.types.Event):
                    print("event", message.title)
                elif isinstance(message, tocsin.types.Insight):
                    print("insight", message.title, message.value)
                else:
                    print("deleted", message.title)

    `last_event_id` is the last event's id: insight messages have none, and
    are not replayed after a reconnection (`insights.list` has them as they
    stand).
    """

    def __init__(self, client: "SyncAPIClient", stream: StreamSettings) -> None:
        super().__init__(client, stream, read_message)

    def __enter__(self) -> "LiveStream":
        return self


class AsyncLiveStream(_AsyncStream[StreamMessage]):
    """The async twin of `LiveStream`: `async with client.stream() as
    stream: async for message in stream: ...`."""

    def __init__(self, client: "AsyncAPIClient", stream: StreamSettings) -> None:
        super().__init__(client, stream, read_message)

    async def __aenter__(self) -> "AsyncLiveStream":
        return self
