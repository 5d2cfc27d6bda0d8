"""Why a tool call failed, in one message naming the tool, the argument and the reason.

The MCP SDK answers a crashed tool with a bare ``Error executing tool <name>`` and keeps the
reason on the server's stderr, and answers a bad argument with pydantic's multi-line report; a
model can fix neither from what it reads. Every failed call is told as ``<tool>: <reason>``:
autofe's own errors keep their message, a rejected argument is named with what was wrong with
it, and anything else (a bug) keeps its error class and the arguments it was called with.
Pure message-making; ``tools/server.py`` calls it from its one ``call_tool`` (MCP's
``ToolError`` is only recognised here, as a refusal on purpose).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from autofe.errors import AutofeError

MAX_MESSAGE = 4000
"""A message longer than this is cut: an error must not echo a megabyte of its input back."""
MAX_SHOWN = 60
"""Characters of an argument's value quoted in a message."""


def shown(value: object) -> str:
    """``repr(value)`` cut to :data:`MAX_SHOWN` characters, so NUL and newlines stay visible.

    >>> shown("/tmp/a\\x00b")
    "'/tmp/a\\\\x00b'"
    >>> shown("x" * 100)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (102 characters)"
    """
    text = repr(value)
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[: MAX_SHOWN - 5]}... ({len(text)} characters)"


def refuse_nul(value: str) -> str:
    """``value``, unless it holds a NUL byte (no path, name or id means one; the OS refuses them).

    Used as a pydantic ``AfterValidator`` on string arguments, so the call is refused before
    the tool runs and the refusal names the argument.

    >>> refuse_nul("runs")
    'runs'
    >>> refuse_nul("a\\x00b")
    Traceback (most recent call last):
    ValueError: embedded NUL byte in 'a\\x00b'
    """
    if "\x00" in value:
        raise ValueError(f"embedded NUL byte in {shown(value)}")
    return value


def unknown_tool(name: str, tools: Iterable[str]) -> str:
    """The message for a call of a tool the server does not have.

    >>> unknown_tool("drop_tables", ["describe_schema", "run_readonly_sql"])
    "unknown tool 'drop_tables'; the tools are describe_schema, run_readonly_sql"
    """
    return f"unknown tool {shown(name)}; the tools are {', '.join(sorted(tools))}"


def unknown_arguments(tool: str, given: Iterable[str], accepted: Iterable[str]) -> str | None:
    """The message for arguments a tool does not take, or ``None`` when there are none.

    The SDK would drop them silently, so a misspelt ``limt`` would quietly mean the default.

    >>> unknown_arguments("run_readonly_sql", ["sql", "limt"], ["sql", "limit"])
    "run_readonly_sql: unknown argument 'limt'; it takes sql, limit"
    >>> unknown_arguments("run_readonly_sql", ["sql"], ["sql", "limit"]) is None
    True
    """
    takes = list(accepted)
    extra = [shown(arg) for arg in given if arg not in takes]
    if not extra:
        return None
    noun = "argument" if len(extra) == 1 else "arguments"
    return _cut(f"{tool}: unknown {noun} {', '.join(extra)}; it takes {', '.join(takes) or 'none'}")


def invalid_arguments(tool: str, error: ValidationError) -> str:
    """The message for arguments that failed the tool's input schema, one clause per argument.

    >>> from typing import Annotated
    >>> from pydantic import Field, TypeAdapter
    >>> name = TypeAdapter(Annotated[str, Field(max_length=80)])
    >>> try:
    ...     name.validate_python("a" * 100_000)
    ... except ValidationError as exc:
    ...     print(invalid_arguments("check_feature", exc))
    check_feature: 100000 characters, at most 80
    """
    clauses = dict.fromkeys(_clause(detail) for detail in error.errors(include_url=False))
    return _cut(f"{tool}: {'; '.join(clauses)}")


def failure(tool: str, arguments: Mapping[str, Any], error: BaseException) -> str:
    """The message for a call that failed inside the tool.

    ``error`` is what the tool raised. A deliberate refusal is told as its own message; anything
    else is a bug, told with its class and the arguments as given, so the caller sees what
    triggered it and the operator can reproduce it.

    >>> failure("parse_event_log", {"path": "app.log"}, OverflowError("date value out of range"))
    "parse_event_log: OverflowError: date value out of range (called with path='app.log')"
    """
    if is_refusal(error):
        return _cut(f"{tool}: {error}")
    if isinstance(error, ValidationError):
        what = "; ".join(dict.fromkeys(_clause(d) for d in error.errors(include_url=False)))
    else:
        what = str(error) or "no message"
    called = ", ".join(f"{k}={shown(v)}" for k, v in arguments.items()) or "no arguments"
    return _cut(f"{tool}: {type(error).__name__}: {what} (called with {called})")


def is_refusal(error: BaseException) -> bool:
    """Whether ``error`` is a refusal on purpose (autofe's errors, an MCP ``ToolError``).

    Not the SDK's ``UnexpectedToolError``, which only wraps a crash.
    """
    if isinstance(error, UnexpectedToolError):
        return False
    return isinstance(error, AutofeError | ToolError)


def _clause(detail: ErrorDetails) -> str:
    where = ".".join(str(part) for part in detail["loc"])
    reason = _reason(detail)
    return f"{where}: {reason}" if where else reason


def _reason(detail: ErrorDetails) -> str:
    kind, value, ctx = detail["type"], detail.get("input"), detail.get("ctx") or {}
    if kind == "missing":
        return "required, not given"
    if kind == "string_too_long" and isinstance(value, str):
        return f"{len(value)} characters, at most {ctx.get('max_length')}"
    if kind == "string_too_short" and isinstance(value, str):
        return f"{len(value)} characters, at least {ctx.get('min_length')}"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    message = detail["msg"][:1].lower() + detail["msg"][1:]
    if value is None or isinstance(value, str):
        return f"{message}, got {shown(value)}"
    return f"{message}, got {type(value).__name__} {shown(value)}"


def _cut(message: str) -> str:
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[: MAX_MESSAGE - 40]}... ({len(message)} characters, cut)"
