"""First-person statements as facts about someone: "I moved to Lyon last month." → "The user moved to Lyon
last month." (or "Caroline moved to Lyon last month." for a named person's side of a dialogue).

The LLM-free persona path quotes what a speaker said about themselves; a quote ("The user said: …") reads
as a transcript, not as something known, and a prompt that quotes it puts the speaker's "I" beside the
assistant's. The rewrite is extractive and word by word: the speaker's pronouns become the subject's name
("I" → the subject, "my" → "their", "me" → the subject), and the verb right after "I" takes the third
person ("I love" → "loves", "I'm" → "is", "I've" → "has"; a past tense or a modal stays as it is). It
never adds a word the speaker did not say beyond the subject and those forms, so the fact stays what was
said; and it can be read back (`as_first_person`) to compare two facts the way the speaker said them
("The user lives in Porto" / "The user moved to Lyon": the same attribute, a new value).
"""

from __future__ import annotations

import re

# a word, an apostrophe form ("I'm", "don't"), or anything else (spaces, punctuation) kept as it is
_TOKEN = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?|[^A-Za-z]+")

# "I" + one of these adverbs + the verb: the adverb stays, the verb after it takes the third person
_ADVERBS = frozenset(
    "just really also always never still recently finally often usually actually even only sometimes "
    "already totally definitely truly absolutely currently now once first".split()
)
# a verb form after "I" that is the same in the third person (modals, past tenses)
_SAME = frozenset(
    "was can could will would should might must may did shall "
    "wasn't can't couldn't won't wouldn't shouldn't didn't mightn't mustn't "
    "went got had made took saw came felt found thought told said knew left met bought brought gave ran "
    "began wrote won lost sent spent built kept heard taught caught held became chose drove ate fell flew "
    "grew threw wore sang swam sat stood understood slept paid put set let cut hit quit read led fed "
    "became forgot rode woke broke spoke stole shook hung dug".split()
)
_IRREGULAR = {
    "am": "is",
    "have": "has",
    "do": "does",
    "go": "goes",
    "don't": "doesn't",
    "haven't": "hasn't",
    "am't": "isn't",
    "'m": "is",
}
_CONTRACTED = {"i'm": "is", "i've": "has", "i'd": "would", "i'll": "will"}


def third_person_verb(verb: str) -> str:
    """The form of `verb` after he/she: "love" → "loves", "try" → "tries", "moved" → "moved"."""
    low = verb.lower().replace("’", "'")
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _SAME or low.endswith("ed") or "'" in low:
        return verb
    if re.search(r"(?:s|sh|ch|x|z|o)$", low):
        return verb + "es"
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    return verb + "s"


def _words(tokens: list[str], i: int) -> int:
    """The index of the next word token after `i` (len(tokens) when none)."""
    j = i + 1
    while j < len(tokens) and not tokens[j][:1].isalpha():
        j += 1
    return j


def _possessive(subject: str) -> str:
    return subject + ("'" if subject.endswith("s") else "'s")


def third_person(sentence: str, subject: str) -> str:
    """`sentence`, said by someone about themselves, as a statement about `subject` ("The user",
    "Caroline"). Mid-sentence a "The …" subject is written lower case ("Last week the user joined…")."""
    tokens = _TOKEN.findall(sentence.strip())
    mid = subject[:1].lower() + subject[1:] if subject.startswith("The ") else subject
    out: list[str] = []
    first_word = True
    named = False  # the subject is named once before "their" may stand for it
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        low = tok.lower().replace("’", "'")
        here = subject if first_word else mid
        if tok[:1].isalpha():
            first_word_now = first_word
            first_word = False
            if low in _CONTRACTED:
                out.append(f"{here} {_CONTRACTED[low]}")
                named = True
            elif tok == "I":
                out.append(here)
                named = True
                # "Rex and I walk": a compound subject keeps its plural verb
                prev = next((t.lower() for t in reversed(out[:-1]) if t[:1].isalpha()), "")
                if prev in ("and", "or"):
                    i += 1
                    continue
                j = _words(tokens, i)
                # "I really love" → "really loves": the adverbs stay, the verb after them changes
                while j < len(tokens) and tokens[j].lower() in _ADVERBS:
                    out.extend(tokens[i + 1 : j + 1])
                    i = j
                    j = _words(tokens, i)
                if j < len(tokens):
                    out.extend(tokens[i + 1 : j])
                    out.append(third_person_verb(tokens[j]))
                    i = j
            elif low == "my":
                out.append("their" if named else _possessive(subject if first_word_now else mid))
                named = True
            elif low == "me":
                out.append(mid)
                named = True
            elif low == "myself":
                out.append("themselves")
            elif low == "mine":
                out.append("theirs")
            else:
                out.append(tok)
        else:
            out.append(tok)
        i += 1
    text = "".join(out).strip()
    text = re.sub(r"[!]+$", ".", text)
    if text and text[-1] not in ".?":
        text += "."
    return text[:1].upper() + text[1:]


# "The user lives in Porto." → "I live in Porto.": how two facts about the same subject are compared
_BACK = {"is": "am", "has": "have", "does": "do", "goes": "go", "doesn't": "don't", "hasn't": "haven't"}


def as_first_person(text: str, subject: str) -> str:
    """A fact about `subject` read back the way its speaker said it, for comparing two facts
    (memory_core.text.same_attribute reads "I live in …"); text not about `subject` is returned as is."""
    t = text.strip()
    for s in {subject, subject.lower(), subject[:1].lower() + subject[1:]}:
        if t.startswith(_possessive(s) + " "):
            return "My " + t[len(_possessive(s)) + 1 :]
        if t.startswith(s + " "):
            rest = t[len(s) + 1 :]
            verb, _, tail = rest.partition(" ")
            low = verb.lower()
            if low in _BACK:
                verb = _BACK[low]
            elif low.endswith("ies") and len(low) > 4:
                verb = verb[:-3] + "y"
            elif re.search(r"(?:sh|ch|x|z|o)es$", low):
                verb = verb[:-2]
            elif low.endswith("s") and not low.endswith("ss") and low not in _SAME:
                verb = verb[:-1]
            return f"I {verb} {tail}".strip()
    return t
