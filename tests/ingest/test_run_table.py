"""Generic run tables + TOML mappings → warehouse, checked on the real third-party datasets.

Row counts and durations are recomputed here with the ``csv`` module from hand-listed files
(not through the mapping's globs or DuckDB), then compared with what the mapping ingested.
"""

from __future__ import annotations

import csv
import gzip
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

import autofe.ingest.run_table.store as run_table_store
from autofe.errors import ConfigError
from autofe.ingest.run_table.ingest_run_table import ingest_run_table
from autofe.ingest.run_table.mapping import load_mapping
from autofe.schema import IngestReport
from autofe.warehouse.connect import open_warehouse

REPO = Path(__file__).resolve().parents[2]
MAPPINGS = REPO / "examples" / "mappings"
# The mappings reach the data as ../../../shared/data/external, i.e. beside this checkout.
EXTERNAL = REPO.parent / "shared" / "data" / "external"


Ingested = Callable[[str], tuple[Path, IngestReport]]


@dataclass(frozen=True)
class Case:
    """What one shipped mapping must import, established without the mapping."""

    files: tuple[str, ...]  # relative to EXTERNAL, listed by hand
    label: str  # label header as Python's csv module reads it
    to_seconds: float  # SOURCE.md unit → seconds
    rows: int  # data rows according to SOURCE.md
    sample: tuple[str, float]  # one run id and its duration in seconds, read off the file
    delimiter: str = ","
    skipped: int = 0


def _each(folder: str, *names: str) -> tuple[str, ...]:
    return tuple(f"{folder}/{name}" for name in names)


