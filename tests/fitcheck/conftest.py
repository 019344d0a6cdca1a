"""Fixtures shared with the API tests."""

from tests.api.conftest import token_for  # noqa: F401 (a fixture)
