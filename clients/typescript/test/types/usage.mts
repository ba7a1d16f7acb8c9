// The usage, compiled against the ESM declarations. A type error here
// fails `npm test`; each @ts-expect-error fails it if the error goes away.

import {
  AbortError,
  ApiError,
  AuthenticationError,
  ConflictError,
  ConnectionError,
  InternalServerError,
  PermissionDeniedError,
  isTocsinError,
  RateLimitError,
  TimeoutError,
  Tocsin,
  TocsinError,
  ValidationError,
  NotFoundError,
  Page,
  type BurstRule,
  type Channel,
  type Device,
  type DeviceUpdateParams,
  type EventPriority,
  type EventStream,
  type Fetch,
  type Identity,
  type Insight,
  type InsightDeleted,
  type InsightValue,
  type JsonObject,
  type LiveStream,
  type StreamMessage,
  type User,
  type RateLimit,
  type RequestSpec,
  type StatsBucket,
  type TocsinEvent,
  type TocsinResponse,
  type ValidationErrorDetail,
} from "@tocsin/client";

const customFetch: Fetch = (url, init) => fetch(url, init);
new Tocsin(); // TOCSIN_API_KEY, TOCSIN_BASE_URL
new Tocsin(undefined, { timeout: 1_000 });
new Tocsin({ apiKey: "key", baseUrl: "http://127.0.0.1:8080", defaultHeaders: { "X-Team": "payments", "User-Agent": null } });
const offline = new Tocsin({ disabled: true });
const isOffline: boolean = offline.disabled;
// @ts-expect-error options are given once
new Tocsin({ apiKey: "key" }, { timeout: 1 });
// @ts-expect-error a header value is a string or null
new Tocsin({ defaultHeaders: { "X-Count": 5 } });
const tocsin = new Tocsin("key", { baseUrl: "http://127.0.0.1:8080", timeout: 5_000, fetch: customFetch, maxRetries: 0 });
new Tocsin("key", { fetch }); // the global fetch fits the Fetch type

