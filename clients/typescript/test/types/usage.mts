// The usage, compiled against the ESM declarations. A type error here
// fails `npm test`; each @ts-expect-error fails it if the error goes away.

import {
  ApiError,
  ConnectionError,
  RateLimitError,
  TimeoutError,
  Tocsin,
  TocsinError,
  ValidationError,
  type Fetch,
  type RateLimit,
  type TocsinEvent,
  type TocsinResponse,
  type ValidationErrorDetail,
} from "@tocsin/client";

const customFetch: Fetch = (url, init) => fetch(url, init);
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
    },
    { idempotencyKey: "order-42", timeout: 1_000, headers: { "X-Trace": "1" } },
  );
  const id: string = res.data.id;
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
    const fields: [string, string, number, string | null, string] = [
      delivery.deviceId, delivery.state, delivery.attempts, delivery.error, delivery.updatedAt,
    ];
    void fields;
  }
  const device = await tocsin.devices.register({ token: "ab12", environment: "sandbox", name: "phone", channels: ["payments"] });
  const active: boolean = device.data.active;
  const reason: string | null = device.data.deactivatedReason;
  const list = await tocsin.devices.list();
  const tokens: string[] = list.data.devices.map((d) => d.token);
  const deleted: true = (await tocsin.devices.delete(device.data.id)).data.deleted;

  // @ts-expect-error channelName is required
  await tocsin.events.create({ title: "t" });
  // @ts-expect-error title must be a string
  await tocsin.events.create({ channelName: "c", title: 5 });
  // @ts-expect-error environment is production or sandbox
  await tocsin.devices.register({ token: "ab", environment: "staging" });
  // @ts-expect-error GET calls take no idempotency key
  await tocsin.events.get(id, { idempotencyKey: "k" });

  void [requestId, replayed, description, state, last, aliases, active, reason, tokens, deleted];
}

export function handle(error: unknown): string {
  if (error instanceof ValidationError) {
    const details: ValidationErrorDetail[] = error.details;
    const path: string[] = details[0]?.path ?? [];
    return path.join(".");
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
  if (error instanceof ConnectionError) return `connection ${String(error.cause)}`;
  if (error instanceof TocsinError) return error.message;
  return "unknown";
}
