// Request and response shapes of the Tocsin HTTP API, under the names this
// package exports.
//
// Their fields come from the service's OpenAPI document, through the
// generated src/generated/openapi.ts (`npm run generate`; the drift test fails
// when that file and the service differ), so a field the service adds or
// changes reaches users without editing this file.
//
// The document cannot state three things the API guarantees, and the package
// typed them precisely before it was generated, so they are narrowed here:
//   - free-form objects (`metadata`, `properties`) are `{ [key: string]: unknown }`
//     in the document; a JSON body can only carry JSON values;
//   - `success` is always `true` in a success envelope and `false` in an error
//     one, which is what lets callers tell the two apart;
//   - `deleted` (schema `DeletedDevice`) is `boolean` in the document; a
//     successful deletion always answers `true` (an unknown id is a 404).
// Each narrowing is constrained by the generated type, so if the service
// changes such a field the build fails instead of hiding the change.
//
// Query parameters (`events.list`, `users.list`, `stats.events`,
// `events.stream`) come from the routes' declared parameters. The one
// widening: the timestamps `since` and `until` of the query, strings in the
// document, and an event's `timestamp` (an RFC 3339 string or Unix seconds)
// also take a Date, which the client sends as RFC 3339.
//
// The public names are interfaces extending the derived types, not aliases of
// them: compiler errors and editors then say `EventCreateParams` instead of
// spelling out the helper types below, and the names stay interfaces as they
// were before generation (declaration merging keeps working).
//
// Where a schema refers to another one (`EventOut.notification`,
// `DeviceList.devices`…), the field is redeclared with the public name, so
// editors show `Device[]` rather than the generated `DeviceOut[]`; an
// interface may only redeclare a field with a type assignable to the
// inherited one, so this cannot drift from the schema either.

import type { components, paths } from "./generated/openapi.js";
import type { JsonObject } from "./json.js";
import type { Instant } from "./resources/query.js";

export type { JsonObject, JsonValue } from "./json.js";

type Schemas = components["schemas"];

/** Keys of `S` that the document types as free-form objects. */
type FreeFormKeys<S> = {
  [P in keyof S]-?: { [key: string]: unknown } extends NonNullable<S[P]> ? P : never;
}[keyof S];

/** Keeps `null` and `undefined` (nullable or optional fields), replaces the object. */
type AsJsonObject<T> = T extends object ? JsonObject : T;

/** `S` with its free-form object fields `K` typed as JSON objects; optional fields stay optional. */
type WithJsonObjects<S, K extends FreeFormKeys<S>> = {
  [P in keyof S]: P extends K ? AsJsonObject<S[P]> : S[P];
};

/** `S` with field `K` narrowed to `V`, which must be one of the values the document allows. */
type WithLiteral<S, K extends keyof S, V extends S[K]> = {
  [P in keyof S]: P extends K ? V : S[P];
};

/** `S` with the fields `K` also taking a Date (sent as RFC 3339); optional fields stay optional. */
type WithDates<S, K extends keyof S> = {
  [P in keyof S]: P extends K ? S[P] | Date : S[P];
};

// ------------------------------------------------------------------ events

/**
 * Body of `POST /v1/events` (schema `EventIn`). `timestamp` (when the event
 * happened, to record history) also takes a Date, sent as RFC 3339.
 */
export interface EventCreateParams extends WithDates<WithJsonObjects<Schemas["EventIn"], "metadata">, "timestamp"> {}

/**
 * How an event's description is written (schema `EventParser`): `"text"`
 * (the default) or `"markdown"`, which the service also renders into
 * `descriptionHtml`, sanitised.
 */
export type EventParser = Schemas["EventParser"];

/**
 * An event as stored by the service (schema `EventOut`), with where its push
 * notification stands.
 */
export interface TocsinEvent extends WithJsonObjects<Schemas["EventOut"], "metadata"> {
  /** Where the event's push notification stands; `deliveries` only from `events.get`. */
  notification: Notification;
}

/** Where an event's push notification stands (schema `NotificationStateOut`). */
export type NotificationState = Schemas["NotificationStateOut"];

/**
 * How insistently an event's push alerts (schema `EventPriority`):
 * `"low"` (quiet, no sound), `"normal"` (the default) or `"high"` (sound,
 * breaks through Focus where allowed).
 */
export type EventPriority = Schemas["EventPriority"];

