"""Model artifacts: ``model.joblib`` plus ``model.manifest.json`` holding its SHA-256.

:func:`load_model` checks the file against its manifest (hash, format, and the signature when
a key is set), then unpickles it with :func:`~autofe.modeling.safe_unpickle.safe_unpickle`,
which builds only what an autofe model is made of and never runs code the file names, then
checks the parts a prediction uses and the warehouse schema: a model trained against another
schema is refused, because its features' SQL would read columns that no longer mean the same
thing. The hash catches a damaged file; it cannot catch a planted one (whoever writes the file
can rewrite the manifest), which is why the unpickling itself is restricted, and why a model
can be signed with a key kept elsewhere (:mod:`autofe.modeling.signing`).

Since format 3 the file is a plain pickle (protocol 5; ``joblib.load`` still reads it): the
restricted loader reads the standard format, not joblib's arrays stored outside the pickle.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import platform
from dataclasses import dataclass, field, replace
from datetime import datetime
from operator import attrgetter
from pathlib import Path
from typing import Any, cast

import numpy as np
from pydantic import ValidationError

from autofe import __version__
from autofe.errors import ModelError
from autofe.featurespec import FeatureSpec
from autofe.hashing import file_sha256
from autofe.json_file import write_json
from autofe.modeling.conformal import Calibration
from autofe.modeling.dataset import Encoder
from autofe.modeling.metrics import Metrics
from autofe.modeling.safe_unpickle import safe_unpickle
from autofe.modeling.signing import check_signature, model_key, signature
from autofe.modeling.train import RuntimeModel
from autofe.special_file import special_file

MODEL_FILE = "model.joblib"
MANIFEST_FILE = "model.manifest.json"
FORMAT = 3
"""Bumped when a saved model's contents change shape (2: the fold models for CV+ intervals;
3: a plain pickle for the restricted loader, no longer joblib's format); a model of another
format is refused before unpickling, with the retraining it needs."""
PICKLE_PROTOCOL = 5


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
    """Write the artifact and its manifest (each atomically, the manifest signed when
    ``AUTOFE_MODEL_KEY`` is set); return the model path."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / MODEL_FILE
    partial = directory / f".{MODEL_FILE}.tmp"
    with partial.open("wb") as handle:
        pickle.dump(artifact, handle, protocol=PICKLE_PROTOCOL)
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
    key = model_key()
    if key is not None:
        manifest["signature"] = signature(key, digest, FORMAT)
    write_json(directory / MANIFEST_FILE, manifest)
    return target


def load_model(path: Path, expected_schema: str) -> Artifact:
    """Verify the manifest (and the signature, when ``AUTOFE_MODEL_KEY`` is set), unpickle
    with the allow-list, check the parts and the schema.

    Raises:
        ModelError: the file or its manifest is missing, damaged or of another format; the
            signature is missing or wrong; the pickle references or does anything an autofe
            model does not; the parts a prediction uses are missing or of other types;
            another warehouse schema.
    """
    model_path = path / MODEL_FILE if path.is_dir() else path
    manifest = _manifest(model_path.with_name(MANIFEST_FILE))
    if not model_path.is_file():
        raise ModelError(f"{model_path}: no model file")
    data = model_path.read_bytes()  # read once: what is checked is what is unpickled
    if hashlib.sha256(data).hexdigest() != manifest.get("sha256"):
        raise ModelError(f"{model_path}: SHA-256 differs from {MANIFEST_FILE}; refusing to load it")
    if manifest.get("format", 1) != FORMAT:
        raise ModelError(
            f"{model_path}: saved in model format {manifest.get('format', 1)}, this autofe reads "
            f"format {FORMAT}; retrain it (autofe train or autofe run)"
        )
    check_signature(manifest, model_key(), model_path)
    artifact = checked_artifact(safe_unpickle(data, str(model_path)), model_path)
    if artifact.schema_fingerprint != expected_schema:
        raise ModelError(
            f"{model_path}: trained on warehouse schema {artifact.schema_fingerprint}, "
            f"this warehouse is {expected_schema}; retrain it"
        )
    return artifact


