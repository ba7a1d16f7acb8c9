// Building query strings from caller input.

import { TocsinError } from "../errors.js";

/** A query parameter's value; undefined and null leave the parameter out. */
export type QueryValue = string | number | Date | null | undefined;

/** An instant for `since`/`until`: a Date, or an RFC 3339 string passed through as is. */
export type Instant = Date | string;

/**
 * `?name=value&…` for the parameters that are set, in the order given, or ""
 * when none is. Dates are sent as RFC 3339 in UTC (`toISOString`); an
 * invalid Date is refused here, since `toISOString` would throw a RangeError
 * that says nothing about which parameter was wrong.
 */
export function queryString(params: Record<string, QueryValue>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    if (value instanceof Date) {
      if (Number.isNaN(value.getTime())) throw new TocsinError(`${name} is an invalid Date`);
      search.append(name, value.toISOString());
    } else {
      search.append(name, String(value));
    }
  }
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}
