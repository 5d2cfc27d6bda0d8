"""The ``autofe`` command line: thin commands that delegate to library functions."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Column, Table
from typer.core import TyperGroup

from autofe import __version__
from autofe.agents.llm import LLMSettings
from autofe.agents.settings import LoopSettings
from autofe.config import DEFAULT_DB, IngestSettings, example_workspace, workspace_path
from autofe.console import (
    EXIT_PARTIAL,
    EXIT_REJECTED,
    EXIT_USER_ERROR,
    err,
    out,
    state,
    user_errors,
)
from autofe.errors import AutofeError, autofe_error_in
from autofe.evals.cli import eval_app
from autofe.gates.context import GateSettings
from autofe.knowledge_base.cli import kb_app
from autofe.lab.cli import lab_app
from autofe.pipelines.triggers_cli import triggers_app
from autofe.run_dir import RunDir
from autofe.scheduler.cli import schedule_app
from autofe.special_file import special_file

if TYPE_CHECKING:
    from autofe.pipelines.nightly import NightlyResult, NightlySettings


class _Guarded(TyperGroup):
    """The top-level command group: refuses special files among the arguments up front.

    Every path a command takes (a warehouse, a model, a jobs file, a feature file...) reaches
    some ``open``; a FIFO there blocks forever and a device can stream without end. Checking
    the arguments here, before any command runs, covers every command and every option
    (``ingest`` refuses each input itself, so that one such input skips only itself).
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # ctx: Any, as typer types it with its vendored click (a private module)
        # ingest checks each input itself: a special file is one skipped input of the batch
        for arg in [] if args[:1] == ["ingest"] else args:
            value = arg.partition("=")[2] if arg.startswith("--") and "=" in arg else arg
            refused = special_file(value)
            if refused is not None:
                err.print(f"[bold red]error:[/] {escape(value)} {refused}", highlight=False)
                raise typer.Exit(EXIT_USER_ERROR)
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_Guarded,
    name="autofe",
    help="Predict how long a Spark / Databricks job will run before it is submitted.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
warehouse_app = typer.Typer(help="Inspect the telemetry warehouse.", no_args_is_help=True)
app.add_typer(warehouse_app, name="warehouse")
features_app = typer.Typer(
    help="List, show, gate-check and materialise features.", no_args_is_help=True
)
app.add_typer(features_app, name="features")
app.add_typer(lab_app, name="lab")
app.add_typer(kb_app, name="kb")
app.add_typer(eval_app, name="eval")
app.add_typer(schedule_app, name="schedule")
app.add_typer(triggers_app, name="triggers")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
DbOpt = Annotated[Path, typer.Option("--db", help="Warehouse file (DuckDB).")]
FeatureBudgetOpt = Annotated[
    float,
    typer.Option(
        min=0.0,
        help="The cost gate's budget: a feature's projected seconds on 10x this history.",
    ),
]
GATE_DEFAULTS = GateSettings()


LLM = LLMSettings(backend="offline")
LlmOpt = Annotated[str | None, typer.Option(help="offline (default) or openai.")]
ModelOpt = Annotated[str | None, typer.Option(help="Model name for --llm openai.")]
LlmContextOpt = Annotated[
    int,
    typer.Option(
        "--llm-context",
        help="Tokens of the endpoint's context (prompt + answer); the prompt is trimmed to fit. "
        "A smaller limit the endpoint reports wins.",
    ),
]
LlmTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--llm-timeout", help="Seconds the endpoint may stay silent (before or between tokens)."
    ),
]
LlmBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--llm-batch",
        min=1,
        help="Proposals per request (default: sized to the endpoint's measured tokens/s).",
    ),
]
LlmFormatOpt = Annotated[
    str,
    typer.Option(
        "--llm-format", help="auto (ladder), json_schema, json_object or text structured output."
    ),
]


def _llm_settings(
    llm: str | None, model: str | None, context: int, timeout: float, batch: int | None, fmt: str
) -> LLMSettings:
    """The ``--llm*`` options as settings (the endpoint from the environment)."""
    return LLMSettings.from_env(
        llm, model, context_tokens=context, timeout_s=timeout, batch_size=batch, output_format=fmt
    )


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log to stderr.")] = False,
) -> None:
    """autofe command line."""
    state["debug"] = debug
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr, format="%(message)s"
    )


@app.command()
def version(as_json: JsonOpt = False) -> None:
    """Print the autofe version."""
    if as_json:
        print(json.dumps({"version": __version__}))
    else:
        out.print(f"autofe {__version__}")


def _print_report(data: dict[str, Any]) -> None:
    table = Table(title="ingest", show_header=False)
    keys = ("runs", "jobs", "applications", "spark_jobs", "stages", "tasks", "sql_executions")
    for key in keys:
        table.add_row(key, f"{data[key]:,}")
    table.add_row(
        "files ingested / unchanged", f"{data['files_ingested']} / {data['files_unchanged']}"
    )
    table.add_row("seconds", f"{data['seconds']:.2f}")
    out.print(table)
    for issue in data["issues"]:
        where = issue["path"] + (f":{issue['line']}" if issue["line"] else "")
        label = "skipped" if issue["fatal"] else "warning"
        err.print(
            f"[yellow]{label}:[/] {where}: {issue['reason']}", highlight=False, soft_wrap=True
        )


