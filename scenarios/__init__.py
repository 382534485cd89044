"""Scripted client sequences of /aotx/v1/shared as data, a model of the rules, and a runner.

Used by `aotx drill`, the HTTP property tests (tests/shared_http) and the mutation benchmark.
"""
from .client import Answer, HttpTransport, Party, QuartTransport, TransportError, new_key
from .model import Model
from .runner import Runner, ScenarioViolation, Sent
from .script import generate, load, steps_of

__all__ = ["Answer", "HttpTransport", "Model", "Party", "QuartTransport", "Runner", "ScenarioViolation", "Sent",
           "TransportError", "generate", "load", "new_key", "steps_of"]
