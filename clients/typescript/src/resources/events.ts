// `tocsin.events`: recording events and reading them back.

import type { PostRequestOptions, RequestOptions, Tocsin } from "../client.js";
import type { TocsinResponse } from "../response.js";
import type { EventCreateParams, TocsinEvent } from "../types.js";
import { pathSegment } from "./path.js";

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
    return this.#client.request<TocsinEvent>({ method: "POST", path: "/v1/events", body: params }, options);
  }

  /** `GET /v1/events/{id}`: an event with its notification state. */
  async get(id: string, options?: RequestOptions): Promise<TocsinResponse<TocsinEvent>> {
    return this.#client.request<TocsinEvent>({ method: "GET", path: `/v1/events/${pathSegment(id, "id")}` }, options);
  }
}
