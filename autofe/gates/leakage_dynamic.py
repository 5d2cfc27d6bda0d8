"""Dynamic leakage check: recompute the feature in worlds where the future was rewritten.

For a few target runs, every fact learnt at or after the target's submission (its own label
and telemetry, later runs, later snapshots) is altered in one scratch world and deleted in
another (:mod:`autofe.gates.world`). A feature computable at submit time gives the same
value in both; any change is a leak, whatever the SQL looks like. This catches what static
analysis cannot see: window frames over tied submit times, ``COALESCE`` falling back to the
target's own rows, a subquery picking "the latest" snapshot.

Targets are chosen where leaks show (see :data:`SITUATIONS`), deterministically from a seed. A
world depends only on its cutoff, so every run submitted at a target's exact submit time is
checked in the same world for free.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
from sqlglot import exp
from sqlglot.errors import SqlglotError

from autofe.errors import SandboxViolation, WarehouseError
from autofe.featurespec import FeatureSpec
from autofe.gates.codes import Leakage
from autofe.gates.completeness import same_value
from autofe.gates.context import GateContext, GateSettings, Reason
from autofe.gates.cost import SECONDS_PER_ROW
from autofe.gates.world import (
    BASELINE,
    FILE,
    Variant,
    World,
    build_worlds,
    in_world,
    open_scratch,
    world_catalog,
)
from autofe.sandbox.nesting import NestedTooDeeply, parse_statements
from autofe.sandbox.rewrite import referenced_tables, restricted
from autofe.sandbox.session import LimitExceeded, QueryError, Sandbox
from autofe.sandbox.work import counting, plan_work

log = logging.getLogger(__name__)

GATE = "leakage"
DIALECT = "duckdb"

MAX_RUNS_PER_CUTOFF = 50
"""Runs sharing a cutoff are checked together; a cap keeps a bulk-submitted batch cheap."""
WORLD_BUDGET_S = 0.6
"""Reference-machine time for recomputing the feature in worlds; a feature whose work overruns
it (a self-join over every run pair) is checked in fewer worlds."""
WORLD_BUDGET_ROWS = round(WORLD_BUDGET_S / SECONDS_PER_ROW)
"""The budget as work (rows, :func:`~autofe.sandbox.work.plan_work`), so which worlds a feature
is checked in is the same on a fast, a slow or a loaded machine; a clock would let a leak seen
only in a later world pass on a slow one."""
MIN_WORLDS = 2
"""Worlds checked whatever they cost: a slow feature is not a reason to skip the check."""

Values = dict[str, tuple[Any, ...]]
"""A feature's values per run id (several if it repeats the run id; none if it omits it)."""

SITUATIONS = (
    "running_before",
    "submitted_together",
    "own_telemetry",
    "own_post_attributes",
    "later_snapshot",
    "earlier_ended",
    "later_run",
    "first_of_several",
)
"""Where leaks show. ``running_before``: a run of the job submitted earlier had not ended at
submit (what "the previous run's duration" reads); ``submitted_together``: a run of the job
submitted at the same instant (ties in a window's order); the run's own stages or
post-execution attributes; a snapshot taken after submit; history on either side; the first of
several runs (where ``COALESCE`` falls back to everything). Each source of runs (workspace,
event logs, a dataset) is a situation too: features often describe only one of them."""

