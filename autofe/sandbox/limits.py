"""Resource limits of the SQL sandbox."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxLimits:
    """Limits DuckDB enforces on every sandboxed query."""

    memory_limit: str = "1GB"
    threads: int = 2
    timeout_s: float = 10.0
    max_rows: int = 100_000
