"""The model registry: versions, the atomic active pointer, the promotion history, and
promotion refusing a version that does not load."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
from planted_models import plant, touch

from autofe.errors import ModelError
from autofe.modeling.artifact import MANIFEST_FILE, MODEL_FILE
from autofe.modeling.registry import ACTIVE_FILE, HISTORY_FILE, Registry
from autofe.warehouse.connect import schema_fingerprint


def test_versions_are_numbered_and_not_active_until_promoted(
    tmp_path: Path, manual_model: Path
) -> None:
    registry = Registry(tmp_path)
    assert registry.versions() == [] and registry.active() is None
    first = registry.add(manual_model, {"mape": 0.3})
    second = registry.add(manual_model, {"mape": 0.25})
    assert [v.name for v in registry.versions()] == ["v0001", "v0002"]
    assert registry.version("v0002").metrics == {"mape": 0.25}
    assert registry.active() is None
    registry.promote(first.name, "first model")
    registry.promote(second.name, "MAPE 25.0 % < 30.0 %")
    active = registry.active()
    assert active is not None and active.name == "v0002"
    history = registry.history()
    assert [h["version"] for h in history] == ["v0001", "v0002"]
    assert history[1]["previous"] == "v0001" and history[1]["reason"].startswith("MAPE")


def test_a_registered_version_loads_with_its_hash_checked(
    tmp_path: Path, manual_model: Path
) -> None:
    registry = Registry(tmp_path)
    version = registry.add(manual_model, {})
    artifact = registry.load(version.name, schema_fingerprint())
    assert artifact.specs and (version.path / MANIFEST_FILE).is_file()
    (version.path / MODEL_FILE).write_bytes(b"tampered")
    with pytest.raises(ModelError, match="SHA-256"):
        registry.load(version.name, schema_fingerprint())


def test_a_kept_champion_is_recorded_without_moving_the_pointer(
    tmp_path: Path, manual_model: Path
) -> None:
    registry = Registry(tmp_path)
    registry.promote(registry.add(manual_model, {}).name, "first model")
    stamp = (registry.root / ACTIVE_FILE).read_bytes()
    challenger = registry.add(manual_model, {})
    registry.record({"decision": "kept", "version": "v0001", "challenger": challenger.name})
    assert (registry.root / ACTIVE_FILE).read_bytes() == stamp
    assert registry.history()[-1]["decision"] == "kept"


def test_bad_input_names_the_version_or_folder(tmp_path: Path, manual_model: Path) -> None:
    registry = Registry(tmp_path)
    with pytest.raises(ModelError, match="'v0009' is not in the registry"):
        registry.promote("v0009", "no such model")
    with pytest.raises(ModelError, match=r"no model\.joblib"):
        registry.add(tmp_path / "empty", {})
    assert registry.active() is None


def test_a_crash_while_adding_leaves_no_version_and_a_torn_history_line_is_skipped(
    tmp_path: Path, manual_model: Path
) -> None:
    registry = Registry(tmp_path)
    registry.promote(registry.add(manual_model, {}).name, "first model")
    partial = registry.root / ".v0002.partial"  # what a crash mid-copy leaves behind
    shutil.copytree(registry.root / "v0001", partial)
    (partial / MODEL_FILE).unlink()
    with (registry.root / HISTORY_FILE).open("a") as handle:
        handle.write('{"decision": "prom')  # a write cut short
    assert [v.name for v in registry.versions()] == ["v0001"]
    assert registry.add(manual_model, {}).name == "v0002"
    assert len(registry.history()) == 1
    assert json.loads((registry.root / ACTIVE_FILE).read_text())["version"] == "v0001"


def test_the_active_stamp_changes_with_every_promotion_however_fast(
    tmp_path: Path, manual_model: Path
) -> None:
    registry = Registry(tmp_path)
    assert registry.active_stamp() == b""
    first, second = registry.add(manual_model, {}), registry.add(manual_model, {})
    stamps = []
    for version in (first, second, first):
        registry.promote(version.name, "back and forth")
        stamps.append(registry.active_stamp())
    assert stamps[0] != stamps[1] != stamps[2]


@pytest.mark.parametrize("plant_kind", ["code-running pickle", "damaged file"])
def test_a_planted_version_is_refused_at_promotion_and_runs_nothing(
    tmp_path: Path, manual_model: Path, plant_kind: str
) -> None:
    """The pointer only ever names a version that loads: a planted one never becomes active."""
    registry = Registry(tmp_path / "home")
    registry.promote(registry.add(manual_model, {}).name, "first model")
    planted = registry.add(manual_model, {})
    sentinel = tmp_path / "SENTINEL"
    if plant_kind == "damaged file":
        (planted.path / MODEL_FILE).write_bytes(b"tampered")
        refusal = "SHA-256 differs"
    else:
        plant(planted.path, pickle.dumps(touch(sentinel)))
        refusal = r"references posix\.system, which an autofe model never contains"
    stamp, history = registry.active_stamp(), registry.history()
    with pytest.raises(ModelError, match=rf"^refusing to promote v0002: .*{refusal}"):
        registry.promote(planted.name, "better")
    assert not sentinel.exists()
    assert registry.active_stamp() == stamp and registry.history() == history
    active = registry.active()
    assert active is not None and active.name == "v0001"
