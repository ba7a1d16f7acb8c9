// The published request/response types are the service's generated schemas,
// narrowed only where the document cannot say what the API guarantees (JSON
// values in free-form objects, the literal `success`). Compiled by
// `npm run typecheck`: public names from the built declarations, schemas from
// the committed generated file.

import type {
  ErrorEnvelope,
  EventCreateParams,
  IdentifyParams,
  Identity,
  JsonObject,
  JsonValue,
  SuccessEnvelope,
  TocsinEvent,
  ValidationErrorDetail,
} from "@tocsin/client";

import type { components } from "../../src/generated/openapi.js";

type Schemas = components["schemas"];
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
type Extends<A, B> = [A] extends [B] ? true : false;
type Assert<T extends true> = T;

// Same fields as the schema (plus the pending `notification`), and every value
// of a public type is a value of its schema: narrowed, never widened.
export type Checks = [
  Assert<Equal<keyof EventCreateParams, keyof Schemas["EventIn"]>>,
  Assert<Extends<EventCreateParams, Schemas["EventIn"]>>,
  Assert<Equal<keyof TocsinEvent, keyof Schemas["EventOut"] | "notification">>,
  Assert<Extends<TocsinEvent, Schemas["EventOut"]>>,
  Assert<Equal<keyof IdentifyParams, keyof Schemas["IdentifyIn"]>>,
  Assert<Extends<IdentifyParams, Schemas["IdentifyIn"]>>,
  Assert<Equal<keyof Identity, keyof Schemas["IdentityOut"]>>,
  Assert<Extends<Identity, Schemas["IdentityOut"]>>,
  Assert<Equal<keyof ValidationErrorDetail, keyof Schemas["FieldError"]>>,
  Assert<Extends<ValidationErrorDetail, Schemas["FieldError"]>>,
  Assert<Extends<Schemas["FieldError"], ValidationErrorDetail>>,
  Assert<Equal<keyof ErrorEnvelope, keyof Schemas["ErrorEnvelope"]>>,
  Assert<Extends<ErrorEnvelope, Schemas["ErrorEnvelope"]>>,
  Assert<Equal<keyof SuccessEnvelope<TocsinEvent>, keyof Schemas["Success_EventOut"]>>,
  Assert<Extends<SuccessEnvelope<TocsinEvent>, Schemas["Success_EventOut"]>>,
  Assert<Extends<SuccessEnvelope<Identity>, Schemas["Success_IdentityOut"]>>,
  // The narrowings themselves.
  Assert<Equal<EventCreateParams["metadata"], JsonObject | undefined>>,
  Assert<Equal<TocsinEvent["metadata"], JsonObject>>,
  Assert<Equal<Identity["properties"], JsonObject>>,
  Assert<Equal<SuccessEnvelope<unknown>["success"], true>>,
  Assert<Equal<ErrorEnvelope["success"], false>>,
  // Optional and nullable fields keep their modifiers.
  Assert<Equal<EventCreateParams["userId"], string | null | undefined>>,
  Assert<Equal<TocsinEvent["description"], string | null>>,
];

export function narrowing(body: SuccessEnvelope<TocsinEvent> | ErrorEnvelope, event: TocsinEvent): void {
  // `success` tells the envelopes apart.
  if (body.success) {
    const id: string = body.data.id;
    void id;
  } else {
    const error: string = body.error;
    void error;
  }
  const amount: JsonValue | undefined = event.metadata["amount"];
  void amount;

  // @ts-expect-error metadata holds JSON values only
  const params: EventCreateParams = { channelName: "c", title: "t", metadata: { callback: () => 1 } };
  void params;
}
