"""Structured outputs end to end: the official SDKs' own helpers against `aotx serve` and the real
model. Every output is checked against its schema with `jsonschema`; a budget cut is reported as
`length` (the SDKs' parse helpers then raise), never as a valid answer."""
from __future__ import annotations

import json

import anthropic
import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

MODEL = "smollm2-135m-instruct"


class City(BaseModel):
    name: str = Field(max_length=20)
    country: str = Field(max_length=20)
    population: int = Field(ge=0, le=50_000_000)


class Capital(BaseModel):
    city: str
    country: str


class GetWeather(BaseModel):
    city: str = Field(max_length=20)
    unit: str = Field(pattern="^(celsius|fahrenheit)$")


ASK_CITY = [{"role": "user", "content": "Give me the capital of France as JSON."}]
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]
# closed objects, as the SDKs' strict transforms send them: an open one lets a small model add keys
# until its budget ends (valid JSON so far, but cut: `length`)
CITY_SCHEMA = {**City.model_json_schema(), "additionalProperties": False}
WEATHER_SCHEMA = {**GetWeather.model_json_schema(), "additionalProperties": False}


def test_chat_parse_with_a_pydantic_model(openai_client):
    r = openai_client.chat.completions.parse(model=MODEL, messages=ASK_CITY, response_format=City,
                                             temperature=0, max_tokens=64)
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(choice.message.parsed, City)
    jsonschema.validate(json.loads(choice.message.content), CITY_SCHEMA)


def test_chat_stream_helper_with_a_pydantic_model(openai_client):
    with openai_client.chat.completions.stream(model=MODEL, messages=ASK_CITY, response_format=City,
                                               temperature=0.8, seed=3, max_tokens=64) as stream:
        final = stream.get_final_completion()
    assert isinstance(final.choices[0].message.parsed, City)
    jsonschema.validate(json.loads(final.choices[0].message.content), CITY_SCHEMA)


def test_chat_json_object_mode(openai_client):
    r = openai_client.chat.completions.create(model=MODEL, messages=ASK_CITY, temperature=0, max_tokens=64,
                                              response_format={"type": "json_object"})
    choice = r.choices[0]
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict)
    else:
        assert choice.finish_reason == "length" and choice.message.content.startswith("{")


def test_a_budget_cut_says_length_and_parse_raises(openai_client):
    with pytest.raises(openai.LengthFinishReasonError):
        openai_client.chat.completions.parse(model=MODEL, messages=ASK_CITY, response_format=City,
                                             temperature=0, max_tokens=4)


def test_completions_response_format_extension(openai_client):
    fmt = {"type": "json_schema", "json_schema": {"name": "City", "schema": CITY_SCHEMA, "strict": True}}
    r = openai_client.completions.create(model=MODEL, prompt="The capital of France as JSON:", max_tokens=64,
                                         temperature=0, extra_body={"response_format": fmt})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].text), CITY_SCHEMA)


def test_unenforceable_schema_is_a_400_naming_the_param(openai_client):
    fmt = {"type": "json_schema", "json_schema": {"name": "X", "schema": {
        "type": "object", "properties": {"d": {"type": "string", "format": "no-such-format"}}}}}
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.chat.completions.create(model=MODEL, messages=ASK_CITY, response_format=fmt)
    assert exc.value.body["param"] == "response_format.json_schema.schema"


def test_responses_parse_with_text_format(openai_client):
    r = openai_client.responses.parse(model=MODEL, input="Give me the capital of France as JSON.",
                                      text_format=City, temperature=0, max_output_tokens=64)
    assert r.status == "completed" and isinstance(r.output_parsed, City)
    jsonschema.validate(json.loads(r.output_text), CITY_SCHEMA)
    with openai_client.responses.stream(model=MODEL, input="Give me the capital of Italy as JSON.",
                                        text_format=City, temperature=0, max_output_tokens=64) as stream:
        final = stream.get_final_response()
    assert isinstance(final.output_parsed, City)


