// Cursor pagination: a page of a list and the promise of one, both async
// iterable over every item from there on (stripe-node's auto-pagination,
// openai-node's `for await (const item of client.x.list())`).

import { TocsinError } from "./errors.js";
import type { RateLimit } from "./rate-limit.js";
import type { TocsinResponse } from "./response.js";

/** `data` of a paginated list: one page of items and the cursor of the next, null on the last page. */
export interface PageData<Item> {
  items: Item[];
  nextCursor: string | null;
}

/** Fetches the page at `cursor` (undefined for the first). */
export type PageFetcher<Item> = (cursor: string | undefined) => Promise<TocsinResponse<PageData<Item>>>;

/**
 * One page of a list: the response of its request, with `items` and
 * `nextCursor` at hand. Iterating it with `for await` yields its items and
 * then those of every following page, fetched as the loop gets to them.
 */
export class Page<Item> implements TocsinResponse<PageData<Item>>, AsyncIterable<Item> {
  readonly data: PageData<Item>;
  readonly requestId: string;
  readonly wasReplayed: boolean;
  readonly rateLimit: RateLimit | null;
  readonly statusCode: number;
  readonly sent: boolean;

  readonly #fetchPage: PageFetcher<Item>;
  readonly #cursor: string | undefined;

  constructor(response: TocsinResponse<PageData<Item>>, fetchPage: PageFetcher<Item>, cursor: string | undefined) {
    this.data = response.data;
    this.requestId = response.requestId;
    this.wasReplayed = response.wasReplayed;
    this.rateLimit = response.rateLimit;
    this.statusCode = response.statusCode;
    this.sent = response.sent;
    this.#fetchPage = fetchPage;
    this.#cursor = cursor;
  }

  /** The items of this page. */
  get items(): Item[] {
    return this.data.items;
  }

  /** Pass as `cursor` to get the next page; null on the last page. */
  get nextCursor(): string | null {
    return this.data.nextCursor;
  }

  hasNextPage(): boolean {
    return this.data.nextCursor !== null;
  }

  /** Fetches the next page, with the same filters. Rejects on the last page. */
  nextPage(): PagePromise<Item> {
    const cursor = this.data.nextCursor;
    if (cursor === null) {
      return PagePromise.from(Promise.reject(new TocsinError("This is the last page: nextCursor is null")));
    }
    // A server answering with the cursor it was given would make iteration endless.
    if (cursor === this.#cursor) {
      return PagePromise.from(Promise.reject(new TocsinError(`The service returned the same cursor again (${cursor})`)));
    }
    return PagePromise.fetch(this.#fetchPage, cursor);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Item, void, undefined> {
    let page: Page<Item> = this;
    for (;;) {
      yield* page.items;
      if (!page.hasNextPage()) return;
      page = await page.nextPage();
    }
  }
}

/**
 * The promise of a {@link Page}, which is also async iterable over every item
 * of every page:
 *
 * ```ts
 * const page = await tocsin.events.list({ limit: 50 });        // one page
 * for await (const event of tocsin.events.list({ limit: 50 })) // every event
 * ```
 *
 * The first page is requested at once; iterating reuses that request.
 */
export class PagePromise<Item> extends Promise<Page<Item>> implements AsyncIterable<Item> {
  // `then`, `catch` and `finally` build plain promises, not PagePromises
  // (whose constructor takes no executor).
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  private constructor(page: Promise<Page<Item>>) {
    let resolve!: (page: Page<Item>) => void;
    let reject!: (error: unknown) => void;
    super((ok, fail) => {
      resolve = ok;
      reject = fail;
    });
    page.then(resolve, reject);
  }

  /** Requests the page at `cursor` now. */
  static fetch<Item>(fetchPage: PageFetcher<Item>, cursor?: string): PagePromise<Item> {
    return new PagePromise(fetchPage(cursor).then((response) => new Page(response, fetchPage, cursor)));
  }

  /** Wraps a promise of a page. */
  static from<Item>(page: Promise<Page<Item>>): PagePromise<Item> {
    return new PagePromise(page);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Item, void, undefined> {
    yield* await this;
  }
}
