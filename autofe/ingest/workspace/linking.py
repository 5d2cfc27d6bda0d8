"""Link an event log's application to the workspace run it belongs to (``docs/workspace.md``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autofe.ingest.workspace.api_values import Json, dict_of, dicts_of, epoch_ms, id_text

RUN_ID_PROP = "spark.databricks.job.runId"
PARENT_RUN_ID_PROP = "spark.databricks.job.parentRunId"
CLUSTER_ID_PROP = "spark.databricks.clusterUsageTags.clusterId"


@dataclass(frozen=True)
class AppFacts:
    """What the event-log ingester knows about one Spark application, for linking it to a run."""

    app_id: str
    start_ms: int | None
    end_ms: int | None
    properties: Mapping[str, str]
    path: Path


AppLinker = Callable[[AppFacts], str | None]


def delivery_location(path: Path) -> tuple[str, str | None] | None:
    """(cluster_id, spark_context_id) from a cluster-log-delivery path, if it is one.

    >>> delivery_location(Path("logs/0207-a/eventlog/0207-a_10_1_2_3/8880/eventlog-1.gz"))
    ('0207-a', '8880')
    >>> delivery_location(Path("eventlogs/app-1")) is None
    True
    """
    parts = path.parts
    for i in range(1, len(parts) - 1):
        cluster = parts[i - 1]
        if parts[i] == "eventlog" and parts[i + 1].startswith(cluster + "_"):
            return cluster, parts[i + 2] if i + 2 < len(parts) else None
    return None


@dataclass(frozen=True)
class _Unit:
    """A run, or one task run of it, as it ran on a cluster; ``run_id`` is the runs row."""

    run_id: str
    unit_id: str
    cluster_id: str | None
    context_id: str | None
    start_ms: int | None
    end_ms: int | None


def _units(run_id: str, run: Json) -> Iterator[_Unit]:
    for holder in (run, *dicts_of(run.get("tasks"))):
        instance = dict_of(holder.get("cluster_instance"))
        yield _Unit(
            run_id,
            id_text(holder.get("run_id")) or run_id,
            id_text(instance.get("cluster_id")),
            id_text(instance.get("spark_context_id")),
            epoch_ms(holder.get("start_time")),
            epoch_ms(holder.get("end_time")),
        )


@dataclass(frozen=True)
class RunLinker:
    """Links an application to a workspace run by the rules of ``docs/workspace.md``.

    A plain picklable object (not a closure), so a distributed ingest can ship it to the
    processes that parse the logs. Indexed by unit id and cluster, so linking an application
    is a lookup, not a scan of every run (which made ingest quadratic in the workspace's size).
    """

    units: tuple[_Unit, ...]
    by_unit_id: dict[str, str] = field(init=False, repr=False, compare=False)
    by_cluster: dict[str | None, tuple[_Unit, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids: dict[str, str] = {}
        clusters: dict[str | None, list[_Unit]] = {}
        for unit in self.units:
            ids.setdefault(unit.unit_id, unit.run_id)  # the first unit of an id, as a scan finds
            clusters.setdefault(unit.cluster_id, []).append(unit)
        object.__setattr__(self, "by_unit_id", ids)
        object.__setattr__(self, "by_cluster", {k: tuple(v) for k, v in clusters.items()})

    def __call__(self, facts: AppFacts) -> str | None:
        return (
            _by_run_id(self.by_unit_id, facts)
            or _by_location(self.by_cluster, facts)
            or _by_overlap(self.by_cluster, facts)
        )


def make_linker(runs: Mapping[str, Json]) -> RunLinker:
    """A linker over the workspace's runs, applying the rules of ``docs/workspace.md``.

    1. ``spark.databricks.job.runId`` (or ``parentRunId``) equal to a run's or task run's id;
    2. the log's delivery folder ``<cluster_id>/eventlog/<cluster_id>_<ip>/<context_id>``
       equal to a run's ``cluster_instance``;
    3. the cluster id (property or folder) and the run's [start_time, end_time] overlapping
       the application's.

    Task runs resolve to their parent run (the runs row). When several runs fit rule 2 or 3,
    the one overlapping the application most wins; a tie links nothing rather than guessing.
    """
    return RunLinker(tuple(u for run_id, run in runs.items() for u in _units(run_id, run)))


def _by_run_id(by_unit_id: Mapping[str, str], facts: AppFacts) -> str | None:
    for prop in (RUN_ID_PROP, PARENT_RUN_ID_PROP):
        wanted = facts.properties.get(prop)
        if wanted and (hit := by_unit_id.get(wanted)):
            return hit
    return None


def _by_location(by_cluster: Mapping[str | None, Sequence[_Unit]], facts: AppFacts) -> str | None:
    where = delivery_location(facts.path)
    if where is None or where[1] is None:
        return None
    hits = [u for u in by_cluster.get(where[0], ()) if u.context_id == where[1]]
    if len({u.run_id for u in hits}) == 1:
        return hits[0].run_id
    return _most_overlap(hits, facts)


def _by_overlap(by_cluster: Mapping[str | None, Sequence[_Unit]], facts: AppFacts) -> str | None:
    where = delivery_location(facts.path)
    cluster = facts.properties.get(CLUSTER_ID_PROP) or (where[0] if where else None)
    if not cluster:
        return None
    return _most_overlap(by_cluster.get(cluster, ()), facts)


def _most_overlap(units: Sequence[_Unit], facts: AppFacts) -> str | None:
    """The run overlapping the application longest (an app without end counts as a point)."""
    if facts.start_ms is None:
        return None
    app_end = facts.end_ms if facts.end_ms is not None else facts.start_ms
    best: dict[str, int] = {}
    for u in units:
        if u.start_ms is None:
            continue
        unit_end = u.end_ms if u.end_ms is not None else app_end
        overlap = min(app_end, unit_end) - max(facts.start_ms, u.start_ms)
        if overlap >= 0:
            best[u.run_id] = max(overlap, best.get(u.run_id, overlap))
    ranked = sorted(best.items(), key=lambda kv: -kv[1])
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]
