"""The feature catalog on disk: ``catalog.json`` plus one ``.sql`` file per feature.

Humans read and edit it: the SQL lives in its own file (the source of truth, so an edited
query is a new feature id), and the JSON holds the rest of each spec. A single ``.sql`` file
with ``-- key: value`` header lines is also a complete feature (``autofe features check``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from autofe.errors import ConfigError
from autofe.featurespec import FeatureSpec
from autofe.json_file import write_json

CATALOG_FILE = "catalog.json"
CATALOG_VERSION = 1

_HEADER = re.compile(r"^--\s*([a-z_]+)\s*:\s*(.*?)\s*$")
HEADER_KEYS = {"name", "category", "value_type", "description", "why", "kb_refs", "expect"}


def parse_header(sql: str) -> dict[str, str]:
    """``-- key: value`` lines at the top of a SQL file.

    >>> parse_header("-- category: history\\n-- why: earlier runs\\nSELECT 1")
    {'category': 'history', 'why': 'earlier runs'}
    """
    header: dict[str, str] = {}
    for line in sql.splitlines():
        match = _HEADER.match(line.strip())
        if not line.strip().startswith("--"):
            break
        if match and match.group(1) in HEADER_KEYS:
            header[match.group(1)] = match.group(2)
    return header


def _spec(data: dict[str, Any], where: Path) -> FeatureSpec:
    try:
        return FeatureSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "spec"
        raise ConfigError(f"{where}: {field}: {first['msg']}") from exc


def read_feature_file(path: Path) -> FeatureSpec:
    """A feature from one ``.sql`` file; the name defaults to the file's stem.

    Raises:
        ConfigError: unreadable file or invalid header values.
    """
    try:
        sql = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read feature file: {exc}") from exc
    header = parse_header(sql)
    data: dict[str, Any] = {
        "name": header.get("name", path.stem.lower().replace("-", "_")),
        "sql": sql,
        "category": header.get("category", "static-config"),
        "description": header.get("description", ""),
        "rationale": header.get("why", ""),
        "kb_refs": tuple(r.strip() for r in header.get("kb_refs", "").split(",") if r.strip()),
    }
    if "value_type" in header:
        data["value_type"] = header["value_type"].upper()
    return _spec(data, path)


def save_catalog(directory: Path, specs: list[FeatureSpec]) -> None:
    """Write ``catalog.json`` and one ``<name>.sql`` per feature (replacing the catalog)."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ConfigError(f"{directory}: duplicate feature names: {', '.join(dupes)}")
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for spec in specs:
        (directory / f"{spec.name}.sql").write_text(spec.sql.rstrip() + "\n")
        entry = spec.model_dump(mode="json", exclude={"sql"})
        entries.append({**entry, "sql_file": f"{spec.name}.sql", "feature_id": spec.feature_id})
    doc = {"version": CATALOG_VERSION, "features": entries}
    write_json(directory / CATALOG_FILE, doc)  # atomic: a crash never leaves half a catalog


def load_catalog(directory: Path) -> list[FeatureSpec]:
    """Read a catalog; each feature's SQL comes from its ``.sql`` file.

    Raises:
        ConfigError: missing or malformed ``catalog.json``, a missing SQL file, a bad entry.
    """
    path = directory / CATALOG_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no feature catalog here") from exc
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable feature catalog: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("version") != CATALOG_VERSION:
        raise ConfigError(f"{path}: expected a catalog of version {CATALOG_VERSION}")
    return [_entry(directory, entry, path) for entry in doc.get("features", [])]


def read_feature_set(directory: Path) -> tuple[FeatureSpec, ...]:
    """A catalog folder (``catalog.json``) or a plain folder of ``.sql`` files, sorted by name.

    Raises:
        ConfigError: not a folder, no features in it, or a bad feature file.
    """
    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a folder of features")
    if (directory / CATALOG_FILE).is_file():
        specs = load_catalog(directory)
    else:
        specs = [read_feature_file(p) for p in sorted(directory.glob("*.sql"))]
    if not specs:
        raise ConfigError(f"{directory}: no features (no {CATALOG_FILE}, no *.sql files)")
    return tuple(sorted(specs, key=lambda s: s.name))


def _entry(directory: Path, entry: Any, path: Path) -> FeatureSpec:
    if not isinstance(entry, dict) or "sql_file" not in entry:
        raise ConfigError(f"{path}: every feature needs a sql_file")
    sql_path = directory / str(entry["sql_file"])
    try:
        sql = sql_path.read_text()
    except OSError as exc:
        raise ConfigError(f"{sql_path}: cannot read the SQL of {entry.get('name')}") from exc
    data = {k: v for k, v in entry.items() if k not in ("sql_file", "feature_id")}
    return _spec({**data, "sql": sql}, sql_path)
