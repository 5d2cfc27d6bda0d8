"""The evaluate node: which of a round's new features to keep, and feedback for the next round.

The extractor has already gated and materialised the round's candidates. Here each survivor is
screened for usefulness on the training runs (coverage, constant, NaN) and for stability over
time (PSI), then the feature set with the new features is scored by time-ordered
cross-validation under a monotone rule: a round may only keep features if the CV score of the
whole set stays at least the best so far (less a small tolerance). The set is also scored on
configurations held out with their outcomes hidden (the what-if score, :mod:`autofe.agents.whatif`),
and a round may not make that worse either: history that is perfect for the next rerun but says
nothing on a configuration the job has not run on is dropped there.

Everything here sees only the training runs: the labelled runs minus the latest ``holdout``
share by submit time, which stay unseen until the final report. Selecting features on the runs
the report is scored on would make the report flatter the loop.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autofe.agents.context import LoopContext, Node
from autofe.agents.settings import EvalSettings
from autofe.agents.state import Dropped, EvalVerdict, Feature, Iteration, LoopState
from autofe.agents.whatif import MaskedCache, WhatIfRound, code_families, whatif_folds
from autofe.errors import ConfigError, ModelError, first_line
from autofe.modeling.dataset import LABELLED_SQL, Labelled, Value, as_labelled, build_dataset
from autofe.modeling.evaluate import Evaluation, cross_validate
from autofe.modeling.importance import gain_shares
from autofe.modeling.metrics import Metrics
from autofe.modeling.psi import psi
from autofe.modeling.quality import quality_issue
from autofe.modeling.splits import holdout_cut
from autofe.modeling.train import fit
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import Sandbox
from autofe.warehouse.feature_store import read_store_values

log = logging.getLogger(__name__)

BUCKET_EDGES = (10.0, 100.0, 1000.0, 10000.0)
"""Runtime bucket edges (seconds) of the feedback's MAPE by bucket."""
BUCKETS = ("<10s", "10-100s", "100-1000s", "1000-10000s", ">=10000s")
WORST_JOBS = 5
TOP_FEATURES = 10
RUNS_PER_FEATURE = 10
"""Training runs per feature beyond which a round must improve the CV score to keep its
features, not only hold it: the old rule of thumb of ten observations per parameter. The
final set is pruned apart (:mod:`autofe.agents.prune`)."""
DEFAULT_SETTINGS = EvalSettings()


def evaluate_node(ctx: LoopContext, cache: MaskedCache | None = None) -> Node:
    """The node: the round's decisions, its record, and the feedback for the next round (the
    stop rule is the graph's, :func:`autofe.agents.graph.stop_after`). ``cache``: the kept
    features' masked values, computed once per loop (a new one when not given)."""

    cache = cache or MaskedCache()

    async def evaluate(state: LoopState) -> dict[str, Any]:
        started = ctx.clock()
        iteration = state.get("iteration", 0)
        new = state.get("candidates", [])
        history = state.get("history", [])
        result = evaluate_round(
            ctx.db,
            ctx.store,
            state.get("kept", []),
            new,
            iteration,
            best_r2(history),
            ctx.settings.evaluation,
            best_whatif=best_whatif(history),
            cache=cache,
        )
        score = {"r2": result.cv.r2, "mape": result.cv.mape, "mae_s": result.cv.mae_s}
        return {
            "kept": result.kept,
            "dropped": gate_drops(new, iteration) + result.dropped,
            "feedback": result.feedback,
            "history": [iteration_record(state, result, ctx.clock() - started)],
            "best_score": score,
            "iteration": iteration + 1,
            "phase_seconds": {},
        }

    return evaluate


def iteration_record(state: LoopState, result: RoundResult, seconds: float) -> Iteration:
    """The round's record; ``seconds`` is the evaluate node's, of which the what-if stage's
    are recorded apart (``whatif``), so the round's phases still sum to its seconds."""
    iteration = state.get("iteration", 0)
    new = state.get("candidates", [])
    phases = {
        **state.get("phase_seconds", {}),
        "evaluate": seconds - result.whatif_seconds,
        "whatif": result.whatif_seconds,
    }
    return Iteration(
        iteration=iteration,
        proposed=len(new),
        gated=sum(f["gate"]["accepted"] for f in new),
        kept=len(result.kept),
        features=len(state.get("kept", [])) + len(result.kept),
        cv_r2=result.cv.r2,
        cv_mape=result.cv.mape,
        whatif_mape=result.whatif_mape if math.isfinite(result.whatif_mape) else None,
        seconds={k: round(v, 3) for k, v in phases.items()},
        tokens=state.get("tokens", 0),
        malformed=sum(r["malformed"] for r in state.get("llm", []) if r["iteration"] == iteration),
    )


def gate_drops(features: Sequence[Feature], iteration: int) -> list[Dropped]:
    """The round's gate rejections, as drops (``gate:<name>``) beside the evaluator's own."""
    return [
        _dropped(f["name"], f"gate:{f['gate']['gate']}", "; ".join(f["gate"]["reasons"]), iteration)
        for f in features
        if not f["gate"]["accepted"]
    ]


def best_r2(history: Sequence[Iteration]) -> float | None:
    """The best CV R² so far: a round may score up to the tolerance below it, never the best
    itself drifting down round after round.

    >>> best_r2([]), best_r2([{"cv_r2": 0.5}, {"cv_r2": 0.49}])  # type: ignore[list-item]
    (None, 0.5)
    """
    scores = [h["cv_r2"] for h in history if h["cv_r2"] == h["cv_r2"]]  # NaN: nothing kept yet
    return max(scores, default=None)


def best_whatif(history: Sequence[Iteration]) -> float | None:
    """The lowest what-if MAPE so far (None before any, or when none was scored).

    >>> best_whatif([{"whatif_mape": 0.3}, {"whatif_mape": 0.2}, {"whatif_mape": None}, {}])
    0.2
    """
    scores = [h.get("whatif_mape") for h in history]
    return min((m for m in scores if m is not None and math.isfinite(m)), default=None)


@dataclass
class RoundResult:
    """One round's decisions: features kept and dropped here, the set's CV score, feedback."""

    kept: list[Feature]
    """The new features kept, with the evaluator's verdict attached."""
    dropped: list[Dropped]
    """Only the evaluator's drops (quality, stability, lift); gate rejections are the caller's."""
    cv: Metrics
    """Time-ordered CV of the feature set after this round (``n == 0`` when it is empty)."""
    feedback: dict[str, Any]
    seconds: float
    whatif_mape: float = math.nan
    """MAPE of the set after this round on held-out configurations (NaN: not scored)."""
    whatif_seconds: float = 0.0
    """Of ``seconds``, those the what-if folds took (masked copies, their values, the fits)."""


@dataclass(frozen=True)
class _Survivor:
    """A new feature that passed the quality and stability screens."""

    feature: Feature
    feature_id: str
    psi: float

    @property
    def name(self) -> str:
        return self.feature["name"]


@dataclass(frozen=True)
class _Trial:
    """One scored feature set: the features scored, the new ones left out for zero gain."""

    names: tuple[str, ...]
    pruned: tuple[str, ...]
    shares: dict[str, float]
    evaluation: Evaluation | None

    @property
    def r2(self) -> float:
        return self.evaluation.metrics.r2 if self.evaluation else math.nan


def training_runs(db: Path, settings: EvalSettings = DEFAULT_SETTINGS) -> Labelled:
    """The labelled runs the evaluator may use: all but the latest ``settings.holdout`` share.

    Raises:
        WarehouseError: no warehouse at ``db``, or it cannot be opened.
    """
    return labelled_and_training(db, settings)[1]


def labelled_and_training(db: Path, settings: EvalSettings) -> tuple[Labelled, Labelled]:
    """Every labelled run (time order) and the evaluator's training runs among them.

    Raises:
        WarehouseError: no warehouse at ``db``, or it cannot be opened.
        ConfigError: more labelled runs or jobs than the sandbox may return.
    """
    runs, _ = _read_warehouse(db, settings.limits)
    return runs, _without_holdout(runs, settings.holdout)


def _without_holdout(runs: Labelled, holdout: float) -> Labelled:
    """The head of ``runs`` (time order); the cut is the one ``train_model`` scores after."""
    return runs[: holdout_cut([r[2] for r in runs], holdout)]


def _read_warehouse(db: Path, limits: SandboxLimits) -> tuple[Labelled, dict[str, str]]:
    """Labelled runs in submit order, and job names by job id."""
    with Sandbox.open(Path(db), limits) as sandbox:
        labelled = sandbox.query(LABELLED_SQL)
        jobs = sandbox.query("SELECT job_id, name FROM jobs")
    if labelled.truncated or jobs.truncated:
        raise ConfigError(
            f"{db} has more labelled runs or jobs than the sandbox's max_rows "
            f"({limits.max_rows}): raise SandboxLimits.max_rows"
        )
    return as_labelled(labelled.rows), {str(j): str(n or "") for j, n in jobs.rows}


