// What a disabled client (`disabled: true`) answers in the service's place,
// without touching the network: what the service would answer for a project
// that records nothing. Writes return what they would have recorded, reads
// are empty, lookups by id find nothing. Every answer says `sent: false`.
//
// Nothing is validated: the service's rules live in the service, and a call
// it would refuse succeeds here.

import { NotFoundError } from "./errors.js";
import { generateIdempotencyKey as randomUuid } from "./idempotency.js";
import type { TocsinResponse } from "./response.js";
import type {
  Device,
  DeviceRegisterParams,
  EventCreateParams,
  IdentifyParams,
  Identity,
  QuietHours,
  QuietHoursParams,
  TocsinEvent,
} from "./types.js";

/** The response of a call that was not sent: no request ID, no rate limit, status 0. */
export function notSent<T>(data: T): TocsinResponse<T> {
  return { data, requestId: "", wasReplayed: false, rateLimit: null, statusCode: 0, sent: false };
}

/** The event `events.create` would have recorded; `notification.state` is "skipped": nothing is pushed. */
export function offlineEvent(params: EventCreateParams, now: Date = new Date()): TocsinEvent {
  return {
    id: randomUuid(),
    channelName: params.channelName,
    title: params.title,
    description: params.description ?? null,
    icon: params.icon ?? null,
    tags: params.tags ?? [],
    metadata: params.metadata ?? {},
    userId: params.userId ?? null,
    notify: params.notify ?? true,
    source: params.source ?? null,
    priority: params.priority ?? "normal",
    alertKey: params.alertKey ?? null,
    createdAt: now.toISOString(),
    notification: { state: "skipped" },
  };
}

/** The identity `identify` would have stored for a user seen for the first time. */
export function offlineIdentity(params: IdentifyParams, now: Date = new Date()): Identity {
  const at = now.toISOString();
  return {
    user_id: params.user_id,
    properties: params.properties ?? {},
    aliases: params.aliases ?? [],
    createdAt: at,
    updatedAt: at,
  };
}

/** The device `devices.register` would have created, its rules' defaults filled in. */
export function offlineDevice(params: DeviceRegisterParams, now: Date = new Date()): Device {
  const at = now.toISOString();
  const target =
    params.kind === "webpush"
      ? { kind: "webpush" as const, token: null, environment: null, endpoint: params.subscription.endpoint }
      : params.kind === "fcm"
        ? { kind: "fcm" as const, token: params.token, environment: null, endpoint: null }
        : { kind: "apns" as const, token: params.token, environment: params.environment, endpoint: null };
  return {
    id: randomUuid(),
    ...target,
    name: params.name ?? null,
    channels: params.channels ?? null,
    tags: params.tags ?? null,
    minPriority: params.minPriority ?? "low",
    quietHours: params.quietHours === undefined ? null : offlineQuietHours(params.quietHours),
    burst: params.burst ?? null,
    active: true,
    deactivatedReason: null,
    createdAt: at,
    updatedAt: at,
  };
}

/** Quiet hours as the service stores them: `allowPriority` is `"high"` when left out; `null` (nothing gets through) is kept. */
function offlineQuietHours({ start, end, timeZone, allowPriority }: QuietHoursParams): QuietHours {
  return { start, end, timeZone, allowPriority: allowPriority === undefined ? "high" : allowPriority };
}

/** What a lookup by id throws: a project that records nothing has nothing to find. */
export function offlineNotFound(what: string): NotFoundError {
  return new NotFoundError({
    statusCode: 404,
    message: `${what} not found: the client is disabled (disabled: true), so nothing was sent or recorded`,
  });
}
