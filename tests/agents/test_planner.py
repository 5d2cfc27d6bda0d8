"""The offline planner: recipes, then variants of kept ones, then combinations; never twice."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcp.client import Client

from autofe.agents.analyze import build_profile, propose, queries, retrieve
from autofe.agents.llm import KnowledgeSnippet, Proposal, ProposalRequest
from autofe.agents.planner import (
    TRANSFER_DOC,
    OfflinePlanner,
    combinations,
    is_combination,
    job_scaling,
    numeric_profile_columns,
    parameter_variants,
)
from autofe.agents.settings import LoopSettings
from autofe.agents.toolbox import McpToolbox
from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext
from autofe.gates.admit import admit, coverage, run_ids
from autofe.knowledge_base.corpus import load_corpus, recipe_spec
from autofe.knowledge_base.embeddings import HashingEmbedder
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.sandbox.session import Sandbox
from autofe.tools.server import ServerConfig, build_server

DOCS = load_corpus()
WITH_PARAMS = next(d for d in DOCS if any(r.params for r in d.recipes))


def _request(
    doc_ids: list[str], feedback: dict[str, Any] | None = None, **kw: Any
) -> ProposalRequest:
    snippets = [KnowledgeSnippet(doc_id=d, title=d, text="") for d in doc_ids]
    return ProposalRequest(
        profile=kw.pop("profile", {}), knowledge=snippets, feedback=feedback or {}, **kw
    )


def test_round_zero_renders_every_recipe_of_the_retrieved_documents() -> None:
    docs = [d.id for d in DOCS[:5]]
    batch = OfflinePlanner(DOCS).propose(_request(docs, max_proposals=500))
    expected = [r.name for d in DOCS[:5] for r in d.recipes]
    assert [p.name for p in batch.proposals] == expected
    assert all(p.kb_refs for p in batch.proposals) and batch.usage.requests == 0


def test_nothing_is_proposed_twice() -> None:
    planner = OfflinePlanner(DOCS)
    first = planner.propose(_request([DOCS[0].id], max_proposals=500))
    ids = [p.to_spec("offline", "").feature_id for p in first.proposals]
    again = planner.propose(_request([DOCS[0].id], {"proposed_ids": ids}, max_proposals=500))
    assert first.proposals and not again.proposals


def test_recipes_reading_empty_tables_are_skipped() -> None:
    docs = [d.id for d in DOCS]
    all_ = OfflinePlanner(DOCS).propose(_request(docs, max_proposals=1000))
    some = OfflinePlanner(DOCS).propose(
        _request(docs, profile={"empty_tables": ["stages", "tasks"]}, max_proposals=1000)
    )
    assert 0 < len(some.proposals) < len(all_.proposals)
    assert not any("stages" in p.sql.lower().split() for p in some.proposals)


def test_kept_features_get_variants_and_combinations() -> None:
    recipe = next(r for r in WITH_PARAMS.recipes if r.params)
    planner = OfflinePlanner(DOCS)
    base = planner.propose(_request([WITH_PARAMS.id], max_proposals=500)).proposals
    kept = [
        {
            "name": p.name,
            "sql": p.sql,
            "importance": 1.0 / (i + 1),
            "kb_refs": p.kb_refs,
            "value_type": p.value_type,
            "origin": p.name,
        }
        for i, p in enumerate(base)
    ]
    batch = planner.propose(_request([], {"kept": kept}, max_proposals=500))
    names = [p.name for p in batch.proposals]
    expected = [f"{recipe.name}_{k}{v}" for o in parameter_variants(recipe) for k, v in o.items()]
    assert expected and set(expected) <= set(names)
    combos = [p for p in batch.proposals if p.category == "interaction"]
    numeric = [k for k in kept if k["value_type"] != "VARCHAR"][:5]
    assert len(combos) == len(numeric) * (len(numeric) - 1)  # product and ratio per pair


def test_products_and_ratios_are_not_combined_again() -> None:
    docs = [d.id for d in DOCS[:5]]
    base = OfflinePlanner(DOCS).propose(_request(docs, max_proposals=500)).proposals
    numeric = [p for p in base if p.value_type != "VARCHAR"][:3]
    assert len(numeric) == 3
    kept = [
        {"name": p.name, "sql": p.sql, "importance": 1.0, "kb_refs": [], "value_type": "DOUBLE"}
        for p in numeric
    ]
    first = list(combinations(kept))[:2]  # a x b, a per b
    assert all(is_combination(d.proposal.sql) for d in first)
    again = [
        *kept,
        *({"name": d.proposal.name, "sql": d.proposal.sql, "importance": 2.0} for d in first),
    ]
    # the kept products and ratios (most important here) are left out of the new pairs
    assert [d.proposal.sql for d in combinations(again)] == [
        d.proposal.sql for d in combinations(kept)
    ]
    assert not is_combination(numeric[0].sql)


def test_profile_columns_come_first_as_numbers_or_categories(example_warehouse: Path) -> None:
    profile = {
        "attribute_types": {"tag.lab_scale_factor": "DOUBLE", "tag.ResourceClass": "VARCHAR"},
        "parameter_types": {"days": "DOUBLE", "bad'key": "DOUBLE"},
    }
    batch = OfflinePlanner(DOCS).propose(_request([DOCS[0].id], profile=profile, max_proposals=500))
    names = [p.name for p in batch.proposals]
    assert names[:3] == ["attr_tag_resourceclass", "attr_tag_lab_scale_factor", "param_days"]
    assert names[3:] == [r.name for r in DOCS[0].recipes]  # the unsafe key is left out
    by_name = {p.name: p for p in batch.proposals[:3]}
    assert by_name["attr_tag_resourceclass"].value_type == "VARCHAR"
    with Sandbox.open(example_warehouse) as sandbox:
        days = dict(sandbox.query(by_name["param_days"].sql).rows)
        scale = dict(sandbox.query(by_name["attr_tag_lab_scale_factor"].sql).rows)
    assert len(days) == len(scale) and sum(v is not None for v in days.values()) > len(days) / 2
    assert {v for v in scale.values() if v is not None} <= {0.01, 0.1, 1.0, 3.0, 6.0, 10.0, 12.0}


def test_hardware_facts_and_scale_out_terms_read_the_run_cluster(example_warehouse: Path) -> None:
    """Sizes per task slot and per GiB: a local[N] run has N slots sharing the driver heap."""
    profile = {
        "attribute_types": {"tag.lab_scale_factor": "DOUBLE", "tag.config_id": "DOUBLE"},
        "cluster_columns": ["node_type", "vcpu_per_node", "spot_bid"],
        "empty_tables": ["table_stats"],
    }
    batch = OfflinePlanner(DOCS).propose(_request([], profile=profile, max_proposals=500))
    by_name = {p.name: p for p in batch.proposals}
    assert list(by_name) == [
        "attr_tag_config_id",
        "attr_tag_lab_scale_factor",
        "cluster_node_type",
        "cluster_vcpu_per_node",
        "attr_tag_lab_scale_factor_per_slot",
        "attr_tag_lab_scale_factor_per_gb",
    ]  # an unknown cluster column, an identifier and sizes from an empty table are left out
    assert by_name["cluster_node_type"].value_type == "VARCHAR"
    assert by_name["attr_tag_lab_scale_factor_per_gb"].category == "data-size"
    slots, memory_per_slot = _recipe_values(
        example_warehouse, ("cores_task_slots", "cores_memory_per_slot_gb")
    )
    with Sandbox.open(example_warehouse) as sandbox:
        values = {n: dict(sandbox.query(p.sql).rows) for n, p in by_name.items()}
    scale = values["attr_tag_lab_scale_factor"]
    per_slot = values["attr_tag_lab_scale_factor_per_slot"]
    checked = [r for r, v in scale.items() if v is not None and slots[r]]
    assert len(checked) > len(scale) / 2 and set(values["cluster_node_type"].values()) - {None}
    for run in checked:
        assert per_slot[run] == pytest.approx(scale[run] / slots[run])
        gb = values["attr_tag_lab_scale_factor_per_gb"][run]
        assert gb == pytest.approx(scale[run] / (slots[run] * memory_per_slot[run]))


def _recipe_values(db: Path, names: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    recipes = {r.name: (d, r) for d in DOCS for r in d.recipes}
    with Sandbox.open(db) as sandbox:
        return tuple(dict(sandbox.query(recipe_spec(*recipes[n]).sql).rows) for n in names)


def test_transferable_history_comes_in_round_zero_whatever_is_retrieved() -> None:
    """The what-if recipes follow the profile columns, then the job scaling fits, before the
    scale-out terms and any retrieved recipe; one reading an empty table is left out, and
    without runs none is."""
    transfer = next(d for d in DOCS if d.id == TRANSFER_DOC)
    profile = {
        "tables": {"runs": {"rows": 10, "columns": {}}},
        "runtime_s": {"runs": 10, "p10": 5.0, "p50": 30.0, "p90": 90.0},
        "attribute_types": {"tag.lab_scale_factor": "DOUBLE"},
        "cluster_columns": ["vcpu_per_node"],
        "empty_tables": ["stages", "table_stats"],
    }
    planner = OfflinePlanner(DOCS)
    batch = planner.propose(_request([DOCS[0].id], profile=profile, max_proposals=500))
    names = [p.name for p in batch.proposals]
    reading_empty = {"history_input_bytes_per_core_rescaled", "history_job_scaling_s"}
    expected = [r.name for r in transfer.recipes if r.name not in reading_empty]
    assert "ernest_job_fit_s" in expected and "history_core_seconds_rescaled_s" in expected
    assert names == [
        "attr_tag_lab_scale_factor",
        "cluster_vcpu_per_node",
        *expected,
        "history_scaling_s",
        "history_scaling_attr_tag_lab_scale_factor_s",
        "attr_tag_lab_scale_factor_per_slot",
        "attr_tag_lab_scale_factor_per_gb",
        *(r.name for r in DOCS[0].recipes),
    ]
    no_runs = {
        **profile,
        "tables": {"runs": {"rows": 0, "columns": {}}},
        "runtime_s": {"runs": 0, "p10": None, "p50": None, "p90": None},
    }
    batch = planner.propose(_request([], profile=no_runs, max_proposals=500))
    assert TRANSFER_DOC not in {ref for p in batch.proposals for ref in p.kb_refs}
    assert len(batch.proposals) == 4  # the profile columns and scale-out terms alone


# ---------------------------------------------------------------- job scaling on the example


@dataclass(frozen=True)
class RoundZero:
    """The example workspace's profile and the offline planner's first round on it."""

    profile: dict[str, Any]
    proposals: list[Proposal]

    def scaling(self) -> list[Proposal]:
        """The job scaling fits: the recipe and every fit of the template."""
        return [
            p
            for p in self.proposals
            if p.name == "history_job_scaling_s" or p.name.startswith("history_scaling_")
        ]


@pytest.fixture(scope="module")
def round_zero(example_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> RoundZero:
    """Round 0 as ``autofe run`` asks it: the profile from the tools server, the retrieved
    documents (hashing embedder), the default candidates per round."""

    async def profile() -> dict[str, Any]:
        async with Client(build_server(ServerConfig(db=example_warehouse))) as client:
            return await build_profile(McpToolbox(client))

    built = asyncio.run(profile())
    kb = KnowledgeBase(index_dir=tmp_path_factory.mktemp("kb"), embedder=HashingEmbedder())
    knowledge = retrieve(kb, queries(built, {}, 0), set())
    batch = propose(OfflinePlanner(DOCS), built, knowledge, {}, 0, LoopSettings().per_round)
    return RoundZero(built, batch.proposals)


def _recipe(name: str) -> FeatureSpec:
    return recipe_spec(*next((d, r) for d in DOCS for r in d.recipes if r.name == name))


def _slots() -> FeatureSpec:
    return _recipe("cores_task_slots")


def test_job_scaling_fits_and_transfer_recipes_reach_round_zero(round_zero: RoundZero) -> None:
    """One fit per size the scale-out terms use and one on the slots alone, with every
    transferable-history recipe, all within the example's first round."""
    names = [p.name for p in round_zero.proposals]
    assert len(names) == LoopSettings().per_round
    transfer = next(d for d in DOCS if d.id == TRANSFER_DOC)
    assert {r.name for r in transfer.recipes} <= set(names)
    sizes = [s.name for s in numeric_profile_columns(round_zero.profile)]
    assert "param_days" in sizes and "attr_tag_lab_scale_factor" in sizes
    scaling = [p.name for p in round_zero.scaling()]
    assert scaling == [
        "history_job_scaling_s",  # the recipe: the fit on the table bytes
        "history_scaling_s",
        *(f"history_scaling_{s}_s" for s in sizes),
        "history_scaling_tablestats_pruned_bytes_estimate_s",
    ]
    assert all(p.category == "history" for p in round_zero.scaling())
    # the template on the table bytes is the recipe itself, so it is proposed once
    bytes_fit = job_scaling(_recipe("tablestats_input_bytes"), _slots())
    recipe = next(p for p in round_zero.proposals if p.name == "history_job_scaling_s")
    assert recipe.to_spec("offline", "").feature_id == bytes_fit.feature_id
    # ahead of the scale-out terms, which no longer all fit the round
    first_ratio = next(i for i, n in enumerate(names) if n.endswith(("_per_slot", "_per_gb")))
    assert names.index(scaling[-1]) < first_ratio


def test_every_job_scaling_fit_passes_the_gates_on_the_example(
    round_zero: RoundZero, example_warehouse: Path
) -> None:
    ctx = GateContext.load(example_warehouse)
    rejected: dict[str, object] = {}
    covered: dict[str, float] = {}
    with Sandbox.open(example_warehouse) as sandbox:
        runs = run_ids(sandbox)
        for proposal in round_zero.scaling():
            admission = admit(proposal.to_spec("offline", ""), ctx, sandbox)
            if admission.values is None:
                rejected[proposal.name] = admission.verdict.as_dict()["reasons"]
            else:
                covered[proposal.name] = coverage(admission.values, runs)
    assert not rejected
    # NULL only for a job's runs before its first finished one (25 jobs, 490 runs)
    assert set(covered.values()) == {413 / 490}


def test_job_scaling_on_a_run_parameter_is_the_ridge_fit(example_warehouse: Path) -> None:
    """The fit on the example's ``days`` parameter against numpy, run by run (the median of the
    job's last five runs on the run's configuration where it has earlier runs there)."""
    (days,) = numeric_profile_columns({"parameter_types": {"days": "DOUBLE"}})
    fit = job_scaling(days, _slots())
    with Sandbox.open(example_warehouse) as sandbox:
        values = dict(sandbox.query(fit.sql).rows)
        size = dict(sandbox.query(days.sql).rows)
        slots = dict(sandbox.query(_slots().sql).rows)
        runs = sandbox.query(
            "SELECT run_id, job_id, status, submit_time, end_time, duration_s FROM runs"
        ).rows
        config = dict(sandbox.query("SELECT run_id, cluster_config_id FROM runs").rows)
    checked = fitted = 0
    for run_id, job, _, submit, _, _ in runs:
        earlier = [r for r in runs if r[1] == job and _finished_before(r, submit)]
        if not earlier:
            assert values[run_id] is None
            continue
        there = sorted((r for r in earlier if config[r[0]] == config[run_id]), key=_latest)
        same = [r[5] for r in there[:5]]
        x = [[size[r[0]] for r in earlier], [slots[r[0]] for r in earlier]]
        expected = (
            float(np.median(same))
            if same
            else _ridge(np.log([r[5] for r in earlier]), x, [size[run_id], slots[run_id]])
        )
        assert values[run_id] == pytest.approx(expected, rel=1e-9)
        checked += 1
        fitted += not same
    assert checked == 413 and fitted > 200
    assert len({round(v, 6) for v in values.values() if v}) > 100


def _latest(run: tuple[Any, ...]) -> tuple[Any, ...]:
    """Latest first: end time, then run id, both descending (the recipe's recency order)."""
    return (-run[4].timestamp(), tuple(-ord(c) for c in run[0]))


def _finished_before(run: tuple[Any, ...], submit: Any) -> bool:
    _, _, status, _, end, seconds = run
    return status == "SUCCEEDED" and (seconds or 0) > 0 and end is not None and end < submit


def _ridge(y: np.ndarray, columns: list[list[Any]], at: list[Any]) -> float:
    """exp of the ridge fit (penalty 1 on the slopes) of y on the centred logs of ``columns``,
    at ``at``; an unknown or non-positive x is the mean of the known ones."""
    centred, target = [], []
    for column, value in zip(columns, at, strict=True):
        x = np.array([np.log(v) if v and v > 0 else np.nan for v in column])
        mean = np.nanmean(x) if np.isfinite(x).any() else 0.0
        centred.append(np.nan_to_num(x - mean))
        target.append(np.log(value) - mean if value and value > 0 else 0.0)
    a = np.column_stack(centred)
    slopes = np.linalg.solve(a.T @ a + np.eye(len(columns)), a.T @ (y - y.mean()))
    return float(np.exp(y.mean() + slopes @ np.array(target)))
