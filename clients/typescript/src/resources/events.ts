// `tocsin.events`: recording events and reading them back, page by page or
// live as they are recorded.

import { anySignal } from "../abort.js";
import type { PostRequestOptions, RequestOptions, Tocsin } from "../client.js";
import { offlineEvent, offlineNotFound } from "../disabled.js";
import { TocsinError } from "../errors.js";
import { PagePromise } from "../pagination.js";
import type { TocsinResponse } from "../response.js";
import type { EventCreateParams, EventList, EventListParams, EventStreamParams, TocsinEvent } from "../types.js";
import { pathSegment } from "./path.js";
import { queryString } from "./query.js";

/** Settings of an event stream. */
export interface StreamOptions extends RequestOptions {
  /**
   * A connection that sends nothing (not even the service's keep-alive,
   * sent at least every 15 s) for this many milliseconds is taken for dead
   * and replaced. Default 45000.
   */
  idleTimeout?: number;
}

/** The default {@link StreamOptions.idleTimeout}: three missed keep-alives. */
export const DEFAULT_STREAM_IDLE_TIMEOUT = 45_000;

/**
 * The events recorded in the project from when it opens, as an async
 * iterable. Each `for await` opens a connection; iterating again after
 * leaving a loop resumes after the last event that loop received.
 */
export interface EventStream extends AsyncIterable<TocsinEvent> {
  /** The ID of the latest event received (or `lastEventId` given), to resume with later; undefined before any. */
  readonly lastEventId: string | undefined;
}

export class Events {
  readonly #client: Tocsin;

  constructor(client: Tocsin) {
    this.#client = client;
  }

  /**
   * `POST /v1/events`: records an event on a channel (created on first use)
   * and, unless `notify` is false, pushes it to the project's devices.
   */
  async create(params: EventCreateParams, options?: PostRequestOptions): Promise<TocsinResponse<TocsinEvent>> {
    return this.#client.request<TocsinEvent>(
      { method: "POST", path: "/v1/events", body: params, offline: () => offlineEvent(params) },
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
   * opened, any error once the retries are used up.
   *
   * ```ts
   * for await (const event of tocsin.events.stream({ channel: "payments", signal })) { … }
   * ```
   */
  stream(params: EventStreamParams = {}, options: StreamOptions = {}): EventStream {
    const messages = this.#client.streamMessages(`/v1/stream${queryString({ channel: params.channel })}`, {
      ...options,
      idleTimeout: options.idleTimeout ?? DEFAULT_STREAM_IDLE_TIMEOUT,
      lastEventId: params.lastEventId,
      signal: anySignal(params.signal, options.signal),
    });
    return {
      get lastEventId() {
        return messages.lastEventId;
      },
      async *[Symbol.asyncIterator]() {
        for await (const message of messages) {
          // Other message types are for future use; a client that does not know them skips them.
          if (message.type !== "event") continue;
          yield parseEvent(message.data);
        }
      },
    };
  }
}

function parseEvent(data: string): TocsinEvent {
  try {
    return JSON.parse(data) as TocsinEvent;
  } catch {
    throw new TocsinError(`The event stream sent an event that is not JSON: ${data.slice(0, 200)}`);
  }
}
