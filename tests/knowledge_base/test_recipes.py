"""Every recipe in the corpus passes the gates on the shipped example workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from autofe.gates import GateContext, run_gates
from autofe.knowledge_base.corpus import Document, Recipe, load_corpus, recipe_spec

RECIPES = [(doc, recipe) for doc in load_corpus() for recipe in doc.recipes]


@pytest.fixture(scope="module")
def context(example_warehouse: Path) -> GateContext:
    return GateContext.load(example_warehouse)


def test_the_corpus_has_a_recipe_for_every_category() -> None:
    categories = {recipe.category for _, recipe in RECIPES}
    assert {"static-config", "data-size", "script-plan", "history", "log-profile"} <= categories
    assert {"time-series", "calendar", "interaction"} & categories


@pytest.mark.parametrize(("doc", "recipe"), RECIPES, ids=[f"{d.id}:{r.name}" for d, r in RECIPES])
def test_recipe_passes_the_gates(context: GateContext, doc: Document, recipe: Recipe) -> None:
    verdict = run_gates(recipe_spec(doc, recipe), context)
    assert verdict.accepted, verdict.as_dict()["reasons"]
