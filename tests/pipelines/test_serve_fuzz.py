"""A bounded fuzz pass over the API's own OpenAPI document (schemathesis).

Every operation gets generated requests, valid by the schema and (with a body) invalid; no
answer may be a 5xx, and every answer must use a documented status code, content type and
response schema, and an invalid body must be refused. ``positive_data_acceptance`` is left out
on purpose: a body the schema allows can still name a job or configuration the warehouse does
not have, which is a 422 by design, not a bug.

schemathesis' lazy ``from_fixture`` loader does not run under pytest 9 (it reads a node
attribute pytest removed), so each operation's strategy is drawn with Hypothesis directly.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from autofe.modeling.registry import Registry
from autofe.pipelines.serve import create_app

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
WITH_BODY = [
    ("POST", "/v1/predict"),
    ("POST", "/v1/predict/batch"),
    ("POST", "/v1/recommend"),
    ("POST", "/v1/actuals"),
    ("POST", "/v1/jobs"),
    ("POST", "/v1/jobs/{handle}/events"),
]
WITHOUT_BODY = [
    ("GET", "/v1/models"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
    ("GET", "/v1/jobs/{handle}"),
    ("DELETE", "/v1/jobs/{handle}"),
]
RUNS = [
    *[(m, p, GenerationMode.POSITIVE) for m, p in WITH_BODY + WITHOUT_BODY],
    *[(m, p, GenerationMode.NEGATIVE) for m, p in WITH_BODY],
]


@pytest.fixture(scope="module")
def api_schema(
    tmp_path_factory: pytest.TempPathFactory, example_warehouse: Path, manual_model: Path
) -> schemathesis.BaseSchema:
    home = tmp_path_factory.mktemp("fuzz-home")
    shutil.copy(example_warehouse, home / "warehouse.duckdb")
    registry = Registry(home)
    registry.promote(registry.add(manual_model, {"mape": 0.3}).name, "first model")
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(home, token=""))


def test_every_operation_is_fuzzed(api_schema: schemathesis.BaseSchema) -> None:
    results = list(api_schema.get_all_operations())
    operations = [r.ok() for r in results if isinstance(r, Ok)]
    assert len(operations) == len(results), "the OpenAPI document has an invalid operation"
    assert {(op.method.upper(), op.path) for op in operations} == set(WITH_BODY + WITHOUT_BODY)


@pytest.mark.parametrize(("method", "path", "mode"), RUNS)
def test_no_generated_request_gets_a_server_error(
    api_schema: schemathesis.BaseSchema, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=12,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def call(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(checks=CHECKS)

    call()
