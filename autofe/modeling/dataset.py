"""Feature values plus labels as a time-ordered matrix, with text features encoded stably.

Rows are the finished, successful runs with a positive duration, sorted by submit time, because
every split downstream (early stopping, calibration, cross-validation) must respect time: a
model may learn only from runs that ended before the ones it is judged on.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import duckdb
import numpy as np
from numpy.typing import NDArray

Value = float | int | str | bool | None
FeatureValues = Mapping[str, Mapping[str, Value]]
"""feature name → run id → value (what the feature store returns)."""


@dataclass(frozen=True)
class Encoder:
    """Text features as category codes learnt on training rows; unseen text becomes NaN."""

    vocab: Mapping[str, tuple[str, ...]]
    """Each text feature's values, sorted (a code is a value's position)."""

    @classmethod
    def fit(cls, features: Sequence[str], values: FeatureValues, run_ids: Sequence[str]) -> Encoder:
        vocab = {}
        for name in features:
            texts = {str(v) for r in run_ids if isinstance(v := values[name].get(r), str)}
            if texts:
                vocab[name] = tuple(sorted(texts))
        return cls(vocab)

    def encode(self, name: str, value: Value) -> float:
        """One cell as a float: numbers as is, booleans 0/1, text by its code, missing NaN."""
        if value is None:
            return math.nan
        if isinstance(value, str):
            codes = self.vocab.get(name, ())
            at = bisect.bisect_left(codes, value)  # sorted: a search, not a scan (51 k job ids)
            return float(at) if at < len(codes) and codes[at] == value else math.nan
        return float(value)


MANTISSA_BITS = 40
"""About 12 significant decimal digits."""


def stable(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """``x`` with every mantissa rounded to 40 bits. DuckDB sums doubles in parallel, in no
    fixed order, so one feature computed twice on the same warehouse can differ in its last
    bits; a tree's split threshold may fall between the two, and the loop then keeps other
    features in another process. Rounded, the matrix and everything fit on it repeat. Scaling
    by powers of two is exact and vectorised (a decimal rounding per cell cost 0.8 s per
    million cells); NaN, infinities and zeros pass unchanged.

    >>> bool(stable(np.array([0.1 + 0.2]))[0] == stable(np.array([0.3]))[0])
    True
    """
    mantissa, exponent = np.frexp(x)
    scale = 2.0**MANTISSA_BITS
    return np.ldexp(np.round(mantissa * scale) / scale, exponent)


@dataclass(frozen=True)
class Dataset:
    run_ids: tuple[str, ...]
    job_ids: tuple[str, ...]
    submit_times: tuple[datetime, ...]
    features: tuple[str, ...]
    x: NDArray[np.float64]
    seconds: NDArray[np.float64]
    encoder: Encoder
    novel: NDArray[np.bool_] | None = None
    """Whether each run is new to its job's history (:mod:`autofe.modeling.novelty`); None
    when the caller did not say, and intervals are then calibrated on every run alike."""

    def rows(self, index: NDArray[np.intp]) -> Dataset:
        """The subset at ``index`` (kept in time order)."""
        pick = sorted(int(i) for i in index)
        return Dataset(
            tuple(self.run_ids[i] for i in pick),
            tuple(self.job_ids[i] for i in pick),
            tuple(self.submit_times[i] for i in pick),
            self.features,
            self.x[pick],
            self.seconds[pick],
            self.encoder,
            None if self.novel is None else self.novel[pick],
        )

    def __len__(self) -> int:
        return len(self.run_ids)


LABELLED_SQL = (
    "SELECT run_id, coalesce(job_id, ''), submit_time, duration_s FROM runs "
    "WHERE status = 'SUCCEEDED' AND duration_s > 0 AND submit_time IS NOT NULL "
    "ORDER BY submit_time, run_id"
)
"""The labelled runs: successful, with a positive duration and a submit time, in submit order."""

Labelled = list[tuple[str, str, datetime, float]]


def labelled_runs(con: duckdb.DuckDBPyConnection) -> Labelled:
    """(run_id, job_id, submit_time, duration_s) of successful runs, in submit order."""
    return as_labelled(con.execute(LABELLED_SQL).fetchall())


def as_labelled(rows: Sequence[Sequence[object]]) -> Labelled:
    """Rows of :data:`LABELLED_SQL` (from any connection or sandbox) as typed tuples."""
    return [(str(r), str(j), t, float(d)) for r, j, t, d in rows]  # type: ignore[misc,arg-type]


Column = tuple[NDArray[np.float64], NDArray[np.object_] | None]
"""A feature's numbers over the runs (NaN where none), and its texts where a run has text
instead (None elsewhere), or None without any text."""


def columns_dataset(
    runs: Sequence[tuple[str, str, datetime, float]],
    columns: Mapping[str, Column],
    novel: Mapping[str, bool] | None = None,
) -> Dataset:
    """:func:`build_dataset` from columns aligned with ``runs``: the same matrix and encoder,
    without a Python object per cell (a million runs of 70 features are 70 M cells)."""
    features = tuple(sorted(columns))
    run_ids = [r[0] for r in runs]
    vocab: dict[str, tuple[str, ...]] = {}
    x = np.empty((len(run_ids), len(features)), dtype=np.float64)
    for j, name in enumerate(features):
        numbers, texts = columns[name]
        x[:, j] = numbers
        if texts is None:
            continue
        at = np.flatnonzero([t is not None for t in texts])
        codes = tuple(sorted({str(t) for t in texts[at]}))
        vocab[name] = codes
        index = {t: float(k) for k, t in enumerate(codes)}
        x[at, j] = [index[str(t)] for t in texts[at]]
    return Dataset(
        tuple(run_ids),
        tuple(r[1] for r in runs),
        tuple(r[2] for r in runs),
        features,
        stable(x),
        np.array([r[3] for r in runs], dtype=np.float64),
        Encoder(vocab),
        None if novel is None else np.array([bool(novel.get(r)) for r in run_ids], dtype=bool),
    )


def build_dataset(
    runs: Sequence[tuple[str, str, datetime, float]],
    values: FeatureValues,
    encoder: Encoder | None = None,
    novel: Mapping[str, bool] | None = None,
) -> Dataset:
    """The matrix of ``values`` over ``runs`` (a feature missing for a run is NaN); ``novel``:
    run id → new to its job's history (:func:`autofe.modeling.novelty.novel_runs`)."""
    features = tuple(sorted(values))
    run_ids = [r[0] for r in runs]
    encoder = encoder or Encoder.fit(features, values, run_ids)
    x = stable(
        np.array(
            [[encoder.encode(f, values[f].get(r)) for f in features] for r in run_ids],
            dtype=np.float64,
        ).reshape(len(run_ids), len(features))
    )
    return Dataset(
        tuple(run_ids),
        tuple(r[1] for r in runs),
        tuple(r[2] for r in runs),
        features,
        x,
        np.array([r[3] for r in runs], dtype=np.float64),
        encoder,
        None if novel is None else np.array([bool(novel.get(r)) for r in run_ids], dtype=bool),
    )
