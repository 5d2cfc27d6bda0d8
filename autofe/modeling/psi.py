"""Population stability index: how far a feature's distribution moved between two eras.

The evaluator screens candidates with it (early against late training runs) and the nightly
job measures the champion's feature drift with it; one definition, so both mean the same shift.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from autofe.modeling.dataset import Value

EPSILON = 1e-4
"""Share given to an empty PSI bin, so a bin empty on one side counts as a large shift, not ∞."""


def psi(early: Sequence[Value], late: Sequence[Value], bins: int = 10) -> float:
    """Population stability index of ``late`` against ``early`` (0: same distribution).

    A tree model splits on the values it saw in past runs; when a feature's distribution moves
    between early and late runs (a counter that only grows, a job mix that changes) the learnt
    splits no longer describe new runs, and the model fails exactly where it is used. Numbers
    are cut into ``bins`` quantile bins of ``early``; text compares category frequencies. Missing
    values are ignored (coverage is the quality screen's business); an empty bin counts as a
    share of ``EPSILON``. Rule of thumb: < 0.1 stable, > 0.25 shifted.

    >>> psi([1.0, 2.0, 3.0, 4.0] * 25, [4.0, 3.0, 2.0, 1.0] * 25)
    0.0
    >>> round(psi(list(range(100)), list(range(50, 150))), 2)
    4.35
    >>> round(psi(["a", "b"] * 50, ["a"] * 90 + ["b"] * 10), 2)
    0.88
    """
    first = [v for v in early if v is not None]
    second = [v for v in late if v is not None]
    if not first or not second:
        return 0.0
    if any(isinstance(v, str) for v in (*first, *second)):
        e, s = _category_shares(first, second)
    else:
        e, s = _bin_shares(first, second, bins)
    e, s = np.maximum(e, EPSILON), np.maximum(s, EPSILON)
    return float(np.sum((s - e) * np.log(s / e)))


def _category_shares(
    early: Sequence[Value], late: Sequence[Value]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    a, b = Counter(map(str, early)), Counter(map(str, late))
    cats = sorted(a.keys() | b.keys())
    return (
        np.array([a[c] / len(early) for c in cats], dtype=np.float64),
        np.array([b[c] / len(late) for c in cats], dtype=np.float64),
    )


def _bin_shares(
    early: Sequence[Value], late: Sequence[Value], bins: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    a = np.array(early, dtype=np.float64)
    b = np.array(late, dtype=np.float64)
    edges = np.unique(np.quantile(a, np.linspace(0.0, 1.0, bins + 1)[1:-1]))

    def shares(x: NDArray[np.float64]) -> NDArray[np.float64]:
        counts = np.bincount(np.searchsorted(edges, x, side="right"), minlength=len(edges) + 1)
        return counts / len(x)

    return shares(a), shares(b)
