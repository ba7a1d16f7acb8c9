// `tocsin.devices`: the devices that receive a project's push notifications.

import type { PostRequestOptions, RequestOptions, Tocsin } from "../client.js";
import { offlineDevice, offlineNotFound } from "../disabled.js";
import type { TocsinResponse } from "../response.js";
import type { Device, DeviceDeleted, DeviceList, DeviceRegisterParams, DeviceUpdateParams } from "../types.js";
import { pathSegment } from "./path.js";

export class Devices {
  readonly #client: Tocsin;

  constructor(client: Tocsin) {
    this.#client = client;
  }

  /**
   * `POST /v1/devices`: registers an APNs device token. Registering a known
   * token updates it (`statusCode` 200 instead of 201).
   */
  async register(params: DeviceRegisterParams, options?: PostRequestOptions): Promise<TocsinResponse<Device>> {
    return this.#client.request<Device>(
      { method: "POST", path: "/v1/devices", body: params, offline: () => offlineDevice(params) },
      options,
    );
  }

  /** `GET /v1/devices`: the project's devices. */
  async list(options?: RequestOptions): Promise<TocsinResponse<DeviceList>> {
    return this.#client.request<DeviceList>({ method: "GET", path: "/v1/devices", offline: () => ({ devices: [] }) }, options);
  }

  /**
   * `PATCH /v1/devices/{id}`: changes a device's name, channels or alert
   * rules (`tags`, `minPriority`, `quietHours`, `burst`) and answers the
   * device as it stands now. A field left out (or `undefined`) stays as it
   * is; `null` clears it. Sent without an Idempotency-Key and retried like
   * `delete`: the same changes applied twice leave the device as once does.
   */
  async update(id: string, changes: DeviceUpdateParams, options?: RequestOptions): Promise<TocsinResponse<Device>> {
    const path = `/v1/devices/${pathSegment(id, "id")}`;
    return this.#client.request<Device>(
      {
        method: "PATCH",
        path,
        body: changes,
        // A disabled client registered nothing, so there is no device to change.
        offline: () => {
          throw offlineNotFound(`device ${id}`);
        },
      },
      options,
    );
  }

  /**
   * `DELETE /v1/devices/{id}`. If a retry follows a lost response, the retry
   * can answer 404 although the device was deleted by the first attempt.
   */
  async delete(id: string, options?: RequestOptions): Promise<TocsinResponse<DeviceDeleted>> {
    const path = `/v1/devices/${pathSegment(id, "id")}`;
    return this.#client.request<DeviceDeleted>(
      {
        method: "DELETE",
        path,
        offline: () => {
          throw offlineNotFound(`device ${id}`);
        },
      },
      options,
    );
  }
}
