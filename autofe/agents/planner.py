"""The offline backend: a deterministic planner that composes features from knowledge-base recipes.

It answers the same :class:`~autofe.agents.llm.ProposalRequest` an LLM would, from four sources,
in this order each round:

0. **Profile columns**: every known-at-submit run attribute and every run parameter key the
   profile lists, as it is (a number, or a category when its values are not all numbers):
   what an engineer looks at first, and what a protocol on unseen hardware still has when
   every history feature is blind; the hardware facts of the run's cluster (node type, vCPU,
   memory, workers, price) when the warehouse has them; then **transferable history** (the
   recipes of :data:`TRANSFER_DOC`: the job's medians per configuration and per script, its
   core-seconds rescaled to the run's cores, a per-job Ernest fit, total cores and memory, a
   per-job power law of input bytes and task slots) whenever the workspace has runs, and the
   **job scaling fits** (:func:`job_scaling`: that power law on the slots alone and on every
   size the scale-out terms use) whenever its runs have durations. They come ahead of
   everything that may not fit the round, because the what-if questions the product answers
   (a job on a size or configuration it has not run on) need them whatever the retrieval
   ranks first: on the example workspace the 36 profile columns, 9 recipes and 21 fits are 66
   of the 70 per round, and the scale-out terms alone would be 42. Last, **scale-out terms**
   in the spirit of Ernest: every size (a numeric profile column, the bytes of the tables the
   script reads) per task slot and per GiB of cluster memory, which is what carries a job to
   hardware it has never run on (a tree cannot divide two features by itself; a log or
   inverse of one feature adds nothing to a tree, so only the ratios are proposed).
1. **Recipes** of the retrieved documents (the analyzer retrieves with the workspace profile in
   round 0 and with the evaluator's feedback later), rendered with their default parameters,
   skipping recipes that read a table this workspace has no rows in.
2. **Variants** of the recipes whose features were kept: each numeric parameter (a history
   depth ``k``, a window in ``days``...) halved and doubled, because the best window is
   workspace-specific.
3. **Combinations** of the strongest kept features: their product and ratio per run, because
   runtime is often a product of size and rate (rows × cost per row). Kept products and
   ratios are not combined again (see :func:`is_combination`).

Nothing is proposed twice (the request's ``feedback.proposed_ids`` lists every feature id
proposed so far), so the same request sequence gives the same proposals.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot

from autofe.agents.llm import Proposal, ProposalBatch, ProposalRequest, Usage
from autofe.featurespec import FeatureSpec
from autofe.knowledge_base.corpus import Document, Recipe, load_corpus, recipe_spec
from autofe.sandbox.rewrite import referenced_tables
from autofe.schema import HARDWARE_COLUMNS

VARIANT_FACTORS = (0.5, 2.0)
TOP_COMBINE = 8
SLOTS_RECIPE = "cores_task_slots"
MEMORY_PER_SLOT_RECIPE = "cores_memory_per_slot_gb"
SIZE_RECIPES = ("tablestats_input_bytes", "tablestats_pruned_bytes_estimate")
TRANSFER_DOC = "transferable-history"
_NAME_TAIL = re.compile(r"[^a-z0-9_]+")
_SAFE_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_IDENTIFIER = re.compile(r"(^|[_.\-])[iI][dD]$|[a-z]Id$")


@dataclass(frozen=True)
class Drafted:
    """A proposal with the id that makes it unique."""

    proposal: Proposal
    feature_id: str


class OfflinePlanner:
    """Deterministic feature proposals from the corpus (see the module docstring)."""

    name = "offline"

    def __init__(self, docs: Sequence[Document] | None = None) -> None:
        self._docs = {d.id: d for d in (docs if docs is not None else load_corpus())}

    def propose(self, request: ProposalRequest) -> ProposalBatch:
        seen = set(request.feedback.get("proposed_ids", ()))
        empty = set(request.profile.get("empty_tables", ()))
        drafts: list[Drafted] = []
        for draft in self._drafts(request, empty):
            if draft.feature_id not in seen and len(drafts) < request.max_proposals:
                seen.add(draft.feature_id)
                drafts.append(draft)
        digest = hashlib.sha256(
            json.dumps(request.model_dump(), sort_keys=True, default=str).encode()
        )
        return ProposalBatch(
            proposals=[d.proposal for d in drafts],
            usage=Usage(),
            prompt_hash=digest.hexdigest()[:16],
        )

    def _drafts(self, request: ProposalRequest, empty: set[str]) -> Iterator[Drafted]:
        kept = request.feedback.get("kept", [])
        yield from profile_columns(request.profile)
        yield from self._transfer(request.profile, empty)
        yield from self._job_scaling(request.profile, empty)
        yield from self._scale_out(request.profile, empty)
        yield from self._recipes(request, empty)
        yield from self._variants(kept, empty)
        yield from combinations(kept)

    def _recipes(self, request: ProposalRequest, empty: set[str]) -> Iterator[Drafted]:
        for snippet in request.knowledge:
            doc = self._docs.get(snippet.doc_id)
            for recipe in doc.recipes if doc else ():
                spec = recipe_spec(doc, recipe)  # type: ignore[arg-type]
                if not reads_any(spec.sql, empty):
                    yield _drafted(spec, origin=recipe.name)

    def _scale_out(self, profile: Mapping[str, Any], empty: set[str]) -> Iterator[Drafted]:
        """Each size per task slot and per GiB of the memory those slots share (when the
        warehouse knows the runs' hardware)."""
        if not profile.get("cluster_columns"):
            return
        slots, per_slot = (self._spec(n) for n in (SLOTS_RECIPE, MEMORY_PER_SLOT_RECIPE))
        if slots is None or per_slot is None or reads_any(slots.sql, empty):
            return
        for size in [*numeric_profile_columns(profile), *self._sizes(empty)]:
            yield _drafted(scaled(size, (slots,), "per_slot"), origin="scale-out")
            yield _drafted(scaled(size, (slots, per_slot), "per_gb"), origin="scale-out")

    def _transfer(self, profile: Mapping[str, Any], empty: set[str]) -> Iterator[Drafted]:
        """Every recipe of :data:`TRANSFER_DOC` when the profile shows runs (skipping those that
        read an empty table): history in units that carry to another configuration."""
        doc = self._docs.get(TRANSFER_DOC)
        if doc is None or not profile.get("tables", {}).get("runs", {}).get("rows", 0):
            return
        for recipe in doc.recipes:
            spec = recipe_spec(doc, recipe)
            if not reads_any(spec.sql, empty):
                yield _drafted(spec, origin=recipe.name)

    def _job_scaling(self, profile: Mapping[str, Any], empty: set[str]) -> Iterator[Drafted]:
        """The job's power-law fit (:func:`job_scaling`) on the slots alone, then on each size
        the scale-out terms divide, when the workspace has runs with a duration. The fit on
        the table bytes is the recipe ``history_job_scaling_s``: proposed once, by
        :meth:`_transfer` (the same SQL is the same feature id)."""
        slots = self._spec(SLOTS_RECIPE)
        if slots is None or profile.get("runtime_s", {}).get("p50") is None:
            return
        # unknown slots only make the fit's slot term 0: not a reason to leave the fit out
        for size in (None, *numeric_profile_columns(profile), *self._sizes(empty)):
            yield _drafted(job_scaling(size, slots), origin="job-scaling")

    def _sizes(self, empty: set[str]) -> Iterator[FeatureSpec]:
        for name in SIZE_RECIPES:
            spec = self._spec(name)
            if spec is not None and not reads_any(spec.sql, empty):
                yield spec

    def _spec(self, recipe_name: str) -> FeatureSpec | None:
        found = self._recipe(recipe_name)
        return recipe_spec(*found) if found else None

    def _variants(self, kept: Sequence[Mapping[str, Any]], empty: set[str]) -> Iterator[Drafted]:
        for item in kept:
            origin, name = str(item.get("origin", "")), str(item.get("name", ""))
            # a warm start's catalog features have origin "catalog": their name is the recipe
            found = self._recipe(origin) or self._recipe(name)
            if found is None:
                continue
            doc, recipe = found
            for overrides in parameter_variants(recipe):
                spec = recipe_spec(doc, recipe, overrides)
                suffix = "_".join(f"{k}{_slug(v)}" for k, v in sorted(overrides.items()))
                spec = spec.model_copy(update={"name": _name(f"{recipe.name}_{suffix}")})
                if not reads_any(spec.sql, empty):
                    yield _drafted(spec, origin=f"variant:{recipe.name}")

    def _recipe(self, name: str) -> tuple[Document, Recipe] | None:
        base = name.removeprefix("variant:")
        for doc in self._docs.values():
            for recipe in doc.recipes:
                if recipe.name == base:
                    return doc, recipe
        return None


def profile_columns(profile: Mapping[str, Any]) -> Iterator[Drafted]:
    """One feature per known-at-submit run attribute, run parameter key and cluster column."""
    for name, value_type in sorted(profile.get("attribute_types", {}).items()):
        if _SAFE_KEY.fullmatch(name):
            yield _drafted(_attribute(name, value_type), origin="profile:attribute")
    for key, value_type in sorted(profile.get("parameter_types", {}).items()):
        if _SAFE_KEY.fullmatch(key):
            yield _drafted(_parameter(key, value_type), origin="profile:parameter")
    for column in profile.get("cluster_columns", ()):
        if column in HARDWARE_COLUMNS:
            yield _drafted(_cluster(column), origin="profile:cluster")


def numeric_profile_columns(profile: Mapping[str, Any]) -> Iterator[FeatureSpec]:
    """The numeric run attributes and parameters that can be amounts of work (the candidate
    sizes of scale-out terms): not identifiers (``config_id``, ``vmId``: a number, not a size)."""
    for name, value_type in sorted(profile.get("attribute_types", {}).items()):
        if _amount(name, value_type):
            yield _attribute(name, value_type)
    for key, value_type in sorted(profile.get("parameter_types", {}).items()):
        if _amount(key, value_type):
            yield _parameter(key, value_type)


def _amount(name: str, value_type: str) -> bool:
    """
    >>> [_amount(n, "DOUBLE") for n in ("data_size_MB", "config_id", "vmId", "paid", "id")]
    [True, False, False, True, False]
    """
    return (
        value_type == "DOUBLE" and bool(_SAFE_KEY.fullmatch(name)) and not _IDENTIFIER.search(name)
    )


def scaled(size: FeatureSpec, divisors: Sequence[FeatureSpec], word: str) -> FeatureSpec:
    """``size`` divided by the product of ``divisors`` (NULL when the product is 0 or NULL)."""
    parts = [size, *divisors]
    product = " * ".join(f"CAST(d{i}.value AS DOUBLE)" for i in range(1, len(parts)))
    sql = _nested([d.sql for d in parts], f"CAST(d0.value AS DOUBLE) / nullif({product}, 0)")
    return FeatureSpec(
        name=_name(f"{size.name}_{word}"),
        sql=sql,
        category="data-size",
        rationale=f"{size.name} {word.replace('_', ' ')}: work per unit of hardware (Ernest)",
        kb_refs=tuple(sorted({r for d in parts for r in d.kb_refs})),
    )


JOB_SCALING_RIDGE = 1.0
"""The ridge penalty on the fit's two slopes: it keeps the 2 x 2 system solvable with one
earlier run or a size that never varied, and shrinks the slopes of a job with few runs."""


def job_scaling(size: FeatureSpec | None, slots: FeatureSpec) -> FeatureSpec:
    """The job's median on this run's configuration (its last five runs there, so that it follows
    a job that got slower) where it has earlier runs there; elsewhere
    a power law fit per job on its earlier runs, evaluated at this run's size and slots:
    ln duration = a + b (ln size - mean) + c (ln slots - mean), ridge on b and c. The median
    first because on a rerun it is the most accurate estimate there is, and an anchored model
    (:mod:`autofe.modeling.train`) takes one estimate per feature.

    The earlier runs are the job's successful runs with a duration that ended before the
    target's submission; NULL without one. ``size`` None fits the slots alone. A size or slot
    count that is missing or not positive counts as the earlier runs' mean, so its term adds
    nothing; a term that never varied adds nothing either.

    >>> slots = FeatureSpec(name="slots", sql="SELECT run_id, 2 AS value FROM runs",
    ...                     category="static-config")
    >>> spec = job_scaling(None, slots)
    >>> spec.name, spec.category, "f.end_time < t.submit_time" in spec.sql
    ('history_scaling_s', 'history', True)
    """
    parts = [slots] if size is None else [size, slots]
    joins = "".join(
        f"\n  LEFT JOIN (\n{textwrap.indent(_body(d.sql), '    ')}\n  ) AS d{i} "
        f"ON d{i}.run_id = r.run_id"
        for i, d in enumerate(parts)
    )
    sql = JOB_SCALING_SQL.format(
        size="NULL" if size is None else "d0.value",
        slots=f"d{len(parts) - 1}.value",
        joins=joins,
        ridge=JOB_SCALING_RIDGE,
    )
    fitted = "slots" if size is None else f"{size.name} and slots"
    return FeatureSpec(
        name=_name(f"history_scaling_{size.name}_s" if size else "history_scaling_s"),
        sql=sql,
        category="history",
        rationale=f"the job's earlier durations as a power law of {fitted}, at this run",
        kb_refs=tuple(sorted({TRANSFER_DOC, *(r for d in parts for r in d.kb_refs)})),
    )


JOB_SCALING_SQL = """WITH raw AS (
  SELECT r.run_id, r.job_id, r.cluster_config_id AS config, r.status, r.submit_time,
         r.end_time, r.duration_s, CAST({size} AS DOUBLE) AS size, CAST({slots} AS DOUBLE) AS slots
  FROM runs AS r{joins}
),
sized AS (
  SELECT run_id, job_id, config, status, submit_time, end_time, duration_s,
         CASE WHEN size > 0 THEN ln(size) END AS x1,
         CASE WHEN slots > 0 THEN ln(slots) END AS x2
  FROM raw
),
done AS (
  SELECT run_id, job_id, config, end_time, duration_s AS d, ln(duration_s) AS y, x1, x2
  FROM sized
  WHERE status = 'SUCCEEDED' AND duration_s > 0 AND end_time IS NOT NULL
),
running AS (
  -- the job's successful runs in the order they ended (run id breaks ties), with sums over
  -- each one and those before it, and how many had ended by its end (ties included)
  SELECT job_id, end_time,
         row_number() OVER (PARTITION BY job_id ORDER BY end_time, run_id) AS rank,
         count(*) OVER (
           PARTITION BY job_id ORDER BY end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS ended,
         count(*) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS n,
         sum(y) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sy,
         count(x1) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS n1,
         sum(x1) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sx1,
         sum(x1 * x1) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sx11,
         sum(x1 * y) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sx1y,
         sum(CASE WHEN x1 IS NOT NULL THEN y END) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sy1,
         count(x2) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS n2,
         sum(x2) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sx2,
         sum(x2 * x2) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sx22,
         sum(x2 * y) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sx2y,
         sum(CASE WHEN x2 IS NOT NULL THEN y END) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sy2,
         count(x1 * x2) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS n12,
         sum(x1 * x2) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sx12,
         sum(CASE WHEN x2 IS NOT NULL THEN x1 END) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sx1b,
         sum(CASE WHEN x1 IS NOT NULL THEN x2 END) OVER (
           PARTITION BY job_id ORDER BY end_time, run_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS sx2b
  FROM done
),
means AS (
  SELECT *, sy / n AS my, sx1 / nullif(n1, 0) AS m1, sx2 / nullif(n2, 0) AS m2
  FROM running
),
sums AS (
  -- the centred sums from the raw ones; a missing x counts as the mean (deviation 0)
  SELECT job_id, end_time, rank, ended, my, m1, m2,
         coalesce(sx11 - sx1 * m1, 0) AS s11,
         coalesce(sx22 - sx2 * m2, 0) AS s22,
         coalesce(sx12 - m2 * sx1b - m1 * sx2b + n12 * m1 * m2, 0) AS s12,
         coalesce(sx1y - my * sx1 - m1 * sy1 + n1 * m1 * my, 0) AS s1y,
         coalesce(sx2y - my * sx2 - m2 * sy2 + n2 * m2 * my, 0) AS s2y
  FROM means
),
fit AS (
  -- [[s11 + l, s12], [s12, s22 + l]] [b, c] = [s1y, s2y] by Cramer's rule (det >= l^2 > 0)
  SELECT job_id, end_time, rank, ended, my, m1, m2,
         ((s22 + {ridge}) * s1y - s12 * s2y)
           / ((s11 + {ridge}) * (s22 + {ridge}) - s12 * s12) AS b,
         ((s11 + {ridge}) * s2y - s12 * s1y)
           / ((s11 + {ridge}) * (s22 + {ridge}) - s12 * s12) AS c
  FROM sums
  WHERE rank = ended  -- the last of the runs that ended together: its sums count them all
),
recent AS (
  -- the job's successful runs on one configuration, each with the median of it and the four
  -- before it there
  SELECT job_id, config, end_time,
         row_number() OVER (PARTITION BY job_id, config ORDER BY end_time, run_id) AS rank,
         count(*) OVER (
           PARTITION BY job_id, config ORDER BY end_time
           RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
         ) AS ended,
         median(d) OVER (
           PARTITION BY job_id, config ORDER BY end_time, run_id
           ROWS BETWEEN 4 PRECEDING AND CURRENT ROW
         ) AS same_median
  FROM done
  WHERE config IS NOT NULL
),
last_recent AS (
  -- the last of the runs that ended together: its median covers the latest five of them all
  SELECT job_id, config, end_time, same_median FROM recent WHERE rank = ended
)
SELECT t.run_id,
       coalesce(c.same_median,
                exp(f.my + f.b * coalesce(t.x1 - f.m1, 0) + f.c * coalesce(t.x2 - f.m2, 0)))
         AS value
FROM sized AS t
ASOF LEFT JOIN fit AS f ON f.job_id = t.job_id AND f.end_time < t.submit_time
ASOF LEFT JOIN last_recent AS c
  ON c.job_id = t.job_id AND c.config = t.config AND c.end_time < t.submit_time"""
"""The SQL of :func:`job_scaling` (the recipe ``history_job_scaling_s`` is this SQL with
``tablestats_input_bytes`` and ``cores_task_slots``)."""


def _attribute(name: str, value_type: str) -> FeatureSpec:
    column = "a.value" if value_type == "DOUBLE" else "a.value_text"
    sql = (
        f"SELECT r.run_id, {column} AS value\nFROM runs AS r\nLEFT JOIN run_attributes AS a\n"
        f"  ON a.run_id = r.run_id AND a.name = '{name}' AND a.availability = 'known_at_submit'"
    )
    return _column_feature(f"attr_{name}", sql, value_type, f"run attribute {name}")


def _parameter(key: str, value_type: str) -> FeatureSpec:
    raw = (
        f"coalesce(json_extract_string(parameters, '$.notebook_params.\"{key}\"'), "
        f"json_extract_string(parameters, '$.job_parameters.\"{key}\"'))"
    )
    value = f"TRY_CAST({raw} AS DOUBLE)" if value_type == "DOUBLE" else raw
    sql = f"SELECT run_id, {value} AS value\nFROM runs"
    return _column_feature(f"param_{key}", sql, value_type, f"run parameter {key}")


def _cluster(column: str) -> FeatureSpec:
    sql = (
        f"SELECT r.run_id, c.{column} AS value\nFROM runs AS r\n"
        "LEFT JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id"
    )
    value_type = "VARCHAR" if column == "node_type" else "DOUBLE"
    return _column_feature(f"cluster_{column}", sql, value_type, f"cluster {column}")


def _column_feature(name: str, sql: str, value_type: str, what: str) -> FeatureSpec:
    """A profile column as a static-config feature: a number, else a category."""
    return FeatureSpec(
        name=_name(name),
        sql=sql,
        category="static-config",
        value_type="DOUBLE" if value_type == "DOUBLE" else "VARCHAR",
        rationale=f"{what}, fixed at submit",
    )


def request_hash(request: ProposalRequest) -> str:
    """The provenance hash of a request (what an LLM backend hashes is its prompt)."""
    text = json.dumps(request.model_dump(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parameter_variants(recipe: Recipe) -> list[dict[str, Any]]:
    """Each numeric parameter halved and doubled (integers stay integers, at least 1).

    >>> r = Recipe("r", "history", "DOUBLE", "SELECT {{k}}", "", "", {"k": 5})
    >>> parameter_variants(r)
    [{'k': 2}, {'k': 10}]
    """
    out = []
    for key, value in sorted(recipe.params.items()):
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        for factor in VARIANT_FACTORS:
            scaled: float | int = value * factor
            if isinstance(value, int):
                scaled = max(1, int(scaled))
            if scaled != value:
                out.append({key: scaled})
    return out


def combinations(kept: Sequence[Mapping[str, Any]]) -> Iterator[Drafted]:
    """Product and ratio of each pair among the most important numeric kept features."""
    numeric = [
        k
        for k in kept
        if k.get("value_type", "DOUBLE") != "VARCHAR" and not is_combination(str(k.get("sql", "")))
    ]
    top = sorted(numeric, key=lambda k: -float(k.get("importance", 0.0)))[:TOP_COMBINE]
    for a, b in itertools.combinations(top, 2):
        for op, word in (("*", "x"), ("/", "per")):
            yield _drafted(_combined(a, b, op, word), origin=f"combine:{a['name']},{b['name']}")


def is_combination(sql: str) -> bool:
    """Whether a feature is already a product or ratio of others (the planner's nested form):
    combining those again grows ever higher-order terms of the same few leaders, which on the
    example workspace were products of products of one history feature."""
    return any(sql.startswith(f"SELECT d0.run_id, {_combined_value(op)} AS value") for op in "*/")


def _combined_value(op: str) -> str:
    right = "d1.value" if op == "*" else "nullif(d1.value, 0)"
    return f"CAST(d0.value AS DOUBLE) {op} CAST({right} AS DOUBLE)"


def _combined(a: Mapping[str, Any], b: Mapping[str, Any], op: str, word: str) -> FeatureSpec:
    sql = _nested([a["sql"], b["sql"]], _combined_value(op))
    return FeatureSpec(
        name=_name(f"{a['name']}_{word}_{b['name']}"),
        sql=sql,
        category="interaction",
        rationale=f"{a['name']} {op} {b['name']}: runtime is often size times rate",
        kb_refs=tuple(sorted({*a.get("kb_refs", ()), *b.get("kb_refs", ())})),
    )


def _nested(sqls: Sequence[str], value: str) -> str:
    """``value`` (over ``d0.value``, ``d1.value``...) of features joined on run_id."""
    joins = "".join(
        f"\nJOIN (\n{_body(sql)}\n) AS d{i} USING (run_id)" for i, sql in enumerate(sqls[1:], 1)
    )
    return f"SELECT d0.run_id, {value} AS value\nFROM (\n{_body(sqls[0])}\n) AS d0{joins}"


def _body(sql: str) -> str:
    """A feature's SQL without comment lines and trailing semicolons (to nest it)."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";")


def reads_any(sql: str, tables: set[str]) -> bool:
    """Whether the SQL reads one of ``tables`` (unparseable SQL counts as not: the gates decide)."""
    if not tables:
        return False
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return False
    return bool(referenced_tables(tree) & tables)


def _drafted(spec: FeatureSpec, origin: str) -> Drafted:
    proposal = Proposal(
        name=spec.name,
        sql=spec.sql,
        category=spec.category,
        value_type=spec.value_type,
        rationale=spec.rationale or origin,
        kb_refs=list(spec.kb_refs),
    )
    return Drafted(proposal, spec.feature_id)


def _slug(value: Any) -> str:
    return _NAME_TAIL.sub("_", str(value).lower()).strip("_")


def _name(text: str) -> str:
    """A valid feature name: snake case, at most 80 characters (a hash keeps long ones unique)."""
    name = _NAME_TAIL.sub("_", text.lower()).strip("_")
    if len(name) <= 80:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:71]}_{digest}"
