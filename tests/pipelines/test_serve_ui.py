"""The ``/ui`` dashboard in-process (FastAPI's TestClient), on the shipped example workspace.

A home as ``autofe nightly`` leaves it (the manual baseline promoted as ``v0001``), fed through
the public API: predictions with their actuals, submitted jobs with their events, and one
night's record whose drift section is the real drift report of the served model. The page
contract (ids, rows, charts) is what the browser tests in ``tests/ui`` rely on.
"""

from __future__ import annotations

import json
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_serve import make_home

from autofe.modeling.artifact import Artifact, load_model
from autofe.modeling.registry import Registry
from autofe.pipelines.nightly import feature_values, jobs_and_runs, read_labelled
from autofe.pipelines.nightly_drift import drift_report
from autofe.pipelines.nightly_records import RECORD_FILE
from autofe.pipelines.serve import create_app
from autofe.warehouse.connect import schema_fingerprint

PAGES = ("/ui/model", "/ui/predictions", "/ui/scheduler")
TOKEN = "s3cret/ui"
JOB = {
    "job_id": "etl-1",
    "tier": "P1",
    "account": "team-a",
    "shapes": {"m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700}},
    "task": {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py"},
}


class Elements(HTMLParser):
    """Every start tag of a page with its attributes, and the text, for asserting on."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.stack: list[dict[str, str]] = []
        self.inside: list[tuple[str, dict[str, str], tuple[str, ...]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        ids = tuple(a["id"] for a in self.stack if "id" in a)
        self.tags.append((tag, found))
        self.inside.append((tag, found, ids))
        if tag not in ("meta", "link", "input", "circle", "line", "rect", "path", "br"):
            self.stack.append(found)

    def handle_endtag(self, tag: str) -> None:
        if tag not in ("meta", "link", "input", "circle", "line", "rect", "path", "br"):
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def by_id(self, element_id: str) -> tuple[str, dict[str, str]]:
        (found,) = [(t, a) for t, a in self.tags if a.get("id") == element_id]
        return found

    def within(self, element_id: str, tag: str, cls: str | None = None) -> list[dict[str, str]]:
        """The ``tag`` elements (of class ``cls``) inside the element ``element_id``."""
        return [
            a
            for t, a, ids in self.inside
            if t == tag and element_id in ids and (cls is None or cls in a.get("class", ""))
        ]


def parsed(response: Any) -> Elements:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    return Elements(response.text)


@pytest.fixture(scope="module")
def night(example_warehouse: Path, manual_model: Path) -> dict[str, Any]:
    """A night's record whose drift section is the served model's real drift report: the
    champion taken as trained through its fit window's 80 % point, so later runs are new."""
    labelled = read_labelled(example_warehouse)
    artifact = _artifact(manual_model)
    values = feature_values(example_warehouse, artifact.specs)
    through = labelled[int(len(labelled) * 0.8)][2]
    names, runs = jobs_and_runs(example_warehouse)
    drift = drift_report(artifact, labelled, values, through, names, runs, Path("/nonexistent"))
    return {
        "stamp": "20250101T020000Z",
        "status": "done",
        "started": "2025-01-01T02:00:00+00:00",
        "decision": "kept",
        "reason": "the challenger is not better",
        "challenger": {"features": 40, "window": {"mape": 0.41}},
        "champion": {"version": "v0001", "window": {"mape": 0.38}, "deployed": {"mape": 0.3}},
        "version": "v0001",
        "drift": drift,
    }


def _artifact(model: Path) -> Artifact:
    return load_model(model, schema_fingerprint())


@pytest.fixture
def home(tmp_path: Path, example_warehouse: Path, manual_model: Path) -> Path:
    return make_home(tmp_path / "home", example_warehouse, manual_model)


@pytest.fixture
def client(home: Path) -> TestClient:
    return TestClient(create_app(home, token="", poll_s=0))


def predict_and_report(client: TestClient, run_id: str, duration_s: float) -> dict[str, Any]:
    """A fast-path prediction of a real example job remembered under ``run_id``, then its
    actual; the prediction's body."""
    body = {"job_id": "109", "run_id": run_id, "features": {"cfg_local_cores": 2}}
    prediction = client.post("/v1/predict", json=body)
    assert prediction.status_code == 200, prediction.text
    actual = {"run_id": run_id, "job_id": "109", "duration_s": duration_s}
    assert client.post("/v1/actuals", json=actual).status_code == 201
    out: dict[str, Any] = prediction.json()
    return out


def submit(client: TestClient, job_id: str = "etl-1") -> str:
    now = time.time()
    doc = {
        "budgets": [{"name": "team-a", "usd": 40.0, "period_s": 86400}],
        "jobs": [{**JOB, "job_id": job_id, "submit": now, "deadline": now + 3 * 3600}],
    }
    response = client.post("/v1/jobs", json=doc)
    assert response.status_code == 201, response.text
    return str(response.json()["handle"])


def write_night(home: Path, record: dict[str, Any]) -> None:
    folder = home / "nightly" / record["stamp"]
    folder.mkdir(parents=True)
    (folder / RECORD_FILE).write_text(json.dumps(record, default=str))


# ------------------------------------------------------------------------------ the pages


def test_ui_redirects_to_the_model_page(client: TestClient) -> None:
    response = client.get("/ui", follow_redirects=False)
    assert response.status_code == 307 and response.headers["location"] == "/ui/model"


@pytest.mark.parametrize("path", PAGES)
def test_every_page_is_self_contained_with_nav_and_a_heading(client: TestClient, path: str) -> None:
    page = parsed(client.get(path))
    links = [a["href"] for t, a in page.tags if t == "a"]
    assert links == list(PAGES)
    assert ("h1", {}) in page.tags
    assert not [t for t, _ in page.tags if t == "script"]
    urls = [v for _, a in page.tags for k, v in a.items() if k in ("src", "href")]
    assert all(u.startswith(("/ui/", "data:")) for u in urls), urls
    assert "<style>" in client.get(path).text


def test_the_model_page_lists_versions_promotions_and_the_served_features(
    client: TestClient, home: Path, manual_model: Path, night: dict[str, Any]
) -> None:
    registry = Registry(home)
    registry.promote(registry.add(manual_model, {"window": {"mape": 0.25}}).name, "better")
    write_night(home, night)
    page = parsed(client.get("/ui/model"))
    versions = page.within("versions", "tr")
    assert {r["data-version"] for r in versions if "data-version" in r} == {"v0001", "v0002"}
    (active,) = [r for r in versions if r.get("class") == "active"]
    assert active["data-version"] == "v0002"
    promotions = [r for r in page.within("promotions", "tr") if r.get("class") == "active"]
    assert len(promotions) == 2  # both promotions, newest first
    specs = _artifact(manual_model).specs
    features = [r["data-feature"] for r in page.within("catalog", "tr") if "data-feature" in r]
    assert sorted(features) == sorted(s.name for s in specs)
    assert [r["data-night"] for r in page.within("nights", "tr") if "data-night" in r] == [
        night["stamp"]
    ]
    assert page.within("nights-chart", "path", "line")
    assert page.within("importance-chart", "g", "bar")
    text = "".join(page.text)
    assert "25.0%" in text and "the challenger is not better" in text


def test_the_predictions_page_draws_actuals_with_their_intervals_and_the_drift(
    client: TestClient, home: Path, night: dict[str, Any]
) -> None:
    predicted = [predict_and_report(client, f"r-{i}", 10.0 + i) for i in range(3)]
    old = {"run_id": "old", "job_id": "109", "duration_s": 12.0, "predicted_p50_s": 11.0}
    with (home / "actuals.jsonl").open("a") as handle:  # written before bounds were kept
        handle.write(json.dumps({**old, "reported_at": "2024-01-01T00:00:00+00:00"}) + "\n")
    write_night(home, night)
    lines = [json.loads(line) for line in (home / "actuals.jsonl").read_text().splitlines()]
    low, high = predicted[0]["intervals"]["80%"]
    assert (lines[0]["predicted_low_80"], lines[0]["predicted_high_80"]) == (low, high)
    assert lines[0]["predicted_low_90"] == predicted[0]["intervals"]["90%"][0]
    page = parsed(client.get("/ui/predictions"))
    assert page.by_id("actuals-chart")[1]["class"] == "chart"
    assert len(page.within("actuals-chart", "circle", "point")) == 4 + 4  # actuals + p50s
    assert len(page.within("actuals-chart", "line", "interval")) == 3
    assert len(page.within("rolling-chart", "path", "line")) == 2
    assert page.within("rolling-chart", "g", "threshold")
    jobs = [r["data-job"] for r in page.within("drift", "tr") if "data-job" in r]
    assert jobs == [row["job_id"] for row in night["drift"]["jobs"]] and jobs
    assert {r["data-run"] for r in page.within("actuals", "tr") if "data-run" in r} == {
        "r-0",
        "r-1",
        "r-2",
        "old",
    }


def test_the_scheduler_page_shows_jobs_budgets_spend_and_events(client: TestClient) -> None:
    running = submit(client, "etl-1")
    queued = submit(client, "etl-2")
    started = client.post(f"/v1/jobs/{running}/events", json={"kind": "started"})
    assert started.status_code == 200, started.text
    page = parsed(client.get("/ui/scheduler"))
    rows = {
        r["data-handle"]: r["data-state"] for r in page.within("jobs", "tr") if "data-handle" in r
    }
    assert rows == {running: "running", queued: "queued"}
    assert [r["data-budget"] for r in page.within("budgets", "tr") if "data-budget" in r] == [
        "team-a"
    ]
    assert page.within("spend-chart", "path", "line")
    kinds = [r["data-kind"] for r in page.within("events", "tr") if "data-kind" in r]
    assert kinds == ["started", "submitted", "submitted"]
    states = {r["data-state"] for r in page.within("states", "tr") if "data-state" in r}
    assert states == {"queued", "running"}


# ------------------------------------------------------------------------------ the token


def test_the_token_guards_the_pages_by_header_or_by_the_login_cookie(home: Path) -> None:
    client = TestClient(create_app(home, token=TOKEN, poll_s=0))
    for path in ("/ui", *PAGES):
        refused = client.get(path)
        assert refused.status_code == 401 and 'name="token"' in refused.text
        wrong = client.get(path, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get(path, headers=bearer, follow_redirects=False).status_code in (200, 307)
    assert client.get("/ui/login").status_code == 200
    bad = client.post("/ui/login", data={"token": "nope"}, follow_redirects=False)
    assert bad.status_code == 401 and 'name="token"' in bad.text and "set-cookie" not in bad.headers
    good = client.post("/ui/login", data={"token": TOKEN}, follow_redirects=False)
    assert good.status_code == 303 and good.headers["location"] == "/ui/model"
    cookie = good.headers["set-cookie"]
    assert cookie.startswith("autofe_token=") and "HttpOnly" in cookie
    assert "samesite=strict" in cookie.lower() and "Path=/ui" in cookie
    for path in PAGES:
        assert client.get(path).status_code == 200  # the client keeps the cookie
    assert client.get("/v1/models").status_code == 401  # the cookie is for /ui only


def test_a_cookie_set_by_hand_with_the_raw_token_is_accepted(home: Path) -> None:
    app = create_app(home, token="plain-token", poll_s=0)
    for value, status in (("plain-token", 200), ("other", 401)):
        client = TestClient(app, cookies={"autofe_token": value})
        assert client.get("/ui/model").status_code == status, value


def test_nothing_but_the_login_is_writable_and_the_pages_stay_out_of_openapi(
    client: TestClient,
) -> None:
    for path in ("/ui", *PAGES):
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert client.request(method, path).status_code == 405, (method, path)
    schema = client.get("/openapi.json").json()
    assert not [p for p in schema["paths"] if p.startswith("/ui")]


# ------------------------------------------------------------------ empty and damaged homes


def test_an_empty_home_says_no_data_yet_and_creates_nothing(
    tmp_path: Path, example_warehouse: Path
) -> None:
    home = make_home(tmp_path / "empty", example_warehouse, None)
    before = sorted(p.name for p in home.iterdir())
    client = TestClient(create_app(home, token="", poll_s=0))
    for path in PAGES:
        response = client.get(path)
        assert response.status_code == 200 and "no data yet" in response.text, path
    page = parsed(client.get("/ui/scheduler"))
    assert page.within("spend-chart", "text", "empty")
    assert sorted(p.name for p in home.iterdir()) == before


def test_a_corrupt_actuals_line_or_nightly_record_is_a_note_not_an_error(
    client: TestClient, home: Path, night: dict[str, Any]
) -> None:
    predict_and_report(client, "r-1", 12.0)
    with (home / "actuals.jsonl").open("a") as handle:
        handle.write('{"run_id": "torn", "duration_s": 1\n{not json}\n')
    predict_and_report(client, "r-2", 14.0)
    write_night(home, night)
    broken = home / "nightly" / "20250102T020000Z"
    broken.mkdir()
    (broken / RECORD_FILE).write_text('{"stamp": ')
    (home / "nightly" / "20250103T020000Z").mkdir()  # a night killed outright
    predictions = client.get("/ui/predictions")
    assert predictions.status_code == 200
    assert "2 unreadable line(s) of actuals.jsonl skipped" in predictions.text
    page = parsed(predictions)
    assert len(page.within("actuals-chart", "line", "interval")) == 2
    assert [r for r in page.within("drift", "tr") if "data-job" in r]  # the older night's
    model = client.get("/ui/model")
    assert model.status_code == 200
    assert "nightly/20250102T020000Z/nightly.json skipped: unreadable" in model.text
    nights = [r["data-night"] for r in parsed(model).within("nights", "tr") if "data-night" in r]
    assert nights == ["20250103T020000Z", night["stamp"]]


def test_a_store_that_does_not_open_is_a_note(client: TestClient, home: Path) -> None:
    (home / "scheduler.sqlite").write_bytes(b"not a database at all" * 100)
    response = client.get("/ui/scheduler")
    assert response.status_code == 200
    assert "the scheduler store could not be read" in response.text
