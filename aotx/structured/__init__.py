"""Structured outputs: a request's constraint (a JSON schema, any JSON object, a tool call) compiled
once into an llguidance grammar, and the per-row matcher that the engine advances with every sampled
token and asks for the next token's bitmask.

Only this package knows llguidance. The engine sees a `Constraint` (SamplingParams.constraint) and
the `RowMatcher` it starts; kernels see a bare uint32 bitmask (kernels/token_mask.py).
"""
from aotx.structured.compiler import ConstraintCompiler, ConstraintError
from aotx.structured.constraint import Constraint, RowMatcher

__all__ = ["Constraint", "ConstraintCompiler", "ConstraintError", "RowMatcher"]
