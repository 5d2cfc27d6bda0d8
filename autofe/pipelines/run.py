"""``autofe run``: ingest a workspace, run the agent loop, write the run directory.

The run directory (:class:`~autofe.run_dir.RunDir`) holds everything the run made: the
ingested warehouse, the feature store the tools server writes, the LangGraph checkpoints, the
settings, and at the end the model, the feature catalog, the metrics, the report and the log.
The agents reach the workspace only through the tools server, here served in-process over an
MCP client session.
``--resume`` continues a run from its last checkpoint with the settings it started with.

Two hooks serve ``autofe nightly``: ``run(..., warehouse=DB)`` starts from a copy of an
already ingested warehouse instead of ingesting the workspace again, and
``RunSettings.warm_start`` names a feature catalog whose features round 0 proposes again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autofe.agents.backends import make_backend
from autofe.agents.context import LoopContext
from autofe.agents.graph import build_graph
from autofe.agents.llm import LLMSettings
from autofe.agents.planner import OfflinePlanner
from autofe.agents.settings import EvalSettings, LoopSettings, Targets
from autofe.agents.toolbox import McpToolbox
from autofe.config import IngestSettings
from autofe.errors import ConfigError
from autofe.feature_catalog import load_catalog
from autofe.featurespec import FeatureSpec
from autofe.ingest.ingest import ingest
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.pipelines.run_report import write_run_report
from autofe.run_dir import RunDir
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.rewrite import structure_key
from autofe.tools.server import ServerConfig, build_server

THREAD = "autofe-run"
log = logging.getLogger("autofe.run")


@dataclass(frozen=True)
class RunSettings:
    """What a run was started with (saved, so a resume uses the same)."""

    workspace: str
    loop: LoopSettings = field(default_factory=LoopSettings)
    llm: LLMSettings = field(default_factory=lambda: LLMSettings(backend="offline"))
    warm_start: str | None = None
    """A feature catalog folder whose features are proposed again in round 0 (None: cold)."""

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["llm"].pop("api_key", None)  # never written to disk
        return data


@dataclass
class RunResult:
    """The final state's summary (``metrics.json``) and where the run directory is."""

    out: Path
    metrics: dict[str, Any]
    seconds: float


Progress = Callable[[dict[str, Any]], None]
"""Called with each finished round's :class:`~autofe.agents.state.Iteration` record."""


def _report(update: dict[str, Any], progress: Progress | None) -> None:
    for node, changes in update.items():
        log.info("node %s finished", node)
        if node != "evaluate" or not changes:
            continue
        for record in changes.get("history", []):
            log.info("iteration %s", json.dumps(record))
            if progress is not None:
                progress(record)


@contextmanager
def _run_log(out: Path) -> Iterator[None]:
    """Log the run (nodes, iterations, warnings) to ``out/run.log`` while it lasts."""
    handler = logging.FileHandler(RunDir(out).log, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # the run log is the file; the console gets the progress lines
    try:
        yield
    finally:
        log.removeHandler(handler)
        handler.close()


def run(
    settings: RunSettings,
    out: Path,
    kb: KnowledgeBase | None = None,
    progress: Progress | None = None,
    warehouse: Path | None = None,
) -> RunResult:
    """Start a run into ``out`` (which must not hold one already).

    ``warehouse``: a warehouse already holding the workspace, copied into the run directory
    rather than ingesting the workspace from scratch (the loop reads only its own copy).
    """
    run_dir = RunDir(out)
    if run_dir.checkpoints.exists():
        raise ConfigError(f"{out} already holds a run: use --resume {out} or another --out")
    out.mkdir(parents=True, exist_ok=True)
    run_dir.settings.write_text(json.dumps(settings.as_json(), indent=2) + "\n")
    if warehouse is not None:
        shutil.copyfile(warehouse, run_dir.warehouse)
    else:
        ingest([Path(settings.workspace)], IngestSettings(db=run_dir.warehouse))
    with _run_log(out):
        return asyncio.run(_loop(settings, out, kb, progress, resume=False))


def resume(
    out: Path,
    kb: KnowledgeBase | None = None,
    progress: Progress | None = None,
    api_key: str | None = None,
) -> RunResult:
    """Continue the run in ``out`` from its last checkpoint."""
    run_dir = RunDir(out)
    if not run_dir.checkpoints.is_file():
        raise ConfigError(f"{out} holds no run to resume (no {run_dir.checkpoints.name})")
    settings = load_settings(run_dir.settings, api_key)
    with _run_log(out):
        return asyncio.run(_loop(settings, out, kb, progress, resume=True))


def load_settings(path: Path, api_key: str | None = None) -> RunSettings:
    """The settings a run started with.

    Raises:
        ConfigError: the file is missing or not the settings of a run.
    """
    try:
        data = json.loads(path.read_text())
        loop = data["loop"]
        targets = Targets(**loop.pop("targets"))
        evaluation_data = loop.pop("evaluation")
        limits = SandboxLimits(**evaluation_data.pop("limits"))
        evaluation = EvalSettings(**evaluation_data, limits=limits)
        llm = LLMSettings(**{**data["llm"], "api_key": api_key})
        return RunSettings(
            data["workspace"],
            LoopSettings(targets, evaluation=evaluation, **loop),
            llm,
            data.get("warm_start"),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not the settings of an autofe run ({exc})") from exc


async def _loop(
    settings: RunSettings,
    out: Path,
    kb: KnowledgeBase | None,
    progress: Progress | None,
    resume: bool,
) -> RunResult:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from mcp.client import Client

    started = time.perf_counter()
    run_dir = RunDir(out)
    db, store = run_dir.warehouse, run_dir.feature_store
    server = build_server(ServerConfig(db=db, roots=(Path(settings.workspace),), store=store))
    async with Client(server) as client:
        ctx = LoopContext(
            db=db,
            store=store,
            out_dir=out,
            tools=McpToolbox(client),
            kb=kb or KnowledgeBase(),
            backend=make_backend(settings.llm, OfflinePlanner),
            settings=settings.loop,
            seed=warm_start_specs(settings),
        )
        async with AsyncSqliteSaver.from_conn_string(str(run_dir.checkpoints)) as saver:
            app = build_graph(ctx).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": THREAD}, "recursion_limit": 1000}
            first = None if resume else {"iteration": 0}
            async for update in app.astream(first, config, stream_mode="updates"):
                _report(update, progress)
            state = (await app.aget_state(config)).values
    metrics = run_metrics(state, time.perf_counter() - started)
    run_dir.metrics.write_text(json.dumps(metrics, indent=2, default=str) + "\n")
    write_run_report(out, metrics, state.get("kept", []))
    return RunResult(out, metrics, metrics["seconds"])


def warm_start_specs(settings: RunSettings) -> tuple[FeatureSpec, ...]:
    """The features of the run's warm-start catalog (none for a cold start).

    Raises:
        ConfigError: the catalog is missing or malformed.
    """
    if settings.warm_start is None:
        return ()
    return tuple(load_catalog(Path(settings.warm_start)))


def run_metrics(state: dict[str, Any], seconds: float) -> dict[str, Any]:
    """``metrics.json``: holdout metrics, counts by stage and category, iterations, phases."""
    history = state.get("history", [])
    kept = state.get("kept", [])
    proposals = state.get("proposals", [])
    dropped = state.get("dropped", [])
    by_stage: dict[str, int] = {}
    for d in dropped:
        by_stage[d["stage"]] = by_stage.get(d["stage"], 0) + 1
    by_category: dict[str, int] = {}
    for k in kept:
        by_category[k["category"]] = by_category.get(k["category"], 0) + 1
    final = state.get("final", {})
    return {
        "holdout": final.get("holdout"),
        "model": final.get("model"),
        "proposed": len(proposals),
        "structurally_distinct": len({structure_key(c["sql"]) for c in proposals}),
        "accepted": len(kept),
        "accepted_by_category": dict(sorted(by_category.items())),
        "rejected_by_stage": dict(sorted(by_stage.items())),
        "iterations": history,
        "tokens": state.get("tokens", 0),
        "stop_reason": state.get("stop_reason"),
        "seconds": round(seconds, 2),
    }
