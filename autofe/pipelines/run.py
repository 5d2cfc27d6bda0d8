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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from autofe.agents.backends import make_backend
from autofe.agents.context import LoopContext
from autofe.agents.finalize import feature_spec
from autofe.agents.graph import build_graph
from autofe.agents.llm import LLMSettings
from autofe.agents.openai_backend import OpenAIBackend
from autofe.agents.planner import OfflinePlanner
from autofe.agents.settings import EvalSettings, LoopSettings, Targets
from autofe.agents.state import Dropped, final_features
from autofe.agents.toolbox import McpToolbox
from autofe.config import IngestSettings
from autofe.errors import AutofeError, ConfigError, LLMError, autofe_error_in
from autofe.feature_catalog import load_catalog
from autofe.featurespec import FeatureSpec
from autofe.gates import GateSettings
from autofe.ingest.ingest import ingest
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.pipelines.run_report import write_run_report
from autofe.pipelines.run_sample import (
    loop_warehouse,
    refit_on_all_runs,
    sample_if_large,
    sample_record,
)
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
        for record in (changes or {}).get("llm", []) if node == "analyze" else []:
            if record["requests"]:
                log.info("llm %s", json.dumps(record))
        if node != "evaluate" or not changes:
            continue
        for record in changes.get("history", []):
            log.info("iteration %s", json.dumps(record))
            if progress is not None:
                progress(record)


@contextmanager
def _run_log(out: Path) -> Iterator[None]:
    """Log the run to ``out/run.log`` while it lasts: nodes, iterations, and every autofe
    module's warnings (the LLM backend's retries and format changes among them) and errors.

    The handler sits on the ``autofe`` logger, which stays at its level (warnings also reach
    the console, as before), and on the run's own logger at INFO, which does not propagate:
    its progress lines are the file's, the console gets the round lines.
    """
    package = logging.getLogger("autofe")
    handler = logging.FileHandler(RunDir(out).log, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    package.addHandler(handler)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        yield
    finally:
        package.removeHandler(handler)
        log.removeHandler(handler)
        handler.close()


def run(
    settings: RunSettings,
    out: Path,
    kb: KnowledgeBase | None = None,
    progress: Progress | None = None,
    warehouse: Path | None = None,
    again: str | None = None,
) -> RunResult:
    """Start a run into ``out`` (which must not hold one already).

    ``warehouse``: a warehouse already holding the workspace, copied into the run directory
    rather than ingesting the workspace from scratch (the loop reads only its own copy).
    ``again``: how the caller's user goes on after the LLM endpoint failed (default: resume
    this run).
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
    sample_if_large(run_dir, settings.loop.sample_runs)
    with _run_log(out):
        return _drive(settings, out, kb, progress, resume=False, again=again)


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
        return _drive(settings, out, kb, progress, resume=True)


def _drive(
    settings: RunSettings,
    out: Path,
    kb: KnowledgeBase | None,
    progress: Progress | None,
    resume: bool,
    again: str | None = None,
) -> RunResult:
    """The loop, with an error raised inside the graph brought out of its task groups.

    The one place every command that runs the graph (``run``, ``--resume``, ``nightly``)
    gets its errors from: the user sees the :class:`AutofeError`'s one line, and ``run.log``
    records it; an endpoint failure also says how to go on.
    """
    try:
        return asyncio.run(_loop(settings, out, kb, progress, resume))
    except (AutofeError, BaseExceptionGroup) as exc:
        error = autofe_error_in(exc)
        if error is None:
            raise
        if isinstance(error, LLMError):
            error = LLMError(error.endpoint, f"{error.reason}. {again or _llm_hint(out)}")
        log.error("stopped: %s", error)
        raise error from None


def _llm_hint(out: Path) -> str:
    """How to go on after the endpoint failed: every finished round is checkpointed."""
    return (
        f"Finished rounds are kept: fix the endpoint, then continue with "
        f"`autofe run --resume {out}`, or start again with `--llm offline`"
    )


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
    db, store = loop_warehouse(run_dir), run_dir.feature_store
    roots = (Path(settings.workspace),)
    limits = settings.loop.evaluation.limits  # one configuration of the file per process
    sample = sample_record(run_dir)
    gates = GateSettings(
        feature_budget_s=settings.loop.feature_budget_seconds,
        history_runs=sample["of_runs"] if sample else None,  # the gate projects to the history
    )
    server = build_server(ServerConfig(db=db, roots=roots, store=store, limits=limits, gates=gates))
    backend = make_backend(settings.llm, OfflinePlanner)
    async with Client(server) as client:
        ctx = LoopContext(
            db=db,
            store=store,
            out_dir=out,
            tools=McpToolbox(client),
            kb=kb or KnowledgeBase(),
            backend=backend,
            settings=_sampled(settings.loop, sample),
            seed=warm_start_specs(settings),
        )
        async with AsyncSqliteSaver.from_conn_string(str(run_dir.checkpoints)) as saver:
            app = build_graph(ctx).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": THREAD}, "recursion_limit": 1000}
            first = None if resume else {"iteration": 0}
            if resume and isinstance(backend, OpenAIBackend):
                backend.remember((await app.aget_state(config)).values.get("llm", []))
            async for update in app.astream(first, config, stream_mode="updates"):
                _report(update, progress)
            state = (await app.aget_state(config)).values
    if sample is not None and final_features(state):
        state = _on_all_runs(out, state, settings, backend.name)
    metrics = run_metrics(state, time.perf_counter() - started)
    metrics["sample"] = sample
    run_dir.metrics.write_text(json.dumps(metrics, indent=2, default=str) + "\n")
    write_run_report(out, metrics, final_features(state))
    return RunResult(out, metrics, metrics["seconds"])


def _sampled(loop: LoopSettings, sample: dict[str, Any] | None) -> LoopSettings:
    """The loop's settings, told which share of the warehouse's code families a sample holds
    (the what-if rule judges a sample's differences against their noise:
    ``EvalSettings.families_share``). A ``sample.json`` written before families were counted
    gives its share of the jobs."""
    if not sample:
        return loop
    if sample.get("of_families"):
        share = sample["families"] / sample["of_families"]
    elif sample.get("of_jobs"):
        share = sample["jobs"] / sample["of_jobs"]
    else:
        return loop
    return replace(loop, evaluation=replace(loop.evaluation, families_share=share))


def _on_all_runs(
    out: Path, state: dict[str, Any], settings: RunSettings, backend: str
) -> dict[str, Any]:
    """The state with the loop's final features scored and fitted on every run (the loop saw a
    sample); one that cannot be computed on every run is pruned, as a drop of stage
    ``all-runs``."""
    kept = final_features(state)
    specs = [feature_spec(k, backend) for k in kept]
    limits = settings.loop.evaluation.limits
    final = refit_on_all_runs(out, kept, specs, settings.loop.evaluation.holdout, limits)
    unfit = final.pop("unfit")
    last = len(state.get("history", [])) - 1
    drops = [
        Dropped(name=u["name"], stage="all-runs", reason=u["reason"], iteration=last) for u in unfit
    ]
    return {
        **state,
        "final": {**final, "pruning": state.get("final", {}).get("pruning")},
        "pruned": [*state.get("pruned", []), *(u["name"] for u in unfit)],
        "dropped": [*state.get("dropped", []), *drops],
    }


def warm_start_specs(settings: RunSettings) -> tuple[FeatureSpec, ...]:
    """The features of the run's warm-start catalog (none for a cold start).

    Raises:
        ConfigError: the catalog is missing or malformed.
    """
    if settings.warm_start is None:
        return ()
    return tuple(load_catalog(Path(settings.warm_start)))


def run_metrics(state: dict[str, Any], seconds: float) -> dict[str, Any]:
    """``metrics.json``: holdout metrics beside the simple baselines on the same runs, counts by
    stage and category, iterations, phases."""
    history = state.get("history", [])
    kept = final_features(state)
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
        "baselines": final.get("baselines"),
        "best_baseline": final.get("best_baseline"),
        "model": final.get("model"),
        "pruning": final.get("pruning"),
        "proposed": len(proposals),
        "structurally_distinct": len({structure_key(c["sql"]) for c in proposals}),
        "accepted": len(kept),
        "accepted_by_category": dict(sorted(by_category.items())),
        "rejected_by_stage": dict(sorted(by_stage.items())),
        "iterations": history,
        "tokens": state.get("tokens", 0),
        "llm": llm_summary(state.get("llm", [])),
        "stop_reason": state.get("stop_reason"),
        **partial_fields(state.get("stop_reason"), dropped),
        "seconds": round(seconds, 2),
    }


BUDGET_STOPS = {
    "budget_seconds": "the --budget-seconds safety stop fired: a faster machine runs more rounds",
    "budget_tokens": "the --budget-tokens stop fired before the rounds were done",
}
"""Stop reasons that leave the result short of what the rounds would have kept."""
LIMIT_CODE = "/over_budget:"
"""In a gate drop's reason: the dry run hit a sandbox limit or the gate's time budget, a
refusal a faster (or idle) machine might not have made."""


def partial_fields(stop: str | None, dropped: list[Dropped]) -> dict[str, Any]:
    """``partial``, why, and the features refused by a time or memory limit.

    The kept set is a function of the workspace and the settings only when neither a budget
    stop nor a limit refusal decided anything; otherwise the result is partial, and says why.

    >>> partial_fields("max_iterations", [])
    {'partial': False, 'partial_reasons': [], 'limit_refusals': []}
    >>> partial_fields("budget_seconds", [])["partial_reasons"][0][:23]
    'the --budget-seconds sa'
    """
    refusals = [
        {"name": d["name"], "iteration": d["iteration"], "reason": d["reason"]}
        for d in dropped
        if d["stage"].startswith("gate:") and LIMIT_CODE in d["reason"]
    ]
    unfit = [d["name"] for d in dropped if d["stage"] == "all-runs"]
    reasons = [BUDGET_STOPS[stop]] if stop in BUDGET_STOPS else []
    if refusals:
        reasons.append(f"{len(refusals)} features refused by a time or memory limit")
    if unfit:
        reasons.append(
            f"{len(unfit)} features kept on the sample could not be computed on every run "
            f"({', '.join(unfit)}) and were left out of the model"
        )
    return {"partial": bool(reasons), "partial_reasons": reasons, "limit_refusals": refusals}


def llm_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The backend's record: per round, and the dropped items counted by reason (the reason's
    kind: the text before the first colon, so "category: Input should be ..." counts once)."""
    by_reason: dict[str, int] = {}
    for r in rounds:
        for d in r["dropped"]:
            kind = d["reason"].split(":")[0]
            by_reason[kind] = by_reason.get(kind, 0) + 1
    formats = [r["output_format"] for r in rounds if r["output_format"]]
    return {
        "output_format": formats[-1] if formats else None,
        "requests": sum(r["requests"] for r in rounds),
        "malformed": sum(r["malformed"] for r in rounds),
        "dropped_by_reason": dict(sorted(by_reason.items())),
        "warnings": sum(len(r["warnings"]) for r in rounds),
        "rounds": rounds,
    }
