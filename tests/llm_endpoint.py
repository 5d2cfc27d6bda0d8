"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for the LLM tests.

No SDK mocks: a test scripts the server's replies and reads back the requests it received.
A request with ``"stream": true`` gets its scripted completion as server-sent events, the way
OpenAI, vLLM and llama-cpp-python send them (content in small deltas, then the finish reason,
then usage when ``stream_options.include_usage`` asks for it, then ``[DONE]``); a reply can
stall mid-stream (optionally sending SSE ``: ping`` comments meanwhile, as sse-starlette does)
or drop the connection, as a killed server does.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CHUNK_CHARS = 16
"""Characters of content per streamed delta (real servers send about one token)."""


@dataclass
class Reply:
    """One scripted answer: an HTTP status and JSON body (or raw text), after a delay.

    ``stall_s`` stops a streamed answer after its first delta for that long (``ping_s`` > 0
    sends an SSE comment that often meanwhile); ``drop`` closes the connection after the first
    delta without finishing, as a server killed mid-answer does.
    """

    body: dict[str, Any] | str
    status: int = 200
    delay_s: float = 0.0
    stall_s: float = 0.0
    ping_s: float = 0.0
    drop: bool = False
    chunk_delay_s: float = 0.0
    """Pause before each streamed delta: a model producing tokens at a known speed."""


@dataclass
class FakeEndpoint:
    """What the test server answers next, and every request body it received."""

    url: str
    replies: deque[Reply] = field(default_factory=deque)
    received: list[dict[str, Any]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    models: dict[str, Any] | None = None
    """The body of ``GET /v1/models`` (None: a 404, as some servers answer)."""

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def stream_events(body: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A completion body as the chunks a streaming server sends for it."""
    choice = body["choices"][0]
    message = choice["message"]
    events = [_chunk({"role": "assistant", "content": ""})]
    content = message.get("content") or ""
    events += [
        _chunk({"content": content[i : i + CHUNK_CHARS]})
        for i in range(0, len(content), CHUNK_CHARS)
    ]
    if message.get("refusal"):
        events.append(_chunk({"refusal": message["refusal"]}))
    events.append(_chunk({}, choice["finish_reason"]))
    if include_usage and body.get("usage"):
        events.append({**_chunk({}), "choices": [], "usage": body["usage"]})
    return events


class _Handler(BaseHTTPRequestHandler):
    """Answers from its endpoint's script (a subclass per server sets ``endpoint``)."""

    endpoint: FakeEndpoint
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path == "/v1/models" and self.endpoint.models is not None:
            self._send(Reply(self.endpoint.models))
        else:
            self._send(Reply({"error": {"message": f"no route {self.path}"}}, status=404))

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v1/chat/completions":
            self._send(Reply({"error": {"message": f"no route {self.path}"}}, status=404))
            return
        sent = json.loads(body)
        self.endpoint.received.append(sent)
        # unscripted: a model with nothing more to propose
        reply = (
            self.endpoint.replies.popleft()
            if self.endpoint.replies
            else Reply(completion(proposals()))
        )
        if reply.delay_s:
            self.endpoint.stop.wait(reply.delay_s)
        try:
            if sent.get("stream") and reply.status == 200 and isinstance(reply.body, dict):
                self._stream(reply, bool((sent.get("stream_options") or {}).get("include_usage")))
            else:
                self._send(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up and hung up; that is the point of the test

    def _send(self, reply: Reply) -> None:
        data = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data.encode())))
            self.end_headers()
            self.wfile.write(data.encode())
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _stream(self, reply: Reply, include_usage: bool) -> None:
        assert isinstance(reply.body, dict)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for n, event in enumerate(stream_events(reply.body, include_usage)):
            if reply.chunk_delay_s:
                self.endpoint.stop.wait(reply.chunk_delay_s)
            self._event(f"data: {json.dumps(event)}\n\n")
            if n == 1 and reply.drop:
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if n == 1 and reply.stall_s:
                self._stall(reply)
        self._event("data: [DONE]\n\n")

    def _stall(self, reply: Reply) -> None:
        waited = 0.0
        step = reply.ping_s or reply.stall_s
        while waited < reply.stall_s and not self.endpoint.stop.is_set():
            self.endpoint.stop.wait(step)
            waited += step
            if reply.ping_s:
                self._event(": ping\n\n")

    def _event(self, text: str) -> None:
        self.wfile.write(text.encode())
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _handler(endpoint: FakeEndpoint) -> type[BaseHTTPRequestHandler]:
    """The handler class of one server, bound to its scripted endpoint."""
    return type("Handler", (_Handler,), {"endpoint": endpoint})


@contextmanager
def serving(port: int = 0) -> Iterator[FakeEndpoint]:
    """The scripted server on loopback (a free port unless given), in a thread, for as long
    as the block."""
    endpoint = FakeEndpoint(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(endpoint))
    httpd.daemon_threads = True
    endpoint.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        endpoint.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEndpoint]:
    """The scripted server, with proxy variables cleared so loopback is reached directly."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    with serving() as endpoint:
        yield endpoint


def free_port() -> int:
    """A loopback port nothing listens on (yet)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def completion(
    content: str | None,
    *,
    refusal: str | None = None,
    finish: str = "stop",
    prompt_tokens: int = 100,
    completion_tokens: int = 40,
) -> dict[str, Any]:
    """A Chat Completions response body as an OpenAI-compatible server sends it."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def item(name: str, sql: str = "", category: str = "history", **extra: Any) -> dict[str, Any]:
    """One proposal item as a model writes it."""
    sql = sql or f"SELECT run_id, 1.0 AS value FROM runs -- {name}"
    return {
        "name": name,
        "sql": sql,
        "category": category,
        "value_type": "DOUBLE",
        "rationale": "why",
        "kb_refs": ["kb-1"],
        **extra,
    }


def proposals(*items: dict[str, Any] | str) -> str:
    """An answer's content: the proposals object as JSON text."""
    return json.dumps({"proposals": list(items)})
