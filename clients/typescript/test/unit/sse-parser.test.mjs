// The Server-Sent Events parser: the frames of the WHATWG standard, and the
// same messages wherever the network cuts the bytes.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { SseParser } from "../../dist/esm/sse/parser.js";

const encoder = new TextEncoder();

/** Parses `chunks` (strings or byte arrays) in order; returns the messages and the parser. */
function parse(...chunks) {
  const parser = new SseParser();
  const messages = chunks.flatMap((chunk) => parser.push(typeof chunk === "string" ? encoder.encode(chunk) : chunk));
  return { messages, parser };
}

const msg = (type, data, lastEventId = "") => ({ type, data, lastEventId });

// A stream with every feature the service uses and the standard allows:
// retry, comments, CRLF, lone CR, multi-line data, a multi-byte character
// (💸 is four bytes), an id carried over to the next message, a field
// without a colon, an unknown field, and a BOM at the start.
const STREAM =
  "\uFEFFretry: 3000\n" +
  ": keep-alive\n" +
  "\n" +
  "id: 0190a1b2-0000-7000-8000-000000000001\r\n" +
  "event: event\r\n" +
  'data: {"title":"Payment failed 💸","tags":["eu"]}\r\n' +
  "\r\n" +
  "event: event\r" +
  "data: line one\r" +
  "data:line two\r" +
  "data\r" +
  "unknown: ignored\r" +
  "\r" +
  ": comment between messages\n" +
  "id: 7\n" +
  "data:  two spaces keep one\n" +
  "\n";

const EXPECTED = [
  msg("event", '{"title":"Payment failed 💸","tags":["eu"]}', "0190a1b2-0000-7000-8000-000000000001"),
  msg("event", "line one\nline two\n", "0190a1b2-0000-7000-8000-000000000001"),
  msg("message", " two spaces keep one", "7"),
];

describe("SSE parser", () => {
  test("parses every frame of a complete stream", () => {
    const { messages, parser } = parse(STREAM);
    assert.deepEqual(messages, EXPECTED);
    assert.equal(parser.retry, 3000);
    assert.equal(parser.lastEventId, "7");
  });

  test("gives the same messages when the bytes are split in two at every boundary", () => {
    const bytes = encoder.encode(STREAM);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const { messages, parser } = parse(bytes.slice(0, cut), bytes.slice(cut));
      assert.deepEqual(messages, EXPECTED, `split at byte ${cut}`);
      assert.equal(parser.retry, 3000, `split at byte ${cut}`);
    }
  });

  test("gives the same messages when the bytes come one at a time", () => {
    const bytes = encoder.encode(STREAM);
    const chunks = Array.from(bytes, (_, i) => bytes.slice(i, i + 1));
    assert.deepEqual(parse(...chunks).messages, EXPECTED);
  });

  test("gives the same messages when split at every pair of boundaries", () => {
    const bytes = encoder.encode(STREAM);
    for (let a = 0; a <= bytes.length; a += 3) {
      for (let b = a; b <= bytes.length; b += 5) {
        const { messages } = parse(bytes.slice(0, a), bytes.slice(a, b), bytes.slice(b));
        assert.deepEqual(messages, EXPECTED, `split at bytes ${a} and ${b}`);
      }
    }
  });

  test("dispatches nothing until the blank line that ends a message", () => {
    const parser = new SseParser();
    assert.deepEqual(parser.push(encoder.encode("event: event\ndata: {}\n")), []);
    assert.deepEqual(parser.push(encoder.encode("\n")), [msg("event", "{}")]);
  });

  test("a CR at the end of a chunk and the LF starting the next are one line end", () => {
    const { messages } = parse("data: a\r", "\n", "\r", "\ndata: b\n\n");
    assert.deepEqual(messages, [msg("message", "a"), msg("message", "b")]);
  });

  test("a block without data dispatches nothing, but its id counts", () => {
    const { messages, parser } = parse("id: 41\nevent: event\n\ndata: x\n\n");
    assert.deepEqual(messages, [msg("message", "x", "41")]);
    assert.equal(parser.lastEventId, "41");
  });

  test("an empty id resets the last event id; an id with NUL is ignored", () => {
    assert.equal(parse("id: 5\n\nid\n\n").parser.lastEventId, "");
    assert.equal(parse("id: 5\n\nid: a\0b\n\n").parser.lastEventId, "5");
  });

  test("retry takes only digits", () => {
    assert.equal(parse("retry: 1500\n\nretry: soon\n\nretry: 2.5\n\n").parser.retry, 1500);
    assert.equal(parse(": nothing\n\n").parser.retry, undefined);
  });

  test("end() drops a message that was cut short, and the next one parses cleanly", () => {
    const parser = new SseParser();
    assert.deepEqual(parser.push(encoder.encode("id: 1\ndata: complete\n\ndata: cut sh")), [msg("message", "complete", "1")]);
    parser.end();
    assert.deepEqual(parser.push(encoder.encode("data: next\n\n")), [msg("message", "next", "1")]);
  });

  test("the id of a message cut short does not count, before or after end()", () => {
    const parser = new SseParser();
    parser.push(encoder.encode("id: 1\ndata: a\n\nid: 2\ndata: cut"));
    assert.equal(parser.lastEventId, "1");
    parser.end();
    assert.equal(parser.lastEventId, "1");
    assert.deepEqual(parser.push(encoder.encode("data: b\n\n")), [msg("message", "b", "1")]);
  });

  test("starts from the last event ID it is given", () => {
    const parser = new SseParser("e0");
    assert.equal(parser.lastEventId, "e0");
    assert.deepEqual(parser.push(encoder.encode("data: x\n\n")), [msg("message", "x", "e0")]);
  });

  test("a multi-byte character cut across chunks decodes whole", () => {
    const bytes = encoder.encode("data: 💸€\n\n");
    for (let cut = 6; cut < 13; cut++) {
      assert.deepEqual(parse(bytes.slice(0, cut), bytes.slice(cut)).messages, [msg("message", "💸€")], `cut ${cut}`);
    }
  });
});
