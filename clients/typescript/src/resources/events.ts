// `tocsin.events`: recording events and reading them back, page by page or
// live as they are recorded.

import type { PostRequestOptions, RequestOptions, Tocsin } from "../client.js";
import { offlineEvent, offlineNotFound } from "../disabled.js";
import { TocsinError } from "../errors.js";
import { PagePromise } from "../pagination.js";
import type { TocsinResponse } from "../response.js";
import type { EventCreateParams, EventList, EventListParams, EventStreamParams, TocsinEvent } from "../types.js";
import { pathSegment } from "./path.js";
import { queryString } from "./query.js";
import { liveStream, type StreamOptions } from "./stream.js";

export { DEFAULT_STREAM_IDLE_TIMEOUT, type StreamOptions } from "./stream.js";

/**
 * The events recorded in the project from when it opens, as an async
 * iterable. Each `for await` opens a connection; iterating again after
 * leaving a loop resumes after the last event that loop received.
 */
export interface EventStream extends AsyncIterable<TocsinEvent> {
  /** The ID of the latest event received (or `lastEventId` given), to resume with later; undefined before any. */
  readonly lastEventId: string | undefined;
}

/** What `events.stream` reads of the stream: insight changes are skipped unread. */
const EVENTS_ONLY: ReadonlySet<string> = new Set(["event"]);

/**
 * The body of `POST /v1/events` as sent: a `timestamp` given as a Date goes
 * as RFC 3339 (UTC, milliseconds). An invalid Date is refused here, since
 * JSON would send it as null, which says nothing about what was wrong.
 */
function eventBody(params: EventCreateParams): EventCreateParams {
  const { timestamp } = params;
  if (!(timestamp instanceof Date)) return params;
  if (Number.isNaN(timestamp.getTime())) throw new TocsinError("timestamp is an invalid Date");
  return { ...params, timestamp: timestamp.toISOString() };
}

export class Events {
  readonly #client: Tocsin;

  constructor(client: Tocsin) {
    this.#client = client;
  }

  /**
   * `POST /v1/events`: records an event on a channel (created on first use)
   * and, unless `notify` is false, pushes it to the project's devices. An
   * event given a `timestamp` (a Date, an RFC 3339 string or Unix seconds;
   * not in the future) is recorded at that time, as history, and never
   * pushed: it comes back with `notify: false`.
   */
  async create(params: EventCreateParams, options?: PostRequestOptions): Promise<TocsinResponse<TocsinEvent>> {
    return this.#client.request<TocsinEvent>(
      { method: "POST", path: "/v1/events", body: eventBody(params), offline: () => offlineEvent(params) },
      options,
    );
  }

  /** `GET /v1/events/{id}`: an event with its notification state. */
  async get(id: string, options?: RequestOptions): Promise<TocsinResponse<TocsinEvent>> {
    const path = `/v1/events/${pathSegment(id, "id")}`;
    return this.#client.request<TocsinEvent>(
      {
        method: "GET",
        path,
        offline: () => {
          throw offlineNotFound(`event ${id}`);
        },
      },
      options,
    );
  }

  /**
   * `GET /v1/events`: the project's events, newest first, one page at a time.
   * Await it for one page, or iterate it for every event of every page:
   *
   * ```ts
   * const page = await tocsin.events.list({ channel: "payments", limit: 20 });
   * page.items; page.nextCursor;
   * for await (const event of tocsin.events.list({ channel: "payments" })) { … }
   * ```
   */
  list(params: EventListParams = {}, options?: RequestOptions): PagePromise<TocsinEvent> {
    const { channel, tag, userId, q, since, until, limit } = params;
    return PagePromise.fetch(async (cursor) => {
      const query = queryString({ channel, tag, userId, q, since, until, limit, cursor });
      return this.#client.request<EventList>(
        { method: "GET", path: `/v1/events${query}`, offline: () => ({ items: [], nextCursor: null }) },
        options,
      );
    }, params.cursor);
  }

  /**
   * `GET /v1/stream`: every event recorded in the project from now on, live,
   * over Server-Sent Events. A dropped connection is reopened with backoff
   * and `Last-Event-ID`, so no event is missed or repeated. Ends when a
   * `signal` (in `params` or `options`) aborts or the loop is left; throws
   * errors retrying cannot fix (401, 403, …) and, before the stream first
   * opened, any error once the retries are used up. The stream's other
   * messages (insight changes) are skipped: `tocsin.stream` yields them all.
   *
   * ```ts
   * for await (const event of tocsin.events.stream({ channel: "payments", signal })) { … }
   * ```
   */
  stream(params: EventStreamParams = {}, options: StreamOptions = {}): EventStream {
    const messages = liveStream(this.#client, params, options, EVENTS_ONLY);
    return {
      get lastEventId() {
        return messages.lastEventId;
      },
      async *[Symbol.asyncIterator]() {
        for await (const message of messages) {
          if (message.type === "event") yield message.data;
        }
      },
    };
  }
}
