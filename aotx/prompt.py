"""Surface-neutral chat messages -> the role/content dicts the chat template renders.

Pure: no tokenizer, no template. `ModelService.chat_prompt` runs the result
through the GGUF chat template (ChatML for SmolLM2: every dict becomes
`<|im_start|>{role}\n{content}<|im_end|>`).
"""
from __future__ import annotations

from typing import Sequence

from aotx.chat_types import ChatMessage, ToolSpec
from aotx.tool_calls import render_assistant_tool_calls, render_tool_result, render_tools_system

# Tool results are sent as role "user", not "tool". The template would render a
# "tool" role verbatim, but SmolLM2 was only trained on system/user/assistant
# turns; an unseen role name is out of distribution, whereas a user turn holding
# <tool_response> blocks is the Hermes/Qwen convention the tool prompt teaches.
# Consecutive results (parallel calls) share one user turn, as in that convention.
TOOL_RESULT_ROLE = "user"


def _assistant_text(message: ChatMessage) -> str:
    if not message.tool_calls:
        return message.content
    calls = render_assistant_tool_calls(message.tool_calls)
    return f"{message.content}\n{calls}" if message.content else calls


def build_template_messages(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (),
                            tool_choice: str | None = None) -> list[dict]:
    """The template-ready conversation: tools merged into the first system message
    (or added as one), assistant calls and tool results rendered as text."""
    out: list[dict] = []
    tools_text = render_tools_system(tools, tool_choice)
    merged = not tools_text
    previous_was_tool = False
    for message in messages:
        if message.role == "tool":
            block = render_tool_result(message.content, message.name)
            if previous_was_tool:
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": TOOL_RESULT_ROLE, "content": block})
            previous_was_tool = True
            continue
        previous_was_tool = False
        if message.role == "system":
            content = message.content
            if not merged:
                content = f"{content}\n\n{tools_text}" if content else tools_text
                merged = True
            out.append({"role": "system", "content": content})
        elif message.role == "assistant":
            out.append({"role": "assistant", "content": _assistant_text(message)})
        else:
            out.append({"role": message.role, "content": message.content})
    if not merged:
        out.insert(0, {"role": "system", "content": tools_text})
    return out
