"""The object-store fixture of tests/cloud, for the tests that run on every store."""

from tests.cloud.conftest import cloud

__all__ = ["cloud"]
