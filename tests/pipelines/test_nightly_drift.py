"""Reading the actuals the prediction API appends: what counts, what is skipped."""

from __future__ import annotations

import json
from pathlib import Path

from autofe.pipelines.nightly_drift import Actual, psi_level, read_actuals


def test_actuals_keep_valid_lines_and_count_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "actuals.jsonl"
    lines = [
        json.dumps({"run_id": "1449", "job_id": "115", "duration_s": 16.1}),
        "",
        json.dumps({"run_id": 1450, "duration_s": "18.5", "predicted_p50_s": None}),
        json.dumps({"run_id": "1455", "duration_s": 10.0, "predicted_p50_s": 12.0}),
        json.dumps({"run_id": "1451", "duration_s": 0}),  # not a duration
        json.dumps({"run_id": "1452", "duration_s": float("nan")}),
        json.dumps({"job_id": "115", "duration_s": 3.0}),  # no run id
        json.dumps(["1453", 3.0]),  # not an object
        '{"run_id": "1454", "durat',  # torn: the API was appending
    ]
    path.write_text("\n".join(lines))
    valid, invalid = read_actuals(path)
    assert valid == [Actual("1449", 16.1), Actual("1450", 18.5), Actual("1455", 10.0, 12.0)]
    assert invalid == 5  # the blank line is neither


def test_psi_levels_follow_the_rule_of_thumb() -> None:
    assert [psi_level(x) for x in (0.0, 0.1, 0.1001, 0.25, 0.2501)] == [
        "stable",
        "stable",
        "moderate",
        "moderate",
        "shifted",
    ]
