"""The ``/ui`` dashboard in headless Chromium against a real server (``make test-ui``).

Each test serves its own copy of a home folder after two real nights
(``scripts/dashboard_home.py``: the example workspace cut, then whole) with a token on a free
loopback port, and drives Debian's Chromium through Playwright: every page loads without
console errors or failed requests, the charts have a size and something drawn in them, the
token is enforced, and what the API is told (a job submitted, a model promoted, a prediction
and its actual) shows on the next page load. Marked ``slow`` as well, so that ``make test``
(``-m "not slow"``) leaves them to ``make test-ui``.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Locator, Page, Request, Response

from autofe.knowledge_base.embeddings import HashingEmbedder
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.modeling.registry import Registry

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from dashboard_home import later_runs, replay, report, submit, two_nights
from dashboard_server import chromium, serving

pytestmark = [pytest.mark.ui, pytest.mark.slow]

TOKEN = "ui-s3cret"
PAGES = {"/ui/model": "model", "/ui/predictions": "predictions", "/ui/scheduler": "scheduler"}
CHARTS = {
    "/ui/model": ("svg.chart",),
    "/ui/predictions": ("svg.chart#actuals-chart", "svg.chart#rolling-chart"),
    "/ui/scheduler": ("svg.chart#spend-chart",),
}
"""The charts each page must have (the page contract); the model page's are its own choice."""
MARKS = "circle.point, path.line, line.interval, g.bar rect"
"""What a chart draws for data (autofe/svg.py); axes, frame and legend do not count."""
RELOAD_FOR_S = 10.0
"""How long a page is reloaded waiting for the server to see a change (it polls every 0.1 s)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="session")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The home after two nights, built once (hashed embeddings: no model to load)."""
    kb = KnowledgeBase(index_dir=tmp_path_factory.mktemp("kb"), embedder=HashingEmbedder())
    return two_nights(tmp_path_factory.mktemp("nights"), kb=kb)


@pytest.fixture
def home(nights: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(nights, tmp_path / "home"))


@pytest.fixture
def url(home: Path) -> Iterator[str]:
    with serving(home, token=TOKEN, poll_s=0.1) as base:
        yield base


