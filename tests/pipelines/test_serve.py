"""The prediction API in-process (FastAPI's TestClient), on the shipped example workspace.

Every test gets its own home folder: the example warehouse copied to ``HOME/warehouse.duckdb``
and the manual baseline registered as ``v0001`` and promoted, as ``autofe nightly`` leaves it.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from fastapi.testclient import TestClient

from autofe.modeling.artifact import MODEL_FILE
from autofe.modeling.pending import CONFIG_COLUMNS, JOB_COLUMNS
from autofe.modeling.predict import predict_run
from autofe.modeling.registry import Registry
from autofe.pipelines.serve import TOKEN_ENV, create_app
from autofe.pipelines.serve_models import (
    MAX_BATCH,
    Alternative,
    ClusterSpec,
    JobDescription,
    alternative,
    choose_configuration,
)
from autofe.warehouse.connect import schema_fingerprint

JOB_SPEC_KEYS = ("job_id", "submit_time", "cluster_config_id", "parameters", "attributes")


def make_home(root: Path, warehouse: Path, model: Path | None) -> Path:
    """A home folder as the nightly job leaves it (``model`` None: nothing registered)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(warehouse, root / "warehouse.duckdb")
    if model is not None:
        registry = Registry(root)
        registry.promote(registry.add(model, {"mape": 0.3}).name, "first model")
    return root


@pytest.fixture
def home(tmp_path: Path, example_warehouse: Path, manual_model: Path) -> Path:
    return make_home(tmp_path / "home", example_warehouse, manual_model)


@pytest.fixture
def client(home: Path) -> TestClient:
    return TestClient(create_app(home, token="", poll_s=0))


@pytest.fixture(scope="module")
def latest(example_warehouse: Path) -> dict[str, Any]:
    """The latest successful run of the example workspace, described as before its submit."""
    with duckdb.connect(str(example_warehouse), read_only=True) as con:
        run_id, job_id, submit, config, params = con.execute(
            "SELECT run_id, job_id, submit_time, cluster_config_id, parameters FROM runs "
            "WHERE status = 'SUCCEEDED' ORDER BY submit_time DESC, run_id LIMIT 1"
        ).fetchone()  # type: ignore[misc]
        attrs = con.execute(
            "SELECT name, coalesce(CAST(value AS VARCHAR), value_text), value IS NOT NULL "
            "FROM run_attributes WHERE run_id = ? AND availability = 'known_at_submit'",
            [run_id],
        ).fetchall()
    return {
        "source_run": run_id,
        "job_id": job_id,
        "submit_time": submit.isoformat(),
        "cluster_config_id": config,
        "parameters": json.loads(params) if params else {},
        "attributes": {n: float(v) if numeric else v for n, v, numeric in attrs},
    }


@pytest.fixture
def spec(latest: dict[str, Any]) -> dict[str, Any]:
    return {key: latest[key] for key in JOB_SPEC_KEYS}


