// `tocsin.users`: the users of the project, as its events and identify calls
// describe them, with the counters their events keep.

import type { RequestOptions, Tocsin } from "../client.js";
import { offlineNotFound } from "../disabled.js";
import { PagePromise } from "../pagination.js";
import type { TocsinResponse } from "../response.js";
import type { Identity, User, UserList, UserListParams } from "../types.js";
import { pathSegment } from "./path.js";
import { queryString } from "./query.js";

export class Users {
  readonly #client: Tocsin;

  constructor(client: Tocsin) {
    this.#client = client;
  }

  /**
   * `GET /v1/users`: the project's users, most recently seen first, one page
   * at a time. Await it for one page, or iterate it for every user of every
   * page:
   *
   * ```ts
   * const page = await tocsin.users.list({ q: "ada", limit: 20 });
   * page.items; page.nextCursor;
   * for await (const user of tocsin.users.list({ property: "plan:pro" })) { … }
   * ```
   *
   * `q` searches the id and the aliases (ignoring case); `property` is
   * `key:value` (the key before the first colon).
   */
  list(params: UserListParams = {}, options?: RequestOptions): PagePromise<User> {
    const { q, property, limit } = params;
    return PagePromise.fetch(async (cursor) => {
      const query = queryString({ q, property, limit, cursor });
      return this.#client.request<UserList>(
        { method: "GET", path: `/v1/users${query}`, offline: () => ({ items: [], nextCursor: null }) },
        options,
      );
    }, params.cursor);
  }

  /**
   * `GET /v1/users/{userId}`: a user, by its id or one of its aliases, as
   * identify and its events left it, with its counters. A user no event or
   * identify call ever named is a `NotFoundError` (404).
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