CHERRYPICK_JOBS = ("kmeans", "spark", "terasort", "tpcds", "tpch")
GPU = ("alexnet_pt", "alexnet_tf", "deepspeech_tf", "resnet50_pt", "resnet50_tf")
CASES: dict[str, Case] = {
    "c3o": Case(
        _each("c3o", "grep.tsv", "kmeans.tsv", "pagerank.tsv", "sgd.tsv", "sort.tsv"),
        "gross_runtime", 1.0, 4650, ("c3o:grep:1", 150.0), delimiter="\t",
    ),
    "scout-multinode": Case(
        ("scout-multinode/scout_osr_multiple_nodes_flat.csv",),
        "elapsed_time_s", 1.0, 1242,
        ("scout-multinode:10_c4.2xlarge_join_spark_bigdata_1", 305.064),
    ),
    "cherrypick": Case(
        _each("cherrypick", *(f"CP_{j}.csv" for j in CHERRYPICK_JOBS)),
        "time", 1.0, 291, ("cherrypick:CP_kmeans:1", 936.59),
    ),
    "dataproc-autoscaling": Case(
        ("dataproc-autoscaling/regular_dataproc.csv",),
        "runtime", 1.0, 180, ("dataproc-autoscaling:regular_dataproc:1", 1898.11),
    ),
    "lynceus-tensorflow": Case(
        _each("lynceus-tensorflow", "t2_cnn_intermediate_values.csv",
              "t2_multilayer_intermediate_values.csv", "t2_rnn.csv"),
        "training_time", 1.0, 1152, ("lynceus-tensorflow:5ba8c2ae8e41fa053d293338", 609.510895),
    ),
    "polimi-gpudata": Case(
        _each("polimi-amllibrary/gpudata", *(f"{m}.csv" for m in (*GPU, "vgg19_pt", "vgg19_tf"))),
        "overall execution time(31)", 1.0, 4829, ("polimi-gpudata:alexnet_pt:1", 873.326117515564),
    ),
    "polimi-p8-kmeans": Case(
        ("polimi-amllibrary/P8_kmeans.csv.gz",),
        "applicationCompletionTime", 0.001, 528,
        ("polimi-p8-kmeans:application_1524838829941_0730", 763.544),
    ),
    "bell": Case(
        _each("bell", *(f"{j}.csv" for j in ("grep.spark", "kmeans.flink", "pagerank.spark",
                                              "sgd.spark", "tpchq10.flink", "wordcount.flink"))),
        "Runtime", 0.001, 630, ("bell:grep.spark:1", 846.235),
    ),
    "enel-ellis": Case(
        _each("enel-ellis", "ellis-gbt.csv", "ellis-kmeans.csv", "ellis-logisticregression.csv",
              "ellis-mpc.csv"),
        "DURATION_MS", 0.001, 6621, ("enel-ellis:GradientBoostedTrees-1-1", 199.626), delimiter="|",
    ),
    "ruya-crispy": Case(
        ("ruya-crispy/local_jobs.csv",), "runtime", 1.0, 80, ("ruya-crispy:local_jobs:1", 32.0),
    ),
    "ernest": Case(
        ("ernest/rcv1-parsed.csv",), " Time (s)", 1.0, 7, ("ernest:rcv1-parsed:1", 7.94516801834),
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def shared_data() -> Path:
    if not EXTERNAL.is_dir():
        pytest.skip("../shared/data/external is not beside this checkout (the mappings use it)")
    return EXTERNAL


def _records(path: Path, delimiter: str) -> list[list[str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as f:
        return list(csv.reader(f, delimiter=delimiter))


def _source_labels(shared_data: Path, case: Case) -> list[float]:
    """Every label of the case's files in seconds, read with the csv module."""
    labels: list[float] = []
    for name in case.files:
        header, *rows = _records(shared_data / name, case.delimiter)
        column = header.index(case.label)
        labels.extend(float(row[column]) * case.to_seconds for row in rows)
    return labels


def _ingest(db: Path, mapping: Path, table: Path | None = None) -> IngestReport:
    report = IngestReport()
    con = open_warehouse(db)
    try:
        ingest_run_table(con, mapping, report, table)
    finally:
        con.close()
    return report


def _query(db: Path, sql: str, params: list[object] | None = None) -> list[tuple[object, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def test_every_shipped_mapping_has_a_case() -> None:
    assert {p.stem for p in MAPPINGS.glob("*.toml")} == set(CASES)


@pytest.fixture(scope="module")
def ingested(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ingested]:
    """Ingest each shipped mapping once into its own warehouse; copy it before writing."""
    done: dict[str, tuple[Path, IngestReport]] = {}

    def ingest(name: str) -> tuple[Path, IngestReport]:
        if name not in done:
            db = tmp_path_factory.mktemp(name) / "w.duckdb"
            done[name] = db, _ingest(db, MAPPINGS / f"{name}.toml")
        return done[name]

    yield ingest


@pytest.mark.parametrize("name", sorted(CASES))
def test_mapping_imports_every_run_in_seconds(
    name: str, shared_data: Path, ingested: Ingested
) -> None:
    case = CASES[name]
    labels = _source_labels(shared_data, case)
    assert len(labels) == case.rows

    db, report = ingested(name)

    assert len(report.issues) == case.skipped
    assert report.runs == case.rows - case.skipped
    assert report.files_ingested == len(case.files)
    assert _query(db, "SELECT count(*) FROM runs WHERE source = ?", [name]) == [(report.runs,)]
    stored = [r[0] for r in _query(db, "SELECT duration_s FROM runs ORDER BY duration_s")]
    assert stored == pytest.approx(sorted(labels))
    run_id, seconds = case.sample
    assert _query(db, "SELECT duration_s FROM runs WHERE run_id = ?", [run_id]) == [
        (pytest.approx(seconds),)
    ]


COUNTS = "SELECT count(*) FROM runs UNION ALL SELECT count(*) FROM run_attributes"


@pytest.mark.parametrize("name", sorted(CASES))
def test_reingest_adds_nothing(name: str, ingested: Ingested, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    shutil.copy(ingested(name)[0], db)
    before = _query(db, COUNTS)

    again = _ingest(db, MAPPINGS / f"{name}.toml")

    assert (again.runs, again.jobs, again.files_ingested) == (0, 0, 0)
    assert again.files_unchanged == len(CASES[name].files)  # one per table file
    assert _query(db, COUNTS) == before


def test_scout_censored_runs_are_kept_with_their_status(
    shared_data: Path, ingested: Ingested
) -> None:
    """completed=false: TIMEOUT when the 2 h limit was hit, FAILED when it stopped earlier."""
    db = ingested("scout-multinode")[0]
    with (shared_data / "scout-multinode/scout_osr_multiple_nodes_flat.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    unfinished = [float(r["elapsed_time_s"]) for r in rows if r["completed"] == "False"]
    expected = {
        "TIMEOUT": sum(t >= 7200 for t in unfinished),
        "FAILED": sum(t < 7200 for t in unfinished),
        "SUCCEEDED": len(rows) - len(unfinished),
    }
    assert expected == {"TIMEOUT": 37, "FAILED": 38, "SUCCEEDED": 1167}
    found = {str(s): n for s, n in _query(db, "SELECT status, count(*) FROM runs GROUP BY 1")}
    assert found == expected
    timeout = _query(db, "SELECT min(duration_s) FROM runs WHERE status = 'TIMEOUT'")[0][0]
    assert timeout == pytest.approx(7200.0, abs=1.0)  # label kept as measured


def test_lynceus_runs_below_target_accuracy_are_timeouts(
    shared_data: Path, ingested: Ingested
) -> None:
    db = ingested("lynceus-tensorflow")[0]
    below = 0
    for name in CASES["lynceus-tensorflow"].files:
        with (shared_data / name).open(newline="") as f:
            below += sum(float(r["acc"]) < 0.85 for r in csv.DictReader(f))
    assert below == 301
    assert _query(db, "SELECT count(*) FROM runs WHERE status = 'TIMEOUT'") == [(below,)]


def _availability(db: Path) -> dict[str, set[object]]:
    rows = _query(db, "SELECT DISTINCT name, availability FROM run_attributes")
    found: dict[str, set[object]] = {}
    for name, availability in rows:
        found.setdefault(str(name), set()).add(availability)
    return found


def test_availability_tags_follow_the_mapping(ingested: Ingested) -> None:
    db = ingested("scout-multinode")[0]
    tags = _availability(db)
    assert tags["input_size_bytes"] == tags["datasize"] == {"known_at_submit"}
    assert tags["throughput_cluster"] == tags["throughput_node"] == {"post_execution"}
    # The label, the status column and the consumed id / time / cluster columns are no attributes.
    consumed = {"elapsed_time_s", "completed", "run_id", "group", "timestamp", "node_count"}
    assert not consumed & set(tags)
    params = _query(db, "SELECT parameters FROM runs WHERE run_id LIKE '%10_c4.2xlarge_join%'")
    assert '"input_size_bytes": 187600626413' in str(params[0][0])
    assert "throughput" not in str(params[0][0])


def test_application_end_is_post_execution_for_its_jobs(ingested: Ingested) -> None:
    """Ellis rows are Spark jobs: the app's start precedes a job, the app's end does not."""
    db = ingested("enel-ellis")[0]
    tags = _availability(db)
    assert tags["STARTED_AT"] == tags["ID"] == tags["JOB_ID"] == {"known_at_submit"}
    assert tags["FINISHED_AT"] == tags["FINISHED_AT_1"] == {"post_execution"}
    # The second STARTED_AT / FINISHED_AT pair (DuckDB: *_1) is the Spark job's own.
    times = "SELECT submit_time, end_time FROM runs WHERE run_id = ?"
    first = _query(db, times, ["enel-ellis:GradientBoostedTrees-1-1"])
    start, end = datetime(2021, 7, 4, 19, 22, 18, 926000), datetime(2021, 7, 4, 19, 25, 38, 552000)
    assert first == [(start, end)]


def test_stage_metrics_are_post_execution(shared_data: Path, ingested: Ingested) -> None:
    db = ingested("polimi-p8-kmeans")[0]
    tags = _availability(db)
    header = _records(shared_data / "polimi-amllibrary/P8_kmeans.csv.gz", ",")[0]
    known = {n for n, t in tags.items() if t == {"known_at_submit"}}
    assert known == {"users", "dataSize", "nContainers"}
    assert {n for n, t in tags.items() if t == {"post_execution"}} == set(header) - known - {
        "run",
        "applicationCompletionTime",
    }


CONFIG_OF = (
    "SELECT c.node_type, c.num_workers, c.vcpu_per_node, c.memory_gb_per_node, c.hourly_price "
    "FROM runs r JOIN cluster_configs c ON r.cluster_config_id = c.config_id WHERE r.run_id = ?"
)


def test_cluster_fields_are_mapped_and_shared(shared_data: Path, ingested: Ingested) -> None:
    cherry = _query(ingested("cherrypick")[0], CONFIG_OF, ["cherrypick:CP_kmeans:1"])
    assert cherry == [("c4.2xlarge", 10, 8.0, 15.0, pytest.approx(0.552 * 10))]
    # C3O gives cluster totals (16 slots, 30000 MB over 2 nodes): per node 8 vCPU, 15 GB.
    db = ingested("c3o")[0]
    assert _query(db, CONFIG_OF, ["c3o:sort:1"]) == [("c4.2xlarge", 2, 8.0, 15.0, None)]
    combos = set()
    for name in CASES["c3o"].files:
        with (shared_data / name).open(newline="") as f:
            combos |= {
                (r["machine_type"], r["instance_count"]) for r in csv.DictReader(f, delimiter="\t")
            }
    configs = "SELECT count(DISTINCT cluster_config_id) FROM runs WHERE source = 'c3o'"
    assert _query(db, configs) == [(len(combos),)]


def test_synthetic_submit_times_follow_row_order(ingested: Ingested) -> None:
    db = ingested("bell")[0]
    times = _query(db, "SELECT run_id, submit_time FROM runs WHERE job_id = 'bell:grep.spark'")
    by_row = {str(run_id): submit for run_id, submit in times}
    assert by_row["bell:grep.spark:1"] == datetime(2000, 1, 1)
    assert by_row["bell:grep.spark:3"] == datetime(2000, 1, 3)
    overlaps = "SELECT count(*) FROM runs WHERE end_time >= submit_time + INTERVAL 1 DAY"
    assert _query(db, overlaps) == [(0,)]  # each run ends before the next row is submitted


def _copy_with_labels(src: Path, dest: Path, labels: dict[int, str], delimiter: str) -> None:
    """Copy a real table, replacing the label (last column) of some 1-based data rows."""
    header, *rows = _records(src, delimiter)
    for row_number, label in labels.items():
        rows[row_number - 1][-1] = label
    with dest.open("w", newline="") as f:
        csv.writer(f, delimiter=delimiter, lineterminator="\n").writerows([header, *rows])


def test_rows_without_a_numeric_label_are_skipped_and_reported(
    shared_data: Path, tmp_path: Path
) -> None:
    db, table = tmp_path / "w.duckdb", tmp_path / "grep.tsv"
    _copy_with_labels(shared_data / "c3o/grep.tsv", table, {3: "", 10: "n/a"}, "\t")

    report = _ingest(db, MAPPINGS / "c3o.toml", table)

    assert report.runs == 810 - 2
    assert [(i.line, i.path) for i in report.issues] == [(4, str(table)), (11, str(table))]
    assert "empty" in report.issues[0].reason
    assert "not a number: 'n/a'" in report.issues[1].reason
    assert _query(db, "SELECT line FROM ingest_issues ORDER BY line") == [(4,), (11,)]
    assert _query(db, "SELECT count(*) FROM runs WHERE run_id = 'c3o:grep:3'") == [(0,)]


def test_status_skip_leaves_censored_runs_out(shared_data: Path, tmp_path: Path) -> None:
    mapping = tmp_path / "scout.toml"
    text = (MAPPINGS / "scout-multinode.toml").read_text()
    text = text.replace("../../../shared/data/external", str(shared_data))
    mapping.write_text(text + '\n[status]\nskip = ["TIMEOUT", "FAILED"]\n')

    report = _ingest(tmp_path / "w.duckdb", mapping)

    assert (report.runs, len(report.issues)) == (1167, 75)
    assert all("status.skip" in issue.reason for issue in report.issues)


def test_changed_table_replaces_its_runs(shared_data: Path, tmp_path: Path) -> None:
    db, table = tmp_path / "w.duckdb", tmp_path / "rcv1-parsed.csv"
    _ingest(db, MAPPINGS / "ernest.toml")
    _copy_with_labels(shared_data / "ernest/rcv1-parsed.csv", table, {1: "9.5"}, ",")

    report = _ingest(db, MAPPINGS / "ernest.toml", table)

    assert (report.runs, report.files_ingested, report.jobs) == (7, 1, 0)
    assert _query(db, "SELECT count(*) FROM runs") == [(7,)]
    assert _query(db, "SELECT duration_s FROM runs WHERE run_id = 'ernest:rcv1-parsed:1'") == [
        (9.5,)
    ]
    assert _query(db, "SELECT count(*) FROM run_attributes") == [(7 * 2,)]


def test_a_failed_write_keeps_nothing_of_the_file(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "w.duckdb"

    def broken(*_: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(
        run_table_store, "record_issues", broken
    )  # called after the rows are inserted
    with pytest.raises(RuntimeError, match="disk full"):
        _ingest(db, MAPPINGS / "dataproc-autoscaling.toml")
    for table in ("runs", "jobs", "cluster_configs", "run_attributes", "ingested_files"):
        assert _query(db, f"SELECT count(*) FROM {table}") == [(0,)], table
    monkeypatch.undo()
    assert _ingest(db, MAPPINGS / "dataproc-autoscaling.toml").runs == 180


# ---- bad mappings: ConfigError names the file and the key ------------------------------------

GOOD = """
source = "ernest"
files = "{table}"
[job_id]
constant = "lr"
[label]
column = "Time (s)"
unit = "s"
[attributes]
known_at_submit = ["#Cores", "Input Fraction"]
"""


def _write_mapping(tmp_path: Path, text: str, shared_data: Path | None = None) -> Path:
    table = shared_data / "ernest/rcv1-parsed.csv" if shared_data else tmp_path / "absent.csv"
    path = tmp_path / "bad.toml"
    path.write_text(text.replace("{table}", str(table)))
    return path


def test_good_base_mapping_loads(shared_data: Path, tmp_path: Path) -> None:
    assert _ingest(tmp_path / "w.duckdb", _write_mapping(tmp_path, GOOD, shared_data)).runs == 7


NO_LABEL = GOOD.replace('[label]\ncolumn = "Time (s)"\nunit = "s"\n', "")
LOAD_ERRORS = {
    "no label": (NO_LABEL, r"label: Field required"),
    "unknown unit": (GOOD.replace('"s"', '"sec"'), r"label\.unit: Input should be 's'"),
    "misspelt key": (
        GOOD.replace('unit = "s"', 'units = "s"'),
        r"label\.unit: Field required; label\.units: Extra inputs",
    ),
    "bad toml": (GOOD.replace('constant = "lr"', 'constant = "lr'), r"invalid TOML: .*line 5"),
    "label known": (
        GOOD.replace('"#Cores",', '"#Cores", "Time (s)",'),
        r"attributes\.known_at_submit: 'Time \(s\)' is the label",
    ),
    "two job ids": (
        GOOD.replace('constant = "lr"', 'constant = "lr"\ncolumn = "#Cores"'),
        r"job_id: Value error, give exactly one of",
    ),
    "job from measured": (
        GOOD.replace('constant = "lr"', 'template = "lr-{Time (s)}"'),
        r"job_id\.template: column 'Time \(s\)' is measured after the run",
    ),
}


@pytest.mark.parametrize("case", sorted(LOAD_ERRORS))
def test_bad_mapping_is_rejected_on_load(case: str, tmp_path: Path) -> None:
    text, message = LOAD_ERRORS[case]
    path = _write_mapping(tmp_path, text)
    with pytest.raises(ConfigError, match=re.escape(str(path)) + ": " + message):
        load_mapping(path)


INGEST_ERRORS = {
    "label column absent": (
        GOOD.replace('column = "Time (s)"', 'column = "runtime"'),
        r"label\.column: column 'runtime' is not in rcv1-parsed\.csv",
    ),
    "unassigned column": (
        GOOD.replace('"#Cores", ', ""),
        r"attributes: columns \['#Cores'\] of rcv1-parsed\.csv are not assigned",
    ),
    "attribute absent": (
        GOOD.replace('"#Cores",', '"#Cores", "cores",'),
        r"attributes\.known_at_submit: column 'cores' is not in",
    ),
}


@pytest.mark.parametrize("case", sorted(INGEST_ERRORS))
def test_mapping_that_does_not_fit_the_table_is_rejected(
    case: str, shared_data: Path, tmp_path: Path
) -> None:
    text, message = INGEST_ERRORS[case]
    path = _write_mapping(tmp_path, text, shared_data)
    with pytest.raises(ConfigError, match=re.escape(str(path)) + ": " + message):
        _ingest(tmp_path / "w.duckdb", path)
    assert _query(tmp_path / "w.duckdb", "SELECT count(*) FROM runs") == [(0,)]


def test_missing_table_file_is_a_config_error(tmp_path: Path) -> None:
    path = _write_mapping(tmp_path, GOOD)  # files points at tmp_path/absent.csv
    with pytest.raises(ConfigError, match=re.escape(str(path)) + r": files: no file matches"):
        _ingest(tmp_path / "w.duckdb", path)


def test_missing_mapping_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read mapping"):
        load_mapping(tmp_path / "nope.toml")


def _shipped() -> Iterator[Path]:
    yield from sorted(MAPPINGS.glob("*.toml"))


@pytest.mark.parametrize("path", list(_shipped()), ids=lambda p: p.stem)
def test_shipped_mappings_load_without_data(path: Path) -> None:
    mapping = load_mapping(path)
    assert mapping.spec.source == path.stem
    assert mapping.spec.label.unit in {"s", "ms"}


def test_synthetic_start_and_step_are_configurable(shared_data: Path, tmp_path: Path) -> None:
    text = GOOD + "[submit_time]\nsynthetic_start = 2024-03-01T00:00:00Z\nsynthetic_step_s = 60\n"
    db = tmp_path / "w.duckdb"
    _ingest(db, _write_mapping(tmp_path, text, shared_data))
    times = [r[0] for r in _query(db, "SELECT submit_time FROM runs ORDER BY submit_time")]
    assert times == [datetime(2024, 3, 1) + timedelta(minutes=i) for i in range(7)]


# ---- damaged rows and tables: an issue each, the rest goes on ---------------------------------

ROWS_MAPPING = """
source = "t"
files = "runs.csv"
[job_id]
constant = "lr"
[label]
column = "Time (s)"
unit = "s"
[cluster]
num_workers = { column = "#Cores", scale = 0.25 }
[attributes]
known_at_submit = ["#Cores", "Input Fraction"]
"""


def _table(tmp_path: Path, rows: str) -> Path:
    (tmp_path / "runs.csv").write_text("#Cores,Input Fraction,Time (s)\n" + rows)
    mapping = tmp_path / "m.toml"
    mapping.write_text(ROWS_MAPPING)
    return mapping


def test_a_row_out_of_range_is_an_issue_naming_its_line_and_field(tmp_path: Path) -> None:
    mapping = _table(tmp_path, "4,0.5,7.9\n8,0.5,1e300\n40000000000,0.5,3.0\n16,0.25,4.7\n")
    report = _ingest(tmp_path / "w.duckdb", mapping)
    table = str(tmp_path / "runs.csv")
    assert [(i.path, i.line, i.reason, i.fatal) for i in report.issues] == [
        (table, 3, "label column 'Time (s)' is out of range: 1e+300 s", False),
        (table, 4, "cluster.num_workers: 10000000000.0 is out of range (0 to 2^31-1)", False),
    ]
    assert (report.runs, report.files_ingested) == (2, 1)


def test_a_table_whose_every_row_is_refused_is_skipped_and_not_recorded(tmp_path: Path) -> None:
    mapping = _table(tmp_path, "4,0.5,n/a\n8,0.5,-3\n")
    db = tmp_path / "w.duckdb"
    report = _ingest(db, mapping)
    table = str(tmp_path / "runs.csv")
    [fatal] = [i for i in report.issues if i.fatal]
    assert (fatal.path, fatal.line) == (table, None)
    assert fatal.reason == (
        "no run ingested: all 2 rows were refused "
        "(first, line 2: label column 'Time (s)' is not a number: 'n/a')"
    )
    assert (report.runs, report.files_ingested) == (0, 0)
    assert _query(db, "SELECT count(*) FROM ingested_files") == [(0,)]
    assert _query(db, "SELECT count(*) FROM ingest_issues WHERE fatal") == [(1,)]
    (tmp_path / "runs.csv").write_text("#Cores,Input Fraction,Time (s)\n4,0.5,7.9\n")
    assert _ingest(db, mapping).runs == 1  # fixed: ingested by the next run


def test_an_unreadable_table_skips_that_table_and_the_next_goes_on(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_bytes(b"\xff\xfe\x00garbage\x00" * 100)
    (tmp_path / "b.csv").write_text("#Cores,Input Fraction,Time (s)\n4,0.5,7.9\n")
    mapping = tmp_path / "m.toml"
    mapping.write_text(ROWS_MAPPING.replace('files = "runs.csv"', 'files = ["a.csv", "b.csv"]'))
    report = _ingest(tmp_path / "w.duckdb", mapping)
    [fatal] = [i for i in report.issues if i.fatal]
    assert fatal.path == str(tmp_path / "a.csv") and fatal.reason.startswith("cannot read table")
    assert (report.runs, report.files_ingested) == (1, 1)
