import pytest

from eventlog import EmbeddedNats


@pytest.fixture(scope="module")
def nats_url(tmp_path_factory):
    with EmbeddedNats(tmp_path_factory.mktemp("nats")) as server:
        yield server.url
