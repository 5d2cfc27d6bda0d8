"""The script a job task runs: its reference in the job settings, and its file in the export."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from autofe.ingest.workspace.api_values import dict_of


def script_ref(task: Mapping[str, Any]) -> str | None:
    """The script a task runs, as the job settings name it.

    >>> script_ref({"sql_task": {"file": {"path": "queries/q.sql"}, "warehouse_id": "w"}})
    'queries/q.sql'
    >>> script_ref({"spark_submit_task": {"parameters": ["--conf", "a=b", "dbfs:/x/job.py"]}})
    'dbfs:/x/job.py'
    """
    refs = (
        dict_of(task.get("notebook_task")).get("notebook_path"),
        dict_of(task.get("spark_python_task")).get("python_file"),
        dict_of(dict_of(task.get("sql_task")).get("file")).get("path"),
        *(
            p
            for p in dict_of(task.get("spark_submit_task")).get("parameters") or []
            if isinstance(p, str) and p.endswith((".py", ".sql"))
        ),
    )
    return next((r for r in refs if isinstance(r, str) and r), None)


def _ref_parts(ref: str) -> list[str]:
    """Path components of a script reference, without URI scheme and without ``..``.

    >>> _ref_parts("dbfs:/FileStore/etl/job.py")
    ['FileStore', 'etl', 'job.py']
    >>> _ref_parts("/Workspace/Shared/../x")
    ['Workspace', 'Shared', 'x']
    """
    path = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]+:/*", "", ref)
    return [p for p in PurePosixPath(path).parts if p not in ("/", ".", "..")]


def resolve_script(root: Path, ref: str) -> Path | None:
    """Find a referenced script inside the workspace export.

    The reference is a Databricks path (``/Workspace/Shared/etl/job.py``, ``dbfs:/…``, a repo
    path); the export keeps some suffix of it under the root or under ``scripts/``, and
    notebooks are exported with a ``.py`` / ``.sql`` suffix their workspace path lacks. The
    longest matching suffix wins; nothing outside the root is ever read.
    """
    parts, inside = _ref_parts(ref), root.resolve()
    for start in range(len(parts)):
        for base in (root, root / "scripts"):
            for suffix in ("", ".py", ".sql"):
                cand = base.joinpath(*parts[start:-1], parts[-1] + suffix)
                if cand.is_file() and cand.resolve().is_relative_to(inside):
                    return cand
    return None
