"""The knowledge-base corpus: Markdown documents with TOML front matter, one runtime driver each.

A document says what slows Spark / ML jobs down, which signals reveal it (``signals``), and how
to turn it into features (``recipes``: parameterised SQL over the warehouse). TOML rather than
YAML front matter because ``tomllib`` ships with Python and has no implicit typing surprises.
Documents are package data (``autofe/knowledge_base/corpus/*.md``); a broken one is an error
naming its file, never silently skipped, because a missing document changes every answer.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, get_args

from autofe.errors import KnowledgeBaseError
from autofe.featurespec import Category, FeatureSpec, Provenance, ValueType

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
_FRONT = re.compile(r"\A\+\+\+\s*\n(.*?)\n\+\+\+\s*\n(.*)\Z", re.DOTALL)
_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")
_DOLLAR = re.compile(r"\$\{([a-z_][a-z0-9_]*)\}")
_REQUIRED = ("id", "title", "tags", "signals", "recipes")


@dataclass(frozen=True)
class Recipe:
    """A feature template: SQL with ``{{name}}`` placeholders and their defaults.

    Double braces, because DuckDB JSON paths (``'$.spark_conf'``) are full of dollars;
    ``${name}`` is accepted too for a *declared* parameter (other ``${...}`` text is left alone:
    lab scripts use it for their own parameters, and recipes may search for it).
    """

    name: str
    category: Category
    value_type: ValueType
    sql: str
    why: str
    leakage: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def render(self, overrides: Mapping[str, Any] | None = None) -> str:
        """The SQL with every placeholder filled (defaults, then ``overrides``)."""
        values = {**self.params, **(overrides or {})}
        missing = sorted({m for m in _PLACEHOLDER.findall(self.sql) if m not in values})
        if missing:
            raise KnowledgeBaseError(f"recipe {self.name}: placeholder {missing[0]!r} has no value")
        sql = _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.sql)
        return _DOLLAR.sub(lambda m: str(values.get(m.group(1), m.group(0))), sql)


@dataclass(frozen=True)
class Document:
    """One corpus document; ``path`` is where it was read from (for error messages)."""

    id: str
    title: str
    tags: tuple[str, ...]
    signals: tuple[str, ...]
    recipes: tuple[Recipe, ...]
    body: str
    path: Path

    @property
    def text(self) -> str:
        """What retrieval indexes: title, tags, signals and body."""
        return "\n".join((self.title, " ".join(self.tags), *self.signals, self.body))


def load_corpus(directory: Path = CORPUS_DIR) -> tuple[Document, ...]:
    """Every document under ``directory``, sorted by id; ids and recipe names must be unique."""
    paths = sorted(directory.glob("*.md"))
    if not paths:
        raise KnowledgeBaseError(f"{directory}: no corpus documents (*.md) found")
    docs = tuple(parse_document(p) for p in paths)
    _check_unique(docs)
    return tuple(sorted(docs, key=lambda d: d.id))


def corpus_hash(docs: tuple[Document, ...]) -> str:
    """SHA-256 over ids and file contents: the index is rebuilt exactly when this changes."""
    digest = hashlib.sha256()
    for doc in docs:
        digest.update(doc.id.encode() + b"\0" + doc.path.read_bytes() + b"\0")
    return digest.hexdigest()


def parse_document(path: Path) -> Document:
    """Read one document; any defect is a :class:`KnowledgeBaseError` naming ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KnowledgeBaseError(f"{path}: unreadable ({exc})") from exc
    match = _FRONT.match(text)
    if match is None:
        raise KnowledgeBaseError(f"{path}: no front matter (a '+++' TOML block opens the file)")
    try:
        meta = tomllib.loads(match.group(1))
    except tomllib.TOMLDecodeError as exc:
        raise KnowledgeBaseError(f"{path}: bad front matter: {exc}") from exc
    return _document(path, meta, match.group(2).strip())


def _document(path: Path, meta: dict[str, Any], body: str) -> Document:
    missing = [key for key in _REQUIRED if key not in meta]
    if missing:
        raise KnowledgeBaseError(f"{path}: front matter lacks {', '.join(missing)}")
    doc_id = str(meta["id"])
    if not _ID.match(doc_id) or doc_id != path.stem:
        raise KnowledgeBaseError(
            f"{path}: id {doc_id!r} must be kebab-case and equal the file name"
        )
    if not body:
        raise KnowledgeBaseError(f"{path}: the document has no body")
    recipes = meta["recipes"]
    if not isinstance(recipes, list) or not recipes:
        raise KnowledgeBaseError(f"{path}: needs at least one [[recipes]] table")
    return Document(
        id=doc_id,
        title=_text(path, meta, "title"),
        tags=_strings(path, meta, "tags"),
        signals=_strings(path, meta, "signals"),
        recipes=tuple(_recipe(path, r) for r in recipes),
        body=body,
        path=path,
    )


def _recipe(path: Path, raw: Any) -> Recipe:
    if not isinstance(raw, dict):
        raise KnowledgeBaseError(f"{path}: each [[recipes]] entry must be a table")
    name = _text(path, raw, "name")
    category, value_type = raw.get("category"), raw.get("value_type", "DOUBLE")
    if category not in get_args(Category):
        raise KnowledgeBaseError(f"{path}: recipe {name}: unknown category {category!r}")
    if value_type not in get_args(ValueType):
        raise KnowledgeBaseError(f"{path}: recipe {name}: unknown value_type {value_type!r}")
    params = raw.get("params", {})
    if not isinstance(params, dict):
        raise KnowledgeBaseError(f"{path}: recipe {name}: params must be a table")
    recipe = Recipe(
        name,
        cast(Category, category),
        cast(ValueType, value_type),
        _text(path, raw, "sql"),
        _text(path, raw, "why"),
        _text(path, raw, "leakage"),
        params,
    )
    _check_placeholders(path, recipe)
    return recipe


def _check_placeholders(path: Path, recipe: Recipe) -> None:
    """Every ``{{name}}`` needs a default, so each recipe renders as it stands."""
    try:
        recipe.render()
    except KnowledgeBaseError as exc:
        raise KnowledgeBaseError(f"{path}: {exc}") from exc


def _text(path: Path, meta: Mapping[str, Any], key: str) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value.strip():
        raise KnowledgeBaseError(f"{path}: {key!r} must be a non-empty string")
    return value.strip()


def _strings(path: Path, meta: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = meta.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise KnowledgeBaseError(f"{path}: {key!r} must be a non-empty list of strings")
    return tuple(value)


def _check_unique(docs: tuple[Document, ...]) -> None:
    seen: dict[str, Path] = {}
    for doc in docs:
        for recipe in doc.recipes:
            if recipe.name in seen:
                raise KnowledgeBaseError(
                    f"{doc.path}: recipe name {recipe.name!r} also used in {seen[recipe.name]}"
                )
            seen[recipe.name] = doc.path


def recipe_spec(
    doc: Document, recipe: Recipe, overrides: Mapping[str, Any] | None = None
) -> FeatureSpec:
    """The feature a recipe produces, citing its document (``kb_refs``)."""
    return FeatureSpec(
        name=recipe.name,
        sql=recipe.render(overrides),
        category=recipe.category,
        value_type=recipe.value_type,
        description=doc.title,
        rationale=recipe.why,
        kb_refs=(doc.id,),
        provenance=Provenance(agent="knowledge-base", backend="corpus"),
    )
