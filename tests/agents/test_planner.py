"""The offline planner: recipes, then variants of kept ones, then combinations; never twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autofe.agents.llm import KnowledgeSnippet, ProposalRequest
from autofe.agents.planner import (
    TRANSFER_DOC,
    OfflinePlanner,
    combinations,
    is_combination,
    parameter_variants,
)
from autofe.knowledge_base.corpus import load_corpus, recipe_spec
from autofe.sandbox.session import Sandbox

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
    """The what-if recipes follow the profile columns, before the scale-out terms and any
    retrieved recipe; one reading an empty table is left out, and without runs none is."""
    transfer = next(d for d in DOCS if d.id == TRANSFER_DOC)
    profile = {
        "tables": {"runs": {"rows": 10, "columns": {}}},
        "attribute_types": {"tag.lab_scale_factor": "DOUBLE"},
        "cluster_columns": ["vcpu_per_node"],
        "empty_tables": ["stages", "table_stats"],
    }
    planner = OfflinePlanner(DOCS)
    batch = planner.propose(_request([DOCS[0].id], profile=profile, max_proposals=500))
    names = [p.name for p in batch.proposals]
    expected = [
        r.name for r in transfer.recipes if r.name != "history_input_bytes_per_core_rescaled"
    ]
    assert "ernest_job_fit_s" in expected and "history_core_seconds_rescaled_s" in expected
    assert names == [
        "attr_tag_lab_scale_factor",
        "cluster_vcpu_per_node",
        *expected,
        "attr_tag_lab_scale_factor_per_slot",
        "attr_tag_lab_scale_factor_per_gb",
        *(r.name for r in DOCS[0].recipes),
    ]
    no_runs = {**profile, "tables": {"runs": {"rows": 0, "columns": {}}}}
    batch = planner.propose(_request([], profile=no_runs, max_proposals=500))
    assert TRANSFER_DOC not in {ref for p in batch.proposals for ref in p.kb_refs}
    assert len(batch.proposals) == 4  # the profile columns and scale-out terms alone
