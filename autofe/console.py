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

from autofe.errors import AutofeError

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
    """Turn :class:`AutofeError` into one clear line and exit 2 (a traceback with --debug)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AutofeError as exc:
            if state["debug"]:
                raise
            # escaped: a message may hold brackets ("pip install 'autofe[spark]'")
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_USER_ERROR) from None
        except KeyboardInterrupt:
            err.print("interrupted: what was committed stays; nothing half-written was kept")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]
