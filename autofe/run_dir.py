"""The run directory ``autofe run`` writes: the one owner of its file names.

Layout::

    RUN/warehouse.duckdb     the ingested workspace (or a copy of a nightly's home warehouse)
    RUN/features.duckdb      the feature store the tools server writes
    RUN/checkpoints.sqlite   the LangGraph checkpoints ``--resume`` continues from
    RUN/settings.json        what the run started with
    RUN/run.log              nodes, iterations and warnings
    RUN/features/            the kept features' catalog (:mod:`autofe.feature_catalog`)
    RUN/model.joblib         the final model (and its manifest, :mod:`autofe.modeling.artifact`)
    RUN/holdout.json         every holdout run: actual and predicted seconds, 80 % / 90 % bounds
    RUN/metrics.json         holdout metrics, the simple baselines, counts, the per-iteration record
    RUN/report.html          the same as a page

Readers of a finished run (``autofe nightly``, ``autofe eval --generated``) open it through the
same names, so a renamed file cannot leave one of them reading a path nothing writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory.

    >>> RunDir(Path("runs/a")).metrics.as_posix()
    'runs/a/metrics.json'
    """

    root: Path

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def feature_store(self) -> Path:
        return self.root / "features.duckdb"

    @property
    def spill(self) -> Path:
        """Where the final catalog's queries on every run may spill (removed after)."""
        return self.root / "spill"

    @property
    def sample(self) -> Path:
        """The loop's warehouse when the run's history is large (see ``pipelines.run_sample``)."""
        return self.root / "sample.duckdb"

    @property
    def sample_record(self) -> Path:
        return self.root / "sample.json"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints.sqlite"

    @property
    def settings(self) -> Path:
        return self.root / "settings.json"

    @property
    def log(self) -> Path:
        return self.root / "run.log"

    @property
    def features(self) -> Path:
        return self.root / "features"

    @property
    def model(self) -> Path:
        """Where ``save_model(artifact, root)`` writes (``modeling.artifact.MODEL_FILE``, a
        layer above; tests/test_run_dir.py checks the two agree)."""
        return self.root / "model.joblib"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.json"

    @property
    def holdout_predictions(self) -> Path:
        """The finalize node's per-run holdout predictions (``holdout.json``)."""
        return self.root / "holdout.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"