CANDIDATES_SQL = f"""
WITH base AS (
    SELECT run_id, job_id, submit_time, end_time, source,
        COALESCE(end_time, 'infinity'::TIMESTAMP) AS ends
    FROM {FILE}.runs
    WHERE submit_time IS NOT NULL
), flags AS (
    SELECT run_id, job_id, submit_time, COALESCE(source, '?') AS source,
        COALESCE(max(ends) OVER (PARTITION BY job_id ORDER BY submit_time
            RANGE BETWEEN UNBOUNDED PRECEDING AND INTERVAL 1 MICROSECOND PRECEDING) >= submit_time,
            false) AS running_before,
        count(*) OVER (PARTITION BY job_id, submit_time) > 1 AS submitted_together,
        run_id IN (SELECT run_id FROM {FILE}.applications) AS own_telemetry,
        run_id IN (
            SELECT run_id FROM {FILE}.run_attributes WHERE availability = 'post_execution'
        ) AS own_post_attributes,
        COALESCE(submit_time >= (SELECT min(as_of) FROM {FILE}.table_stats)
            AND submit_time < (SELECT max(as_of) FROM {FILE}.table_stats), false)
            AS later_snapshot,
        COALESCE(min(end_time) OVER job < submit_time, false) AS earlier_ended,
        COALESCE(max(submit_time) OVER job > submit_time, false) AS later_run,
        NOT earlier_ended AND later_run AS first_of_several
    FROM base
    WINDOW job AS (PARTITION BY job_id)
), tagged AS (
    SELECT *, {" + ".join(f"{s}::INT" for s in SITUATIONS)} AS richness,
        md5(run_id || ':' || $seed) AS draw,
        unnest([{", ".join(f"CASE WHEN {s} THEN '{s}' END" for s in SITUATIONS)}, source])
            AS situation
    FROM flags
)
SELECT run_id, job_id, submit_time, draw, source, {", ".join(SITUATIONS)} FROM tagged
WHERE situation IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY situation ORDER BY richness DESC, draw) <= $k
"""
"""Per situation (and per source), the ``k`` runs richest in situations; seeded ties."""

PEERS_SQL = f"""
SELECT run_id, submit_time FROM {FILE}.runs
WHERE submit_time IN (SELECT unnest($cutoffs::TIMESTAMP[]))
ORDER BY submit_time, run_id
"""


@dataclass(frozen=True)
class TargetRun:
    """A run that could be a target, with the situations it is in."""

    run_id: str
    job_id: str | None
    submit_time: datetime
    draw: str
    situations: frozenset[str]


def check_dynamic_leakage(spec: FeatureSpec, ctx: GateContext) -> list[Reason]:
    """Reasons the feature's value changed when facts known at or after submit changed.

    A feature that cannot run (or is not deterministic) is the completeness gate's to
    reject; this check then has nothing to compare and returns no reason, as it does for a
    warehouse without dated runs.

    Raises:
        WarehouseError: the warehouse cannot be read to build the worlds.
    """
    tree = _single_query(spec.sql)
    tables = referenced_tables(tree) if tree is not None else set()
    if tree is None or not tables <= ctx.catalog.tables():
        return []  # the world views' names would resolve where the warehouse's do not
    with _scratch(ctx) as con:
        cutoffs = pick_cutoffs(con, ctx.settings)
        if not cutoffs:
            return []
        worlds = build_worlds(con, ctx.catalog, list(cutoffs), tables)
        catalog = world_catalog(ctx.catalog, [BASELINE, *worlds], tables)
        with Sandbox.wrap(con, catalog, counting(ctx.settings.limits)) as box:
            return _compare(box, tree, tables, worlds, cutoffs, ctx.settings.limits.threads)


def _compare(
    box: Sandbox,
    tree: exp.Query,
    tables: set[str],
    worlds: list[World],
    cutoffs: dict[datetime, list[str]],
    workers: int = 1,
) -> list[Reason]:
    """The baseline's values for every target against each world's.

    Every world's query keeps the rows of every cutoff's runs, as the baseline's does, and
    compares only those of its own cutoff: its SQL is then the baseline's with the views
    renamed, which the sandbox runs without parsing it twice more
    (:meth:`~autofe.sandbox.session.Sandbox.query_renamed`).
    """
    run_ids = [r for ids in cutoffs.values() for r in ids]
    baseline = restricted(in_world(tree, BASELINE, tables), run_ids, copy=False)
    with ThreadPoolExecutor(max_workers=min(workers, 2)) as pool:  # its values and its work
        values, work = pool.submit(_try_values, box, baseline), pool.submit(_work, box, baseline)
        original = values.result()
    if original is None:
        return []
    checked = world_order(worlds)[: worlds_within_budget(work.result())]
    if len(checked) < len(worlds):
        log.info("dynamic leakage: %d of %d worlds within budget", len(checked), len(worlds))
    reasons = _perturb(
        box, Baseline(tree, tables, run_ids, baseline), checked, cutoffs, original, workers
    )
    return reasons if not reasons or _stable(box, baseline, original) else []


