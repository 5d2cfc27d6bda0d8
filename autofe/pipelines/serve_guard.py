"""The prediction API's outermost layer: a plain ASGI middleware around every request.

It checks the bearer token (when one is set) and the request size limit, and keeps the request
counters and latency histogram. It is ASGI rather than a FastAPI dependency so that it sees
every request, including the ones it refuses and the ones no route matches.
"""

from __future__ import annotations

import hmac
import re
import time

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autofe.pipelines.serve_errors import status_phrase
from autofe.pipelines.serve_models import ErrorOut
from autofe.pipelines.serve_service import Service

MAX_BODY_BYTES = 1 << 20
OPEN_PATHS = frozenset({"/healthz"})
"""Load balancers probe health without credentials; everything else needs the token."""


class Guard:
    """Bearer token, body size limit and request metrics for every HTTP request."""

    def __init__(
        self,
        app: ASGIApp,
        service: Service,
        token: str | None,
        max_body: int,
        paths: frozenset[str],
    ) -> None:
        self.app = app
        self.metrics = service.metrics
        self.token = token.encode() if token else None
        self.max_body = max_body
        self.paths = paths
        self.templates = [
            (re.compile("^" + re.sub(r"\\\{[^/]*?\\\}", "[^/]+", re.escape(p)) + "$"), p)
            for p in sorted(paths)
            if "{" in p
        ]
        """Routes with a path parameter count under their template, not each handle."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the outer error middleware answers if nothing below does

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, watched)
        finally:
            path = self._endpoint(scope["path"])
            seconds = time.perf_counter() - started
            self.metrics.observe_request(path, scope["method"], status, seconds)

    def _endpoint(self, path: str) -> str:
        if path in self.paths:
            return path
        return next((p for pattern, p in self.templates if pattern.match(path)), "other")

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token and scope["path"] not in OPEN_PATHS and not _authorized(scope, self.token):
            detail = "missing or wrong bearer token: send 'Authorization: Bearer <token>'"
            await _refuse(401, detail, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        body = await _read_body(scope, receive, self.max_body)
        if body is None:
            detail = f"request body over {self.max_body} bytes"
            await _refuse(413, detail)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


def _authorized(scope: Scope, token: bytes) -> bool:
    """A constant-time comparison, so the response time does not leak the token's prefix."""
    given = dict(scope["headers"]).get(b"authorization", b"")
    scheme, _, credentials = given.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), token)


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None past ``limit`` (a declared length is refused before reading)."""
    declared = dict(scope["headers"]).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            return None
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _refuse(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = ErrorOut(error=status_phrase(status), detail=detail)
    return JSONResponse(body.model_dump(exclude_none=True), status, headers)
