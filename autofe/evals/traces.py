"""Simulation traces from real runtimes: the scheduler's jobs, with the truth attached.

A *point* is one job with one input, measured on several shapes (instance type × node count):
a lab sweep point, or a third-party job run under many configurations. Each shape carries the
runtime it really had (``true_s``, the mean of its repeated runs) beside the model's
out-of-fold prediction (``p50_s`` and the 90 % conformal interval), exactly the predictions
issue #6 judged configuration choice on (:mod:`autofe.evals.choice`, :mod:`autofe.evals.sweeps`)
or, for a third-party source given a generated catalog, that catalog's predictions: its values
computed with the priced configuration's outcomes hidden, as configuration choice scores it.
Both intervals are split-conformal on absolute log errors, so they are symmetric in log:
``low_s = p50_s² / high_s`` is the lower bound the same calibration gives, not an assumption.

A trace replays the points as a stream of job requests (:func:`build_trace`):

- every point is replayed ``ceil(min_jobs / points)`` times in a seeded shuffled order (same
  truth, different arrival times), so a dataset of a few points still makes hundreds of jobs;
- arrivals are Poisson with rate ``concurrency / mean(fastest true runtime + start-up)``: on
  average ``concurrency`` jobs' worth of work overlap, whatever the dataset's runtime scale;
- tiers and accounts are drawn from seeded mixes (:class:`TraceSettings`);
- deadline = ready + ``slack`` × (fastest true runtime among the point's shapes + start-up),
  where ready is the submit time or, in a chain, its predecessor's deadline (each stage of a
  pipeline gets its own slot): the fastest shape started when the job is ready always makes
  it, and a predecessor that meets its own deadline leaves the job all of its slack;
- some chains of consecutive arrivals depend on each other (one account's pipeline, one tier);
- a share of jobs checkpoints every tenth of its fastest predicted median (at least 60 s),
  a write costs 5 % of the interval and a restore two writes;
- each account's budget is ``budget_headroom`` × the least any on-demand plan could pay for
  its jobs (each on its cheapest shape at its true runtime plus start-up, cheapest region), for
  one period spanning the whole trace: static provisioning of the middle-priced shape overruns
  it wherever that shape costs more, a policy that chooses well or uses spot fits.

Start-up defaults to the simulator's (:class:`SimulationSettings`, 300 s: the order of an EMR
or Databricks job cluster's start), so a deadline counts the start-up the simulated world
charges.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from autofe.config import IngestSettings, example_workspace
from autofe.errors import ConfigError
from autofe.evals.choice import LEVEL, choice_options
from autofe.evals.cost import DEADLINE_FACTOR, Option
from autofe.evals.manual import manual_features
from autofe.evals.masked import out_of_fold_values
from autofe.evals.protocols import (
    CLUSTER_COLUMNS,
    K,
    grouped_folds,
    interval_highs,
    labelled_groups,
    out_of_fold,
    raw_values,
)
from autofe.evals.report import COST_FOLDS, COST_MIN_TRAIN
from autofe.evals.sweeps import sweep_options
from autofe.featurespec import FeatureSpec
from autofe.ingest.ingest import ingest
from autofe.modeling.compute import feature_matrix
from autofe.modeling.dataset import FeatureValues, build_dataset
from autofe.modeling.evaluate import cross_validate
from autofe.scheduler.catalog import Catalog
from autofe.scheduler.jobfile import Budget, JobSet
from autofe.scheduler.jobs import Checkpointing, Estimate, JobRequest, Shape, Tier
from autofe.scheduler.simulate import SimulationSettings
from autofe.warehouse.connect import open_warehouse

MAPPINGS = Path(__file__).resolve().parents[2] / "examples" / "mappings"
SOURCES = {"lab": "", "c3o": "c3o", "scout": "scout-multinode", "cherrypick": "cherrypick"}
"""Trace sources and the mapping each third-party one is ingested with."""
TAIL_LEVEL = 0.99
"""The second conformal level a third-party trace carries (:attr:`Estimate.high99_s`)."""
MODEL_SEED = 0
"""The models' seed, #6's: a trace's own seed moves arrivals, never the predictions."""
BY_PARAMETERS = frozenset({"c3o"})
"""Datasets whose run parameters are the job's inputs alone (a point is job × parameters);
Scout's and CherryPick's parameters name the repetition or the configuration, so there a
point is the job."""


