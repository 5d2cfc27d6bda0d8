"""The gates a feature must pass before the evaluator scores it.

A new gate is a new module plus one entry in ``GATES``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from autofe.agents.gates.completeness import check_completeness
from autofe.agents.gates.context import Gate, GateContext, GateSettings, Reason
from autofe.agents.gates.leakage import check_leakage
from autofe.featurespec import FeatureSpec

GATES: tuple[Gate, ...] = (check_completeness, check_leakage)

__all__ = ["GATES", "GateContext", "GateSettings", "Reason", "Verdict", "run_gates"]


@dataclass(frozen=True)
class Verdict:
    """The gates' decision on one feature, with every reason and the time each gate took."""

    feature_id: str
    name: str
    reasons: list[Reason] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict[str, object]:
        return {
            "feature_id": self.feature_id,
            "name": self.name,
            "accepted": self.accepted,
            "reasons": [r.as_dict() for r in self.reasons],
            "seconds": self.seconds,
        }


def run_gates(spec: FeatureSpec, ctx: GateContext) -> Verdict:
    """Run every gate on ``spec``; all run, so a rejected feature gets all its reasons."""
    reasons: list[Reason] = []
    seconds: dict[str, float] = {}
    for gate in GATES:
        started = time.perf_counter()
        reasons.extend(gate(spec, ctx))
        seconds[gate.__name__.removeprefix("check_")] = round(time.perf_counter() - started, 4)
    return Verdict(spec.feature_id, spec.name, reasons, seconds)
