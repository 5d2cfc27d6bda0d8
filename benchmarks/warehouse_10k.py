"""A deterministic warehouse of exactly 10 000 runs for the gate benchmark.

Recipe (same bytes in, same warehouse out):

1. Ingest what the gates tests use, the example workspace, the 43 real event logs and C3O
   (4 697 runs; the event logs give stage, executor and SQL history), plus the Scout,
   CherryPick, Dataproc, Bell, Ruya and Ernest mappings from ``examples/mappings``
   (7 127 runs from 9 sources; Scout has real timestamps).
2. Top up to the target with replicas of the earliest C3O runs (ordered by submit time, then
   run id, so every C3O job gets a prefix of its history): run and job ids get the prefix
   ``c3o-replica:``, submit/start/end times move 4 000 days later (after every C3O run), and
   their ``run_attributes`` are copied. They keep their cluster configs.

Run: ``.venv/bin/python benchmarks/warehouse_10k.py OUT.duckdb [--runs 10000]``
"""

from __future__ import annotations

import argparse
from pathlib import Path

from autofe.config import REPO_DIR, IngestSettings, example_workspace, external_data_dir
from autofe.ingest.ingest import ingest
from autofe.warehouse.connect import open_warehouse

MAPPINGS = REPO_DIR / "examples" / "mappings"
EXTRA_MAPPINGS = (
    "c3o",
    "scout-multinode",
    "cherrypick",
    "dataproc-autoscaling",
    "bell",
    "ruya-crispy",
    "ernest",
)
SHIFT = "INTERVAL 4000 DAY"
PREFIX = "c3o-replica:"

PICK = (
    "CREATE TEMP TABLE picked AS SELECT run_id FROM runs WHERE source = 'c3o' "
    "ORDER BY submit_time, run_id LIMIT ?"
)
REPLICATE = (
    f"""INSERT INTO jobs (job_id, name, task_type, script_path, script_text, definition,
                          created_time, source)
    SELECT replace(job_id, 'c3o:', '{PREFIX}'), name, task_type, script_path, script_text,
           definition, created_time, 'c3o-replica'
    FROM jobs WHERE source = 'c3o'""",
    f"""INSERT INTO runs (run_id, job_id, submit_time, cluster_config_id, parameters,
                          script_text, source, start_time, end_time, duration_s, status)
    SELECT replace(r.run_id, 'c3o:', '{PREFIX}'), replace(r.job_id, 'c3o:', '{PREFIX}'),
           r.submit_time + {SHIFT}, r.cluster_config_id, r.parameters, r.script_text,
           'c3o-replica', r.start_time + {SHIFT}, r.end_time + {SHIFT}, r.duration_s, r.status
    FROM runs AS r JOIN picked USING (run_id)""",
    f"""INSERT INTO run_attributes (run_id, name, value, value_text, availability)
    SELECT replace(a.run_id, 'c3o:', '{PREFIX}'), a.name, a.value, a.value_text, a.availability
    FROM run_attributes AS a JOIN picked USING (run_id)""",
)


def build_warehouse(db: Path, external: Path, runs: int = 10_000) -> int:
    """Build the benchmark warehouse at ``db`` (a new file) and return its run count.

    Raises:
        ValueError: the real inputs alone already hold more than ``runs`` runs, or too few
            C3O runs exist to fill the rest.
    """
    inputs = [example_workspace(), external / "spark-eventlogs"]
    inputs += [MAPPINGS / f"{name}.toml" for name in EXTRA_MAPPINGS]
    ingest(inputs, IngestSettings(db=db, workers=1))
    con = open_warehouse(db)
    try:
        real, c3o = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE source = 'c3o') FROM runs"
        ).fetchall()[0]
        if not 0 <= runs - real <= c3o:
            raise ValueError(f"{real} real runs ({c3o} C3O) cannot be topped up to {runs}")
        con.execute("BEGIN")
        con.execute(PICK, [runs - real])
        for statement in REPLICATE:
            con.execute(statement)
        con.execute("COMMIT")
        total: int = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
    finally:
        con.close()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("db", type=Path, help="where to write the warehouse (must not exist)")
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    external = external_data_dir()
    if external is None:
        raise SystemExit("warehouse_10k.py needs ../shared/data/external beside the checkout")
    if args.db.exists():
        raise SystemExit(f"{args.db} exists; give a new path")
    print(f"{args.db}: {build_warehouse(args.db, external, args.runs):,} runs")


if __name__ == "__main__":
    main()
