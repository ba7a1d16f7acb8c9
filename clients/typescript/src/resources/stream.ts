// `GET /v1/stream` as typed messages: the events recorded in the project and
// the changes of its insights, live. `tocsin.stream` yields every message;
// `events.stream` is the same stream reduced to its events.

import { anySignal } from "../abort.js";
import type { RequestOptions, Tocsin } from "../client.js";
import { TocsinError } from "../errors.js";
import type { SseMessage } from "../sse/parser.js";
import type { EventStreamParams, StreamMessage } from "../types.js";
import { queryString } from "./query.js";

/** Settings of a stream (`events.stream`, `tocsin.stream`). */
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
 * The messages of `GET /v1/stream` from when it opens, as an async
 * iterable: events recorded, insights set, incremented or deleted. Each
 * `for await` opens a connection; iterating again after leaving a loop
 * resumes after the last event that loop received.
 */
export interface LiveStream extends AsyncIterable<StreamMessage> {
  /**
   * The ID of the latest event received (or `lastEventId` given), to resume
   * with later; undefined before any. Insight messages carry no ID and do
   * not change it (the service does not replay them: list the insights
   * after a resume).
   */
  readonly lastEventId: string | undefined;
}

/** The message types of {@link StreamMessage}; any other is skipped. */
const KNOWN_TYPES: ReadonlySet<string> = new Set<StreamMessage["type"]>(["event", "insight", "insight-deleted"]);

/**
 * Opens `GET /v1/stream` (on first iteration) and yields its messages of the
 * known types, or only those of `types`: the others are skipped unread.
 */
export function liveStream(
  client: Tocsin,
  params: EventStreamParams,
  options: StreamOptions,
  types: ReadonlySet<string> = KNOWN_TYPES,
): LiveStream {
  const messages = client.streamMessages(`/v1/stream${queryString({ channel: params.channel })}`, {
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
        // Other types are for future use; a client that does not know them skips them.
        if (!types.has(message.type)) continue;
        yield parseMessage(message);
      }
    },
  };
}

function parseMessage(message: SseMessage): StreamMessage {
  let data: unknown;
  try {
    data = JSON.parse(message.data);
  } catch {
    throw new TocsinError(`The stream sent an ${message.type} message that is not JSON: ${message.data.slice(0, 200)}`);
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    throw new TocsinError(`The stream sent an ${message.type} message that is not a JSON object: ${message.data.slice(0, 200)}`);
  }
  // The types were checked by the caller; the shapes are the service's.
  if (message.type === "event") return { type: "event", id: message.lastEventId, data } as StreamMessage;
  return { type: message.type, data } as StreamMessage;
}