@dataclass(frozen=True)
class Baseline:
    """The feature as checked in every world: its tree, tables, target runs and baseline SQL."""

    tree: exp.Query
    tables: set[str]
    run_ids: list[str]
    sql: str

    def in_world(self, world: World) -> str:
        """The baseline's SQL reading ``world``'s views."""
        return restricted(in_world(self.tree, world, self.tables), self.run_ids, copy=False)

    def renames(self, world: World) -> dict[str, str]:
        """Each baseline view's name to ``world``'s."""
        return {BASELINE.view(t): world.view(t) for t in sorted(self.tables)}


def _single_query(sql: str) -> exp.Query | None:
    try:
        statements = parse_statements(sql)
    except (SqlglotError, NestedTooDeeply):
        return None
    first = statements[0] if len(statements) == 1 else None
    return first if isinstance(first, exp.Query) else None


@contextmanager
def _scratch(ctx: GateContext) -> Iterator[duckdb.DuckDBPyConnection]:
    """A scratch connection with the warehouse attached, for target picking and the worlds.

    Raises:
        WarehouseError: the warehouse cannot be attached or read.
    """
    try:
        con = open_scratch(ctx.db)
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot read warehouse {ctx.db}: {exc}") from exc
    try:
        yield con
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot build perturbed worlds of {ctx.db}: {exc}") from exc
    finally:
        con.close()


def pick_cutoffs(
    con: duckdb.DuckDBPyConnection, settings: GateSettings
) -> dict[datetime, list[str]]:
    """Cutoffs (target submit times), most telling first, each with the runs submitted then.

    Args:
        con: a scratch connection with the warehouse attached (:func:`open_scratch`).
        settings: how many targets, and the seed that picks among equals.
    """
    params = {"seed": str(settings.seed), "k": settings.dynamic_targets}
    rows = con.execute(CANDIDATES_SQL, params).fetchall()
    chosen = choose_targets([_candidate(row) for row in rows], settings.dynamic_targets)
    cutoffs = list(dict.fromkeys(c.submit_time for c in chosen))
    peers = con.execute(PEERS_SQL, {"cutoffs": cutoffs}).fetchall() if cutoffs else []
    grouped = _group_peers(peers, {c.run_id for c in chosen})
    return {cutoff: grouped[cutoff] for cutoff in cutoffs if cutoff in grouped}


def _candidate(row: Sequence[Any]) -> TargetRun:
    run_id, job_id, submit_time, draw, source, *flags = row
    situations = {s for s, on in zip(SITUATIONS, flags, strict=True) if on}
    return TargetRun(str(run_id), job_id, submit_time, str(draw), frozenset({*situations, source}))


def choose_targets(candidates: Iterable[TargetRun], n: int) -> list[TargetRun]:
    """Up to ``n`` targets covering every situation present, then the richest others.

    Greedy set cover, then runs of jobs not yet chosen (features often describe some jobs
    only), then any; a run whose cutoff is already chosen adds nothing (same world).

    >>> t = datetime(2024, 1, 1)
    >>> c = [TargetRun("a", "j", t, "2", frozenset({"x"})),
    ...      TargetRun("b", "j", t.replace(day=2), "1", frozenset({"x", "y"})),
    ...      TargetRun("c", "k", t.replace(day=3), "0", frozenset({"x"}))]
    >>> [x.run_id for x in choose_targets(c, 2)]
    ['b', 'c']
    """
    ordered = sorted(set(candidates), key=lambda c: (-len(c.situations), c.draw, c.run_id))
    chosen: list[TargetRun] = []
    uncovered = set().union(*(c.situations for c in ordered))
    while uncovered and len(chosen) < n:
        best = max(ordered, key=lambda c: len(c.situations & uncovered))
        chosen.append(best)
        uncovered -= best.situations
    fresh = [c for c in ordered if c.job_id not in {x.job_id for x in chosen}]
    for c in fresh + ordered:
        if len(chosen) < n and c.submit_time not in {x.submit_time for x in chosen}:
            chosen.append(c)
    return chosen


