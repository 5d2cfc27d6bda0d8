"""Training–serving skew: the features a run was served with against the features training
computes for the same run once it is in the warehouse.

Skew is a difference between the two pipelines — the served request computed against a stale
warehouse, a caller passing a value in other units, a feature that fails at serving time and
arrives missing — not a difference between two periods, which is drift and which the
nightly report measures (feature PSI between the training era and the new runs). Comparing
served requests with the training runs' distribution would mix the two: on the shipped example
the later runs' dates and parameter mix move on by construction, and 17 features carrying 97 %
of the served model's gain had a PSI above 0.25 against its training runs on a replay without
any fault (docs/nightly.md, "Retraining triggers"). So the same runs are compared: the served
version's last served requests whose runs the warehouse now holds, their served values (from
``HOME/served.jsonl``) against the values the version's features compute on the warehouse.
That needs the runs ingested and every feature's SQL run on them, so it is checked after each
night and on demand, not after every actual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autofe.modeling.compute import compute_values
from autofe.modeling.importance import gain_shares
from autofe.modeling.registry import Version
from autofe.pipelines.home import Home
from autofe.pipelines.served_log import Served
from autofe.sandbox.session import Sandbox
from autofe.warehouse.connect import schema_fingerprint


@dataclass(frozen=True)
class Paired:
    """Feature name → values of the same runs as training computes them and as served, and
    each feature's share of the model's split gain."""

    training: Mapping[str, Sequence[Any]]
    served: Mapping[str, Sequence[Any]]
    gain: Mapping[str, float]
    runs: int


def paired_values(home: Home, version: Version, served: Sequence[Served]) -> Paired | None:
    """The served version's requests paired with the warehouse's values of their runs (None:
    no warehouse, or no served run of this version is in it yet).

    Raises:
        AutofeError: the version does not load on the warehouse or a feature fails.
    """
    mine = {r.run_id: r for r in served if r.model_version == version.name and r.run_id}
    if not mine or not home.warehouse.is_file():
        return None  # ``mine`` keeps the last serving of each run
    artifact = home.registry.load(version.name, schema_fingerprint())
    with Sandbox.open(home.warehouse) as sandbox:
        listed = ", ".join("'" + run.replace("'", "''") + "'" for run in mine)
        rows = sandbox.query(f"SELECT run_id FROM runs WHERE run_id IN ({listed})").rows
        latest = {str(row[0]): mine[str(row[0])] for row in rows}
        if not latest:
            return None
        values = compute_values(sandbox, artifact.specs, sorted(latest))
    names = artifact.model.features
    runs = sorted(latest, key=lambda run: latest[run].at_s)
    return Paired(
        {name: [values.get(name, {}).get(run) for run in runs] for name in names},
        {name: [latest[run].features.get(name) for run in runs] for name in names},
        gain_shares(artifact.model),
        len(runs),
    )
