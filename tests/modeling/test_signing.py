"""Signed models: with AUTOFE_MODEL_KEY set only models signed with it load, checked before
unpickling; unset, a signed or unsigned model folder loads anywhere it is copied."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from planted_models import copy_model, plant

from autofe.errors import ModelError
from autofe.modeling import artifact as artifact_module
from autofe.modeling.artifact import MANIFEST_FILE, load_model, save_model
from autofe.modeling.signing import KEY_ENV
from autofe.warehouse.connect import schema_fingerprint


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory, manual_model: Path) -> Path:
    """The example-workspace model saved again with a key."""
    folder = tmp_path_factory.mktemp("signed")
    artifact = load_model(manual_model, schema_fingerprint())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, "the key")
        save_model(artifact, folder)
    return folder


def _not_unpickled(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> object:
        pytest.fail("unpickled a model whose signature is wrong")

    monkeypatch.setattr(artifact_module, "safe_unpickle", fail)


def test_a_signed_model_loads_with_its_key_and_anywhere_without_one(
    signed: Path, manual_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(json.loads((signed / MANIFEST_FILE).read_text())["signature"]) == 64
    assert "signature" not in json.loads((manual_model / MANIFEST_FILE).read_text())
    assert load_model(signed, schema_fingerprint()).specs  # no key: copied folders still load
    monkeypatch.setenv(KEY_ENV, "the key")
    assert load_model(signed, schema_fingerprint()).specs


@pytest.mark.parametrize(
    ("case", "refusal"),
    [
        ("unsigned", r"not signed, and AUTOFE_MODEL_KEY is set.*retrain it with the key set"),
        ("another key", r"its signature does not match AUTOFE_MODEL_KEY"),
        ("planted", r"its signature does not match AUTOFE_MODEL_KEY"),
    ],
)
def test_with_a_key_only_models_signed_with_it_load(
    tmp_path: Path,
    signed: Path,
    manual_model: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    refusal: str,
) -> None:
    """A planted file with its SHA-256 recomputed no longer matches the signature."""
    folder = copy_model(manual_model if case == "unsigned" else signed, tmp_path / "m")
    if case == "planted":
        plant(folder, pickle.dumps({"not": "the model"}))
    monkeypatch.setenv(KEY_ENV, "another key" if case == "another key" else "the key")
    _not_unpickled(monkeypatch)
    with pytest.raises(ModelError, match=rf"model\.joblib: {refusal}"):
        load_model(folder, schema_fingerprint())
