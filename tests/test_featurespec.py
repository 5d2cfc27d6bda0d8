"""Feature specs pickle to the same bytes in every process (model files are compared by digest)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

from autofe.featurespec import FeatureSpec, Provenance

SPEC = FeatureSpec(
    name="history_last_s",
    sql="SELECT run_id, 1.0 AS value FROM runs",
    category="history",
    rationale="why",
    kb_refs=("history",),
    provenance=Provenance(agent="analyzer", backend="offline"),
)

DIGEST = """
import hashlib, pickle
from autofe.featurespec import FeatureSpec, Provenance
spec = FeatureSpec(name="history_last_s", sql="SELECT run_id, 1.0 AS value FROM runs",
                   category="history", rationale="why", kb_refs=("history",),
                   provenance=Provenance(agent="analyzer", backend="offline"))
print(hashlib.sha256(pickle.dumps(spec, protocol=5)).hexdigest())
"""


def _digest(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    run = subprocess.run(
        [sys.executable, "-c", DIGEST], env=env, capture_output=True, text=True, check=True
    )
    return run.stdout.strip()


def test_a_spec_pickles_to_the_same_bytes_whatever_the_hash_seed() -> None:
    assert len({_digest(seed) for seed in ("1", "2", "3", "4")}) == 1


def test_a_pickled_spec_comes_back_equal_with_its_given_fields() -> None:
    back = pickle.loads(pickle.dumps(SPEC, protocol=5))
    assert back == SPEC
    assert back.model_fields_set == SPEC.model_fields_set
    assert isinstance(back.model_fields_set, set)
    assert back.provenance.model_fields_set == {"agent", "backend"}
