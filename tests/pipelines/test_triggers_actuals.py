"""The actuals a degradation check reads: the server's cursor parses only what was appended,
and always agrees with reading the tail afresh."""

from __future__ import annotations

import json
from pathlib import Path

from autofe.pipelines.triggers_actuals import ActualsCursor, latest_actuals


def line(i: int) -> str:
    record = {
        "run_id": f"r{i}",
        "job_id": f"j{i % 7}",
        "duration_s": 10.0 + i,
        "reported_at": "2027-01-15T08:00:00+00:00",
        "predicted_p50_s": 11.0,
        "model_version": "v0001",
    }
    return json.dumps(record) + "\n"


def test_the_cursor_reads_only_what_was_appended_and_agrees_with_a_fresh_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "actuals.jsonl"
    cursor = ActualsCursor(path, keep=50)
    assert cursor.read() == []  # no file yet
    path.write_text("".join(line(i) for i in range(120)))
    assert [a.run_id for a in cursor.read()] == [f"r{i}" for i in range(70, 120)]
    with path.open("a") as out:
        out.write(line(120) + line(121)[:30])  # the second is still being written
    assert cursor.read()[-1].run_id == "r120"
    assert cursor.offset == path.stat().st_size - 30
    with path.open("a") as out:
        out.write(line(121)[30:])
    assert cursor.read() == latest_actuals(path, 50)
    path.write_text(line(500))  # rotated: a shorter file is read afresh
    assert [a.run_id for a in cursor.read()] == ["r500"]


def test_a_first_read_of_a_large_file_reads_its_end_only(tmp_path: Path) -> None:
    path = tmp_path / "actuals.jsonl"
    path.write_text("".join(line(i) for i in range(20_000)))
    cursor = ActualsCursor(path, keep=100)
    found = cursor.read()
    assert [a.run_id for a in found] == [f"r{i}" for i in range(19_900, 20_000)]
    assert found == latest_actuals(path, 100)
