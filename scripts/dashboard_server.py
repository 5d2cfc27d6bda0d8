"""The ``/ui`` dashboard in a real browser: ``autofe serve``'s app on a loopback port, headless
Chromium from the system's packages.

Shared by the browser tests (``tests/ui``, ``make test-ui``) and
``scripts/dashboard_screenshots.py``. Why a real server and a real browser rather than
FastAPI's TestClient: what the tests check (the page renders without console errors, the
charts have a size, the login cookie round-trips, the model swap is seen by polling) only
happens over real HTTP in a real renderer. Why the system's Chromium: Playwright's own
browser download is not reachable from CI; Playwright drives any Chromium through
``executable_path`` (``AUTOFE_CHROMIUM``, default ``/usr/bin/chromium``, Debian's
``chromium`` package).

From pytest::

    with serving(home, token="t", poll_s=0.1) as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url + "/ui/model")
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from llm_server import HOST, free_port
from playwright.sync_api import Browser, sync_playwright

from autofe.pipelines.serve import create_app

CHROMIUM_ENV = "AUTOFE_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
START_TIMEOUT_S = 30.0
"""Loading the active model and binding the port take well under a second when idle."""


def chromium_path() -> Path:
    """The Chromium binary Playwright drives (``$AUTOFE_CHROMIUM`` or Debian's)."""
    return Path(os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM)


@contextlib.contextmanager
def serving(home: Path, token: str, poll_s: float = 0.1) -> Iterator[str]:
    """The API and dashboard over ``home`` on a free loopback port, for a ``with`` block.

    Yields the base URL (``http://127.0.0.1:PORT``). The server runs in a daemon thread (uvicorn
    installs no signal handlers outside the main thread) and is stopped however the block ends.
    A small ``poll_s`` lets a test see a newly promoted model within a page reload or two.

    Raises:
        RuntimeError: the server did not start within ``START_TIMEOUT_S``.
    """
    app = create_app(home, token=token, poll_s=poll_s)
    port = free_port()
    config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="autofe-serve", daemon=True)
    thread.start()
    try:
        _wait_started(server, thread)
        yield f"http://{HOST}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10.0)


def _wait_started(server: uvicorn.Server, thread: threading.Thread) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the dashboard server exited while starting (see its log above)")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the dashboard server did not start in {START_TIMEOUT_S:.0f} s")
        time.sleep(0.02)


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """Headless system Chromium driven by Playwright, closed when the block ends.

    Raises:
        FileNotFoundError: no Chromium at :func:`chromium_path` (``apt-get install chromium``).
    """
    path = chromium_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"no Chromium at {path}: `apt-get install chromium` or set {CHROMIUM_ENV}"
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(path), headless=True)
        try:
            yield browser
        finally:
            browser.close()
