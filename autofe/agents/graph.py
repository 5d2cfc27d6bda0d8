"""The agent loop as a LangGraph ``StateGraph``: analyze → extract → evaluate → analyze | finalize.

Nodes return partial updates of :class:`~autofe.agents.state.LoopState`; the router after
``evaluate`` reads the stop reason the evaluator set. The tools (MCP client), knowledge base,
backend and settings reach the nodes through a :class:`LoopContext` closure, so the compiled
graph is a plain function of the state and a checkpointer can resume it after a crash.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from autofe.agents.analyzer import (
    build_profile,
    candidates_of,
    catalog_candidates,
    planner_feedback,
    propose,
    queries,
    retrieve,
    unique_names,
    warm_feedback,
)
from autofe.agents.evaluator import EvalSettings, evaluate_round
from autofe.agents.extractor import extract
from autofe.agents.finalize import finalize_model, kept_specs
from autofe.agents.llm import LLMBackend
from autofe.agents.state import Dropped, Iteration, LoopState, StopReason
from autofe.agents.toolbox import Toolbox
from autofe.featurespec import FeatureSpec
from autofe.knowledge_base.retrieve import KnowledgeBase

Node = Any
"""An async node function (LangGraph's own node protocols are too narrow to name here)."""


@dataclass(frozen=True)
class Targets:
    """When to stop: every target given must be met by the holdout-free CV score."""

    r2: float | None = 0.90
    mape: float | None = 0.15
    mae_s: float | None = None

    def met(self, score: dict[str, float]) -> bool:
        return (
            (self.r2 is None or score.get("r2", -1e9) >= self.r2)
            and (self.mape is None or score.get("mape", 1e9) <= self.mape)
            and (self.mae_s is None or score.get("mae_s", 1e9) <= self.mae_s)
        )


@dataclass(frozen=True)
class LoopSettings:
    """Targets, limits and round size of one run."""

    targets: Targets = field(default_factory=Targets)
    max_iterations: int = 6
    budget_seconds: float = 300.0
    budget_tokens: int | None = None
    per_round: int = 70
    min_proposals: int = 0
    """Keep iterating until this many candidates were proposed, even with targets met."""
    evaluation: EvalSettings = field(default_factory=EvalSettings)


@dataclass
class LoopContext:
    """Everything the nodes use besides the state."""

    db: Path
    store: Path
    out_dir: Path
    tools: Toolbox
    kb: KnowledgeBase
    backend: LLMBackend
    settings: LoopSettings = field(default_factory=LoopSettings)
    profile: dict[str, Any] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    seed: tuple[FeatureSpec, ...] = ()
    """Features proposed again in round 0 before the backend's own (a warm start from the
    catalog of the model a nightly run may replace), so each is re-checked like a new one."""


def build_graph(ctx: LoopContext) -> Any:
    """The uncompiled graph; compile it with a checkpointer to run it."""
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(LoopState)
    graph.add_node("analyze", analyze_node(ctx))
    graph.add_node("extract", extract_node(ctx))
    graph.add_node("evaluate", evaluate_node(ctx))
    graph.add_node("finalize", finalize_node(ctx))
    graph.add_edge(START, "analyze")
    graph.add_edge("analyze", "extract")
    graph.add_edge("extract", "evaluate")
    graph.add_conditional_edges("evaluate", route, {"analyze": "analyze", "finalize": "finalize"})
    graph.add_edge("finalize", END)
    return graph


def route(state: LoopState) -> Literal["analyze", "finalize"]:
    """Another round, or stop (the evaluator set the reason)."""
    return "finalize" if state.get("stop_reason") else "analyze"


def analyze_node(ctx: LoopContext) -> Node:
    async def analyze(state: LoopState) -> dict[str, Any]:
        started = ctx.clock()
        if not ctx.profile:
            ctx.profile.update(await build_profile(ctx.tools))
        iteration = state.get("iteration", 0)
        texts = queries(ctx.profile, state.get("feedback", {}), iteration)
        used = {ref for c in state.get("proposals", []) for ref in c["kb_refs"]}
        knowledge = retrieve(ctx.kb, texts, used)
        seed = ctx.seed if iteration == 0 else ()
        feedback = warm_feedback(planner_feedback(state), seed)
        batch = propose(
            ctx.backend, ctx.profile, knowledge, feedback, iteration, ctx.settings.per_round
        )
        taken = {c["name"] for c in state.get("proposals", [])}
        proposed = [*catalog_candidates(seed), *candidates_of(batch, ctx.backend)]
        candidates = unique_names(proposed, taken)
        tokens = batch.usage.prompt_tokens + batch.usage.completion_tokens
        return {
            "candidates": candidates,
            "proposals": candidates,
            "tokens": state.get("tokens", 0) + tokens,
            "phase_seconds": {"analyze": ctx.clock() - started},
        }

    return analyze


def extract_node(ctx: LoopContext) -> Node:
    async def extract_(state: LoopState) -> dict[str, Any]:
        started = ctx.clock()
        done = await extract(state.get("candidates", []), ctx.tools)
        ids = [m["feature_id"] for m in done if m["feature_id"]]
        seconds = {**state.get("phase_seconds", {}), "extract": ctx.clock() - started}
        return {"materialized": done, "proposed_ids": ids, "phase_seconds": seconds}

    return extract_


def evaluate_node(ctx: LoopContext) -> Node:
    async def evaluate(state: LoopState) -> dict[str, Any]:
        started = ctx.clock()
        iteration = state.get("iteration", 0)
        pairs = list(zip(state.get("candidates", []), state.get("materialized", []), strict=True))
        best = best_r2(state.get("history", []))
        result = evaluate_round(
            ctx.db,
            ctx.store,
            state.get("kept", []),
            pairs,
            iteration,
            best,
            ctx.settings.evaluation,
        )
        gate_drops = [
            Dropped(
                name=m["name"],
                stage=f"gate:{m['gate']}",
                reason="; ".join(m["reasons"]),
                iteration=iteration,
            )
            for _, m in pairs
            if not m["accepted"]
        ]
        score = {"r2": result.cv.r2, "mape": result.cv.mape, "mae_s": result.cv.mae_s}
        seconds = {**state.get("phase_seconds", {}), "evaluate": ctx.clock() - started}
        record = Iteration(
            iteration=iteration,
            proposed=len(pairs),
            gated=sum(m["accepted"] for _, m in pairs),
            kept=len(result.kept),
            features=len(state.get("kept", [])) + len(result.kept),
            cv_r2=result.cv.r2,
            cv_mape=result.cv.mape,
            seconds={k: round(v, 3) for k, v in seconds.items()},
            tokens=state.get("tokens", 0),
        )
        update: dict[str, Any] = {
            "kept": result.kept,
            "dropped": gate_drops + result.dropped,
            "feedback": result.feedback,
            "history": [record],
            "best_score": score,
            "iteration": iteration + 1,
            "phase_seconds": {},
        }
        update["stop_reason"] = stop_reason(ctx.settings, state, update, len(pairs))
        return update

    return evaluate


def best_r2(history: list[Iteration]) -> float | None:
    """The best CV R² so far: a round may score up to the tolerance below it, never the best
    itself drifting down round after round.

    >>> best_r2([]), best_r2([{"cv_r2": 0.5}, {"cv_r2": 0.49}])  # type: ignore[list-item]
    (None, 0.5)
    """
    scores = [h["cv_r2"] for h in history if h["cv_r2"] == h["cv_r2"]]  # NaN: nothing kept yet
    return max(scores, default=None)


def stop_reason(
    settings: LoopSettings, state: LoopState, update: dict[str, Any], proposed_now: int
) -> StopReason | None:
    """Why the loop stops after this round, or None to go on."""
    history = [*state.get("history", []), *update["history"]]
    proposed = sum(h["proposed"] for h in history)
    rounds = [sum(h["seconds"].values()) for h in history]
    if proposed_now == 0:
        return "no_candidates"
    if settings.targets.met(update["best_score"]) and proposed >= settings.min_proposals:
        return "targets_met"
    if update["iteration"] >= settings.max_iterations:
        return "max_iterations"
    if over_budget(rounds, settings.budget_seconds):
        return "budget_seconds"
    if settings.budget_tokens is not None and state.get("tokens", 0) >= settings.budget_tokens:
        return "budget_tokens"
    return None


def over_budget(rounds: list[float], budget: float) -> bool:
    """Whether the seconds are spent, or would be by a next round as long as the last one:
    the loop stops before a round it cannot finish within the budget, not one round after.

    >>> over_budget([40.0, 45.0], 120.0), over_budget([40.0, 45.0], 140.0)
    (True, False)
    """
    spent = sum(rounds)
    return spent >= budget or spent + (rounds[-1] if rounds else 0.0) > budget


def finalize_node(ctx: LoopContext) -> Node:
    async def finalize(state: LoopState) -> dict[str, Any]:
        kept = state.get("kept", [])
        specs = kept_specs(kept, state.get("proposals", []), ctx.backend.name)
        holdout = ctx.settings.evaluation.holdout
        final = finalize_model(ctx.db, ctx.store, kept, specs, ctx.out_dir, holdout)
        return {"final": final, "candidates": [], "materialized": []}

    return finalize
