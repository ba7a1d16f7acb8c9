"""Turning a method's arguments into a `CallSpec` through the generated table
of its operation (`_models.OPERATIONS`): the HTTP method, the path with its
encoded ids, and every argument under the name the API knows it by. The
sync and async resources share these builders; a method only lists its
arguments."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, TypeVar

from ._models import OPERATIONS
from ._request import CallSpec, path_segment, wire_fields

T = TypeVar("T")


def call(
    operation_id: str,
    cast: Callable[[Any], T],
    *,
    path: Optional[Mapping[str, str]] = None,
    query: Optional[Mapping[str, Any]] = None,
    body: Optional[Mapping[str, Any]] = None,
    none_clears: bool = False,
) -> CallSpec[T]:
    """The spec of one call of `operation_id`. `path` maps the API's path
    parameter names to values; `query` and `body` are in Python names.
    `none_clears`: the body's None values are sent as null (an update,
    where null clears a field) instead of being left out."""
    operation = OPERATIONS[operation_id]
    url = operation.path
    for name in operation.path_params:
        url = url.replace("{" + name + "}", path_segment((path or {}).get(name, ""), name))
    return CallSpec(
        method=operation.method,
        path=url,
        cast=cast,
        keyed=operation.idempotency_key,
        query=wire_fields(operation.query, query) if query else None,
        body=(
            wire_fields(operation.body, body, none_clears=none_clears) if body is not None else None
        ),
    )
