"""The served model's training profile: its features' values on the runs it learnt from.

Training–serving skew compares served requests with these values. Computing them runs every
feature's SQL on the warehouse (seconds to a minute), so it happens once per model version —
after the night that promoted it, or at the first on-demand check — and is kept in
``HOME/.triggers/<version>.json`` (at most :data:`MAX_VALUES` values per feature, evenly
spaced in submit order); the check after every batch of actuals only reads that file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from autofe.errors import AutofeError
from autofe.json_file import write_json
from autofe.modeling.importance import gain_shares
from autofe.modeling.registry import Version
from autofe.pipelines.home import Home
from autofe.warehouse.connect import schema_fingerprint

MAX_VALUES = 2000
"""Values kept per feature: PSI's ten quantile bins are stable long before this."""
CACHE_DIR = ".triggers"


@dataclass(frozen=True)
class Profile:
    """Feature name → training values, and each feature's share of the model's split gain."""

    values: Mapping[str, Sequence[Any]]
    gain: Mapping[str, float]


def training_profile(home: Home, version: Version, compute: bool) -> Profile | None:
    """The cached profile of ``version``; computed and cached first when ``compute`` (None
    when it is not cached and may not be computed, or cannot be: no warehouse, a model that
    does not load, a feature that fails)."""
    path = home.root / CACHE_DIR / f"{version.name}.json"
    cached = _read(path)
    if cached is not None or not compute:
        return cached
    try:
        profile = _compute(home, version)
    except (AutofeError, OSError):
        return None
    path.parent.mkdir(exist_ok=True)
    write_json(path, {"values": profile.values, "gain": profile.gain}, compact=True)
    return profile


def _compute(home: Home, version: Version) -> Profile:
    from autofe.pipelines.nightly import feature_values, read_labelled  # the loop's imports

    db = home.warehouse
    artifact = home.registry.load(version.name, schema_fingerprint())
    through = version.metrics.get("trained_through")
    cutoff = datetime.fromisoformat(str(through)) if through else artifact.model.window[1]
    runs = [r[0] for r in read_labelled(db) if r[2] <= cutoff]
    step = max(1, -(-len(runs) // MAX_VALUES))
    kept = runs[::step]
    values = feature_values(db, artifact.specs)
    names = artifact.model.features
    return Profile(
        {name: [values.get(name, {}).get(run) for run in kept] for name in names},
        {name: round(share, 6) for name, share in gain_shares(artifact.model).items()},
    )


def _read(path: Path) -> Profile | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Profile(dict(data["values"]), dict(data["gain"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
