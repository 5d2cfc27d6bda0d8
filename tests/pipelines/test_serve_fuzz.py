"""A bounded, deterministic fuzz pass over the API's own OpenAPI document (schemathesis).

Every operation gets generated requests, valid by the schema and (with a body) invalid; no
answer may be a 5xx, and every answer must use a documented status code, content type and
response schema, and an invalid body must be refused. ``positive_data_acceptance`` is left out
on purpose: a body the schema allows can still name a job or configuration the warehouse does
not have, which is a 422 by design, not a bug.

Schemathesis never generates what Python's ``json`` reads and JSON does not allow (``NaN``,
``Infinity``, lone surrogates: issue #27's 500s), so a second pass puts one of those into a
valid generated body, at a drawn place, and wants a 422 naming exactly that place. A third
drives the job-handle endpoints on a real submitted job (generated events in sequence), where
random handles would only ever meet a 404.

Hypothesis is derandomized and keeps no example database, so every run sends the same
requests; all of it takes ~15 s once the session's model is trained. schemathesis' lazy
``from_fixture`` loader does not run under pytest 9 (it reads a node attribute pytest removed),
so each operation's strategy is drawn with Hypothesis directly.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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
BOUNDED = settings(
    max_examples=12,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)

MARK = "hostile-7f3c0d"
"""Put where the hostile JSON text goes, then replaced in the serialized body."""
NOT_FINITE = "is not a finite number (JSON has no NaN or Infinity)"
HOSTILE_VALUES = [
    ("NaN", f"NaN {NOT_FINITE}"),
    ("Infinity", f"Infinity {NOT_FINITE}"),
    ("-Infinity", f"-Infinity {NOT_FINITE}"),
    ("1e400", "1e400 overflows a 64-bit float: give a finite number"),
    ('"\\udc00"', "contains a lone surrogate (\\udc00), which is not Unicode text"),
    ('"ok \\ud83d"', "contains a lone surrogate (\\ud83d), which is not Unicode text"),
]
HOSTILE_NAME = "the name contains a lone surrogate (\\ud83d), which is not Unicode text"
JOB = {
    "job_id": "etl-1",
    "tier": "P1",
    "account": "team-a",
    "shapes": {"m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700}},
    "task": {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py"},
}


@pytest.fixture(scope="module")
def app(
    tmp_path_factory: pytest.TempPathFactory, example_warehouse: Path, manual_model: Path
) -> FastAPI:
    home = tmp_path_factory.mktemp("fuzz-home")
    shutil.copy(example_warehouse, home / "warehouse.duckdb")
    registry = Registry(home)
    registry.promote(registry.add(manual_model, {"mape": 0.3}).name, "first model")
    return create_app(home, token="")


@pytest.fixture(scope="module")
def api_schema(app: FastAPI) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_asgi("/openapi.json", app)


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
    @BOUNDED
    def call(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(checks=CHECKS)

    call()


# ------------------------------------------------------- what JSON does not allow, anywhere


def places(body: Any, loc: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every value's place in ``body``, the body itself first (keys and indices, as a path)."""
    yield loc
    if isinstance(body, dict):
        for key, value in body.items():
            yield from places(value, (*loc, key))
    elif isinstance(body, list):
        for index, value in enumerate(body):
            yield from places(value, (*loc, index))


def planted(body: Any, loc: tuple[str | int, ...], as_name: bool) -> Any:
    """``body`` with :data:`MARK` at ``loc``, or as a new key of the object there (``as_name``)."""
    if not loc:
        return {**body, MARK: 1} if as_name else MARK
    head, *rest = loc
    copy: Any = dict(body) if isinstance(body, dict) else list(body)
    copy[head] = planted(body[head], tuple(rest), as_name)
    return copy


def field_name(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in loc) or "body"


@pytest.mark.parametrize(("method", "path"), WITH_BODY)
def test_a_non_finite_number_or_lone_surrogate_anywhere_is_a_422_naming_its_place(
    api_schema: schemathesis.BaseSchema, app: FastAPI, method: str, path: str
) -> None:
    operation = api_schema[path][method]
    client = TestClient(app, raise_server_exceptions=False)

    @given(case=operation.as_strategy(), data=st.data())
    @BOUNDED
    def call(case: schemathesis.Case[Any], data: st.DataObject) -> None:
        loc = data.draw(st.sampled_from(list(places(case.body))), label="place")
        objects = isinstance(_at(case.body, loc), dict)
        as_name = objects and data.draw(st.booleans(), label="as a name")
        token, message = (
            ('"\\ud83d"', HOSTILE_NAME)
            if as_name
            else data.draw(st.sampled_from(HOSTILE_VALUES), label="value")
        )
        text = json.dumps(planted(case.body, loc, as_name)).replace(f'"{MARK}"', token)
        url = operation.path.format(**case.path_parameters)
        response = client.request(
            method, url, content=text.encode(), headers={"content-type": "application/json"}
        )
        field = field_name((*loc, "\\ud83d") if as_name else loc)
        assert response.status_code == 422, response.text
        assert response.json()["errors"] == [{"field": field, "message": message}]

    call()


def _at(body: Any, loc: tuple[str | int, ...]) -> Any:
    for part in loc:
        body = body[part]
    return body


# ------------------------------------------------------------- a real job's handle, in turn


def test_generated_events_on_a_submitted_job_never_get_a_server_error(
    api_schema: schemathesis.BaseSchema, app: FastAPI
) -> None:
    """Started twice, progress after a finish, no progress given: a 200, 409 or 422."""
    client = TestClient(app)
    events = api_schema["/v1/jobs/{handle}/events"]["POST"]
    status = api_schema["/v1/jobs/{handle}"]["GET"]
    cancel = api_schema["/v1/jobs/{handle}"]["DELETE"]

    @given(data=st.data())
    @BOUNDED
    def call(data: st.DataObject) -> None:
        submitted = client.post("/v1/jobs", json={"jobs": [JOB]})
        assert submitted.status_code == 201, submitted.text
        handle = {"handle": submitted.json()["handle"]}
        for _ in range(data.draw(st.integers(1, 6), label="events")):
            case = data.draw(events.as_strategy(path_parameters=handle), label="event")
            assert case.call_and_validate(checks=CHECKS).status_code in (200, 409, 422)
        last = data.draw(st.sampled_from([status, cancel]), label="then")
        case = data.draw(last.as_strategy(path_parameters=handle), label="call")
        assert case.call_and_validate(checks=CHECKS).status_code in (200, 409)

    call()