export async function usage(): Promise<void> {
  const res: TocsinResponse<TocsinEvent> = await tocsin.events.create(
    {
      channelName: "payments",
      title: "Payment failed",
      description: "Card declined",
      icon: "💸",
      tags: ["eu"],
      metadata: { amount: 1999, nested: { ok: true }, list: [1, "a", null] },
      userId: null,
      notify: true,
      source: "billing",
      priority: "high",
    },
    { idempotencyKey: "order-42", timeout: 1_000, headers: { "X-Trace": "1" } },
  );
  const id: string = res.data.id;
  const sent: boolean = res.sent;
  const controller = new AbortController();
  await tocsin.events.get(id, { signal: controller.signal, timeout: 500, maxRetries: 0, headers: { "X-Trace": null } });
  await tocsin.channels.list({ signal: controller.signal });
  await tocsin.events.list({}, { signal: controller.signal, maxRetries: 1 });
  tocsin.events.stream({}, { signal: controller.signal, timeout: 5_000, maxRetries: 1 });
  void [sent, isOffline];
  // A spec typed before `offline` existed still serves any response type.
  const spec: RequestSpec = { method: "GET", path: "/v1/new-thing" };
  const thing: { things: string[] } = (await tocsin.request<{ things: string[] }>(spec)).data;
  const withOffline = await tocsin.request({ method: "GET", path: "/v1/new-thing", offline: () => ({ things: ["a"] }) });
  const inferred: string[] = withOffline.data.things;
  void [thing, inferred];
  const requestId: string = res.requestId;
  const replayed: boolean = res.wasReplayed;
  const description: string | null = res.data.description;
  const state: "pending" | "queued" | "delivered" | "failed" | "skipped" = res.data.notification.state;
  const rateLimit: RateLimit | null = res.rateLimit;
  if (rateLimit) {
    const numbers: number[] = [rateLimit.limit, rateLimit.remaining, rateLimit.reset, rateLimit.resetIn];
    void numbers;
  }
  const last: RateLimit | null = tocsin.lastRateLimit;

  const identity = await tocsin.identify({ user_id: "u1", properties: { plan: "pro" }, aliases: ["a@b.c"] });
  const aliases: string[] = identity.data.aliases;

  const looked = await tocsin.events.get(id, { timeout: 1_000 });
  for (const delivery of looked.data.notification.deliveries ?? []) {
    const fields: [string, number, string | null, string | null, string] = [
      delivery.state, delivery.attempts, delivery.error, delivery.provider, delivery.updatedAt,
    ];
    // Exactly one of the two names the recipient: a device (a push) or a destination (a message).
    const recipient: string | undefined = delivery.deviceId ?? delivery.destinationId;
    if (delivery.deviceId !== undefined) {
      const deviceId: string = delivery.deviceId;
      void deviceId;
    } else if (delivery.destinationId !== undefined) {
      const destinationId: string = delivery.destinationId;
      void destinationId;
    }
    // @ts-expect-error a delivery may be a destination's, without a deviceId
    const notAlwaysADevice: string = delivery.deviceId;
    const why: "channel" | "tag" | "priority" | "quietHours" | "burst" | null = delivery.reason;
    const summaryId: string | null = delivery.summaryId;
    void [fields, recipient, notAlwaysADevice, why, summaryId];
  }
  const device = await tocsin.devices.register({ token: "ab12", environment: "sandbox", name: "phone", channels: ["payments"] });
  const active: boolean = device.data.active;
  const reason: string | null = device.data.deactivatedReason;
  const list = await tocsin.devices.list();
  const tokens: (string | null)[] = list.data.devices.map((d) => d.token);
  const kinds: ("apns" | "webpush" | "fcm")[] = list.data.devices.map((d) => d.kind);
  void kinds;
  const browser = await tocsin.devices.register({
    kind: "webpush",
    subscription: { endpoint: "https://push.example.com/x", expirationTime: null, keys: { p256dh: "B".repeat(87), auth: "a".repeat(22) } },
  });
  const endpoint: string | null = browser.data.endpoint;
  void endpoint;
  const rules = await tocsin.devices.register({
    token: "ab12",
    environment: "sandbox",
    tags: ["eu"],
    minPriority: "normal",
    quietHours: { start: "22:00", end: "07:00", timeZone: "Europe/Berlin" },
    burst: { max: 5, perMinutes: 10 },
  });
  const allowed: EventPriority | null | undefined = rules.data.quietHours?.allowPriority;
  const burst: BurstRule | null = rules.data.burst;
  const updated: TocsinResponse<Device> = await tocsin.devices.update(
    rules.data.id,
    { name: null, tags: null, minPriority: "high", quietHours: { start: "23:00", end: "06:00", timeZone: "UTC", allowPriority: null }, burst: null },
    { timeout: 1_000, maxRetries: 1, signal: controller.signal, headers: { "X-Trace": "1" } },
  );
  const minPriority: EventPriority = updated.data.minPriority;
  const changes: DeviceUpdateParams = { channels: ["payments"] };
  await tocsin.devices.update(rules.data.id, changes);
  await tocsin.devices.update(rules.data.id, {}); // changes nothing, answers the device
  void [allowed, burst, minPriority];
  const deleted: true = (await tocsin.devices.delete(device.data.id)).data.deleted;

  // The read side.
  const page: Page<TocsinEvent> = await tocsin.events.list({
    channel: "payments",
    tag: "eu",
    userId: "user_7",
    q: "declined",
    since: new Date(),
    until: "2026-11-23T00:00:00Z",
    limit: 50,
    cursor: "opaque",
  });
  const items: TocsinEvent[] = page.items;
  const nextCursor: string | null = page.nextCursor;
  const pageRequestId: string = page.requestId;
  if (page.hasNextPage()) {
    const second: Page<TocsinEvent> = await page.nextPage();
    void second;
  }
  for await (const event of tocsin.events.list({ channel: "payments" }, { timeout: 1_000 })) {
    const title: string = event.title;
    void title;
  }
  for await (const event of page) {
    const createdAt: string = event.createdAt;
    void createdAt;
  }
  const stream: EventStream = tocsin.events.stream(
    { channel: "payments", lastEventId: "0190", signal: new AbortController().signal },
    { idleTimeout: 60_000, headers: { "X-Trace": "1" } },
  );
  for await (const event of stream) {
    const streamed: TocsinEvent = event;
    void streamed;
  }
  const resumeAfter: string | undefined = stream.lastEventId;
  const channels: Channel[] = (await tocsin.channels.list()).data.items;
  const lastEventAt: string | null | undefined = channels[0]?.lastEventAt;
  const user: Identity = (await tocsin.users.get("user_7")).data;
  const properties: JsonObject = user.properties;
  const buckets: StatsBucket[] = (await tocsin.stats.events({ channel: "payments", since: new Date(), bucket: "day" })).data.buckets;
  const count: number | undefined = buckets[0]?.count;
  void [items, nextCursor, pageRequestId, resumeAfter, lastEventAt, properties, count];

  // Event fields of history and LogSnag's track.
  const history = await tocsin.events.create({
    channelName: "imports",
    title: "Order placed",
    timestamp: new Date("2026-03-01T09:30:00Z"),
    parser: "markdown",
    description: "**Order** #1042",
    url: "https://shop.example.com/orders/1042",
    icon: ":moneybag:",
  });
  await tocsin.events.create({ channelName: "imports", title: "t", timestamp: "2026-03-01T09:30:00Z" });
  await tocsin.events.create({ channelName: "imports", title: "t", timestamp: 1_772_357_400 });
  const html: string | null = history.data.descriptionHtml;
  const link: string | null = history.data.url;
  const parser: "text" | "markdown" = history.data.parser;
  void [html, link, parser];

  // Users.
  const userPage: Page<User> = await tocsin.users.list({ q: "ada", property: "plan:pro", limit: 20, cursor: "c" }, { timeout: 1_000 });
  for await (const listed of tocsin.users.list({ property: "plan:pro" })) {
    const counts: [string, number, string, string] = [listed.userId, listed.eventCount, listed.firstSeenAt, listed.lastSeenAt];
    void counts;
  }
  const seen: number = (await tocsin.users.get("ada@example.com")).data.eventCount;
  void [userPage, seen];

  // Insights.
  const set: TocsinResponse<Insight> = await tocsin.insights.set("Revenue today", 1250, { icon: "💰", idempotencyKey: "k", timeout: 1_000 });
  await tocsin.insights.set("Build", "green");
  await tocsin.insights.set("Maintenance", false, { headers: { "X-Trace": "1" }, signal: controller.signal });
  const incremented = await tocsin.insights.increment("Active trials", 1, { idempotencyKey: "trial-42", maxRetries: 5 });
  const value: InsightValue = incremented.data.value;
  const insightIcon: string | null = set.data.icon;
  const allInsights: Insight[] = (await tocsin.insights.list()).data.insights;
  const gone: InsightDeleted = (await tocsin.insights.delete("Revenue today", { timeout: 1_000 })).data;
  const alwaysTrue: true = gone.deleted;
  void [value, insightIcon, allInsights, alwaysTrue, set.statusCode, set.wasReplayed, set.rateLimit];

  // The whole stream: events and insight changes, told apart by type.
  const live: LiveStream = tocsin.stream({ channel: "payments", signal: controller.signal }, { idleTimeout: 60_000 });
  for await (const message of live) {
    const any: StreamMessage = message;
    void any;
    if (message.type === "event") {
      const streamed: TocsinEvent = message.data;
      const eventId: string = message.id;
      void [streamed, eventId];
    } else if (message.type === "insight") {
      const changed: Insight = message.data;
      void changed;
    } else {
      const deletedAt: string = message.data.deletedAt;
      void deletedAt;
    }
  }
  const liveResume: string | undefined = live.lastEventId;
  void liveResume;

  // @ts-expect-error an insight's value is a string, a number or a boolean
  await tocsin.insights.set("Bad", { nested: 1 });
  // @ts-expect-error an increment is a number
  await tocsin.insights.increment("Active trials", "1");
  // @ts-expect-error listing insights takes no idempotency key
  await tocsin.insights.list({ idempotencyKey: "k" });
  // @ts-expect-error nor does deleting one
  await tocsin.insights.delete("t", { idempotencyKey: "k" });
  // @ts-expect-error parser is text or markdown
  await tocsin.events.create({ channelName: "c", title: "t", parser: "html" });
  // @ts-expect-error users are filtered by q and property, not by plan
  await tocsin.users.list({ plan: "pro" });

  // @ts-expect-error bucket is hour or day
  await tocsin.stats.events({ bucket: "week" });
  // @ts-expect-error since is a Date or an RFC 3339 string
  await tocsin.events.list({ since: 1_700_000_000 });
  // @ts-expect-error limit is a number
  await tocsin.events.list({ limit: "50" });
  // @ts-expect-error the stream's events are not pages
  for await (const event of tocsin.events.stream()) event.items;

  // @ts-expect-error channelName is required
  await tocsin.events.create({ title: "t" });
  // @ts-expect-error title must be a string
  await tocsin.events.create({ channelName: "c", title: 5 });
  // @ts-expect-error environment is production or sandbox
  await tocsin.devices.register({ token: "ab", environment: "staging" });
  // @ts-expect-error GET calls take no idempotency key
  await tocsin.events.get(id, { idempotencyKey: "k" });
  // @ts-expect-error neither does a PATCH: applying the same changes twice is harmless
  await tocsin.devices.update(id, {}, { idempotencyKey: "k" });
  // @ts-expect-error minPriority is low, normal or high
  await tocsin.devices.update(id, { minPriority: "urgent" });
  // @ts-expect-error quiet hours need a time zone
  await tocsin.devices.update(id, { quietHours: { start: "22:00", end: "07:00" } });
  // @ts-expect-error the changes are an object of known fields
  await tocsin.devices.update(id, { token: "ab12" });
  // @ts-expect-error the id is required
  await tocsin.devices.update({ minPriority: "high" });

  void [requestId, replayed, description, state, last, aliases, active, reason, tokens, deleted];
}

