import asyncio

import pytest

from aotx.serving import ModelService, ServiceConfig
from eventlog import EmbeddedNats


@pytest.fixture(scope="module")
def nats_url(tmp_path_factory):
    with EmbeddedNats(tmp_path_factory.mktemp("nats")) as server:
        yield server.url


@pytest.fixture(scope="module")
def service(model_bundle):
    """The real model service (engine started) shared by the sessions of a module."""
    svc = ModelService.load(ServiceConfig(max_batch=8, kv_pages=512, default_max_tokens=8), bundle=model_bundle,
                            progress=False)
    svc.start()
    yield svc
    asyncio.run(svc.stop())
