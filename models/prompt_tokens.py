"""Tokenise a chat prompt so that only the chat template's own markers become control tokens.

llama.cpp reads the text of a control token (`<|im_start|>`, `<|eot_id|>`, `[INST]`…, whatever the
GGUF's vocabulary marks as control) as that token when it tokenises with `special=True`, which a
rendered chat template needs for its role markers. But the same text inside a message (an imported
page, a recalled memory, a pasted log) would then forge a role: `<|im_start|>system …` in a page
became a real system turn. So the message contents are masked before the template renders them:
each special string in a content becomes a placeholder (`MaskedPrompt`), the template runs, and the
rendered text is tokenised piece by piece: the template's text with `special=True`, each placeholder
as the original string with `special=False`, i.e. as the plain characters it is. A content without
any special string renders and tokenises exactly as before, so the KV-cache prefix of an ordinary
chat is unchanged.

Which strings are special comes from the vocabulary, for any GGUF: every control or unknown token,
and the user-defined tokens the template itself writes, whitespace aside (a converter may mark a role marker so;
llama.cpp reads those as the token even with `special=False`, so such a string is split before its
first character instead).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# llama.cpp's token attributes (llama.h, enum llama_token_attr)
ATTR_UNKNOWN = 1 << 0
ATTR_CONTROL = 1 << 3
ATTR_USER_DEFINED = 1 << 4

# A placeholder is MARK_OPEN, the index of the masked string, MARK_CLOSE: private-use characters, which
# no template writes. A MARK_OPEN already in a content is masked too, so every one in the render is ours.
MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"
_PLACEHOLDER = re.compile(f"{MARK_OPEN}(\\d+){MARK_CLOSE}")

Tokenize = Callable[[str, bool, bool], list[int]]  # (text, add_bos, special) -> token ids


@dataclass(frozen=True)
class SpecialTokens:
    """The strings of a vocabulary that llama.cpp would read as special tokens, and their ids."""

    texts: tuple[str, ...]  # longest first, so a longer marker is matched before its prefix
    ids: frozenset[int]
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        alternatives = [re.escape(t) for t in self.texts] + [re.escape(MARK_OPEN)]
        object.__setattr__(self, "pattern", re.compile("|".join(alternatives)))

    @classmethod
    def from_vocabulary(cls, vocabulary: Iterable[tuple[int, int, str]], template_text: str = "") -> SpecialTokens:
        """From (id, attributes, text) of every token; `template_text`: what the chat template writes
        around the messages (its user-defined tokens that occur there count as markers)."""
        found: dict[str, int] = {}
        for token_id, attrs, text in vocabulary:
            if not text:
                continue
            marker = attrs & ATTR_USER_DEFINED and text in template_text and not any(c.isspace() for c in text)
            if attrs & (ATTR_CONTROL | ATTR_UNKNOWN) or marker:
                found.setdefault(text, token_id)
        texts = tuple(sorted(found, key=lambda t: (-len(t), t)))
        return cls(texts, frozenset(found.values()))

    def mask(self, content: str, masked: list[str]) -> str:
        """`content` with each special string (and each MARK_OPEN) replaced by a placeholder; the
        originals are appended to `masked`, whose index the placeholder holds."""
        if not self.texts and MARK_OPEN not in content:
            return content

        def placeholder(match: re.Match[str]) -> str:
            masked.append(match.group(0))
            return f"{MARK_OPEN}{len(masked) - 1}{MARK_CLOSE}"

        return self.pattern.sub(placeholder, content)

    def tokenize(self, rendered: str, masked: Sequence[str], tokenize: Tokenize, *, add_bos: bool) -> list[int]:
        """Token ids of a template's output whose contents were masked: the template's text with
        special tokens, each masked string as plain text."""
        if not masked:
            return tokenize(rendered, add_bos, True)
        tokens: list[int] = []
        at = 0
        for match in _PLACEHOLDER.finditer(rendered):
            if match.start() > at:
                tokens += tokenize(rendered[at : match.start()], add_bos and not tokens, True)
            tokens += self.plain(masked[int(match.group(1))], tokenize)
            at = match.end()
        if at < len(rendered):
            tokens += tokenize(rendered[at:], add_bos and not tokens, True)
        return tokens

    def plain(self, text: str, tokenize: Tokenize) -> list[int]:
        """`text` as ordinary tokens. llama.cpp reads a user-defined token's text as that token even
        without `special`; where that gives a special id, the text is split after its first character."""
        tokens = tokenize(text, False, False)
        if len(text) > 1 and any(t in self.ids for t in tokens):
            return tokenize(text[:1], False, False) + self.plain(text[1:], tokenize)
        return tokens


def mask_messages(
    messages: Sequence[Mapping[str, str]], specials: SpecialTokens
) -> tuple[list[dict[str, str]], list[str]]:
    """The messages with their contents masked (`SpecialTokens.mask`), and the masked strings."""
    masked: list[str] = []
    out = []
    for m in messages:
        d = dict(m)
        if isinstance(d.get("content"), str):
            d["content"] = specials.mask(d["content"], masked)
        out.append(d)
    return out, masked
