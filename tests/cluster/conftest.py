import pytest

from eventlog import EmbeddedCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three nats-servers on loopback in one JetStream cluster (module-scoped: ~2 s to start)."""
    with EmbeddedCluster(tmp_path_factory.mktemp("cluster")) as c:
        yield c


def node_named(cluster: EmbeddedCluster, server_name: str):
    return next(n for n in cluster.nodes if n.settings.server_name == server_name)
