"""`client.users`: the users of the project, as its events and identify
calls describe them, with the counters their events keep."""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, Iterator, Optional

from .._config import Timeout
from .._exceptions import TocsinError
from .._models import Identity, User, UserList
from .._operation import call
from .._request import CallSpec, Headers, RequestOptions
from .._response import TocsinResponse
from ._resource import AsyncResource, SyncResource


def _list(query: Dict[str, Any]) -> CallSpec[UserList]:
    return call("listUsers", UserList.from_json, query=query)


def _following(cursor: Optional[str], page: UserList) -> Optional[str]:
    """The cursor of the page after `page` (requested with `cursor`), or
    None after the last; the same cursor again would loop forever."""
    if page.next_cursor is not None and page.next_cursor == cursor:
        raise TocsinError(f"The service returned the same cursor again ({cursor})")
    return page.next_cursor


class Users(SyncResource):
    def get(
        self,
        user_id: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Identity]:
        """`GET /v1/users/{userId}`: a user, by its id or one of its aliases,
        as identify and its events left it, with its counters (`event_count`,
        `first_seen_at`, `last_seen_at`). A user no event or identify call
        ever named is a NotFoundError. The id is URL-encoded for you."""
        return self._client._request(
            call("getUser", Identity.from_json, path={"userId": user_id}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    def list(
        self,
        *,
        q: Optional[str] = None,
        property: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[UserList]:
        """`GET /v1/users`: one page of the project's users, most recently
        seen first. `q` searches the id and the aliases (ignoring case);
        `property` is `"key:value"` (the key before the first colon: a string
        property matches its exact text, a number or a boolean its JSON text,
        `"seats:3"`, `"beta:true"`); `limit` is 1-100 (default 50).
        `data.next_cursor`, passed as `cursor`, gets the next page; it is
        None on the last. `list_all` walks every page for you."""
        query = dict(q=q, property=property, limit=limit, cursor=cursor)
        return self._client._request(
            _list(query), RequestOptions(timeout=timeout, extra_headers=extra_headers)
        )

    def list_all(
        self,
        *,
        q: Optional[str] = None,
        property: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> Iterator[User]:
        """Every user `list` would page through, most recently seen first.
        The next page (same filters; `limit` is the page size) is requested
        only when the loop gets to it."""
        while True:
            page = self.list(
                q=q, property=property, limit=limit, cursor=cursor, timeout=timeout,
                extra_headers=extra_headers,
            ).data  # fmt: skip
            yield from page.items
            cursor = _following(cursor, page)
            if cursor is None:
                return


class AsyncUsers(AsyncResource):
    async def get(
        self,
        user_id: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Identity]:
        """`GET /v1/users/{userId}`: see `Users.get`."""
        return await self._client._request(
            call("getUser", Identity.from_json, path={"userId": user_id}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    async def list(
        self,
        *,
        q: Optional[str] = None,
        property: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[UserList]:
        """`GET /v1/users`: see `Users.list`."""
        query = dict(q=q, property=property, limit=limit, cursor=cursor)
        return await self._client._request(
            _list(query), RequestOptions(timeout=timeout, extra_headers=extra_headers)
        )

    async def list_all(
        self,
        *,
        q: Optional[str] = None,
        property: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> AsyncIterator[User]:
        """Every user `list` would page through: `async for user in
        client.users.list_all(property="plan:pro")`. See `Users.list_all`."""
        while True:
            page = (
                await self.list(
                    q=q, property=property, limit=limit, cursor=cursor, timeout=timeout,
                    extra_headers=extra_headers,
                )  # fmt: skip
            ).data
            for user in page.items:
                yield user
            cursor = _following(cursor, page)
            if cursor is None:
                return
