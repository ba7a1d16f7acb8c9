// Building path segments from caller input.

import { TocsinError } from "../errors.js";

/**
 * Encodes one path segment. An empty id would silently turn `GET /v1/events/{id}`
 * into a request for a different route, so it is refused here. Callers are
 * async methods, so this surfaces as a rejected promise, not a throw.
 */
export function pathSegment(value: string, name: string): string {
  if (typeof value !== "string" || value === "") {
    throw new TocsinError(`${name} must be a non-empty string`);
  }
  return encodeURIComponent(value);
}
