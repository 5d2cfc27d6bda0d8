"""``autofe lab``: generate a workspace by running lab jobs on local PySpark."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from autofe.lab.generate import DEFAULT_SCALE_FACTORS, generate

lab_app = typer.Typer(help="Lab workloads on local PySpark.", no_args_is_help=True)


@lab_app.command("generate")
def generate_command(
    out: Annotated[Path, typer.Option("--out", help="Workspace folder to write.")],
    runs: Annotated[int, typer.Option("--runs", help="Number of runs.")] = 20,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    days: Annotated[int, typer.Option("--days", help="Virtual calendar length.")] = 7,
    job: Annotated[list[str] | None, typer.Option("--job", help="Only these jobs.")] = None,
    scale_factor: Annotated[list[float] | None, typer.Option("--scale-factor")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run lab jobs and write a workspace that ``autofe ingest`` reads (resumable)."""
    report = generate(
        out,
        runs,
        seed,
        days,
        job_names=job,
        scale_factors=tuple(scale_factor or DEFAULT_SCALE_FACTORS),
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
