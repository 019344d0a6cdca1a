from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.moves_helpers import role_group


def viewer(username: str, password: str = "x") -> User:
    user = User.objects.create_user(username, password=password)
    user.groups.add(role_group("viewers"))
    return user


@pytest.mark.django_db
def test_login_page_logs_in_and_lands_on_the_overview(client: Client) -> None:
    viewer("ada", password="correct horse battery")
    page = client.get("/login/")
    assert b"Sign in" in page.content
    response = client.post("/login/", {"username": "ada", "password": "correct horse battery"})
    assert response.status_code == 302
    assert response["Location"] == "/"
    home = client.get("/")
    assert home.status_code == 200
    assert b"Overview" in home.content
    assert b"ada" in home.content


@pytest.mark.django_db
def test_wrong_password_shows_an_error_and_logs_nobody_in(client: Client) -> None:
    User.objects.create_user("ada", password="correct horse battery")
    response = client.post("/login/", {"username": "ada", "password": "wrong"})
    assert response.status_code == 200
    assert b"did not match" in response.content
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_logout_is_a_post(client: Client) -> None:
    user = User.objects.create_user("ada", password="x")
    client.force_login(user)
    assert client.get("/logout/").status_code == 405
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_page_says_when_no_cluster_is_configured(client: Client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = ""
    settings.KUBE_IN_CLUSTER = False
    client.force_login(viewer("ada"))
    assert b"No cluster configured" in client.get("/").content