def _group_peers(peers: Iterable[Sequence[Any]], chosen: set[str]) -> dict[datetime, list[str]]:
    """Run ids per cutoff, the chosen target first, at most ``MAX_RUNS_PER_CUTOFF`` each."""
    grouped: dict[datetime, list[str]] = {}
    for run_id, submit_time in peers:
        grouped.setdefault(submit_time, []).append(str(run_id))
    return {
        cutoff: sorted(ids, key=lambda r: (r not in chosen, r))[:MAX_RUNS_PER_CUTOFF]
        for cutoff, ids in grouped.items()
    }


def _values(sandbox: Sandbox, sql: str) -> Values:
    return _by_run(sandbox.query(sql).rows)


def _by_run(rows: Iterable[Sequence[Any]]) -> Values:
    values: dict[str, list[Any]] = {}
    for row in rows:
        values.setdefault(str(row[0]), []).append(row[1] if len(row) > 1 else None)
    return {k: tuple(sorted(v, key=_order_key)) for k, v in values.items()}


def _values_renamed(box: Sandbox, baseline: Baseline, world: World) -> Values:
    result = box.query_renamed(baseline.in_world(world), baseline.sql, baseline.renames(world))
    return _by_run(result.rows)


def _order_key(value: Any) -> tuple[int, str]:
    return (0, "") if value is None else (1, repr(value))


def _try_values(sandbox: Sandbox, sql: str) -> Values | None:
    """The feature's values in the baseline, or None if it does not run there."""
    try:
        return _values(sandbox, sql)
    except (QueryError, SandboxViolation) as exc:
        log.debug("dynamic leakage check skipped: %s", exc)
        return None


def _stable(box: Sandbox, sql: str, original: Values) -> bool:
    """Whether the feature computes the same values again.

    One that changes on its own (random(), now()) would look leaky in every world; it is
    the completeness gate's to reject.
    """
    again = _try_values(box, sql)
    return again is not None and not _changed(original, again, original.keys() | again.keys())


def _changed(before: Values, after: Values, run_ids: Iterable[str]) -> list[str]:
    return [r for r in run_ids if not same_values(before.get(r, (None,)), after.get(r, (None,)))]


