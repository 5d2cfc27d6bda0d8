"""Time-ordered splits: every evaluation row was submitted after every row the model learnt from.

Shuffled K-fold on job histories leaks the future (a run's successors teach the model its own
label's neighbourhood); expanding-window folds are what a deployed model experiences.

A cut never falls between runs submitted at the same instant (a schedule's midnight, a sweep,
the same pipeline for many teams): the model that predicts one of them could not have learnt
from another, which had not finished either. Given the submit times, every cut moves forward
past such runs (:func:`tie_safe`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from autofe.errors import ConfigError


def tie_safe(cut: int, times: Sequence[object] | None) -> int:
    """``cut`` moved forward until the rows either side of it were submitted at different times.

    >>> tie_safe(2, [1, 2, 2, 2, 3]), tie_safe(1, [1, 2, 2, 2, 3]), tie_safe(2, None)
    (4, 1, 2)
    """
    if times is None:
        return cut
    while 0 < cut < len(times) and times[cut] == times[cut - 1]:
        cut += 1
    return cut


def holdout_cut(times: Sequence[object], holdout: float) -> int:
    """The index of the first holdout row: the latest ``holdout`` share of rows in time order,
    less any submitted at the same instant as the last training row.

    >>> holdout_cut([1, 2, 3, 4, 5, 5, 5, 6, 7, 8], 0.5)
    7
    """
    return tie_safe(round(len(times) * (1.0 - holdout)), times)


def time_folds(
    n: int, folds: int = 5, min_train: float = 0.4, times: Sequence[object] | None = None
) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """Expanding-window (train, test) index pairs over ``n`` rows already in time order.

    The first ``min_train`` share is always training; the rest is cut into ``folds`` test
    blocks, each trained on everything before it. With ``times`` (the rows' submit times),
    no cut separates rows submitted at the same instant, and a block left empty is dropped.

    >>> [(len(a), len(b)) for a, b in time_folds(10, folds=3, min_train=0.4)]
    [(4, 2), (6, 2), (8, 2)]
    >>> [(len(a), len(b)) for a, b in time_folds(10, 3, 0.4, times=[0, 1, 2, 3, 3, 3, 3, 4, 5, 6])]
    [(7, 1), (8, 2)]
    """
    if folds < 1 or not 0 < min_train < 1:
        raise ConfigError(
            f"time folds need folds ≥ 1 and 0 < min_train < 1, got {folds}, {min_train}"
        )
    start = int(n * min_train)
    if n - start < folds or start < 2:
        raise ConfigError(f"{n} labelled runs are too few for {folds} time-ordered folds")
    bounds = [tie_safe(int(b), times) for b in np.linspace(start, n, folds + 1)]
    index = np.arange(n)
    pairs = [(index[:a], index[a:b]) for a, b in itertools.pairwise(bounds) if b > a]
    if not pairs:
        raise ConfigError(f"the latest {n - start} of {n} runs were all submitted at one instant")
    return pairs
