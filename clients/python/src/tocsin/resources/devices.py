"""`client.devices`: the devices that receive a project's push alerts."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from .._config import Timeout
from .._models import (
    Device,
    DeviceDeleted,
    DeviceEnvironment,
    DeviceKind,
    DeviceList,
    WebPushKey,
    WebPushSubscription,
)
from .._operation import call
from .._request import CallSpec, Headers, RequestOptions
from .._response import TocsinResponse
from ._resource import AsyncResource, SyncResource


def _create(
    kind: Optional[DeviceKind],
    token: Optional[str],
    environment: Optional[DeviceEnvironment],
    subscription: Optional[WebPushSubscription],
    name: Optional[str],
    channels: Optional[Sequence[str]],
) -> CallSpec[Device]:
    body: Dict[str, Any] = {
        "kind": kind,
        "token": token,
        "environment": environment,
        "subscription": subscription,
        "name": name,
        "channels": list(channels) if channels is not None else None,
    }
    return call("registerDevice", Device.from_json, body=body)


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

        `channels` limits the alerts to those channels (all when omitted).
        Registering a known token updates that device and makes it active
        again: `status_code` 200 instead of 201, the same id.
        """
        return self._client._request(
            _create(kind, token, environment, subscription, name, channels),
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
        idempotency_key: Optional[str] = None,
        timeout: Optional[Timeout] = None,
        extra_headers: Optional[Headers] = None,
    ) -> TocsinResponse[Device]:
        """`POST /v1/devices`: see `Devices.create`."""
        return await self._client._request(
            _create(kind, token, environment, subscription, name, channels),
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
