"""What one run of the loop is configured with: targets, limits, round size, the evaluator's.

Plain frozen dataclasses with no heavy imports, so the CLI can take its option defaults from
them (``autofe run --help`` shows these numbers) without loading the agents.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autofe.errors import ConfigError
from autofe.sandbox.limits import SandboxLimits


@dataclass(frozen=True)
class Targets:
    """When to stop: every target given must be met by the holdout-free CV score."""

    r2: float | None = 0.90
    mape: float | None = 0.15
    mae_s: float | None = None

    def met(self, score: dict[str, float]) -> bool:
        """Whether ``score`` meets every target given.

        >>> Targets().met({"r2": 0.95, "mape": 0.1}), Targets().met({"r2": 0.95, "mape": 0.2})
        (True, False)
        """
        return (
            (self.r2 is None or score.get("r2", -1e9) >= self.r2)
            and (self.mape is None or score.get("mape", 1e9) <= self.mape)
            and (self.mae_s is None or score.get("mae_s", 1e9) <= self.mae_s)
        )


@dataclass(frozen=True)
class EvalSettings:
    """How the evaluator splits, screens and scores.

    ``limits`` are the sandbox limits the warehouse is read with: DuckDB refuses a second
    configuration of a file in one process, so they must match any sandbox this process already
    holds open on the warehouse (the MCP server's).
    """

    holdout: float = 0.2
    """The latest share of labelled runs (by submit time) the evaluator never reads."""
    folds: int = 4
    min_train: float = 0.5
    psi_max: float = math.inf
    """PSI above which a new feature is dropped as unstable. Off by default: every feature's PSI
    is measured and reported, but on a workspace whose job mix and data sizes change over the
    month (the example's) most useful features drift (job ids 3.8, input files 5.8) while pure
    noise already scores 0.14 on 160 runs per half; a screen at 0.25 dropped half the manual
    set and cut CV R² by 0.2."""
    min_coverage: float = 0.5
    tolerance: float = 0.002
    """CV R² points a round may lose against the best score and still count as no worse."""
    whatif_tolerance: float = 0.01
    """What-if MAPE (configurations held out, :mod:`autofe.agents.whatif`) a round may add
    and still count as no worse; ``math.inf`` turns the what-if score off."""
    seed: int = 0
    limits: SandboxLimits = field(default_factory=SandboxLimits)

    def __post_init__(self) -> None:
        if not 0.0 <= self.holdout < 1.0:
            raise ConfigError(f"evaluator holdout share must be in [0, 1), not {self.holdout}")


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