/**
 * Where the alert of an event to one recipient (a device or a destination)
 * stands (schema `DeliveryStateOut`): `"sending"`, `"retrying"`,
 * `"delivered"`, `"failed"`, or, when the recipient's rules kept it back,
 * `"filtered"` (never sent) or `"held"` (waits for a quiet-hours summary or a
 * burst digest).
 */
export type NotificationDeliveryState = Schemas["DeliveryStateOut"];

/**
 * Which of the device's or destination's rules filtered or held a delivery (schema
 * `DeliveryReasonOut`): `"channel"`, `"tag"`, `"priority"`, `"quietHours"`
 * or `"burst"`.
 */
export type DeliveryReason = Schemas["DeliveryReasonOut"];

type DeliveryOutSchema = Schemas["DeliveryOut"];

/**
 * The alert of an event to one recipient (schema `DeliveryOut`): a device's
 * push, or a destination's message (webhook, Slack, Discord, Telegram, ntfy,
 * email). Exactly one of `deviceId` and `destinationId` is present, naming
 * the recipient; `provider` is, once tried, who answered: `"apns"`,
 * `"webpush"`, `"fcm"` or `"log"` for a push, the destination's kind
 * (`"webhook"`, `"slack"`, `"discord"`, `"telegram"`, `"ntfy"`, `"email"`)
 * for a message.
 */
export interface NotificationDelivery extends DeliveryOutSchema {
  /** The device pushed to, for a push; absent for a destination's message. */
  deviceId?: string;
  /** The destination sent to, for a destination's message; absent for a push. */
  destinationId?: string;
  state: NotificationDeliveryState;
  /** Why it was filtered or held; null in the other states. */
  reason: DeliveryReason | null;
}

type NotificationOutSchema = Schemas["NotificationOut"];

/** An event's notification state and, when looked up, its deliveries (schema `NotificationOut`). */
export interface Notification extends NotificationOutSchema {
  state: NotificationState;
  /**
   * One entry per device and destination of the project the event concerned
   * (sent, filtered or held); only in `GET /v1/events/{id}`, absent after `create`.
   */
  deliveries?: NotificationDelivery[];
}

// ----------------------------------------------------------------- devices

/** Which APNs environment a device token belongs to (schema `Environment`). */
export type DeviceEnvironment = Schemas["Environment"];

/** Which push service reaches a device (schema `DeviceKindOut`). */
export type DeviceKind = Schemas["DeviceKindOut"];

/** An APNs device token to register (schema `ApnsDeviceIn`; `kind` defaults to `apns`). */
export type ApnsDeviceRegisterParams = Schemas["ApnsDeviceIn"];

/** A browser's Web Push subscription to register, as `PushSubscription.toJSON()` gives it (schema `WebPushDeviceIn`). */
export type WebPushDeviceRegisterParams = Schemas["WebPushDeviceIn"];

/** An FCM registration token to register (schema `FcmDeviceIn`). */
export type FcmDeviceRegisterParams = Schemas["FcmDeviceIn"];

/** Body of `POST /v1/devices`, one of the kinds (schema `DeviceIn`). */
export type DeviceRegisterParams = Schemas["DeviceIn"];

type BurstRuleSchema = Schemas["BurstRule"];

/**
 * A burst limit (schema `BurstRule`): at most `max` alerts (1–1000) reach the
 * device within `perMinutes` (1–1440); the ones past `max` are held for one
 * digest push when the window ends.
 */
export interface BurstRule extends BurstRuleSchema {}

type QuietHoursInSchema = Schemas["QuietHoursIn"];

/**
 * Quiet hours to set (schema `QuietHoursIn`): a daily window, `start` to
 * `end` (`"HH:MM"`, across midnight when `end` is earlier), in the IANA
 * `timeZone`, during which alerts below `allowPriority` are held for one
 * summary push at the end. `allowPriority` is `"high"` when left out;
 * `null` lets nothing through.
 */
export interface QuietHoursParams extends QuietHoursInSchema {
  allowPriority?: EventPriority | null;
}

type QuietHoursOutSchema = Schemas["QuietHoursOut"];

/** Quiet hours as a device has them (schema `QuietHoursOut`); `allowPriority` is always present. */
export interface QuietHours extends QuietHoursOutSchema {
  allowPriority: EventPriority | null;
}

type DeviceOutSchema = Schemas["DeviceOut"];

/**
 * A device registered to receive push notifications (schema `DeviceOut`),
 * with its alert rules; every rule is shown, defaults included.
 */
export interface Device extends DeviceOutSchema {
  kind: DeviceKind;
  environment: DeviceEnvironment | null;
  minPriority: EventPriority;
  quietHours: QuietHours | null;
  burst: BurstRule | null;
}

