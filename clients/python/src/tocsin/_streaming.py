"""`events.stream`: live events over Server-Sent Events, kept open across
dropped connections. After a drop the stream reconnects with backoff and
sends the id of the last event it handed out in `Last-Event-ID`, so the
server replays what was recorded in between: no event is lost or repeated.

`StreamState` decides everything (what to send, what an answer means, how
long to wait); `EventStream` and `AsyncEventStream` only do the I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    AsyncGenerator,
    AsyncIterator,
    Dict,
    Generator,
    Iterator,
    List,
    Optional,
    Type,
    Union,
)

import httpx

from ._config import resolve_timeout
from ._exceptions import APIConnectionError, TocsinError
from ._models import Event
from ._rate_limit import parse_rate_limit, parse_retry_after
from ._request import CallSpec, RequestOptions, build_request
from ._response import Failure, error_from_response, transport_failure
from ._retry import INITIAL_DELAY, MAX_DELAY, backoff_delay, is_retryable_status, retry_delay
from ._sse import SseParser

if TYPE_CHECKING:
    from ._base_client import AsyncAPIClient, SyncAPIClient

#: The service sends a keep-alive at least every 15 s: a connection silent
#: for three of them is taken for dead and replaced.
DEFAULT_IDLE_TIMEOUT = 45.0
#: Floor of the wait between connections, so a server's `retry: 0` cannot
#: turn an outage into a busy loop.
MIN_RECONNECT_DELAY = 0.1



def _no_data(_: object) -> None:
    """A stream's answer has no envelope to read."""


class StreamState:
    """Where a stream stands across its connections."""

    def __init__(self, *, max_retries: int, last_event_id: Optional[str]) -> None:
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

    def feed(self, chunk: bytes) -> List[Event]:
        """The events a chunk completed. Each one's id is taken as it is
        handed out (see `handed_out`), not here."""
        events = []
        for message in self._parser.push(chunk):
            if message.type != "event":
                continue  # other types are for later use; old clients skip them
            try:
                event = Event.from_json(json.loads(message.data))
            except (ValueError, KeyError, TypeError) as exc:
                raise TocsinError(
                    f"The event stream sent an event this client cannot read: {message.data[:200]!r}"
                ) from exc
            events.append(event)
        return events

    def handed_out(self, event: Event) -> None:
        # From the event, not the parser: one chunk can complete several
        # events, and a consumer that stops after the first must not resume
        # after the last.
        self.last_event_id = event.id

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
    """What `events.stream` was asked for."""

    query: Dict[str, Optional[str]]
    last_event_id: Optional[str]
    options: RequestOptions
    idle_timeout: float


class _StreamBase:
    """What both streams hold: their settings and where they stand."""

    def __init__(
        self, client: Union["SyncAPIClient", "AsyncAPIClient"], stream: StreamSettings
    ) -> None:
        self._settings = stream
        self._state = StreamState(
            max_retries=client.max_retries, last_event_id=stream.last_event_id
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


class EventStream(_StreamBase):
    """The project's events as they are recorded, as an iterator. Leaving the
    loop does not close the connection by itself in every Python: use it as a
    context manager, or call `close()`.

        with client.events.stream(channel="payments") as stream:
            for event in stream:
                print(event.title)
    """

    def __init__(self, client: "SyncAPIClient", stream: StreamSettings) -> None:
        super().__init__(client, stream)
        self._client = client
        self._iterator = self._run()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return next(self._iterator)

    def close(self) -> None:
        """Closes the connection; the loop ends."""
        self._iterator.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def _run(self) -> Generator[Event, None, None]:
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
                            for event in state.feed(chunk):
                                state.handed_out(event)
                                yield event
                except httpx.TransportError as exc:
                    failure = state.broken(exc, request)
                finally:
                    response.close()
            client._sleep(state.next_delay(failure))


class AsyncEventStream(_StreamBase):
    """The async twin of `EventStream`:

    async with client.events.stream(channel="payments") as stream:
        async for event in stream:
            print(event.title)
    """

    def __init__(self, client: "AsyncAPIClient", stream: StreamSettings) -> None:
        super().__init__(client, stream)
        self._client = client
        self._iterator = self._run()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        return await self._iterator.__anext__()

    async def close(self) -> None:
        """Closes the connection; the loop ends."""
        await self._iterator.aclose()

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()

    async def _run(self) -> AsyncGenerator[Event, None]:
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
                            for event in state.feed(chunk):
                                state.handed_out(event)
                                yield event
                except httpx.TransportError as exc:
                    failure = state.broken(exc, request)
                finally:
                    await response.aclose()
            await client._sleep(state.next_delay(failure))
