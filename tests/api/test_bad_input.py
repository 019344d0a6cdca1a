"""Hostile or oversized input is the client's error, said in the API's error shape; a bug is a
JSON 500 in that shape too (pages keep HTML)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest
from django.test import Client
from rest_framework.test import APIRequestFactory

from pools.api.errors import exception_handler
from tests.api.conftest import api
from tests.moves_helpers import user_in

JSON = "application/json"


def error_of(response) -> dict:  # type: ignore[no-untyped-def,type-arg]
    assert response["Content-Type"] == JSON, response.content[:200]
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields"}, body
    return body["error"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/moves/", "/api/v1/moves/dry-run/", "/api/v1/pools/"])
def test_json_nested_a_thousand_deep_is_a_400(token_for: Callable[[str], str], path: str) -> None:
    body = "[" * 1000 + "]" * 1000
    response = api(token_for("pool-admins")).post(path, body, content_type=JSON)
    assert response.status_code == 400
    assert error_of(response)["code"] == "malformed_request"


@pytest.mark.django_db
def test_a_body_over_the_limit_is_a_json_413(token_for: Callable[[str], str], settings) -> None:  # type: ignore[no-untyped-def]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps({"nodes": ["a"], "destination": "training", "reason": "x" * 20_000})
    response = api(token_for("requesters")).post("/api/v1/moves/", body, content_type=JSON)
    assert response.status_code == 413
    error = error_of(response)
    assert error["code"] == "body_too_large" and "10,000 bytes" in error["message"]


@pytest.mark.django_db
@pytest.mark.parametrize("value", [str(10**30), "1e30", "-1", "1.5"])
def test_an_id_filter_out_of_range_is_a_400_on_the_api_and_the_page(
    token_for: Callable[[str], str], value: str
) -> None:
    response = api(token_for("viewers")).get(f"/api/v1/audit-events/?request={value}")
    assert response.status_code == 400
    assert "request" in error_of(response)["fields"]
    page = Client()
    page.force_login(user_in("viewers"))
    response = page.get(f"/audit/?request={value}")
    assert response.status_code == 400
    assert "Filter &#x27;request&#x27;" in response.content.decode()


@pytest.mark.django_db
def test_a_page_filter_that_does_not_parse_is_a_400_not_an_unfiltered_list() -> None:
    page = Client()
    page.force_login(user_in("viewers"))
    assert page.get("/moves/?state=all&mine=maybe").status_code == 400
    assert page.get("/pools/training/?ready=maybe").status_code == 400
    assert page.get("/pools/training/?ready=true").status_code == 200


def test_an_unexpected_error_in_the_api_is_a_json_500_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = APIRequestFactory().get("/api/v1/nodes/")
    with caplog.at_level(logging.ERROR, logger="pools.api"):
        response = exception_handler(ZeroDivisionError("boom"), {"request": request})
    assert response is not None and response.status_code == 500
    assert response.data == {
        "error": {
            "code": "server_error",
            "message": "Unexpected error on the server; it has been logged.",
            "fields": {},
        }
    }
    (record,) = caplog.records
    assert record.exc_info and record.exc_info[0] is ZeroDivisionError
