"""Model artifacts: ``model.joblib`` plus ``model.manifest.json`` holding its SHA-256.

Unpickling runs code, so :func:`load_model` hashes the file and compares it with the manifest
*before* ``joblib.load`` touches it; a model trained against another warehouse schema is refused
too, because its features' SQL would read columns that no longer mean the same thing.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autofe import __version__
from autofe.errors import ModelError
from autofe.featurespec import FeatureSpec
from autofe.hashing import file_sha256
from autofe.modeling.metrics import Metrics
from autofe.modeling.train import RuntimeModel

MODEL_FILE = "model.joblib"
MANIFEST_FILE = "model.manifest.json"
FORMAT = 2
"""Bumped when a saved model's contents change shape (2: the fold models for CV+ intervals);
a model of another format is refused before unpickling, with the retraining it needs."""


@dataclass
class Artifact:
    """Everything a prediction needs, and everything a reviewer asks about the model."""

    model: RuntimeModel
    specs: tuple[FeatureSpec, ...]
    schema_fingerprint: str
    metrics: dict[str, Metrics] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)


def library_versions() -> dict[str, str]:
    import lightgbm
    import numpy
    import sklearn

    return {
        "autofe": __version__,
        "python": platform.python_version(),
        "lightgbm": lightgbm.__version__,
        "scikit-learn": sklearn.__version__,
        "numpy": numpy.__version__,
    }


def save_model(artifact: Artifact, directory: Path) -> Path:
    """Write the artifact and its manifest (each atomically); return the model path."""
    import joblib

    directory.mkdir(parents=True, exist_ok=True)
    target = directory / MODEL_FILE
    partial = directory / f".{MODEL_FILE}.tmp"
    joblib.dump(artifact, partial)
    digest = file_sha256(partial)
    os.replace(partial, target)
    manifest = {
        "file": MODEL_FILE,
        "format": FORMAT,
        "sha256": digest,
        "schema_fingerprint": artifact.schema_fingerprint,
        "features": [s.name for s in artifact.specs],
        "trained_from": artifact.model.window[0].isoformat(),
        "trained_to": artifact.model.window[1].isoformat(),
        "versions": artifact.versions,
    }
    _write_json(directory / MANIFEST_FILE, manifest)
    return target


def load_model(path: Path, expected_schema: str) -> Artifact:
    """Verify the hash, then unpickle, then check the schema fingerprint."""
    import joblib

    model_path = path / MODEL_FILE if path.is_dir() else path
    manifest = _manifest(model_path.with_name(MANIFEST_FILE))
    if not model_path.is_file():
        raise ModelError(f"{model_path}: no model file")
    if file_sha256(model_path) != manifest.get("sha256"):
        raise ModelError(f"{model_path}: SHA-256 differs from {MANIFEST_FILE}; refusing to load it")
    if manifest.get("format", 1) != FORMAT:
        raise ModelError(
            f"{model_path}: saved in model format {manifest.get('format', 1)}, this autofe reads "
            f"format {FORMAT}; retrain it (autofe train or autofe run)"
        )
    artifact = joblib.load(model_path)
    if not isinstance(artifact, Artifact):
        raise ModelError(f"{model_path}: not an autofe model artifact")
    if artifact.schema_fingerprint != expected_schema:
        raise ModelError(
            f"{model_path}: trained on warehouse schema {artifact.schema_fingerprint}, "
            f"this warehouse is {expected_schema}; retrain it"
        )
    return artifact


def _manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ModelError(f"{path}: missing; a model without its manifest is not loaded") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: unreadable manifest ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path}: the manifest is not a JSON object")
    return data


def _write_json(path: Path, content: dict[str, Any]) -> None:
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)
