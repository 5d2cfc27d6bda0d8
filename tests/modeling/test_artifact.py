"""Artifacts: a round trip, and refusals for a tampered or planted file, a missing manifest, an
older format, parts of the wrong type, another schema."""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from planted_models import PAYLOADS, payloads, plant, touch

from autofe.errors import ModelError
from autofe.featurespec import FeatureSpec
from autofe.modeling import artifact as artifact_module
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
    save_model(artifact, tmp_path)
    data = bytearray((tmp_path / MODEL_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / MODEL_FILE).write_bytes(bytes(data))
    monkeypatch.setattr(artifact_module, "safe_unpickle", _never("unpickled a tampered file"))
    with pytest.raises(ModelError, match="SHA-256 differs"):
        load_model(tmp_path, schema_fingerprint())


@pytest.mark.parametrize("kind", PAYLOADS)
def test_a_planted_model_with_a_matching_hash_runs_nothing(
    tmp_path: Path, artifact: Artifact, kind: str
) -> None:
    """The manifest's SHA-256 sits beside the file: whoever plants one rewrites the other."""
    folder = tmp_path / "model"
    save_model(artifact, folder)
    sentinel = tmp_path / "SENTINEL"
    data, refusal = payloads(sentinel, tmp_path)[kind]
    plant(folder, data)
    with pytest.raises(ModelError) as refused:
        load_model(folder, schema_fingerprint())
    assert not sentinel.exists()
    assert re.search(rf"model\.joblib: {refusal}, which an autofe model", str(refused.value))


def test_a_payload_inside_a_real_model_runs_nothing(tmp_path: Path, artifact: Artifact) -> None:
    sentinel = tmp_path / "SENTINEL"
    hostile = replace(artifact, metrics={"holdout": touch(sentinel)})  # type: ignore[dict-item]
    save_model(artifact, tmp_path)
    plant(tmp_path, pickle.dumps(hostile, protocol=5))
    with pytest.raises(ModelError) as refused:
        load_model(tmp_path, schema_fingerprint())
    assert not sentinel.exists()
    assert "references posix.system" in str(refused.value)


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"booster": {}}, r"the model's model\.booster is a dict"),
        ({"folds": ({},)}, r"the model's model\.folds holds something not a Booster"),
        ({"features": "size"}, r"the model's model\.features is a str"),
    ],
)
def test_a_model_of_allowed_types_put_together_wrongly_is_refused(
    tmp_path: Path, artifact: Artifact, change: dict[str, Any], refusal: str
) -> None:
    """Allowed types, wrong places: refused at load, not at its first prediction."""
    save_model(artifact, tmp_path)
    plant(tmp_path, pickle.dumps(replace(artifact, model=replace(artifact.model, **change))))
    with pytest.raises(ModelError, match=refusal):
        load_model(tmp_path, schema_fingerprint())


def test_a_planted_feature_spec_is_validated_again(tmp_path: Path, artifact: Artifact) -> None:
    """Unpickling sets a spec's fields without pydantic's checks."""
    bad = FeatureSpec.model_construct(name="Not Snake", sql="SELECT 1", category="history")
    save_model(artifact, tmp_path)
    plant(tmp_path, pickle.dumps(replace(artifact, specs=(bad,))))
    with pytest.raises(ModelError, match="a feature spec in the model is invalid"):
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


@pytest.mark.parametrize("old", [1, 2])
def test_a_model_of_an_older_format_is_refused_before_unpickling(
    tmp_path: Path, artifact: Artifact, monkeypatch: pytest.MonkeyPatch, old: int
) -> None:
    """Format 1 had no fold models for CV+; format 2 was joblib's format, not a plain pickle."""
    save_model(artifact, tmp_path)
    manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
    if old == 1:
        del manifest["format"]  # what format-1 models wrote
    else:
        manifest["format"] = old
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))
    monkeypatch.setattr(artifact_module, "safe_unpickle", _never("unpickled an old model"))
    with pytest.raises(
        ModelError, match=rf"model format {old}, this autofe reads format 3.*retrain"
    ):
        load_model(tmp_path, schema_fingerprint())


def _never(reason: str) -> Callable[..., object]:
    def fail(*args: object, **kwargs: object) -> object:
        pytest.fail(reason)

    return fail
