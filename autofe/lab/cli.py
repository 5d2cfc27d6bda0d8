"""``autofe lab``: generate a workspace by running lab jobs on local PySpark."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from autofe.config import workspace_path
from autofe.console import user_errors
from autofe.errors import ConfigError
from autofe.lab.cut import cut_workspace
from autofe.lab.effects import effects_text, measure_workspace
from autofe.lab.forget import forget_runs
from autofe.lab.generate import DEFAULT_SCALE_FACTORS, Adhoc, generate
from autofe.lab.histogram import write_histogram
from autofe.lab.noise import NoiseRow, noise_floor
from autofe.lab.replicate import replicate_workspace
from autofe.workspace_archive import ARCHIVE_NAME, pack_workspace

lab_app = typer.Typer(help="Lab workloads on local PySpark.", no_args_is_help=True)


@lab_app.command("generate")
@user_errors
def generate_command(
    out: Annotated[Path, typer.Option("--out", help="Workspace folder to write.")],
    runs: Annotated[int, typer.Option("--runs", help="Number of runs.")] = 20,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    days: Annotated[int, typer.Option("--days", help="Virtual calendar length.")] = 7,
    job: Annotated[list[str] | None, typer.Option("--job", help="Only these jobs.")] = None,
    scale_factor: Annotated[list[float] | None, typer.Option("--scale-factor")] = None,
    sweep_points: Annotated[
        int, typer.Option("--sweep-points", help="Append K runs-under-every-config sweeps.")
    ] = 0,
    sweep_jobs: Annotated[
        list[str] | None,
        typer.Option("--sweep-jobs", help="Sweep only these jobs (default: all)."),
    ] = None,
    repeat_jobs: Annotated[
        list[str] | None,
        typer.Option("--repeat-jobs", help="Append --repeats identical runs of this job."),
    ] = None,
    repeats: Annotated[int, typer.Option("--repeats", help="Runs per --repeat-jobs job.")] = 0,
    recurring: Annotated[
        bool,
        typer.Option(
            "--recurring", help="Scheduled jobs keep their usual parameters and configuration."
        ),
    ] = False,
    fresh_jvm: Annotated[
        bool, typer.Option("--fresh-jvm", help="A new JVM for every run (as a job cluster).")
    ] = False,
    prime_session: Annotated[
        bool,
        typer.Option(
            "--prime-session",
            help="A tiny query before the clock starts (JVM warm-up counts as setup).",
        ),
    ] = False,
    adhoc_runs: Annotated[
        int,
        typer.Option(
            "--adhoc-runs",
            help="Append N ad-hoc runs (drawn windows; may extend a finished workspace).",
        ),
    ] = 0,
    adhoc_jobs: Annotated[
        list[str] | None,
        typer.Option("--adhoc-jobs", help="Ad-hoc runs only of these jobs (default: all)."),
    ] = None,
    adhoc_scale_factor: Annotated[
        list[float] | None,
        typer.Option("--adhoc-scale-factor", help="Scale factors of the ad-hoc runs."),
    ] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run lab jobs and write a workspace that ``autofe ingest`` reads (resumable)."""
    adhoc = None
    if adhoc_runs or adhoc_jobs or adhoc_scale_factor:
        adhoc = Adhoc(adhoc_runs, tuple(adhoc_jobs or ()), tuple(adhoc_scale_factor or ()))
    report = generate(
        out,
        runs,
        seed,
        days,
        job_names=job,
        scale_factors=tuple(scale_factor or DEFAULT_SCALE_FACTORS),
        sweep_points=sweep_points,
        sweep_jobs=tuple(sweep_jobs or ()),
        repeat_jobs=tuple(repeat_jobs or ()),
        repeats=repeats,
        recurring=recurring,
        fresh_jvm=fresh_jvm,
        adhoc=adhoc,
        prime=prime_session,
        data_dir=data_dir,
        show_progress=not as_json,
    )
    if as_json:
        typer.echo(json.dumps(asdict(report), default=str))
    else:
        typer.echo(
            f"{report.executed} runs written to {out} ({report.already_done} already "
            f"there, {report.failed} failed)"
        )


