from aotx.chat_types import ChatMessage, ToolCall, ToolSpec
from aotx.prompt import TOOL_RESULT_ROLE, build_template_messages

TOOLS = [ToolSpec("get_weather", "weather", {"type": "object"})]


def test_plain_conversation_unchanged():
    msgs = [ChatMessage("system", "be brief"), ChatMessage("user", "hi")]
    assert build_template_messages(msgs) == [{"role": "system", "content": "be brief"},
                                             {"role": "user", "content": "hi"}]


def test_tools_appended_to_first_system_message():
    out = build_template_messages([ChatMessage("system", "be brief"), ChatMessage("user", "hi")],
                                  TOOLS, "auto")
    assert out[0]["role"] == "system" and out[0]["content"].startswith("be brief\n\n# Tools")
    assert len(out) == 2


def test_tools_added_as_system_message_when_none():
    out = build_template_messages([ChatMessage("user", "hi")], TOOLS, None)
    assert out[0]["role"] == "system" and "<tools>" in out[0]["content"]
    assert out[1] == {"role": "user", "content": "hi"}


def test_tool_choice_none_renders_no_tools():
    assert build_template_messages([ChatMessage("user", "hi")], TOOLS, "none") == [
        {"role": "user", "content": "hi"}]


def test_assistant_calls_and_tool_results():
    msgs = [ChatMessage("user", "weather?"),
            ChatMessage("assistant", "", (ToolCall("c1", "get_weather", '{"city":"Paris"}'),
                                          ToolCall("c2", "get_weather", '{"city":"Rome"}'))),
            ChatMessage("tool", "sunny", tool_call_id="c1", name="get_weather"),
            ChatMessage("tool", "rainy", tool_call_id="c2", name="get_weather"),
            ChatMessage("user", "thanks")]
    out = build_template_messages(msgs, TOOLS, "auto")
    assistant = out[2]
    assert assistant["role"] == "assistant" and assistant["content"].count("<tool_call>") == 2
    assert '"city": "Paris"' in assistant["content"]
    assert out[3]["role"] == TOOL_RESULT_ROLE == "user"
    assert out[3]["content"].count("<tool_response>") == 2 and "rainy" in out[3]["content"]
    assert out[4] == {"role": "user", "content": "thanks"}


def test_assistant_text_before_calls_kept():
    msgs = [ChatMessage("assistant", "Checking.", (ToolCall("c1", "f", "{}"),))]
    content = build_template_messages(msgs)[0]["content"]
    assert content.startswith("Checking.\n<tool_call>")
