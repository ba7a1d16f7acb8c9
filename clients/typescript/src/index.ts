// Public entry point of @tocsin/client. Everything a caller may use is
// exported here; other modules are internal.

export {
  Tocsin,
  DEFAULT_BASE_URL,
  DEFAULT_MAX_RETRIES,
  DEFAULT_TIMEOUT,
  type ClientOptions,
  type Fetch,
  type FetchInit,
  type FetchResponse,
  type PostRequestOptions,
  type RequestOptions,
  type RequestSpec,
} from "./client.js";
export {
  ApiError,
  ConnectionError,
  RateLimitError,
  TimeoutError,
  TocsinError,
  ValidationError,
  type ApiErrorInit,
} from "./errors.js";
export type { RateLimit } from "./rate-limit.js";
export type { TocsinResponse } from "./response.js";
export type { Events } from "./resources/events.js";
export type { Devices } from "./resources/devices.js";
export type {
  Device,
  DeviceDeleted,
  DeviceEnvironment,
  DeviceList,
  DeviceRegisterParams,
  ErrorEnvelope,
  EventCreateParams,
  IdentifyParams,
  Identity,
  JsonObject,
  JsonValue,
  Notification,
  NotificationDelivery,
  NotificationState,
  SuccessEnvelope,
  TocsinEvent,
  ValidationErrorDetail,
} from "./types.js";
