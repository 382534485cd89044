"""A tool's parameter schema must be a JSON Schema: checked against its metaschema with `jsonschema`.

The dialect is the schema's own `$schema` when it names one jsonschema knows (draft 3 to 2020-12;
zod and pydantic emit draft-07), else Draft 2020-12, the dialect both the OpenAI and the Anthropic
APIs document for tool schemas. Only the schema's shape is checked here: arguments the model
produces are not validated against it.
"""
from __future__ import annotations

from jsonschema.exceptions import SchemaError
from jsonschema.validators import Draft202012Validator, validator_for

from api.fields import bad

_MESSAGE_MAX = 200


def check_tool_schema(schema: dict, param: str) -> None:
    """400 naming `param` (e.g. `tools[0].function.parameters`) unless `schema` is a valid JSON Schema."""
    dialect = schema.get("$schema")
    if dialect is not None and not isinstance(dialect, str):
        raise bad(param, f"'{param}' is not a valid JSON Schema: '$schema' must be a URI string.")
    validator = validator_for(schema, default=Draft202012Validator)
    try:
        validator.check_schema(schema)
    except SchemaError as exc:
        detail = exc.message if len(exc.message) <= _MESSAGE_MAX else exc.message[:_MESSAGE_MAX] + "…"
        where = exc.json_path.replace("$", param, 1)
        raise bad(param, f"'{param}' is not a valid JSON Schema: {detail} (at '{where}').") from None