@pytest.fixture
def api(url: str) -> Iterator[httpx.Client]:
    """A plain API client with the bearer token (what a scheduler or a CI job would be)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client


@pytest.fixture
def fresh(browser: Browser) -> Iterator[Page]:
    """A page in a new browser context: no cookie yet."""
    context = browser.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def page(fresh: Page, url: str) -> Page:
    """A page logged in through the login form (the cookie is set for the rest of the test)."""
    response = login(fresh, url, TOKEN)
    assert response is not None and response.status == 200, fresh.content()
    return fresh


def login(page: Page, url: str, token: str) -> Response | None:
    """Fill and send the login form; the response the browser ends on."""
    page.goto(f"{url}/ui/login")
    page.fill("input[name=token]", token)
    with page.expect_navigation() as navigation:
        page.press("input[name=token]", "Enter")
    return navigation.value


def watch(page: Page, url: str) -> list[str]:
    """Everything that went wrong in ``page`` from now on, one line each: console errors,
    uncaught exceptions, failed requests, error statuses and requests beyond the server."""
    problems: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            problems.append(f"console error: {message.text}")

    def on_request(request: Request) -> None:
        if not request.url.startswith((url, "data:", "about:")):
            problems.append(f"request beyond the server: {request.url}")

    def on_response(response: Response) -> None:
        if response.status >= 400:
            problems.append(f"{response.status} for {response.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} ({r.failure})"))
    page.on("request", on_request)
    page.on("response", on_response)
    return problems


def reload_until(page: Page, address: str, ready: Callable[[], bool]) -> None:
    """Load ``address`` again until ``ready()`` (the server picks up changes by polling)."""
    deadline = time.monotonic() + RELOAD_FOR_S
    page.goto(address)
    while not ready() and time.monotonic() < deadline:
        page.wait_for_timeout(100)
        page.goto(address)


def populate(api: httpx.Client, home: Path) -> None:
    """Data for every chart: predictions with actuals, a running job with spend and events."""
    replay(api, later_runs(home / "warehouse.duckdb", 8))
    handle = submit(api, "etl-1")
    report(api, handle, {"kind": "started"}, {"kind": "preempted"})
    report(api, handle, {"kind": "progress", "progress": 0.5})


def boxed(locator: Locator) -> bool:
    """The element is laid out with a non-empty area."""
    box = locator.bounding_box()
    return box is not None and box["width"] > 0 and box["height"] > 0


def drawn(locator: Locator) -> bool:
    """The SVG shape has some extent of its own geometry (an interval bar is a vertical line;
    a one-point path is nothing). ``getBBox``, not Playwright's box: that one gives a 0-length
    path a few pixels."""
    extent = locator.evaluate("shape => shape.getBBox().width + shape.getBBox().height")
    return bool(extent > 0)


# ------------------------------------------------------------------------------- the pages


def test_ui_redirects_to_the_model_page(page: Page, url: str) -> None:
    page.goto(f"{url}/ui")
    assert page.url == f"{url}/ui/model"


@pytest.mark.parametrize("path", PAGES)
def test_every_page_loads_without_errors(page: Page, url: str, path: str) -> None:
    problems = watch(page, url)
    response = page.goto(f"{url}{path}")
    assert response is not None and response.status == 200
    page.wait_for_load_state("load")
    assert problems == []
    assert PAGES[path] in page.locator("h1").inner_text().lower()
    links = page.locator("nav a").evaluate_all("links => links.map(a => a.pathname)")
    assert set(PAGES) <= set(links)


@pytest.mark.parametrize("path", PAGES)
def test_charts_render_with_data(
    page: Page, url: str, api: httpx.Client, home: Path, path: str
) -> None:
    populate(api, home)
    problems = watch(page, url)
    page.goto(f"{url}{path}")
    for selector in CHARTS[path]:
        assert page.locator(selector).count() >= 1, f"no {selector} on {path}"
    for chart in page.locator("svg.chart").all():
        name = chart.get_attribute("id") or chart.locator("title").first.text_content()
        assert boxed(chart), f"{name} has no size"
        marks = [mark for mark in chart.locator(MARKS).all() if drawn(mark)]
        assert marks, f"{name} draws nothing: {chart.inner_html()[:300]}"
        for series in chart.locator("g.series").all():
            given = series.locator(MARKS).all()
            assert not given or any(drawn(mark) for mark in given), (
                f"{name}: series {series.get_attribute('data-name')} has data but draws "
                f"nothing: {series.inner_html()[:200]}"
            )
    assert problems == []


# ------------------------------------------------------------------------------- the token


def test_without_the_cookie_a_page_is_the_login_form(fresh: Page, url: str) -> None:
    for path in PAGES:
        response = fresh.goto(f"{url}{path}")
        assert response is not None and response.status == 401
        assert fresh.locator("form input[name=token]").count() == 1
        assert fresh.locator("table, svg.chart").count() == 0


def test_a_wrong_token_is_refused_and_sets_no_cookie(fresh: Page, url: str) -> None:
    response = login(fresh, url, "not-" + TOKEN)
    assert response is not None and response.status == 401
    assert fresh.locator("form input[name=token]").count() == 1
    assert fresh.context.cookies() == []
    again = fresh.goto(f"{url}/ui/model")
    assert again is not None and again.status == 401


def test_the_right_token_sets_a_strict_http_only_cookie(fresh: Page, url: str) -> None:
    response = login(fresh, url, TOKEN)
    assert response is not None and response.status == 200
    assert fresh.url == f"{url}/ui/model"
    (cookie,) = fresh.context.cookies()
    assert (cookie["name"], cookie["value"]) == ("autofe_token", TOKEN)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    for path in PAGES:
        loaded = fresh.goto(f"{url}{path}")
        assert loaded is not None and loaded.status == 200


def test_a_bearer_header_opens_the_pages_too(browser: Browser, url: str) -> None:
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        response = context.new_page().goto(f"{url}/ui/scheduler")
        assert response is not None and response.status == 200
    finally:
        context.close()


# ------------------------------------------------------------------------------- live data


def test_a_submitted_job_appears_on_the_scheduler_page(
    page: Page, url: str, api: httpx.Client
) -> None:
    page.goto(f"{url}/ui/scheduler")
    rows = page.locator("table#jobs tr[data-handle]")
    before = rows.count()  # night two's drift trigger requested a retraining (docs/nightly.md)
    assert "autofe-nightly" in page.locator("table#jobs").inner_text() or before == 0
    handle = submit(api, "etl-1")
    page.goto(f"{url}/ui/scheduler")
    row = page.locator(f'table#jobs tr[data-handle="{handle}"]')
    assert row.count() == 1 and rows.count() == before + 1
    assert "queued" in row.inner_text()


def test_a_promoted_model_appears_as_active_on_the_model_page(
    page: Page, url: str, home: Path, manual_model: Path
) -> None:
    registry = Registry(home)  # as `autofe nightly` / `autofe models promote` do
    before = registry.active()
    page.goto(f"{url}/ui/model")
    active = page.locator("table#versions tr.active")
    assert before is not None and active.get_attribute("data-version") == before.name
    version = registry.add(manual_model, {"mape": 0.25}).name
    registry.promote(version, "the manual baseline, promoted by hand")
    reload_until(page, f"{url}/ui/model", lambda: active.get_attribute("data-version") == version)
    assert active.count() == 1 and active.get_attribute("data-version") == version
    assert page.locator(f'table#versions tr[data-version="{before.name}"]').count() == 1
    assert "the manual baseline, promoted by hand" in page.locator("table#promotions").inner_text()


def test_a_reported_actual_adds_a_point_to_the_predictions_chart(
    page: Page, url: str, api: httpx.Client, home: Path
) -> None:
    points = page.locator("svg#actuals-chart circle.point")
    first, second = later_runs(home / "warehouse.duckdb", 2)
    replay(api, [first])
    page.goto(f"{url}/ui/predictions")
    before = points.count()
    replay(api, [second])
    page.goto(f"{url}/ui/predictions")
    assert points.count() > before
