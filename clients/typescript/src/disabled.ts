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
  Insight,
  InsightValue,
  QuietHours,
  QuietHoursParams,
  TocsinEvent,
} from "./types.js";

/** The response of a call that was not sent: no request ID, no rate limit, status 0. */
export function notSent<T>(data: T): TocsinResponse<T> {
  return { data, requestId: "", wasReplayed: false, rateLimit: null, statusCode: 0, sent: false };
}

/**
 * The event `events.create` would have recorded; `notification.state` is
 * "skipped": nothing is pushed. An event given a `timestamp` is recorded at
 * that time, with `notify: false`, as the service does. What only the
 * service does is left as sent: an icon's shortcode stays the shortcode, and
 * a markdown description has no `descriptionHtml` (null).
 */
export function offlineEvent(params: EventCreateParams, now: Date = new Date()): TocsinEvent {
  const at = params.timestamp === undefined ? now : offlineInstant(params.timestamp);
  return {
    id: randomUuid(),
    channelName: params.channelName,
    title: params.title,
    description: params.description ?? null,
    icon: params.icon ?? null,
    tags: params.tags ?? [],
    metadata: params.metadata ?? {},
    userId: params.userId ?? null,
    notify: params.timestamp === undefined ? (params.notify ?? true) : false,
    source: params.source ?? null,
    priority: params.priority ?? "normal",
    alertKey: params.alertKey ?? null,
    parser: params.parser ?? "text",
    descriptionHtml: null,
    url: params.url ?? null,
    createdAt: at === null ? String(params.timestamp) : at.toISOString(),
    notification: { state: "skipped" },
  };
}

/** A `timestamp` as a Date (Unix seconds, or a string Date can read), or null when it cannot be read. */
function offlineInstant(timestamp: Date | string | number): Date | null {
  const date = typeof timestamp === "number" ? new Date(timestamp * 1000) : new Date(timestamp);
  return Number.isNaN(date.getTime()) ? null : date;
}

/**
 * The insight `insights.set` or `insights.increment` would have stored in a
 * project that has none yet: created holding `value` (an increment's
 * amount), with the icon given, or none.
 */
export function offlineInsight(title: string, value: InsightValue, icon: string | undefined, now: Date = new Date()): Insight {
  const at = now.toISOString();
  return { title, value, icon: icon ?? null, createdAt: at, updatedAt: at };
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
    // Identify counts as seen, not as an event.
    firstSeenAt: at,
    lastSeenAt: at,
    eventCount: 0,
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
