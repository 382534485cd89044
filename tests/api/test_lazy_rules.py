"""The app's URL rules compile their builders on first use (api.lazy_rules), and build the same URLs."""
from __future__ import annotations

import pytest
from quart import Quart
from werkzeug.routing import Rule

from api.app import create_app
from api.settings import GatewaySettings
from tests.api.fake_service import FakeService


@pytest.fixture
def compiles(monkeypatch):
    calls = []
    real = Rule._compile_builder

    def counted(self, append_unknown=True):
        calls.append(self.rule)
        return real(self, append_unknown)

    monkeypatch.setattr(Rule, "_compile_builder", counted)
    return calls


def test_creating_the_app_compiles_no_url_builder(compiles):
    app = create_app(FakeService(), GatewaySettings())
    assert len(list(app.url_map.iter_rules())) > 20 and compiles == []
    urls = app.url_map.bind("h")
    assert urls.build("ops.get_model", {"model": "a/b"}) == "/v1/models/a/b"
    assert urls.build("ops.get_model", {"model": "m", "q": "1 2"}) == "/v1/models/m?q=1+2"   # the unknown-args builder
    assert compiles == ["/v1/models/<path:model>"]              # that rule's builder, once
    assert urls.build("ops.get_model", {"model": "n", "q": "2"}, append_unknown=False) == "/v1/models/n"
    assert compiles == ["/v1/models/<path:model>"] * 2          # its other builder, once
    assert urls.build("ops.get_model", {"model": "p"}) == "/v1/models/p"
    assert len(compiles) == 2                                    # both kept


def test_lazy_builders_build_what_werkzeug_builds():
    lazy, eager = create_app(FakeService(), GatewaySettings()), Quart("eager")
    for rule in lazy.url_map.iter_rules():
        eager.add_url_rule(rule.rule, rule.endpoint, lambda **_: "", methods=rule.methods)
    lazy_urls, eager_urls = lazy.url_map.bind("h"), eager.url_map.bind("h")
    for rule in lazy.url_map.iter_rules():
        for extra in ({}, {"x": "1"}):
            values = {arg: "v 1" for arg in rule.arguments} | extra
            assert lazy_urls.build(rule.endpoint, values) == eager_urls.build(rule.endpoint, values)
