"""``autofe schedule``: plan jobs onto the cheapest configurations, simulate policies, hand off."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from autofe.console import user_errors
from autofe.errors import ConfigError

if TYPE_CHECKING:
    from autofe.scheduler.simulate import SimulationSettings
    from autofe.scheduler.store import JobRecord

schedule_app = typer.Typer(
    help="Choose configurations under deadlines and budgets; simulate scheduling policies.",
    no_args_is_help=True,
)


@schedule_app.command("plan")
@user_errors
def plan(
    jobs: Annotated[Path, typer.Option("--jobs", help="Jobs file (autofe-jobs/1 JSON).")],
    catalog: Annotated[
        Path | None, typer.Option("--catalog", help="Instance catalog CSV (default: shipped).")
    ] = None,
    now: Annotated[
        str | None,
        typer.Option("--now", help="Planning time: Unix seconds or RFC 3339 (default: now)."),
    ] = None,
    samples: Annotated[int, typer.Option("--samples", help="Monte Carlo samples per job.")] = 400,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (plans are reproducible).")] = 0,
    preemption_multiplier: Annotated[
        float,
        typer.Option("--preemption-multiplier", help="Scale every spot interruption rate."),
    ] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, one per job.")] = False,
) -> None:
    """The cheapest configuration per job that meets its deadline at its tier's target."""
    from autofe.scheduler.catalog import load_catalog
    from autofe.scheduler.jobfile import read_jobs
    from autofe.scheduler.plan import PlanSettings, plan_records

    at = planning_time(now)
    offers = load_catalog(catalog)
    settings = PlanSettings(samples=samples, seed=seed, preemption_multiplier=preemption_multiplier)
    records = plan_records(read_jobs(jobs, offers, now=at), offers, at, settings)
    if as_json:
        print(json.dumps(records, indent=2))
        return
    for line in plan_lines(records, at):
        typer.echo(line)


def planning_time(text: str | None) -> float:
    """``--now`` as Unix seconds: a number, an RFC 3339 time with offset, or the clock.

    >>> planning_time("0"), planning_time("1970-01-01T01:00:00Z")
    (0.0, 3600.0)
    """
    from autofe.scheduler.jobfile import FIRST_TIME, LAST_TIME

    if text is None:
        return time.time()
    try:
        at = float(text)
    except ValueError:
        at = _rfc3339(text)
    if not FIRST_TIME <= at <= LAST_TIME:  # NaN too: a plan's times would be no dates
        raise ConfigError(
            f"--now {text!r}: not a time between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"
        )
    return at


def _rfc3339(text: str) -> float:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--now {text!r}: not Unix seconds or an RFC 3339 time") from None
    if when.tzinfo is None:
        raise ConfigError(f"--now {text!r}: add a UTC offset (Z or +HH:MM)")
    return when.timestamp()


def plan_lines(records: list[dict[str, Any]], now: float) -> list[str]:
    """The text table: one line per job, then the total expected cost."""
    head = (
        f"{'job':22} {'tier':4} {'shape':28} {'cloud/region':28} {'market':9} "
        f"{'exp. $':>9} {'P(dl)':>6} {'target':>6} {'p50':>7} {'high':>7}"
    )
    lines = [head]
    for r in records:
        where = f"{r['cloud']}/{r['region']}"
        p = "-" if r["deadline"] is None else f"{r['p_deadline']:.3f}"
        miss = "" if r["meets_target"] else "  below target"
        lines.append(
            f"{r['job_id']:22} {r['tier']:4} {r['shape']:28} {where:28} {r['market']:9} "
            f"{r['expected_cost_usd']:9.2f} {p:>6} {r['target']:6.2f} "
            f"{clock(r['p50_s']):>7} {clock(r['high_s']):>7}{miss}"
        )
    total = sum(float(r["expected_cost_usd"]) for r in records)
    when = datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z")
    lines.append(f"{len(records)} jobs, expected cost ${total:.2f}, planned at {when}")
    return lines


def clock(seconds: float) -> str:
    """A duration as ``1h05m`` or ``12m30s``.

    >>> clock(3900.0), clock(750.0)
    ('1h05m', '12m30s')
    """
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


# -------------------------------------------------------------- hand-off: handles and exports

HomeOpt = Annotated[
    Path, typer.Option("--home", help="autofe home folder (its scheduler.sqlite holds the jobs).")
]
CatalogOpt = Annotated[
    Path | None, typer.Option("--catalog", help="Instance catalog CSV (default: shipped).")
]
AsJsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@schedule_app.command("submit")
@user_errors
def submit(
    jobs: Annotated[Path, typer.Option("--jobs", help="Jobs file (autofe-jobs/1 JSON).")],
    home: HomeOpt,
    catalog: CatalogOpt = None,
    as_json: AsJsonOpt = False,
) -> None:
    """Plan the file's jobs and store them: one handle per job, for status and cancel."""
    from autofe.scheduler.catalog import load_catalog
    from autofe.scheduler.store import JobStore, read_document, submit_document

    store = JobStore.in_home(home)
    doc = read_document(jobs)
    records = submit_document(store, doc, load_catalog(catalog), time.time(), where=str(jobs))
    if as_json:
        print(json.dumps([r.as_dict() for r in records], indent=2))
        return
    for record in records:
        typer.echo(f"{record.handle}  {record.job_id}  {record.state}  {record.plan_line()}")


