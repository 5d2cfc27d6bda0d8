"""Time-ordered splits: every evaluation row was submitted after every row the model learnt from.

Shuffled K-fold on job histories leaks the future (a run's successors teach the model its own
label's neighbourhood); expanding-window folds are what a deployed model experiences.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

from autofe.errors import ConfigError


def time_folds(
    n: int, folds: int = 5, min_train: float = 0.4
) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """Expanding-window (train, test) index pairs over ``n`` rows already in time order.

    The first ``min_train`` share is always training; the rest is cut into ``folds`` test
    blocks, each trained on everything before it.

    >>> [(len(a), len(b)) for a, b in time_folds(10, folds=3, min_train=0.4)]
    [(4, 2), (6, 2), (8, 2)]
    """
    if folds < 1 or not 0 < min_train < 1:
        raise ConfigError(
            f"time folds need folds ≥ 1 and 0 < min_train < 1, got {folds}, {min_train}"
        )
    start = int(n * min_train)
    if n - start < folds or start < 2:
        raise ConfigError(f"{n} labelled runs are too few for {folds} time-ordered folds")
    bounds = np.linspace(start, n, folds + 1).astype(int)
    index = np.arange(n)
    return [(index[:a], index[a:b]) for a, b in itertools.pairwise(bounds)]
