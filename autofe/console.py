"""What every command-line entry point shares: consoles, exit codes, the user-error wrapper.

Kept below the CLI so sub-command groups (``autofe lab``) report errors the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from autofe.errors import AutofeError, autofe_error_in

err = Console(stderr=True)
out = Console()

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USER_ERROR = 2
EXIT_REJECTED = 1
EXIT_PARTIAL = 3
EXIT_INTERRUPTED = 130
EXIT_LOCKED = 75
"""Another run holds a lock: try again later (``EX_TEMPFAIL`` of sysexits.h)."""

state: dict[str, bool] = {"debug": False}
"""Set by the CLI's --debug flag: user errors then keep their traceback."""


def user_errors(fn: F) -> F:
    """Turn :class:`AutofeError` into one clear line and exit 2 (a traceback with --debug);
    also one wrapped in a task group's ``ExceptionGroup`` (:func:`autofe_error_in`)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (AutofeError, BaseExceptionGroup) as exc:
            error = autofe_error_in(exc)
            if error is None or state["debug"]:
                raise
            report_error(error)
            raise typer.Exit(EXIT_USER_ERROR) from None
        except KeyboardInterrupt:
            err.print("interrupted: what was committed stays; nothing half-written was kept")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]


def report_error(error: AutofeError) -> None:
    """The one ``error:`` line on stderr (escaped: a message may hold brackets, as in
    ``pip install 'autofe[spark]'``)."""
    err.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
