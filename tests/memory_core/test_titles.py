"""Topic titles written by the chat model (decision 0026): the "title_segment" job, its checks, when it runs."""

from __future__ import annotations

import dataclasses

import pytest

from memory_core.segments import titles as TT

from .conftest import mix

D = 384
POTTERY = [
    ("I started a pottery class last week.", "How did the first pottery lesson go?"),
    ("My pottery teacher showed me how to center the clay on the wheel.", "Centering clay takes practice."),
    ("I glazed my first pottery bowl in a deep blue.", "A blue glaze on a bowl sounds lovely."),
    ("The kiln fired my pottery bowl without a crack.", "Congratulations on the bowl!"),
    ("Next I want to throw a pottery vase on the wheel.", "A vase is a good next step."),
    ("My pottery class ends with a small exhibition.", "Will you show the blue bowl there?"),
]


class Scripted:
    """A chat model's JSON answers, given in turn (for the mechanics around the model, not the model)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked: list[list[dict]] = []

    def __call__(self, messages, schema):
        assert schema == TT.TITLE_SCHEMA
        self.asked.append(messages)
        return self.answers.pop(0) if self.answers else {"title": "Pottery class"}


def _pages(store, n, cid=None):
    """`n` pottery pages, straight to mid-term memory, all close enough to share one segment."""
    cid = cid or store.conversations.create_conversation()
    for i, (u, a) in enumerate(POTTERY[:n]):
        store.intake.add_page(cid, u, a, embedding=mix(D, 0, 10 + i, 0.9))
    (seg,) = store.segments.list_segments(limit=10)
    return cid, seg.id


def _title_jobs(store, status="pending"):
    return [j for j in store.jobs.list_jobs(status, limit=1000) if j.kind == "title_segment"]


def test_a_segment_is_due_a_title_at_three_pages_and_at_each_doubling(open_store):
    s = open_store(stm_capacity=0, tau=1e9)
    cid, sid = _pages(s, 2)
    assert not _title_jobs(s)  # two pages: the keywords' title is enough
    s.intake.add_page(cid, *POTTERY[2], embedding=mix(D, 0, 12, 0.9))
    assert [j.payload for j in _title_jobs(s)] == [{"segment_id": sid}]
    for i in (3, 4):
        s.intake.add_page(cid, *POTTERY[i], embedding=mix(D, 0, 10 + i, 0.9))
    assert len(_title_jobs(s)) == 1  # not on every page
    s.intake.add_page(cid, *POTTERY[5], embedding=mix(D, 0, 15, 0.9))
    assert len(_title_jobs(s)) == 2  # six pages: twice the three it was asked at
    assert [TT.due(n, 3) for n in (5, 6, 11, 12)] == [False, True, True, True]
    assert not TT.due(2, 0) and TT.due(3, 0) and not TT.due(11, 6)


def test_no_capable_model_asks_nothing_and_the_keywords_title_stays(open_store):
    model = Scripted({"title": "Learning pottery"})
    s = open_store(stm_capacity=0, tau=1e9, llm=model, llm_model_id="big-7b.gguf")
    _, sid = _pages(s, 3)
    keywords_title = s.segments.get(sid).title
    s.jobs.run_pending()  # the app has not said the model is capable: model_titles is off
    assert model.asked == [] and not _title_jobs(s)
    seg = s.segments.get(sid)
    assert seg.title == keywords_title and seg.title_by == ""


def test_the_models_title_is_kept_shown_and_goes_with_a_forgotten_page(open_store):
    model = Scripted({"title": "learning pottery at a class."})
    s = open_store(stm_capacity=0, tau=1e9, llm=model, llm_model_id="big-7b.gguf")
    s.titles.model_writes = True
    _, sid = _pages(s, 3)
    assert s.jobs.run_pending(kinds=["title_segment"]) == 1
    system, user = model.asked[0]
    assert "Never put a person's name" in system["content"] and "pottery teacher" in user["content"]
    seg = s.segments.get(sid)
    assert (seg.title, seg.title_by) == ("Learning pottery at a class", "big-7b.gguf")
    (ev,) = s.event_log.events(kinds=["segment_titled"], limit=10)
    assert "pottery" not in ev.summary.lower() and "pottery" not in str(ev.detail)  # events never quote memory
    # a page of it forgotten: its words may be in the title, so the title goes and a new one is due
    s.curation.forget("page", s.pages.list_pages(tier="mtm", limit=1)[0].id)
    seg = s.segments.get(sid)
    assert seg.page_count == 2 and seg.title_by == "" and seg.title == s.segments.title(seg.keywords)
    assert not _title_jobs(s)  # two pages left: the keywords' title until it has three again


def test_a_page_forgotten_while_the_model_writes_leaves_no_title(open_store):
    s = open_store(stm_capacity=0, tau=1e9)
    _, sid = _pages(s, 3)

    def forgetting_model(messages, schema):
        s.curation.forget("page", s.pages.list_pages(tier="mtm", limit=1)[0].id)  # meanwhile, on the same memory
        return {"title": "Learning pottery"}

    s.promotion.llm, s.promotion.llm_model_id, s.titles.model_writes = forgetting_model, "big-7b.gguf", True
    s.jobs.run_pending(kinds=["title_segment"])
    assert s.segments.get(sid).title_by == ""
    assert not s.event_log.events(kinds=["segment_titled"], limit=10)


def test_a_refused_title_keeps_the_keywords_and_says_why(open_store):
    model = Scripted({"title": "Caroline's pottery"}, {"title": "A short title"})
    s = open_store(stm_capacity=0, tau=1e9, llm=model, llm_model_id="big-7b.gguf")
    s.titles.model_writes = True
    cid = s.conversations.create_conversation()
    for i, (u, a) in enumerate(POTTERY[:6]):
        meta = {"people": {"user_side": "Caroline", "assistant_side": "Melanie", "me": "Caroline"}}
        s.intake.add_pages(
            cid, [{"user_text": u, "assistant_text": a, "meta": meta, "embedding": mix(D, 0, 10 + i, 0.9)}]
        )
        s.jobs.run_pending(kinds=["title_segment"])
    (seg,) = s.segments.list_segments(limit=10)
    assert seg.title_by == "" and len(model.asked) == 2
    reasons = [e.detail["reason"] for e in s.event_log.events(kinds=["title_refused"], limit=10)]
    assert sorted(reasons) == ["a copy of the instruction", "names a person"]


@pytest.mark.parametrize(
    ("answer", "kept", "why"),
    [
        ({"title": "LGBTQ art show"}, "LGBTQ art show", ""),
        ({"title": "Caroline's art show"}, None, "names a person"),
        ({"title": "Mel and the kids camping"}, None, "names a person"),  # a short form of Melanie
        ({"title": "melanie pottery"}, None, "names a person"),
        ({"title": "Title"}, None, "too short"),
        ({"title": "Short title of the topics"}, None, "a copy of the instruction"),
        ({"title": "Quantum chromodynamics lecture notes"}, None, "none of its words is in the pages"),
        ({"title": '{"title": "art"}'}, None, "no title, or not plain text"),
        ({"title": "One two three four five six seven"}, None, "too long"),
        ({"title": "Andy and the support group"}, "Andy and the support group", ""),  # "and" begins no name
        ({"name": "art show"}, None, "no title, or not plain text"),
        (None, None, "no title, or not plain text"),
    ],
)
def test_check_title_on_a_real_locomo_conversation(open_store, locomo_path, answer, kept, why):
    """The speakers' names come from the pages' meta of a real LoCoMo import (conv-26: Caroline and Melanie)."""
    from app.evaluation.locomo import load_samples
    from app.importers.writer import write_conversation

    samples, _ = load_samples(locomo_path, ["conv-26"])
    conv = samples[0].conversation
    s = open_store()
    write_conversation(s, dataclasses.replace(conv, turns=conv.turns[:40]))
    pages = s.pages.list_pages(limit=100)
    names = s.titles.names([p.meta.get("people") for p in pages])
    assert {"caroline", "melanie"} <= names
    text = "\n".join(f"{p.user_text} {p.assistant_text}" for p in pages)
    assert TT.check_title(answer, names, text, TT.DEFAULT_TITLE_PROMPT) == (kept, why)


def test_the_bundled_model_titles_a_segment_through_llama_cpp(open_store, chat_model):
    """The real SmolLM2-135M GGUF, forced on: it is asked with the JSON schema's grammar and what it says is
    either kept (plain words from the pages, no name) or refused with a reason; never a third outcome."""
    s = open_store(stm_capacity=0, tau=1e9, llm=chat_model.complete_json, llm_model_id=chat_model.model_id)
    s.titles.model_writes = True
    _, sid = _pages(s, 4)
    assert s.jobs.run_pending(kinds=["title_segment"]) == 1
    titled = s.event_log.events(kinds=["segment_titled"], limit=10)
    refused = s.event_log.events(kinds=["title_refused"], limit=10)
    assert len(titled) + len(refused) == 1
    seg = s.segments.get(sid)
    if titled:
        assert seg.title_by == chat_model.model_id
        text = " ".join(f"{u} {a}" for u, a in POTTERY[:4])
        assert TT.check_title({"title": seg.title}, set(), text, TT.DEFAULT_TITLE_PROMPT)[0] == seg.title
    else:
        assert seg.title_by == "" and refused[0].detail["reason"]