def job_configs(db: Path, job_id: str, n: int) -> list[str]:
    """The configurations ``job_id`` ran on most often (real candidates for a recommendation)."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT cluster_config_id FROM runs WHERE job_id = ? GROUP BY 1 "
            "ORDER BY count(*) DESC, 1 LIMIT ?",
            [job_id, n],
        ).fetchall()
    return [str(r[0]) for r in rows]


# --------------------------------------------------------------------------- predictions


def test_a_job_spec_is_predicted_as_the_run_itself(
    client: TestClient, home: Path, spec: dict[str, Any], latest: dict[str, Any]
) -> None:
    response = client.post("/v1/predict", json={**spec, "run_id": "next-1"})
    assert response.status_code == 200, response.text
    body = response.json()
    artifact = Registry(home).load("v0001", schema_fingerprint())
    expected = predict_run(artifact, home / "warehouse.duckdb", latest["source_run"]).as_dict()
    assert body["p50_s"] == expected["p50_s"]
    assert body["intervals"] == expected["intervals"]
    assert body["features"] == expected["features"]
    assert body["missing_features"] == expected["missing_features"]
    assert body["model_version"] == "v0001" and body["feature_source"] == "computed"
    assert body["run_id"] == "next-1" and body["job_id"] == spec["job_id"]


def test_features_given_by_name_take_the_fast_path(
    client: TestClient, spec: dict[str, Any]
) -> None:
    computed = client.post("/v1/predict", json=spec).json()
    features = dict(computed["features"])
    dropped = next(name for name, value in features.items() if value is not None)
    given = {**features, "not_a_feature": 1.0}
    del given[dropped]
    job = spec["job_id"]
    novel = computed["novel"]
    fast = client.post("/v1/predict", json={"job_id": job, "features": features, "novel": novel})
    partial = client.post("/v1/predict", json={"job_id": job, "features": given})
    assert fast.status_code == partial.status_code == 200
    assert isinstance(novel, bool) and fast.json()["novel"] is novel
    assert fast.json()["p50_s"] == computed["p50_s"]
    assert fast.json()["intervals"] == computed["intervals"]
    assert fast.json()["feature_source"] == "given" and fast.json()["run_id"] == "pending"
    assert partial.json()["novel"] is None
    told = client.post("/v1/predict", json={**spec, "novel": True})  # a spec's is computed
    assert told.status_code == 422 and "'novel' goes with 'features'" in told.text
    assert partial.json()["unknown_features"] == ["not_a_feature"]
    assert dropped in partial.json()["missing_features"]


def test_a_new_configuration_is_described_inline(client: TestClient, spec: dict[str, Any]) -> None:
    cluster = {
        "node_type": "Standard_F4s",
        "vcpu_per_node": 4,
        "memory_gb_per_node": 8,
        "num_workers": 0,
        "spark_conf": {"spark.master": "local[1]", "spark.sql.shuffle.partitions": "64"},
    }
    del spec["cluster_config_id"]
    response = client.post("/v1/predict", json={**spec, "cluster": cluster})
    assert response.status_code == 200, response.text
    features = response.json()["features"]
    assert features["cfg_local_cores"] == 1 and features["cfg_shuffle_partitions"] == 64


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cluster_config_id": "no-such-config"}, "'no-such-config' is not in the warehouse"),
        ({"job_id": "no-such-job"}, "job 'no-such-job' is not in the warehouse"),
        ({"run_id": "1001"}, "run id '1001' is already in the warehouse"),
    ],
)
def test_a_spec_that_contradicts_the_warehouse_is_a_422_with_the_reason(
    client: TestClient, spec: dict[str, Any], change: dict[str, str], message: str
) -> None:
    response = client.post("/v1/predict", json={**spec, **change})
    assert response.status_code == 422
    assert response.json()["error"] == "ConfigError"
    assert message in response.json()["detail"]


def test_a_batch_answers_every_item_in_order_with_its_own_error(
    client: TestClient, spec: dict[str, Any]
) -> None:
    features = client.post("/v1/predict", json=spec).json()["features"]
    items = [
        spec,
        {**spec, "cluster_config_id": "no-such-config"},
        {"job_id": spec["job_id"], "features": features, "run_id": "b-3"},
    ]
    response = client.post("/v1/predict/batch", json={"items": items})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == [200, 422, 200]
    assert results[0]["prediction"]["p50_s"] == results[2]["prediction"]["p50_s"]
    assert results[1]["prediction"] is None
    assert "no-such-config" in results[1]["error"]["detail"]
    assert results[2]["prediction"]["run_id"] == "b-3"
    assert response.json()["model_version"] == "v0001"


def test_the_warehouse_is_only_read(client: TestClient, home: Path, spec: dict[str, Any]) -> None:
    before = (home / "warehouse.duckdb").read_bytes()
    assert client.post("/v1/predict", json=spec).status_code == 200
    assert (home / "warehouse.duckdb").read_bytes() == before


# ------------------------------------------------------------------------------- validation


def _valid_recommend(spec: dict[str, Any]) -> dict[str, Any]:
    job = {k: v for k, v in spec.items() if k != "cluster_config_id"}
    candidate = {"cluster_config_id": spec["cluster_config_id"], "hourly_price": 1.0}
    return {**job, "deadline_s": 60, "candidates": [candidate]}


BAD_PREDICT: list[tuple[dict[str, Any], str, str]] = [
    ({"features": {}}, "job_id", "Field required"),
    ({"job_id": "", "features": {}}, "job_id", "at least 1 character"),
    ({"job_id": "1"}, "body", "give 'features' (values by name) or a job spec"),
    ({"job_id": "1", "features": {}, "submit_time": "2024-04-01T00:00:00"}, "body", "not both"),
    ({"job_id": "1", "submit_time": "soon"}, "submit_time", "give an RFC 3339 date-time"),
    ({"job_id": "1", "submit_time": 1711962000}, "submit_time", "give an RFC 3339 date-time"),
    ({"job_id": "1", "features": {}, "colour": "red"}, "colour", "Extra inputs"),
    ({"job_id": "1", "features": {"a": [1]}}, "features.a.float", "valid number"),
    (
        {"job_id": "1", "submit_time": "2024-04-01T00:00:00", "cluster": {"gpus": 2}},
        "cluster.gpus",
        "Extra inputs",
    ),
    (
        {"job_id": "1", "submit_time": "2024-04-01T00:00:00", "cluster": {"num_workers": -1}},
        "cluster.num_workers",
        "greater than or equal to 0",
    ),
    (
        {"job_id": "1", "submit_time": "0001-01-01T00:00:00+01:00"},
        "submit_time",
        "out of range once converted to UTC",
    ),
]


@pytest.mark.parametrize(("body", "field", "message"), BAD_PREDICT)
def test_a_bad_predict_body_is_a_422_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str, message: str
) -> None:
    response = client.post("/v1/predict", json=body)
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert any(e["field"] == field and message in e["message"] for e in errors), errors
    assert field in response.json()["detail"]


def test_non_finite_numbers_and_broken_json_are_422(client: TestClient) -> None:
    nan = client.post(
        "/v1/predict",
        content=b'{"job_id": "1", "features": {"a": NaN}}',
        headers={"content-type": "application/json"},
    )
    assert nan.status_code == 422
    message = "NaN is not a finite number (JSON has no NaN or Infinity)"
    assert nan.json()["errors"] == [{"field": "features.a", "message": message}]
    broken = client.post(
        "/v1/predict", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert broken.status_code == 422 and "JSON decode error" in broken.json()["detail"]


@pytest.mark.parametrize(
    ("path", "change", "field", "message"),
    [
        ("/v1/recommend", {"deadline_s": 0}, "deadline_s", "greater than 0"),
        ("/v1/recommend", {"level": 0.5}, "level", "intervals at [0.8, 0.9] only"),
        ("/v1/recommend", {"candidates": []}, "candidates", "at least 1 item"),
        ("/v1/recommend", {"candidates": [{}]}, "candidates.0", "give 'cluster_config_id'"),
        (
            "/v1/recommend",
            {"candidates": [{"cluster_config_id": "c", "hourly_price": -1}]},
            "candidates.0.hourly_price",
            "greater than 0",
        ),
        ("/v1/actuals", {"duration_s": 0}, "duration_s", "greater than or equal to 0.001"),
        ("/v1/actuals", {"duration_s": True}, "duration_s", "valid number"),
        ("/v1/actuals", {"finished_at": "0"}, "finished_at", "RFC 3339"),
        ("/v1/actuals", {"run_id": None}, "run_id", "valid string"),
        ("/v1/predict/batch", {"items": []}, "items", "at least 1 item"),
    ],
)
def test_bad_recommend_actuals_and_batch_bodies_name_the_field(
    client: TestClient,
    spec: dict[str, Any],
    path: str,
    change: dict[str, Any],
    field: str,
    message: str,
) -> None:
    valid = {
        "/v1/recommend": _valid_recommend(spec),
        "/v1/actuals": {"run_id": "r", "job_id": "j", "duration_s": 10.0},
        "/v1/predict/batch": {"items": [spec]},
    }[path]
    response = client.post(path, json={**valid, **change})
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert any(e["field"] == field and message in e["message"] for e in errors), errors


def test_a_batch_over_the_limit_is_refused_before_any_prediction(
    client: TestClient, spec: dict[str, Any]
) -> None:
    response = client.post("/v1/predict/batch", json={"items": [spec] * (MAX_BATCH + 1)})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "items"
    assert f"at most {MAX_BATCH} items" in response.json()["errors"][0]["message"]
    assert "autofe_predictions_total{" not in client.get("/metrics").text


def test_the_api_shapes_name_exactly_the_columns_a_pending_run_takes() -> None:
    assert set(ClusterSpec.model_fields) == CONFIG_COLUMNS
    assert set(JobDescription.model_fields) == JOB_COLUMNS


# --------------------------------------------------------------------------- recommendation


def alt(index: int, p50: float, bound: float, price: float, deadline: float) -> Alternative:
    return alternative(index, f"c{index}", p50, bound, (price, "request"), deadline)


def test_the_cheapest_configuration_within_the_deadline_wins() -> None:
    slow_cheap = alt(0, 80.0, 95.0, 1.0, 100.0)  # cost 0.0222
    fast_dear = alt(1, 30.0, 40.0, 6.0, 100.0)  # cost 0.05
    too_slow = alt(2, 150.0, 200.0, 0.1, 100.0)  # cheapest, misses the deadline
    assert choose_configuration([fast_dear, too_slow, slow_cheap]) == slow_cheap
    tie = alt(3, 80.0, 90.0, 1.0, 100.0)  # same cost as slow_cheap, tighter bound
    assert choose_configuration([slow_cheap, tie]) == tie


def test_when_nothing_meets_the_deadline_the_fastest_bound_is_returned() -> None:
    options = [alt(0, 80.0, 120.0, 1.0, 50.0), alt(1, 60.0, 70.0, 9.0, 50.0)]
    choice = choose_configuration(options)
    assert choice.index == 1 and not choice.meets_deadline
    assert choice.expected_cost_usd == pytest.approx(60.0 * 9.0 / 3600)


def test_recommend_prices_real_candidates_and_moves_with_the_deadline(
    client: TestClient, home: Path, spec: dict[str, Any]
) -> None:
    configs = job_configs(home / "warehouse.duckdb", spec["job_id"], 3)
    items = [{**spec, "cluster_config_id": c} for c in configs]
    singles = client.post("/v1/predict/batch", json={"items": items}).json()["results"]
    bounds = [r["prediction"]["intervals"]["90%"][1] for r in singles]
    assert len(set(bounds)) == 3, "the model should tell these configurations apart"
    fastest, middle, slowest = sorted(range(3), key=lambda i: bounds[i])
    p50s = [r["prediction"]["p50_s"] for r in singles]
    # the slower by its bound, the cheaper to run: expected costs (p50 x price) of 0.4, 0.2 and
    # 0.1 cents (bounds need not follow the p50s: a CV+ interval widens where the fold models
    # disagree, so prices by rank alone would not order the costs)
    cost = {fastest: 0.004, middle: 0.002, slowest: 0.001}
    prices = {i: cost[i] * 3600.0 / p50s[i] for i in range(3)}
    job = {k: v for k, v in spec.items() if k != "cluster_config_id"}
    candidates = [
        {"cluster_config_id": c, "hourly_price": prices[i]} for i, c in enumerate(configs)
    ]

    def recommend(deadline: float) -> dict[str, Any]:
        body = {**job, "deadline_s": deadline, "candidates": candidates}
        response = client.post("/v1/recommend", json=body)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    roomy = recommend(1e6)
    for i, a in enumerate(roomy["alternatives"]):
        assert a["p50_s"] == singles[i]["prediction"]["p50_s"] and a["bound_s"] == bounds[i]
        assert a["expected_cost_usd"] == pytest.approx(a["p50_s"] * prices[i] / 3600, abs=1e-6)
    assert roomy["choice"]["index"] == slowest and roomy["meets_deadline"]
    ms = 0.001  # responses round the bounds to milliseconds
    assert recommend(bounds[middle] + ms)["choice"]["index"] == middle
    assert recommend(bounds[fastest] + ms)["choice"]["index"] == fastest
    missed = recommend(bounds[fastest] - 0.01)
    assert missed["choice"]["index"] == fastest and not missed["meets_deadline"]
    assert [a["meets_deadline"] for a in missed["alternatives"]] == [False] * 3


def test_recommend_with_nothing_fast_enough_says_so(
    client: TestClient, spec: dict[str, Any]
) -> None:
    body = {**_valid_recommend(spec), "deadline_s": 0.5}
    response = client.post("/v1/recommend", json=body)
    assert response.status_code == 200
    assert response.json()["meets_deadline"] is False
    assert response.json()["choice"]["meets_deadline"] is False


def test_recommend_uses_the_80_percent_bound_when_asked(
    client: TestClient, spec: dict[str, Any]
) -> None:
    single = client.post("/v1/predict", json=spec).json()
    body = {**_valid_recommend(spec), "level": 0.8}
    response = client.post("/v1/recommend", json=body)
    assert response.json()["choice"]["bound_s"] == single["intervals"]["80%"][1]
    assert response.json()["level"] == 0.8


def test_recommend_takes_prices_from_the_warehouse_or_says_which_is_missing(
    client: TestClient, home: Path, spec: dict[str, Any]
) -> None:
    priced, unpriced = job_configs(home / "warehouse.duckdb", spec["job_id"], 2)
    with duckdb.connect(str(home / "warehouse.duckdb")) as con:  # the example has no prices
        con.execute("UPDATE cluster_configs SET hourly_price = 0.5 WHERE config_id = ?", [priced])
    job = {k: v for k, v in spec.items() if k != "cluster_config_id"}
    one = client.post(
        "/v1/recommend",
        json={**job, "deadline_s": 600, "candidates": [{"cluster_config_id": priced}]},
    )
    assert one.status_code == 200, one.text
    assert one.json()["choice"]["price_source"] == "warehouse"
    assert one.json()["choice"]["hourly_price"] == 0.5
    candidates = [{"cluster_config_id": priced}, {"cluster_config_id": unpriced}]
    two = client.post("/v1/recommend", json={**job, "deadline_s": 600, "candidates": candidates})
    assert two.status_code == 422
    assert two.json()["detail"].startswith("candidates[1]: the warehouse has no hourly_price")
    unknown = [{"cluster_config_id": priced}, {"cluster_config_id": "no-such-config"}]
    three = client.post("/v1/recommend", json={**job, "deadline_s": 600, "candidates": unknown})
    assert three.status_code == 422
    assert (
        "candidates[1]: cluster_config_id 'no-such-config' is not in the warehouse"
        in (three.json()["detail"])
    )


def test_a_new_cluster_candidate_needs_a_price(client: TestClient, spec: dict[str, Any]) -> None:
    body = _valid_recommend(spec)
    body["candidates"] = [{"cluster": {"node_type": "Standard_F8s", "num_workers": 0}}]
    response = client.post("/v1/recommend", json=body)
    assert response.status_code == 422
    assert "candidates[0]: give 'hourly_price' for the new cluster" in response.json()["detail"]
    body["candidates"][0]["cluster"]["hourly_price"] = 0.7
    priced = client.post("/v1/recommend", json=body)
    assert priced.status_code == 200, priced.text
    assert priced.json()["choice"]["price_source"] == "cluster"


# ------------------------------------------------------------------------- actuals, metrics


def test_an_actual_is_appended_and_scores_the_prediction_it_matches(
    client: TestClient, home: Path, spec: dict[str, Any]
) -> None:
    p50 = client.post("/v1/predict", json={**spec, "run_id": "r-1"}).json()["p50_s"]
    report = {"run_id": "r-1", "job_id": spec["job_id"], "duration_s": 20.0}
    first = client.post("/v1/actuals", json={**report, "finished_at": "2024-04-01T10:00:00Z"})
    again = client.post("/v1/actuals", json=report)
    unknown = client.post("/v1/actuals", json={**report, "run_id": "never-predicted"})
    assert first.status_code == again.status_code == unknown.status_code == 201
    assert first.json()["matched"] and first.json()["model_version"] == "v0001"
    assert first.json()["abs_pct_error"] == pytest.approx(abs(p50 - 20.0) / 20.0, abs=1e-6)
    assert not again.json()["matched"] and not unknown.json()["matched"]
    lines = [json.loads(line) for line in (home / "actuals.jsonl").read_text().splitlines()]
    assert [line["run_id"] for line in lines] == ["r-1", "r-1", "never-predicted"]
    assert lines[0]["duration_s"] == 20.0 and lines[0]["finished_at"].startswith("2024-04-01T10")
    assert lines[0]["predicted_p50_s"] == p50 and lines[1]["predicted_p50_s"] is None
    metrics = client.get("/metrics").text
    assert "autofe_prediction_abs_pct_error_count 1\n" in metrics
    assert _sample(metrics, "autofe_prediction_abs_pct_error_sum") == pytest.approx(
        abs(p50 - 20.0) / 20.0
    )
    assert _sample(metrics, 'autofe_actuals_total{matched="false"}') == 2


def test_the_prediction_memory_is_bounded(home: Path, spec: dict[str, Any]) -> None:
    client = TestClient(create_app(home, token="", ledger_size=2))
    features = client.post("/v1/predict", json=spec).json()["features"]
    for run_id in ("a", "b", "c"):
        body = {"job_id": spec["job_id"], "features": features, "run_id": run_id}
        assert client.post("/v1/predict", json=body).status_code == 200
    matched = {
        run_id: client.post(
            "/v1/actuals", json={"run_id": run_id, "job_id": spec["job_id"], "duration_s": 9.0}
        ).json()["matched"]
        for run_id in ("a", "b", "c")
    }
    assert matched == {"a": False, "b": True, "c": True}


def _sample(text: str, name: str) -> float:
    line = next(ln for ln in text.splitlines() if ln.startswith(name + " "))
    return float(line.rsplit(" ", 1)[1])


SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-z_]+="[^"]*",?)*\})? [-+0-9.eE]+(Inf)?$')


def test_metrics_are_valid_prometheus_text(client: TestClient, spec: dict[str, Any]) -> None:
    client.post("/v1/predict", json=spec)
    client.post("/v1/predict", json={"job_id": "1"})
    client.get("/no-such-path")
    response = client.get("/metrics")
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = response.text
    for line in text.splitlines():
        assert line.startswith(("# HELP ", "# TYPE ")) or SAMPLE.match(line), line
    requests = 'autofe_http_requests_total{endpoint="/v1/predict",method="POST",status='
    assert _sample(text, requests + '"200"}') == 1 and _sample(text, requests + '"422"}') == 1
    assert _sample(text, 'autofe_http_requests_total{endpoint="other",method="GET",status="404"}')
    bucket = 'autofe_http_request_duration_seconds_bucket{endpoint="/v1/predict",le='
    counts = [_sample(text, f'{bucket}"{le}"}}') for le in ("0.0005", "0.1", "1.0", "+Inf")]
    assert counts == sorted(counts) and counts[-1] == 2
    assert _sample(text, 'autofe_model_info{version="v0001"}') == 1
    assert _sample(text, 'autofe_predictions_total{source="computed"}') == 1


def test_models_lists_versions_metrics_and_the_promotion_history(
    client: TestClient, home: Path, manual_model: Path
) -> None:
    registry = Registry(home)
    registry.add(manual_model, {"mape": 0.25})
    registry.record({"decision": "kept", "version": "v0001", "challenger": "v0002"})
    body = client.get("/v1/models").json()
    assert body["active"] == body["serving"] == "v0001"
    assert [(v["version"], v["active"], v["metrics"]) for v in body["versions"]] == [
        ("v0001", True, {"mape": 0.3}),
        ("v0002", False, {"mape": 0.25}),
    ]
    assert [h["decision"] for h in body["history"]] == ["promoted", "kept"]


# ---------------------------------------------------------------------- health, auth, limits


def test_healthz_names_the_version(client: TestClient) -> None:
    body = client.get("/healthz").json()
    assert body["status"] == "ok" and body["model_version"] == body["active_version"] == "v0001"
    assert body["reload_error"] is None


def test_without_a_model_health_and_predictions_are_503(
    tmp_path: Path, example_warehouse: Path, manual_model: Path, spec: dict[str, Any]
) -> None:
    home = make_home(tmp_path / "empty", example_warehouse, None)
    client = TestClient(create_app(home, token="", poll_s=0))
    health = client.get("/healthz")
    assert health.status_code == 503 and health.json()["status"] == "no model"
    refused = client.post("/v1/predict", json=spec)
    assert refused.status_code == 503 and "no model is active" in refused.json()["detail"]
    registry = Registry(home)
    registry.promote(registry.add(manual_model, {}).name, "first model")
    assert client.post("/v1/predict", json=spec).json()["model_version"] == "v0001"


ENDPOINTS = [
    ("POST", "/v1/predict"),
    ("POST", "/v1/predict/batch"),
    ("POST", "/v1/recommend"),
    ("POST", "/v1/actuals"),
    ("GET", "/v1/models"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
]


def test_a_token_guards_every_endpoint_but_healthz(home: Path) -> None:
    client = TestClient(create_app(home, token="s3cret"))
    for method, path in ENDPOINTS:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            response = client.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (method, path, headers)
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["error"] == "Unauthorized"
        ok = client.request(method, path, headers={"Authorization": "bearer s3cret"}, json={})
        assert ok.status_code in (200, 422), (method, path, ok.text)
    assert client.get("/healthz").status_code == 200
    assert 'status="401"' in client.get("/metrics", headers={"Authorization": "Bearer s3cret"}).text


def test_the_token_comes_from_the_environment(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    client = TestClient(create_app(home))
    assert client.get("/v1/models").status_code == 401
    assert client.get("/v1/models", headers={"Authorization": "Bearer from-env"}).status_code == 200


def test_a_body_over_the_limit_is_413_declared_or_streamed(
    home: Path, spec: dict[str, Any]
) -> None:
    client = TestClient(create_app(home, token="", max_body_bytes=4096))
    big = {**spec, "script_text": "x" * 5000}
    declared = client.post("/v1/predict", json=big)
    assert declared.status_code == 413 and "over 4096 bytes" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:
        body = json.dumps(big).encode()
        for i in range(0, len(body), 1000):
            yield body[i : i + 1000]

    streamed = client.post(
        "/v1/predict", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in streamed.request.headers
    assert streamed.status_code == 413
    assert client.post("/v1/predict", json=spec).status_code == 200


def test_unknown_paths_and_methods_get_json_errors(client: TestClient) -> None:
    missing = client.get("/v1/nothing")
    assert missing.status_code == 404 and missing.json() == {
        "error": "Not Found",
        "detail": "Not Found",
    }
    wrong = client.get("/v1/predict")
    assert wrong.status_code == 405 and wrong.json()["error"] == "Method Not Allowed"


# ------------------------------------------------------------------------------- hot reload


def test_a_promotion_is_served_without_a_restart(
    client: TestClient, home: Path, manual_model: Path, spec: dict[str, Any]
) -> None:
    assert client.post("/v1/predict", json=spec).json()["model_version"] == "v0001"
    registry = Registry(home)
    registry.promote(registry.add(manual_model, {"mape": 0.2}).name, "better")
    assert client.post("/v1/predict", json=spec).json()["model_version"] == "v0002"
    assert client.get("/healthz").json()["model_version"] == "v0002"
    assert 'autofe_model_info{version="v0002"} 1' in client.get("/metrics").text


def test_a_version_that_fails_to_load_leaves_the_old_one_serving(
    client: TestClient, home: Path, manual_model: Path, spec: dict[str, Any]
) -> None:
    registry = Registry(home)
    broken = registry.add(manual_model, {})
    registry.promote(broken.name, "a copy damaged once promoted")  # promote loads it first
    (broken.path / MODEL_FILE).write_bytes(b"tampered")
    assert client.post("/v1/predict", json=spec).json()["model_version"] == "v0001"
    health = client.get("/healthz").json()
    assert health["status"] == "stale" and health["active_version"] == "v0002"
    assert "SHA-256" in health["reload_error"] and health["model_version"] == "v0001"
    assert 'autofe_model_reloads_total{outcome="failed"} 1' in client.get("/metrics").text
    registry.promote(registry.add(manual_model, {}).name, "fixed")
    assert client.post("/v1/predict", json=spec).json()["model_version"] == "v0003"
    assert client.get("/healthz").json()["reload_error"] is None


def test_no_request_fails_while_a_new_version_is_promoted(
    home: Path, manual_model: Path, spec: dict[str, Any]
) -> None:
    app = create_app(home, token="", poll_s=0)
    features = TestClient(app).post("/v1/predict", json=spec).json()["features"]
    body = {"job_id": spec["job_id"], "features": features}
    stop = threading.Event()
    seen: list[list[tuple[int, str | None]]] = [[] for _ in range(4)]

    def hammer(out: list[tuple[int, str | None]]) -> None:
        with TestClient(app) as client:
            while not stop.is_set():
                response = client.post("/v1/predict", json=body)
                version = response.json().get("model_version") if response.is_success else None
                out.append((response.status_code, version))

    threads = [threading.Thread(target=hammer, args=(out,)) for out in seen]
    for thread in threads:
        thread.start()
    _wait_for(lambda: all(len(out) >= 20 for out in seen))
    registry = Registry(home)
    registry.promote(registry.add(manual_model, {"mape": 0.2}).name, "better")
    _wait_for(lambda: all(out[-1][1] == "v0002" for out in seen if out))
    mark = [len(out) for out in seen]
    _wait_for(lambda: all(len(out) >= m + 20 for out, m in zip(seen, mark, strict=True)))
    stop.set()
    for thread in threads:
        thread.join()
    for out in seen:
        assert {status for status, _ in out} == {200}
        versions = [version for _, version in out]
        switch = versions.index("v0002")
        assert set(versions[:switch]) == {"v0001"} and set(versions[switch:]) == {"v0002"}


def _wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
