"""Merge the jobs, runs and clusters a workspace defines across the files that mention them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autofe.errors import IngestError
from autofe.ingest.workspace.api_values import Json, dict_of, dicts_of, id_text, records
from autofe.ingest.workspace.inputs import InputFile
from autofe.ingest.workspace.issues import new_issue
from autofe.ingest.workspace.scripts import resolve_script
from autofe.schema import IngestIssue


@dataclass
class Record:
    """One job, run or cluster merged over the files that mention it; ``owner`` writes it."""

    data: Json
    owner: Path


@dataclass
class Catalog:
    """Everything the workspace defines, merged across files."""

    root: Path
    node_specs: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    clusters: dict[str, Record] = field(default_factory=dict)
    jobs: dict[str, Record] = field(default_factory=dict)
    runs: dict[str, Record] = field(default_factory=dict)
    issues: dict[Path, list[IngestIssue]] = field(default_factory=dict)
    script_texts: dict[str, str | None] = field(default_factory=dict)
    owners: dict[str, dict[Path, list[Record]]] = field(default_factory=dict)

    def owned(self, kind: str, path: Path) -> list[Record]:
        """The ``kind`` records whose winning version came from ``path``, in catalog order.

        Indexed once per kind after the merge: a scan per file made ingest quadratic in the
        number of workspace files.
        """
        if kind not in self.owners:
            index: dict[Path, list[Record]] = {}
            for record in getattr(self, kind).values():
                index.setdefault(record.owner, []).append(record)
            self.owners[kind] = index
        return self.owners[kind].get(path, [])

    def note(self, path: Path, reason: str) -> None:
        self.issues.setdefault(path, []).append(new_issue(path, reason))

    def script(self, ref: str) -> str | None:
        """Text of a referenced script, read once however many runs name it."""
        if ref not in self.script_texts:
            path = resolve_script(self.root, ref)
            text = path.read_text(encoding="utf-8", errors="replace") if path else None
            self.script_texts[ref] = text
        return self.script_texts[ref]


ID_KEYS = {"jobs": "job_id", "runs": "run_id", "clusters": "cluster_id"}


def build_catalog(root: Path, inputs: Sequence[InputFile]) -> Catalog:
    cat = Catalog(root)
    # List responses first, then get responses, so a runs/get merged over its list entry wins.
    ordered = sorted(inputs, key=lambda i: isinstance(i.content, dict) and _is_get(i))
    for item in ordered:
        if item.problem is None and item.kind in ID_KEYS:
            _merge_file(cat, item)
        elif item.problem is None and item.kind == "node_types":
            _node_specs(cat, item)
    return cat


def _is_get(item: InputFile) -> bool:
    return ID_KEYS.get(item.kind, "") in item.content


def _merge_file(cat: Catalog, item: InputFile) -> None:
    """Merge a file's objects into the catalog; objects without their id become issues."""
    id_key = ID_KEYS[item.kind]
    table: dict[str, Record] = getattr(cat, item.kind)
    try:
        objects = records(item.content, item.kind, item.path)
    except IngestError as exc:
        cat.note(item.path, exc.reason)
        return
    for n, obj in enumerate(objects):
        key = id_text(obj.get(id_key)) if isinstance(obj, dict) else None
        if key is None:
            cat.note(item.path, f"{item.kind}[{n}] has no {id_key}; skipped")
            continue
        old = table.get(key)
        table[key] = Record({**(old.data if old else {}), **obj}, item.path)


def _node_specs(cat: Catalog, item: InputFile) -> None:
    """vCPUs and memory per node type from ``clusters/list-node-types`` output."""
    for node in dicts_of(dict_of(item.content).get("node_types")):
        cores, memory_mb = node.get("num_cores"), node.get("memory_mb")
        cat.node_specs[str(node.get("node_type_id"))] = (
            float(cores) if isinstance(cores, int | float) else None,
            memory_mb / 1024 if isinstance(memory_mb, int | float) else None,
        )
