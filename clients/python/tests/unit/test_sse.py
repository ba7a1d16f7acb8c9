"""The Server-Sent Events parser: the same messages wherever the network
cut the stream."""

from __future__ import annotations

from tocsin._sse import SseMessage, SseParser

STREAM = (
    "\ufeff: keep-alive\r\n"
    "id: 1\r\nevent: event\r\ndata: {\"a\":\r\ndata: \"é\"}\r\n\r\n"
    "retry: 2500\n"
    "id: 2\nevent: event\ndata: two\n\n"
    "data: no type\rid: 3\r\r"
    "id: 4\n\n"
    "id: 5\ndata: cut off"
).encode()

EXPECTED = [
    SseMessage(type="event", data='{"a":\n"é"}', last_event_id="1"),
    SseMessage(type="event", data="two", last_event_id="2"),
    SseMessage(type="message", data="no type", last_event_id="3"),
]


def parse_in_chunks(size: int) -> SseParser:
    parser = SseParser()
    messages = []
    for start in range(0, len(STREAM), size):
        messages += parser.push(STREAM[start : start + size])
    assert messages == EXPECTED, f"chunks of {size}"
    return parser


def test_messages_do_not_depend_on_where_the_stream_was_cut() -> None:
    for size in (1, 2, 3, 5, 7, len(STREAM)):
        parser = parse_in_chunks(size)
        # An id-only block counts; the id of a message cut off does not.
        assert parser.last_event_id == "4"
        assert parser.retry == 2.5


def test_a_message_cut_off_by_the_end_of_a_connection_is_dropped() -> None:
    parser = parse_in_chunks(len(STREAM))
    parser.end()
    assert parser.push(b"\n") == []  # the rest of "id: 5 / data: cut off" never completes
    assert parser.last_event_id == "4"


def test_the_given_last_event_id_is_kept_until_a_new_one_arrives() -> None:
    parser = SseParser("41")
    assert parser.last_event_id == "41"
    assert parser.push(b"data: x\n\n") == [SseMessage(type="message", data="x", last_event_id="41")]


def test_an_id_with_nul_is_ignored_and_a_bad_retry_too() -> None:
    parser = SseParser()
    parser.push(b"id: a\x00b\nretry: soon\ndata: x\n\n")
    assert parser.last_event_id == ""
    assert parser.retry is None
