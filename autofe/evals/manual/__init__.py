"""The hand-written baseline: the ~40 features an engineer writes in an afternoon.

Configuration, data sizes from table statistics, job type and simple history, as the
LeJOT-AutoML paper's manual set; one ``features/<name>.sql`` file each (header lines carry the
category and rationale), gated like every generated feature.
"""

from __future__ import annotations

from pathlib import Path

from autofe.feature_catalog import read_feature_set
from autofe.featurespec import FeatureSpec

FEATURES_DIR = Path(__file__).resolve().parent / "features"


def manual_features(directory: Path = FEATURES_DIR) -> tuple[FeatureSpec, ...]:
    """Every manual feature, sorted by name."""
    return read_feature_set(directory)
