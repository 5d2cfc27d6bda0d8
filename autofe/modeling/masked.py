"""Feature values with some runs' outcomes hidden: the world of a configuration never run on.

A generated feature may read other runs' outcomes (the last duration of the same job, the
stage metrics of its earlier runs): honest at submit time, because only runs that ended before
it are read. Under a protocol that holds out a configuration or a machine type, though, the
earlier runs on that configuration are exactly what the protocol says the model has never seen.
So each fold computes its features on a copy of the warehouse in which the held-out runs'
post-execution data is gone: their ``runs`` outcome columns are NULL (status, times, duration),
their post-execution ``run_attributes`` and every event-log row (stages, applications...) are
deleted. The held-out runs stay as rows (their known-at-submit columns are what a prediction
reads); labels come from the original warehouse.

Every run's values come from the copy that hid its own fold (:func:`out_of_fold_values`), the
training runs' as well as the test runs': a model trained on runs that could read their own
configuration's history (a replicate a few rows earlier) learns to trust it, and is then
misled on a held-out configuration where that history is gone. Hiding each run's own fold for
everyone makes the training rows look like the test rows, as out-of-fold target encoding does.

Here (in the modeling layer) because both the third-party protocols (:mod:`autofe.evals`) and
the loop's evaluator (the what-if score, :mod:`autofe.agents.whatif`) hold configurations out.
The evaluator uses :func:`masked_values` but not :func:`out_of_fold_values`: it judges
features for the product's model, which is trained on every run's real history, so a fold's
training rows keep the values they have with only that fold hidden (the reason is in
:mod:`autofe.agents.whatif`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
from numpy.typing import NDArray

from autofe.featurespec import FeatureSpec
from autofe.modeling.compute import compute_values
from autofe.modeling.dataset import FeatureValues, Labelled, Value
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import Sandbox

Folds = list[tuple[NDArray[np.intp], NDArray[np.intp]]]


def masked_values(
    db: Path,
    specs: Sequence[FeatureSpec],
    hidden: Sequence[str],
    limits: SandboxLimits | None = None,
) -> FeatureValues:
    """Values of ``specs`` for every run, computed as if ``hidden`` runs had not finished.

    Raises:
        ModelError: a feature's SQL fails on the masked copy.
    """
    with tempfile.TemporaryDirectory(prefix="autofe-masked-") as tmp:
        copy = Path(tmp) / "masked.duckdb"
        shutil.copyfile(db, copy)
        hide_outcomes(copy, hidden)
        with Sandbox.open(copy, limits) as sandbox:
            return compute_values(sandbox, specs)


def submit_time_only(db: Path, specs: Sequence[FeatureSpec]) -> list[FeatureSpec]:
    """The ``specs`` whose values stay the same when no run has an outcome: they read only
    what is known at submit (configuration, parameters, table statistics, the calendar), not
    the history of earlier runs.

    That is the set for a configuration a job has never run on: its history on other
    configurations describes other hardware, and a model that learnt to trust it is misled.
    """
    with duckdb.connect(str(db), read_only=True) as con:
        every = [r for (r,) in con.execute("SELECT run_id FROM runs").fetchall()]
    seen, blind = masked_values(db, specs, []), masked_values(db, specs, every)
    return [s for s in specs if seen[s.name] == blind[s.name]]


def hide_outcomes(db: Path, hidden: Sequence[str]) -> None:
    """Remove the post-execution data of ``hidden`` runs from ``db`` (in place: a copy)."""
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TEMP TABLE hidden AS SELECT unnest(?::VARCHAR[]) AS run_id", [list(hidden)]
        )
        for table, columns in _post_execution(con).items():
            _hide(con, table, columns)


def _post_execution(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Tables with a ``run_id`` column and their post-execution columns."""
    rows = con.execute(
        "SELECT c.table_name, c.column_name FROM column_catalog AS c "
        "WHERE c.availability = 'post_execution' AND c.table_name IN ("
        "  SELECT table_name FROM column_catalog WHERE column_name = 'run_id')"
    ).fetchall()
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(str(table), []).append(str(column))
    return out


def _hide(con: duckdb.DuckDBPyConnection, table: str, columns: list[str]) -> None:
    """``runs`` keeps the row with its outcome columns NULL; other tables lose the rows."""
    where = "run_id IN (SELECT run_id FROM hidden)"
    if table == "runs":
        assignments = ", ".join(f'"{c}" = NULL' for c in columns)
        con.execute(f"UPDATE runs SET {assignments} WHERE {where}")
    elif table == "run_attributes":
        con.execute(f"DELETE FROM run_attributes WHERE availability = 'post_execution' AND {where}")
    else:
        con.execute(f'DELETE FROM "{table}" WHERE {where}')


def out_of_fold_values(
    db: Path, runs: Labelled, specs: Sequence[FeatureSpec], folds: Folds
) -> FeatureValues:
    """Each run's values of ``specs`` computed with its own fold's runs hidden (one masked
    copy per fold); runs in no test fold get none."""
    merged: dict[str, dict[str, Value]] = {spec.name: {} for spec in specs}
    for _, test in folds:
        ids = [runs[i][0] for i in test]
        for name, by_run in masked_values(db, specs, ids).items():
            merged[name].update((r, by_run.get(r)) for r in ids)
    return merged
