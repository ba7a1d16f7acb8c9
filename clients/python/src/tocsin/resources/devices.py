"""`client.devices`: the devices that receive a project's push alerts."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from .._config import Timeout
from .._models import (
    BurstRuleParam,
    Device,
    DeviceDeleted,
    DeviceEnvironment,
    DeviceKind,
    DeviceList,
    EventPriority,
    QuietHoursParam,
    WebPushKey,
    WebPushSubscription,
)
from .._operation import call
from .._request import CallSpec, Headers, RequestOptions
from .._response import TocsinResponse
from .._types import NOT_GIVEN, NotGiven, NotGivenOr
from ._resource import AsyncResource, SyncResource


def _lists(fields: Dict[str, Any]) -> Dict[str, Any]:
    """`fields` with `channels` and `tags` as the JSON arrays they are sent
    as (any sequence is taken); None and NOT_GIVEN are left as they are."""
    for name in ("channels", "tags"):
        value = fields[name]
        if value is not None and not isinstance(value, NotGiven):
            fields[name] = list(value)
    return fields


def _create(fields: Dict[str, Any]) -> CallSpec[Device]:
    return call("registerDevice", Device.from_json, body=_lists(fields))


def _update(id: str, fields: Dict[str, Any]) -> CallSpec[Device]:
    # A field left out (NOT_GIVEN) is not sent and stays as it is on the
    # service; None is sent as null, which clears it.
    return call(
        "updateDevice", Device.from_json, path={"id": id}, body=_lists(fields), none_clears=True
    )


class Devices(SyncResource):
    def create(
        self,
        *,
        kind: Optional[DeviceKind] = None,
        token: Optional[str] = None,
        environment: Optional[DeviceEnvironment] = None,
        subscription: Optional[WebPushSubscription] = None,
        name: Optional[str] = None,
        channels: Optional[Sequence[str]] = None,
        tags: Optional[Sequence[str]] = None,
        min_priority: Optional[EventPriority] = None,
        quiet_hours: Optional[QuietHoursParam] = None,
        burst: Optional[BurstRuleParam] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Device]:
        """`POST /v1/devices`: registers a device for push alerts, one of

        - an APNs token: `token=..., environment="production"` (or "sandbox");
          `kind` defaults to "apns";
        - a browser's Web Push subscription: `kind="webpush",
          subscription=subscription.toJSON()` (as the browser gives it);
        - an FCM registration token: `kind="fcm", token=...`.

        Its alert rules, each optional:

        - `channels`: only events of these channels (all when omitted);
        - `tags`: only events carrying one of these tags (any when omitted);
        - `min_priority`: only events of this priority or higher ("low");
        - `quiet_hours`: `{"start": "22:00", "end": "07:00", "timeZone":
          "Europe/Berlin", "allowPriority": "high"}`, in the API's names:
          alerts below `allowPriority` ("high" when left out; None lets
          nothing through) are held during the window, for one summary push
          when it ends;
        - `burst`: `{"max": 5, "perMinutes": 10}`: the alerts past `max` in
          the window are held for one digest push.

        Registering a known token updates that device and makes it active
        again: `status_code` 200 instead of 201, the same id.
        """
        fields = dict(
            kind=kind, token=token, environment=environment, subscription=subscription,
            name=name, channels=channels, tags=tags, min_priority=min_priority,
            quiet_hours=quiet_hours, burst=burst,
        )  # fmt: skip
        return self._client._request(
            _create(fields),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    def list(
        self, *, timeout: Optional[Timeout] = None, extra_headers: Optional[Headers] = None
    ) -> TocsinResponse[DeviceList]:
        """`GET /v1/devices`: the project's devices."""
        return self._client._request(
            call("listDevices", DeviceList.from_json),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    def update(
        self,
        id: str,
        *,
        name: NotGivenOr[Optional[str]] = NOT_GIVEN,
        channels: NotGivenOr[Optional[Sequence[str]]] = NOT_GIVEN,
        tags: NotGivenOr[Optional[Sequence[str]]] = NOT_GIVEN,
        min_priority: NotGivenOr[Optional[EventPriority]] = NOT_GIVEN,
        quiet_hours: NotGivenOr[Optional[QuietHoursParam]] = NOT_GIVEN,
        burst: NotGivenOr[Optional[BurstRuleParam]] = NOT_GIVEN,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Device]:
        """`PATCH /v1/devices/{id}`: changes a device's name, channels or
        alert rules (see `create`) and returns the device as it stands now.
        An argument left out leaves its field as it is; None clears it
        (every channel, any tag, no quiet hours, no burst limit; a cleared
        `min_priority` is "low"). An unknown id, or another project's
        device, is a NotFoundError; a bad value a ValidationError naming the
        field (`["quietHours", "timeZone"]`). Retried like `delete`, without
        an idempotency key: the same changes twice leave the device as
        once."""
        fields = dict(
            name=name, channels=channels, tags=tags, min_priority=min_priority,
            quiet_hours=quiet_hours, burst=burst,
        )  # fmt: skip
        return self._client._request(
            _update(id, fields), RequestOptions(timeout=timeout, extra_headers=extra_headers)
        )

    def delete(
        self,
        id: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[DeviceDeleted]:
        """`DELETE /v1/devices/{id}`. An unknown id is a NotFoundError — also
        when a retry follows an attempt that deleted it but whose answer was
        lost."""
        return self._client._request(
            call("deleteDevice", DeviceDeleted.from_json, path={"id": id}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    def webpush_key(
        self, *, timeout: Optional[Timeout] = None, extra_headers: Optional[Headers] = None
    ) -> TocsinResponse[WebPushKey]:
        """`GET /v1/webpush/key`: the VAPID public key a web page subscribes
        with (`pushManager.subscribe({applicationServerKey})`). A
        NotFoundError when the server has no Web Push configured."""
        return self._client._request(
            call("getWebPushKey", WebPushKey.from_json),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )


class AsyncDevices(AsyncResource):
    async def create(
        self,
        *,
        kind: Optional[DeviceKind] = None,
        token: Optional[str] = None,
        environment: Optional[DeviceEnvironment] = None,
        subscription: Optional[WebPushSubscription] = None,
        name: Optional[str] = None,
        channels: Optional[Sequence[str]] = None,
        tags: Optional[Sequence[str]] = None,
        min_priority: Optional[EventPriority] = None,
        quiet_hours: Optional[QuietHoursParam] = None,
        burst: Optional[BurstRuleParam] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Device]:
        """`POST /v1/devices`: see `Devices.create`."""
        fields = dict(
            kind=kind, token=token, environment=environment, subscription=subscription,
            name=name, channels=channels, tags=tags, min_priority=min_priority,
            quiet_hours=quiet_hours, burst=burst,
        )  # fmt: skip
        return await self._client._request(
            _create(fields),
            RequestOptions(
                idempotency_key=idempotency_key, timeout=timeout, extra_headers=extra_headers
            ),
        )

    async def list(
        self, *, timeout: Optional[Timeout] = None, extra_headers: Optional[Headers] = None
    ) -> TocsinResponse[DeviceList]:
        """`GET /v1/devices`: the project's devices."""
        return await self._client._request(
            call("listDevices", DeviceList.from_json),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    async def update(
        self,
        id: str,
        *,
        name: NotGivenOr[Optional[str]] = NOT_GIVEN,
        channels: NotGivenOr[Optional[Sequence[str]]] = NOT_GIVEN,
        tags: NotGivenOr[Optional[Sequence[str]]] = NOT_GIVEN,
        min_priority: NotGivenOr[Optional[EventPriority]] = NOT_GIVEN,
        quiet_hours: NotGivenOr[Optional[QuietHoursParam]] = NOT_GIVEN,
        burst: NotGivenOr[Optional[BurstRuleParam]] = NOT_GIVEN,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Device]:
        """`PATCH /v1/devices/{id}`: see `Devices.update`."""
        fields = dict(
            name=name, channels=channels, tags=tags, min_priority=min_priority,
            quiet_hours=quiet_hours, burst=burst,
        )  # fmt: skip
        return await self._client._request(
            _update(id, fields), RequestOptions(timeout=timeout, extra_headers=extra_headers)
        )

    async def delete(
        self,
        id: str,
        *,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[DeviceDeleted]:
        """`DELETE /v1/devices/{id}`: see `Devices.delete`."""
        return await self._client._request(
            call("deleteDevice", DeviceDeleted.from_json, path={"id": id}),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )

    async def webpush_key(
        self, *, timeout: Optional[Timeout] = None, extra_headers: Optional[Headers] = None
    ) -> TocsinResponse[WebPushKey]:
        """`GET /v1/webpush/key`: see `Devices.webpush_key`."""
        return await self._client._request(
            call("getWebPushKey", WebPushKey.from_json),
            RequestOptions(timeout=timeout, extra_headers=extra_headers),
        )