@dataclass(frozen=True)
class TraceSettings:
    """How points become a job stream; every random choice is drawn from ``seed``."""

    seed: int = 0
    slack: float = DEADLINE_FACTOR
    startup_s: float = SimulationSettings.startup_s
    min_jobs: int = 300
    concurrency: float = 4.0
    tiers: tuple[tuple[Tier, float], ...] = (("P0", 0.1), ("P1", 0.2), ("P2", 0.4), ("P3", 0.3))
    accounts: tuple[tuple[str, float], ...] = (("team-a", 0.5), ("team-b", 0.3), ("team-c", 0.2))
    checkpoint_share: float = 0.3
    chain_share: float = 0.1
    chain_length: int = 3
    budget_headroom: float = 1.25


@dataclass(frozen=True)
class Point:
    """One job × input measured on several shapes (``Shape.key`` → truth and prediction)."""

    name: str
    shapes: Mapping[str, Estimate]

    @property
    def fastest_s(self) -> float:
        """The fastest true runtime among the shapes.

        >>> Point("p", {"a x1": Estimate(9, 8, 10, 7.0), "b x2": Estimate(5, 4, 6, 6.0)}).fastest_s
        6.0
        """
        return min(float(e.true_s or math.inf) for e in self.shapes.values())


def estimate(option: Option, high99_s: float | None = None) -> Estimate:
    """An option's truth and prediction; the lower bound mirrors the upper one in log. A 99 %
    bound, when given, is kept at least as high as the 90 % one.

    >>> estimate(Option("p", "c", 1.0, 90.0, 100.0, 200.0))
    Estimate(p50_s=100.0, low_s=50.0, high_s=200.0, true_s=90.0, high99_s=None)
    >>> estimate(Option("p", "c", 1.0, 90.0, 100.0, 200.0), 150.0).high99_s
    200.0
    """
    high = max(option.p90_high_s, option.p50_s)
    tail = None if high99_s is None else max(high99_s, high)
    return Estimate(option.p50_s, option.p50_s**2 / high, high, option.actual_s, tail)


def points_from_options(
    options: Iterable[Option],
    shape_of: Mapping[str, Shape],
    high99: Mapping[tuple[str, str], float] | None = None,
) -> list[Point]:
    """Points with at least two shapes (a configuration to choose), by point name; ``high99``
    gives a 99 % bound per (point, configuration) where the model has one.

    Configurations that share a shape (the lab's Spark-settings variants of one node type)
    become that shape's estimate of the one the model predicts fastest: what a user who can
    only name hardware would pick, with that configuration's own truth.
    """
    cells: dict[str, dict[str, Option]] = {}
    for o in options:
        key = shape_of[o.config].key
        kept = cells.setdefault(o.point, {}).get(key)
        if kept is None or (o.p50_s, o.config) < (kept.p50_s, kept.config):
            cells[o.point][key] = o
    tails = high99 or {}
    return [
        Point(
            name,
            {
                key: estimate(o, tails.get((o.point, o.config)))
                for key, o in sorted(by_shape.items())
            },
        )
        for name, by_shape in sorted(cells.items())
        if len(by_shape) >= 2
    ]


def config_shapes(db: Path) -> dict[str, Shape]:
    """Each cluster configuration's shape: its node type × workers (a single node counts one)."""
    with open_warehouse(db, read_only=True) as con:
        rows = con.execute(
            "SELECT config_id, node_type, num_workers FROM cluster_configs "
            "WHERE node_type IS NOT NULL"
        ).fetchall()
    return {str(c): Shape(str(t), max(1, int(n or 0))) for c, t, n in rows}


def lab_points(db: Path, seed: int = 0) -> list[Point]:
    """The lab's sweep points with the manual features' out-of-time predictions (as #6's cost
    impact: expanding-window folds, each block predicted by a model of the runs before it)."""
    data = feature_matrix(db, manual_features())
    evaluation = cross_validate(data, COST_FOLDS, COST_MIN_TRAIN, seed)
    return points_from_options(sweep_options(db, evaluation), config_shapes(db))


def third_party_points(
    db: Path, dataset: str, seed: int = 0, generated: Sequence[FeatureSpec] = ()
) -> list[Point]:
    """A third-party dataset's points with #6's configuration-choice predictions: LightGBM on
    the raw columns and node-type facts, grouped 5-fold by configuration (the model never saw
    the configuration it prices), 90 % split-conformal bound, and a 99 % one by the same code
    for the tail the strictest tier reads (P0's 0.99). With ``generated`` specs, the model
    reads those instead, each run's values computed with its fold's outcomes hidden
    (:func:`autofe.evals.choice.generated_choice_options`)."""
    runs, groups = labelled_groups(db)
    folds = grouped_folds(groups.config, K, seed)
    values: FeatureValues = (
        out_of_fold_values(db, runs, generated, folds)
        if generated
        else raw_values(db, CLUSTER_COLUMNS)
    )
    data = build_dataset(runs, values)
    p50 = out_of_fold(data, folds, seed)
    high = interval_highs(data, folds, groups.config, LEVEL, seed)
    high99 = interval_highs(data, folds, groups.config, TAIL_LEVEL, seed)
    if dataset in BY_PARAMETERS:  # groups.point is job|parameters|config
        points = [p.rsplit("|", 1)[0] for p in groups.point]
        runs = [(r[0], p, r[2], r[3]) for r, p in zip(runs, points, strict=True)]
    tails = {
        (o.point, o.config): o.p90_high_s for o in choice_options(db, runs, groups, p50, high99)
    }
    options = choice_options(db, runs, groups, p50, high)
    return points_from_options(options, config_shapes(db), tails)


