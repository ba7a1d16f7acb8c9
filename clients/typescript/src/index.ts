// Public entry point of @tocsin/client. Everything a caller may use is
// exported here; other modules are internal.

export {
  Tocsin,
  CLIENT_ID,
  DEFAULT_BASE_URL,
  DEFAULT_MAX_RETRIES,
  DEFAULT_TIMEOUT,
  type ClientOptions,
  type Fetch,
  type FetchInit,
  type FetchResponse,
  type MessageStream,
  type MessageStreamOptions,
  type PostRequestOptions,
  type RequestHeaders,
  type RequestOptions,
  type RequestSpec,
} from "./client.js";
export {
  AbortError,
  ApiError,
  AuthenticationError,
  ConflictError,
  ConnectionError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  TimeoutError,
  TocsinError,
  ValidationError,
  isTocsinError,
  type ApiErrorInit,
} from "./errors.js";
export { VERSION } from "./version.js";
export type { RateLimit } from "./rate-limit.js";
export type { TocsinResponse } from "./response.js";
export { Page, PagePromise, type PageData } from "./pagination.js";
export type { SseMessage } from "./sse/parser.js";
export {
  DEFAULT_STREAM_IDLE_TIMEOUT,
  type Events,
  type EventStream,
  type StreamOptions,
} from "./resources/events.js";
export type { LiveStream } from "./resources/stream.js";
export type { Devices } from "./resources/devices.js";
export type { Channels } from "./resources/channels.js";
export type { Users } from "./resources/users.js";
export type { Insights, InsightOptions } from "./resources/insights.js";
export type { Stats } from "./resources/stats.js";
export type { Instant } from "./resources/query.js";
export type {
  BurstRule,
  Channel,
  ChannelList,
  DeliveryReason,
  Device,
  DeviceDeleted,
  DeviceEnvironment,
  DeviceList,
  DeviceRegisterParams,
  DeviceUpdateParams,
  ApnsDeviceRegisterParams,
  WebPushDeviceRegisterParams,
  FcmDeviceRegisterParams,
  DeviceKind,
  ErrorEnvelope,
  EventCreateParams,
  EventMessage,
  EventParser,
  EventPriority,
  EventList,
  EventListParams,
  EventStats,
  EventStatsParams,
  EventStreamParams,
  IdentifyParams,
  Identity,
  Insight,
  InsightDeleted,
  InsightDeletedMessage,
  InsightIncrementParams,
  InsightList,
  InsightMessage,
  InsightSetParams,
  InsightValue,
  JsonObject,
  JsonValue,
  Notification,
  NotificationDelivery,
  NotificationDeliveryState,
  NotificationState,
  QuietHours,
  QuietHoursParams,
  StatsBucket,
  StatsBucketSize,
  StreamMessage,
  SuccessEnvelope,
  TocsinEvent,
  User,
  UserList,
  UserListParams,
  ValidationErrorDetail,
} from "./types.js";
