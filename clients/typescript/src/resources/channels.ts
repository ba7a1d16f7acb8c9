// `tocsin.channels`: the channels of the key's project and their activity.

import type { RequestOptions, Tocsin } from "../client.js";
import type { TocsinResponse } from "../response.js";
import type { ChannelList } from "../types.js";

export class Channels {
  readonly #client: Tocsin;

  constructor(client: Tocsin) {
    this.#client = client;
  }

  /** `GET /v1/channels`: every channel with its event count and last event time, most recently active first. */
  async list(options?: RequestOptions): Promise<TocsinResponse<ChannelList>> {
    return this.#client.request<ChannelList>({ method: "GET", path: "/v1/channels", offline: () => ({ items: [] }) }, options);
  }
}
