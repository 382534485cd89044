import pytest

from kernels import ChatTemplate, ChatTemplateError

FRANCE = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
          "<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
          "<|im_start|>assistant\n")


def test_france_prompt(bundle):
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    assert bundle.chat_template.render(msgs) == FRANCE
    assert bundle.chat_template.render(msgs, add_generation_prompt=False) == FRANCE.removesuffix(
        "<|im_start|>assistant\n")


def test_own_system_message_replaces_default(bundle):
    text = bundle.chat_template.render([{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": "Hi"}])
    assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert "SmolLM" not in text


def test_helpers_and_extra():
    t = ChatTemplate("{% if not messages %}{{ raise_exception('no messages') }}{% endif %}"
                     "{{ strftime_now('%Y')|length }} {{ tools|tojson }} {{ bos_token }}",
                     bos_token="<s>")
    assert t.render([{"role": "user", "content": "x"}], tools=[{"name": "é"}]) == '4 [{"name": "é"}] <s>'
    with pytest.raises(ChatTemplateError, match="no messages"):
        t.render([], tools=None)


def test_sandbox_blocks_attribute_escape():
    t = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(ChatTemplateError):
        t.render([])
