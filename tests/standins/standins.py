"""Local stand-ins for the services Tocsin's notifier delivers to.

One process, two loopback listeners:

- HTTP: a Standard Webhooks receiver, a Slack incoming webhook, a Discord
  webhook, the Telegram Bot API's sendMessage and an ntfy server, chosen by
  path prefix, plus a control API under /_control/ for the tests.
- SMTP (aiosmtpd): records every mail, parsed with the standard library's
  email package.

Each stand-in checks what the real service checks (signatures, documented
limits, markup) and answers as the real service answers (status, content
type, body shape), so the notifier's classification of answers is exercised
honestly. Everything received is recorded, accepted or not, for the tests to
read back through GET /_control/received. See README.md beside this file.

Started as `.tools/standins/bin/python tests/standins/standins.py`, it prints
`{"http": <port>, "smtp": <port>}` on one line when ready, and runs until its
standard input closes (so a test process that dies takes it along) or it gets
SIGTERM. Nothing listens beyond 127.0.0.1 and nothing reaches out.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import datetime
import email
import email.header
import email.policy
import email.utils
import html.parser
import http
import json
import logging
import math
import os
import re
import secrets
import signal
import sys
import threading
import time
import traceback
import urllib.parse
from typing import Any, Optional

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

HOST = "127.0.0.1"
# Far above any limit a stand-in checks, so an oversized body is read whole
# and answered as the service would (413, 400) rather than cut off.
MAX_BODY = 32 * 1024 * 1024
MAX_HEAD = 1024 * 1024
VERBOSE = os.environ.get("STANDINS_VERBOSE") == "1"


def log(message: str) -> None:
    # stdout carries only the ready line; the test reads nothing after it.
    if VERBOSE:
        print(f"standins: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# HTTP/1.1, just enough of it: Content-Length and chunked bodies,
# keep-alive, Expect: 100-continue.


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Request:
    def __init__(self, method: str, target: str, version: str,
                 headers: list[tuple[str, str]], body: bytes):
        self.method = method
        self.target = target
        self.version = version
        self.header_list = headers
        self.body = body
        path, _, query = target.partition("?")
        self.path = path
        self.query_string = query
        self.query = urllib.parse.parse_qs(query, keep_blank_values=True)

    def header(self, name: str) -> Optional[str]:
        name = name.lower()
        values = [v for k, v in self.header_list if k == name]
        return ", ".join(values) if values else None

    def headers(self) -> dict[str, str]:
        merged: dict[str, str] = {}
        for k, v in self.header_list:
            merged[k] = f"{merged[k]}, {v}" if k in merged else v
        return merged

    def param(self, *names: str) -> Optional[str]:
        """The first of `names` given as a header, else as a query parameter
        (ntfy reads its parameters so)."""
        for name in names:
            value = self.header(name)
            if value is not None:
                return value
        for name in names:
            if name in self.query:
                return self.query[name][0]
        return None

    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    def keep_alive(self) -> bool:
        connection = (self.header("connection") or "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class Response:
    def __init__(self, status: int, body: bytes = b"", content_type: Optional[str] = None,
                 headers: Optional[list[tuple[str, str]]] = None):
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or []

    def encode(self, keep_alive: bool) -> bytes:
        try:
            reason = http.HTTPStatus(self.status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [f"HTTP/1.1 {self.status} {reason}",
                 f"Date: {email.utils.formatdate(usegmt=True)}",
                 f"Connection: {'keep-alive' if keep_alive else 'close'}"]
        if self.content_type:
            lines.append(f"Content-Type: {self.content_type}")
        # RFC 9110 §8.6: a 204 carries neither a body nor Content-Length.
        body = b"" if self.status == 204 else self.body
        if self.status != 204:
            lines.append(f"Content-Length: {len(body)}")
        lines += [f"{k}: {v}" for k, v in self.headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def json_response(status: int, value: Any, headers: Optional[list[tuple[str, str]]] = None,
                  content_type: str = "application/json", newline: bool = False) -> Response:
    body = json.dumps(value, separators=(",", ":")).encode()
    return Response(status, body + (b"\n" if newline else b""), content_type, headers)


def text_response(status: int, text: str, content_type: str = "text/plain; charset=utf-8",
                  headers: Optional[list[tuple[str, str]]] = None) -> Response:
    return Response(status, text.encode(), content_type, headers)


async def read_request(reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> Optional[Request]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial.strip():
            raise BadRequest(400, "connection closed inside the request head")
        return None
    except asyncio.LimitOverrunError:
        raise BadRequest(431, "request head too large")
    lines = head[:-4].lstrip(b"\r\n").split(b"\r\n")
    try:
        method, target, version = lines[0].decode("latin-1").split(" ")
    except ValueError:
        raise BadRequest(400, f"malformed request line {lines[0]!r}")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(505, f"unsupported version {version}")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise BadRequest(400, f"malformed header line {line!r}")
        headers.append((name.decode("latin-1").lower(),
                        value.strip().decode("utf-8", "replace")))
    request = Request(method, target, version, headers, b"")

    if (request.header("expect") or "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    if "chunked" in (request.header("transfer-encoding") or "").lower():
        chunks = []
        size_total = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise BadRequest(400, "malformed chunk size")
            if size == 0:
                # Trailer fields, up to the empty line.
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            size_total += size
            if size_total > MAX_BODY:
                raise BadRequest(413, "body too large for the stand-ins")
            chunks.append((await reader.readexactly(size + 2))[:-2])
        request.body = b"".join(chunks)
    elif request.header("content-length") is not None:
        try:
            length = int(request.header("content-length") or "")
        except ValueError:
            raise BadRequest(400, "malformed Content-Length")
        if length < 0 or length > MAX_BODY:
            raise BadRequest(413, "body too large for the stand-ins")
        request.body = await reader.readexactly(length)
    return request


# ---------------------------------------------------------------------------
# What the tests set up and what the stand-ins saw.


class State:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.webhook_secrets: dict[str, str] = {}
        self.scripts: dict[str, collections.deque[dict[str, Any]]] = {}
        self.tokens: dict[str, str] = {}
        self.telegram_message_ids: dict[str, int] = collections.defaultdict(int)

    def record(self, kind: str, path: str, method: str, **fields: Any) -> dict[str, Any]:
        record = {
            "seq": len(self.records),
            "kind": kind,
            "path": path,
            "method": method,
            "received_at": time.time(),
            "accepted": False,
            "scripted": False,
            "status": None,
            "problem": None,
            "warnings": [],
        }
        record.update(fields)
        self.records.append(record)
        return record

    def take_script(self, path: str, stage: Optional[str] = None) -> Optional[dict[str, Any]]:
        """The next scripted answer for `path`: the longest registered prefix
        with answers left wins, so a test can script one destination among
        several of a kind. With `stage` (SMTP), only an answer meant for it."""
        best = None
        for prefix, queue in self.scripts.items():
            if queue and path.startswith(prefix) and (best is None or len(prefix) > len(best)):
                best = prefix
        if best is None:
            return None
        entry = self.scripts[best][0]
        if stage is not None and entry.get("at", "data") != stage:
            return None
        return self.scripts[best].popleft()

    def expected_token(self, path: str) -> Optional[str]:
        best = None
        for prefix in self.tokens:
            if path.startswith(prefix) and (best is None or len(prefix) > len(best)):
                best = prefix
        return None if best is None else self.tokens[best]


def record_http(state: State, kind: str, request: Request) -> dict[str, Any]:
    if "json" in request.content_type():
        try:
            body: Any = json.loads(request.body)
        except ValueError:
            body = request.text()
    else:
        body = request.text()
    return state.record(kind, request.path, request.method, query=request.query_string,
                        headers=request.headers(), body=body)


def reject(record: dict[str, Any], problem: str, response: Response) -> Response:
    record["problem"] = problem
    log(f"rejected {record['method']} {record['path']}: {problem}")
    return response


def accept(record: dict[str, Any], response: Response) -> Response:
    record["accepted"] = True
    return response


def retry_after_seconds(entry: dict[str, Any]) -> float:
    return float(entry.get("retry_after", 1))


# ---------------------------------------------------------------------------
# The services. Each has its own shape of error answer, used both for what
# its checks reject and for what a test scripts.


class Service:
    kind = ""

    def __init__(self, state: State):
        self.state = state

    def error(self, status: int, entry: dict[str, Any]) -> Response:
        raise NotImplementedError

    async def handle(self, request: Request, record: dict[str, Any]) -> Response:
        raise NotImplementedError


class WebhookReceiver(Service):
    """A receiver of Standard Webhooks, verifying with the reference library."""

    kind = "webhook"

    def error(self, status: int, entry: dict[str, Any]) -> Response:
        headers = []
        if status == 429 or "retry_after" in entry:
            headers.append(("Retry-After", str(math.ceil(retry_after_seconds(entry)))))
        return json_response(status, {"error": http.HTTPStatus(status).phrase}, headers)

    async def handle(self, request: Request, record: dict[str, Any]) -> Response:
        name = request.path[len("/webhook/"):]
        record["name"] = name
        record["webhook_id"] = request.header("webhook-id")
        record["webhook_timestamp"] = request.header("webhook-timestamp")
        record["webhook_signature"] = request.header("webhook-signature")
        if request.method != "POST":
            return reject(record, f"method {request.method}, not POST", self.error(405, {}))
        secret = self.state.webhook_secrets.get(name)
        if secret is None:
            return reject(record, f"no secret registered for webhook {name!r} "
                          "(POST /_control/webhook-secret)", self.error(404, {}))
        try:
            payload_text = request.body.decode("utf-8")
        except UnicodeDecodeError:
            return reject(record, "body is not UTF-8", self.error(400, {}))
        try:
            Webhook(secret).verify(payload_text, request.headers(), json_parse=False)
        except WebhookVerificationError as e:
            return reject(record, f"signature: {e}", self.error(401, {}))
        except Exception as e:
            # The library meets a malformed header with whatever the parsing raised.
            return reject(record, f"signature: malformed webhook-signature (want space-separated "
                          f"'v1,<base64>'): {type(e).__name__}: {e}", self.error(401, {}))
        if request.content_type() != "application/json":
            return reject(record, f"Content-Type {request.content_type()!r}, "
                          "not application/json", self.error(400, {}))
        try:
            payload = json.loads(payload_text)
        except ValueError as e:
            return reject(record, f"body is not JSON: {e}", self.error(400, {}))
        record["payload"] = payload
        problem = self.check_payload(payload)
        if problem:
            return reject(record, problem, self.error(400, {}))
        return accept(record, Response(204))

    @staticmethod
    def check_payload(payload: Any) -> Optional[str]:
        # The Standard Webhooks payload structure: type, timestamp, data.
        if not isinstance(payload, dict):
            return "payload is not a JSON object"
        if not isinstance(payload.get("type"), str) or not payload["type"]:
            return "payload.type is not a non-empty string"
        if not isinstance(payload.get("timestamp"), str):
            return "payload.timestamp is not a string"
        try:
            datetime.datetime.fromisoformat(payload["timestamp"])
        except ValueError:
            return f"payload.timestamp {payload['timestamp']!r} is not ISO 8601"
        if not isinstance(payload.get("data"), dict):
            return "payload.data is not a JSON object"
        return None


# Slack's Block Kit limits (api.slack.com/reference/block-kit/blocks).
SLACK_BLOCK_TYPES = {"actions", "context", "divider", "file", "header", "image",
                     "input", "markdown", "rich_text", "section", "video", "table"}
SLACK_BLOCK_KEYS = {
    "header": {"type", "text", "block_id"},
    "section": {"type", "text", "fields", "accessory", "block_id", "expand"},
    "context": {"type", "elements", "block_id"},
    "divider": {"type", "block_id"},
    "actions": {"type", "elements", "block_id"},
    "image": {"type", "image_url", "slack_file", "alt_text", "title", "block_id"},
    "markdown": {"type", "text", "block_id"},
}
# A `<` in mrkdwn opens a link or mention; anything else is swallowed, which
# is how unescaped text goes missing in Slack.
SLACK_CONTROL = re.compile(r"<(?:https?://|mailto:|tel:|!|@|#)")


class SlackWebhook(Service):
    """A Slack incoming webhook (api.slack.com/messaging/webhooks)."""

    kind = "slack"
    ERRORS = {400: "invalid_payload", 403: "action_prohibited", 404: "no_service",
              410: "channel_is_archived", 429: "rate_limited", 500: "rollup_error"}

    def error(self, status: int, entry: dict[str, Any], code: Optional[str] = None) -> Response:
        headers = []
        if status == 429:
            headers.append(("Retry-After", str(math.ceil(retry_after_seconds(entry)))))
        code = code or self.ERRORS.get(status) or http.HTTPStatus(status).phrase.lower().replace(" ", "_")
        # Slack answers its webhooks in plain words served as text/html.
        return text_response(status, code, "text/html", headers)

    async def handle(self, request: Request, record: dict[str, Any]) -> Response:
        parts = request.path[len("/slack/services/"):].split("/")
        if not request.path.startswith("/slack/services/") or len(parts) != 3 or not all(parts):
            return reject(record, "not a webhook URL: /slack/services/<T>/<B>/<token>",
                          self.error(404, {}))
        expected = self.state.expected_token(request.path)
        if expected is not None and parts[2] != expected and "/".join(parts) != expected:
            return reject(record, "unknown webhook token", self.error(404, {}))
        if request.method != "POST":
            return reject(record, f"method {request.method}, not POST",
                          self.error(400, {}, "invalid_payload"))
        # Slack takes the JSON as the body, or form-encoded as `payload=`.
        try:
            if request.content_type() == "application/x-www-form-urlencoded":
                record["form"] = "form"
                form = urllib.parse.parse_qs(request.text())
                message = json.loads(form["payload"][0])
            else:
                record["form"] = "json"
                message = json.loads(request.body)
        except (KeyError, ValueError) as e:
            return reject(record, f"body is not a JSON payload: {e}", self.error(400, {}, "invalid_payload"))
        record["message"] = message
        if not isinstance(message, dict):
            return reject(record, "payload is not a JSON object", self.error(400, {}, "invalid_payload"))
        text = message.get("text")
        if not isinstance(text, str) or not text.strip():
            # Slack's own answer to a missing text; it lets a message with
            # blocks go without, but the text is the notification's fallback.
            return reject(record, "no text (the fallback for notifications)",
                          self.error(400, {}, "no_text"))
        self.warn_mrkdwn(record, "text", text)
        if len(text) > 40000:
            record["warnings"].append(f"text is {len(text)} characters: Slack truncates past 40000")
        attachments = message.get("attachments")
        if attachments is not None and (not isinstance(attachments, list) or len(attachments) > 100):
            return reject(record, "attachments is not a list of at most 100",
                          self.error(400, {}, "too_many_attachments"))
        if "blocks" in message:
            problem = self.check_blocks(message["blocks"], record)
            if problem:
                return reject(record, problem, self.error(400, {}, "invalid_blocks"))
        return accept(record, text_response(200, "ok", "text/html"))

    def warn_mrkdwn(self, record: dict[str, Any], where: str, text: str) -> None:
        for match in re.finditer("<", text):
            if not SLACK_CONTROL.match(text, match.start()):
                record["warnings"].append(
                    f"{where}: unescaped '<' at {match.start()} (Slack hides what follows)")
                break

    def text_object(self, obj: Any, where: str, record: dict[str, Any],
                    types: tuple[str, ...] = ("plain_text", "mrkdwn"),
                    max_len: Optional[int] = None) -> Optional[str]:
        if not isinstance(obj, dict):
            return f"{where} is not a text object"
        kind = obj.get("type")
        if kind not in types:
            return f"{where}.type is {kind!r}, not one of {', '.join(types)}"
        extra = set(obj) - {"type", "text", "emoji", "verbatim"}
        if extra:
            return f"{where} has unknown fields {sorted(extra)}"
        if "emoji" in obj and kind != "plain_text":
            return f"{where}.emoji is only for plain_text"
        if "verbatim" in obj and kind != "mrkdwn":
            return f"{where}.verbatim is only for mrkdwn"
        text = obj.get("text")
        if not isinstance(text, str) or not text:
            return f"{where}.text must be more than 0 characters"
        if max_len is not None and len(text) > max_len:
            return f"{where}.text is {len(text)} characters, more than {max_len}"
        if kind == "mrkdwn":
            self.warn_mrkdwn(record, where, text)
        return None

    def check_blocks(self, blocks: Any, record: dict[str, Any]) -> Optional[str]:
        if not isinstance(blocks, list):
            return "blocks is not a list"
        if len(blocks) > 50:
            return f"{len(blocks)} blocks, more than 50"
        block_ids = set()
        for i, block in enumerate(blocks):
            where = f"blocks[{i}]"
            if not isinstance(block, dict):
                return f"{where} is not an object"
            kind = block.get("type")
            if kind not in SLACK_BLOCK_TYPES:
                return f"{where}.type {kind!r} is not a block type"
            if kind in SLACK_BLOCK_KEYS:
                extra = set(block) - SLACK_BLOCK_KEYS[kind]
                if extra:
                    return f"{where} ({kind}) has unknown fields {sorted(extra)}"
            block_id = block.get("block_id")
            if block_id is not None:
                if not isinstance(block_id, str) or len(block_id) > 255:
                    return f"{where}.block_id is not a string of at most 255"
                if block_id in block_ids:
                    return f"{where}.block_id {block_id!r} repeats"
                block_ids.add(block_id)
            problem = self.check_block(kind, block, where, record)
            if problem:
                return problem
        return None

    def check_block(self, kind: str, block: dict[str, Any], where: str,
                    record: dict[str, Any]) -> Optional[str]:
        if kind == "header":
            return self.text_object(block.get("text"), f"{where}.text", record, ("plain_text",), 150)
        if kind == "section":
            if "text" not in block and "fields" not in block:
                return f"{where} (section) needs text or fields"
            if "text" in block:
                problem = self.text_object(block["text"], f"{where}.text", record, max_len=3000)
                if problem:
                    return problem
            if "fields" in block:
                fields = block["fields"]
                if not isinstance(fields, list) or not 1 <= len(fields) <= 10:
                    return f"{where}.fields is not a list of 1 to 10"
                for j, field in enumerate(fields):
                    problem = self.text_object(field, f"{where}.fields[{j}]", record, max_len=2000)
                    if problem:
                        return problem
            if "accessory" in block:
                return self.check_element(block["accessory"], f"{where}.accessory", record)
            return None
        if kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 10:
                return f"{where}.elements is not a list of 1 to 10"
            for j, element in enumerate(elements):
                if isinstance(element, dict) and element.get("type") == "image":
                    problem = self.check_image(element, f"{where}.elements[{j}]")
                else:
                    problem = self.text_object(element, f"{where}.elements[{j}]", record)
                if problem:
                    return problem
            return None
        if kind == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 25:
                return f"{where}.elements is not a list of 1 to 25"
            for j, element in enumerate(elements):
                problem = self.check_element(element, f"{where}.elements[{j}]", record)
                if problem:
                    return problem
            return None
        if kind == "image":
            problem = self.check_image(block, where)
            if problem is None and "title" in block:
                problem = self.text_object(block["title"], f"{where}.title", record, ("plain_text",), 2000)
            return problem
        if kind == "markdown":
            text = block.get("text")
            if not isinstance(text, str) or not text or len(text) > 12000:
                return f"{where}.text is not a string of 1 to 12000"
        return None

    @staticmethod
    def check_image(image: dict[str, Any], where: str) -> Optional[str]:
        url = image.get("image_url")
        if "slack_file" not in image and (not isinstance(url, str) or not url or len(url) > 3000):
            return f"{where}.image_url is not a URL of at most 3000"
        alt = image.get("alt_text")
        if not isinstance(alt, str) or len(alt) > 2000:
            return f"{where}.alt_text is not a string of at most 2000"
        return None

    def check_element(self, element: Any, where: str, record: dict[str, Any]) -> Optional[str]:
        if not isinstance(element, dict) or not isinstance(element.get("type"), str):
            return f"{where} is not an element"
        if element["type"] == "image":
            return self.check_image(element, where)
        if element["type"] != "button":
            return None
        extra = set(element) - {"type", "text", "action_id", "url", "value", "style",
                                "confirm", "accessibility_label"}
        if extra:
            return f"{where} (button) has unknown fields {sorted(extra)}"
        problem = self.text_object(element.get("text"), f"{where}.text", record, ("plain_text",), 75)
        if problem:
            return problem
        for key, limit in (("url", 3000), ("action_id", 255), ("value", 2000)):
            if key in element and (not isinstance(element[key], str) or len(element[key]) > limit):
                return f"{where}.{key} is not a string of at most {limit}"
        if element.get("style", "primary") not in ("primary", "danger"):
            return f"{where}.style is not primary or danger"
        return None


class DiscordErrors:
    """Discord's nested `errors` object of a 50035 Invalid Form Body."""

    def __init__(self) -> None:
        self.tree: dict[str, Any] = {}
        self.flat: list[str] = []

    def add(self, path: list[Any], code: str, message: str) -> None:
        node = self.tree
        for part in path:
            node = node.setdefault(str(part), {})
        node.setdefault("_errors", []).append({"code": code, "message": message})
        self.flat.append(f"{'.'.join(map(str, path))}: {message}")

    def max_length(self, path: list[Any], value: Any, limit: int, required: bool = False) -> None:
        if value is None:
            if required:
                self.add(path, "BASE_TYPE_REQUIRED", "This field is required")
            return
        if not isinstance(value, str):
            self.add(path, "STRING_TYPE_CONVERT", "Could not interpret value as string.")
        elif required and not value.strip():
            self.add(path, "BASE_TYPE_REQUIRED", "This field is required")
        elif len(value) > limit:
            self.add(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")


def is_url(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    parts = urllib.parse.urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


class DiscordWebhook(Service):
    """A Discord webhook (discord.com/developers/docs/resources/webhook)."""

    kind = "discord"
    PATH = re.compile(r"^/discord/api(?:/v\d+)?/webhooks/([^/]+)/([^/]+)$")

    def error(self, status: int, entry: dict[str, Any]) -> Response:
        if status == 429:
            retry_after = retry_after_seconds(entry)
            # The body's seconds are a float; the header rounds up, as Discord's does.
            return json_response(429, {"message": "You are being rate limited.",
                                       "retry_after": retry_after, "global": False}, [
                ("Retry-After", str(math.ceil(retry_after))),
                ("X-RateLimit-Limit", "5"),
                ("X-RateLimit-Remaining", "0"),
                ("X-RateLimit-Reset-After", f"{retry_after:.3f}"),
                ("X-RateLimit-Scope", "shared"),
            ])
        if status == 400:
            return json_response(400, {"code": 50035, "message": "Invalid Form Body", "errors": {}})
        if status == 403:
            return json_response(403, {"message": "Missing Permissions", "code": 50013})
        if status == 404:
            return json_response(404, {"message": "Unknown Webhook", "code": 10015})
        return json_response(status, {"message": f"{status}: {http.HTTPStatus(status).phrase}", "code": 0})

    async def handle(self, request: Request, record: dict[str, Any]) -> Response:
        match = self.PATH.match(request.path)
        if not match or not match.group(1).isdigit():
            return reject(record, "not a webhook URL: /discord/api/webhooks/<id>/<token>",
                          self.error(404, {}))
        record["webhook_id"] = match.group(1)
        expected = self.state.expected_token(request.path)
        if expected is not None and match.group(2) != expected:
            return reject(record, "wrong webhook token", json_response(
                401, {"message": "Invalid Webhook Token", "code": 50027}))
        if request.method != "POST":
            return reject(record, f"method {request.method}, not POST",
                          json_response(405, {"message": "405: Method Not Allowed", "code": 0}))
        if request.content_type() != "application/json":
            return reject(record, f"Content-Type {request.content_type()!r}, not application/json",
                          json_response(400, {"message": "Cannot send an empty message", "code": 50006}))
        try:
            message = json.loads(request.body)
        except ValueError:
            return reject(record, "body is not JSON", json_response(
                400, {"code": 50109, "message": "The request body contains invalid JSON."}))
        record["message"] = message
        if not isinstance(message, dict):
            return reject(record, "payload is not a JSON object", json_response(
                400, {"code": 50109, "message": "The request body contains invalid JSON."}))
        errors = self.check_message(message)
        if errors.flat:
            return reject(record, "; ".join(errors.flat), json_response(
                400, {"code": 50035, "errors": errors.tree, "message": "Invalid Form Body"}))
        content = message.get("content")
        if not (isinstance(content, str) and content.strip()) and not message.get("embeds") \
                and not message.get("components") and not message.get("poll"):
            return reject(record, "empty message (no content, no embeds)", json_response(
                400, {"message": "Cannot send an empty message", "code": 50006}))
        ok_headers = [("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "4"),
                      ("X-RateLimit-Reset-After", "1.000")]
        # Without ?wait=true Discord answers before the message exists.
        if request.query.get("wait", ["false"])[0].lower() != "true":
            return accept(record, Response(204, headers=ok_headers))
        return accept(record, json_response(200, {
            "id": str(int(time.time() * 1000) << 22),
            "type": 0,
            "content": content or "",
            "channel_id": "1",
            "embeds": message.get("embeds") or [],
            "webhook_id": match.group(1),
            "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        }, ok_headers))

    @staticmethod
    def check_message(message: dict[str, Any]) -> DiscordErrors:
        errors = DiscordErrors()
        errors.max_length(["content"], message.get("content"), 2000)
        username = message.get("username")
        if username is not None and (not isinstance(username, str) or not 1 <= len(username) <= 80):
            errors.add(["username"], "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 80 in length.")
        if "avatar_url" in message and not is_url(message["avatar_url"]):
            errors.add(["avatar_url"], "URL_TYPE_INVALID_URL", "Not a well formed URL.")
        embeds = message.get("embeds")
        if embeds is None:
            return errors
        if not isinstance(embeds, list):
            errors.add(["embeds"], "LIST_TYPE_CONVERT", "Must be an array.")
            return errors
        if len(embeds) > 10:
            errors.add(["embeds"], "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
        total = 0
        for i, embed in enumerate(embeds):
            at: list[Any] = ["embeds", i]
            if not isinstance(embed, dict):
                errors.add(at, "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType")
                continue
            errors.max_length(at + ["title"], embed.get("title"), 256)
            errors.max_length(at + ["description"], embed.get("description"), 4096)
            for key in ("title", "description"):
                if isinstance(embed.get(key), str):
                    total += len(embed[key])
            if "url" in embed and not is_url(embed["url"]):
                errors.add(at + ["url"], "URL_TYPE_INVALID_URL", "Not a well formed URL.")
            if "color" in embed:
                color = embed["color"]
                if not isinstance(color, int) or isinstance(color, bool):
                    errors.add(at + ["color"], "NUMBER_TYPE_COERCE", f'Value "{color}" is not int.')
                elif color < 0:
                    errors.add(at + ["color"], "NUMBER_TYPE_MIN",
                               "int value should be greater than or equal to 0.")
                elif color > 0xFFFFFF:
                    errors.add(at + ["color"], "NUMBER_TYPE_MAX",
                               "int value should be less than or equal to 16777215.")
            if "timestamp" in embed:
                try:
                    datetime.datetime.fromisoformat(str(embed["timestamp"]))
                except ValueError:
                    errors.add(at + ["timestamp"], "DATE_TIME_TYPE_PARSE",
                               f'Could not parse {embed["timestamp"]}. Should be ISO8601.')
            fields = embed.get("fields", [])
            if not isinstance(fields, list):
                errors.add(at + ["fields"], "LIST_TYPE_CONVERT", "Must be an array.")
                fields = []
            if len(fields) > 25:
                errors.add(at + ["fields"], "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
            for j, field in enumerate(fields):
                if not isinstance(field, dict):
                    errors.add(at + ["fields", j], "DICT_TYPE_CONVERT",
                               "Only dictionaries may be used in a DictType")
                    continue
                errors.max_length(at + ["fields", j, "name"], field.get("name"), 256, required=True)
                errors.max_length(at + ["fields", j, "value"], field.get("value"), 1024, required=True)
                for key in ("name", "value"):
                    if isinstance(field.get(key), str):
                        total += len(field[key])
            for key, sub, limit in (("footer", "text", 2048), ("author", "name", 256)):
                part = embed.get(key)
                if part is None:
                    continue
                if not isinstance(part, dict):
                    errors.add(at + [key], "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType")
                    continue
                errors.max_length(at + [key, sub], part.get(sub), limit, required=True)
                if isinstance(part.get(sub), str):
                    total += len(part[sub])
        # The sum over every embed of the message, as Discord counts it.
        if total > 6000:
            errors.add(["embeds"], "MAX_EMBED_SIZE_EXCEEDED", "Embed size exceeds maximum size of 6000")
        return errors


TELEGRAM_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span",
                 "tg-spoiler", "a", "code", "pre", "blockquote", "tg-emoji"}
TELEGRAM_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


class TelegramHTML(html.parser.HTMLParser):
    """Telegram's HTML parse mode (core.telegram.org/bots/api#html-style):
    only its tags, balanced, and every `<` and `&` part of a tag or of one
    of the entities it knows. Collects the text that remains, which is what
    Telegram counts against its length limit."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=False)
        self.source = source
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self.parts: list[str] = []
        self.stack: list[str] = []
        self.error: Optional[str] = None

    def position(self, extra: int = 0) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column + extra

    def fail(self, message: str, extra: int = 0) -> None:
        if self.error is None:
            offset = len(self.source[:self.position(extra)].encode())
            self.error = f"{message} at byte offset {offset}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        values = dict(attrs)
        if tag not in TELEGRAM_TAGS:
            self.fail(f'Unsupported start tag "{tag}"')
        elif tag == "span" and values.get("class") != "tg-spoiler":
            self.fail('Tag "span" must have class "tg-spoiler"')
        elif tag == "a" and not values.get("href"):
            self.fail('Tag "a" must have an href')
        elif tag == "tg-emoji" and not values.get("emoji-id"):
            self.fail('Tag "tg-emoji" must have attribute "emoji-id"')
        self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        self.fail(f'Unsupported start tag "{tag}/"')

    def handle_endtag(self, tag: str) -> None:
        if not self.stack:
            self.fail(f'Unexpected end tag "{tag}"')
        elif self.stack[-1] != tag:
            self.fail(f'Unmatched end tag, expected "</{self.stack[-1]}>", found "</{tag}>"')
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        for i, ch in enumerate(data):
            if ch in "<&":
                self.fail(f"Unexpected bare {ch!r}; write it as an entity", i)
                break
        self.parts.append(data)

    def handle_entityref(self, name: str) -> None:
        if name not in TELEGRAM_ENTITIES:
            self.fail(f'Unsupported HTML entity "&{name};"')
        elif not self.source.startswith(f"&{name};", self.position()):
            self.fail(f'Entity "&{name}" lacks its ";"')
        else:
            self.parts.append(TELEGRAM_ENTITIES[name])

    def handle_charref(self, name: str) -> None:
        if not self.source.startswith(f"&#{name};", self.position()):
            self.fail(f'Entity "&#{name}" lacks its ";"')
            return
        code = int(name[1:], 16) if name[:1] in "xX" else int(name)
        if not 0 < code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            self.fail(f'Invalid character reference "&#{name};"')
        else:
            self.parts.append(chr(code))

    def handle_comment(self, data: str) -> None:
        self.fail("Unsupported comment")

    def handle_decl(self, decl: str) -> None:
        self.fail("Unsupported declaration")

    def handle_pi(self, data: str) -> None:
        self.fail("Unsupported processing instruction")

    def unknown_decl(self, data: str) -> None:
        self.fail("Unsupported declaration")

    def parse(self) -> tuple[Optional[str], str]:
        self.feed(self.source)
        self.close()
        if self.error is None and self.stack:
            self.error = f'Can\'t find end tag corresponding to start tag "{self.stack[-1]}"'
        return self.error, "".join(self.parts)


class TelegramBotApi(Service):
    """The Telegram Bot API (core.telegram.org/bots/api): sendMessage, getMe."""

    kind = "telegram"
    PATH = re.compile(r"^/telegram/bot([^/]*)/([A-Za-z]+)$")
    TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
    DESCRIPTIONS = {400: "Bad Request: chat not found", 401: "Unauthorized",
                    403: "Forbidden: bot was blocked by the user", 404: "Not Found",
                    409: "Conflict: terminated by other getUpdates request",
                    500: "Internal Server Error", 502: "Bad Gateway"}

    @staticmethod
    def answer(status: int, description: str, parameters: Optional[dict[str, Any]] = None) -> Response:
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if parameters:
            body["parameters"] = parameters
        return json_response(status, body)

    def error(self, status: int, entry: dict[str, Any]) -> Response:
        if status == 429:
            # Telegram gives the wait in the body only, in whole seconds.
            seconds = math.ceil(retry_after_seconds(entry))
            return self.answer(429, f"Too Many Requests: retry after {seconds}", {"retry_after": seconds})
        description = entry.get("description") or self.DESCRIPTIONS.get(status) \
            or http.HTTPStatus(status).phrase
        return self.answer(status, description, entry.get("parameters"))

    async def handle(self, request: Request, record: dict[str, Any]) -> Response:
        match = self.PATH.match(request.path)
        if not match:
            return reject(record, "not a Bot API URL: /telegram/bot<token>/<method>",
                          self.answer(404, "Not Found"))
        token, method = urllib.parse.unquote(match.group(1)), match.group(2)
        record["token"] = token
        record["api_method"] = method
        expected = self.state.expected_token(request.path)
        if not self.TOKEN.match(token):
            return reject(record, "malformed bot token", self.answer(404, "Not Found"))
        if expected is not None and token != expected:
            return reject(record, "wrong bot token", self.answer(401, "Unauthorized"))
        if request.method not in ("GET", "POST"):
            return reject(record, f"method {request.method}", self.answer(405, "Method Not Allowed"))
        try:
            params = self.params(request, record)
        except ValueError as e:
            return reject(record, f"body: {e}", self.answer(400, "Bad Request: invalid request body"))
        if method.lower() == "getme":
            return accept(record, json_response(200, {"ok": True, "result": {
                "id": int(token.split(":")[0]), "is_bot": True, "first_name": "Tocsin stand-in",
                "username": "tocsin_standin_bot"}}))
        if method.lower() != "sendmessage":
            return reject(record, f"method {method} is not served by the stand-in",
                          self.answer(404, "Not Found"))
        return self.send_message(params, record)

    @staticmethod
    def params(request: Request, record: dict[str, Any]) -> dict[str, Any]:
        # The Bot API takes its parameters as a query string, a form or JSON.
        params: dict[str, Any] = {k: v[0] for k, v in request.query.items()}
        content_type = request.content_type()
        if content_type == "application/json":
            record["form"] = "json"
            body = json.loads(request.body)
            if not isinstance(body, dict):
                raise ValueError("JSON body is not an object")
            params.update(body)
        elif content_type == "application/x-www-form-urlencoded":
            record["form"] = "form"
            params.update({k: v[0] for k, v in urllib.parse.parse_qs(request.text()).items()})
        elif request.body:
            raise ValueError(f"Content-Type {content_type!r} is not served by the stand-in")
        else:
            record["form"] = "query"
        return params

    def send_message(self, params: dict[str, Any], record: dict[str, Any]) -> Response:
        chat_id = params.get("chat_id")
        text = params.get("text")
        parse_mode = params.get("parse_mode")
        record.update(chat_id=chat_id, text=text, parse_mode=parse_mode)
        if chat_id is None or chat_id == "" or isinstance(chat_id, bool) \
                or not isinstance(chat_id, (int, str)):
            return reject(record, "chat_id is missing", self.answer(400, "Bad Request: chat_id is empty"))
        if isinstance(chat_id, str) and not re.match(r"^(-?\d+|@[A-Za-z0-9_]{5,})$", chat_id):
            return reject(record, f"chat_id {chat_id!r} is neither a number nor @channel",
                          self.answer(400, "Bad Request: chat not found"))
        if not isinstance(text, str):
            return reject(record, "text is missing", self.answer(400, "Bad Request: message text is empty"))
        if parse_mode in (None, ""):
            plain = text
        elif str(parse_mode).upper() == "HTML":
            error, plain = TelegramHTML(text).parse()
            if error:
                return reject(record, f"HTML: {error}",
                              self.answer(400, f"Bad Request: can't parse entities: {error}"))
        elif parse_mode in ("MarkdownV2", "Markdown"):
            plain = text
            record["warnings"].append(f"parse_mode {parse_mode} is accepted but not checked")
        else:
            return reject(record, f"parse_mode {parse_mode!r}",
                          self.answer(400, f"Bad Request: unsupported parse_mode \"{parse_mode}\""))
        # Telegram trims the text and counts characters after parsing.
        plain = plain.strip()
        record["plain_text"] = plain
        if not plain:
            return reject(record, "text is empty after parsing",
                          self.answer(400, "Bad Request: message text is empty"))
        if len(plain) > 4096:
            return reject(record, f"text is {len(plain)} characters after parsing, more than 4096",
                          self.answer(400, "Bad Request: message is too long"))
        key = str(chat_id)
        self.state.telegram_message_ids[key] += 1
        chat: dict[str, Any]
        if key.startswith("@"):
            chat = {"id": -1001000000000, "title": key[1:], "username": key[1:], "type": "channel"}
        else:
            number = int(key)
            chat = {"id": number, "type": "private" if number > 0 else "supergroup"}
        return accept(record, json_response(200, {"ok": True, "result": {
            "message_id": self.state.telegram_message_ids[key],
            "from": {"id": int(str(record["token"]).split(":")[0]), "is_bot": True,
                     "first_name": "Tocsin stand-in", "username": "tocsin_standin_bot"},
            "chat": chat,
            "date": int(time.time()),
            "text": plain,
        }}))


NTFY_PRIORITIES = {"1": 1, "min": 1, "2": 2, "low": 2, "3": 3, "default": 3,
                   "4": 4, "high": 4, "5": 5, "max": 5, "urgent": 5}
NTFY_TOPIC = re.compile(r"^[-_A-Za-z0-9]{1,64}$")
# ntfy's default message-size-limit; a longer body becomes an attachment.
NTFY_MESSAGE_LIMIT = 4096


class Ntfy(Service):
    """An ntfy server's publishing (docs.ntfy.sh/publish)."""

    kind = "ntfy"
    # server/errors.go: code, status, text.
    ERRORS = {
        "bad": (40000, 400, "invalid request"),
        "priority": (40007, 400, "invalid priority parameter"),
        "topic": (40009, 400, "invalid request: topic invalid"),
        "json": (40017, 400, "invalid request: request body must be message JSON"),
        "unauthorized": (40101, 401, "unauthorized"),
        "forbidden": (40301, 403, "forbidden"),
        "not_found": (40401, 404, "page not found"),
        "too_large": (41301, 413, "attachment too large, or bandwidth limit reached"),
        "rate": (42901, 429, "limit reached: too many requests"),
        "internal": (50001, 500, "internal server error"),
    }
    BY_STATUS = {400: "bad", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 413: "too_large", 429: "rate", 500: "internal"}

    @classmethod
    def answer(cls, which: str) -> Response:
        code, status, text = cls.ERRORS[which]
        return json_response(status, {"code": code, "http": status, "error": text}, newline=True)

    def error(self, status: int, entry: dict[str, Any]) -> Response:
        if status in self.BY_STATUS:
            return self.answer(self.BY_STATUS[status])
        return json_response(status, {"code": status * 100 + 1, "http": status,
                                      "error": http.HTTPStatus(status).phrase.lower()}, newline=True)

    async def handle(self, request: Request, record: dict[str, Any]) -> Response:
        rest = request.path[len("/ntfy"):]
        if request.method not in ("POST", "PUT"):
            return reject(record, f"method {request.method} does not publish", self.answer("not_found"))
        if rest in ("", "/"):
            return self.publish_json(request, record)
        topic = rest[1:]
        if not NTFY_TOPIC.match(topic):
            return reject(record, f"topic {topic!r} is not 1-64 of [-_A-Za-z0-9]", self.answer("not_found"))
        record["form"] = "headers"
        record["topic"] = topic
        denied = self.check_auth(request, record, topic)
        if denied:
            return denied
        if len(request.body) > NTFY_MESSAGE_LIMIT:
            return reject(record, f"body is {len(request.body)} bytes, more than {NTFY_MESSAGE_LIMIT}: "
                          "ntfy would make it an attachment", self.answer("too_large"))
        try:
            message = request.body.decode("utf-8")
        except UnicodeDecodeError:
            return reject(record, "body is not UTF-8: ntfy would make it an attachment",
                          self.answer("too_large"))
        header_message = request.param("x-message", "message", "m")
        if header_message is not None and not message:
            message = header_message.replace("\\n", "\n")
        priority_text = request.param("x-priority", "priority", "prio", "p")
        priority = None
        if priority_text is not None and priority_text.strip():
            priority = NTFY_PRIORITIES.get(priority_text.strip().lower())
            if priority is None:
                return reject(record, f"priority {priority_text!r}", self.answer("priority"))
        tags_text = request.param("x-tags", "tags", "tag", "ta")
        tags = [decode_header(t.strip()) for t in tags_text.split(",") if t.strip()] if tags_text else None
        title = request.param("x-title", "title", "ti", "t")
        markdown = (request.param("x-markdown", "markdown", "md") or "").lower() in ("1", "yes", "true")
        return self.publish(record, topic, message, title=decode_header(title) if title else None,
                            priority=priority, tags=tags, click=request.param("x-click", "click"),
                            markdown=markdown)

    def publish_json(self, request: Request, record: dict[str, Any]) -> Response:
        record["form"] = "json"
        try:
            body = json.loads(request.body)
        except ValueError:
            return reject(record, "body is not JSON", self.answer("json"))
        if not isinstance(body, dict):
            return reject(record, "body is not a JSON object", self.answer("json"))
        topic = body.get("topic")
        record["topic"] = topic
        if not isinstance(topic, str) or not NTFY_TOPIC.match(topic):
            return reject(record, f"topic {topic!r} is not 1-64 of [-_A-Za-z0-9]", self.answer("topic"))
        denied = self.check_auth(request, record, topic)
        if denied:
            return denied
        message = body.get("message", "")
        title = body.get("title")
        tags = body.get("tags")
        click = body.get("click")
        markdown = body.get("markdown", False)
        priority = body.get("priority", 0)
        if not isinstance(message, str) or not isinstance(title, (str, type(None))) \
                or not isinstance(click, (str, type(None))) or not isinstance(markdown, bool) \
                or not (tags is None or (isinstance(tags, list) and all(isinstance(t, str) for t in tags))):
            return reject(record, "a field has the wrong JSON type", self.answer("json"))
        if not isinstance(priority, int) or isinstance(priority, bool):
            return reject(record, f"priority {priority!r} is not an integer", self.answer("json"))
        if not 0 <= priority <= 5:
            return reject(record, f"priority {priority} is not 1-5", self.answer("priority"))
        if len(message.encode()) > NTFY_MESSAGE_LIMIT:
            return reject(record, f"message is {len(message.encode())} bytes, more than "
                          f"{NTFY_MESSAGE_LIMIT}: ntfy would make it an attachment", self.answer("too_large"))
        return self.publish(record, topic, message, title=title, priority=priority or None,
                            tags=tags, click=click, markdown=markdown)

    def check_auth(self, request: Request, record: dict[str, Any], topic: str) -> Optional[Response]:
        token = None
        authorization = request.header("authorization") or ""
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() == "bearer":
            token = credentials.strip()
        elif scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(credentials).decode().partition(":")
            except ValueError:
                user, password = "", ""
            # ntfy takes a token as the password of an empty user.
            token = password if not user else f"{user}:{password}"
        record["token"] = token
        expected = self.state.expected_token(f"/ntfy/{topic}")
        if expected is None:
            return None
        if token is None:
            return reject(record, "no credentials for a protected topic", self.answer("forbidden"))
        if token != expected:
            # ntfy knows no such token: unauthorized, not forbidden.
            return reject(record, "wrong token", self.answer("unauthorized"))
        return None

    def publish(self, record: dict[str, Any], topic: str, message: str, *, title: Optional[str],
                priority: Optional[int], tags: Optional[list[str]], click: Optional[str],
                markdown: bool) -> Response:
        if not message:
            record["warnings"].append('empty message: ntfy shows "triggered"')
            message = "triggered"
        record.update(message=message, title=title, priority=priority, tags=tags, click=click,
                      markdown=markdown)
        now = int(time.time())
        answer: dict[str, Any] = {"id": secrets.token_urlsafe(9)[:12], "time": now,
                                  "expires": now + 12 * 3600, "event": "message", "topic": topic,
                                  "message": message}
        for key, value in (("title", title), ("priority", priority), ("tags", tags), ("click", click)):
            if value:
                answer[key] = value
        if markdown:
            answer["content_type"] = "text/markdown"
        return accept(record, json_response(200, answer, newline=True))


def decode_header(value: str) -> str:
    """ntfy decodes RFC 2047 encoded words in its headers (non-ASCII titles)."""
    if "=?" not in value:
        return value
    try:
        return str(email.header.make_header(email.header.decode_header(value)))
    except (ValueError, LookupError):
        return value


class Unknown(Service):
    kind = "unknown"

    def error(self, status: int, entry: dict[str, Any]) -> Response:
        return text_response(status, http.HTTPStatus(status).phrase)

    async def handle(self, request: Request, record: dict[str, Any]) -> Response:
        return reject(record, "no stand-in serves this path",
                      text_response(404, "no stand-in serves this path"))


# ---------------------------------------------------------------------------
# The HTTP side: control API, scripts, dispatch.


class Control:
    def __init__(self, state: State):
        self.state = state

    def handle(self, request: Request) -> Response:
        route = request.path[len("/_control/"):]
        try:
            body = json.loads(request.body) if request.body else {}
        except ValueError:
            return json_response(400, {"error": "body is not JSON"})
        state = self.state
        if request.method == "GET" and route == "received":
            prefix = request.query.get("prefix", [""])[0]
            return json_response(200, [r for r in state.records if r["path"].startswith(prefix)])
        if request.method != "POST" or not isinstance(body, dict):
            return json_response(400, {"error": f"{request.method} {request.path} "
                                                "with this body is not a control call"})
        if route == "reset":
            state.reset()
        elif route == "webhook-secret":
            name, secret = body.get("name"), body.get("secret")
            if not isinstance(name, str) or not name or not isinstance(secret, str):
                return json_response(400, {"error": "needs name and secret"})
            try:
                Webhook(secret)
            except Exception as e:
                return json_response(400, {"error": f"secret: {e}"})
            state.webhook_secrets[name] = secret
        elif route == "script":
            script_prefix, responses = body.get("path_prefix"), body.get("responses")
            if not isinstance(script_prefix, str) or not isinstance(responses, list):
                return json_response(400, {"error": "needs path_prefix and a list of responses"})
            for entry in responses:
                if not isinstance(entry, dict) or not ("status" in entry or "delay_ms" in entry):
                    return json_response(400, {"error": f"{entry!r} has neither status nor delay_ms"})
            state.scripts.setdefault(script_prefix, collections.deque()).extend(responses)
        elif route == "expect-token":
            token_prefix, token = body.get("path_prefix"), body.get("token")
            if not isinstance(token_prefix, str) or not isinstance(token, str):
                return json_response(400, {"error": "needs path_prefix and token"})
            state.tokens[token_prefix] = token
        else:
            return json_response(404, {"error": f"no control call {route!r}"})
        return json_response(200, {"ok": True})


class Http:
    def __init__(self, state: State):
        self.state = state
        self.control = Control(state)
        self.routes: list[tuple[str, Service]] = [
            ("/webhook/", WebhookReceiver(state)),
            ("/slack/", SlackWebhook(state)),
            ("/discord/", DiscordWebhook(state)),
            ("/telegram/", TelegramBotApi(state)),
            ("/ntfy", Ntfy(state)),
        ]
        self.unknown = Unknown(state)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    request = await read_request(reader, writer)
                except BadRequest as e:
                    writer.write(text_response(e.status, str(e)).encode(False))
                    await writer.drain()
                    break
                if request is None:
                    break
                response = await self.dispatch(request, reader, writer)
                if response is None:
                    break
                keep_alive = request.keep_alive()
                writer.write(response.encode(keep_alive))
                await writer.drain()
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def dispatch(self, request: Request, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> Optional[Response]:
        if request.path.startswith("/_control/"):
            return self.control.handle(request)
        service = next((s for prefix, s in self.routes if request.path.startswith(prefix)
                        and (prefix != "/ntfy" or request.path in ("/ntfy", "/ntfy/")
                             or request.path.startswith("/ntfy/"))), self.unknown)
        record = record_http(self.state, service.kind, request)
        try:
            response = await self.answer(service, request, record, reader, writer)
        except Exception as e:
            # A bug here must fail the test that met it, not pass for a rejection.
            traceback.print_exc()
            record["problem"] = f"standins.py failed: {type(e).__name__}: {e}"
            response = text_response(500, "stand-in failure")
        if response is not None:
            record["status"] = response.status
        return response

    async def answer(self, service: Service, request: Request, record: dict[str, Any],
                     reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Optional[Response]:
        entry = self.state.take_script(request.path)
        if entry is None:
            return await service.handle(request, record)
        record["scripted"] = True
        record["script"] = entry
        if "delay_ms" in entry:
            if await held_until_gone(entry["delay_ms"] / 1000, reader, writer):
                # What the test arranged, not a fault of the sender: no problem.
                record["disconnected"] = True
                return None
        if "body" in entry:
            return Response(int(entry.get("status", 200)), str(entry["body"]).encode(),
                            entry.get("content_type", "text/plain; charset=utf-8"))
        status = entry.get("status")
        if status is None or int(status) < 300:
            # A delay alone, or a 2xx: the service's own handling answers.
            record["scripted_pass_through"] = True
            return await service.handle(request, record)
        return service.error(int(status), entry)


async def held_until_gone(seconds: float, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> bool:
    """Waits `seconds`; True as soon as the sender closes its end instead
    (so a test that kills the sender mid-request sees it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if reader.at_eof() or reader.exception() is not None or writer.transport.is_closing():
            return True
        await asyncio.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
    return reader.at_eof()


# ---------------------------------------------------------------------------
# SMTP.

SMTP_REPLIES = {421: "4.3.2 Service not available, closing transmission channel",
                450: "4.2.1 Mailbox busy, try again later",
                451: "4.3.0 Requested action aborted: local error in processing",
                452: "4.3.1 Insufficient system storage",
                550: "5.1.1 Mailbox unavailable",
                552: "5.3.4 Message size exceeds fixed limit",
                554: "5.7.1 Message rejected"}


def smtp_reply(entry: dict[str, Any]) -> str:
    status = int(entry["status"])
    return f"{status} {entry.get('message') or SMTP_REPLIES.get(status, 'Scripted reply')}"


class Mailbox:
    """aiosmtpd's handler: records and checks every message."""

    def __init__(self, state: State):
        self.state = state

    def authenticate(self, server: SMTP, session: Any, envelope: Any, mechanism: str,
                     auth_data: Any) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login = auth_data.login.decode("utf-8", "replace")
        password = auth_data.password.decode("utf-8", "replace")
        expected = self.state.expected_token("smtp")
        return AuthResult(success=expected is None or f"{login}:{password}" == expected,
                          handled=False, auth_data=login)

    async def handle_RCPT(self, server: SMTP, session: Any, envelope: Any, address: str,
                          rcpt_options: list[str]) -> str:
        entry = self.state.take_script("smtp", stage="rcpt")
        if entry is not None:
            self.state.record("smtp", "smtp", "RCPT", scripted=True, script=entry,
                              status=int(entry["status"]), rcpt=address)
            return smtp_reply(entry)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Any, envelope: Any) -> str:
        raw: bytes = envelope.original_content or envelope.content
        record = self.state.record("smtp", "smtp", "DATA", **parse_mail(raw, envelope))
        record["auth_login"] = session.auth_data if session.authenticated else None
        entry = self.state.take_script("smtp", stage="data")
        if entry is not None:
            record["scripted"] = True
            record["script"] = entry
            if "delay_ms" in entry:
                await asyncio.sleep(entry["delay_ms"] / 1000)
            if "status" in entry and int(entry["status"]) >= 300:
                record["status"] = int(entry["status"])
                return smtp_reply(entry)
        record["accepted"] = True
        record["status"] = 250
        return "250 OK: queued"


def parse_mail(raw: bytes, envelope: Any) -> dict[str, Any]:
    problems: list[str] = []
    warnings: list[str] = []
    head, _, _ = raw.partition(b"\r\n\r\n")
    if any(b > 127 for b in head) and not envelope.smtp_utf8:
        problems.append("raw 8-bit bytes in the header without SMTPUTF8 (RFC 2047-encode them)")
    long_lines = [i for i, line in enumerate(raw.split(b"\r\n")) if len(line) > 998]
    if long_lines:
        problems.append(f"line {long_lines[0] + 1} is longer than 998 octets (RFC 5322 §2.1.1)")
    if any(b > 127 for b in raw) and "BODY=8BITMIME" not in [o.upper() for o in envelope.mail_options] \
            and not envelope.smtp_utf8:
        warnings.append("8-bit content without BODY=8BITMIME")

    # Parsed with LF line ends, so the parts' text reads as written.
    message = email.message_from_bytes(raw.replace(b"\r\n", b"\n"), policy=email.policy.default)
    for name in ("From", "Date", "Message-ID", "MIME-Version"):
        if message[name] is None:
            problems.append(f"no {name} header")
    for defect in message.defects:
        problems.append(f"MIME defect: {type(defect).__name__}")
    text = html_part = None
    order: list[str] = []
    for part in message.walk():
        for defect in part.defects if part is not message else []:
            problems.append(f"MIME defect in {part.get_content_type()}: {type(defect).__name__}")
        if part.is_multipart() or part.is_attachment():
            continue
        kind = part.get_content_type()
        order.append(kind)
        try:
            content = part.get_content()
        except (LookupError, ValueError) as e:
            problems.append(f"{kind} part does not decode: {e}")
            continue
        if kind == "text/plain" and text is None:
            text = content
        elif kind == "text/html" and html_part is None:
            html_part = content
    alternative = message.get_content_type() == "multipart/alternative"
    if not alternative:
        problems.append(f"top-level Content-Type is {message.get_content_type()}, not multipart/alternative")
    if text is None:
        problems.append("no text/plain part")
    if html_part is None:
        problems.append("no text/html part")
    # RFC 2046 §5.1.4: alternatives in increasing order of preference.
    if "text/plain" in order and "text/html" in order \
            and order.index("text/plain") > order.index("text/html"):
        problems.append("text/html comes before text/plain (the last alternative is the preferred one)")

    headers: dict[str, str] = {}
    for name, value in message.items():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else str(value)
    return {
        "mail_from": envelope.mail_from,
        "rcpt_tos": list(envelope.rcpt_tos),
        "mail_options": list(envelope.mail_options),
        "smtp_utf8": bool(envelope.smtp_utf8),
        "subject": str(message["subject"]) if message["subject"] is not None else None,
        "from": str(message["from"]) if message["from"] is not None else None,
        "to": str(message["to"]) if message["to"] is not None else None,
        "content_type": message.get_content_type(),
        "text": text,
        "html": html_part,
        "is_multipart_alternative": alternative,
        "headers": headers,
        "problems": problems,
        "problem": "; ".join(problems) or None,
        "warnings": warnings,
        "raw": raw.decode("utf-8", "replace"),
    }


# ---------------------------------------------------------------------------


async def main() -> None:
    # aiosmtpd logs every session at INFO and a deprecation at each AUTH;
    # the tests read what matters from the records.
    logging.getLogger("mail.log").setLevel(logging.DEBUG if VERBOSE else logging.ERROR)
    loop = asyncio.get_running_loop()
    state = State()
    web = Http(state)
    http_server = await asyncio.start_server(web.serve, HOST, 0, limit=MAX_HEAD)
    mailbox = Mailbox(state)
    smtp_server = await loop.create_server(
        lambda: SMTP(mailbox, hostname="standins.localhost", enable_SMTPUTF8=True,
                     auth_require_tls=False, authenticator=mailbox.authenticate,
                     data_size_limit=MAX_BODY),
        HOST, 0)

    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    def watch_stdin() -> None:
        # Returns at end of file: the parent closed the pipe, or died.
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()

    ports = {"http": http_server.sockets[0].getsockname()[1],
             "smtp": smtp_server.sockets[0].getsockname()[1]}
    print(json.dumps(ports), flush=True)
    await stop.wait()
    http_server.close()
    smtp_server.close()


if __name__ == "__main__":
    asyncio.run(main())
