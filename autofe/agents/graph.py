"""The agent loop as a LangGraph ``StateGraph``: analyze → extract → evaluate → analyze | finalize.

Each node lives in its own module (:mod:`~autofe.agents.analyze`, :mod:`~autofe.agents.extract`,
:mod:`~autofe.agents.evaluate`, :mod:`~autofe.agents.finalize`) and returns a partial update of
:class:`~autofe.agents.state.LoopState`; this module only wires them and holds the stop rules,
which it applies after ``evaluate`` and the router reads. The tools (MCP client), knowledge
base, backend and settings reach the nodes through a frozen
:class:`~autofe.agents.context.LoopContext`, so the compiled graph is a plain function of the
state and a checkpointer can resume it after a crash.
"""

from __future__ import annotations

from typing import Any, Literal

from autofe.agents.analyze import analyze_node
from autofe.agents.context import LoopContext, Node
from autofe.agents.evaluate import evaluate_node
from autofe.agents.extract import extract_node
from autofe.agents.finalize import finalize_node
from autofe.agents.settings import LoopSettings
from autofe.agents.state import Iteration, LoopState, StopReason
from autofe.agents.whatif import MaskedCache


def build_graph(ctx: LoopContext) -> Any:
    """The uncompiled graph; compile it with a checkpointer to run it."""
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(LoopState)
    cache = MaskedCache()  # masked values computed once per loop, for the rounds and the pruning
    graph.add_node("analyze", analyze_node(ctx))
    graph.add_node("extract", extract_node(ctx))
    graph.add_node("evaluate", stop_after(evaluate_node(ctx, cache), ctx.settings))
    graph.add_node("finalize", finalize_node(ctx, cache))
    graph.add_edge(START, "analyze")
    graph.add_edge("analyze", "extract")
    graph.add_edge("extract", "evaluate")
    graph.add_conditional_edges("evaluate", route, {"analyze": "analyze", "finalize": "finalize"})
    graph.add_edge("finalize", END)
    return graph


def route(state: LoopState) -> Literal["analyze", "finalize"]:
    """Another round, or stop (the stop rules set the reason after evaluate)."""
    return "finalize" if state.get("stop_reason") else "analyze"


def stop_after(evaluate: Node, settings: LoopSettings) -> Node:
    """The evaluate node with the round's stop reason added to its update (applied here, so
    the stop rules sit with the wiring and no node module imports the graph)."""

    async def evaluate_then_stop(state: LoopState) -> dict[str, Any]:
        update: dict[str, Any] = await evaluate(state)
        proposed_now = len(state.get("candidates", []))
        update["stop_reason"] = stop_reason(settings, state, update, proposed_now)
        return update

    return evaluate_then_stop


def stop_reason(
    settings: LoopSettings, state: LoopState, update: dict[str, Any], proposed_now: int
) -> StopReason | None:
    """Why the loop stops after this round, or None to go on."""
    history = [*state.get("history", []), *update["history"]]
    proposed = sum(h["proposed"] for h in history)
    rounds = [sum(h["seconds"].values()) for h in history]
    if proposed_now == 0 or _gated_nothing(history[-NOTHING_GATED_ROUNDS:]):
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


NOTHING_GATED_ROUNDS = 2
"""Rounds in a row in which no candidate passed the gates, after which the loop stops
(``no_candidates``): one such round is fed back to the backend with every reason, and a
second one says the backend cannot write features this workspace accepts."""


def _gated_nothing(rounds: list[Iteration]) -> bool:
    """Whether these are the last NOTHING_GATED_ROUNDS rounds and none gated a candidate.

    >>> _gated_nothing([{"gated": 0}, {"gated": 0}]), _gated_nothing([{"gated": 0}])
    (True, False)
    """
    return len(rounds) == NOTHING_GATED_ROUNDS and not any(r["gated"] for r in rounds)


def over_budget(rounds: list[float], budget: float) -> bool:
    """Whether the seconds are spent, or would be by a next round as long as the last one:
    the loop stops before a round it cannot finish within the budget, not one round after.

    The only stop rule that reads the clock, so a safety stop: its default
    (:attr:`LoopSettings.budget_seconds`) is far beyond the default rounds, and a run it stops
    is reported as partial (``autofe.pipelines.run.partial_fields``).

    >>> over_budget([40.0, 45.0], 120.0), over_budget([40.0, 45.0], 140.0)
    (True, False)
    """
    spent = sum(rounds)
    return spent >= budget or spent + (rounds[-1] if rounds else 0.0) > budget
