"""The data-leakage gate: a static lineage check and a dynamic perturbation check.

Both must pass. The static check proves from the SQL that post-execution facts only come
from runs that ended before the target's submission; the dynamic check recomputes the
feature in worlds where everything learnt at or after submission was altered or deleted,
catching what static analysis cannot see.
"""

from __future__ import annotations

from autofe.featurespec import FeatureSpec
from autofe.gates.context import GateContext, Reason
from autofe.gates.leakage_dynamic import check_dynamic_leakage
from autofe.gates.leakage_static import check_static_leakage

CHECKS = (check_static_leakage, check_dynamic_leakage)


def check_leakage(spec: FeatureSpec, ctx: GateContext) -> list[Reason]:
    """Reasons the feature leaks: every check runs, so the evidence is complete."""
    return [reason for check in CHECKS for reason in check(spec, ctx)]
