"""Artifacts: a round trip, and refusals for a tampered file, a missing manifest, another schema."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from autofe.errors import ModelError
from autofe.featurespec import FeatureSpec
from autofe.modeling.artifact import (
    MANIFEST_FILE,
    MODEL_FILE,
    Artifact,
    library_versions,
    load_model,
    save_model,
)
from autofe.modeling.dataset import build_dataset
from autofe.modeling.train import fit
from autofe.warehouse.connect import schema_fingerprint


@pytest.fixture(scope="module")
def artifact() -> Artifact:
    """A model of a real shape on a small synthetic history (the file format is under test)."""
    rng = np.random.default_rng(0)
    sizes = rng.uniform(1, 100, 200)
    runs = [
        (f"r{i}", "job", datetime(2024, 1, 1) + timedelta(hours=i), 5 + 0.3 * s)
        for i, s in enumerate(sizes)
    ]
    data = build_dataset(runs, {"size": {f"r{i}": float(s) for i, s in enumerate(sizes)}})
    spec = FeatureSpec(
        name="size", sql="SELECT run_id, 1.0 AS value FROM runs", category="data-size"
    )
    return Artifact(fit(data, seed=0), (spec,), schema_fingerprint(), versions=library_versions())


def test_round_trip_predicts_the_same(tmp_path: Path, artifact: Artifact) -> None:
    save_model(artifact, tmp_path)
    loaded = load_model(tmp_path, schema_fingerprint())
    x = np.array([[10.0], [90.0]])
    assert np.array_equal(loaded.model.predict_seconds(x), artifact.model.predict_seconds(x))
    assert loaded.specs[0].name == "size" and loaded.versions["lightgbm"]


def test_a_tampered_model_is_refused_before_unpickling(
    tmp_path: Path, artifact: Artifact, monkeypatch: pytest.MonkeyPatch
) -> None:
    import joblib

    save_model(artifact, tmp_path)
    data = bytearray((tmp_path / MODEL_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / MODEL_FILE).write_bytes(bytes(data))
    monkeypatch.setattr(joblib, "load", lambda *a, **k: pytest.fail("unpickled a tampered file"))
    with pytest.raises(ModelError, match="SHA-256 differs"):
        load_model(tmp_path, schema_fingerprint())


def test_a_model_from_another_schema_is_refused(tmp_path: Path, artifact: Artifact) -> None:
    save_model(artifact, tmp_path)
    with pytest.raises(ModelError, match="trained on warehouse schema"):
        load_model(tmp_path, "0000000000000000")


def test_a_model_without_its_manifest_is_refused(tmp_path: Path, artifact: Artifact) -> None:
    save_model(artifact, tmp_path)
    (tmp_path / MANIFEST_FILE).unlink()
    with pytest.raises(ModelError, match="missing"):
        load_model(tmp_path / MODEL_FILE, schema_fingerprint())


def test_a_model_of_an_older_format_is_refused_before_unpickling(
    tmp_path: Path, artifact: Artifact, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model saved before the fold models were kept has no CV+ calibration to load."""
    import joblib

    save_model(artifact, tmp_path)
    manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
    del manifest["format"]  # what format-1 models wrote
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))
    monkeypatch.setattr(joblib, "load", lambda *a, **k: pytest.fail("unpickled an old model"))
    with pytest.raises(ModelError, match=r"model format 1.*retrain it"):
        load_model(tmp_path, schema_fingerprint())
