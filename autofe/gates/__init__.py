"""The gates a feature must pass before the evaluator scores it.

A new gate is a new module plus one entry in ``GATES``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from autofe.featurespec import FeatureSpec
from autofe.gates.completeness import check_completeness
from autofe.gates.context import Gate, GateContext, GateSettings, Reason
from autofe.gates.cost import check_cost
from autofe.gates.leakage import check_leakage
from autofe.gates.leakage_static import check_static_leakage

GATES: tuple[Gate, ...] = (check_completeness, check_leakage, check_cost)

WITHOUT_RUNNING: dict[Gate, tuple[Gate | None, str]] = {
    check_leakage: (check_static_leakage, "dynamic check"),
    check_cost: (None, ""),
}
"""What a gate still checks once an earlier gate's run of the query was stopped by a sandbox
limit, and what it leaves out. The static leakage check reads only the SQL; the dynamic one
would run the query again (in the unperturbed warehouse and every world) and be stopped again
after as long: ``features check`` took 22 s for one such feature, twice the 10 s timeout. The
cost gate (``None``: nothing of it runs) would run it on two samples of the warehouse to learn
what the limit already said."""

__all__ = ["GATES", "GateContext", "GateSettings", "Reason", "Verdict", "run_gates"]


@dataclass(frozen=True)
class Verdict:
    """The gates' decision on one feature, with every reason and the time each gate took."""

    feature_id: str
    name: str
    reasons: list[Reason] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Checks not run, by gate, with why ("dynamic check not run: ...", or "not run: ..." when
    the whole gate was skipped)."""

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
            "skipped": self.skipped,
        }


def run_gates(spec: FeatureSpec, ctx: GateContext) -> Verdict:
    """Run every gate on ``spec``; all run, so a rejected feature gets all its reasons.

    Once a gate's run of the query was stopped by the timeout or the memory limit, later gates
    check only what needs no run (:data:`WITHOUT_RUNNING`), and the verdict says what was
    skipped: the feature is rejected once, for the limit, instead of being stopped again. SQL a
    gate found unreadable (nested too deeply to walk) is walked by no later gate: they are
    skipped, with why.
    """
    reasons: list[Reason] = []
    seconds: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for gate in GATES:
        name = gate.__name__.removeprefix("check_")
        run, note = _plan(gate, reasons)
        if note is not None:
            skipped[name] = note
        if run is None:
            continue
        started = time.perf_counter()
        reasons.extend(run(spec, ctx))
        seconds[name] = round(time.perf_counter() - started, 4)
    return Verdict(spec.feature_id, spec.name, reasons, seconds, skipped)


def _plan(gate: Gate, reasons: list[Reason]) -> tuple[Gate | None, str | None]:
    """What of ``gate`` runs after ``reasons`` (None: nothing), and what is left out and why."""
    unreadable = next((r for r in reasons if r.unreadable), None)
    if unreadable is not None:
        return None, (
            f"not run: the {unreadable.gate} gate could not read the SQL ({unreadable.unreadable})"
        )
    stopped = next((r for r in reasons if r.stopped_by), None)
    if stopped is None or gate not in WITHOUT_RUNNING:
        return gate, None
    fallback, left_out = WITHOUT_RUNNING[gate]
    why = f"the query already exceeded {stopped.stopped_by} in the {stopped.gate} gate"
    if fallback is None:
        return None, f"not run: {why}"
    return fallback, f"{left_out} not run: {why}"
