"""``HOME/served.jsonl``: lines appended whole, read back from the end, damage skipped."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from autofe.pipelines import served_log
from autofe.pipelines.served_log import Served, ServedLog, ServedTail, read_served_tail


def served(i: int, **features: float | str | bool | None) -> Served:
    return Served(1_700_000_000.0 + i, "v0001", f"run-{i}", "109", features)


def test_appended_records_read_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "served.jsonl"
    log = ServedLog(path)
    written = [
        served(0, cfg_total_cores=8.0, job_schedule="hourly", cal_weekend=False, hist=None),
        Served(1_700_000_001.5, None, None, None, {}),
        served(2, cfg_total_cores=4.0, job_schedule="daily", cal_weekend=True, hist=3.25),
    ]
    for record in written:
        log.append(record)
    tail = read_served_tail(path, 10)
    assert tail == ServedTail(lines=3, records=tuple(written), skipped=0)
    assert read_served_tail(path, 2).records == tuple(written[1:])
    assert [json.loads(line)["run_id"] for line in path.read_text().splitlines()] == [
        "run-0",
        None,
        "run-2",
    ]


def test_non_finite_values_are_written_as_null(tmp_path: Path) -> None:
    path = tmp_path / "served.jsonl"
    ServedLog(path).append(served(0, a=float("nan"), b=float("inf"), c=1.0))
    json.loads(path.read_text(), parse_constant=pytest.fail)  # strict JSON: no NaN token
    assert read_served_tail(path, 1).records[0].features == {"a": None, "b": None, "c": 1.0}


def test_a_torn_last_line_and_bad_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "served.jsonl"
    log = ServedLog(path)
    log.append(served(0, x=1.0))
    with path.open("a", encoding="utf-8") as handle:
        handle.write("not json\n")
        handle.write('{"at_s": "yesterday", "features": {}}\n')
        handle.write('{"at_s": 5, "features": {"x": [1, 2]}}\n')
    log.append(served(1, x=2.0))
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"at_s": 1700000002.0, "model_version": "v0001", "fea')  # torn
    tail = read_served_tail(path, 100)
    assert tail.lines == 6  # every line read, the torn one too
    assert tail.skipped == 4
    assert [r.features for r in tail.records] == [{"x": 1.0}, {"x": 2.0}]


def test_a_missing_file_is_no_records(tmp_path: Path) -> None:
    assert read_served_tail(tmp_path / "served.jsonl", 50) == ServedTail(0, (), 0)


def test_an_unwritable_path_raises_oserror(tmp_path: Path) -> None:
    path = tmp_path / "served.jsonl"
    path.mkdir()
    with pytest.raises(OSError):
        ServedLog(path).append(served(0, x=1.0))


@pytest.mark.parametrize("count", [1_000, 200_000])
def test_only_the_tail_is_read_however_long_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """The lines decoded, and the bytes read (Linux's per-process count), are the same for a
    file of 0.12 MB and of 24 MB."""
    path = tmp_path / "served.jsonl"
    line = json.dumps(served(0, x=1.0, y="a").as_dict()) + "\n"
    path.write_text(line * count, encoding="utf-8")
    decoded: list[str] = []
    parse = served_log.parse_served

    def counting(text: str) -> Served | None:
        decoded.append(text)
        return parse(text)

    monkeypatch.setattr(served_log, "parse_served", counting)
    before = _bytes_read()
    tail = read_served_tail(path, 500)
    read = _bytes_read() - before
    assert (tail.lines, len(tail.records), tail.skipped) == (500, 500, 0)
    assert len(decoded) == 500
    assert read <= 2 * 65536  # the one or two blocks at the end that hold 500 lines


def _bytes_read() -> int:
    """Bytes this process has read through read(2) and kin (``rchar`` of /proc/self/io)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"])


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    """Lines far longer than an I/O buffer (here ~20 KB), from four threads at once."""
    path = tmp_path / "served.jsonl"
    log = ServedLog(path)
    features: dict[str, float | str | bool | None] = {f"f{i:04d}": float(i) for i in range(1000)}

    def writer(k: int) -> None:
        for i in range(50):
            log.append(Served(float(i), "v0001", f"t{k}-{i}", str(k), features))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tail = read_served_tail(path, 1000)
    assert (tail.lines, len(tail.records), tail.skipped) == (200, 200, 0)
    assert {r.run_id for r in tail.records} == {f"t{k}-{i}" for k in range(4) for i in range(50)}
    assert all(r.features == features for r in tail.records)
