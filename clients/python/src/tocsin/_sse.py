"""Parsing a Server-Sent Events byte stream into messages, chunk by chunk, as
the WHATWG HTML standard's "event stream interpretation" says.

The network cuts the stream anywhere: inside a line, between the CR and LF of
a CRLF, inside a multi-byte UTF-8 character. The parser keeps whatever is
incomplete until the next chunk, so the messages never depend on where the
cuts fell. It does no I/O, so the sync and the async stream share it.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import List, Optional


@dataclass(frozen=True)
class SseMessage:
    """One dispatched message."""

    #: The `event:` field, or "message" when the message had none.
    type: str
    #: The `data:` lines joined with "\n".
    data: str
    #: The last event id at dispatch time ("" if none yet).
    last_event_id: str


class SseParser:
    """Feed it bytes with `push`; it returns the messages they completed."""

    def __init__(self, last_event_id: str = "") -> None:
        # Holds back a multi-byte character cut in two; "utf-8-sig" would also
        # drop a byte order mark, which the standard allows only at the start.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._at_start = True
        self._line = ""
        self._skip_lf = False
        self._type = ""
        self._data: List[str] = []
        self._has_data = False
        # Set by `id:`; becomes the last event id only when its message is
        # complete, so a message cut off by a drop is asked for again.
        self._id_buffer = last_event_id
        self.last_event_id = last_event_id
        #: The latest valid `retry:` value, in seconds; None until the server sends one.
        self.retry: Optional[float] = None

    def push(self, chunk: bytes) -> List[SseMessage]:
        text = self._decoder.decode(chunk)
        if self._at_start and text:
            self._at_start = False
            if text.startswith("\ufeff"):
                text = text[1:]
        return self._push_text(text)

    def end(self) -> None:
        """The connection ended. A message without its closing blank line is
        dropped, as the standard says: it may be cut short."""
        self._decoder.reset()
        self._at_start = True
        self._line = ""
        self._skip_lf = False
        self._type = ""
        self._data = []
        self._has_data = False
        self._id_buffer = self.last_event_id

    def _push_text(self, text: str) -> List[SseMessage]:
        messages: List[SseMessage] = []
        start = 0
        if self._skip_lf and text:
            if text[0] == "\n":
                start = 1
            self._skip_lf = False
        i = start
        while i < len(text):
            char = text[i]
            if char in "\r\n":
                message = self._process_line(self._line + text[start:i])
                self._line = ""
                if message is not None:
                    messages.append(message)
                if char == "\r":
                    if i + 1 == len(text):
                        self._skip_lf = True
                    elif text[i + 1] == "\n":
                        i += 1
                start = i + 1
            i += 1
        self._line += text[start:]
        return messages

    def _process_line(self, line: str) -> Optional[SseMessage]:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: the service's keep-alive
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._type = value
        elif field == "data":
            self._data.append(value)
            self._has_data = True
        elif field == "id":
            # An id with NUL could not be sent back in Last-Event-ID.
            if "\0" not in value:
                self._id_buffer = value
        elif field == "retry":
            if value.isascii() and value.isdigit():
                self.retry = int(value) / 1000
        # Unknown fields are ignored, so servers can add some.
        return None

    def _dispatch(self) -> Optional[SseMessage]:
        self.last_event_id = self._id_buffer
        message = (
            SseMessage(
                type=self._type or "message",
                data="\n".join(self._data),
                last_event_id=self.last_event_id,
            )
            if self._has_data
            else None  # a block without data dispatches nothing; its id still counts
        )
        self._type = ""
        self._data = []
        self._has_data = False
        return message
