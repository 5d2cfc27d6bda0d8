"""Quality screens: whether a feature's values can help a model on the training runs at all.

Coverage is counted over the runs of the jobs a feature applies to (a job's own parameter exists
only for that job's runs); the completeness gate counts it the same way, from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from autofe.modeling.dataset import Value


def quality_issue(
    values: Mapping[str, Value], jobs: Mapping[str, str], min_coverage: float
) -> str | None:
    """Why a feature cannot help on the training runs (``jobs``: run id → job), or None.

    Too few values (among the runs of the jobs it gives a value for, as the completeness gate
    counts), NaN/inf, or a single distinct value give a model nothing to split on (or something
    it cannot split on), and would only cost CV time.

    >>> quality_issue({"a": 1.0, "b": 1.0}, {"a": "j", "b": "j"}, 0.5)
    'constant: every training run has 1.0'
    >>> quality_issue({"a": 1.0, "b": 2.0}, {"a": "j", "b": "j", "c": "other"}, 0.5) is None
    True
    """
    present = [v for r in jobs if (v := values.get(r)) is not None]
    covered, applicable = applicable_coverage({r for r in jobs if values.get(r) is not None}, jobs)
    share = covered / applicable if applicable else 0.0
    if share < min_coverage or not present:
        return f"coverage {share:.2f} below {min_coverage:.2f} on the training runs"
    bad = sum(not math.isfinite(v) for v in present if not isinstance(v, str))
    if bad:
        return f"{bad} NaN or infinite values on the training runs"
    if len(set(present)) < 2:
        return f"constant: every training run has {present[0]!r}"
    return None


def applicable_coverage(covered: set[Any], jobs: Mapping[Any, str]) -> tuple[int, int]:
    """(runs with a value, runs of the jobs that have any value).

    A job's own parameter (k of a k-means job, the window of a windowed report) exists only for
    that job's runs: measured over every run of a multi-job workspace it would look mostly
    missing, although it is there wherever it means something. So coverage counts the runs of
    the jobs it applies to; runs of no job form one group.

    >>> applicable_coverage({"r1", "r2"}, {"r1": "kmeans", "r2": "kmeans", "r3": "sort"})
    (2, 2)
    >>> applicable_coverage({"r1"}, {"r1": "kmeans", "r2": "kmeans", "r3": "sort"})
    (1, 2)
    """
    applies = {jobs[r] for r in covered}
    return len(covered), sum(1 for job in jobs.values() if job in applies)
