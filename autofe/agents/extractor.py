"""The extractor: materialise each candidate through the tools server, nothing else.

``materialize_feature`` runs the gates (completeness, leakage) and, for a feature that passes,
computes and stores its value for every run in the feature store; the extractor only records
the verdict. A tool failure for one candidate is that candidate's rejection, not the run's end.
"""

from __future__ import annotations

from collections.abc import Sequence

from autofe.agents.state import Candidate, Materialized
from autofe.agents.toolbox import Toolbox
from autofe.errors import AgentError


async def extract(candidates: Sequence[Candidate], tools: Toolbox) -> list[Materialized]:
    """Every candidate's verdict, in order."""
    return [await materialize(c, tools) for c in candidates]


async def materialize(candidate: Candidate, tools: Toolbox) -> Materialized:
    args = {
        "name": candidate["name"],
        "sql": candidate["sql"],
        "category": candidate["category"],
        "value_type": candidate["value_type"],
        "rationale": candidate["rationale"][:2000],
    }
    try:
        result = await tools.call("materialize_feature", args)
    except AgentError as exc:
        return _failed(candidate, "tool", str(exc))
    reasons = [f"{r['gate']}/{r['code']}: {r['message']}" for r in result.get("reasons", [])]
    first = result.get("reasons") or [{}]
    return Materialized(
        name=candidate["name"],
        feature_id=str(result.get("feature_id", "")),
        accepted=bool(result.get("accepted")),
        gate="" if result.get("accepted") else str(first[0].get("gate", "")),
        reasons=reasons,
        coverage=result.get("coverage"),
    )


def _failed(candidate: Candidate, gate: str, reason: str) -> Materialized:
    return Materialized(
        name=candidate["name"],
        feature_id="",
        accepted=False,
        gate=gate,
        reasons=[reason],
        coverage=None,
    )
