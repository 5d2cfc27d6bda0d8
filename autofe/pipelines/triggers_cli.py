"""``autofe triggers``: check the retraining triggers now, and list what fired.

The pipeline modules are imported inside the commands: ``autofe --help`` stays fast.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from autofe.console import out, user_errors
from autofe.errors import ConfigError
from autofe.pipelines.home import Home

triggers_app = typer.Typer(
    help="Retraining triggers: degradation, drift and skew become scheduler jobs.",
    no_args_is_help=True,
)
HomeOpt = Annotated[Path, typer.Option("--home", help="The autofe home folder.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@triggers_app.command("check")
@user_errors
def check(
    home: HomeOpt,
    scheduled: Annotated[
        bool, typer.Option("--scheduled", help="Also request the day's scheduled P2 retraining.")
    ] = False,
    catalog: Annotated[
        Path | None, typer.Option("--catalog", help="Instance catalog CSV (default: shipped).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate every trigger now; each new firing becomes (or raises) a retraining request."""
    from autofe.pipelines.triggers import check_triggers
    from autofe.scheduler.catalog import load_catalog

    fired = check_triggers(home, time.time(), scheduled, load_catalog(catalog))
    status = _status(Home(home))
    if as_json:
        print(json.dumps({"fired": fired, **status}, indent=2, default=str))
        return
    for record in fired:
        out.print(f"{record['kind']} ({record['tier']}, {record['mode']}): {record['reason']}")
        out.print(f"  -> {record['action']}: {record['outcome']}")
    if not fired:
        out.print("nothing fired")
    _print_status(status)


@triggers_app.command("list")
@user_errors
def list_firings(home: HomeOpt, as_json: JsonOpt = False) -> None:
    """Every firing so far (``HOME/triggers.jsonl``), oldest first, and the open request."""
    from autofe.pipelines.triggers import read_triggers

    if not home.is_dir():
        raise ConfigError(f"--home {home}: not a folder")
    firings = read_triggers(Home(home).triggers)
    status = _status(Home(home))
    if as_json:
        print(json.dumps({"firings": firings, **status}, indent=2, default=str))
        return
    for record in firings:
        out.print(
            f"{record.get('at')}  {record.get('kind')}  {record.get('tier')}  "
            f"{record.get('action')}  {record.get('reason')}"
        )
    _print_status(status)


def _status(home: Home) -> dict[str, Any]:
    from autofe.pipelines.retraining import held_request, open_request

    record = open_request(home)
    opened = None
    if record is not None:
        opened = {
            "handle": record.handle,
            "state": record.state,
            "tier": record.tier,
            "mode": record.request.get("labels", {}).get("mode"),
            "plan": record.plan_line(),
            "command": record.request.get("labels", {}).get("command"),
        }
    return {"open": opened, "held": held_request(home)}


def _print_status(status: dict[str, Any]) -> None:
    opened, held = status["open"], status["held"]
    if opened:
        out.print(
            f"open retraining {opened['handle']}: {opened['state']} {opened['tier']} "
            f"{opened['mode']}  {opened['plan']}"
        )
        out.print(f"  run it with: {opened['command'].replace('HANDLE', opened['handle'])}")
    if held:
        out.print(f"held retraining ({held['tier']}, {held['mode']}): {held['reason']}")
