import pytest

from tests.conftest import started_service


@pytest.fixture(scope="module")
def service(model_bundle):
    """The real model service (engine started) for the input and media tests of a module."""
    yield from started_service(model_bundle, max_batch=4, kv_pages=256, default_max_tokens=8)
