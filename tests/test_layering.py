"""Imports flow one way: config/errors/schema → warehouse/... → tools/... → pipelines/... → cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "autofe"

LAYER = {
    "errors": 0,
    "schema": 0,
    "config": 0,
    "featurespec": 0,
    "feature_catalog": 0,
    "console": 0,
    "workspace_archive": 0,
    "hashing": 0,
    "special_file": 0,
    "warehouse": 1,
    "sandbox": 1,
    "knowledge_base": 1,
    "modeling": 1,
    "tools": 2,
    "agents": 2,
    "scheduler": 2,
    "pipelines": 3,
    "evals": 3,
    "lab": 3,
    "cli": 4,
}
HEAVY = {"pyspark": ("pipelines/spark.py", "lab/"), "fastapi": ("pipelines/serve.py",)}


def _area(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if _area(p) in LAYER)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_flow_one_way(path: Path) -> None:
    own = LAYER[_area(path)]
    for name in _imports(path):
        parts = name.split(".")
        if parts[0] != "autofe" or len(parts) < 2:
            continue
        assert LAYER[parts[1]] <= own, f"{path.name} imports {name}: that layer is above it"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_heavy_dependencies_stay_behind_their_boundary(path: Path) -> None:
    rel = str(path.relative_to(PACKAGE))
    for name in _imports(path):
        allowed = HEAVY.get(name.split(".")[0])
        if allowed is not None:
            assert rel.startswith(allowed), f"{rel} imports {name}"