EngineOpt = Annotated[str, typer.Option("--engine", help="duckdb (one machine) or spark.")]
MasterOpt = Annotated[
    str, typer.Option("--master", help="Spark master URL: local[N], spark://host:port, ...")
]
ConfOpt = Annotated[
    list[str] | None,
    typer.Option("--conf", help="Spark setting key=value (repeatable), as spark-submit takes."),
]
TimeoutOpt = Annotated[
    float,
    typer.Option("--connect-timeout", min=1, help="Seconds to wait for Spark executors."),
]


def _spark_settings(master: str, conf: list[str] | None, timeout: float) -> Any:
    from autofe.errors import ConfigError
    from autofe.pipelines.spark import SparkSettings

    pairs = {}
    for item in conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--conf expects key=value, not {item!r}")
        pairs[key.strip()] = value.strip()
    return SparkSettings(master=master, conf=pairs, connect_timeout_s=timeout)


@app.command()
@user_errors
def ingest(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Event logs, folders of them, workspace folders, mapping .toml files."),
    ] = None,
    db: DbOpt = DEFAULT_DB,
    mapping: Annotated[
        Path | None, typer.Option(help="Mapping .toml for run tables given as PATHS.")
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="Parallel parser processes.")] = (
        IngestSettings.workers
    ),
    engine: EngineOpt = "duckdb",
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="--engine spark: folder for the Parquet tables.")
    ] = None,
    master: MasterOpt = "local[2]",
    conf: ConfOpt = None,
    connect_timeout: TimeoutOpt = 30.0,
    as_json: JsonOpt = False,
) -> None:
    """Ingest Spark event logs, Databricks workspace folders and run tables into the warehouse.

    With --engine spark, event logs are parsed on Spark's executors and every warehouse table
    is written as Parquet under --out (docs/spark.md).
    """
    from autofe.errors import ConfigError
    from autofe.ingest.ingest import ingest as run_ingest

    inputs = [workspace_path(p) for p in paths] if paths else [example_workspace()]
    if engine not in ("duckdb", "spark"):
        raise ConfigError(f"--engine must be duckdb or spark, not {engine!r}")
    if engine == "spark":
        _spark_ingest(
            inputs, out_dir, mapping, _spark_settings(master, conf, connect_timeout), as_json
        )
        return
    if out_dir is not None:
        raise ConfigError("--out is for --engine spark; the DuckDB engine writes --db")
    settings = IngestSettings(db=db, workers=workers)
    if as_json:
        report = run_ingest(inputs, settings, mapping)
    else:
        with err.status("ingesting…") as status:
            report = run_ingest(inputs, settings, mapping, progress=lambda p: status.update(p))
    data = report.as_dict()
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        _print_report(data)
    if _nothing_ingested(data) and not as_json:
        err.print("[yellow]nothing ingested:[/] every input was refused or held nothing to read")
    if data["files_skipped"] or _nothing_ingested(data):
        raise typer.Exit(EXIT_PARTIAL)


def _nothing_ingested(data: dict[str, Any]) -> bool:
    """No input stored or already stored, and the report says why: exit 3, not 0.

    An ingest that stored nothing because every input was refused (or named a folder without
    logs) must not look like success to a script; re-ingesting unchanged inputs still exits 0.
    """
    stored = data["files_ingested"] or data["files_unchanged"]
    return not stored and bool(data["issues"])


def _spark_ingest(
    inputs: list[Path], out_dir: Path | None, mapping: Path | None, settings: Any, as_json: bool
) -> None:
    from autofe.errors import ConfigError
    from autofe.pipelines.spark import spark_ingest

    if out_dir is None:
        raise ConfigError("--engine spark writes Parquet tables: give --out DIR")
    if mapping is not None:
        raise ConfigError("--mapping is not supported with --engine spark: pass the .toml itself")
    with err.status(f"ingesting on Spark ({settings.master})…"):
        report = spark_ingest(inputs, out_dir, settings)
    data = report.as_dict()
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        table = Table(title=f"ingest (spark, {settings.master}) -> {out_dir}", show_header=False)
        for name, rows in report.tables.items():
            table.add_row(name, f"{rows:,}")
        table.add_row("event logs parsed", f"{report.logs:,}")
        table.add_row("seconds", f"{report.seconds:.2f}")
        out.print(table)
        for issue in report.issues:
            err.print(f"[yellow]skipped:[/] {issue.path}: {issue.reason}", highlight=False)
    if report.issues:
        raise typer.Exit(EXIT_PARTIAL)


