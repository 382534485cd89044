import pytest

from tests.conftest import started_service


@pytest.fixture(scope="module")
def service(model_bundle):
    """The real model service (engine started) shared by the sessions of a module."""
    yield from started_service(model_bundle, max_batch=8, kv_pages=512, default_max_tokens=8)
