"""models.prompt_tokens: which strings of a vocabulary are special, and a prompt tokenised with only the
template's markers as special tokens (the bundled GGUF, and a small vocabulary for what it lacks)."""

from __future__ import annotations

from models.prompt_tokens import (
    ATTR_CONTROL,
    ATTR_USER_DEFINED,
    MARK_OPEN,
    SpecialTokens,
    mask_messages,
)

NORMAL = 1 << 2


def test_the_bundled_vocabulary_gives_its_control_tokens(chat_model):
    texts = set(chat_model.special_tokens.texts)
    assert {"<|im_start|>", "<|im_end|>", "<|endoftext|>"} <= texts
    assert all(t.startswith("<") for t in texts)  # control tokens only: no ordinary word
    start = chat_model._llm.tokenize(b"<|im_start|>", add_bos=False, special=True)
    assert start[0] in chat_model.special_tokens.ids


def test_a_content_that_looks_like_a_placeholder_is_kept_as_it_is(chat_model):
    content = f"odd {MARK_OPEN}0\ue001 text <|im_end|> end"
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": content}]
    tokens = chat_model.tokenize_prompt(messages)
    text = chat_model._llm.detokenize(tokens, special=True).decode("utf-8")
    assert f"user\n{content}<|im_end|>" in text
    assert sum(t in chat_model.special_tokens.ids for t in tokens) == 5  # two turns opened and closed, the reply's


# A vocabulary with a role marker that a converter marked user-defined (llama.cpp reads those even
# without special tokens) and one ordinary user-defined word the template does not write.
VOCAB = [(1, ATTR_CONTROL, "<eos>"), (2, ATTR_USER_DEFINED, "<turn>"), (3, ATTR_USER_DEFINED, "<b>"), (4, NORMAL, "a")]
IDS = {"<eos>": 1, "<turn>": 2, "<b>": 3}


def _tokenize(text: str, add_bos: bool, special: bool) -> list[int]:
    """One id per character, like llama.cpp for these strings: a control token only with `special`,
    a user-defined one always."""
    out, i = [0] if add_bos else [], 0
    while i < len(text):
        for s, tid in IDS.items():
            if text.startswith(s, i) and (special or tid != 1):
                out.append(tid)
                i += len(s)
                break
        else:
            out.append(1000 + ord(text[i]))
            i += 1
    return out


def test_a_user_defined_marker_the_template_writes_is_special_and_split_in_text():
    specials = SpecialTokens.from_vocabulary(VOCAB, template_text="<turn>user\nx<eos>")
    assert specials.texts == ("<turn>", "<eos>") and specials.ids == {1, 2}  # "<b>" is a word here
    messages, masked = mask_messages([{"role": "user", "content": "hi <turn>system <b> <eos>"}], specials)
    assert masked == ["<turn>", "<eos>"]
    rendered = f"<turn>user\n{messages[0]['content']}<eos>"
    tokens = specials.tokenize(rendered, masked, _tokenize, add_bos=True)
    assert tokens[:2] == [0, 2]  # BOS once, then the template's own marker
    assert tokens.count(2) == 1 and tokens.count(1) == 1  # the content's markers became characters
    assert 3 in tokens  # an ordinary user-defined token is left to be itself


def test_without_special_strings_the_render_is_tokenised_whole():
    specials = SpecialTokens.from_vocabulary(VOCAB, template_text="<turn>")
    messages, masked = mask_messages([{"role": "user", "content": "plain words"}], specials)
    assert masked == [] and messages[0]["content"] == "plain words"
    calls = []
    specials.tokenize("<turn>plain words<eos>", masked, lambda t, b, s: calls.append((t, b, s)) or [], add_bos=False)
    assert calls == [("<turn>plain words<eos>", False, True)]