def test_anthropic_output_config_json_schema(anthropic_client):
    r = anthropic_client.messages.create(model=MODEL, max_tokens=64, messages=ASK_CITY,
                                         output_config={"format": {"type": "json_schema", "schema": CITY_SCHEMA}})
    assert r.stop_reason == "end_turn"
    jsonschema.validate(json.loads(r.content[0].text), CITY_SCHEMA)
    # the SDK strips bounds Anthropic's API does not take (maxLength, maximum) from the schema it
    # sends and checks them itself afterwards: a model with none to strip
    parsed = anthropic_client.messages.parse(model=MODEL, max_tokens=64, messages=ASK_CITY, output_format=Capital,
                                             extra_body={"temperature": 0})
    assert parsed.stop_reason == "end_turn" and isinstance(parsed.parsed_output, Capital)


def test_anthropic_unenforceable_schema_is_a_400(anthropic_client):
    bad = {"type": "object", "properties": {"d": {"type": "string", "format": "no-such-format"}}}
    with pytest.raises(anthropic.BadRequestError) as exc:
        anthropic_client.messages.create(model=MODEL, max_tokens=8, messages=ASK_CITY,
                                         output_config={"format": {"type": "json_schema", "schema": bad}})
    assert "output_config.format.schema" in exc.value.message


def test_chat_strict_tool_buffered_and_streamed(openai_client):
    tool = openai.pydantic_function_tool(GetWeather)
    assert tool["function"]["strict"] is True
    kw = {"model": MODEL, "messages": ASK_WEATHER, "tools": [tool], "tool_choice": "required", "temperature": 0.7,
              "seed": 5, "max_tokens": 64}
    r = openai_client.chat.completions.parse(**kw)
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and call.function.name == "GetWeather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER_SCHEMA)
    assert isinstance(call.function.parsed_arguments, GetWeather)
    with openai_client.chat.completions.stream(**kw) as stream:
        final = stream.get_final_completion()
    streamed = final.choices[0].message.tool_calls[0]
    assert streamed.function.arguments == call.function.arguments     # same seed: the same call
    assert isinstance(streamed.function.parsed_arguments, GetWeather)


def test_responses_strict_tool_buffered_and_streamed(openai_client):
    tool = {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA, "strict": True}
    kw = {"model": MODEL, "input": "What is the weather in Paris?", "tools": [tool], "tool_choice": "auto",
              "temperature": 0, "max_output_tokens": 64}
    r = openai_client.responses.create(**kw)
    with openai_client.responses.stream(**kw) as stream:
        final = stream.get_final_response()
    for out in (r, final):
        for item in out.output:
            if item.type == "function_call":
                jsonschema.validate(json.loads(item.arguments), WEATHER_SCHEMA)
    assert [getattr(o, "arguments", None) for o in r.output] == [getattr(o, "arguments", None) for o in final.output]


def test_anthropic_strict_tool(anthropic_client):
    tool = {"name": "get_weather", "input_schema": WEATHER_SCHEMA, "strict": True}
    kw = {"model": MODEL, "max_tokens": 64, "messages": ASK_WEATHER, "tools": [tool], "tool_choice": {"type": "any"}}
    r = anthropic_client.messages.create(**kw)
    uses = [b for b in r.content if b.type == "tool_use"]
    assert r.stop_reason == "tool_use" and uses
    jsonschema.validate(uses[0].input, WEATHER_SCHEMA)
    with anthropic_client.messages.stream(**kw) as stream:
        final = stream.get_final_message()
    for block in final.content:
        if block.type == "tool_use":
            jsonschema.validate(block.input, WEATHER_SCHEMA)


def test_anthropic_output_config_streamed(anthropic_client):
    with anthropic_client.messages.stream(model=MODEL, max_tokens=64, messages=ASK_CITY, extra_body={"temperature": 0},
                                          output_config={"format": {"type": "json_schema", "schema": CITY_SCHEMA}}) as s:
        final = s.get_final_message()
    assert final.stop_reason == "end_turn"
    jsonschema.validate(json.loads(final.content[0].text), CITY_SCHEMA)
