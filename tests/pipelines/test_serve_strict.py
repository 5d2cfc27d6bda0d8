"""Request bodies are JSON as JSON means it, and feature values are of the type the model reads.

Python's ``json`` reads ``NaN``, ``Infinity``, ``1e400`` (as ``inf``) and lone surrogates
(``"\\ud83d"``); each is refused as a 422 naming the field, wherever it is in the body of any
endpoint, and the server goes on answering on the same connection. Bodies are sent as raw
text: ``json.dumps`` would write no lone surrogate by accident, and these tests need them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from autofe.modeling.registry import Registry
from autofe.pipelines.serve import create_app
from autofe.pipelines.serve_json import MAX_DEPTH

MARK = "@hostile@"
"""Where :func:`raw` puts the raw JSON text under test (as a value, or as a key)."""
SURROGATE = '"\\ud83d"'
"""A lone high surrogate as JSON text: valid to ``json.loads``, not Unicode."""
SURROGATE_MESSAGE = "contains a lone surrogate (\\ud83d), which is not Unicode text"
NAME_MESSAGE = f"the name {SURROGATE_MESSAGE}"
JSON = {"content-type": "application/json"}
GIVEN = {"job_id": "109", "features": {"cfg_local_cores": 2}}
"""A valid fast-path prediction: what the same client sends after each refusal."""


def raw(body: Any, token: str) -> bytes:
    """``body`` as JSON text with the quoted string :data:`MARK` replaced by ``token`` as is."""
    text = json.dumps(body)
    assert f'"{MARK}"' in text
    return text.replace(f'"{MARK}"', token).encode()


@pytest.fixture(scope="module")
def app(
    tmp_path_factory: pytest.TempPathFactory, example_warehouse: Path, manual_model: Path
) -> FastAPI:
    home = tmp_path_factory.mktemp("strict-home")
    shutil.copy(example_warehouse, home / "warehouse.duckdb")
    registry = Registry(home)
    registry.promote(registry.add(manual_model, {"mape": 0.3}).name, "first model")
    return create_app(home, token="", poll_s=0)


@pytest.fixture
def client(app: FastAPI) -> TestClient:
    """A server error comes back as a 500 response, not an exception, so it can be asserted."""
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def spec(example_warehouse: Path) -> dict[str, Any]:
    """A real job spec: the example workspace's latest run, as it was before its submit."""
    with duckdb.connect(str(example_warehouse), read_only=True) as con:
        job_id, submit, config = con.execute(
            "SELECT job_id, submit_time, cluster_config_id FROM runs "
            "WHERE status = 'SUCCEEDED' ORDER BY submit_time DESC, run_id LIMIT 1"
        ).fetchone()  # type: ignore[misc]
    return {"job_id": job_id, "submit_time": submit.isoformat(), "cluster_config_id": config}