type DevicePatchInSchema = Schemas["DevicePatchIn"];

/**
 * Body of `PATCH /v1/devices/{id}` (schema `DevicePatchIn`): the fields to
 * change. A field left out (or `undefined`) stays as it is; `null` clears it
 * (a cleared `minPriority` is `"low"`).
 */
export interface DeviceUpdateParams extends DevicePatchInSchema {
  minPriority?: EventPriority | null;
  quietHours?: QuietHoursParams | null;
  burst?: BurstRule | null;
}

type DeviceListSchema = Schemas["DeviceList"];

/** `data` of `GET /v1/devices` (schema `DeviceList`). */
export interface DeviceList extends DeviceListSchema {
  devices: Device[];
}

/** `data` of `DELETE /v1/devices/{id}` (schema `DeletedDevice`); `deleted` is always `true`. */
export interface DeviceDeleted extends WithLiteral<Schemas["DeletedDevice"], "deleted", true> {}

// ---------------------------------------------------------------- identify

/** Body of `POST /v1/identify` (schema `IdentifyIn`). Field names are snake_case on the wire. */
export interface IdentifyParams extends WithJsonObjects<Schemas["IdentifyIn"], "properties"> {}

/**
 * A user identity (schema `IdentityOut`): what `identify` and `users.get`
 * answer, with the counters its events keep (`eventCount`, `firstSeenAt`,
 * `lastSeenAt`). Its id is `user_id`, as the identify body spells it.
 */
export interface Identity extends WithJsonObjects<Schemas["IdentityOut"], "properties"> {}

// ------------------------------------------------------------------- users

/**
 * A user as `users.list` lists it (schema `UserOut`): the fields of an
 * {@link Identity}, its id spelt `userId`.
 */
export interface User extends WithJsonObjects<Schemas["UserOut"], "properties"> {}

type UserPageSchema = Schemas["UserPage"];

/** `data` of `GET /v1/users` (schema `UserPage`): most recently seen first; `nextCursor` is null on the last page. */
export interface UserList extends UserPageSchema {
  items: User[];
}

// ---------------------------------------------------------------- insights

/** An insight's value (a field of schema `InsightOut`): a string, a number or a boolean. */
export type InsightValue = Schemas["InsightOut"]["value"];

type InsightOutSchema = Schemas["InsightOut"];

/**
 * An insight, a named live value of the project (schema `InsightOut`): what
 * `insights.set` and `insights.increment` answer, and `insights.list` lists.
 */
export interface Insight extends InsightOutSchema {}

type InsightListSchema = Schemas["InsightList"];

/** `data` of `GET /v1/insights` (schema `InsightList`): in the order they were created. */
export interface InsightList extends InsightListSchema {
  insights: Insight[];
}

/**
 * `data` of `DELETE /v1/insights/{title}` and of a stream's
 * `insight-deleted` message (schema `DeletedInsight`); `deleted` is always `true`.
 */
export interface InsightDeleted extends WithLiteral<Schemas["DeletedInsight"], "deleted", true> {}

type SetInsightInSchema = Schemas["SetInsightIn"];

/** The body of `POST /v1/insights` (schema `SetInsightIn`); `insights.set` builds it. */
export interface InsightSetParams extends SetInsightInSchema {}

type IncrementInsightInSchema = Schemas["IncrementInsightIn"];

/** The body of `PATCH /v1/insights` (schema `IncrementInsightIn`); `insights.increment` builds it. */
export interface InsightIncrementParams extends IncrementInsightInSchema {}

// --------------------------------------------------------------- read side

/** The query parameters of a GET route, as the document declares them. */
type QueryOf<Path extends keyof paths> = paths[Path] extends { get: { parameters: { query?: infer Q } } }
  ? NonNullable<Q>
  : never;

/** Keys of `S` that the document types as plain strings (RFC 3339 timestamps among them). */
type StringKeys<S> = {
  [P in keyof S]-?: NonNullable<S[P]> extends string ? (string extends NonNullable<S[P]> ? P : never) : never;
}[keyof S];

/** `S` with the timestamp parameters `K` also taking a Date; optional fields stay optional. */
type WithInstants<S, K extends StringKeys<S>> = {
  [P in keyof S]: P extends K ? Instant | Exclude<S[P], string> : S[P];
};

/** Filters of `GET /v1/events` (`events.list`): channel, tag, userId, q, since, until, limit, cursor. */
export interface EventListParams extends WithInstants<QueryOf<"/v1/events">, "since" | "until"> {}

