"""`client.users`: reading the identities recorded with `client.identify`."""

from __future__ import annotations

from typing import Optional

from .._config import Timeout
from .._models import Identity
from .._operation import call
from .._request import Headers, RequestOptions
from .._response import TocsinResponse
from ._resource import AsyncResource, SyncResource


class Users(SyncResource):
    def get(
        self,
        user_id: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Identity]:
        """`GET /v1/users/{userId}`: the identity as `identify` last left it.
        An unknown user is a NotFoundError. The id is URL-encoded for you."""
        return self._client._request(
            call("getUser", Identity.from_json, path={"userId": user_id}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )


class AsyncUsers(AsyncResource):
    async def get(
        self,
        user_id: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Identity]:
        """`GET /v1/users/{userId}`: the identity as `identify` last left it."""
        return await self._client._request(
            call("getUser", Identity.from_json, path={"userId": user_id}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )
