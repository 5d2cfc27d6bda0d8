"""The analyze node: profile the workspace, retrieve know-how, and ask a backend for features.

The profile is built once, in the first round, and carried in the state. Round 0 retrieves
with what the profile shows (which tables have rows, job types, run parameters); later rounds
retrieve with the evaluator's feedback (the jobs and runtime buckets with the largest errors).
Every retrieved document reaches the backend as a snippet; the backend (offline planner or LLM)
answers with proposals, which become this round's candidates (:func:`proposed_feature` is the
one place a :class:`~autofe.agents.llm.Proposal` becomes a :class:`~autofe.agents.state.Feature`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autofe.agents.context import LoopContext, Node
from autofe.agents.llm import (
    KnowledgeSnippet,
    LLMBackend,
    Proposal,
    ProposalBatch,
    ProposalRequest,
)
from autofe.agents.state import Feature, LLMRound, LoopState
from autofe.agents.toolbox import Toolbox
from autofe.featurespec import FeatureSpec
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.schema import HARDWARE_COLUMNS

BASE_QUERIES = (
    "history of previous runs of the same job: last duration, mean, trend",
    "input data size: bytes, rows and files of the tables a job reads",
    "cluster cores, memory, node type and executors",
    "spark configuration: shuffle partitions, adaptive query execution, broadcast threshold",
    "date range parameters and partition pruning",
    "data skew on join keys and straggler tasks",
    "calendar effects: hour of day, day of week, month end",
    "script complexity: joins, aggregations, window functions, distinct",
    "tables that grow over time and data growth",
    "spot instances, node loss and retries",
)
EVENT_LOG_QUERIES = (
    "stage metrics of previous runs: shuffle bytes, spill, task skew",
    "garbage collection and executor memory pressure in earlier runs",
)
PYTHON_QUERIES = ("python UDFs and pandas", "machine learning training: rows, features, iterations")
DOCS_PER_QUERY = 6


def analyze_node(ctx: LoopContext) -> Node:
    """The node: this round's candidates (the workspace profile too, in the first round)."""

    async def analyze(state: LoopState) -> dict[str, Any]:
        started = ctx.clock()
        profile = state.get("profile") or await build_profile(ctx.tools)
        iteration = state.get("iteration", 0)
        texts = queries(profile, state.get("feedback", {}), iteration)
        used = {ref for c in state.get("proposals", []) for ref in c["kb_refs"]}
        knowledge = retrieve(ctx.kb, texts, used)
        seed = ctx.seed if iteration == 0 else ()
        feedback = warm_feedback(planner_feedback(state), seed)
        batch = propose(
            ctx.backend, profile, knowledge, feedback, iteration, ctx.settings.per_round
        )
        taken = {c["name"] for c in state.get("proposals", [])}
        proposed = [*catalog_candidates(seed), *candidates_of(batch, ctx.backend)]
        candidates = unique_names(proposed, taken)
        tokens = batch.usage.prompt_tokens + batch.usage.completion_tokens
        return {
            "profile": profile,
            "candidates": candidates,
            "proposals": candidates,
            "llm": [llm_round(batch, ctx.backend.name, iteration)],
            "tokens": state.get("tokens", 0) + tokens,
            "phase_seconds": {"analyze": ctx.clock() - started},
        }

    return analyze


async def build_profile(tools: Toolbox) -> dict[str, Any]:
    """What the workspace holds, from the tools server: tables and their rows, job types,
    the runtime distribution, and the known-at-submit run attributes."""
    schema = await tools.call("describe_schema", {})
    tables = {t["name"]: t for t in schema["tables"]}
    counts = await _rows(
        tools,
        " UNION ALL ".join(
            f"SELECT '{name}' AS name, count(*) AS n FROM {name}" for name in sorted(tables)
        ),
    )
    job_types = await _rows(
        tools, "SELECT coalesce(task_type, 'unknown'), count(*) FROM jobs GROUP BY 1 ORDER BY 1"
    )
    runtime = await _rows(tools, RUNTIME_SQL)
    attributes = await _rows(tools, ATTRIBUTES_SQL)
    parameters = await _rows(tools, PARAMETERS_SQL)
    cluster = await _rows(tools, CLUSTER_SQL)
    rows = {str(n): int(c) for n, c in counts}
    return {
        "tables": {n: _table(t, rows.get(n, 0)) for n, t in sorted(tables.items())},
        "empty_tables": sorted(n for n, c in rows.items() if c == 0),
        "job_types": {str(t): int(c) for t, c in job_types},
        "runtime_s": dict(zip(("runs", "p10", "p50", "p90"), runtime[0], strict=True)),
        "run_attributes": [str(a[0]) for a in attributes],
        "attribute_types": {str(n): _value_type(c, v) for n, c, v in attributes},
        "parameter_types": {str(n): _value_type(c, v) for n, c, v in parameters},
        "cluster_columns": [c for c, n in zip(HARDWARE_COLUMNS, cluster[0], strict=True) if n],
        "availability_rules": schema.get("availability_rules", ""),
    }


RUNTIME_SQL = (
    "SELECT count(*), quantile_cont(duration_s, 0.1), quantile_cont(duration_s, 0.5), "
    "quantile_cont(duration_s, 0.9) FROM runs WHERE status = 'SUCCEEDED'"
)
ATTRIBUTES_SQL = (
    "SELECT name, count(*), count(value) FROM run_attributes "
    "WHERE availability = 'known_at_submit' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 40"
)
CLUSTER_SQL = f"SELECT {', '.join(f'count({c})' for c in HARDWARE_COLUMNS)} FROM cluster_configs"
PARAMETERS_SQL = """
WITH p AS (
  SELECT coalesce(json_extract(parameters, '$.notebook_params'),
                  json_extract(parameters, '$.job_parameters')) AS o
  FROM runs
)
SELECT k, count(*),
       count(TRY_CAST(json_extract_string(o, '$."' || k || '"') AS DOUBLE))
FROM p, unnest(json_keys(o)) AS t(k)
WHERE json_type(o) = 'OBJECT'
GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 40
"""


def _value_type(count: int, numeric: int) -> str:
    """DOUBLE when every value reads as a number, else VARCHAR."""
    return "DOUBLE" if int(numeric) == int(count) else "VARCHAR"


async def _rows(tools: Toolbox, sql: str) -> list[list[Any]]:
    result = await tools.call("run_readonly_sql", {"sql": sql, "limit": 1000})
    return list(result["rows"])


def _table(table: Mapping[str, Any], rows: int) -> dict[str, Any]:
    columns = {c["name"]: c["availability"] for c in table["columns"]}
    return {"rows": rows, "columns": columns}


def queries(profile: Mapping[str, Any], feedback: Mapping[str, Any], iteration: int) -> list[str]:
    """Retrieval queries: the profile's in round 0; the feedback's first afterwards, then the
    profile's again, so that documents not used yet keep coming when the targeted search finds
    nothing new (:func:`retrieve` puts used documents last).

    >>> feedback = {"worst_jobs": [{"job_name": "skewed_sales"}]}
    >>> queries({"tables": {}, "job_types": {}}, feedback, 1)[:2]
    ['runtime varies for skewed sales', 'runtime of long jobs and their largest inputs']
    """
    out = list(BASE_QUERIES)
    if profile.get("tables", {}).get("stages", {}).get("rows", 0):
        out += EVENT_LOG_QUERIES
    if profile.get("job_types", {}).get("python", 0):
        out += PYTHON_QUERIES
    if iteration == 0:
        return out
    jobs = [str(j.get("job_name") or j.get("job_id", "")) for j in feedback.get("worst_jobs", [])]
    targeted = [f"runtime varies for {name.replace('_', ' ')}" for name in jobs if name]
    return [*targeted, "runtime of long jobs and their largest inputs", *out]


def retrieve(kb: KnowledgeBase, texts: Sequence[str], seen: set[str]) -> list[KnowledgeSnippet]:
    """Documents for ``texts`` in rank order, each once, those already used last."""
    ordered: list[str] = []
    for text in texts:
        for hit in kb.search(text, DOCS_PER_QUERY):
            if hit.doc_id not in ordered:
                ordered.append(hit.doc_id)
    ordered.sort(key=lambda d: d in seen)
    return [_snippet(kb, doc_id) for doc_id in ordered]


def _snippet(kb: KnowledgeBase, doc_id: str) -> KnowledgeSnippet:
    doc = kb.by_id[doc_id]
    return KnowledgeSnippet(doc_id=doc.id, title=doc.title, text=doc.body[:1500])


LLM_DROPS_FED_BACK = 20
"""Dropped items of the previous round's answers the next request sees, with their reasons."""


def planner_feedback(state: LoopState) -> dict[str, Any]:
    """The evaluator's feedback plus what a backend needs to avoid repeats and build on kept
    features (their SQL, importance, value type and origin), and why the backend's own
    answers lost items last round (so a model can stop repeating a mistake)."""
    rounds = state.get("llm", [])
    feedback = {
        **state.get("feedback", {}),
        "kept": [kept_for_planner(k) for k in state.get("kept", [])],
        "proposed_ids": list(state.get("proposed_ids", [])),
    }
    if rounds and rounds[-1]["dropped"]:
        feedback["answer_items_dropped"] = rounds[-1]["dropped"][:LLM_DROPS_FED_BACK]
    return feedback


