// The published request/response types are the service's generated schemas,
// narrowed only where the document cannot say what the API guarantees (JSON
// values in free-form objects, the literal `success`). Compiled by
// `npm run typecheck`: public names from the built declarations, schemas from
// the committed generated file.

import type {
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
  ErrorEnvelope,
  EventCreateParams,
  EventList,
  EventPriority,
  EventListParams,
  EventStats,
  EventStatsParams,
  EventStreamParams,
  IdentifyParams,
  Identity,
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
  SuccessEnvelope,
  TocsinEvent,
  ValidationErrorDetail,
} from "@tocsin/client";

import type { components, paths } from "../../src/generated/openapi.js";

type Schemas = components["schemas"];
type Query<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } } ? NonNullable<Q> : never;
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
type Extends<A, B> = [A] extends [B] ? true : false;
type Assert<T extends true> = T;

// Same fields as the schema, and every value of a public type is a value of its
// schema: narrowed, never widened.
export type Checks = [
  Assert<Equal<keyof EventCreateParams, keyof Schemas["EventIn"]>>,
  Assert<Extends<EventCreateParams, Schemas["EventIn"]>>,
  Assert<Equal<keyof TocsinEvent, keyof Schemas["EventOut"]>>,
  Assert<Extends<TocsinEvent, Schemas["EventOut"]>>,
  Assert<Equal<keyof Notification, keyof Schemas["NotificationOut"]>>,
  Assert<Extends<Notification, Schemas["NotificationOut"]>>,
  Assert<Extends<Schemas["NotificationOut"], Notification>>,
  Assert<Equal<NotificationState, Schemas["NotificationStateOut"]>>,
  Assert<Equal<EventPriority, "low" | "normal" | "high">>,
  Assert<Equal<TocsinEvent["priority"], EventPriority>>,
  Assert<Equal<EventCreateParams["priority"], EventPriority | undefined>>,
  Assert<Equal<keyof NotificationDelivery, keyof Schemas["DeliveryOut"]>>,
  Assert<Extends<NotificationDelivery, Schemas["DeliveryOut"]>>,
  Assert<Extends<Schemas["DeliveryOut"], NotificationDelivery>>,
  Assert<Equal<DeviceEnvironment, Schemas["Environment"]>>,
  Assert<Equal<keyof DeviceRegisterParams, keyof Schemas["DeviceIn"]>>,
  Assert<Extends<DeviceRegisterParams, Schemas["DeviceIn"]>>,
  Assert<Extends<Schemas["DeviceIn"], DeviceRegisterParams>>,
  Assert<Equal<keyof Device, keyof Schemas["DeviceOut"]>>,
  Assert<Extends<Device, Schemas["DeviceOut"]>>,
  Assert<Extends<Schemas["DeviceOut"], Device>>,
  Assert<Equal<keyof DeviceList, keyof Schemas["DeviceList"]>>,
  Assert<Extends<DeviceList, Schemas["DeviceList"]>>,
  Assert<Extends<Schemas["DeviceList"], DeviceList>>,
  Assert<Equal<keyof DeviceUpdateParams, keyof Schemas["DevicePatchIn"]>>,
  Assert<Extends<DeviceUpdateParams, Schemas["DevicePatchIn"]>>,
  Assert<Extends<Schemas["DevicePatchIn"], DeviceUpdateParams>>,
  Assert<Equal<keyof QuietHoursParams, keyof Schemas["QuietHoursIn"]>>,
  Assert<Extends<QuietHoursParams, Schemas["QuietHoursIn"]>>,
  Assert<Extends<Schemas["QuietHoursIn"], QuietHoursParams>>,
  Assert<Equal<keyof QuietHours, keyof Schemas["QuietHoursOut"]>>,
  Assert<Extends<QuietHours, Schemas["QuietHoursOut"]>>,
  Assert<Extends<Schemas["QuietHoursOut"], QuietHours>>,
  Assert<Equal<keyof BurstRule, keyof Schemas["BurstRule"]>>,
  Assert<Extends<BurstRule, Schemas["BurstRule"]>>,
  Assert<Extends<Schemas["BurstRule"], BurstRule>>,
  Assert<Equal<DeliveryReason, Schemas["DeliveryReasonOut"]>>,
  Assert<Equal<NotificationDeliveryState, Schemas["DeliveryStateOut"]>>,
  Assert<Equal<keyof DeviceDeleted, keyof Schemas["DeletedDevice"]>>,
  Assert<Extends<DeviceDeleted, Schemas["DeletedDevice"]>>,
  Assert<Equal<keyof IdentifyParams, keyof Schemas["IdentifyIn"]>>,
  Assert<Extends<IdentifyParams, Schemas["IdentifyIn"]>>,
  Assert<Equal<keyof Identity, keyof Schemas["IdentityOut"]>>,
  Assert<Extends<Identity, Schemas["IdentityOut"]>>,
  Assert<Equal<keyof ValidationErrorDetail, keyof Schemas["FieldError"]>>,
  Assert<Extends<ValidationErrorDetail, Schemas["FieldError"]>>,
  Assert<Extends<Schemas["FieldError"], ValidationErrorDetail>>,
  Assert<Equal<keyof ErrorEnvelope, keyof Schemas["ErrorEnvelope"]>>,
  Assert<Extends<ErrorEnvelope, Schemas["ErrorEnvelope"]>>,
  Assert<Equal<keyof SuccessEnvelope<TocsinEvent>, keyof Schemas["Success_EventOut"]>>,
  Assert<Extends<SuccessEnvelope<TocsinEvent>, Schemas["Success_EventOut"]>>,
  Assert<Extends<SuccessEnvelope<Identity>, Schemas["Success_IdentityOut"]>>,
  Assert<Extends<SuccessEnvelope<Device>, Schemas["Success_DeviceOut"]>>,
  Assert<Extends<SuccessEnvelope<DeviceList>, Schemas["Success_DeviceList"]>>,
  Assert<Extends<SuccessEnvelope<DeviceDeleted>, Schemas["Success_DeletedDevice"]>>,
  // The read side.
  Assert<Equal<keyof EventList, keyof Schemas["EventPage"]>>,
  Assert<Extends<EventList, Schemas["EventPage"]>>,
  Assert<Equal<EventList["items"], TocsinEvent[]>>,
  Assert<Equal<keyof Channel, keyof Schemas["ChannelOut"]>>,
  Assert<Extends<Channel, Schemas["ChannelOut"]>>,
  Assert<Extends<Schemas["ChannelOut"], Channel>>,
  Assert<Equal<keyof ChannelList, keyof Schemas["ChannelList"]>>,
  Assert<Extends<ChannelList, Schemas["ChannelList"]>>,
  Assert<Extends<Schemas["ChannelList"], ChannelList>>,
  Assert<Equal<StatsBucketSize, Schemas["BucketIn"]>>,
  Assert<Equal<keyof StatsBucket, keyof Schemas["BucketOut"]>>,
  Assert<Extends<StatsBucket, Schemas["BucketOut"]>>,
  Assert<Extends<Schemas["BucketOut"], StatsBucket>>,
  Assert<Equal<keyof EventStats, keyof Schemas["EventStats"]>>,
  Assert<Extends<EventStats, Schemas["EventStats"]>>,
  Assert<Extends<Schemas["EventStats"], EventStats>>,
  Assert<Extends<SuccessEnvelope<EventList>, Schemas["Success_EventPage"]>>,
  Assert<Extends<SuccessEnvelope<ChannelList>, Schemas["Success_ChannelList"]>>,
  Assert<Extends<SuccessEnvelope<EventStats>, Schemas["Success_EventStats"]>>,
  // Query parameters: exactly the route's, every value it takes still
  // accepted, and since/until also a Date.
  Assert<Equal<keyof EventListParams, keyof Query<"/v1/events">>>,
  Assert<Extends<Query<"/v1/events">, EventListParams>>,
  Assert<Equal<EventListParams["since"], Date | string | undefined>>,
  Assert<Equal<EventListParams["limit"], number | undefined>>,
  Assert<Equal<keyof EventStatsParams, keyof Query<"/v1/stats/events">>>,
  Assert<Extends<Query<"/v1/stats/events">, EventStatsParams>>,
  Assert<Equal<EventStatsParams["until"], Date | string | undefined>>,
  Assert<Equal<Exclude<keyof EventStreamParams, "signal">, keyof Query<"/v1/stream">>>,
  Assert<Extends<Query<"/v1/stream">, EventStreamParams>>,
  // The narrowings themselves.
  Assert<Equal<EventCreateParams["metadata"], JsonObject | undefined>>,
  Assert<Equal<TocsinEvent["metadata"], JsonObject>>,
  Assert<Equal<Identity["properties"], JsonObject>>,
  Assert<Equal<SuccessEnvelope<unknown>["success"], true>>,
  Assert<Equal<ErrorEnvelope["success"], false>>,
  Assert<Equal<DeviceDeleted["deleted"], true>>,
  // Optional and nullable fields keep their modifiers.
  Assert<Equal<EventCreateParams["userId"], string | null | undefined>>,
  Assert<Equal<TocsinEvent["description"], string | null>>,
  Assert<Equal<TocsinEvent["notification"]["deliveries"], NotificationDelivery[] | undefined>>,
  Assert<Equal<Device["deactivatedReason"], string | null>>,
  Assert<Equal<Device["channels"], string[] | null>>,
  Assert<Equal<DeviceRegisterParams["name"], string | undefined>>,
  // A device's rules: every one shown, defaults included; null only where it means "none".
  Assert<Equal<Device["tags"], string[] | null>>,
  Assert<Equal<Device["minPriority"], EventPriority>>,
  Assert<Equal<Device["quietHours"], QuietHours | null>>,
  Assert<Equal<Device["burst"], BurstRule | null>>,
  Assert<Equal<QuietHours["allowPriority"], EventPriority | null>>,
  Assert<Equal<QuietHoursParams["allowPriority"], EventPriority | null | undefined>>,
  // An update: left out (undefined) keeps a field, null clears it.
  Assert<Equal<DeviceUpdateParams["name"], string | null | undefined>>,
  Assert<Equal<DeviceUpdateParams["tags"], string[] | null | undefined>>,
  Assert<Equal<DeviceUpdateParams["minPriority"], EventPriority | null | undefined>>,
  Assert<Equal<DeviceUpdateParams["quietHours"], QuietHoursParams | null | undefined>>,
  Assert<Equal<DeviceUpdateParams["burst"], BurstRule | null | undefined>>,
  Assert<Equal<NotificationDelivery["reason"], DeliveryReason | null>>,
  Assert<Equal<NotificationDelivery["summaryId"], string | null>>,
  // A delivery names its recipient: a device (a push) or a destination (a message), each optional.
  Assert<Equal<NotificationDelivery["deviceId"], string | undefined>>,
  Assert<Equal<NotificationDelivery["destinationId"], string | undefined>>,
  Assert<Equal<NotificationDelivery["provider"], string | null>>,
  Assert<Equal<TocsinEvent["alertKey"], string | null>>,
  Assert<Equal<EventCreateParams["alertKey"], string | undefined>>,
  Assert<Equal<NotificationDelivery["error"], string | null>>,
];

export function narrowing(body: SuccessEnvelope<TocsinEvent> | ErrorEnvelope, event: TocsinEvent): void {
  // `success` tells the envelopes apart.
  if (body.success) {
    const id: string = body.data.id;
    void id;
  } else {
    const error: string = body.error;
    void error;
  }
  const amount: JsonValue | undefined = event.metadata["amount"];
  void amount;

  // @ts-expect-error metadata holds JSON values only
  const params: EventCreateParams = { channelName: "c", title: "t", metadata: { callback: () => 1 } };
  void params;
}
