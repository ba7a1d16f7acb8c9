// `tocsin.stats`: counts of events over time, for charts.

import type { RequestOptions, Tocsin } from "../client.js";
import type { TocsinResponse } from "../response.js";
import type { EventStats, EventStatsParams } from "../types.js";
import { queryString } from "./query.js";

export class Stats {
  readonly #client: Tocsin;

  constructor(client: Tocsin) {
    this.#client = client;
  }

  /**
   * `GET /v1/stats/events`: the number of events per UTC hour or day, oldest
   * first, empty buckets included. By default the last 24 hours by hour
   * (`bucket: "day"`: the last 30 days). An answer holds at most 1000
   * buckets: for a longer range, `nextSince` names where the rest begins
   * (pass it as `since`); it is null once the range is complete.
   */
  async events(params: EventStatsParams = {}, options?: RequestOptions): Promise<TocsinResponse<EventStats>> {
    const { channel, since, until, bucket } = params;
    const query = queryString({ channel, since, until, bucket });
    // Disabled: no buckets at all, rather than a made-up series of zeros.
    return this.#client.request<EventStats>(
      { method: "GET", path: `/v1/stats/events${query}`, offline: () => ({ buckets: [], nextSince: null }) },
      options,
    );
  }
}
