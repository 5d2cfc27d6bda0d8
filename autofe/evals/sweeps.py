"""Sweep options of a lab workspace: each sweep run's truth, price and out-of-time prediction.

A lab sweep point is one job with one set of parameters on one virtual day, run under every
candidate configuration (runs tagged ``sweep``). The hourly price is the cluster's
``hourly_price`` or, for lab workspaces, the ``tag.lab_hourly_price_usd`` custom tag.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from autofe.evals.cost import Option
from autofe.modeling.evaluate import Evaluation
from autofe.warehouse.connect import open_warehouse

SWEEP_SQL = """
SELECT
  r.run_id,
  concat_ws('|', r.job_id, CAST(r.parameters AS VARCHAR), CAST(sf.value AS VARCHAR),
            CAST(day.value AS VARCHAR)) AS point,
  r.cluster_config_id,
  coalesce(c.hourly_price, price.value) AS hourly_price,
  r.duration_s
FROM runs AS r
JOIN run_attributes AS s ON s.run_id = r.run_id AND s.name = 'tag.sweep' AND s.value = 1
LEFT JOIN run_attributes AS sf ON sf.run_id = r.run_id AND sf.name = 'tag.lab_scale_factor'
LEFT JOIN run_attributes AS day ON day.run_id = r.run_id AND day.name = 'tag.lab_virtual_day'
LEFT JOIN run_attributes AS price
  ON price.run_id = r.run_id AND price.name = 'tag.lab_hourly_price_usd'
LEFT JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id
WHERE r.status = 'SUCCEEDED' AND r.duration_s > 0
"""


def sweep_options(db: Path, evaluation: Evaluation) -> list[Option]:
    """Options for every sweep run that ``evaluation`` predicted and that has a price."""
    with open_warehouse(db, read_only=True) as con:
        rows = _rows(con)
    index = {run_id: i for i, run_id in enumerate(evaluation.run_ids)}
    high = evaluation.bounds[0.9][1]
    return [
        Option(
            point,
            str(config),
            float(price),
            float(seconds),
            float(evaluation.predicted[index[run_id]]),
            float(high[index[run_id]]),
        )
        for run_id, point, config, price, seconds in rows
        if run_id in index and price is not None
    ]


def _rows(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str, float | None, float]]:
    return [
        (str(r), str(p), str(c), pr, float(d))
        for r, p, c, pr, d in con.execute(SWEEP_SQL).fetchall()
    ]
