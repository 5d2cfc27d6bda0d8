"""The field table is the parser's: every field a handler reads is in it, and nothing else.

Each handler runs on real events wrapped so that every field it looks up is recorded; the
table must list exactly what was read. A field a handler starts reading without a table entry
would reach the warehouse unchecked, and the property test would never substitute into it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from autofe.ingest.eventlog.fields import (
    EACH,
    EVENT_FIELDS,
    INT32_MAX,
    MAX_EPOCH_MS,
    METRIC_LIMIT,
    check_fields,
)
from autofe.ingest.eventlog.files import find_event_logs
from autofe.ingest.eventlog.parse import (
    HANDLERS,
    ParsedApplication,
    _add_good_task_end,
    iter_lines,
    short_event_name,
)

SAMPLES_PER_EVENT = 40
Path_ = tuple[str, ...]


class Recorded(dict[str, Any]):
    """A JSON object that records the path of every field looked up in it (or below it)."""

    def __init__(self, data: dict[str, Any], at: Path_, reads: set[Path_]) -> None:
        super().__init__(data)
        self.at, self.reads = at, reads

    def _wrap(self, key: str, value: Any) -> Any:
        self.reads.add((*self.at, key))
        if isinstance(value, dict):
            return Recorded(value, (*self.at, key), self.reads)
        if isinstance(value, list):
            inner = (*self.at, key, EACH)
            return [Recorded(v, inner, self.reads) if isinstance(v, dict) else v for v in value]
        return value

    def __getitem__(self, key: str) -> Any:
        return self._wrap(key, super().__getitem__(key))

    def get(self, key: str, default: Any = None) -> Any:
        return self._wrap(key, super().get(key, default))


def _events(eventlogs: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for source in find_event_logs(eventlogs):
        app = ParsedApplication(path=str(source.path))
        for part in source.parts:
            for _, line in iter_lines(part, app):
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(event, dict) and isinstance(event.get("Event"), str):
                    yield short_event_name(event["Event"]), event


@pytest.fixture(scope="module")
def samples(eventlogs: Path) -> dict[str, list[dict[str, Any]]]:
    """Up to SAMPLES_PER_EVENT real events of each handled type, from the whole corpus."""
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in HANDLERS}
    for name, event in _events(eventlogs):
        if name in found and len(found[name]) < SAMPLES_PER_EVENT:
            found[name].append(event)
    return found


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_the_table_lists_exactly_the_fields_the_handler_reads(
    name: str, samples: dict[str, list[dict[str, Any]]]
) -> None:
    assert samples[name], f"no real {name} in the corpus"
    reads: set[Path_] = set()
    for event in samples[name]:
        HANDLERS[name](ParsedApplication(path="x"), Recorded(event, (), reads))
    assert reads == {f.path for f in EVENT_FIELDS[name]}


def test_every_handled_event_has_a_table_entry() -> None:
    assert set(EVENT_FIELDS) == set(HANDLERS)


def test_real_events_pass_the_check(samples: dict[str, list[dict[str, Any]]]) -> None:
    refused = [
        (name, problem.reason)
        for name, events in samples.items()
        for event in events
        if (problem := check_fields(name, event))
    ]
    assert refused == []


TASK_END = "SparkListenerTaskEnd"
SUBSTITUTES: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 0.0, 1.5, 1e300, "", "yesterday", "a\x00b", [], [1], {}, {"a": 1},
    INT32_MAX, INT32_MAX + 1, MAX_EPOCH_MS, MAX_EPOCH_MS + 1, METRIC_LIMIT, METRIC_LIMIT + 1,
    -METRIC_LIMIT, -METRIC_LIMIT - 1, 2**70,
)  # fmt: skip
"""Good and bad values of every kind a TaskEnd field has, at and beyond each bound."""
ABSENT = object()


def _substituted(event: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    """A copy of the event with ``value`` at ``path`` (the field removed for ABSENT)."""
    copy: dict[str, Any] = orjson.loads(orjson.dumps(event))
    holder = copy
    for step in path[:-1]:
        inner = holder.get(step)
        holder = holder.setdefault(step, {}) if inner is None else inner
        if not isinstance(holder, dict):
            return copy
    if value is ABSENT:
        holder.pop(path[-1], None)
    else:
        holder[path[-1]] = value
    return copy


def _folded(event: dict[str, Any], fast: bool) -> dict[Any, Any] | None:
    """The stages a TaskEnd leaves, on the fast path or through the handler (None: refused)."""
    app = ParsedApplication(path="x")
    if fast:
        if not _add_good_task_end(app, event):
            return None
    else:
        HANDLERS[TASK_END](app, event)
    return {key: (vars(stage.tasks)) for key, stage in app.stages.items()}


def test_the_task_end_fast_path_agrees_with_the_table(
    samples: dict[str, list[dict[str, Any]]],
) -> None:
    """The fast path accepts only what check_fields accepts, and then folds what the handler
    folds; it accepts every real TaskEnd. Every table field gets every substitute."""
    events = samples[TASK_END][:4]
    assert all(_folded(e, fast=True) == _folded(e, fast=False) for e in events)
    accepted = refused = 0
    for field in EVENT_FIELDS[TASK_END]:
        for value in (*SUBSTITUTES, ABSENT):
            for event in events:
                edited = _substituted(event, field.path, value)
                fast = _folded(edited, fast=True)
                if fast is None:
                    refused += 1
                    continue
                accepted += 1
                assert check_fields(TASK_END, edited) is None, (field.dotted, value)
                assert fast == _folded(edited, fast=False), (field.dotted, value)
    assert accepted and refused