@lab_app.command("noise")
@user_errors
def noise_command(
    workspace: Annotated[Path, typer.Option("--workspace", help="A generated workspace.")],
    warmup: Annotated[
        int, typer.Option("--warmup", help="Leave out the first N repeats (JIT, cold cache).")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Per job, the spread of execution_duration over its finished repeat runs."""
    if warmup < 0:
        raise ConfigError(f"--warmup must not be negative, got {warmup}")
    rows = noise_floor(workspace_path(workspace), warmup)
    if as_json:
        typer.echo(json.dumps([asdict(r) for r in rows]))
    elif not rows:
        typer.echo(f"no finished repeat runs in {workspace} (generate with --repeat-jobs)")
    else:
        typer.echo(f"{'job':<32} {'n':>4} {'mean_s':>9} {'std_s':>9} {'cv':>7}")
        for row in rows:
            typer.echo(_noise_line(row))


def _noise_line(row: NoiseRow) -> str:
    std = "-" if row.std is None else f"{row.std:.3f}"
    cv = "-" if row.cv is None else f"{row.cv:.1%}"
    return f"{row.job:<32} {row.n:>4} {row.mean:>9.3f} {std:>9} {cv:>7}"


@lab_app.command("effects")
@user_errors
def effects_command(
    workspace: Annotated[Path, typer.Option("--workspace", help="A generated workspace.")],
    png: Annotated[Path | None, typer.Option("--png", help="Write the runtime histogram.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Shape, runtime spread, pruning and skew effects of a workspace (ingested in memory)."""
    effects = measure_workspace(workspace_path(workspace))
    if png is not None:
        write_histogram(effects.durations, png, f"{workspace.name}: {len(effects.durations)} runs")
    report = {**asdict(effects), "spread": effects.shape.spread}
    report.pop("durations")
    if as_json:
        typer.echo(json.dumps(report, default=str))
        return
    typer.echo(effects_text(effects))


@lab_app.command("pack")
@user_errors
def pack_command(
    workspace: Annotated[Path, typer.Option("--workspace", help="A generated workspace.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help=f"Archive to write (default: WORKSPACE/{ARCHIVE_NAME})."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Pack a workspace into one solid .tar.zst that every workspace argument accepts."""
    report = pack_workspace(workspace, out or workspace / ARCHIVE_NAME)
    data = {**asdict(report), "archive": str(report.archive)}
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo(
        f"{report.archive}: {report.files} files, {report.bytes_in / 1e6:.1f} MB in, "
        f"{report.bytes_out / 1e6:.1f} MB out, sha256 {report.sha256[:16]}"
    )


@lab_app.command("forget")
@user_errors
def forget_command(
    workspace: Annotated[Path, typer.Option("--workspace", help="A lab workspace (unpacked).")],
    run: Annotated[list[int], typer.Option("--run", help="A finished run to run again.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Forget finished runs (and their retries): resuming the generation runs them again."""
    deleted = forget_runs(workspace, run)
    if as_json:
        typer.echo(json.dumps({"forgotten": deleted}))
        return
    typer.echo(f"forgot {len(deleted)} runs of {workspace}: {' '.join(map(str, deleted))}")


@lab_app.command("cut")
@user_errors
def cut_command(
    workspace: Annotated[Path, typer.Option("--workspace", help="A lab workspace.")],
    until: Annotated[
        datetime, typer.Option("--until", help="Virtual time (UTC): keep runs ended before it.")
    ],
    out: Annotated[Path, typer.Option("--out", help="New folder for the cut copy.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Copy a lab workspace as it stood at --until: only the runs finished by then."""
    report = cut_workspace(workspace_path(workspace), out, until)
    if as_json:
        typer.echo(
            json.dumps({"out": str(report.out), "kept": report.kept, "dropped": report.dropped})
        )
        return
    typer.echo(f"{report.out}: {report.kept} runs kept, {report.dropped} ended after {until}")


@lab_app.command("replicate")
@user_errors
def replicate_command(
    workspace: Annotated[Path, typer.Option("--workspace", help="A lab workspace.")],
    copies: Annotated[int, typer.Option("--copies", help="Copies, each a distinct history.")],
    out: Annotated[Path, typer.Option("--out", help="New folder for the replica.")],
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Processes rewriting event logs.")
    ] = 2,
    first: Annotated[
        int, typer.Option("--first", min=0, help="First copy (parts of one organisation).")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """One workspace of N copies of a lab workspace: other teams, other ids, the same month."""
    report = replicate_workspace(workspace_path(workspace), out, copies, workers, first)
    if as_json:
        typer.echo(json.dumps(asdict(report), default=str))
        return
    typer.echo(
        f"{report.out}: {report.copies} copies, {report.runs} runs, {report.jobs} jobs, "
        f"{report.event_logs} event logs, {report.bytes / 1e6:.0f} MB in {report.seconds:.1f} s"
    )