@schedule_app.command("status")
@user_errors
def status(
    handle: Annotated[str, typer.Argument(help="The handle submit printed.")],
    home: HomeOpt,
    as_json: AsJsonOpt = False,
) -> None:
    """A job's state, chosen plan, spend so far and predicted completion."""
    from autofe.scheduler.store import JobStore

    _show(JobStore.in_home(home).get(handle), as_json)


@schedule_app.command("cancel")
@user_errors
def cancel(
    handle: Annotated[str, typer.Argument(help="The handle submit printed.")],
    home: HomeOpt,
    as_json: AsJsonOpt = False,
) -> None:
    """Cancel a waiting or running job (again: no change; a finished job: an error)."""
    from autofe.scheduler.store import JobStore

    _show(JobStore.in_home(home).cancel(handle), as_json)


def _show(record: JobRecord, as_json: bool) -> None:
    """One stored job, as JSON or as the human summary (status and cancel print the same)."""
    typer.echo(json.dumps(record.as_dict(), indent=2) if as_json else record.describe())


@schedule_app.command("export")
@user_errors
def export(
    fmt: Annotated[str, typer.Option("--format", help="databricks (runs/submit) or k8s (Job).")],
    jobs: Annotated[
        Path | None, typer.Option("--jobs", help="Jobs file: plan its jobs, export each.")
    ] = None,
    handle: Annotated[
        str | None, typer.Option("--handle", help="A submitted job: export its stored plan.")
    ] = None,
    home: Annotated[Path | None, typer.Option("--home", help="Home folder of --handle.")] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Folder: one JSON file per job.")
    ] = None,
    catalog: CatalogOpt = None,
) -> None:
    """Plans as Databricks runs/submit bodies (JSON lines) or a Kubernetes List of Jobs."""
    from autofe.scheduler.catalog import load_catalog
    from autofe.scheduler.export import export_document, parse_format, payload_list, payload_name
    from autofe.scheduler.store import JobStore, export_stored, read_document

    kind = parse_format(fmt)
    offers = load_catalog(catalog)
    if jobs is not None and handle is None:
        payloads = export_document(kind, read_document(jobs), offers, time.time(), str(jobs))
    elif handle is not None and home is not None and jobs is None:
        store = JobStore.in_home(home)
        payloads = [export_stored(kind, store, handle, offers, time.time())]
    else:
        raise ConfigError("give --jobs FILE, or --handle H with --home DIR")
    if out is None:
        typer.echo(payload_list(kind, [payload for _, payload in payloads]))
        return
    out.mkdir(parents=True, exist_ok=True)
    for job_id, payload in payloads:
        path = out / payload_name(kind, job_id)
        path.write_text(json.dumps(payload, indent=2) + "\n")
        typer.echo(str(path))


# -------------------------------------------------------------- simulation of policies


@schedule_app.command("simulate")
@user_errors
def simulate(
    trace: Annotated[
        Path, typer.Option("--trace", help="Trace: a jobs file whose estimates carry true_s.")
    ],
    policy: Annotated[
        str,
        typer.Option(
            "--policy", help="autofe, static, spot-only, greedy, fifo-worst, oracle or all."
        ),
    ] = "all",
    catalog: CatalogOpt = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Fixes preemptions (same seed, same run).")
    ] = 0,
    preemption_multiplier: Annotated[
        float,
        typer.Option("--preemption-multiplier", help="Scale every spot interruption rate."),
    ] = 1.0,
    max_nodes: Annotated[
        int | None, typer.Option("--max-nodes", help="Fleet limit on nodes in flight.")
    ] = None,
    budget_mode: Annotated[
        str, typer.Option("--budget-mode", help="hard: budgets are caps; off: only reported.")
    ] = "hard",
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a cost-vs-attainment PNG here.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Per policy: summary, spend by budget, every job.")
    ] = False,
) -> None:
    """Replay a trace under scheduling policies: cost, deadlines met, delays, budget use."""
    from autofe.scheduler.catalog import load_catalog
    from autofe.scheduler.jobfile import read_jobs
    from autofe.scheduler.policies import POLICIES, get_policy
    from autofe.scheduler.report import (
        plot_cost_vs_attainment,
        result_dict,
        summary_table,
        table_lines,
    )
    from autofe.scheduler.simulate import simulate_all

    names = list(POLICIES) if policy == "all" else [get_policy(policy).name]
    offers = load_catalog(catalog)
    jobset = read_jobs(trace, offers)
    settings = _simulation_settings(seed, preemption_multiplier, max_nodes, budget_mode)
    results = simulate_all(jobset, offers, names, settings)
    if plot is not None:
        plot_cost_vs_attainment(results, plot)
    if as_json:
        print(json.dumps([result_dict(r) for r in results], indent=2))
        return
    for line in table_lines(summary_table(results)):
        typer.echo(line)
    typer.echo(f"{len(jobset.jobs)} jobs from {trace}, seed {seed}")


def _simulation_settings(
    seed: int, preemption_multiplier: float, max_nodes: int | None, budget_mode: str
) -> SimulationSettings:
    """The simulator's settings from the command's options (the settings validate them)."""
    from autofe.scheduler.fleet import FleetSettings
    from autofe.scheduler.simulate import SimulationSettings

    fleet = FleetSettings() if max_nodes is None else FleetSettings(max_nodes=max_nodes)
    return SimulationSettings(
        seed=seed,
        preemption_multiplier=preemption_multiplier,
        fleet=fleet,
        budget_mode=budget_mode,  # type: ignore[arg-type]  # validated by the settings
    )
