"""Scripted client sequences of /aotx/v1/shared as data, a model of the rules, and a runner.

Used by `aotx drill`, the HTTP property tests (tests/shared_http), the session tests
(tests/scenarios) and the benchmarks (ops/bench). Hand-written multi-participant sessions live
in scenarios/data/*.json (`load`).

Files: client.py (transports, parties), vocabulary.py / canonical.py / records.py / model.py (the rule
model), retry.py (unknown outcomes), ledgers.py (what was acknowledged, what must still be readable),
reads.py / sse.py / memory_checks.py (reads checked against the model), steps.py (the steps table),
runner.py (the driver), script.py (generated and hand-written scripts).
"""
from .client import Answer, HttpTransport, Party, QuartTransport, TransportError, new_key, parse_sse
from .ledgers import Sent, receipt_change, same_receipt
from .model import Model, memory_object
from .runner import Runner
from .script import generate, load, steps_of
from .violation import ScenarioViolation

__all__ = ["Answer", "HttpTransport", "Model", "Party", "QuartTransport", "Runner", "ScenarioViolation", "Sent",
           "TransportError", "generate", "load", "memory_object", "new_key", "parse_sse", "receipt_change",
           "same_receipt", "steps_of"]
