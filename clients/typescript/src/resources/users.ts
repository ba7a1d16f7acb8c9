// `tocsin.users`: reading the identities recorded with `tocsin.identify`.

import type { RequestOptions, Tocsin } from "../client.js";
import { offlineNotFound } from "../disabled.js";
import type { TocsinResponse } from "../response.js";
import type { Identity } from "../types.js";
import { pathSegment } from "./path.js";

export class Users {
  readonly #client: Tocsin;

  constructor(client: Tocsin) {
    this.#client = client;
  }

  /**
   * `GET /v1/users/{userId}`: the identity as `identify` last left it. An
   * unknown user is a `NotFoundError` (404).
   */
  async get(userId: string, options?: RequestOptions): Promise<TocsinResponse<Identity>> {
    const path = `/v1/users/${pathSegment(userId, "userId")}`;
    return this.#client.request<Identity>(
      {
        method: "GET",
        path,
        offline: () => {
          throw offlineNotFound(`user ${userId}`);
        },
      },
      options,
    );
  }
}
