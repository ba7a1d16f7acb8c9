// `tocsin.insights`: named live values of a project (revenue today, active
// trials, build status), shown as tiles above the feed.

import type { PostRequestOptions, RequestOptions, Tocsin } from "../client.js";
import { offlineInsight, offlineNotFound } from "../disabled.js";
import type { TocsinResponse } from "../response.js";
import type { Insight, InsightDeleted, InsightIncrementParams, InsightList, InsightSetParams, InsightValue } from "../types.js";
import { pathSegment } from "./path.js";

/** Options of `insights.set` and `insights.increment`: the insight's icon, and the options of a POST. */
export interface InsightOptions extends PostRequestOptions {
  /**
   * The emoji its tile shows, or its shortcode (`":moneybag:"`), stored as
   * the emoji. Left out, the insight keeps the icon it has.
   */
  icon?: InsightSetParams["icon"];
}

/** Splits the icon (a body field) from the options of the request. */
function split(options: InsightOptions | undefined): [icon: string | undefined, options: PostRequestOptions | undefined] {
  if (options === undefined) return [undefined, undefined];
  const { icon, ...requestOptions } = options;
  return [icon, requestOptions];
}

export class Insights {
  readonly #client: Tocsin;

  constructor(client: Tocsin) {
    this.#client = client;
  }

  /**
   * `POST /v1/insights`: sets an insight's value (a string, a number or a
   * boolean), creating the insight if there is none by that title
   * (`statusCode` 201; 200 when it replaced the value).
   *
   * ```ts
   * await tocsin.insights.set("Revenue today", 1250, { icon: "💰" });
   * ```
   */
  async set(title: string, value: InsightValue, options?: InsightOptions): Promise<TocsinResponse<Insight>> {
    const [icon, requestOptions] = split(options);
    const body: InsightSetParams = { title, value };
    if (icon !== undefined) body.icon = icon;
    return this.#client.request<Insight>(
      { method: "POST", path: "/v1/insights", body, offline: () => offlineInsight(title, value, icon) },
      requestOptions,
    );
  }

  /**
   * `PATCH /v1/insights`: adds `by` (negative to subtract) to an insight's
   * number, in one atomic step on the service, so concurrent increments
   * each count once. An insight that does not exist is created holding
   * `by` (`statusCode` 201; 200 otherwise). Incrementing a string or a
   * boolean is a `ValidationError` at `["value"]`, and changes nothing.
   *
   * Unlike other PATCH calls it is not idempotent, so it is retried like a
   * POST: with an `Idempotency-Key` (yours, or one the client makes), which
   * makes the service answer a retry with the first try's result instead
   * of adding again.
   */
  async increment(title: string, by: number, options?: InsightOptions): Promise<TocsinResponse<Insight>> {
    const [icon, requestOptions] = split(options);
    const body: InsightIncrementParams = { title, value: { $inc: by } };
    if (icon !== undefined) body.icon = icon;
    return this.#client.request<Insight>(
      {
        method: "PATCH",
        path: "/v1/insights",
        body,
        needsIdempotencyKey: true,
        // A project that records nothing has no insight yet: the increment creates it.
        offline: () => offlineInsight(title, by, icon),
      },
      requestOptions,
    );
  }

  /** `GET /v1/insights`: every insight of the project, in the order they were created. */
  async list(options?: RequestOptions): Promise<TocsinResponse<InsightList>> {
    return this.#client.request<InsightList>({ method: "GET", path: "/v1/insights", offline: () => ({ insights: [] }) }, options);
  }

  /**
   * `DELETE /v1/insights/{title}` (the title is URL-encoded for you). An
   * unknown title is a `NotFoundError` — also when a retry follows an
   * attempt that deleted it but whose response was lost.
   */
  async delete(title: string, options?: RequestOptions): Promise<TocsinResponse<InsightDeleted>> {
    const path = `/v1/insights/${pathSegment(title, "title")}`;
    return this.#client.request<InsightDeleted>(
      {
        method: "DELETE",
        path,
        offline: () => {
          throw offlineNotFound(`insight ${JSON.stringify(title)}`);
        },
      },
      options,
    );
  }
}
