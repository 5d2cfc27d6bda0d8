"""The prediction API's outermost layer: a plain ASGI middleware around every request.

It checks the bearer token (when one is set) and the request size limit, and keeps the request
counters and latency histogram. It is ASGI rather than a FastAPI dependency so that it sees
every request, including the ones it refuses and the ones no route matches.

The ``/ui`` dashboard's pages take the same token as the cookie ``autofe_token`` too (a browser
cannot send a header from a link), set by its login form; a page asked for without it gets the
form (401) rather than a JSON error. The cookie counts on ``/ui`` paths only, so an API call
never acts on a browser's stored credentials.
"""

from __future__ import annotations

import hmac
import re
import time
from urllib.parse import unquote

from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autofe.pipelines.serve_errors import status_phrase
from autofe.pipelines.serve_models import ErrorOut
from autofe.pipelines.serve_service import Service
from autofe.pipelines.serve_ui_pages import login_page

MAX_BODY_BYTES = 1 << 20
OPEN_PATHS = frozenset({"/healthz", "/ui/login"})
"""Load balancers probe health without credentials, and the login form is how a browser gets
them; everything else needs the token."""
TOKEN_COOKIE = "autofe_token"


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
            await _unauthorized(scope["path"])(scope, receive, send)
            return
        body = await _read_body(scope, receive, self.max_body)
        if body is None:
            detail = f"request body over {self.max_body} bytes"
            await _refuse(413, detail)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


def _authorized(scope: Scope, token: bytes) -> bool:
    """A constant-time comparison, so the response time does not leak the token's prefix."""
    headers = dict(scope["headers"])
    scheme, _, credentials = headers.get(b"authorization", b"").partition(b" ")
    if scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), token):
        return True
    if not is_ui(scope["path"]):
        return False
    cookie = _cookie(headers.get(b"cookie", b""), TOKEN_COOKIE.encode())
    return cookie is not None and hmac.compare_digest(unquote(cookie).encode(), token)


def is_ui(path: str) -> bool:
    """
    >>> is_ui("/ui"), is_ui("/ui/model"), is_ui("/uix"), is_ui("/v1/models")
    (True, True, False, False)
    """
    return path == "/ui" or path.startswith("/ui/")


def _cookie(header: bytes, name: bytes) -> str | None:
    """The value of cookie ``name`` in a ``Cookie`` header (None when absent).

    >>> _cookie(b"a=1; autofe_token=s3%2Fcret", b"autofe_token"), _cookie(b"a=1", b"b")
    ('s3%2Fcret', None)
    """
    for part in header.split(b";"):
        key, sep, value = part.strip().partition(b"=")
        if sep and key == name:
            return value.strip(b'"').decode("latin-1")
    return None


def _unauthorized(path: str) -> Response:
    """The login form for a dashboard page, the JSON error for anything else."""
    headers = {"WWW-Authenticate": "Bearer"}
    if is_ui(path):
        return HTMLResponse(login_page(), 401, headers)
    detail = "missing or wrong bearer token: send 'Authorization: Bearer <token>'"
    return _refuse(401, detail, headers)


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