export function handleAcrossBuilds(error: unknown): string {
  if (!isTocsinError(error)) throw error;
  const message: string = error.message; // narrowed to TocsinError
  if (error.name === "RateLimitError") return `later: ${message}`;
  return message;
}

export function handle(error: unknown): string {
  if (error instanceof AuthenticationError) return `check TOCSIN_API_KEY ${error.statusCode}`;
  if (error instanceof PermissionDeniedError) return `scope missing ${error.requestId}`;
  if (error instanceof ConflictError) return `conflict ${error.statusCode}`;
  if (error instanceof InternalServerError) return `server ${error.statusCode}`;
  if (error instanceof AbortError) return `aborted ${String(error.cause)}`;
  if (error instanceof ValidationError) {
    const details: ValidationErrorDetail[] = error.details;
    const path: string[] = details[0]?.path ?? [];
    return path.join(".");
  }
  if (error instanceof NotFoundError) {
    const status: number = error.statusCode;
    return `not found ${status}`;
  }
  if (error instanceof RateLimitError) {
    const rateLimit: RateLimit = error.rateLimit; // always set on a RateLimitError
    const retryAfter: number | undefined = error.retryAfter;
    return `${rateLimit.remaining} ${retryAfter}`;
  }
  if (error instanceof ApiError) {
    const status: number = error.statusCode;
    const requestId: string | undefined = error.requestId;
    const rateLimit: RateLimit | undefined = error.rateLimit;
    return `${status} ${error.message} ${requestId} ${rateLimit?.limit}`;
  }
  if (error instanceof TimeoutError) return `timeout ${error.timeout}`;
  if (error instanceof ConnectionError) {
    const url: string | undefined = error.url;
    return `connection ${url} ${String(error.cause)}`;
  }
  if (error instanceof TocsinError) return error.message;
  return "unknown";
}