def build_trace(
    points: Sequence[Point], catalog: Catalog, settings: TraceSettings, source: str
) -> JobSet:
    """Replay ``points`` as a seeded job stream with deadlines, chains and budgets.

    Raises:
        ConfigError: no points, a shape whose instance type the catalog lacks, or a slack
            below 1 (a deadline the fastest shape could miss).
    """
    _check(points, catalog, settings)
    rng = random.Random(settings.seed)
    replays = math.ceil(settings.min_jobs / len(points))
    order = [p for _ in range(replays) for p in points]
    rng.shuffle(order)
    submits = _arrivals(order, settings, rng)
    jobs = [_job(i, p, submits[i], settings, rng) for i, p in enumerate(order)]
    jobs = _with_deadlines(_chained(jobs, settings, rng), order, settings)
    budgets = _budgets(jobs, catalog, settings)
    note = (
        f"{source}: {len(points)} points x {replays} replays, seed {settings.seed}, "
        f"slack {settings.slack}, start-up {settings.startup_s:.0f} s"
    )
    return JobSet(tuple(jobs), budgets, note)


def _check(points: Sequence[Point], catalog: Catalog, settings: TraceSettings) -> None:
    if not points:
        raise ConfigError("no point ran on two shapes with a prediction: nothing to replay")
    if settings.slack < 1.0:
        raise ConfigError(f"deadline slack must be at least 1, not {settings.slack}")
    types = {Shape.parse(k).instance_type for p in points for k in p.shapes}
    missing = sorted(t for t in types if t not in catalog)
    if missing:
        raise ConfigError(f"instance types not in the instance catalog: {', '.join(missing)}")


def _arrivals(order: Sequence[Point], settings: TraceSettings, rng: random.Random) -> list[float]:
    """Poisson arrival times (seconds from 0) at the documented rate."""
    mean_work = float(np.mean([p.fastest_s + settings.startup_s for p in order]))
    rate = settings.concurrency / mean_work
    times, now = [], 0.0
    for _ in order:
        times.append(round(now, 3))
        now += rng.expovariate(rate)
    return times


def _job(
    index: int, point: Point, submit: float, settings: TraceSettings, rng: random.Random
) -> JobRequest:
    tier = rng.choices([t for t, _ in settings.tiers], [w for _, w in settings.tiers])[0]
    names, weights = zip(*settings.accounts, strict=True)
    account = rng.choices(names, weights)[0]
    checkpoint = _checkpointing(point) if rng.random() < settings.checkpoint_share else None
    return JobRequest(
        job_id=f"j{index:04d}",
        submit=submit,
        shapes=point.shapes,
        tier=tier,
        account=account,
        checkpoint=checkpoint,
        labels={"point": point.name},
    )


def _checkpointing(point: Point) -> Checkpointing:
    """A tenth of the fastest predicted median (at least a minute) between checkpoints.

    >>> _checkpointing(Point("p", {"a x1": Estimate(1200, 900, 1600, 1000.0)}))
    Checkpointing(interval_s=120.0, write_s=6.0, restore_s=12.0)
    """
    interval = max(60.0, round(min(e.p50_s for e in point.shapes.values()) / 10.0, 1))
    write = round(0.05 * interval, 1)
    return Checkpointing(interval, write, 2.0 * write)


