"""One error tree for autofe.

The CLI turns every :class:`AutofeError` into one clear line and a non-zero exit; anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations


class AutofeError(Exception):
    """Root of every error autofe raises on purpose (bad input, bad configuration)."""


class ConfigError(AutofeError):
    """A setting, option or mapping file is wrong; the message names it and says why."""


class IngestError(AutofeError):
    """One input could not be read, or one line of it could not be parsed.

    Carries the path and (when known) the 1-based line so the ingest report can point at it.
    """

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


class WarehouseError(AutofeError):
    """The telemetry warehouse cannot be opened or written (locked, wrong schema, not a DB)."""
