"""The run directory's names agree with what the layers above write into it."""

from __future__ import annotations

from pathlib import Path

from autofe.modeling.artifact import MODEL_FILE
from autofe.run_dir import RunDir


def test_the_model_is_where_save_model_writes_it(tmp_path: Path) -> None:
    assert RunDir(tmp_path).model == tmp_path / MODEL_FILE


def test_every_name_is_distinct_and_inside_the_root(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    names = [n for n in dir(RunDir) if isinstance(getattr(RunDir, n), property)]
    paths = [getattr(run, n) for n in names]
    assert len(set(paths)) == len(paths) == 13
    assert all(p.parent == tmp_path for p in paths)