def checked_artifact(obj: object, where: Path) -> Artifact:
    """``obj`` if every part a prediction uses is there, of the type it is used as, with its
    feature specs validated again (unpickling sets fields without pydantic's checks).

    A pickle of allowed types can still be put together wrongly; refused here, it never
    reaches a request (and the server keeps the model it had).

    Raises:
        ModelError: names the first part that is missing or of another type.
    """
    if not isinstance(obj, Artifact):
        raise ModelError(f"{where}: not an autofe model artifact")
    for name, kind, item in _parts():
        value = _part(obj, name, where)
        if not isinstance(value, kind):
            raise ModelError(f"{where}: the model's {name} is a {type(value).__name__}")
        if item is not None and not all(isinstance(v, item) for v in _held(value)):
            raise ModelError(f"{where}: the model's {name} holds something not a {item.__name__}")
    model = obj.model
    _check_residual(model.residual, where)
    calibration = model.calibration
    arrays = (calibration.residuals, calibration.folds, *calibration.by_job.values())
    if calibration.residuals.dtype != np.float64 or any(a.dtype.kind != "i" for a in arrays[1:]):
        raise ModelError(f"{where}: the model's calibration arrays are not numeric")
    try:
        specs = tuple(FeatureSpec.model_validate(s.model_dump(warnings=False)) for s in obj.specs)
    except ValidationError as exc:
        first = exc.errors()[0]
        reason = f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
        raise ModelError(f"{where}: a feature spec in the model is invalid ({reason})") from exc
    return replace(obj, specs=specs)


def _check_residual(residual: object, where: Path) -> None:
    """The anchored booster is optional: None, or a fitted regressor."""
    from lightgbm import Booster, LGBMRegressor

    if residual is None:
        return
    if not isinstance(residual, LGBMRegressor) or not isinstance(
        getattr(residual, "booster_", None), Booster
    ):
        raise ModelError(f"{where}: the model's residual is a {type(residual).__name__}")


def _parts() -> tuple[tuple[str, type, type | None], ...]:
    """(attribute, its type, the type of what it holds) for every part a prediction uses."""
    from lightgbm import Booster, LGBMRegressor

    return (
        ("schema_fingerprint", str, None),
        ("specs", tuple, FeatureSpec),
        ("metrics", dict, Metrics),
        ("versions", dict, str),
        ("model", RuntimeModel, None),
        ("model.booster", LGBMRegressor, None),
        ("model.booster.booster_", Booster, None),
        ("model.folds", tuple, Booster),
        ("model.features", tuple, str),
        ("model.trees", int, None),
        ("model.anchors", tuple, int),
        ("model.residual_folds", tuple, Booster),
        ("model.residual_trees", int, None),
        ("model.anchor_shares", tuple, float),
        ("model.anchor_trust", float, None),
        ("model.window", tuple, datetime),
        ("model.encoder", Encoder, None),
        ("model.encoder.vocab", dict, tuple),
        ("model.calibration", Calibration, None),
        ("model.calibration.residuals", np.ndarray, None),
        ("model.calibration.folds", np.ndarray, None),
        ("model.calibration.by_job", dict, np.ndarray),
    )


def _held(container: object) -> list[object]:
    """A dict's values or a tuple's items."""
    return list(container.values() if isinstance(container, dict) else cast(tuple[Any], container))


def _part(artifact: Artifact, name: str, where: Path) -> object:
    try:
        return attrgetter(name)(artifact)
    except Exception as exc:  # a missing attribute, or a property failing on planted state
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ModelError(f"{where}: the model has no usable {name} ({reason})") from exc


def _manifest(path: Path) -> dict[str, Any]:
    refused = special_file(path)
    if refused is not None:  # a FIFO planted in a model folder must not hang the server
        raise ModelError(f"{path} {refused}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ModelError(f"{path}: missing; a model without its manifest is not loaded") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: unreadable manifest ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path}: the manifest is not a JSON object")
    return data
