"""Compute feature values in the read-only sandbox: the matrix a model learns from or predicts on.

Every feature is SQL returning ``(run_id, value)``; the values go through the sandbox (guards,
time and memory limits), never through a writable connection, whichever caller asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from autofe.errors import ModelError, SandboxViolation
from autofe.featurespec import FeatureSpec
from autofe.modeling.dataset import (
    LABELLED_SQL,
    Dataset,
    FeatureValues,
    Value,
    as_labelled,
    build_dataset,
)
from autofe.modeling.novelty import labelled_novelty
from autofe.sandbox.nesting import NestedTooDeeply, parse_statements
from autofe.sandbox.rewrite import restricted
from autofe.sandbox.session import QueryError, Sandbox


def compute_values(
    sandbox: Sandbox, specs: Sequence[FeatureSpec], run_ids: Sequence[str] | None = None
) -> dict[str, dict[str, Value]]:
    """feature name → run id → value, for every run or only ``run_ids``.

    Raises:
        ModelError: a feature's SQL failed or returned too many rows; the message names it.
    """
    return {spec.name: feature_values(sandbox, spec, run_ids) for spec in specs}


def feature_values(
    sandbox: Sandbox, spec: FeatureSpec, run_ids: Sequence[str] | None = None
) -> dict[str, Value]:
    """One feature's values (see :func:`compute_values`)."""
    sql = spec.sql if run_ids is None else restricted(parse_query(spec), run_ids)
    try:
        result = sandbox.query(sql)
    except (QueryError, SandboxViolation) as exc:
        raise ModelError(f"feature {spec.name} cannot be computed: {exc}") from exc
    if result.truncated:
        raise ModelError(
            f"feature {spec.name} returns more than {sandbox.limits.max_rows} rows (the "
            "sandbox's max_rows)"
        )
    return {str(row[0]): plain(row[1]) for row in result.rows if row[0] is not None}


def feature_matrix(db: Path, specs: Sequence[FeatureSpec]) -> Dataset:
    """The labelled runs of ``db`` (time order) with the values of ``specs``, not gated.

    Raises:
        ModelError, WarehouseError: a feature cannot be computed, the warehouse cannot be read.
    """
    with Sandbox.open(db) as sandbox:
        return labelled_matrix(sandbox, compute_values(sandbox, specs))


def labelled_matrix(sandbox: Sandbox, values: FeatureValues) -> Dataset:
    """The labelled runs ``sandbox`` reads (time order), with ``values`` as their features and
    which of them are new to their job's history."""
    runs = as_labelled(sandbox.query(LABELLED_SQL).rows)
    return build_dataset(runs, values, novel=labelled_novelty(sandbox))


def parse_query(spec: FeatureSpec) -> exp.Query:
    """The feature's single query.

    Raises:
        ModelError: the SQL is not one query, or is nested too deeply to rewrite.
    """
    try:
        statements = parse_statements(spec.sql)
    except SqlglotError as exc:
        raise ModelError(f"feature {spec.name}: SQL does not parse ({exc})") from exc
    except NestedTooDeeply as exc:
        raise ModelError(f"feature {spec.name}: SQL does not parse ({exc.reason})") from exc
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ModelError(f"feature {spec.name}: SQL must be exactly one SELECT query")
    return statements[0]


def plain(value: Any) -> Value:
    """A DuckDB cell as a model input: numbers as float, booleans kept, the rest as text.

    >>> plain(Decimal("1.5")), plain(True), plain(None), plain(date(2024, 3, 1))
    (1.5, True, None, '2024-03-01')
    """
    if value is None or isinstance(value, bool | str | float | int):
        return value
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)
