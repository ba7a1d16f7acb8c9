// Request and response shapes of the Tocsin HTTP API.
//
// Hand-written for now from the lead engineer's API description. Once the
// service serves `/openapi.json`, `npm run generate` writes
// `src/generated/openapi.ts`; these declarations should then become aliases
// of the generated schemas (see README, "Generated types") so the public
// names stay while their shapes come from the service.

/** Any JSON value, for free-form `metadata` and `properties`. */
export type JsonValue =
  | string
  | number
  | boolean
  | null
  | JsonValue[]
  | { [key: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

// ---------------------------------------------------------------- events

/** Body of `POST /v1/events`. */
export interface EventCreateParams {
  /** Channel the event belongs to; created on first use. */
  channelName: string;
  title: string;
  description?: string;
  /** A single emoji. */
  icon?: string;
  tags?: string[];
  metadata?: JsonObject;
  userId?: string | null;
  /** Send a push notification to connected devices. The server defaults to true. */
  notify?: boolean;
  source?: string;
}

export type NotificationState = "pending" | "queued" | "delivered" | "failed" | "skipped";

/** One push delivery attempt to a device. Its fields are not settled yet. */
export type NotificationDelivery = { [key: string]: JsonValue };

/** Delivery state of an event's push notification. */
export interface Notification {
  state: NotificationState;
  deliveries: NotificationDelivery[];
}

/** An event as stored by the service. */
export interface TocsinEvent {
  id: string;
  channelName: string;
  title: string;
  description: string | null;
  icon: string | null;
  tags: string[];
  metadata: JsonObject;
  userId: string | null;
  notify: boolean;
  source: string | null;
  /** RFC 3339 timestamp. */
  createdAt: string;
  /** Present once the service reports notification state (a later API version). */
  notification?: Notification;
}

// -------------------------------------------------------------- identify

/** Body of `POST /v1/identify`. Field names are snake_case on the wire. */
export interface IdentifyParams {
  /** The caller's own user ID. */
  user_id: string;
  properties?: JsonObject;
  /** Alternative identifiers of the user. */
  aliases?: string[];
}

/** A user identity after `identify`. */
export interface Identity {
  user_id: string;
  properties: JsonObject;
  aliases: string[];
  /** RFC 3339 timestamp. */
  createdAt: string;
  /** RFC 3339 timestamp. */
  updatedAt: string;
}

// --------------------------------------------------------------- devices

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

// -------------------------------------------------------------- envelopes

/** One fault in a validation error. */
export interface ValidationErrorDetail {
  /** JSON path of the faulty field, e.g. `["tags", "1"]`. */
  path: string[];
  message: string;
}

/** Body of every successful response. */
export interface SuccessEnvelope<T> {
  success: true;
  data: T;
  requestId: string;
}

/** Body of every error response. */
export interface ErrorEnvelope {
  success: false;
  error: string;
  /** Only on 400 validation errors. */
  details?: ValidationErrorDetail[];
  requestId: string;
}