@warehouse_app.command("schema")
@user_errors
def warehouse_schema(
    as_json: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print docs/schema.md.")] = False,
) -> None:
    """Print every table and column with its availability tag."""
    from autofe.warehouse.docs import schema_markdown, schema_records

    if as_json:
        print(json.dumps(schema_records(), indent=2))
    elif markdown:
        print(schema_markdown(), end="")
    else:
        out.print(schema_markdown(), highlight=False)


@warehouse_app.command("stats")
@user_errors
def warehouse_stats(db: DbOpt = DEFAULT_DB, as_json: JsonOpt = False) -> None:
    """Row counts of every warehouse table."""
    from autofe.warehouse.docs import table_counts

    counts = table_counts(db)
    if as_json:
        print(json.dumps(counts, indent=2))
        return
    table = Table("table", "rows")
    for name, n in counts.items():
        table.add_row(name, f"{n:,}")
    out.print(table)


@warehouse_app.command("replicate")
@user_errors
def warehouse_replicate(
    source: Annotated[Path, typer.Argument(help="The warehouse to replicate (read only).")],
    copies: Annotated[int, typer.Option("--copies", help="Copies, each a distinct history.")],
    out_db: Annotated[Path, typer.Option("--out", help="New warehouse file for the replica.")],
    shift_seconds: Annotated[
        float, typer.Option("--shift-seconds", help="Shift copy k's timestamps by k × S seconds.")
    ] = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """A new warehouse of N copies of one: other teams, other ids, the same history."""
    from dataclasses import asdict

    from autofe.warehouse.replicate import replicate_warehouse

    with err.status(f"replicating {source} × {copies}"):
        report = replicate_warehouse(source, out_db, copies, shift_seconds)
    if as_json:
        print(json.dumps(asdict(report), default=str, indent=2))
        return
    table = Table("table", "source rows", "replica rows")
    for name, n in report.rows_before.items():
        table.add_row(name, f"{n:,}", f"{report.rows_after[name]:,}")
    out.print(table)
    out.print(f"{report.out}: {report.copies} copies in {report.seconds:.1f} s", highlight=False)


CatalogOpt = Annotated[Path, typer.Option("--catalog", help="Feature catalog directory.")]
DEFAULT_CATALOG = Path("features")


@features_app.command("list")
@user_errors
def features_list(catalog: CatalogOpt = DEFAULT_CATALOG, as_json: JsonOpt = False) -> None:
    """List the features of a catalog."""
    from autofe.feature_catalog import load_catalog

    specs = load_catalog(catalog)
    if as_json:
        rows = [{"name": s.name, "category": s.category, "feature_id": s.feature_id} for s in specs]
        print(json.dumps(rows, indent=2))
        return
    table = Table("name", "category", "type", "id")
    for s in specs:
        table.add_row(s.name, s.category, s.value_type, s.feature_id)
    out.print(table)


@features_app.command("show")
@user_errors
def features_show(
    name: Annotated[str, typer.Argument(help="Feature name.")],
    catalog: CatalogOpt = DEFAULT_CATALOG,
    as_json: JsonOpt = False,
) -> None:
    """Show one feature: its SQL, rationale and provenance."""
    from autofe.errors import ConfigError
    from autofe.feature_catalog import load_catalog

    found = [s for s in load_catalog(catalog) if s.name == name]
    if not found:
        raise ConfigError(f"{catalog}: no feature named {name!r}")
    spec = found[0]
    if as_json:
        print(json.dumps({**spec.model_dump(mode="json"), "feature_id": spec.feature_id}, indent=2))
        return
    out.print(f"[bold]{spec.name}[/] ({spec.category}, {spec.value_type}) id {spec.feature_id}")
    if spec.rationale:
        out.print(spec.rationale, highlight=False)
    out.print(spec.sql, highlight=False, markup=False)


@features_app.command("check")
@user_errors
def features_check(
    files: Annotated[list[Path], typer.Argument(help="Feature .sql files.")],
    db: DbOpt = DEFAULT_DB,
    feature_budget_seconds: FeatureBudgetOpt = GATE_DEFAULTS.feature_budget_s,
    as_json: JsonOpt = False,
) -> None:
    """Run the completeness, leakage and cost gates on feature files (exit 1 if any is
    rejected)."""
    from autofe.feature_catalog import read_feature_file
    from autofe.gates import GateContext, run_gates

    ctx = GateContext.load(db, GateSettings(feature_budget_s=feature_budget_seconds))
    verdicts = [run_gates(read_feature_file(f), ctx) for f in files]
    if as_json:
        print(json.dumps([v.as_dict() for v in verdicts], indent=2))
    else:
        for path, v in zip(files, verdicts, strict=True):
            _print_verdict(path, v.as_dict())
    if any(not v.accepted for v in verdicts):
        raise typer.Exit(EXIT_REJECTED)


def _print_verdict(path: Path, verdict: dict[str, Any]) -> None:
    if verdict["accepted"]:
        out.print(f"[green]accepted[/] {path}", highlight=False)
        return
    out.print(f"[red]rejected[/] {path}", highlight=False)
    for r in verdict["reasons"]:
        out.print(f"  {r['gate']}/{r['code']}: {r['message']}", highlight=False, markup=False)
    for gate, why in verdict.get("skipped", {}).items():
        out.print(f"  {gate}: {why}", highlight=False, markup=False)


@features_app.command("materialize")
@user_errors
def features_materialize(
    catalog: CatalogOpt = DEFAULT_CATALOG,
    engine: EngineOpt = "duckdb",
    db: Annotated[
        Path | None,
        typer.Option("--db", help="DuckDB warehouse: computed on (duckdb), gated on if given."),
    ] = None,
    tables: Annotated[
        Path | None, typer.Option("--tables", help="Parquet tables of `ingest --engine spark`.")
    ] = None,
    store: Annotated[Path, typer.Option("--store", help="Feature store file (DuckDB).")] = Path(
        "features.duckdb"
    ),
    master: MasterOpt = "local[2]",
    conf: ConfOpt = None,
    connect_timeout: TimeoutOpt = 30.0,
    gate_sample: Annotated[
        int, typer.Option(min=1, help="Runs in the DuckDB sample the gates use without --db.")
    ] = 2000,
    as_json: JsonOpt = False,
) -> None:
    """Gate a feature catalog and store every accepted feature's values, on DuckDB or Spark.

    Exit 1 if a feature was rejected by a gate or refused by the Spark translation.
    """
    from autofe.feature_catalog import read_feature_set
    from autofe.pipelines.materialize import MaterializeSettings, materialize_catalog

    settings = MaterializeSettings(
        engine=engine,  # type: ignore[arg-type]  # checked by materialize_catalog
        store=store,
        db=db,
        tables=tables,
        spark=_spark_settings(master, conf, connect_timeout),
        gate_sample_runs=gate_sample,
    )
    with err.status(f"gating and materialising on {engine}…"):
        report = materialize_catalog(read_feature_set(catalog), settings)
    if as_json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        _print_materialized(report.as_dict(), store)
    if report.rejected or report.refused:
        raise typer.Exit(EXIT_REJECTED)


def _print_materialized(data: dict[str, Any], store: Path) -> None:
    _line(
        f"{len(data['stored'])} features stored in {store} ({data['engine']}; gated on the "
        f"{data['gated_on']}; {data['seconds']['gates']:.1f} s gates, "
        f"{data['seconds']['compute']:.1f} s compute)"
    )
    for name, reasons in data["rejected"].items():
        _line(f"rejected {name}: {'; '.join(reasons)}")
    for refusal in data["refused"]:
        _line(f"refused ({refusal['stage']}) {refusal['name']}: {refusal['reason']}")


@app.command()
@user_errors
def mcp(
    db: DbOpt = DEFAULT_DB,
    root: Annotated[
        list[Path] | None,
        typer.Option("--root", help="Folder parse_event_log may read (repeatable)."),
    ] = None,
    store: Annotated[
        Path | None, typer.Option(help="Feature store file (default: DB.features.duckdb).")
    ] = None,
    transport: Annotated[str, typer.Option(help="stdio or http.")] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP port.")] = 8765,
    feature_budget_seconds: FeatureBudgetOpt = GATE_DEFAULTS.feature_budget_s,
) -> None:
    """Serve the autofe tools over MCP (stdio for a local host, or streamable HTTP)."""
    from autofe.errors import ConfigError
    from autofe.tools.server import ServerConfig, build_server
    from autofe.warehouse.connect import open_warehouse

    if transport not in ("stdio", "http"):
        raise ConfigError(f"--transport must be stdio or http, not {transport!r}")
    open_warehouse(db, read_only=True).close()  # fail now, in one line, if it is missing
    roots = tuple(p.resolve() for p in root or ())
    gates = GateSettings(feature_budget_s=feature_budget_seconds)
    server = build_server(ServerConfig(db=db, roots=roots, store=store, gates=gates))
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)


