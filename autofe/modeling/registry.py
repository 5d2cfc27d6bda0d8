"""The model registry under ``HOME/models/``: numbered versions and one active pointer.

The nightly job adds a version per retrain and promotes it only when it beats the champion;
the prediction API serves whatever the pointer names. Every write is atomic (a version folder
is built under a temporary name and renamed; the pointer and the history are replaced or
appended whole), so a crash mid-way leaves the previous state readable and the active model
untouched, and a server polling the pointer never sees half a version.

Layout::

    HOME/models/v0001/{model.joblib, model.manifest.json, metrics.json, features/}
    HOME/models/ACTIVE            {"version": "v0002", "since": ..., "reason": ...}
    HOME/models/promotions.jsonl  one decision per line, promoted or kept
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autofe.errors import ModelError
from autofe.json_file import append_json_line, read_json_lines, write_json
from autofe.modeling.artifact import MANIFEST_FILE, MODEL_FILE, Artifact, load_model
from autofe.warehouse.connect import schema_fingerprint

MODELS_DIR = "models"
ACTIVE_FILE = "ACTIVE"
HISTORY_FILE = "promotions.jsonl"
METRICS_FILE = "metrics.json"
FEATURES_DIR = "features"
_VERSION = re.compile(r"^v(\d{4,})$")


@dataclass(frozen=True)
class Version:
    """One registered model: its name, folder, when it was added and its metrics."""

    name: str
    path: Path
    created: str
    metrics: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.name, "created": self.created, "metrics": self.metrics}


@dataclass(frozen=True)
class Registry:
    """The registry of the autofe home folder ``home``."""

    home: Path

    @property
    def root(self) -> Path:
        return self.home / MODELS_DIR

    def versions(self) -> list[Version]:
        """Every registered version, oldest first."""
        if not self.root.is_dir():
            return []
        names = sorted(p.name for p in self.root.iterdir() if _VERSION.match(p.name))
        return [self.version(name) for name in names]

    def version(self, name: str) -> Version:
        """The version called ``name``.

        Raises:
            ModelError: no such version.
        """
        path = self.root / name
        if not _VERSION.match(name) or not (path / MODEL_FILE).is_file():
            raise ModelError(f"model version {name!r} is not in the registry {self.root}")
        info = _read_json(path / METRICS_FILE) if (path / METRICS_FILE).is_file() else {}
        return Version(name, path, str(info.get("created", "")), dict(info.get("metrics", {})))

    def add(self, source: Path, metrics: dict[str, Any]) -> Version:
        """Copy the model (and its feature catalog, when ``source`` has one) from the run
        folder ``source`` into the next version; it is not made active.

        Raises:
            ModelError: ``source`` holds no model and manifest.
        """
        for name in (MODEL_FILE, MANIFEST_FILE):
            if not (source / name).is_file():
                raise ModelError(f"{source}: no {name} to register")
        self.root.mkdir(parents=True, exist_ok=True)
        name = self._next_name()
        partial = self.root / f".{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        for file in (MODEL_FILE, MANIFEST_FILE):
            shutil.copy2(source / file, partial / file)
        if (source / FEATURES_DIR).is_dir():
            shutil.copytree(source / FEATURES_DIR, partial / FEATURES_DIR)
        created = _now()
        write_json(partial / METRICS_FILE, {"created": created, "metrics": metrics}, default=str)
        os.replace(partial, self.root / name)
        return Version(name, self.root / name, created, metrics)

    def active(self) -> Version | None:
        """The version the pointer names, or None before the first promotion."""
        pointer = self.root / ACTIVE_FILE
        if not pointer.is_file():
            return None
        return self.version(str(_read_json(pointer).get("version", "")))

    def active_stamp(self) -> bytes:
        """The pointer's bytes (empty without one): a cheap check for a change.

        Its content, not its modification time: two promotions within the file system's time
        resolution would look like one by time, never by the version they name.
        """
        try:
            return (self.root / ACTIVE_FILE).read_bytes()
        except FileNotFoundError:
            return b""

    def promote(self, name: str, reason: str, details: dict[str, Any] | None = None) -> None:
        """Make ``name`` the active version (atomically) and record the decision.

        The version is loaded first, as the server will load it (hash, allow-listed
        unpickling, parts, schema): a damaged or planted version is refused here and the
        pointer keeps naming the model it named.

        Raises:
            ModelError: no such version, or it does not load.
        """
        previous = self.active()
        version = self.version(name)
        try:
            load_model(version.path, schema_fingerprint())
        except ModelError as exc:
            raise ModelError(f"refusing to promote {name}: {exc}") from exc
        record = {"version": name, "since": _now(), "reason": reason}
        write_json(self.root / ACTIVE_FILE, record, default=str)
        self.record(
            {**record, "decision": "promoted", "previous": previous and previous.name},
            details,
        )

    def record(self, decision: dict[str, Any], details: dict[str, Any] | None = None) -> None:
        """Append one decision (promoted or kept) to the promotion history."""
        self.root.mkdir(parents=True, exist_ok=True)
        record = {"at": _now(), **decision, **(details or {})}
        append_json_line(self.root / HISTORY_FILE, record, default=str)

    def history(self) -> list[dict[str, Any]]:
        """Every recorded decision, oldest first (a torn last line is skipped)."""
        return read_json_lines(self.root / HISTORY_FILE)

    def load(self, name: str, expected_schema: str) -> Artifact:
        """The artifact of version ``name`` (hash and schema checked by ``load_model``)."""
        return load_model(self.version(name).path, expected_schema)

    def _next_name(self) -> str:
        numbers = [int(m.group(1)) for p in self.root.iterdir() if (m := _VERSION.match(p.name))]
        return f"v{max(numbers, default=0) + 1:04d}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path}: not a JSON object")
    return data
