"""The corpus loader: the shipped documents, and clear errors for broken ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from autofe.errors import KnowledgeBaseError
from autofe.knowledge_base.corpus import corpus_hash, load_corpus, parse_document, recipe_spec

GOOD = """+++
id = "{id}"
title = "Skewed joins"
tags = ["skew", "joins"]
signals = ["stages: long max task duration"]

[[recipes]]
name = "{recipe}"
category = "history"
params = {{ k = 3 }}
why = "earlier runs show it"
leakage = "earlier runs only"
sql = '''
SELECT t.run_id, {{{{ k }}}}::DOUBLE AS value FROM runs t
'''
+++

## What happens
A hot key sends most rows to one task.
"""


def write(folder: Path, doc_id: str, recipe: str = "skew_k", text: str | None = None) -> Path:
    path = folder / f"{doc_id}.md"
    path.write_text(text if text is not None else GOOD.format(id=doc_id, recipe=recipe))
    return path


def test_shipped_corpus_covers_the_required_topics() -> None:
    docs = load_corpus()
    assert len(docs) >= 80
    ids = {d.id for d in docs}
    for required in (
        "partition-pruning", "small-files", "data-skew", "skew-joins", "shuffle-partitions",
        "aqe-coalescing", "aqe-skew-join", "broadcast-threshold", "spill-memory-disk",
        "gc-pressure", "python-udf-overhead", "pandas-udf", "window-functions",
        "write-commit-protocols", "delta-zorder-compaction", "photon", "autoscaling",
        "cold-start-cluster-startup", "spot-preemption", "stage-failures", "data-growth",
        "calendar-month-end", "queueing-and-concurrency", "driver-collect-bottleneck",
        "streaming-micro-batches", "ml-epochs", "gpu-type", "distributed-data-parallel",
    ):  # fmt: skip
        assert required in ids, required
    assert all(d.recipes and d.signals and len(d.body.split()) >= 100 for d in docs)


def test_recipes_render_with_their_defaults(tmp_path: Path) -> None:
    doc = parse_document(write(tmp_path, "skew-joins"))
    spec = recipe_spec(doc, doc.recipes[0])
    assert "3::DOUBLE" in spec.sql and spec.kb_refs == ("skew-joins",)
    assert "7::DOUBLE" in recipe_spec(doc, doc.recipes[0], {"k": 7}).sql


def test_corpus_hash_changes_with_any_document(tmp_path: Path) -> None:
    write(tmp_path, "skew-joins")
    before = corpus_hash(load_corpus(tmp_path))
    write(tmp_path, "data-skew", recipe="other")
    assert corpus_hash(load_corpus(tmp_path)) != before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter here", "no front matter"),
        ("+++\nid = \n+++\nbody\n", "bad front matter"),
        ('+++\nid = "broken"\n+++\nbody\n', "lacks title"),
        (GOOD.format(id="other-name", recipe="r"), "must be kebab-case and equal the file name"),
        (GOOD.format(id="broken", recipe="r").replace('"history"', '"astrology"'), "category"),
        (GOOD.format(id="broken", recipe="r").replace("params = { k = 3 }", ""), "placeholder"),
    ],
)
def test_a_broken_document_is_an_error_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, "broken", text=text)
    with pytest.raises(KnowledgeBaseError, match=message) as info:
        load_corpus(tmp_path)
    assert str(path) in str(info.value)


def test_duplicate_recipe_names_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "skew-joins", recipe="same")
    write(tmp_path, "data-skew", recipe="same")
    with pytest.raises(KnowledgeBaseError, match="also used in"):
        load_corpus(tmp_path)


def test_an_empty_corpus_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeBaseError, match="no corpus documents"):
        load_corpus(tmp_path)
