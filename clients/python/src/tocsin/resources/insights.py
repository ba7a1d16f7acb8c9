"""`client.insights`: named live values of a project (revenue today, active
trials, build status), shown as tiles above the feed."""

from __future__ import annotations

from typing import Optional, Union

from .._config import Timeout
from .._models import Insight, InsightDeleted, InsightList
from .._operation import call
from .._request import CallSpec, Headers, RequestOptions
from .._response import TocsinResponse
from ._resource import AsyncResource, SyncResource

#: An insight's value: a string (1-200 characters), a number (at most
#: 2**53 - 1 either side of zero) or a boolean.
InsightValue = Union[str, float, bool]


def _set(title: str, value: InsightValue, icon: Optional[str]) -> CallSpec[Insight]:
    return call("setInsight", Insight.from_json, body={"title": title, "value": value, "icon": icon})


def _increment(title: str, by: float, icon: Optional[str]) -> CallSpec[Insight]:
    body = {"title": title, "value": {"$inc": by}, "icon": icon}
    return call("incrementInsight", Insight.from_json, body=body)


class Insights(SyncResource):
    def set(
        self,
        *,
        title: str,
        value: InsightValue,
        icon: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Insight]:
        """`POST /v1/insights`: sets an insight's value, creating the insight
        if the project has none by that title (`status_code` 201; 200 when it
        replaced the value). `icon` is an emoji or its shortcode
        (`":moneybag:"`); left out, the insight keeps the one it has."""
        return self._client._request(
            _set(title, value, icon),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    def increment(
        self,
        *,
        title: str,
        by: float,
        icon: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Insight]:
        """`PATCH /v1/insights`: adds `by` (negative to subtract) to an
        insight's number, in one atomic step on the service, so concurrent
        increments each count once. An insight that does not exist is
        created holding `by` (`status_code` 201; 200 otherwise). An integer
        stays one while only integers are added to it. Incrementing a string
        or a boolean is a ValidationError at `("value",)` and changes
        nothing.

        Unlike other PATCH calls it is not idempotent, so it carries an
        Idempotency-Key as a POST does (yours, or one the client makes): a
        retry after a lost answer gets the first try's result instead of
        adding again."""
        return self._client._request(
            _increment(title, by, icon),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    def list(
        self, *, timeout: Optional[Timeout] = None, extra_headers: Optional[Headers] = None
    ) -> TocsinResponse[InsightList]:
        """`GET /v1/insights`: every insight of the project, in the order
        they were created (`data.insights`)."""
        return self._client._request(
            call("listInsights", InsightList.from_json),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    def delete(
        self,
        title: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[InsightDeleted]:
        """`DELETE /v1/insights/{title}` (the title is URL-encoded for you).
        An unknown title is a NotFoundError — also when a retry follows an
        attempt that deleted it but whose answer was lost."""
        return self._client._request(
            call("deleteInsight", InsightDeleted.from_json, path={"title": title}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )


class AsyncInsights(AsyncResource):
    async def set(
        self,
        *,
        title: str,
        value: InsightValue,
        icon: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Insight]:
        """`POST /v1/insights`: see `Insights.set`."""
        return await self._client._request(
            _set(title, value, icon),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    async def increment(
        self,
        *,
        title: str,
        by: float,
        icon: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Insight]:
        """`PATCH /v1/insights`: see `Insights.increment`."""
        return await self._client._request(
            _increment(title, by, icon),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    async def list(
        self, *, timeout: Optional[Timeout] = None, extra_headers: Optional[Headers] = None
    ) -> TocsinResponse[InsightList]:
        """`GET /v1/insights`: see `Insights.list`."""
        return await self._client._request(
            call("listInsights", InsightList.from_json),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    async def delete(
        self,
        title: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[InsightDeleted]:
        """`DELETE /v1/insights/{title}`: see `Insights.delete`."""
        return await self._client._request(
            call("deleteInsight", InsightDeleted.from_json, path={"title": title}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )
