"""`client.channels`: the channels of the key's project and their activity."""

from __future__ import annotations

from typing import Optional

from .._config import Timeout
from .._models import ChannelList
from .._operation import call
from .._request import Headers, RequestOptions
from .._response import TocsinResponse
from ._resource import AsyncResource, SyncResource


class Channels(SyncResource):
    def list(
        self, *, timeout: Optional[Timeout] = None, extra_headers: Optional[Headers] = None
    ) -> TocsinResponse[ChannelList]:
        """`GET /v1/channels`: every channel with its event count and last
        event time, most recently active first."""
        return self._client._request(
            call("listChannels", ChannelList.from_json),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )


class AsyncChannels(AsyncResource):
    async def list(
        self, *, timeout: Optional[Timeout] = None, extra_headers: Optional[Headers] = None
    ) -> TocsinResponse[ChannelList]:
        """`GET /v1/channels`: every channel with its event count and last
        event time, most recently active first."""
        return await self._client._request(
            call("listChannels", ChannelList.from_json),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )
