"""The fields the event-log parser reads and what each must hold.

A log written by a buggy listener, edited by hand or damaged on disk can hold a string where
Spark writes epoch milliseconds, ``1e300`` where it writes a count, or an object where it
writes a name. Such a value used to travel into the row builder and stop the whole ingest
(``ts("yesterday")``). Every field a handler of :mod:`autofe.ingest.eventlog.parse` reads is listed
here instead, with its kind, and :func:`check_fields` looks at an event before its handler
does. A log holding a bad value is refused whole, the report naming file, line and field:
Spark never writes one, so the log is not what Spark wrote, and which of its other values to
trust would be a guess. Absent fields and nulls stay what they were (absent), except for an
*identity* (the job, stage, SQL execution or executor an event is about), which must not be
null.

The table is also what the property test substitutes bad values into, and a test checks that
the handlers read no field it lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

FieldKind = Literal[
    "ms", "int32", "int64", "metric", "text", "flag", "object", "objects", "int_list",
    "properties", "int_text",
]  # fmt: skip

MAX_EPOCH_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z, the last instant a warehouse TIMESTAMP (and Python) can hold."""
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
METRIC_LIMIT = 1 << 53
"""Larger task metrics are garbage (2^53 bytes is 8 PiB for one task); summing a stage's
tasks stays far inside the warehouse's BIGINT."""
EACH = "[]"
"""A path step standing for every element of a list."""


@dataclass(frozen=True)
class EventField:
    """One field a handler reads: where it sits in the event and what it must hold.

    ``path`` steps through nested objects; ``[]`` steps into each element of a list.
    ``identity`` fields name what the event is about, so a null one is as bad as a wrong type
    (anywhere else a null reads as absent).
    """

    path: tuple[str, ...]
    kind: FieldKind
    identity: bool = False

    @property
    def dotted(self) -> str:
        """The path as the report shows it.

        >>> EventField(("Stage Infos", "[]", "Stage ID"), "int32").dotted
        'Stage Infos[].Stage ID'
        """
        return ".".join(self.path).replace(".[]", "[]")


@dataclass(frozen=True)
class FieldProblem:
    """The bad value :func:`check_fields` found; ``reason`` is the report's text."""

    field: EventField
    reason: str


def _f(path: str | tuple[str, ...], kind: FieldKind, identity: bool = False) -> EventField:
    """A field from its dotted path (a tuple when a key holds dots itself)."""
    if isinstance(path, str):
        path = tuple(path.replace("[]", ".[]").split("."))
    return EventField(path, kind, identity)


_STAGE_INFO = ("Stage ID", "Stage Attempt ID", "Stage Name", "Number of Tasks", "Submission Time")
_METRIC_SECTIONS = {
    "": (
        "Executor Run Time", "Executor CPU Time", "Executor Deserialize Time", "JVM GC Time",
        "Memory Bytes Spilled", "Disk Bytes Spilled", "Result Size", "Peak Execution Memory",
    ),
    "Input Metrics": ("Bytes Read", "Records Read"),
    "Output Metrics": ("Bytes Written", "Records Written"),
    "Shuffle Read Metrics": (
        "Remote Bytes Read", "Local Bytes Read", "Total Records Read", "Fetch Wait Time",
    ),
    "Shuffle Write Metrics": (
        "Shuffle Bytes Written", "Shuffle Records Written", "Shuffle Write Time",
    ),
}  # fmt: skip
_FIELD_KINDS: dict[str, FieldKind] = {
    "Stage ID": "int32",
    "Stage Attempt ID": "int32",
    "Stage Name": "text",
    "Number of Tasks": "int32",
    "Submission Time": "ms",
    "Completion Time": "ms",
    "Failure Reason": "text",
}


def _stage_info(prefix: str, names: tuple[str, ...]) -> tuple[EventField, ...]:
    ids = ("Stage ID", "Stage Attempt ID")
    return tuple(_f(f"{prefix}.{n}", _FIELD_KINDS[n], n in ids) for n in names)


def _task_metrics() -> tuple[EventField, ...]:
    fields = [_f("Task Metrics", "object")]
    for section, names in _METRIC_SECTIONS.items():
        prefix = f"Task Metrics.{section}." if section else "Task Metrics."
        if section:
            fields.append(_f(prefix.rstrip("."), "object"))
        fields += [_f(prefix + name, "metric") for name in names]
    return tuple(fields)


EVENT_FIELDS: dict[str, tuple[EventField, ...]] = {
    "SparkListenerLogStart": (_f("Spark Version", "text"),),
    "SparkListenerApplicationStart": (
        _f("App Name", "text"),
        _f("App ID", "text"),
        _f("App Attempt ID", "text"),
        _f("Timestamp", "ms"),
        _f("User", "text"),
    ),
    "SparkListenerApplicationEnd": (_f("Timestamp", "ms"),),
    "SparkListenerEnvironmentUpdate": (_f("Spark Properties", "properties"),),
    "SparkListenerJobStart": (
        _f("Job ID", "int32", identity=True),
        _f("Submission Time", "ms"),
        _f("Stage IDs", "int_list"),
        _f("Properties", "object"),
        _f(("Properties", "spark.sql.execution.id"), "int_text"),
        _f("Stage Infos", "objects"),
        *_stage_info("Stage Infos[]", _STAGE_INFO),
    ),
    "SparkListenerJobEnd": (
        _f("Job ID", "int32", identity=True),
        _f("Completion Time", "ms"),
        _f("Job Result", "object"),
        _f("Job Result.Result", "text"),
    ),
    "SparkListenerStageSubmitted": (
        _f("Stage Info", "object", identity=True),
        *_stage_info("Stage Info", _STAGE_INFO),
    ),
    "SparkListenerStageCompleted": (
        _f("Stage Info", "object", identity=True),
        *_stage_info("Stage Info", (*_STAGE_INFO, "Completion Time", "Failure Reason")),
    ),
    "SparkListenerTaskEnd": (
        _f("Stage ID", "int32", identity=True),
        _f("Stage Attempt ID", "int32", identity=True),
        _f("Task Info", "object", identity=True),
        _f("Task Info.Launch Time", "ms"),
        _f("Task Info.Finish Time", "ms"),
        _f("Task Info.Failed", "flag"),
        _f("Task Info.Killed", "flag"),
        _f("Task End Reason", "object"),
        _f("Task End Reason.Reason", "text"),
        *_task_metrics(),
    ),
    "SparkListenerSQLExecutionStart": (
        _f("executionId", "int64", identity=True),
        _f("rootExecutionId", "int64"),
        _f("description", "text"),
        _f("physicalPlanDescription", "text"),
        _f("time", "ms"),
    ),
    "SparkListenerSQLExecutionEnd": (
        _f("executionId", "int64", identity=True),
        _f("time", "ms"),
        _f("errorMessage", "text"),
    ),
    "SparkListenerSQLAdaptiveExecutionUpdate": (
        _f("executionId", "int64", identity=True),
        _f("physicalPlanDescription", "text"),
    ),
    "SparkListenerExecutorAdded": (
        _f("Executor ID", "text", identity=True),
        _f("Executor Info", "object"),
        _f("Executor Info.Host", "text"),
        _f("Executor Info.Total Cores", "int32"),
        _f("Timestamp", "ms"),
    ),
    "SparkListenerExecutorRemoved": (
        _f("Executor ID", "text", identity=True),
        _f("Timestamp", "ms"),
        _f("Removed Reason", "text"),
    ),
    "SparkListenerBlockManagerAdded": (
        _f("Block Manager ID", "object"),
        _f("Block Manager ID.Executor ID", "text"),
        _f("Block Manager ID.Host", "text"),
        _f("Timestamp", "ms"),
    ),
}
"""Per event, every field its handler reads (containers before what they hold)."""


def _whole(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _int_text(value: Any) -> bool:
    if type(value) is int:
        return 0 <= value <= INT64_MAX
    if not isinstance(value, str) or len(value) > 20:
        return False
    return value == "" or (value.isascii() and value.isdigit() and int(value) <= INT64_MAX)


def _properties(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    return isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value)


class _Never:
    """A type no JSON value has: kinds decided by their ``deep`` check alone."""


@dataclass(frozen=True)
class _Kind:
    """How a kind is checked: the exact type orjson gives a good value, its range, the rest."""

    problem: str
    type_: type[Any]
    low: int | None = None
    high: int | None = None
    deep: Callable[[Any], bool] | None = None


_KINDS: dict[FieldKind, _Kind] = {
    "ms": _Kind("is not epoch milliseconds", int, 0, MAX_EPOCH_MS),
    "int32": _Kind(f"is not a whole number in 0..{INT32_MAX}", int, 0, INT32_MAX),
    "int64": _Kind(f"is not a whole number in 0..{INT64_MAX}", int, 0, INT64_MAX),
    "metric": _Kind("is not a whole number within ±2^53", int, -METRIC_LIMIT, METRIC_LIMIT),
    "text": _Kind("is not a string", str),
    "flag": _Kind("is not true or false", bool),
    "object": _Kind("is not a JSON object", dict),
    "objects": _Kind(
        "is not a list of JSON objects", list, deep=lambda v: all(type(x) is dict for x in v)
    ),
    "int_list": _Kind(
        f"is not a list of whole numbers in 0..{INT32_MAX}",
        list,
        deep=lambda v: all(_whole(x, 0, INT32_MAX) for x in v),
    ),
    "properties": _Kind("is not an object of properties", _Never, deep=_properties),
    "int_text": _Kind(f"is not a whole number in 0..{INT64_MAX}", _Never, deep=_int_text),
}

_Bucket = tuple[
    type[Any], int | None, int | None, Callable[[Any], bool] | None, bool, tuple[str, ...],
    tuple[EventField, ...],
]  # fmt: skip
"""type, low, high, deep check, identity, keys, fields: the fields of one object checked
alike, as a flat tuple because it is unpacked for every TaskEnd."""


@dataclass(frozen=True)
class _Node:
    """The checks for one object of an event, and the objects nested in it.

    ``children`` are (key, node for the object under key, node for each element of the list
    under key); either node may be None.
    """

    buckets: tuple[_Bucket, ...]
    children: tuple[tuple[str, _Node | None, _Node | None], ...]
    uniform: _Uniform | None = None
    """Set when everything below is whole numbers of one range in plain objects (a TaskEnd's
    metrics): then one loop accepts the common case, all good."""


_Uniform = tuple[int, int, tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]]
"""low, high, and (path of the object below the node, keys of its numbers) per object."""


def _uniform(fields: Sequence[EventField], depth: int) -> _Uniform | None:
    """The single-loop plan for fields below ``depth``, if they are numbers of one kind."""
    numbers = [f for f in fields if f.kind != "object"]
    kinds = {f.kind for f in numbers}
    if len(kinds) != 1 or any(f.identity or EACH in f.path for f in fields):
        return None
    kind = _KINDS[kinds.pop()]
    if kind.low is None or kind.high is None or kind.deep is not None:
        return None
    groups: dict[tuple[str, ...], list[str]] = {}
    for f in numbers:
        groups.setdefault(f.path[depth:-1], []).append(f.path[-1])
    if any(len(path) > 1 for path in groups):
        return None
    containers = {f.path[depth:] for f in fields if f.kind == "object"}
    if containers != {path for path in groups if path}:
        return None
    plan = tuple((path, tuple(keys)) for path, keys in groups.items())
    return kind.low, kind.high, plan


def _compile(fields: Sequence[EventField], depth: int = 0) -> _Node:
    """A tree of checks, so each object of an event is looked up once.

    Fields of an object are bucketed by kind, so the common case, every value good, costs one
    loop per kind: the check runs for every TaskEnd, most of a log's lines. An object's own
    buckets run before its children, so a container that is not an object is dropped before
    what it should hold is looked for.
    """
    here: dict[tuple[FieldKind, bool], list[EventField]] = {}
    below: dict[str, list[EventField]] = {}
    for f in fields:
        if len(f.path) == depth + 1:
            here.setdefault((f.kind, f.identity), []).append(f)
        else:
            below.setdefault(f.path[depth], []).append(f)
    buckets = tuple(
        (k.type_, k.low, k.high, k.deep, identity, tuple(f.path[-1] for f in fs), tuple(fs))
        for (kind, identity), fs in here.items()
        if (k := _KINDS[kind])
    )
    children = []
    for key, fs in below.items():
        each = [f for f in fs if f.path[depth + 1] == EACH]
        inner = [f for f in fs if f.path[depth + 1] != EACH]
        children.append(
            (
                key,
                _compile(inner, depth + 1) if inner else None,
                _compile(each, depth + 2) if each else None,
            )
        )
    return _Node(buckets, tuple(children), _uniform(fields, depth))


_COMPILED: dict[str, _Node] = {name: _compile(fields) for name, fields in EVENT_FIELDS.items()}


def shown(value: Any, limit: int = 40) -> str:
    """A value as the report quotes it: its repr, cut short (a bad field can be 60 MB).

    >>> shown("yesterday"), shown(1e300), shown("x" * 100)
    ("'yesterday'", '1e+300', "'xxxxxxxxxx'… (100 characters)")
    """
    if isinstance(value, str) and len(value) > limit:
        return f"{value[: limit // 4]!r}… ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def check_fields(name: str, event: dict[str, Any]) -> FieldProblem | None:
    """The first bad value among the fields ``name``'s handler reads, if any.

    A null counts as absent, except for an identity field.

    >>> check_fields("SparkListenerJobStart", {"Job ID": 3, "Submission Time": "yesterday"})
    FieldProblem(field=EventField(path=('Submission Time',), kind='ms', identity=False), \
reason="field 'Submission Time' is not epoch milliseconds: 'yesterday'")
    >>> check_fields("SparkListenerJobStart", {"Job ID": 3, "Submission Time": None}) is None
    True
    """
    node = _COMPILED.get(name)
    return None if node is None else _walk(node, event)


def _walk(node: _Node, holder: dict[str, Any]) -> FieldProblem | None:
    """Check one object and what it holds.

    The loops are written out (no helper call per value): this runs for every TaskEnd.
    """
    if node.uniform is not None and _uniform_good(node.uniform, holder):
        return None
    get: Callable[[str], Any] = holder.get
    for bucket in node.buckets:
        type_, low, high, deep, identity, keys, _ = bucket
        if deep is not None:
            pass
        elif low is not None and high is not None:
            for v in map(get, keys):
                if (type(v) is not type_ or v < low or v > high) and (v is not None or identity):
                    break
            else:
                continue
        else:
            for v in map(get, keys):
                if type(v) is not type_ and (v is not None or identity):
                    break
            else:
                continue
        problem = _first_bad(bucket, holder)
        if problem is not None:
            return problem
    for key, inner, each in node.children:
        value = get(key)
        if inner is not None and type(value) is dict and (problem := _walk(inner, value)):
            return problem
        if each is not None and type(value) is list:
            for item in value:
                if type(item) is dict and (problem := _walk(each, item)):
                    return problem
    return None


def _uniform_good(plan: _Uniform, holder: dict[str, Any]) -> bool:
    """All of a uniform node's numbers good (and its objects objects), in one loop."""
    low, high, groups = plan
    for path, keys in groups:
        if path:
            inner = holder.get(path[0])
            if inner is None:
                continue
            if type(inner) is not dict:
                return False
        else:
            inner = holder
        get: Callable[[str], Any] = inner.get
        for v in map(get, keys):
            if v is not None and (type(v) is not int or v < low or v > high):
                return False
    return True


def _first_bad(bucket: _Bucket, holder: dict[str, Any]) -> FieldProblem | None:
    """Look at each value of a bucket the quick loop doubted (an absent identity is fine)."""
    type_, low, high, deep, identity, keys, fields = bucket
    for key, field in zip(keys, fields, strict=True):
        if key not in holder:
            continue
        value = holder[key]
        if value is None:
            if not identity:
                continue
        elif deep is not None:
            if (type_ is _Never or type(value) is type_) and deep(value):
                continue
        elif type(value) is type_ and (low is None or high is None or low <= value <= high):
            continue
        kind = _KINDS[field.kind]
        problem = "is null" if value is None else f"{kind.problem}: {shown(value)}"
        return FieldProblem(field, f"field '{field.dotted}' {problem}")
    return None
