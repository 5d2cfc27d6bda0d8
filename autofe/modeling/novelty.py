"""Which runs ask a *what-if* question: a setting their job's history has not run on.

A run is novel when no labelled run of its job that *ended before it was submitted* (successful,
with a duration: the history its features may read) had its cluster configuration, its node
type or its script version, or when its job has no such run at all. Runs submitted together (a
sweep of twenty repeats in one second) are all novel until one of them has finished.

Such a run is predicted from history measured elsewhere (other hardware, an older script), and
its error is of another kind than a rerun's. On the example workspace at issue #28's model code
(before this module), the 43 novel holdout runs scored 35.2 % MAPE and the pooled 80 % / 90 %
intervals covered 62.8 % / 88.4 % of them, while the 53 reruns scored 10.0 % and were covered
at 94.3 % / 100 %. :class:`~autofe.modeling.conformal.Calibration` therefore calibrates novel
and familiar runs apart (Mondrian conformal on novelty), and this module says which is which,
the same way for the calibration runs inside the training period and for a run being predicted.

A script version is the md5 of the run's script text, else its job's (what
``scripts/holdout_subset.py`` counts).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

from autofe.sandbox.session import Sandbox

SETTINGS = (
    "coalesce(r.cluster_config_id, '')",
    "coalesce(c.node_type, '')",
    "md5(coalesce(r.script_text, j.script_text, ''))",
)
"""The settings whose change makes a run novel: configuration, node type, script version."""
_FROM = (
    "FROM runs AS r LEFT JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id "
    "LEFT JOIN jobs AS j ON j.job_id = r.job_id "
)
_LABELLED = "r.status = 'SUCCEEDED' AND r.duration_s > 0 AND r.submit_time IS NOT NULL"
_ENDED = (
    "coalesce(r.end_time, coalesce(r.start_time, r.submit_time) + "
    "to_microseconds(CAST(round(r.duration_s * 1e6) AS BIGINT)))"
)
"""When a run's outcome became known (its end, else its start or submit time plus its duration)."""
NOVELTY_SQL = (
    f"SELECT r.run_id, coalesce(r.job_id, ''), r.submit_time, {_ENDED}, {', '.join(SETTINGS)} "
    f"{_FROM}WHERE {_LABELLED} ORDER BY r.submit_time, r.run_id"
)
"""The labelled runs in the model's order (:data:`~autofe.modeling.dataset.LABELLED_SQL`) with
their job, submit and end times and settings."""

Setting = tuple[str, int, str]
"""(job, which setting, its value)."""
Novelty = Mapping[str, bool]
"""Run id → new to its job's history."""


def novel_runs(rows: Sequence[Sequence[Any]]) -> dict[str, bool]:
    """Run id → novel, for rows of :data:`NOVELTY_SQL` (submit order).

    >>> rows = [("a", "j", 0, 5, "c1", "n", "s"), ("b", "j", 1, 6, "c1", "n", "s"),
    ...         ("c", "j", 7, 9, "c1", "n", "s"), ("d", "j", 8, 9, "c2", "n", "s")]
    >>> novel_runs(rows)
    {'a': True, 'b': True, 'c': False, 'd': True}
    """
    seen: set[Setting] = set()
    jobs: set[str] = set()
    running: list[tuple[Any, int, str, set[Setting]]] = []
    out: dict[str, bool] = {}
    for order, (run_id, job, submitted, ended, *values) in enumerate(rows):
        while running and running[0][0] <= submitted:
            _, _, done_job, done = heapq.heappop(running)
            seen |= done
            jobs.add(done_job)
        settings = _settings(str(job), values)
        out[str(run_id)] = str(job) not in jobs or not settings <= seen
        heapq.heappush(running, (ended, order, str(job), settings))
    return out


def labelled_novelty(sandbox: Sandbox) -> dict[str, bool]:
    """Run id → novel for every labelled run ``sandbox`` reads."""
    return novel_runs(sandbox.query(NOVELTY_SQL).rows)


def run_novelty(sandbox: Sandbox, run_id: str) -> bool | None:
    """Whether the run ``run_id`` (labelled or not: a pending run too) is novel against the
    labelled runs of its job that ended before it was submitted; None when the run has no
    submit time."""
    key = run_id.replace("'", "''")
    own = sandbox.query(
        f"SELECT coalesce(r.job_id, ''), r.submit_time, {', '.join(SETTINGS)} {_FROM}"
        f"WHERE r.run_id = '{key}'"
    ).rows
    if not own or own[0][1] is None:
        return None
    job, _, *values = own[0]
    earlier = sandbox.query(
        f"SELECT DISTINCT {', '.join(SETTINGS)} {_FROM}"
        f"CROSS JOIN (SELECT coalesce(job_id, '') AS job, submit_time AS t FROM runs "
        f"WHERE run_id = '{key}') AS me WHERE {_LABELLED} AND coalesce(r.job_id, '') = me.job "
        f"AND {_ENDED} <= me.t AND r.run_id <> '{key}'"
    ).rows
    if not earlier:
        return True
    seen = set().union(*(_settings(str(job), row) for row in earlier))
    return not _settings(str(job), values) <= seen


def _settings(job: str, values: Sequence[object]) -> set[Setting]:
    """The job's non-empty settings among ``values`` (in :data:`SETTINGS` order)."""
    return {(job, i, str(v)) for i, v in enumerate(values) if v not in (None, "")}
