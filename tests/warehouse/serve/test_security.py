"""Every answer of `warehouse serve` carries the security headers (a page, the API, an asset,
a 404, a busy 503), and the per-run API answers 404 for a run the warehouse does not have."""
from __future__ import annotations

import pytest

from tests.warehouse.serve.conftest import sql
from warehouse.serve.app import CONTENT_SECURITY_POLICY


@pytest.fixture(scope="module")
def client(demo_url):
    from starlette.testclient import TestClient

    from warehouse.serve.app import create_app

    with TestClient(create_app(demo_url)) as c:
        yield c


def a_run(url: str) -> str:
    return sql(url, 'SELECT "run_id" FROM "nodes" GROUP BY 1 ORDER BY 1 LIMIT 1')[0][0]


def assert_secured(response):
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_every_kind_of_answer_carries_the_headers(client, demo_url):
    run_id = a_run(demo_url)
    answers = {path: client.get(path) for path in
               ("/", f"/runs/{run_id}", f"/api/runs/{run_id}/version", "/compare", "/quality",
                "/static/app.js", "/static/plotly.min.js", "/runs/no_such_run", "/no/such/page")}
    assert [answers[p].status_code for p in answers] == [200] * 7 + [404, 404]
    for response in answers.values():
        assert_secured(response)


def test_a_busy_answer_carries_the_headers(client, demo_url, monkeypatch):
    from warehouse.errors import DatabaseLockedError
    from warehouse.serve import data

    def locked(*args, **kwargs):
        raise DatabaseLockedError("locked by a writer")

    monkeypatch.setattr(data, "runs_page", locked)
    response = client.get("/")
    assert response.status_code == 503
    assert_secured(response)


def test_policy_allows_only_the_servers_own_scripts():
    policy = dict(part.strip().split(" ", 1) for part in CONTENT_SECURITY_POLICY.split(";"))
    assert policy["script-src"] == "'self'" and policy["default-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"


def test_the_per_run_api_is_404_for_an_unknown_run(client, demo_url):
    known = client.get(f"/api/runs/{a_run(demo_url)}/version")
    assert known.status_code == 200 and known.json()["version"]
    missing = client.get("/api/runs/no_such_run/version")
    assert missing.status_code == 404 and missing.json() == {"error": "no run 'no_such_run' in the warehouse"}


def test_a_server_error_carries_the_headers(demo_url, monkeypatch):
    """A bug in a handler (no handler takes it): a 500, still with every header."""
    from starlette.testclient import TestClient

    from warehouse.serve import data
    from warehouse.serve.app import create_app

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(data, "runs_page", broken)
    monkeypatch.setattr(data, "violations", broken)
    with TestClient(create_app(demo_url), raise_server_exceptions=False) as c:
        for path in ("/", "/quality"):
            response = c.get(path)
            assert response.status_code == 500 and "a bug" not in response.text
            assert_secured(response)


@pytest.mark.parametrize("query", ["round=99999999999", "round=-99999999999", "tokens_min=99999999999999999999",
                                   "offset=99999999999999999999"])
def test_a_number_out_of_range_is_a_400_in_a_line(client, demo_url, query):
    run_id = a_run(demo_url)
    response = client.get(f"/runs/{run_id}/nodes?{query}")
    assert response.status_code == 400, response.text[:300]
    assert "out of range" in response.text and query.split("=")[0] in response.text
    assert_secured(response)


@pytest.mark.parametrize("path", ["/compare?k=99999999999", "/runs/RUN/nodes/n1?round=99999999999"])
def test_a_number_out_of_range_elsewhere_is_a_400_too(client, demo_url, path):
    response = client.get(path.replace("RUN", a_run(demo_url)))
    assert response.status_code == 400 and "out of range" in response.text, response.text[:300]
    assert_secured(response)