@pytest.fixture(scope="module")
def handle(app: FastAPI) -> str:
    """A submitted job's handle, for the events endpoint."""
    job = {
        "job_id": "etl-1",
        "tier": "P1",
        "account": "team-a",
        "shapes": {"m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700}},
        "task": {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py"},
    }
    response = TestClient(app).post("/v1/jobs", json={"jobs": [job]})
    assert response.status_code == 201, response.text
    return str(response.json()["handle"])


def _job(**fields: Any) -> dict[str, Any]:
    return {
        "job_id": "etl-2",
        "tier": "P1",
        "account": "team-a",
        "shapes": {"m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700}},
        "task": {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py"},
        **fields,
    }


def _cluster(**fields: Any) -> dict[str, Any]:
    return {"node_type": "Standard_F4s", "vcpu_per_node": 4, "memory_gb_per_node": 8, **fields}


def _refused(response: Any, field: str, message: str) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "ValidationError"
    assert body["errors"] == [{"field": field, "message": message}], body
    assert body["detail"] == f"{field}: {message}"


def _still_answers(client: TestClient) -> None:
    after = client.post("/v1/predict", json=GIVEN)
    assert after.status_code == 200, after.text


# ------------------------------------------------------------------------ lone surrogates


def test_a_lone_surrogate_in_a_feature_name_is_a_422_and_the_client_goes_on(
    client: TestClient,
) -> None:
    body = raw({"job_id": "109", "features": {MARK: 1}}, SURROGATE)
    _refused(
        client.post("/v1/predict", content=body, headers=JSON), "features.\\ud83d", NAME_MESSAGE
    )
    _still_answers(client)


def test_a_lone_surrogate_in_a_string_feature_value_is_a_422_and_the_client_goes_on(
    client: TestClient,
) -> None:
    body = raw({"job_id": "109", "features": {"cfg_node_type": MARK}}, SURROGATE)
    response = client.post("/v1/predict", content=body, headers=JSON)
    _refused(response, "features.cfg_node_type", SURROGATE_MESSAGE)
    _still_answers(client)


NESTED: list[tuple[str, Any, str]] = [
    (
        "/v1/predict",
        {"parameters": {"notebook_params": {"days": MARK}}},
        "parameters.notebook_params.days",
    ),
    (
        "/v1/predict",
        {"parameters": {"notebook_params": {MARK: "5"}}},
        "parameters.notebook_params.\\ud83d",
    ),
    ("/v1/predict", {"attributes": {MARK: 10}}, "attributes.\\ud83d"),
    (
        "/v1/predict",
        {"job": {"definition": {"tasks": [{"key": MARK}]}}},
        "job.definition.tasks.0.key",
    ),
    (
        "/v1/predict/batch",
        {"items": [GIVEN, {"job_id": "109", "features": {"cfg_node_type": MARK}}]},
        "items.1.features.cfg_node_type",
    ),
    (
        "/v1/recommend",
        {"candidates": [{"cluster": _cluster(spark_conf={MARK: "8"}), "hourly_price": 1.0}]},
        "candidates.0.cluster.spark_conf.\\ud83d",
    ),
    ("/v1/actuals", {"run_id": MARK, "job_id": "109", "duration_s": 10.0}, "run_id"),
    (
        "/v1/jobs",
        {"jobs": [_job(task={"type": "spark_python", "python_file": MARK})]},
        "jobs.0.task.python_file",
    ),
    ("/v1/jobs", {"jobs": [_job(job_id=MARK)]}, "jobs.0.job_id"),
    ("/v1/jobs", {"budgets": [{"name": MARK, "usd": 1.0}], "jobs": [_job()]}, "budgets.0.name"),
    ("/v1/jobs/{handle}/events", {"kind": "progress", "progress": 0.5, "reason": MARK}, "reason"),
]


def _body(path: str, change: Any, spec: dict[str, Any]) -> Any:
    """A body for ``path`` that is valid but for ``change`` (a job spec where one is needed)."""
    if path == "/v1/predict" and "features" not in change:
        return {**spec, **change}
    if path == "/v1/recommend":
        job = {k: v for k, v in spec.items() if k != "cluster_config_id"}
        return {**job, "deadline_s": 60, **change}
    return change


@pytest.mark.parametrize(("path", "change", "field"), NESTED, ids=[f for _, _, f in NESTED])
def test_a_lone_surrogate_anywhere_in_any_body_is_a_422_naming_the_field(
    client: TestClient, spec: dict[str, Any], handle: str, path: str, change: Any, field: str
) -> None:
    body = raw(_body(path, change, spec), SURROGATE)
    response = client.post(path.format(handle=handle), content=body, headers=JSON)
    _refused(response, field, NAME_MESSAGE if field.endswith("\\ud83d") else SURROGATE_MESSAGE)
    _still_answers(client)


def test_a_surrogate_pair_is_text_and_passes(client: TestClient) -> None:
    body = raw({"job_id": "109", "features": {"cfg_node_type": MARK}}, '"\\ud83d\\ude00"')
    response = client.post("/v1/predict", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    assert response.json()["features"]["cfg_node_type"] == "\U0001f600"


# --------------------------------------------------------------------- non-finite numbers

NON_FINITE = [
    ("NaN", "NaN is not a finite number (JSON has no NaN or Infinity)"),
    ("Infinity", "Infinity is not a finite number (JSON has no NaN or Infinity)"),
    ("-Infinity", "-Infinity is not a finite number (JSON has no NaN or Infinity)"),
    ("1e400", "1e400 overflows a 64-bit float: give a finite number"),
    ("-2.5E+999", "-2.5E+999 overflows a 64-bit float: give a finite number"),
    (
        "1" + "0" * 400,
        "100000000000... (401 characters) overflows a 64-bit float: give a finite number",
    ),
]
PLACES: list[tuple[str, Any, str]] = [
    (
        "/v1/predict",
        {"parameters": {"notebook_params": {"days": MARK}}},
        "parameters.notebook_params.days",
    ),
    ("/v1/predict", {"parameters": {"x": [1, MARK]}}, "parameters.x.1"),
    (
        "/v1/predict",
        {"attributes": {"tag.lab_scale_factor": MARK}},
        "attributes.tag.lab_scale_factor",
    ),
    (
        "/v1/predict",
        {"job_id": "109", "features": {"cfg_local_cores": MARK}},
        "features.cfg_local_cores",
    ),
    (
        "/v1/predict/batch",
        {"items": [{"job_id": "109", "features": {"x": MARK}}]},
        "items.0.features.x",
    ),
    (
        "/v1/recommend",
        {"candidates": [{"cluster": _cluster(), "hourly_price": 1.0}], "deadline_s": MARK},
        "deadline_s",
    ),
    ("/v1/actuals", {"run_id": "r", "job_id": "109", "duration_s": MARK}, "duration_s"),
    (
        "/v1/jobs",
        {"jobs": [_job(shapes={"m4.xlarge x4": {"p50_s": MARK, "low_s": 1, "high_s": 2}})]},
        "jobs.0.shapes.m4.xlarge x4.p50_s",
    ),
    ("/v1/jobs", {"budgets": [{"name": "team-a", "usd": MARK}], "jobs": [_job()]}, "budgets.0.usd"),
    ("/v1/jobs/{handle}/events", {"kind": "fallback", "hourly_usd": MARK}, "hourly_usd"),
]


@pytest.mark.parametrize(("token", "message"), NON_FINITE, ids=[t[:10] for t, _ in NON_FINITE])
@pytest.mark.parametrize(("path", "change", "field"), PLACES, ids=[f for _, _, f in PLACES])
def test_a_non_finite_number_anywhere_in_any_body_is_a_422_naming_the_field(
    client: TestClient,
    spec: dict[str, Any],
    handle: str,
    path: str,
    change: Any,
    field: str,
    token: str,
    message: str,
) -> None:
    body = raw(_body(path, change, spec), token)
    _refused(client.post(path.format(handle=handle), content=body, headers=JSON), field, message)


def test_the_largest_finite_numbers_pass(client: TestClient) -> None:
    features = {"x": MARK, "y": 1.7976931348623157e308, "z": -(10**308)}
    body = raw({"job_id": "109", "features": features}, "1" + "0" * 300)
    response = client.post("/v1/predict", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    assert response.json()["unknown_features"] == ["x", "y", "z"]


# ------------------------------------------------------------------------------- nesting


def test_a_body_nested_too_deeply_is_a_422_not_a_server_error(client: TestClient) -> None:
    deep = "[" * 500 + "]" * 500
    body = raw({"jobs": [_job(task={"type": "spark_python", "deep": MARK})]}, deep)
    response = client.post("/v1/jobs", content=body, headers=JSON)
    field = ".".join(["jobs", "0", "task", "deep", *["0"] * (MAX_DEPTH - 4)])
    _refused(response, field, f"nested deeper than {MAX_DEPTH} levels")
    very = b"[" * 100_000 + b"]" * 100_000
    _refused(
        client.post("/v1/predict", content=very, headers=JSON),
        "body",
        f"nested deeper than {MAX_DEPTH} levels",
    )
    _still_answers(client)


# ------------------------------------------------------------------- feature value types

WRONG_TYPE = [
    (
        "cfg_local_cores",
        "5",
        "the model reads a number here (DOUBLE): give a JSON number, not text",
    ),
    (
        "cfg_local_cores",
        True,
        "the model reads a number here (DOUBLE): give a JSON number, not true/false",
    ),
    (
        "cal_weekend",
        1,
        "the model reads true/false here (BOOLEAN): give true or false, not a number",
    ),
    (
        "cal_weekend",
        "false",
        "the model reads true/false here (BOOLEAN): give true or false, not text",
    ),
    ("cfg_node_type", 4, "the model reads text here (VARCHAR): give a string, not a number"),
    ("cfg_node_type", False, "the model reads text here (VARCHAR): give a string, not true/false"),
]


@pytest.mark.parametrize(
    ("name", "value", "message"), WRONG_TYPE, ids=[f"{n}={v!r}" for n, v, _ in WRONG_TYPE]
)
def test_a_feature_value_of_another_type_than_the_model_reads_is_a_422(
    client: TestClient, name: str, value: object, message: str
) -> None:
    response = client.post("/v1/predict", json={"job_id": "109", "features": {name: value}})
    _refused(response, f"features.{name}", message)


def test_feature_values_of_the_type_the_model_reads_are_predicted(client: TestClient) -> None:
    features = {
        "cfg_local_cores": 2,
        "size_scale_factor": 10.5,
        "cal_weekend": True,
        "cfg_node_type": "Standard_F8s",
        "hist_mean_last3": None,
        "not_a_feature": "5",
    }
    response = client.post("/v1/predict", json={"job_id": "109", "features": features})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["unknown_features"] == ["not_a_feature"]
    assert "hist_mean_last3" in body["missing_features"]
    assert body["features"]["cal_weekend"] is True and body["features"]["cfg_local_cores"] == 2


def test_one_wrongly_typed_batch_item_refuses_the_batch_naming_the_item(client: TestClient) -> None:
    items = [GIVEN, {"job_id": "109", "features": {"cfg_local_cores": "5"}}]
    response = client.post("/v1/predict/batch", json={"items": items})
    message = "the model reads a number here (DOUBLE): give a JSON number, not text"
    _refused(response, "items.1.features.cfg_local_cores", message)
