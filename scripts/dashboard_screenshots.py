"""Screenshots of the ``/ui`` dashboard (and of a run's report) for docs/img.

Builds a home after two real nights (``scripts/dashboard_home.py``), tells the API what a
scheduler would (the 72 runs night two ingested predicted and then reported finished, and a
few jobs submitted and moved through their events), and saves a full-page PNG of each page
from headless Chromium::

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs/img] [--work DIR]
    .venv/bin/python scripts/dashboard_screenshots.py --report demo/run/report.html

``--report`` saves ``run-report.png``, the top of that report, instead. Needs the ``ui`` extra
(``make test-ui`` installs it), Debian's ``chromium`` and Pillow (installed with the ``lab``
extra's matplotlib): each PNG is saved with a colour palette, to stay under 300 KB.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import httpx
from dashboard_home import later_runs, replay, report, submit, two_nights
from dashboard_server import chromium, serving
from PIL import Image
from playwright.sync_api import Browser, FloatRect, ViewportSize

from autofe.agents.settings import LoopSettings, Targets

REPO = Path(__file__).resolve().parents[1]
TOKEN = "screenshots"
PAGES = {"model": "/ui/model", "predictions": "/ui/predictions", "scheduler": "/ui/scheduler"}
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
LOOP = LoopSettings(Targets(r2=2.0, mape=None), max_iterations=2, per_round=35)
"""Two rounds a night: a model with a feature catalog worth showing, in a few minutes."""
MAX_BYTES = 300 * 1024
"""docs/img keeps each screenshot under 300 KB."""
PALETTES = (256, 128, 64, 32)
"""Colours tried, most first. The pages are flat colours and anti-aliased text: a 256-colour
octree palette is a third of Chromium's PNG and keeps every series colour exact (median cut
turned the few pixels of a red and a green series grey)."""
REPORT_HEIGHT = 3000
"""A run report is ten thousand pixels long with its feature tables: the image shows its top
(the headline against the best baseline, predicted vs actual, error by job, the baselines)."""
REPLAYED = 72
"""The runs after the cut (docs/lab.md): new to night two, and to the server."""
JOBS: tuple[tuple[str, str, str, tuple[dict[str, Any], ...]], ...] = (
    ("nightly-etl", "P1", "team-a", ({"kind": "started"}, {"kind": "progress", "progress": 0.4})),
    (
        "sessionize",
        "P2",
        "team-a",
        (
            {"kind": "started"},
            {"kind": "preempted"},
            {"kind": "fallback", "hourly_usd": 4.0, "reason": "2 preemptions"},
            {"kind": "succeeded"},
        ),
    ),
    (
        "feature-backfill",
        "P3",
        "team-b",
        ({"kind": "started"}, {"kind": "upgraded", "hourly_usd": 8.0, "reason": "deadline"}),
    ),
    ("revenue-report", "P0", "team-b", ({"kind": "started"}, {"kind": "failed"})),
    ("ad-hoc-query", "P2", "team-a", ()),
)
"""Submitted jobs (name, tier, account) and the events reported for each."""


def populate(api: httpx.Client, home: Path) -> None:
    """Predictions with their actuals, and jobs in every state with their events."""
    replay(api, later_runs(home / "warehouse.duckdb", REPLAYED))
    for job_id, tier, account, events in JOBS:
        report(api, submit(api, job_id, tier, account), *events)


def shrink(png: Path) -> None:
    """Rewrite ``png`` with the largest palette that keeps it under :data:`MAX_BYTES`."""
    with Image.open(png) as image:
        pixels = image.convert("RGB")
    for colours in PALETTES:
        pixels.quantize(colors=colours, method=Image.Quantize.FASTOCTREE).save(png, optimize=True)
        if png.stat().st_size <= MAX_BYTES:
            return


def shoot_dashboard(browser: Browser, url: str, out: Path) -> list[Path]:
    """One full-page PNG per dashboard page, logged in with the token's cookie."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_cookies([{"name": "autofe_token", "value": TOKEN, "url": url}])
    page = context.new_page()
    saved = []
    for name, path in PAGES.items():
        response = page.goto(f"{url}{path}")
        if response is None or response.status != 200:
            raise RuntimeError(f"{path}: {response.status if response else 'no response'}")
        saved.append(out / f"dashboard-{name}.png")
        page.screenshot(path=str(saved[-1]), full_page=True)
    context.close()
    return saved


def shoot_report(browser: Browser, report_html: Path, out: Path) -> Path:
    """The top :data:`REPORT_HEIGHT` pixels of a run's ``report.html``, opened from disk as a
    user would (the rest is the per-round and per-feature tables)."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(report_html.resolve().as_uri())
    saved = out / "run-report.png"
    height = min(REPORT_HEIGHT, int(page.evaluate("document.documentElement.scrollHeight")))
    clip: FloatRect = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": height}
    page.screenshot(path=str(saved), full_page=True, clip=clip)
    page.close()
    return saved


def dashboard(out: Path, work: Path) -> list[Path]:
    """Build the home in ``work``, serve it and screenshot its pages into ``out``."""
    home = two_nights(work, LOOP)
    with serving(home, token=TOKEN) as url, chromium() as browser:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60.0) as api:
            populate(api, home)
        return shoot_dashboard(browser, url, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    parser.add_argument("--work", type=Path, help="empty folder for the home (default: temp)")
    parser.add_argument("--report", type=Path, help="screenshot this report.html instead")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report is not None:
        with chromium() as browser:
            saved = [shoot_report(browser, args.report, args.out)]
    elif args.work is not None:
        saved = dashboard(args.out, args.work)
    else:
        with tempfile.TemporaryDirectory(prefix="autofe-screenshots-") as work:
            saved = dashboard(args.out, Path(work))
    for path in saved:
        shrink(path)
        print(f"{path}: {path.stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
