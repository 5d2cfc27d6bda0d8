"""What one run of the loop is configured with: targets, limits, round size, the evaluator's.

Plain frozen dataclasses with no heavy imports, so the CLI can take its option defaults from
them (``autofe run --help`` shows these numbers) without loading the agents.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autofe.errors import ConfigError
from autofe.gates.context import GateSettings
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


LOOP_TIMEOUT_S = 60.0
"""The sandbox's per-query timeout inside the loop: a safety stop. With the 10 s default of an
interactive query, a feature whose dry run takes 6 s idle would be refused on a machine loaded
to half its speed, so the kept set would depend on the machine; at 60 s only a runaway query
(a self-join over every run pair) is stopped, and each refusal is reported
(``limit_refusals`` in ``metrics.json``)."""


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
    whatif_noise_z: float = 1.645
    """On a sample, standard errors of the what-if difference a set may also exceed the limit
    by (:attr:`families_share`): the rule overrides CV's choice only where a one-sided 95 % test
    says the whole warehouse's difference exceeds the tolerance. One standard error (the
    model-selection rule of thumb) was tried first: on a 31-job sample of the Ellis table it
    dropped the duration history at 1.18 of them, which on all 102 jobs scores no worse
    (docs/results.md, session 29). 0 compares the point estimates alone, as the loop always
    does on every job."""
    families_share: float = 1.0
    """The share of the warehouse's code families (jobs running one script; a job without a
    script is its own) the loop's runs hold: 1.0 unless the loop works on a sample (``autofe
    run`` sets it from ``sample.json``). The what-if rule stands in for the whole warehouse's
    judgement; the sample is stratified by family, so its difference has a standard error of
    the families left out: the one clustered by family times ``sqrt(1 - families_share)`` (the
    finite population correction). On every job, or a sample holding every family, the rule
    compares point estimates, as before."""
    seed: int = 0
    limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(timeout_s=LOOP_TIMEOUT_S))
    """Also the limits of the run's tools server (:mod:`autofe.pipelines.run` passes them), so
    the gates' dry runs get the same generous timeout."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.holdout < 1.0:
            raise ConfigError(f"evaluator holdout share must be in [0, 1), not {self.holdout}")


@dataclass(frozen=True)
class LoopSettings:
    """Targets, limits and round size of one run."""

    targets: Targets = field(default_factory=Targets)
    max_iterations: int = 2
    """Rounds: with ``per_round`` and the targets, what decides the kept set (never the clock).
    Measured on the shipped example (benchmarks/cycle.py, 2 cores, commit 2bc0620): two rounds
    of 70 take 103 s for the whole command (ingest and final fit included) with others' work
    beside it, 188 s beside two CPU burners, the same catalog both times. Three rounds (commit
    6b8a856, busy machine) took 316 s; the third cut CV MAPE from 29 % to 27 %.
    """
    budget_seconds: float = 1800.0
    """A safety stop, not a setting of the result: the rounds decide what is kept, and the loop
    stops on the clock only if a run takes about ten times the 188 s the default rounds took
    beside two CPU burners on 2 cores (a hung backend, a far larger workspace). When it fires
    the result is reported as partial (``metrics.json``, the report, the CLI), since a faster
    machine would have finished more rounds."""
    budget_tokens: int | None = None
    per_round: int = 70
    min_proposals: int = 0
    """Keep iterating until this many candidates were proposed, even with targets met."""
    sample_runs: int = 10_000
    """Above this many runs, the loop scores candidates on a sample of whole jobs of about this
    many runs, stratified by first submission and by the code each job runs; the final catalog
    is then computed, scored and fitted on every run (:mod:`autofe.pipelines.run_sample`).
    Twenty times the example: on a 100 000-run history a sample of 20 083 runs took 20 min of
    rounds and pruning on 2 cores beside other work (load 4 to 9), the whole run 30 min; the
    rounds' cost is about linear in the sample."""
    feature_budget_seconds: float = GateSettings.feature_budget_s
    """The cost gate's budget: a feature's projected time on a history ``cost_horizon`` times
    the workspace's (:mod:`autofe.gates.cost`)."""
    evaluation: EvalSettings = field(default_factory=EvalSettings)