type EventPageSchema = Schemas["EventPage"];

/** `data` of `GET /v1/events` (schema `EventPage`): newest first; `nextCursor` is null on the last page. */
export interface EventList extends EventPageSchema {
  items: TocsinEvent[];
}

/** Filters of `GET /v1/users` (`users.list`): q, property, limit, cursor. */
export interface UserListParams extends QueryOf<"/v1/users"> {}

type ChannelOutSchema = Schemas["ChannelOut"];

/** A channel with its activity (schema `ChannelOut`). */
export interface Channel extends ChannelOutSchema {}

type ChannelListSchema = Schemas["ChannelList"];

/** `data` of `GET /v1/channels` (schema `ChannelList`): most recently active first. */
export interface ChannelList extends ChannelListSchema {
  items: Channel[];
}

/** Bucket size of `GET /v1/stats/events` (schema `BucketIn`). */
export type StatsBucketSize = Schemas["BucketIn"];

/** Query of `GET /v1/stats/events` (`stats.events`): channel, since, until, bucket. */
export interface EventStatsParams extends WithInstants<QueryOf<"/v1/stats/events">, "since" | "until"> {
  bucket?: StatsBucketSize;
}

type BucketOutSchema = Schemas["BucketOut"];

/** The number of events created in one UTC hour or day (schema `BucketOut`); `start` is RFC 3339. */
export interface StatsBucket extends BucketOutSchema {}

type EventStatsSchema = Schemas["EventStats"];

/** `data` of `GET /v1/stats/events` (schema `EventStats`): oldest bucket first, empty ones included. */
export interface EventStats extends EventStatsSchema {
  buckets: StatsBucket[];
}

/** What `events.stream` and `tocsin.stream` listen to: the query of `GET /v1/stream` (channel, lastEventId), and a signal. */
export interface EventStreamParams extends QueryOf<"/v1/stream"> {
  /**
   * Resume after this event: the service first replays the events recorded
   * after it (oldest first), then goes live. Take it from an event's `id` or
   * from the stream's `lastEventId`. Sent as the `Last-Event-ID` header.
   */
  lastEventId?: string;
  /** Aborting it ends the stream (the loop finishes without an error) and closes the request. */
  signal?: AbortSignal;
}

/**
 * An event recorded, as `GET /v1/stream` sends it (`event: event`). `id`
 * is the event's: the position the stream resumes after.
 */
export interface EventMessage {
  type: "event";
  id: string;
  data: TocsinEvent;
}

/** An insight set or incremented, as `GET /v1/stream` sends it (`event: insight`). */
export interface InsightMessage {
  type: "insight";
  data: Insight;
}

/** An insight deleted, as `GET /v1/stream` sends it (`event: insight-deleted`). */
export interface InsightDeletedMessage {
  type: "insight-deleted";
  data: InsightDeleted;
}

/**
 * One message of `tocsin.stream` (`GET /v1/stream`, whose `data` is schema
 * `StreamMessage`): `type` tells which, and narrows `data`. A message type
 * this version does not know is skipped, never yielded.
 */
export type StreamMessage = EventMessage | InsightMessage | InsightDeletedMessage;

// --------------------------------------------------------------- envelopes

// An interface cannot extend an indexed access type directly.
type FieldErrorSchema = Schemas["FieldError"];

/** One fault in a validation error (schema `FieldError`). */
export interface ValidationErrorDetail extends FieldErrorSchema {}

/** The success envelopes of the routes this client calls, one schema per resource. */
type SuccessSchemas =
  | Schemas["Success_EventOut"]
  | Schemas["Success_EventPage"]
  | Schemas["Success_ChannelList"]
  | Schemas["Success_EventStats"]
  | Schemas["Success_IdentityOut"]
  | Schemas["Success_DeviceOut"]
  | Schemas["Success_DeviceList"]
  | Schemas["Success_DeletedDevice"]
  | Schemas["Success_UserPage"]
  | Schemas["Success_InsightOut"]
  | Schemas["Success_InsightList"]
  | Schemas["Success_DeletedInsight"];

/**
 * Body of every successful response: the fields the `Success_*` schemas
 * share, generic in `data` so one name serves every resource.
 */
export interface SuccessEnvelope<T> extends WithLiteral<Omit<SuccessSchemas, "data">, "success", true> {
  data: T;
}

/** Body of every error response (schema `ErrorEnvelope`); `details` only on 400. */
export interface ErrorEnvelope extends WithLiteral<Schemas["ErrorEnvelope"], "success", false> {}