def same_values(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Same values for one run (NULL when missing; floats within a relative 1e-9).

    >>> same_values((1.0,), (1.0 + 1e-12,)), same_values((None,), (0.0,))
    (True, False)
    """
    return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))


def world_order(worlds: Sequence[World]) -> list[World]:
    """Altered worlds of every cutoff first, then the deleted ones (cutoffs most telling first).

    Altering catches most leaks (any use of a hidden value); when the work budget cuts the
    list short, the most telling targets have had that test.
    """
    rank = {w.prefix: i for i, w in enumerate(worlds)}
    return sorted(worlds, key=lambda w: (w.variant is not Variant.ALTER, rank[w.prefix]))


def _perturb(
    box: Sandbox,
    baseline: Baseline,
    worlds: list[World],
    cutoffs: dict[datetime, list[str]],
    original: Values,
    workers: int = 1,
) -> list[Reason]:
    """One reason per cutoff whose runs change value in one of ``worlds`` (the first in order).

    With ``workers`` > 1 the worlds are recomputed that many at a time (each query on its own
    cursor, DuckDB running beside Python's guards): the gate's time for a feature whose worlds
    all agree was mostly DuckDB recomputing it twelve times on one thread. The verdict is the
    one a single worker reaches: each cutoff's reason is its first world's in order, and a
    world stopped by the memory limit beside another is recomputed alone.
    """

    def check(world: World, alone: bool) -> Reason | Crowded | None:
        return _check_world(box, baseline, world, cutoffs[world.cutoff], original, alone=alone)

    if workers > 1 and len(worlds) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            found = list(pool.map(lambda w: check(w, alone=False), worlds))
    else:
        found = [CROWDED] * len(worlds)  # each computed alone below, in order
    reasons: dict[datetime, Reason] = {}
    for world, outcome in zip(worlds, found, strict=True):
        if world.cutoff in reasons:
            continue
        reason = check(world, alone=True) if outcome is CROWDED else outcome
        if reason is not None and not isinstance(reason, Crowded):
            reasons[world.cutoff] = reason
    return [reasons[c] for c in cutoffs if c in reasons]


class Crowded:
    """A world's query stopped by the memory limit while another world's ran beside it."""


CROWDED = Crowded()


def worlds_within_budget(work: int) -> int:
    """How many worlds a feature doing ``work`` rows per evaluation is checked in.

    The baseline's work stands for each world's: a world alters or deletes facts, it adds
    no rows.

    >>> worlds_within_budget(1_000), worlds_within_budget(WORLD_BUDGET_ROWS // 3)
    (12000, 3)
    >>> worlds_within_budget(10 * WORLD_BUDGET_ROWS)
    2
    """
    return max(MIN_WORLDS, WORLD_BUDGET_ROWS // max(work, 1))


def _work(box: Sandbox, sql: str) -> int:
    """The baseline's work in rows; past the budget (the fewest worlds) if it cannot be profiled."""
    try:
        return plan_work(box.profile(sql))
    except (QueryError, SandboxViolation) as exc:
        log.debug("dynamic leakage: baseline not profiled: %s", exc)
        return WORLD_BUDGET_ROWS + 1


def _check_world(
    box: Sandbox,
    baseline: Baseline,
    world: World,
    run_ids: list[str],
    original: Values,
    *,
    alone: bool = True,
) -> Reason | Crowded | None:
    """A reason if any of ``run_ids`` changes value (or the query breaks) in ``world``.

    :data:`CROWDED` if the memory limit stopped it while not ``alone``: the caller runs it again
    alone, so the verdict does not depend on which worlds happened to run together.
    """
    try:
        perturbed = _values_renamed(box, baseline, world)
    except QueryError as exc:
        return _failed_reason(run_ids[0], world, exc)
    except LimitExceeded as exc:
        if not alone and not exc.timeout:
            return CROWDED
        log.debug("world %s skipped: %s", world.prefix, exc)
        return None
    except SandboxViolation as exc:  # a limit hit in a world: no evidence either way
        log.debug("world %s skipped: %s", world.prefix, exc)
        return None
    changed = _changed(original, perturbed, run_ids)
    return _changed_reason(changed, world, original, perturbed) if changed else None


HIDDEN = {
    Variant.ALTER: "altered (the label, telemetry and statuses of runs not ended by then, "
    "later snapshots)",
    Variant.DELETE: "deleted (later runs, the telemetry of runs not ended by then, "
    "later snapshots)",
}


def _changed_reason(changed: list[str], world: World, before: Values, after: Values) -> Reason:
    run_id = changed[0]
    old, new = _shown(before.get(run_id)), _shown(after.get(run_id))
    others = f" (and {len(changed) - 1} other runs submitted then)" if len(changed) > 1 else ""
    message = (
        f"value for run {run_id!r}{others} changed from {old} to {new} when facts known at "
        f"or after its submission ({world.cutoff:%Y-%m-%d %H:%M:%S}) were "
        f"{HIDDEN[world.variant]}: the feature uses information not available at submit time"
    )
    return Reason(GATE, str(Leakage.PERTURBATION), message)


def _failed_reason(run_id: str, world: World, exc: QueryError) -> Reason:
    message = (
        f"the feature fails for run {run_id!r} when facts known at or after its submission "
        f"({world.cutoff:%Y-%m-%d %H:%M:%S}) are {HIDDEN[world.variant]}, yet runs on the "
        f"unperturbed warehouse: it depends on them ({exc.message})"
    )
    return Reason(GATE, str(Leakage.PERTURBATION), message)


def _shown(values: tuple[Any, ...] | None) -> str:
    """A run's values for a message: one value bare, several as a list, none as NULL.

    >>> _shown(None), _shown((1.5,)), _shown((None, 2))
    ('NULL (no row)', '1.5', '[NULL, 2]')
    """
    if not values:
        return "NULL (no row)"
    shown = ["NULL" if v is None else repr(v) for v in values]
    return shown[0] if len(shown) == 1 else "[" + ", ".join(shown) + "]"
