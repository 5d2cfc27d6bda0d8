"""The extract node: materialise each candidate through the tools server, nothing else.

``materialize_feature`` runs the gates (completeness, leakage) and, for a feature that passes,
computes and stores its value for every run in the feature store; the extractor only attaches
the verdict (:func:`gate_verdict` is the one place the tool's answer is read). A tool failure
for one candidate is that candidate's rejection, not the run's end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autofe.agents.context import LoopContext, Node
from autofe.agents.state import Feature, GateVerdict, LoopState
from autofe.agents.toolbox import Toolbox
from autofe.errors import AgentError


def extract_node(ctx: LoopContext) -> Node:
    """The node: this round's candidates with their gate verdicts."""

    async def extract_(state: LoopState) -> dict[str, Any]:
        started = ctx.clock()
        done = await extract(state.get("candidates", []), ctx.tools)
        ids = [f["gate"]["feature_id"] for f in done if f["gate"]["feature_id"]]
        seconds = {**state.get("phase_seconds", {}), "extract": ctx.clock() - started}
        return {"candidates": done, "proposed_ids": ids, "phase_seconds": seconds}

    return extract_


async def extract(candidates: Sequence[Feature], tools: Toolbox) -> list[Feature]:
    """Every candidate with its verdict, in order."""
    return [await materialize(c, tools) for c in candidates]


async def materialize(candidate: Feature, tools: Toolbox) -> Feature:
    """The candidate with the verdict of ``materialize_feature`` on it."""
    args = {
        "name": candidate["name"],
        "sql": candidate["sql"],
        "category": candidate["category"],
        "value_type": candidate["value_type"],
        "rationale": candidate["rationale"][:2000],
    }
    try:
        answer = await tools.call("materialize_feature", args)
    except AgentError as exc:
        return {**candidate, "gate": _failed("tool", str(exc))}
    return {**candidate, "gate": gate_verdict(answer)}


def gate_verdict(answer: Mapping[str, Any]) -> GateVerdict:
    """The MCP ``materialize_feature`` answer as the feature's gate verdict.

    >>> gate_verdict({"feature_id": "f1", "accepted": False, "coverage": None,
    ...     "reasons": [{"gate": "leakage", "code": "label", "message": "reads duration_s"}]})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'feature_id': 'f1', 'accepted': False, 'gate': 'leakage',
     'reasons': ['leakage/label: reads duration_s'], 'coverage': None}
    """
    reasons = [f"{r['gate']}/{r['code']}: {r['message']}" for r in answer.get("reasons", [])]
    first = answer.get("reasons") or [{}]
    return GateVerdict(
        feature_id=str(answer.get("feature_id", "")),
        accepted=bool(answer.get("accepted")),
        gate="" if answer.get("accepted") else str(first[0].get("gate", "")),
        reasons=reasons,
        coverage=answer.get("coverage"),
    )


def _failed(gate: str, reason: str) -> GateVerdict:
    return GateVerdict(feature_id="", accepted=False, gate=gate, reasons=[reason], coverage=None)