FeaturesOpt = Annotated[
    str,
    typer.Option(
        "--features", help="'manual' (the baseline), a feature catalog or a folder of .sql files."
    ),
]


def _feature_set(features: str) -> tuple[Any, ...]:
    from autofe.evals.manual import manual_features
    from autofe.feature_catalog import read_feature_set

    return manual_features() if features == "manual" else read_feature_set(Path(features))


@app.command()
@user_errors
def train(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for model.joblib.")],
    db: DbOpt = DEFAULT_DB,
    features: FeaturesOpt = "manual",
    holdout: Annotated[
        float, typer.Option(help="Share of the latest runs held out for the score.")
    ] = 0.2,
    seed: Annotated[int, typer.Option(help="Model seed.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Gate a feature set, train the runtime model, score it on the latest runs, save it."""
    from autofe.pipelines.train import train_model

    with err.status("gating features, training…"):
        result = train_model(db, _feature_set(features), out_dir, holdout, seed)
    data = result.as_dict()
    if as_json:
        print(json.dumps(data, indent=2, default=str))
        return
    h = result.holdout.as_dict()
    out.print(f"model: {result.model_path} ({data['features']} features)")
    out.print(
        f"holdout ({h['n']} latest runs): R² {h['r2']:.3f}, MAPE {h['mape']:.1%}, "
        f"MAE {h['mae_s']:.2f} s, within ±20 % {h['within_20']:.0%}, "
        f"80 % interval coverage {h['coverage_80']:.0%}, 90 % {h['coverage_90']:.0%}"
    )


@app.command()
@user_errors
def predict(
    model: Annotated[Path, typer.Option("--model", help="model.joblib or its folder.")],
    db: DbOpt = DEFAULT_DB,
    run_id: Annotated[str | None, typer.Option("--run-id", help="A run in the warehouse.")] = None,
    job: Annotated[
        Path | None, typer.Option("--job", help="JSON of a run not yet submitted.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict a run's duration (p50 and 80 / 90 % intervals) before it runs."""
    from autofe.errors import ConfigError
    from autofe.modeling.artifact import load_model
    from autofe.modeling.pending import read_pending
    from autofe.modeling.predict import predict_pending, predict_run
    from autofe.warehouse.connect import schema_fingerprint

    if (run_id is None) == (job is None):
        raise ConfigError("give exactly one of --run-id and --job")
    artifact = load_model(model, schema_fingerprint())
    if job is not None:
        prediction = predict_pending(artifact, db, read_pending(job))
    else:
        prediction = predict_run(artifact, db, str(run_id))
    data = prediction.as_dict()
    if as_json:
        print(json.dumps(data, indent=2, default=str))
        return
    spans = ", ".join(
        f"{round(level * 100)} % [{low:.1f}, {high:.1f}] s"
        for level, (low, high) in sorted(prediction.intervals.items())
    )
    where = f"run {prediction.run_id} (job {prediction.job_id})"
    out.print(f"{where}: p50 {prediction.p50_s:.1f} s; {spans}", highlight=False)
    if prediction.missing:
        out.print(f"features without a value: {', '.join(prediction.missing)}", highlight=False)


LOOP = LoopSettings()
"""The loop's defaults, which ``autofe run``'s options show and start from."""


@app.command("run")
@user_errors
def run_command(
    workspace: Annotated[
        Path | None, typer.Argument(help="Workspace folder (default: the shipped example).")
    ] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Run directory.")] = None,
    resume: Annotated[
        Path | None, typer.Option("--resume", help="Continue the run in this directory.")
    ] = None,
    max_iterations: Annotated[int, typer.Option(min=1)] = LOOP.max_iterations,
    target_r2: Annotated[float | None, typer.Option(help="Stop at this CV R².")] = LOOP.targets.r2,
    target_mape: Annotated[
        float | None, typer.Option(help="Stop at this CV MAPE.")
    ] = LOOP.targets.mape,
    target_mae: Annotated[
        float | None, typer.Option(help="Stop at this CV MAE (s).")
    ] = LOOP.targets.mae_s,
    budget_seconds: Annotated[
        float, typer.Option(help="Safety stop (s); when it fires the result is partial.")
    ] = LOOP.budget_seconds,
    budget_tokens: Annotated[
        int | None, typer.Option(help="LLM token budget.")
    ] = LOOP.budget_tokens,
    per_round: Annotated[int, typer.Option(min=1, help="Candidates per round.")] = LOOP.per_round,
    min_proposals: Annotated[
        int, typer.Option(min=0, help="Go on until this many were proposed.")
    ] = LOOP.min_proposals,
    feature_budget_seconds: FeatureBudgetOpt = LOOP.feature_budget_seconds,
    sample_runs: Annotated[
        int,
        typer.Option(min=1, help="Above this many runs the loop scores on a sample this size."),
    ] = LOOP.sample_runs,
    warehouse: Annotated[
        Path | None,
        typer.Option(
            "--warehouse", help="Start from this warehouse (copied) instead of ingesting."
        ),
    ] = None,
    llm: LlmOpt = None,
    model: ModelOpt = None,
    llm_context: LlmContextOpt = LLM.context_tokens,
    llm_timeout: LlmTimeoutOpt = LLM.timeout_s,
    llm_batch: LlmBatchOpt = LLM.batch_size,
    llm_format: LlmFormatOpt = LLM.output_format,
    as_json: JsonOpt = False,
) -> None:
    """Run the agent loop on a workspace: features, a model, metrics and a report.

    Exit codes: 0 a model was written, 2 bad input or the endpoint failed (one ``error:``
    line; ``--resume`` continues), 3 the loop stopped without any feature to fit a model on.
    """
    from autofe.agents.settings import Targets

    if resume is not None:
        _show_run(_resume_run(resume, as_json), as_json)
        return
    loop = LoopSettings(
        Targets(target_r2, target_mape, target_mae),
        max_iterations=max_iterations,
        budget_seconds=budget_seconds,
        budget_tokens=budget_tokens,
        per_round=per_round,
        min_proposals=min_proposals,
        feature_budget_seconds=feature_budget_seconds,
        sample_runs=sample_runs,
    )
    chosen = _llm_settings(llm, model, llm_context, llm_timeout, llm_batch, llm_format)
    started = _start_run(workspace, out_dir, loop, chosen, _round_line(as_json), as_json, warehouse)
    _show_run(started, as_json)


def _resume_run(folder: Path, as_json: bool) -> Any:
    """The run in ``folder`` continued (the API key again from the environment)."""
    import os

    from autofe.pipelines.run import resume as resume_run

    with _error_as_json(as_json, folder):
        key = os.environ.get("OPENAI_API_KEY")
        return resume_run(folder, progress=_round_line(as_json), api_key=key)


def _show_run(result: Any, as_json: bool) -> None:
    """The finished run's metrics (JSON or two lines); exit 3 when it wrote no model."""
    if as_json:
        print(json.dumps(result.metrics, indent=2, default=str))
    else:
        _print_run(result.out, result.metrics)
    if result.metrics["model"] is None:
        _no_model(result.out, result.metrics["stop_reason"])


def _no_model(run_dir: Path, stop_reason: str) -> None:
    """Why the run wrote no model (on stderr, also with ``--json``), and exit 3."""
    from autofe.agents.state import STOP_WORDS

    err.print(
        f"no model: {STOP_WORDS.get(stop_reason, stop_reason)}; see "
        f"{run_dir / 'report.html'} for every dropped candidate and its reason",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(EXIT_PARTIAL)


def _start_run(
    workspace: Path | None,
    out_dir: Path | None,
    loop: LoopSettings,
    llm: LLMSettings,
    progress: Any,
    as_json: bool,
    warehouse: Path | None = None,
) -> Any:
    """A new run of the workspace (default: the example) into ``out_dir`` (default: a stamped
    folder under ``runs/``); with ``warehouse``, of that warehouse (the workspace is then only
    the folder ``parse_event_log`` may read)."""
    from datetime import UTC, datetime

    from autofe.pipelines.run import RunSettings
    from autofe.pipelines.run import run as start_run
    from autofe.warehouse.connect import open_warehouse

    space = str((workspace_path(workspace) if workspace else example_workspace()).resolve())
    folder = out_dir or Path("runs") / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    with _error_as_json(as_json, folder):
        if warehouse is not None:
            open_warehouse(warehouse, read_only=True).close()  # one line if it is no warehouse
        settings = RunSettings(space, loop, llm)
        return start_run(settings, folder, progress=progress, warehouse=warehouse)


@contextmanager
def _error_as_json(as_json: bool, folder: Path) -> Iterator[None]:
    """With ``--json``, an error is also a JSON object on stdout (a script reading stdout
    must not get nothing); the ``error:`` line and exit 2 follow as for any user error."""
    try:
        yield
    except (AutofeError, BaseExceptionGroup) as exc:
        error = autofe_error_in(exc)
        if as_json and error is not None:
            print(
                json.dumps({"error": str(error), "kind": type(error).__name__, "out": str(folder)})
            )
        raise


def _round_line(quiet: bool) -> Any:
    """``autofe run``'s line per finished round (stderr), or nothing with ``--json``."""

    def progress(record: dict[str, Any]) -> None:
        if not quiet:
            err.print(
                f"iteration {record['iteration']}: proposed {record['proposed']}, gated "
                f"{record['gated']}, kept {record['kept']} ({record['features']} features), "
                f"CV R² {record['cv_r2']:.3f}, MAPE {record['cv_mape']:.1%}, what-if MAPE "
                + (f"{w:.1%}" if (w := record.get("whatif_mape")) is not None else "n/a")
                + (f", {n} answer items dropped" if (n := record.get("malformed")) else ""),
                highlight=False,
                soft_wrap=True,
            )

    return progress


def _print_run(run_dir: Path, metrics: dict[str, Any]) -> None:
    """The run's counts; then, with a model, the holdout beside the best baseline and where the
    report and the model are (the three numbers a user decides on, and what to open next)."""
    out.print(
        f"{run_dir}: {metrics['proposed']} proposed, {metrics['accepted']} accepted, stopped: "
        f"{metrics['stop_reason']}, {metrics['seconds']:.0f} s",
        highlight=False,
    )
    if metrics.get("partial"):
        out.print(
            f"partial: {'; '.join(metrics['partial_reasons'])}", highlight=False, soft_wrap=True
        )
    if sample := metrics.get("sample"):
        out.print(
            f"the loop scored on a sample of {sample['runs']:,} of {sample['of_runs']:,} runs "
            f"({sample['jobs']:,} of {sample['of_jobs']:,} jobs, whole); the model and holdout "
            "below are on every run",
            highlight=False,
            soft_wrap=True,
        )
    if metrics.get("holdout"):
        out.print(holdout_line(metrics), highlight=False, soft_wrap=True)
        report, model = RunDir(run_dir).report, metrics["model"]
        out.print(f"report: {report}\nmodel: {model}", highlight=False, soft_wrap=True)


def holdout_line(metrics: dict[str, Any]) -> str:
    """The holdout's MAPE, median APE and 80 % coverage, and the best baseline's on the same runs.

    >>> holdout_line({"holdout": {"mape": 0.4, "median_ape": 0.25, "coverage_80": 0.8},
    ...     "best_baseline": "b", "baselines": [{"name": "b", "label": "job's median",
    ...     "mape": 0.3, "median_ape": 0.2}]}).split(" — ")
    ['holdout: MAPE 40.0 %, median APE 25.0 %, 80 % interval coverage 80.0 %', "best baseline (job's median): MAPE 30.0 %, median APE 20.0 %"]
    """  # noqa: E501
    h = metrics["holdout"]
    line = (
        f"holdout: MAPE {_percent(h['mape'])}, median APE {_percent(h['median_ape'])}, "
        f"80 % interval coverage {_percent(h['coverage_80'])}"
    )
    chosen = metrics.get("best_baseline")
    for b in metrics.get("baselines") or []:
        if b["name"] == chosen:
            line += (
                f" — best baseline ({b['label']}): MAPE {_percent(b['mape'])}, "
                f"median APE {_percent(b['median_ape'])}"
            )
    return line


def _percent(share: float) -> str:
    return f"{share * 100:.1f} %"


NightHomeOpt = Annotated[
    Path, typer.Option("--home", help="The autofe home folder (warehouse, model registry).")
]
NightWorkspaceOpt = Annotated[
    Path | None, typer.Option("--workspace", help="The workspace export to ingest.")
]
MarginOpt = Annotated[
    float, typer.Option(help="Relative MAPE improvement needed to promote (0.02: 2 %).")
]
RecentOpt = Annotated[
    int | None,
    typer.Option(help="Runs to compare on (default: latest 20 % or since the promotion)."),
]
ModeOpt = Annotated[
    str, typer.Option(help="incremental (warm start from the active model's features) or full.")
]
HandleOpt = Annotated[
    str | None,
    typer.Option(help="The queued scheduler job this night runs (HOME/scheduler.sqlite)."),
]
HistoryOpt = Annotated[
    bool, typer.Option("--history", help="List the past nights instead of running one.")
]


@app.command()
@user_errors
def nightly(
    home: NightHomeOpt,
    workspace: NightWorkspaceOpt = None,
    margin: MarginOpt = 0.02,
    recent: RecentOpt = None,
    max_iterations: Annotated[int, typer.Option(min=1)] = LOOP.max_iterations,
    budget_seconds: Annotated[
        float, typer.Option(help="Wall-clock budget of the loop.")
    ] = LOOP.budget_seconds,
    per_round: Annotated[
        int, typer.Option(min=1, help="New candidates per round.")
    ] = LOOP.per_round,
    llm: LlmOpt = None,
    model: ModelOpt = None,
    llm_context: LlmContextOpt = LLM.context_tokens,
    llm_timeout: LlmTimeoutOpt = LLM.timeout_s,
    llm_batch: LlmBatchOpt = LLM.batch_size,
    llm_format: LlmFormatOpt = LLM.output_format,
    mode: ModeOpt = "incremental",
    handle: HandleOpt = None,
    history: HistoryOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Ingest what is new, retrain warm from the active model, promote only a better model.

    Exit codes: 0 done (promoted or kept), 2 bad input, 3 done but some workspace files were
    skipped, 75 another nightly run holds the lock (docs/nightly.md).
    """
    from autofe.errors import ConfigError
    from autofe.pipelines.nightly import NightlySettings, parse_mode
    from autofe.pipelines.nightly_records import nightly_history

    if history:
        _print_history(nightly_history(home), as_json)
        return
    if workspace is None:
        raise ConfigError("--workspace is required (or --history to list past nights)")
    loop = LoopSettings(
        max_iterations=max_iterations, budget_seconds=budget_seconds, per_round=per_round
    )
    chosen = _llm_settings(llm, model, llm_context, llm_timeout, llm_batch, llm_format)
    settings = NightlySettings(
        workspace, home, margin, recent, loop, chosen, parse_mode(mode), handle
    )
    _report_night(_run_night(settings, as_json), as_json)


def _report_night(result: NightlyResult, as_json: bool) -> None:
    """The night's record (JSON or lines); exit 3 when workspace files were skipped."""
    if as_json:
        print(json.dumps(result.record, indent=2, default=str))
    else:
        _print_night(result.folder, result.record)
    if result.record["ingest"]["skipped"]:
        raise typer.Exit(EXIT_PARTIAL)


def _run_night(settings: NightlySettings, quiet: bool) -> NightlyResult:
    """One nightly run; a lock held by another run exits with ``EXIT_LOCKED``."""
    from autofe.console import EXIT_LOCKED
    from autofe.errors import LockHeld
    from autofe.pipelines.nightly import nightly as run_nightly

    try:  # notices (a stale lock cleared, new runs, the decision) go to stderr even with --json
        return run_nightly(settings, progress=_iteration_line(quiet), notice=_say)
    except LockHeld as exc:
        err.print(f"[bold red]locked:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_LOCKED) from None


def _say(line: str) -> None:
    err.print(line, highlight=False, soft_wrap=True)


def _iteration_line(quiet: bool) -> Any:
    def progress(record: dict[str, Any]) -> None:
        if not quiet:
            _say(
                f"iteration {record['iteration']}: proposed {record['proposed']}, kept "
                f"{record['kept']} ({record['features']} features), CV R² {record['cv_r2']:.3f}"
            )

    return progress


def _line(text: str) -> None:
    out.print(text, highlight=False, soft_wrap=True, markup=False)


def _print_night(folder: Path, record: dict[str, Any]) -> None:
    window, loop, warm = record["window"], record["loop"], record["warm_start"]
    _line(f"{folder}: {record['decision']} ({record['version']})")
    _line(f"reason: {record['reason']}")
    _line(_mode_line(record))
    _line(
        f"window: {window['runs']} of {window['labelled']} labelled runs ({window['rule']}); "
        f"loop: {loop['proposed']} proposed, {loop['accepted']} kept, "
        f"{warm['kept_again']} of {warm['features']} champion features kept again"
    )
    for who in ("challenger", "champion"):
        scored = (record.get(who) or {}).get("window")
        if scored:
            _line(
                f"{who}: MAPE {scored['mape']:.1%}, R² {scored['r2']:.3f}, "
                f"coverage {scored['coverage_80']:.0%} / {scored['coverage_90']:.0%}"
            )
    _print_drift(record.get("drift"))
    _line("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in record["seconds"].items()))


def _mode_line(record: dict[str, Any]) -> str:
    """The night's mode (cold or warm from which version) and the scheduler job it ran."""
    warm = record["warm_start"]["version"]
    start = f"warm start from {warm}" if warm else "cold start"
    line = f"mode: {record['mode']} ({start})"
    return line + (f"; handle {record['handle']}" if record.get("handle") else "")


def _print_drift(drift: dict[str, Any] | None) -> None:
    if not drift:
        _line("drift: no active model to compare with")
        return
    shifted = [f["feature"] for f in drift["features"] if f["level"] == "shifted"]
    line = f"drift: {drift['new_runs']} runs since the champion's training"
    if drift["new"]:
        line += f" (MAPE {drift['new']['mape']:.1%} vs {drift['holdout']['mape']:.1%} before)"
    _line(f"{line}; {len(shifted)} features shifted (PSI > 0.25)")
    for j in [j for j in drift["jobs"] if (j["change"] or 0) > 0][:3]:
        _line(
            f"  {j['job_name'] or j['job_id']}: MAPE {j['holdout_mape']:.1%} -> "
            f"{j['new_mape']:.1%} ({j['new_runs']} new runs)"
        )
    actuals = drift.get("actuals")
    if actuals and actuals["metrics"]:
        _line(
            f"actuals: {actuals['matched']} matched ({actuals['unmatched']} unmatched), "
            f"MAPE {actuals['metrics']['mape']:.1%}"
        )


def _print_history(records: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(records, indent=2, default=str))
        return
    names = ("night", "status", "decision", "model", "new", "MAPE % ch/cur", "s")
    table = Table(*(Column(n, no_wrap=True) for n in names))
    for r in records:
        ch = ((r.get("challenger") or {}).get("window") or {}).get("mape")
        champ = ((r.get("champion") or {}).get("window") or {}).get("mape")
        mapes = " / ".join("-" if m is None else f"{m * 100:.1f}" for m in (ch, champ))
        table.add_row(
            r["stamp"],
            r["status"],
            r.get("decision", "-"),
            str(r.get("version") or "-"),
            str((r.get("ingest") or {}).get("new_runs", "-")),
            mapes,
            f"{(r.get('seconds') or {}).get('total', 0):.0f}",
        )
    out.print(table)
    for r in records:
        why = f"{r['status']}: {r['error']['message']}" if r.get("error") else r.get("reason")
        if why:
            _line(f"{r['stamp']}: {why}")


@app.command()
@user_errors
def serve(
    home: Annotated[
        Path, typer.Option("--home", help="The autofe home folder (warehouse, model registry).")
    ],
    host: Annotated[str, typer.Option(help="Bind address (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP port.")] = 8000,
) -> None:
    """Serve the registry's active model over HTTP (predict, recommend, actuals, metrics).

    Set AUTOFE_API_TOKEN to require 'Authorization: Bearer <token>' on every endpoint but
    /healthz. A newly promoted model is picked up within a second, without a restart.
    """
    import os

    from autofe.pipelines.serve import TOKEN_ENV
    from autofe.pipelines.serve import serve as run_server

    if host not in ("127.0.0.1", "localhost", "::1") and not os.environ.get(TOKEN_ENV):
        err.print(f"[yellow]warning:[/] serving on {host} without {TOKEN_ENV}: anyone can call it")
    run_server(home, host, port)
