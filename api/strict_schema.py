"""OpenAI's strict-mode normalization of a function tool's schema (the Responses API's default).

OpenAI's function-calling guide: a Responses request that omits a function tool's `strict`
"will normalize your schema into strict mode (for example, by setting additionalProperties: false
and marking all fields as required)"; Chat Completions stays non-strict by default, and
`strict: false` opts out. `normalized` does that to a copy: every object schema that lists
`properties` gets all of them in `required` and, unless it says otherwise, `additionalProperties:
false`; nested schemas (properties, items, combinators, definitions) are treated the same.
"""
from __future__ import annotations

_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_ONE = ("items", "additionalProperties", "not")


def normalized(schema: object) -> object:
    """A copy of `schema` in strict mode (the input is not changed)."""
    if isinstance(schema, list):
        return [normalized(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: normalized(v) for k, v in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [normalized(s) for s in out[key]]
    for key in _SCHEMA_ONE:
        if isinstance(out.get(key), dict):
            out[key] = normalized(out[key])
    if isinstance(out.get("properties"), dict):
        out["required"] = list(out["properties"])
        out.setdefault("additionalProperties", False)
    return out
