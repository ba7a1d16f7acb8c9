"""`client.stats`: counts of events over time, for charts."""

from __future__ import annotations

from datetime import datetime
from typing import Optional, Union

from .._config import Timeout
from .._models import EventStats, StatsBucketSize
from .._operation import call
from .._request import Headers, RequestOptions
from .._response import TocsinResponse
from ._resource import AsyncResource, SyncResource

#: A point in time: an aware datetime, or an RFC 3339 string passed as is.
Instant = Union[datetime, str]


class Stats(SyncResource):
    def events(
        self,
        *,
        channel: Optional[str] = None,
        since: Optional[Instant] = None,
        until: Optional[Instant] = None,
        bucket: Optional[StatsBucketSize] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[EventStats]:
        """`GET /v1/stats/events`: the number of events per UTC hour (the
        default) or day, oldest first, empty buckets included. By default the
        last 24 hours by hour, or 30 days by day. An answer holds at most
        1000 buckets: for a longer range, `next_since` names where the rest
        begins (pass it as `since`); it is None once the range is complete."""
        query = {"channel": channel, "since": since, "until": until, "bucket": bucket}
        return self._client._request(
            call("eventStats", EventStats.from_json, query=query),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )


class AsyncStats(AsyncResource):
    async def events(
        self,
        *,
        channel: Optional[str] = None,
        since: Optional[Instant] = None,
        until: Optional[Instant] = None,
        bucket: Optional[StatsBucketSize] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[EventStats]:
        """`GET /v1/stats/events`: see `Stats.events`."""
        query = {"channel": channel, "since": since, "until": until, "bucket": bucket}
        return await self._client._request(
            call("eventStats", EventStats.from_json, query=query),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )
