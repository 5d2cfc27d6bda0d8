"""Challenger against champion: one window of recent runs, one procedure, one rule.

Both feature sets are scored the same way: their features computed on today's warehouse, a
model fit (same seed, same procedure as ``autofe train``) on every labelled run submitted
before the window, and its predictions on the window scored. The deployed artifacts are not
compared as they are: the challenger's was refit on every run, the window included, and the
champion's was refit on every run of its day, which overlaps the window whenever the window
reaches back before its promotion; either would score its own training runs. Refitting both on
the same runs before the window compares what the two feature sets predict about runs neither
has seen. When the window is exactly the runs since the last promotion, the champion refit is
the deployed champion (same runs, same seed); its as-deployed score is reported beside it.

The nightly job also sets the loop's evaluator holdout to the window, so the challenger's
features were selected without looking at the runs it is judged on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from autofe.errors import ConfigError, ModelError
from autofe.modeling.artifact import Artifact
from autofe.modeling.dataset import FeatureValues, Labelled, build_dataset
from autofe.modeling.evaluate import Evaluation, evaluate_holdout, evaluate_model
from autofe.modeling.novelty import Novelty
from autofe.modeling.train import MIN_RUNS
from autofe.pipelines.train import HOLDOUT

MIN_FIT_SHARE = 0.5
"""At least half of the labelled runs stay before the window: both models are fit there, and
the loop's evaluator cross-validates on them."""
MIN_LABELLED = math.ceil(MIN_RUNS / MIN_FIT_SHARE)


@dataclass(frozen=True)
class Window:
    """The latest ``size`` labelled runs by submit time, on which both models are scored."""

    size: int
    labelled: int
    since_promotion: int
    rule: str
    first_submit: datetime | None = None

    @property
    def share(self) -> float:
        """The window as a share of the labelled runs (the loop's evaluator holdout)."""
        return self.size / self.labelled

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.size,
            "labelled": self.labelled,
            "since_promotion": self.since_promotion,
            "rule": self.rule,
            "first_submit": self.first_submit,
        }


def choose_window(
    labelled: Labelled, trained_through: datetime | None, recent: int | None
) -> Window:
    """``recent`` runs if given, else the larger of the latest 20 % and the runs submitted
    after the champion's last training run, at most half of the labelled runs.

    >>> from datetime import datetime as dt
    >>> runs = [(str(i), "j", dt(2026, 1, 1 + i % 28), 1.0) for i in range(100)]
    >>> choose_window(runs, None, None).size, choose_window(runs, None, 7).rule
    (20, '--recent')

    Raises:
        ConfigError: too few labelled runs, or ``recent`` outside 1 … half of them.
    """
    n = len(labelled)
    if n < MIN_LABELLED:
        raise ConfigError(
            f"{n} labelled runs are too few for a night: at least {MIN_LABELLED} (both models "
            f"train on at least half of them, {MIN_RUNS} runs or more)"
        )
    cap = math.floor(n * MIN_FIT_SHARE)
    since = sum(1 for r in labelled if trained_through and r[2] > trained_through)
    if recent is not None:
        if not 1 <= recent <= cap:
            raise ConfigError(
                f"--recent {recent}: must be between 1 and {cap} (half of the {n} labelled "
                "runs; the other half trains both models)"
            )
        size, rule = recent, "--recent"
    else:
        latest = math.ceil(n * HOLDOUT)
        size = max(latest, since)
        rule = "since the last promotion" if since > latest else f"latest {HOLDOUT * 100:.0f} %"
        if size > cap:
            size, rule = cap, f"{rule}, capped at half of the labelled runs"
    first = labelled[n - size][2] if 0 < size <= n else None
    return Window(size, n, since, rule, first)


@dataclass(frozen=True)
class Decision:
    """Whether the challenger replaces the champion, and why in one sentence."""

    promote: bool
    reason: str


def decide(
    challenger: float | None,
    champion: float | None,
    margin: float,
    champion_error: str | None = None,
) -> Decision:
    """Promote only a challenger whose window MAPE beats the champion's by ``margin``
    (relative: 0.02 asks for 2 % less error), or any challenger when there is no usable
    champion.

    >>> decide(0.312, 0.309, 0.02).reason
    'challenger MAPE 31.2 % vs champion 30.9 %: not better by 2 %'
    >>> decide(0.25, 0.309, 0.02).reason
    'challenger MAPE 25.0 % vs champion 30.9 %: 19.1 % better (margin 2 %)'
    >>> decide(0.3, None, 0.02)
    Decision(promote=True, reason='no active model')
    """
    if challenger is None:
        if champion is None and champion_error is None:
            return Decision(False, "the loop kept no features and there is no active model")
        return Decision(False, "the loop kept no features: there is no challenger")
    if champion is None:
        if champion_error is not None:
            return Decision(True, f"the active model cannot be scored ({champion_error})")
        return Decision(True, "no active model")
    gain = (champion - challenger) / champion if champion > 0 else -math.inf
    versus = f"challenger MAPE {_pct(challenger)} vs champion {_pct(champion)}"
    if gain >= margin:
        return Decision(True, f"{versus}: {_pct(gain)} better (margin {_pct(margin, 0)})")
    return Decision(False, f"{versus}: not better by {_pct(margin, 0)}")


def _pct(share: float, digits: int = 1) -> str:
    """
    >>> _pct(0.3125), _pct(0.02, 0)
    ('31.2 %', '2 %')
    """
    return f"{share * 100:.{digits}f} %"


def score_on_window(
    runs: Labelled,
    values: FeatureValues,
    window: Window,
    novel: Novelty | None = None,
    seed: int = 0,
) -> Evaluation:
    """A feature set's window score: fit on the runs before the window, predict the window
    (``novel``: which runs are new to their job's history, for the intervals).

    Raises:
        ConfigError: too few runs before the window to fit.
    """
    data = build_dataset(runs, values, novel=novel)
    return evaluate_holdout(data, len(data) - window.size, seed)


def deployed_score(
    artifact: Artifact,
    runs: Sequence[Any],
    values: FeatureValues,
    novel: Novelty | None = None,
) -> Evaluation:
    """How a saved model, as it is, predicts ``runs`` ((run_id, job_id, submit, seconds) rows).

    Raises:
        ConfigError: no runs.
        ModelError: the model's feature columns are not the ones it names.
    """
    if not runs:
        raise ConfigError("no runs to score the deployed model on")
    model = artifact.model
    own = {name: values.get(name, {}) for name in model.features}
    data = build_dataset(list(runs), own, model.encoder, novel)
    if data.features != model.features:  # columns are matched by position
        raise ModelError(f"model features {model.features} are not in column order")
    return evaluate_model(model, data)


def metrics_of(evaluation: Evaluation | None) -> dict[str, object] | None:
    """An evaluation's JSON metrics (None stays None)."""
    return None if evaluation is None else evaluation.as_dict()