def llm_round(batch: ProposalBatch, backend: str, iteration: int) -> LLMRound:
    """The round's backend record, from its batch (state, ``run.log``, metrics, report)."""
    return LLMRound(
        iteration=iteration,
        backend=backend,
        output_format=batch.output_format,
        requests=batch.usage.requests,
        proposals=len(batch.proposals),
        malformed=batch.malformed,
        dropped=[d.model_dump() for d in batch.dropped],
        refused=batch.refused,
        warnings=list(batch.warnings),
        prompt=batch.prompt.model_dump() if batch.prompt else None,
        tokens_per_s=batch.tokens_per_s,
        prompt_tokens=batch.usage.prompt_tokens,
        completion_tokens=batch.usage.completion_tokens,
        seconds=round(batch.usage.seconds, 3),
    )


def kept_for_planner(feature: Feature) -> dict[str, Any]:
    """A kept feature flat, as the backend reads it (its keys are part of an LLM's prompt)."""
    return {
        "name": feature["name"],
        "feature_id": feature["gate"]["feature_id"],
        "category": feature["category"],
        "sql": feature["sql"],
        "rationale": feature["rationale"],
        "kb_refs": feature["kb_refs"],
        **feature["evaluation"],
        "value_type": feature["value_type"],
        "origin": feature["origin"],
    }


def candidates_of(batch: ProposalBatch, backend: LLMBackend) -> list[Feature]:
    """The batch's proposals as candidates (the offline planner's rationale names its origin)."""
    offline = backend.name == "offline"
    return [proposed_feature(p, p.name if offline else "llm") for p in batch.proposals]


def proposed_feature(proposal: Proposal | FeatureSpec, origin: str) -> Feature:
    """The one place a backend's proposal (or a catalog's spec proposed again) becomes the
    loop's feature.

    >>> p = Proposal(name="n", sql="SELECT run_id, 1 AS value FROM runs", category="history")
    >>> proposed_feature(p, "llm")["origin"], proposed_feature(p, "llm")["value_type"]
    ('llm', 'DOUBLE')
    """
    return Feature(
        name=proposal.name,
        sql=proposal.sql,
        category=proposal.category,
        value_type=proposal.value_type,
        rationale=proposal.rationale,
        kb_refs=list(proposal.kb_refs),
        origin=origin,
    )


CATALOG_ORIGIN = "catalog"


def catalog_candidates(specs: Sequence[FeatureSpec]) -> list[Feature]:
    """A saved catalog's features as candidates (origin ``catalog``): a warm-started run
    re-proposes every feature of the model it may replace, so each passes the gates and the
    evaluator again on today's warehouse instead of being trusted because it once did."""
    return [proposed_feature(s, CATALOG_ORIGIN) for s in specs]


def warm_feedback(feedback: dict[str, Any], seed: Sequence[FeatureSpec]) -> dict[str, Any]:
    """The feedback with the seed's feature ids counted as proposed, so the backend does not
    propose them a second time in the same round.

    >>> spec = FeatureSpec(name="a", sql="SELECT run_id, 1 AS value FROM runs",
    ...                    category="static-config")
    >>> warm_feedback({"proposed_ids": ["x"]}, [spec])["proposed_ids"] == ["x", spec.feature_id]
    True
    """
    if not seed:
        return feedback
    ids = [*feedback.get("proposed_ids", []), *(s.feature_id for s in seed)]
    return {**feedback, "proposed_ids": ids}


def unique_names(candidates: list[Feature], taken: set[str]) -> list[Feature]:
    """Rename candidates whose name is already used (a model may reuse names for new SQL).

    >>> c = Feature(name="a", sql="", category="history", value_type="DOUBLE", rationale="",
    ...             kb_refs=[], origin="a")
    >>> [x["name"] for x in unique_names([c, c], {"a"})]
    ['a_2', 'a_3']
    """
    out = []
    used = set(taken)
    for c in candidates:
        name, n = c["name"], 1
        while name in used:
            n += 1
            name = f"{c['name'][:76]}_{n}"
        used.add(name)
        out.append(Feature(**{**c, "name": name}))
    return out


def propose(
    backend: LLMBackend,
    profile: dict[str, Any],
    knowledge: list[KnowledgeSnippet],
    feedback: dict[str, Any],
    iteration: int,
    per_round: int,
) -> ProposalBatch:
    """Ask the backend for this round's proposals."""
    request = ProposalRequest(
        profile=profile,
        knowledge=knowledge,
        feedback=feedback,
        max_proposals=per_round,
        iteration=iteration,
    )
    return backend.propose(request)
