"""``autofe schedule``: plan jobs onto the cheapest configurations, simulate policies, hand off."""

from __future__ import annotations

import typer

schedule_app = typer.Typer(
    help="Choose configurations under deadlines and budgets; simulate scheduling policies.",
    no_args_is_help=True,
)
