// Parsing a Server-Sent Events byte stream into messages, as the WHATWG HTML
// standard's "event stream interpretation" says, chunk by chunk.
//
// Browsers' EventSource cannot send an Authorization header, so the client
// reads the stream with fetch and parses it here. The network splits the
// stream anywhere: inside a line, between the CR and LF of a CRLF, inside a
// multi-byte UTF-8 character. The parser keeps whatever is incomplete until
// the next chunk, so the messages never depend on where the cuts fell.

/** One dispatched message. */
export interface SseMessage {
  /** The `event:` field, or `"message"` when the message had none. */
  type: string;
  /** The `data:` lines joined with `\n`. */
  data: string;
  /** The last event ID at dispatch time (the latest `id:` field seen so far, possibly from an earlier message); `""` if none. */
  lastEventId: string;
}

const LF = 0x0a;
const CR = 0x0d;

export class SseParser {
  // TextDecoder in streaming mode holds back a multi-byte character cut in
  // two, and (ignoreBOM false) drops the byte order mark the standard allows
  // at the start of the stream.
  readonly #decoder = new TextDecoder("utf-8");
  /** Text of the line being received (no terminator yet). */
  #line = "";
  /** The previous chunk ended with CR: an LF starting the next one belongs to that CRLF. */
  #skipLf = false;

  #type = "";
  #data = "";
  #hasData = false;
  /** Set by `id:` lines; becomes the last event ID only when its message is complete. */
  #idBuffer = "";
  #lastEventId = "";
  #retry: number | undefined;

  /** `lastEventId`: resume after this ID (what a reconnection sends in Last-Event-ID). */
  constructor(lastEventId = "") {
    this.#idBuffer = lastEventId;
    this.#lastEventId = lastEventId;
  }

  /** The latest valid `retry:` value in milliseconds, or undefined if the server sent none. */
  get retry(): number | undefined {
    return this.#retry;
  }

  /**
   * The last event ID: that of the latest complete message (or id-only
   * block), kept across messages and connections as in EventSource. An `id:`
   * of a message cut off by a dropped connection does not count, so a
   * reconnection asks the server for that message again.
   */
  get lastEventId(): string {
    return this.#lastEventId;
  }

  /** Feeds the next bytes of the stream; returns the messages they completed, in order. */
  push(chunk: Uint8Array): SseMessage[] {
    return this.#pushText(this.#decoder.decode(chunk, { stream: true }));
  }

  /**
   * The stream ended. A message without its closing blank line is discarded,
   * as the standard says: it may be cut short.
   */
  end(): void {
    this.#decoder.decode();
    this.#idBuffer = this.#lastEventId;
    this.#line = "";
    this.#skipLf = false;
    this.#type = "";
    this.#data = "";
    this.#hasData = false;
  }

  #pushText(text: string): SseMessage[] {
    const messages: SseMessage[] = [];
    let start = 0;
    if (this.#skipLf && text.length > 0) {
      if (text.charCodeAt(0) === LF) start = 1;
      this.#skipLf = false;
    }
    for (let i = start; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code !== LF && code !== CR) continue;
      const message = this.#processLine(this.#line + text.slice(start, i));
      this.#line = "";
      if (message) messages.push(message);
      if (code === CR) {
        if (i + 1 === text.length) this.#skipLf = true;
        else if (text.charCodeAt(i + 1) === LF) i++;
      }
      start = i + 1;
    }
    this.#line += text.slice(start);
    return messages;
  }

  /** Interprets one complete line; returns the message a blank line dispatches. */
  #processLine(line: string): SseMessage | undefined {
    if (line === "") return this.#dispatch();
    if (line.charCodeAt(0) === 0x3a) return undefined; // ":" starts a comment (the keep-alive)

    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 0x20) value = value.slice(1); // one leading space belongs to the syntax

    switch (field) {
      case "event":
        this.#type = value;
        break;
      case "data":
        this.#data = this.#hasData ? `${this.#data}\n${value}` : value;
        this.#hasData = true;
        break;
      case "id":
        // An ID with NUL is ignored: it could not be sent back in Last-Event-ID.
        if (!value.includes("\0")) this.#idBuffer = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) this.#retry = Number(value);
        break;
      default:
        // Unknown fields are ignored, so servers can add some.
        break;
    }
    return undefined;
  }

  #dispatch(): SseMessage | undefined {
    this.#lastEventId = this.#idBuffer;
    const message: SseMessage | undefined = this.#hasData
      ? { type: this.#type || "message", data: this.#data, lastEventId: this.#lastEventId }
      : undefined; // a block without data lines dispatches nothing, but its id: still counts
    this.#type = "";
    this.#data = "";
    this.#hasData = false;
    return message;
  }
}
