"""Feature specifications: what a generated (or hand-written) feature is, and its identity.

A feature is SQL in DuckDB's dialect returning ``(run_id, value)``: one row per run, the
value computable from what was known before that run was submitted. The spec carries why it
should help (rationale, knowledge-base references) and where it came from (provenance).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Category = Literal[
    "static-config",
    "data-size",
    "script-plan",
    "history",
    "log-profile",
    "time-series",
    "calendar",
    "interaction",
]
CATEGORIES: tuple[str, ...] = Category.__args__  # type: ignore[attr-defined]

ValueType = Literal["DOUBLE", "BIGINT", "INTEGER", "BOOLEAN", "VARCHAR"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,79}$")


class _Pickled(BaseModel):
    """Pickles to the same bytes in every process.

    Pydantic pickles the set of fields a model was given, and a set of strings iterates in an
    order that follows the process's hash seed: two runs of one command wrote model files with
    equal contents and different bytes (and manifest digests). The set goes out sorted."""

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        return {**state, "__pydantic_fields_set__": sorted(state["__pydantic_fields_set__"])}

    def __setstate__(self, state: dict[Any, Any]) -> None:
        given = set(state["__pydantic_fields_set__"])
        super().__setstate__({**state, "__pydantic_fields_set__": given})


class Provenance(_Pickled):
    """Who proposed the feature: an agent and backend, or a person."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str = "human"
    backend: str = "manual"
    prompt_hash: str | None = None


class FeatureSpec(_Pickled):
    """One feature: SQL returning ``(run_id, value)`` plus why and where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="snake_case identifier, unique in a catalog")
    sql: str = Field(min_length=1, description="DuckDB SELECT returning (run_id, value)")
    category: Category
    value_type: ValueType = "DOUBLE"
    description: str = ""
    rationale: str = ""
    kb_refs: tuple[str, ...] = ()
    provenance: Provenance = Provenance()

    @field_validator("name")
    @classmethod
    def _snake_case(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a snake_case name (a-z, 0-9, _; ≤ 80 chars)")
        return value

    @property
    def feature_id(self) -> str:
        """Content hash of what the feature computes (SQL with whitespace folded, and type).

        Two proposals of the same SQL are the same feature whatever they are called.

        >>> a = FeatureSpec(name="a", sql="SELECT run_id, 1 AS value FROM runs",
        ...                 category="static-config")
        >>> b = FeatureSpec(name="b", sql="SELECT run_id,  1 AS value\\nFROM runs",
        ...                 category="static-config")
        >>> a.feature_id == b.feature_id
        True
        """
        folded = " ".join(self.sql.split())
        return hashlib.sha256(f"{self.value_type}\n{folded}".encode()).hexdigest()[:16]
