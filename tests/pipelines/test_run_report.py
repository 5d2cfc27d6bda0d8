"""``report.html``: on a real finished example run and on synthetic runs, old and partial ones.

The page is parsed (balanced tags, no external reference), and each section is checked against
the run directory's own records: one point per holdout run, the jobs worst first with counts
summing to the holdout, the model's row before every baseline, the workspace in the title.
"""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from autofe.agents.state import Feature
from autofe.pipelines.run_report import workspace_name, write_run_report
from autofe.pipelines.run_report_sections import MISSING_HOLDOUT
from autofe.workspace_archive import COMPLETE_MARKER

VOID = {"meta", "br", "hr", "img", "input", "link"}


class Page(HTMLParser):
    """The parts of a report the tests read; parsing fails on an unbalanced tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.tables: dict[str, list[tuple[str, list[str]]]] = {}
        self.points: dict[str, int] = {}
        self.text: dict[str, str] = {}
        self.open: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        self.tags.append((tag, attributes))
        if tag in VOID:
            return
        self.open.append((tag, attributes))
        ids = self._ids()
        if tag == "tr" and ids.get("table"):
            self.tables.setdefault(ids["table"], []).append((attributes.get("class", ""), []))
        if tag == "circle" and attributes.get("class") == "point" and ids.get("figure"):
            self.points[ids["figure"]] = self.points.get(ids["figure"], 0) + 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1][0] == tag, f"</{tag}> closes {self.open[-1:]}"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        ids, inner = self._ids(), self.open[-1][0] if self.open else ""
        if inner == "td" and ids.get("table"):
            self.tables[ids["table"]][-1][1].append(data)
        if inner in ("title", "h1") and "svg" not in ids:
            self.text[inner] = self.text.get(inner, "") + data
        self.text["all"] = self.text.get("all", "") + data

    def _ids(self) -> dict[str, str]:
        """The id of the innermost open element of each tag that has one."""
        return {t: a["id"] for t, a in self.open if "id" in a} | {
            t: "" for t, _ in self.open if t == "svg"
        }


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    assert not page.open, page.open
    return page


def assert_offline(page: Page) -> None:
    """No external reference: nothing to fetch, nothing to run."""
    for tag, attrs in page.tags:
        assert tag not in ("script", "link", "img", "iframe"), tag
        for name in ("src", "href"):
            assert not attrs.get(name, "").startswith(("http://", "https://", "//")), attrs


def percent(cell: str) -> float:
    return float(cell.rstrip("%")) / 100


def assert_jobs_worst_first(page: Page, held: int) -> None:
    rows = [cells for _, cells in page.tables["by-job"][1:]]
    mapes = [percent(r[2]) for r in rows]
    assert mapes == sorted(mapes, reverse=True) and len(rows) > 1
    assert sum(int(r[1]) for r in rows) == held


# ---------------------------------------------------------------- a real finished run


def test_the_example_runs_report_draws_every_holdout_run(example_run: Path) -> None:
    page = parse(example_run / "report.html")
    metrics = json.loads((example_run / "metrics.json").read_text())
    held = metrics["holdout"]["n"]
    assert_offline(page)
    assert "lab-small" in page.text["title"] and "lab-small" in page.text["h1"]
    assert "13069430" not in page.text["title"]  # the cache folder's hash is not a name
    runs = json.loads((example_run / "holdout.json").read_text())["runs"]
    assert page.points["predicted-vs-actual"] == len(runs) == held
    assert_jobs_worst_first(page, held)
    # CV R², CV MAPE and the what-if MAPE
    assert page.points.get("rounds") == 3 * len(metrics["iterations"])
    # coverage of the runs new to their job and of the reruns, as holdout.json marks them
    novel = sum(1 for r in runs if r["novel"])
    assert 0 < novel == metrics["holdout"]["novel_runs"] < held
    kinds = [r for r in page.tables["headline-scores"] if r[1] and "% coverage," in r[1][0]]
    h = metrics["holdout"]
    assert [cells[1] for _, cells in kinds] == [
        f"{h['coverage_80_novel']:.1%} / {h['coverage_90_novel']:.1%}",
        f"{h['coverage_80_familiar']:.1%} / {h['coverage_90_familiar']:.1%}",
    ]
    assert f"{novel} runs new to their job" in kinds[0][1][0]
    # the pruning: the whole set and every smaller head tried, with its verdict
    pruning = metrics["pruning"]
    assert f"Pruning kept {pruning['after']} of {pruning['before']} features" in page.text["all"]
    rows = page.tables["pruning"][1:]
    assert [cells[1] for _, cells in rows] == [
        str(s["features"]) for s in [pruning["whole"], *pruning["tried"]]
    ]


def test_the_example_runs_baselines_stand_beside_the_model(example_run: Path) -> None:
    page = parse(example_run / "report.html")
    metrics = json.loads((example_run / "metrics.json").read_text())
    rows = page.tables["baselines"][1:]
    assert rows[0][0] == "model" and rows[0][1][0].startswith("autofe model")
    assert rows[0][1][1] == f"{metrics['holdout']['mape']:.1%}"
    names = [cells[0] for _, cells in rows[1:]]
    assert len(names) == len(metrics["baselines"])
    for b in metrics["baselines"]:
        assert any(f"({b['name']})" in n for n in names), b["name"]
    best = [cells[0] for cls, cells in rows if cls == "best"]
    assert best == [n for n in names if f"({metrics['best_baseline']})" in n]
    assert "by " in page.text["all"] and " points of MAPE" in page.text["all"]


def test_the_example_runs_kept_features_cite_their_documents(example_run: Path) -> None:
    page = parse(example_run / "report.html")
    catalog = json.loads((example_run / "features" / "catalog.json").read_text())
    refs = {r for f in catalog["features"] for r in f["kb_refs"]}
    assert refs, "the offline planner's recipes cite the knowledge base"
    for ref in refs:
        assert f"({ref})" in page.text["all"], ref
    assert "Stopped: max_iterations" in page.text["all"]


# ---------------------------------------------------------------- synthetic runs


def _row(job: str, actual: float, p50: float, low: float, high: float) -> dict[str, Any]:
    return {
        "run_id": f"{job}-{actual}",
        "job_id": job,
        "submit_time": "2024-03-01T00:00:00",
        "actual_s": actual,
        "p50_s": p50,
        "low_80": low,
        "high_80": high,
        "low_90": low * 0.9,
        "high_90": high * 1.1,
    }


HOLDOUT_RUNS = [
    _row("a", 100, 110, 90, 130),
    _row("a", 200, 150, 120, 260),
    _row("b", 10, 30, 20, 40),
    _row("c", 50, 52, 40, 60),
    _row("c", 60, 66, 50, 70),
    _row("a", 300, 290, 250, 330),
]


def _metrics(**changes: Any) -> dict[str, Any]:
    iteration = {
        "iteration": 0,
        "proposed": 5,
        "gated": 4,
        "kept": 2,
        "features": 2,
        "cv_r2": 0.5,
        "cv_mape": 0.3,
        "seconds": {"analyze": 1.0, "evaluate": 2.0},
    }
    baselines = [
        {"name": "job_median", "label": "job's median", "mape": 0.4, "median_ape": 0.3,
         "log_r2": 0.1, "within_20": 0.3, "runs": 6},
        {"name": "ernest", "label": "Ernest <fit>", "mape": 0.25, "median_ape": 0.2,
         "log_r2": 0.2, "within_20": 0.5, "runs": 6},
    ]  # fmt: skip
    metrics = {
        "holdout": {"n": 6, "r2": 0.7, "mae_s": 12.0, "mape": 0.2, "median_ape": 0.1,
                    "within_10": 0.5, "within_20": 0.67, "coverage_80": 0.83, "coverage_90": 1.0},
        "baselines": baselines,
        "best_baseline": "ernest",
        "model": "model.joblib",
        "proposed": 10,
        "accepted": 2,
        "accepted_by_category": {"history": 1, "static-config": 1},
        "rejected_by_stage": {"gate:leakage": 3},
        "iterations": [iteration, {**iteration, "iteration": 1, "cv_r2": 0.6}],
        "tokens": 0,
        "llm": {"rounds": []},
        "stop_reason": "budget_seconds",
        "seconds": 12.5,
    }  # fmt: skip
    return {**metrics, **changes}


def _feature(name: str, category: str, importance: float, refs: list[str]) -> Feature:
    return Feature(
        name=name,
        sql="SELECT run_id, 1 AS value FROM runs",
        category=category,
        value_type="DOUBLE",
        rationale="",
        kb_refs=refs,
        origin="llm",
        evaluation={"importance": importance, "psi": 0.0, "iteration": 0},
    )


KEPT = [
    _feature("broadcast_ratio", "static-config", 0.3, ["broadcast-threshold", "not-a-doc"]),
    _feature("last_run_s", "history", 0.7, []),
]


@pytest.fixture
def synthetic_run(tmp_path: Path) -> Path:
    """A run folder with settings naming an unpacked workspace, and a holdout.json."""
    space = tmp_path / "cache" / "nightly-space-0123456789abcdef"
    space.mkdir(parents=True)
    (space / COMPLETE_MARKER).write_text("workspace.tar.zst\n")
    out = tmp_path / "20240301-000000"
    out.mkdir()
    (out / "settings.json").write_text(json.dumps({"workspace": str(space)}))
    (out / "holdout.json").write_text(json.dumps({"runs": HOLDOUT_RUNS}))
    return out


def test_a_synthetic_run_shows_each_section(synthetic_run: Path) -> None:
    page = parse(write_run_report(synthetic_run, _metrics(), KEPT))
    assert_offline(page)
    assert page.text["title"].startswith("nightly-space") and "20240301" not in page.text["h1"]
    assert page.points["predicted-vs-actual"] == len(HOLDOUT_RUNS)
    assert_jobs_worst_first(page, len(HOLDOUT_RUNS))
    by_job = {cells[0]: cells[1] for _, cells in page.tables["by-job"][1:]}
    assert by_job == {"a": "3", "b": "1", "c": "2"}  # no warehouse: the ids stand in
    rows = page.tables["baselines"][1:]
    assert [cls for cls, _ in rows] == ["model", "best", ""]
    assert rows[1][1][0] == "Ernest <fit> (ernest) — best baseline"
    text = page.text["all"]
    assert "The model beats the best baseline (Ernest <fit>, MAPE 25.0%) by 5.0 points" in text
    assert "Partial result" in text and "the time budget (--budget-seconds) ran out" in text
    assert "The broadcast threshold" in text and "(broadcast-threshold); not-a-doc" in text
    assert text.index("history: 1, 70.0% of the gain") < text.index("static-config: 1")


def test_a_run_without_a_model_or_holdout_json_says_what_is_missing(tmp_path: Path) -> None:
    metrics = _metrics(
        holdout=None, baselines=None, best_baseline=None, model=None,
        stop_reason="no_candidates", accepted=0, iterations=[],
    )  # fmt: skip
    page = parse(write_run_report(tmp_path, metrics, []))
    assert_offline(page)
    assert page.text["title"].startswith(tmp_path.name)  # no settings.json: the folder's name
    text = page.text["all"]
    assert "No model was written" in text and MISSING_HOLDOUT in text
    assert "No feature was kept." in text and "no_candidates (no candidates" in text
    assert "The result is complete" in text and "predicted-vs-actual" not in page.points


def test_an_older_run_without_baselines_still_renders(synthetic_run: Path) -> None:
    (synthetic_run / "holdout.json").unlink()
    metrics = _metrics(baselines=None, best_baseline=None, stop_reason="max_iterations")
    page = parse(write_run_report(synthetic_run, metrics, KEPT))
    text = page.text["all"]
    assert "No baselines in metrics.json" in text and MISSING_HOLDOUT in text
    assert "baselines" not in page.tables and "44.7" not in text


def test_the_workspace_name_is_the_folder_of_an_ordinary_workspace(tmp_path: Path) -> None:
    space = tmp_path / "prod-workspace-0123456789abcdef"  # a hash-like name, but no marker
    space.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "settings.json").write_text(json.dumps({"workspace": str(space)}))
    assert workspace_name(tmp_path / "run") == space.name
    shutil.rmtree(space)
    assert workspace_name(tmp_path / "run") == space.name  # a moved workspace keeps its name


def test_an_error_inside_the_graph_is_one_line_not_a_traceback(
    example_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's AutofeError reaches the user as its message (#29: a 100 000-run history once
    ended in an ExceptionGroup traceback from the graph's task group)."""
    from typer.testing import CliRunner

    from autofe.cli import app
    from autofe.errors import ConfigError

    async def refuse(tools: object) -> object:
        raise ConfigError("the warehouse is too large for this test")

    monkeypatch.setattr("autofe.agents.analyze.build_profile", refuse)  # the first node's call
    out = tmp_path / "run"
    args = ["run", "--out", str(out), "--warehouse", str(example_warehouse), "--per-round", "5"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: the warehouse is too large for this test"
    assert "Traceback" not in result.output and "ExceptionGroup" not in result.output
    assert "stopped: the warehouse is too large" in (out / "run.log").read_text()
