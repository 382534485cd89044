"""URL rules whose builders are compiled on first use.

werkzeug compiles two URL builders per rule (``ast`` + ``compile()``, ~0.5 ms each) when the rule is
bound to the app's map, whether or not any URL is ever built; our routes never build URLs on the request
path. ``LazyRule`` builds each builder the first time it is called, so creating an app costs its rules'
regexes only (the suite creates apps per test: ~10 s of CPU, docs/PERFORMANCE.md "Test time, session
12"), and the builders' ``compile()`` (the frame where CPython gh-106905's "AST constructor recursion
depth mismatch" was seen under threads) no longer runs at app creation."""
from __future__ import annotations

from quart.routing import QuartRule


class LazyRule(QuartRule):
    def _compile_builder(self, append_unknown: bool = True):
        compile_now = super()._compile_builder
        built = []

        def build(rule, **values):
            if not built:
                built.append(compile_now(append_unknown).__get__(rule, None))
            return built[0](**values)

        return build
