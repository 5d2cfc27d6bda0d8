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


class SandboxViolation(AutofeError):
    """A statement was refused or stopped by the read-only SQL sandbox.

    ``span`` is the (start, end) character offsets of the offending part of ``sql``.
    """

    def __init__(self, reason: str, sql: str = "", span: tuple[int, int] | None = None) -> None:
        self.reason = reason
        self.sql = sql
        self.span = span
        where = f" at {sql[span[0] : span[1]]!r}" if span and sql else ""
        super().__init__(f"refused: {reason}{where}")


class GateRejected(AutofeError):
    """A feature failed a gate; ``reasons`` say why, each with its SQL span when known."""

    def __init__(self, gate: str, reasons: list[str], sql_span: tuple[int, int] | None = None):
        self.gate = gate
        self.reasons = reasons
        self.sql_span = sql_span
        super().__init__(f"{gate} gate rejected the feature: {'; '.join(reasons)}")


class PathNotAllowed(AutofeError):
    """A path given to a tool does not exist or lies outside the directories it may read.

    ``roots`` are the allowed directories (resolved), so the caller can pick a path inside one.
    """

    def __init__(self, path: str, reason: str, roots: tuple[str, ...] = ()) -> None:
        self.path = path
        self.reason = reason
        self.roots = roots
        allowed = ", ".join(roots) if roots else "none configured"
        super().__init__(f"{path}: {reason}; allowed roots: {allowed}")


class KnowledgeBaseError(AutofeError):
    """A knowledge-base document, query or index is unusable; the message names which and why."""


class ModelError(AutofeError):
    """A model artifact is missing, tampered with, or from another warehouse schema."""


class LLMError(AutofeError):
    """The language-model endpoint could not be reached or kept failing after every retry.

    Carries the endpoint and the reason (timeout, connection refused, HTTP status) so the CLI
    can say which server to check; malformed model output is not an error (the batch is empty).
    """

    def __init__(self, endpoint: str, reason: str) -> None:
        self.endpoint = endpoint
        self.reason = reason
        super().__init__(f"LLM endpoint {endpoint}: {reason}")


class AgentError(AutofeError):
    """The agent loop cannot go on: a tool failed, the run directory is unusable."""


class LockHeld(AutofeError):
    """Another live process holds a lock file; ``holder`` says who (pid, host, since when).

    Not a mistake of the caller: the CLI exits with its own code so a scheduler can tell
    "try again later" from "fix the input".
    """

    def __init__(self, path: str, holder: str) -> None:
        self.path = path
        self.holder = holder
        super().__init__(
            f"{path}: another nightly run holds the lock ({holder}); wait for it to finish, "
            "or delete the file if that process is gone"
        )


class Untranspilable(AutofeError):
    """A feature's DuckDB SQL has no Spark SQL known to compute the same values.

    ``reason`` names the construct and why it differs between the engines; ``span`` is its
    (start, end) offsets in the feature's SQL when known. The feature is reported, never run
    in a form that might compute something else.
    """

    def __init__(self, reason: str, span: tuple[int, int] | None = None) -> None:
        self.reason = reason
        self.span = span
        super().__init__(reason)


class ScheduleError(AutofeError):
    """A job request, budget or instance catalog cannot be scheduled; names the job and why.

    ``job_id`` is the offending job's id (``None`` when the problem is not one job's, e.g. a
    catalog file), so an orchestrator can reject exactly that request.
    """

    def __init__(self, reason: str, job_id: str | None = None) -> None:
        self.job_id = job_id
        self.reason = reason
        super().__init__(f"job {job_id!r}: {reason}" if job_id is not None else reason)


def first_line(exc: BaseException) -> str:
    """The first line of an error's message: DuckDB, sqlglot and the OS append hints, SQL
    context and stack lines that a one-line refusal must not carry (the type name when empty).

    >>> first_line(ValueError("Binder Error: no column x\\n\\nLINE 1: ..."))
    'Binder Error: no column x'
    >>> first_line(KeyError())
    'KeyError'
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def autofe_error_in(exc: BaseException) -> AutofeError | None:
    """The :class:`AutofeError` an exception is or wraps, or None.

    The agent graph and the MCP client run nodes in anyio task groups, which raise an
    ``ExceptionGroup`` around what a node raised; the user must see that error's one line,
    not the group's traceback. Only a group whose every leaf is an AutofeError (the first is
    returned) counts: a bug beside it keeps its traceback.

    >>> autofe_error_in(ExceptionGroup("x", [ExceptionGroup("y", [ConfigError("bad")])]))
    ConfigError('bad')
    >>> autofe_error_in(ExceptionGroup("x", [ConfigError("bad"), KeyError("k")])) is None
    True
    """
    if isinstance(exc, AutofeError):
        return exc
    if not isinstance(exc, BaseExceptionGroup):
        return None
    found = [autofe_error_in(inner) for inner in exc.exceptions]
    if not found or any(f is None for f in found):
        return None
    return found[0]
