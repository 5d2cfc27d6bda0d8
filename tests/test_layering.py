"""Imports flow one way, strictly: a module imports only from layers below its own.

config/errors/schema → warehouse/sandbox/gates/knowledge_base/modeling → ingest/tools/agents/
scheduler → pipelines/evals/lab → cli. Within one area (a subpackage, or one top-level module)
anything goes. Between two areas of the same layer an import is a design decision, so it is
allowed only when :data:`SAME_LAYER` names it and says why; every other same-layer import, and
every upward one, fails. docs/architecture.md draws the same picture.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "autofe"

LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "errors",
        "hashing",
        "json_file",
        "special_file",
        "schema",
        "workspace_archive",
        "config",
        "console",
        "featurespec",
        "feature_catalog",
        "run_dir",
        "svg",
    ),
    ("warehouse", "sandbox", "knowledge_base", "modeling", "gates"),
    ("ingest", "tools", "agents", "scheduler"),
    ("pipelines", "evals", "lab"),
    ("cli",),
    ("__main__",),
)
LAYER = {area: rank for rank, areas in enumerate(LAYERS) for area in areas}
ORDER = {area: i for i, area in enumerate(a for areas in LAYERS for a in areas)}
"""Within a layer, an allowed import goes from an area listed later to one listed earlier, so
the allowed imports can never form a cycle."""

SAME_LAYER: dict[tuple[str, str], str] = {
    # layer 0: the shared vocabulary every layer above uses
    ("console", "errors"): "the console prints AutofeErrors as one line",
    ("feature_catalog", "errors"): "a bad catalog file is a ConfigError naming it",
    ("feature_catalog", "featurespec"): "the catalog is a file of FeatureSpecs",
    ("feature_catalog", "json_file"): "the catalog file is replaced atomically",
    ("workspace_archive", "errors"): "an unsafe archive member is a ConfigError naming it",
    ("workspace_archive", "hashing"): "archives are identified by their content hash",
    ("config", "workspace_archive"): "a workspace argument may be an archive to unpack",
    # layer 1: the domain below every agent and application
    ("sandbox", "warehouse"): "the sandbox opens the warehouse read-only and knows its tables",
    ("modeling", "sandbox"): "feature values are computed through the read-only sandbox",
    ("modeling", "warehouse"): "the registry and pending runs read warehouse tables",
    ("gates", "sandbox"): "the gates run a candidate's SQL in the sandbox",
    ("gates", "warehouse"): "the gates read the warehouse catalog and build leakage worlds",
    ("gates", "modeling"): "admitting a feature computes its values; coverage is counted once",
    # layer 2
    ("tools", "ingest"): "summarize_event_log is the event-log parser behind an MCP tool",
}


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


def crossing(own: str, imported: str) -> str | None:
    """Why ``own`` may not import ``imported``, or None when it may.

    >>> crossing("tools", "agents")
    'tools (layer 2) imports agents (layer 2): same layer, not in SAME_LAYER'
    >>> crossing("warehouse", "modeling")
    'warehouse (layer 1) imports modeling (layer 1): same layer, not in SAME_LAYER'
    >>> crossing("sandbox", "warehouse") is None, crossing("agents", "modeling") is None
    (True, True)
    >>> crossing("modeling", "pipelines")
    'modeling (layer 1) imports pipelines (layer 3): that layer is above it'
    """
    if own == imported:
        return None
    mine, theirs = LAYER[own], LAYER[imported]
    where = f"{own} (layer {mine}) imports {imported} (layer {theirs})"
    if theirs > mine:
        return f"{where}: that layer is above it"
    if theirs == mine and (own, imported) not in SAME_LAYER:
        return f"{where}: same layer, not in SAME_LAYER"
    return None


MODULES = sorted(PACKAGE.rglob("*.py"))
HEAVY = {"pyspark": ("pipelines/spark.py", "lab/"), "fastapi": ("pipelines/serve",)}


def _autofe_areas(path: Path) -> set[str]:
    parts = (name.split(".") for name in _imports(path))
    return {p[1] for p in parts if p[0] == "autofe" and len(p) > 1}


def test_every_area_has_a_layer() -> None:
    areas = {_area(p) for p in MODULES} - {"__init__"}
    assert areas <= LAYER.keys(), f"areas without a layer: {sorted(areas - LAYER.keys())}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_flow_one_way(path: Path) -> None:
    own = _area(path)
    if own == "__init__":
        return
    problems = [why for area in _autofe_areas(path) if (why := crossing(own, area))]
    assert not problems, f"{path.relative_to(PACKAGE)}: {'; '.join(problems)}"


def test_every_allowed_crossing_is_same_layer_and_used() -> None:
    used = {(_area(p), area) for p in MODULES for area in _autofe_areas(p)}
    for (own, imported), why in SAME_LAYER.items():
        assert LAYER[own] == LAYER[imported], f"{own} → {imported} is not a same-layer crossing"
        assert (own, imported) in used, f"{own} → {imported} is allowed but no module does it"
        assert ORDER[imported] < ORDER[own], f"{own} → {imported}: against the order of LAYERS"
        assert why.strip(), f"{own} → {imported} has no reason"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_heavy_dependencies_stay_behind_their_boundary(path: Path) -> None:
    rel = str(path.relative_to(PACKAGE))
    for name in _imports(path):
        allowed = HEAVY.get(name.split(".")[0])
        if allowed is not None:
            assert rel.startswith(allowed), f"{rel} imports {name}"