def evaluate_round(
    db: Path,
    store: Path,
    kept: Sequence[Feature],
    new: Sequence[Feature],
    iteration: int,
    best_r2: float | None,
    settings: EvalSettings = DEFAULT_SETTINGS,
    *,
    best_whatif: float | None = None,
    cache: MaskedCache | None = None,
) -> RoundResult:
    """Decide which of a round's accepted features to keep, score the set, write feedback.

    Monotone rule: the round's CV R² (log duration, training runs only) must be at least
    ``best_r2 - settings.tolerance``. If the set with every survivor scores worse, only the top
    half of them by gain is tried; if that is worse too, none is kept and the previous set (and
    its score) stands. So each iteration improves or keeps the holdout-free CV score, and a
    round of noise cannot undo earlier progress. New features with zero gain in the fit on all
    training runs are dropped before their set is cross-validated, so the reported score is
    exactly that of the kept set. The set CV chose must then pass the what-if rule
    (:func:`_whatif_screen`); features it drops get the stage ``whatif``. Without a what-if
    score (one configuration, too few runs per fold) the CV rule alone decides.

    Args:
        db: the warehouse (labelled runs, job names).
        store: the feature store the extractor wrote the round's values to.
        kept: every feature kept in earlier rounds.
        new: this round's candidates with the extractor's verdicts; rejected ones are skipped.
        iteration: the round number stamped on kept and dropped items.
        best_r2: the best CV R² so far (None on the first round: anything is accepted).
        settings: splits, thresholds, seed.
        best_whatif: the lowest what-if MAPE so far (None: no earlier what-if score).
        cache: masked values of earlier rounds' features (a new one computes them all).

    Returns:
        The new features kept and dropped here (previous ``kept`` are not repeated), the CV
        and what-if metrics of the resulting set, and the feedback for the next round.

    Raises:
        WarehouseError: the warehouse or the store is missing or unreadable.
        ConfigError: too few training runs for the folds or a fit.
    """
    started = time.perf_counter()
    inputs = _read_round(db, store, kept, new, settings, iteration)
    rule = _Rule(inputs.train, inputs.values, inputs.base, best_r2, best_whatif, settings)
    tried = _choose(inputs.train, inputs.values, inputs.base, inputs.new, best_r2, settings)
    whatif = _whatif_stage(db, inputs, tried[-1], rule, cache or MaskedCache())
    result = _decided(inputs, tried, whatif, rule, iteration)
    result.seconds = round(time.perf_counter() - started, 3)
    log.info(
        "round %d: kept %d of %d, CV R² %.4f, what-if MAPE %.4f (%.1f s)",
        *(iteration, len(result.kept), len(new), result.cv.r2, whatif.mape, whatif.seconds),
    )
    return result


def _decided(
    inputs: _Inputs, tried: list[_Trial], whatif: _WhatIfStage, rule: _Rule, iteration: int
) -> RoundResult:
    """The round's result from the CV trials and the what-if stage (seconds: the caller's)."""
    chosen = (whatif.screened.trials or tried)[-1]
    kept_now = [_kept(s, chosen, iteration) for s in inputs.survivors if s.name in chosen.names]
    dropped = inputs.screened_out + [
        d
        for s in inputs.survivors
        if (d := _lifted(s, tried, chosen, whatif.screened.reasons, rule, iteration))
    ]
    feedback = _feedback(chosen, dropped, inputs.categories, inputs.jobs, inputs.job_names)
    feedback["whatif"] = {"mape": _number(whatif.mape), "folds": whatif.folds}
    metrics = chosen.evaluation.metrics if chosen.evaluation else _no_metrics()
    return RoundResult(
        kept_now, dropped, metrics, feedback, 0.0, whatif.mape, round(whatif.seconds, 3)
    )


@dataclass(frozen=True)
class _Inputs:
    """What a round decides on: the runs, the screens' survivors and drops, every value."""

    runs: Labelled
    """Every labelled run (time order); the what-if copies hide the holdout among them."""
    train: Labelled
    job_names: dict[str, str]
    survivors: list[_Survivor]
    screened_out: list[Dropped]
    values: Mapping[str, Mapping[str, Value]]
    """Kept and surviving features' stored values, by name."""
    kept: tuple[Feature, ...]

    @property
    def base(self) -> tuple[str, ...]:
        return tuple(k["name"] for k in self.kept)

    @property
    def new(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.survivors)

    @property
    def jobs(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self.train}

    @property
    def categories(self) -> dict[str, str]:
        features = [*self.kept, *(s.feature for s in self.survivors)]
        return {f["name"]: f["category"] for f in features}


def _read_round(
    db: Path,
    store: Path,
    kept: Sequence[Feature],
    new: Sequence[Feature],
    settings: EvalSettings,
    iteration: int,
) -> _Inputs:
    """The training runs and stored values, with the round's candidates screened."""
    runs, job_names = _read_warehouse(db, settings.limits)
    train = _without_holdout(runs, settings.holdout)
    fresh = [f for f in new if f["gate"]["accepted"]]
    ids = [k["gate"]["feature_id"] for k in kept] + [f["gate"]["feature_id"] for f in fresh]
    # a round in which nothing passed the gates, before anything was kept, wrote no store yet
    stored = read_store_values(store, ids) if ids else {}
    survivors, dropped = _screen(fresh, kept, stored, train, settings, iteration)
    values = {k["name"]: stored[k["gate"]["feature_id"]] for k in kept}
    values |= {s.name: stored[s.feature_id] for s in survivors}
    return _Inputs(runs, train, job_names, survivors, dropped, values, tuple(kept))


def _screen(
    fresh: Sequence[Feature],
    kept: Sequence[Feature],
    stored: Mapping[str, Mapping[str, Value]],
    train: Labelled,
    settings: EvalSettings,
    iteration: int,
) -> tuple[list[_Survivor], list[Dropped]]:
    """Quality and stability screens, before any model is fit (they cost no CV)."""
    run_ids = [r[0] for r in train]
    jobs = {r[0]: r[1] for r in train}
    half = len(run_ids) // 2
    names = {k["name"] for k in kept}
    feature_ids = {k["gate"]["feature_id"] for k in kept}
    survivors: list[_Survivor] = []
    dropped: list[Dropped] = []
    for feature in fresh:
        name, feature_id = feature["name"], feature["gate"]["feature_id"]
        values = stored[feature_id]
        issue = _duplicate(name, feature_id, names, feature_ids)
        issue = issue or quality_issue(values, jobs, settings.min_coverage)
        if issue:
            dropped.append(_dropped(name, "quality", issue, iteration))
            continue
        shift = psi(
            [values.get(r) for r in run_ids[:half]], [values.get(r) for r in run_ids[half:]]
        )
        if shift > settings.psi_max:
            reason = f"PSI {shift:.3f} between early and late training runs > {settings.psi_max}"
            dropped.append(_dropped(name, "stability", reason, iteration))
            continue
        survivors.append(_Survivor(feature, feature_id, shift))
        names.add(name)
        feature_ids.add(feature_id)
    return survivors, dropped


def _duplicate(name: str, feature_id: str, names: set[str], feature_ids: set[str]) -> str | None:
    """The matrix is keyed by name: a second feature of one name would overwrite the first."""
    if name in names:
        return f"duplicate name: a feature called {name} is already in the set"
    if feature_id in feature_ids:
        return f"duplicate: feature {feature_id} is already in the set under another name"
    return None


def _dropped(name: str, stage: str, reason: str, iteration: int) -> Dropped:
    return Dropped(name=name, stage=stage, reason=reason, iteration=iteration)


def _choose(
    train: Labelled,
    values: Mapping[str, Mapping[str, Value]],
    base: tuple[str, ...],
    new: tuple[str, ...],
    best_r2: float | None,
    settings: EvalSettings,
) -> list[_Trial]:
    """The trials run, last one chosen: all survivors, then their top half, then none.

    At most three CV evaluations; the first is also the last when there is nothing new.
    """
    tried = [_trial(train, values, base, new, settings)]
    if _acceptable(tried[-1], base, best_r2, settings.tolerance, len(train)):
        return tried
    top = _top_half(tried[0], new)
    if top:
        tried.append(_trial(train, values, base, top, settings))
        if _acceptable(tried[-1], base, best_r2, settings.tolerance, len(train)):
            return tried
    tried.append(_trial(train, values, base, (), settings))
    return tried


def _acceptable(
    trial: _Trial, base: tuple[str, ...], best_r2: float | None, tol: float, runs: int
) -> bool:
    """Whether ``trial`` may stand (:func:`holds`); the previous set always does."""
    if best_r2 is None or math.isnan(best_r2) or set(trial.names) == set(base):
        return True
    return holds(trial.r2, len(trial.names), best_r2, tol, runs)


def holds(r2: float, features: int, best_r2: float, tol: float, runs: int) -> bool:
    """Whether a set of ``features`` scoring CV R² ``r2`` may replace the best so far: no worse
    than ``best_r2`` less ``tol``, or, once it has more features than ``runs`` training runs
    support (:data:`RUNS_PER_FEATURE`), better than the best by ``tol``: a set that large must
    show the gain that pays for it.

    >>> holds(0.50, 30, 0.50, 0.01, 400), holds(0.50, 50, 0.50, 0.01, 400)
    (True, False)
    >>> holds(0.52, 50, 0.50, 0.01, 400)
    True
    """
    if features > runs // RUNS_PER_FEATURE:
        return r2 >= best_r2 + tol
    return r2 >= best_r2 - tol


def _top_half(trial: _Trial, new: tuple[str, ...]) -> tuple[str, ...]:
    """The better half (by gain share) of the new features that had any gain; may be empty."""
    ranked = sorted((n for n in new if trial.shares.get(n, 0.0) > 0.0), key=_by_share(trial))
    return tuple(ranked[: len(ranked) // 2])


def _by_share(trial: _Trial) -> Callable[[str], tuple[float, str]]:
    """Sort key: larger gain share first, then by name (ties must not depend on input order)."""
    return lambda name: (-trial.shares[name], name)


def _trial(
    train: Labelled,
    values: Mapping[str, Mapping[str, Value]],
    base: tuple[str, ...],
    new: tuple[str, ...],
    settings: EvalSettings,
) -> _Trial:
    """Fit ``base + new`` on all training runs for gains, drop zero-gain new ones, then CV."""
    names = (*base, *new)
    if not names:
        return _Trial((), (), {}, None)
    shares = gain_shares(fit(build_dataset(train, _pick(values, names)), settings.seed))
    pruned = tuple(n for n in new if shares[n] <= 0.0)
    scored = tuple(n for n in names if n not in pruned)
    if not scored:
        return _Trial((), pruned, {}, None)
    data = build_dataset(train, _pick(values, scored))
    evaluation = cross_validate(data, settings.folds, settings.min_train, settings.seed)
    # zero-gain features add nothing to the total, so these shares still sum to 1 over `scored`
    return _Trial(scored, pruned, {n: shares[n] for n in scored}, evaluation)


def _pick(
    values: Mapping[str, Mapping[str, Value]], names: Sequence[str]
) -> dict[str, Mapping[str, Value]]:
    return {n: values[n] for n in names}


def _kept(survivor: _Survivor, chosen: _Trial, iteration: int) -> Feature:
    verdict = EvalVerdict(
        importance=round(chosen.shares[survivor.name], 6),
        psi=round(survivor.psi, 6),
        iteration=iteration,
    )
    return {**survivor.feature, "evaluation": verdict}


def _lifted(
    survivor: _Survivor,
    tried: Sequence[_Trial],
    chosen: _Trial,
    whatif: Mapping[str, str],
    rule: _Rule,
    iteration: int,
) -> Dropped | None:
    """Why a survivor is not in the ``chosen`` set (None when it is); ``tried`` are the sets
    the CV rule scored, ``whatif`` the what-if rule's reasons."""
    if survivor.name in chosen.names:
        return None
    if survivor.name in whatif:
        return _dropped(survivor.name, "whatif", whatif[survivor.name], iteration)
    if survivor.name in chosen.pruned or survivor.name in tried[0].pruned:
        return _dropped(survivor.name, "lift", "no gain", iteration)
    scores = " then ".join(f"{t.r2:.4f}" for t in tried[:-1])
    tol = rule.settings.tolerance
    reason = f"CV R² {scores} with it < best {rule.best_r2:.4f} − tolerance {tol}"
    return _dropped(survivor.name, "lift", reason, iteration)


@dataclass(frozen=True)
class _Rule:
    """What a round's candidate sets are judged against: the training runs and values, the set
    kept before, the best scores so far and the tolerances."""

    train: Labelled
    values: Mapping[str, Mapping[str, Value]]
    base: tuple[str, ...]
    best_r2: float | None
    best_whatif: float | None
    settings: EvalSettings

    def rescore(self, new: tuple[str, ...]) -> _Trial:
        return _trial(self.train, self.values, self.base, new, self.settings)

    def new_in(self, trial: _Trial) -> list[str]:
        return [n for n in trial.names if n not in self.base]


@dataclass(frozen=True)
class _Screened:
    """The what-if rule's work: the sets it scored after the CV choice, why it dropped features."""

    trials: list[_Trial]
    reasons: dict[str, str]


@dataclass(frozen=True)
class _WhatIfStage:
    """The what-if stage of one round: the rule's work, the chosen set's score, its cost."""

    screened: _Screened
    mape: float
    """What-if MAPE of the set the round ends with (NaN: no what-if score)."""
    folds: int
    seconds: float


def _whatif_stage(
    db: Path, inputs: _Inputs, chosen: _Trial, rule: _Rule, cache: MaskedCache
) -> _WhatIfStage:
    """The what-if rule on the set CV chose, timed (masked copies, their values, the fits).
    A feature that fails on a masked copy leaves the round without a what-if score (CV alone
    decides) rather than stopping the loop."""
    started = time.perf_counter()
    judge = _whatif_round(db, inputs, rule.settings, cache)
    if judge is None:
        return _WhatIfStage(_Screened([], {}), math.nan, 0, time.perf_counter() - started)
    try:
        judge.mape(chosen.names)  # the chosen set's values, computed in one batch
        screened = _whatif_screen(chosen, judge, rule)
        mape = judge.mape((screened.trials or [chosen])[-1].names)
    except ModelError as error:
        log.warning("no what-if score this round: %s", first_line(error))
        return _WhatIfStage(_Screened([], {}), math.nan, 0, time.perf_counter() - started)
    return _WhatIfStage(screened, mape, len(judge.folds), time.perf_counter() - started)


def _whatif_round(
    db: Path, inputs: _Inputs, settings: EvalSettings, cache: MaskedCache
) -> WhatIfRound | None:
    """The round's what-if scorer; None when it is off (infinite tolerance) or the training
    runs cannot support configuration folds (one configuration, too few runs per fold)."""
    features = [*inputs.kept, *(s.feature for s in inputs.survivors)]
    judge = whatif_round(db, inputs.runs, inputs.train, features, settings, cache)
    if judge is None and not math.isinf(settings.whatif_tolerance):
        log.info("no what-if score: the training runs cannot fill two configuration folds")
    return judge


def whatif_round(
    db: Path,
    runs: Labelled,
    train: Labelled,
    features: Sequence[Feature],
    settings: EvalSettings,
    cache: MaskedCache,
) -> WhatIfRound | None:
    """The what-if scorer of ``features`` on ``train`` (the head of the labelled ``runs``; the
    rest, the holdout, is hidden in every masked copy); None when the what-if score is off
    (infinite tolerance) or the training runs cannot fill two configuration folds."""
    if math.isinf(settings.whatif_tolerance):
        return None
    holdout = [r[0] for r in runs[len(train) :]]
    folds = whatif_folds(db, train, holdout, settings.limits)
    if not folds:
        return None
    by_name = {f["name"]: f for f in features}
    judge = WhatIfRound(db, train, folds, by_name, cache, settings.limits, settings.seed)
    if settings.families_share < 1.0:  # only a sample's rule weighs noise (``_noise``)
        judge.families = code_families(db, settings.limits)
    return judge


def _whatif_screen(chosen: _Trial, judge: WhatIfRound, rule: _Rule) -> _Screened:
    """The what-if rule on the set CV chose: its what-if MAPE may exceed neither the best so
    far nor that of the same set without the round's outcome-reading features, by more than
    the tolerance. Where it does, the outcome-reading new features are dropped greedily, the
    most harmful half first (harm: gain share × the share of runs whose value changes when
    their configuration is held out), each smaller set scored again by CV and what-if (with
    the features CV pruned for no gain beside the dropped ones back in the running).

    Only outcome-reading features are the rule's to judge: a set holding none of the round's
    passes it, and then only CV decides (when CV refuses it, the previous set stands). A feature
    no held-out outcome changes has the same values in every fold's world as in time, so it
    cannot carry the harm the score is there to catch; what the score says about it is the
    fold split's noise. Judged anyway, that noise could drop every feature of a round: on a
    4,008-run sample of the 10x replica round 0 kept none of its 66 gated candidates, and the
    shipped model scored 124.6 % holdout MAPE (the full-history loop: 21.6 %).

    At most about log2(n) + 2 what-if scores for n outcome-reading features.
    """
    new = rule.new_in(chosen)
    if not new:
        return _Screened([], {})
    candidates = [*new, *chosen.pruned]
    change: dict[str, float] = {}
    limit, reference = _whatif_limit(chosen, _harmful(chosen, judge, rule, change), judge, rule)
    reasons: dict[str, str] = {}
    trials: list[_Trial] = []
    current = chosen
    while not _passes(current, judge, rule, limit, left := _harmful(current, judge, rule, change)):
        why = _whatif_reason(current, judge, limit, reference, rule, left)
        drop = left[: math.ceil(len(left) / 2)] or rule.new_in(current)
        reasons |= {n: f"{why}; values change on {change[n]:.0%} of runs held out" for n in drop}
        current = rule.rescore(tuple(n for n in candidates if n not in reasons))
        trials.append(current)
    return _Screened(trials, reasons)


def _harmful(trial: _Trial, judge: WhatIfRound, rule: _Rule, change: dict[str, float]) -> list[str]:
    """The round's features in ``trial`` whose values change when their configuration is held
    out, most harmful first (ties by name); ``change`` keeps each one's share of changed runs."""
    new = rule.new_in(trial)
    change |= {n: judge.changed(n, rule.values[n]) for n in new if n not in change}
    harm = {n: change[n] * trial.shares.get(n, 0.0) for n in new}
    return sorted((n for n in new if change[n] > 0.0), key=lambda n: (-harm[n], n))


def _whatif_limit(
    chosen: _Trial, harmful: Sequence[str], judge: WhatIfRound, rule: _Rule
) -> tuple[float, str]:
    """The highest what-if MAPE the round's set may score, and what it was derived from."""
    refs = []
    if rule.best_whatif is not None:
        refs.append((rule.best_whatif, "best so far"))
    without = [n for n in chosen.names if n not in harmful]
    if harmful and without:
        refs.append((judge.mape(without), "the set without the round's outcome-reading features"))
    refs = [(m, what) for m, what in refs if math.isfinite(m)]
    if not refs:
        return math.inf, "nothing to compare with"
    best, what = min(refs)
    return best + rule.settings.whatif_tolerance, f"{what} {best:.4f}"


def _passes(
    trial: _Trial, judge: WhatIfRound, rule: _Rule, limit: float, harmful: Sequence[str]
) -> bool:
    """The previous set always stands; a larger one must pass CV, and the what-if limit too
    when it holds any of the round's outcome-reading features (``harmful``)."""
    if set(trial.names) == set(rule.base):
        return True
    cv_ok = _acceptable(trial, rule.base, rule.best_r2, rule.settings.tolerance, len(rule.train))
    return cv_ok and not (
        harmful and judge.mape(trial.names) > limit + _noise(trial, judge, rule, harmful)
    )


def _noise(trial: _Trial, judge: WhatIfRound, rule: _Rule, harmful: Sequence[str]) -> float:
    """How far above the limit a sampled loop's set may score by chance: ``whatif_noise_z``
    standard errors of its what-if difference from the same set without ``harmful`` (paired
    on the held-out runs, clustered by code family; :meth:`WhatIfRound.noise`), as an estimate
    of the whole warehouse's difference: times ``sqrt(1 - families_share)``, the families the
    sample leaves out. 0 on every job, and on a sample holding every family.

    A sampled loop decides for the warehouse, and on a few jobs the what-if score swings with
    a handful of runs: on a 648-run sample of ten of the Ellis table's 102 jobs (each its own
    family), round 0 dropped every duration-history feature for a what-if MAPE of 0.99 against
    0.79, a difference of 0.75 standard errors, and the catalog shipped without them scored
    116.7 % holdout MAPE against the full-history loop's 43.4 %; on all 102 jobs the same sets
    score 1.19 with the history and 1.22 without it. On every job the rule is the point
    estimates' alone: there, asked for one standard error, the example run kept six features
    the rule drops and its holdout MAPE went from 21.2 % to 37.1 %. Clustered by job instead
    of family, the 100 k replica's sample (ten copies of each of the example's families in
    510 jobs) counted 510 clusters, kept 16 more features in round 1 and scored 27.7 % against
    23.4 %.
    """
    share = min(max(rule.settings.families_share, 0.0), 1.0)
    if share >= 1.0 or rule.settings.whatif_noise_z == 0.0:
        return 0.0
    without = [n for n in trial.names if n not in harmful]
    z = rule.settings.whatif_noise_z
    return z * judge.noise(trial.names, without) * math.sqrt(1.0 - share)


def _whatif_reason(
    trial: _Trial,
    judge: WhatIfRound,
    limit: float,
    reference: str,
    rule: _Rule,
    harmful: Sequence[str],
) -> str:
    noise = _noise(trial, judge, rule, harmful) if harmful else 0.0
    if harmful and (mape := judge.mape(trial.names)) > limit + noise:
        tol = rule.settings.whatif_tolerance
        why = f"what-if MAPE {mape:.4f} with it > {reference} + tolerance {tol}"
        if noise > 0:
            z = rule.settings.whatif_noise_z
            unit = "standard error" if z == 1 else "standard errors"
            why += (
                f" + noise {noise:.4f} ({z:g} {unit} of the difference on a sample of "
                f"{rule.settings.families_share:.0%} of the code families, runs clustered by "
                "family)"
            )
        return why
    return f"CV R² {trial.r2:.4f} after the what-if drops < best {rule.best_r2} − tolerance"


def _no_metrics() -> Metrics:
    nan = math.nan
    return Metrics(n=0, r2=nan, mae_s=nan, mape=nan, median_ape=nan, within_10=nan, within_20=nan)


def _feedback(
    chosen: _Trial,
    dropped: Sequence[Dropped],
    categories: Mapping[str, str],
    jobs: Mapping[str, str],
    job_names: Mapping[str, str],
) -> dict[str, Any]:
    """What the next round's planner needs: where the model errs, what helps, what failed."""
    ev = chosen.evaluation
    return {
        "cv": {
            "r2": _number(ev.metrics.r2) if ev else None,
            "mape": _number(ev.metrics.mape) if ev else None,
            "n": ev.metrics.n if ev else 0,
        },
        "worst_jobs": _worst_jobs(ev, jobs, job_names) if ev else [],
        "worst_buckets": _worst_buckets(ev) if ev else [],
        "top_features": _top_features(chosen, categories),
        "dropped": [
            {"name": d["name"], "stage": d["stage"], "reason": d["reason"]} for d in dropped
        ],
    }


def _number(x: float) -> float | None:
    """Rounded for a prompt; None for NaN, which JSON cannot carry."""
    return round(x, 4) if math.isfinite(x) else None


def _ape(ev: Evaluation) -> NDArray[np.float64]:
    return np.abs(ev.predicted - ev.actual) / ev.actual


def _worst_jobs(
    ev: Evaluation, jobs: Mapping[str, str], names: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Jobs with the largest out-of-fold MAPE: where a new feature could help most."""
    errors: dict[str, list[float]] = {}
    for run_id, ape in zip(ev.run_ids, _ape(ev), strict=True):
        errors.setdefault(jobs[run_id], []).append(float(ape))
    ranked = sorted(errors.items(), key=lambda kv: (-float(np.mean(kv[1])), kv[0]))
    return [
        {
            "job_id": j,
            "job_name": names.get(j, ""),
            "mape": _number(float(np.mean(e))),
            "runs": len(e),
        }
        for j, e in ranked[:WORST_JOBS]
    ]


def _worst_buckets(ev: Evaluation) -> list[dict[str, Any]]:
    """Out-of-fold MAPE by runtime bucket (of the actual duration), worst first."""
    bucket = np.searchsorted(np.array(BUCKET_EDGES), ev.actual, side="right")
    ape = _ape(ev)
    rows = [
        {"bucket": label, "mape": _number(float(ape[bucket == i].mean())), "runs": int(n)}
        for i, label in enumerate(BUCKETS)
        if (n := int(np.sum(bucket == i)))
    ]
    return sorted(rows, key=lambda r: -(r["mape"] or 0.0))


def _top_features(chosen: _Trial, categories: Mapping[str, str]) -> list[dict[str, Any]]:
    ranked = sorted(chosen.names, key=_by_share(chosen))[:TOP_FEATURES]
    return [
        {"name": n, "importance": round(chosen.shares[n], 4), "category": categories.get(n, "")}
        for n in ranked
    ]