def _chained(
    jobs: list[JobRequest], settings: TraceSettings, rng: random.Random
) -> list[JobRequest]:
    """Chains of ``chain_length`` consecutive arrivals: each depends on the one before, with
    the head's account and tier (one team's pipeline)."""
    n = settings.chain_length
    count = round(settings.chain_share * len(jobs) / n) if n >= 2 else 0
    starts = sorted(rng.sample(range(len(jobs) // n), min(count, len(jobs) // n)))
    for head in (s * n for s in starts):
        for k in range(head + 1, head + n):
            jobs[k] = replace(
                jobs[k],
                depends_on=(jobs[k - 1].job_id,),
                account=jobs[head].account,
                tier=jobs[head].tier,
            )
    return jobs


def _with_deadlines(
    jobs: list[JobRequest], order: Sequence[Point], settings: TraceSettings
) -> list[JobRequest]:
    """Deadline = ready + slack × (fastest + start-up); a chained job is ready at its
    predecessor's deadline. (Readiness at the predecessor's *earliest* finish made deadline
    sets no per-job plan could meet: an upstream job on time but using its slack left the
    downstream one too little, and even perfect knowledge missed; docs/scheduler.md.)"""
    deadlines: dict[str, float] = {}
    out = []
    for job, point in zip(jobs, order, strict=True):
        ready = max([job.submit, *(deadlines[d] for d in job.depends_on)])
        need = point.fastest_s + settings.startup_s
        deadlines[job.job_id] = round(ready + settings.slack * need, 3)
        out.append(replace(job, deadline=deadlines[job.job_id]))
    return out


def static_cost(job: JobRequest, catalog: Catalog, startup_s: float) -> float:
    """What ``job`` costs on the middle-priced of its shapes (the lower median, as the
    simulator's static policy), on demand in the cheapest region, for its true runtime plus
    start-up."""
    costs = _on_demand_costs(job, catalog, startup_s)
    hourly = {k: _on_demand(Shape.parse(k), catalog) for k in job.shapes}
    ordered = sorted(hourly, key=lambda k: (hourly[k], k))
    return costs[ordered[(len(ordered) - 1) // 2]]


def cheapest_cost(job: JobRequest, catalog: Catalog, startup_s: float) -> float:
    """The least an on-demand plan can pay for ``job``: its cheapest shape at its true runtime
    plus start-up (the budget's yardstick; only hindsight knows which shape that is)."""
    return min(_on_demand_costs(job, catalog, startup_s).values())


def _on_demand_costs(job: JobRequest, catalog: Catalog, startup_s: float) -> dict[str, float]:
    return {
        key: _on_demand(Shape.parse(key), catalog)
        * (float(est.true_s or est.p50_s) + startup_s)
        / 3600.0
        for key, est in job.shapes.items()
    }


def _on_demand(shape: Shape, catalog: Catalog) -> float:
    price = min(o.on_demand_usd_h for o in catalog.offers(shape.instance_type))
    return price * shape.nodes


def _budgets(
    jobs: Sequence[JobRequest], catalog: Catalog, settings: TraceSettings
) -> tuple[Budget, ...]:
    least: dict[str, float] = {}
    for job in jobs:
        cost = cheapest_cost(job, catalog, settings.startup_s)
        least[job.account] = least.get(job.account, 0.0) + cost
    span = math.ceil(max(float(j.deadline or j.submit) for j in jobs) / 3600.0) * 3600.0
    return tuple(
        Budget(name, round(settings.budget_headroom * usd, 4), span)
        for name, usd in sorted(least.items())
    )


def trace_for(
    source: str,
    catalog: Catalog,
    settings: TraceSettings,
    db: Path | None = None,
    workspace: Path | None = None,
    generated: Sequence[FeatureSpec] = (),
) -> JobSet:
    """The trace of a named source (see :func:`source_points`)."""
    points = source_points(source, db, workspace, generated)
    label = f"{source}, generated ({len(generated)} features)" if generated else source
    return build_trace(points, catalog, settings, label)


def source_points(
    source: str,
    db: Path | None = None,
    workspace: Path | None = None,
    generated: Sequence[FeatureSpec] = (),
) -> list[Point]:
    """The points of a named source, from ``db`` or by ingesting the source into a scratch
    warehouse (the lab: ``workspace``, default the shipped example; others: their mapping),
    priced by ``generated`` features where given (third-party sources only).

    Raises:
        ConfigError: an unknown source, ``workspace`` given for a third-party source, or
            ``generated`` for the lab.
    """
    if source not in SOURCES:
        raise ConfigError(f"unknown trace source {source!r}; known: {', '.join(SOURCES)}")
    if workspace is not None and source != "lab":
        raise ConfigError("--workspace is for the lab source; third-party data uses its mapping")
    if generated and source == "lab":
        raise ConfigError("--generated is for third-party sources; the lab prices its sweeps")
    if db is not None:
        return _points(source, db, generated)
    with tempfile.TemporaryDirectory(prefix="autofe-trace-") as tmp:
        scratch = Path(tmp) / "warehouse.duckdb"
        inputs = [workspace or example_workspace()] if source == "lab" else [_mapping(source)]
        ingest(inputs, IngestSettings(db=scratch, workers=1))
        return _points(source, scratch, generated)


def _mapping(source: str) -> Path:
    return MAPPINGS / f"{SOURCES[source]}.toml"


def _points(source: str, db: Path, generated: Sequence[FeatureSpec]) -> list[Point]:
    if source == "lab":
        return lab_points(db, MODEL_SEED)
    return third_party_points(db, SOURCES[source], MODEL_SEED, generated)
