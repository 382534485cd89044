"""Scripted client sequences of /aotx/v1/shared as data, a model of the rules, and a runner.

Used by `aotx drill`, the HTTP property tests (tests/shared_http), the session tests
(tests/scenarios) and the benchmarks (ops/bench). Hand-written multi-participant sessions live
in scenarios/data/*.json (`load`).
"""
from .client import Answer, HttpTransport, Party, QuartTransport, TransportError, new_key, parse_sse
from .model import Model, memory_object
from .runner import Runner, ScenarioViolation, Sent, receipt_change, same_receipt
from .script import generate, load, steps_of

__all__ = ["Answer", "HttpTransport", "Model", "Party", "QuartTransport", "Runner", "ScenarioViolation", "Sent",
           "TransportError", "generate", "load", "memory_object", "new_key", "parse_sse", "receipt_change",
           "same_receipt", "steps_of"]
