// Hand-written shapes of routes the service does not serve yet.
//
// PENDING SERVER ROUTES: `GET /v1/events/{id}` (the `notification` state of an
// event) and `POST/GET /v1/devices`, `DELETE /v1/devices/{id}` are not in the
// service's /openapi.json, so these types come from the lead engineer's API
// description, not from the document. When the routes appear, `npm run
// generate` picks up their schemas (the drift test fails until it is run);
// then replace these declarations with aliases in types.ts and delete this file.

import type { JsonValue } from "./json.js";

// ------------------------------------------------- event notification state

export type NotificationState = "pending" | "queued" | "delivered" | "failed" | "skipped";

/** One push delivery attempt to a device. Its fields are not settled yet. */
export type NotificationDelivery = { [key: string]: JsonValue };

/** Delivery state of an event's push notification. */
export interface Notification {
  state: NotificationState;
  deliveries: NotificationDelivery[];
}

// ------------------------------------------------------------------ devices

export type DeviceEnvironment = "production" | "sandbox";

/** Body of `POST /v1/devices`. */
export interface DeviceRegisterParams {
  /** APNs device token, hex-encoded. */
  token: string;
  environment: DeviceEnvironment;
  name?: string;
  /** Only notify for these channels; all channels when omitted. */
  channels?: string[];
}

/** A device registered to receive push notifications. */
export interface Device {
  id: string;
  token: string;
  environment: DeviceEnvironment;
  name: string | null;
  channels: string[] | null;
  /** False once APNs reported the token as dead. */
  active: boolean;
  /** RFC 3339 timestamp. */
  createdAt: string;
  /** RFC 3339 timestamp. */
  updatedAt: string;
}

/** `data` of `GET /v1/devices`. */
export interface DeviceList {
  devices: Device[];
}

/** `data` of `DELETE /v1/devices/{id}`. */
export interface DeviceDeleted {
  id: string;
  deleted: true;
}
