"""Persisted job queue: idempotent enqueue, run_pending, crash (SIGKILL) recovery without duplicates,
and the LLM steps (schema, validation, fallback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memory_core.persona.extract import PROMOTE_SCHEMA

from .conftest import basis, mix

D = 384
REPO = Path(__file__).resolve().parents[2]


def test_enqueue_is_idempotent_by_key(open_store):
    s = open_store()
    cid = s.conversations.create_conversation()
    payload = {"conversation_id": cid, "user_text": "I bake sourdough bread", "assistant_text": "Yum."}
    j1 = s.jobs.enqueue("add_page", payload, key="turn:1")
    j2 = s.jobs.enqueue("add_page", payload, key="turn:1")
    assert j1 == j2 and s.jobs.pending() == 1
    assert s.jobs.run_pending() == 1
    assert s.jobs.enqueue("add_page", payload, key="turn:1") == j1  # done jobs keep their key
    assert s.jobs.run_pending() == 0
    assert s.pages.count_pages() == 1


def test_run_pending_max_jobs_and_failures(open_store):
    s = open_store(job_max_attempts=2)
    cid = s.conversations.create_conversation()
    for i in range(3):
        s.jobs.enqueue("add_page", {"conversation_id": cid, "user_text": f"note {i}", "assistant_text": "ok"})
    bad = s.jobs.enqueue("no_such_kind", {})
    assert s.jobs.run_pending(max_jobs=2) == 2
    assert s.jobs.pending() == 2
    assert s.jobs.run_pending() == 1  # the bad job fails once, stays pending
    assert s.jobs.run_pending() == 0  # second failure: marked failed
    assert [j.id for j in s.jobs.list_jobs("failed")] == [bad]
    assert "unknown job kind" in s.jobs.list_jobs("failed")[0].error
    assert s.jobs.pending() == 0 and s.pages.count_pages() == 3


def test_add_page_job_dedupes_by_assistant_message(open_store):
    s = open_store()
    cid = s.conversations.create_conversation()
    mid = s.conversations.add_message(cid, "assistant", "Sure.")
    payload = {
        "conversation_id": cid,
        "user_text": "Remind me to call mom",
        "assistant_text": "Sure.",
        "assistant_message_id": mid,
    }
    s.jobs.enqueue("add_page", payload)
    s.jobs.enqueue("add_page", payload)  # e.g. enqueued twice by a retry without a key
    assert s.jobs.run_pending() == 2
    assert s.pages.count_pages() == 1


_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {repo!r})
    from models.embedder import OnnxEmbedder
    from memory_core import MemoryStore, MemoryParams
    e = OnnxEmbedder()
    s = MemoryStore.open({db!r}, e.embed, embed_model_id=e.model_id, dim=e.dim,
                         params=MemoryParams.from_flat(**{params!r}))
    s.jobs.run_pending(allow_llm=False)
    print("FINISHED", flush=True)
""")


def _run_and_kill(db: Path, checkpoint: str, params: dict) -> None:
    env = dict(os.environ, MNEMO_MEMORY_CHECKPOINT=checkpoint)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(repo=str(REPO), db=str(db), params=params)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            line = proc.stderr.readline()
            if f"CHECKPOINT {checkpoint}" in line:
                break
            if not line and proc.poll() is not None:
                pytest.fail(f"child exited early: {proc.stdout.read()} {proc.stderr.read()}")
        else:
            pytest.fail("child never reached the checkpoint")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()


def test_sigkilled_add_page_job_completes_after_restart(open_store, tmp_path):
    db = tmp_path / "memory.db"
    s = open_store(db, stm_capacity=0)
    cid = s.conversations.create_conversation()
    s.intake.add_page(cid, "Earlier page about gardening tomatoes", "Nice.")
    s.jobs.enqueue(
        "add_page",
        {
            "conversation_id": cid,
            "user_text": "I adopted a cat named Miso",
            "assistant_text": "Congratulations on Miso!",
        },
        key="turn:42",
    )
    s.close()
    # the child inserts the page (and moves it to MTM) inside the job's transaction, then is killed
    _run_and_kill(db, "add_page:after_insert", {"stm_capacity": 0})
    s = open_store(db, stm_capacity=0)
    assert s.jobs.pending() == 1 and s.pages.count_pages() == 1  # nothing half-written survived
    assert s.jobs.run_pending() == 1
    assert s.jobs.run_pending() == 0
    pages = s.pages.list_pages(order_by="id", descending=False)
    assert [p.user_text for p in pages] == ["Earlier page about gardening tomatoes", "I adopted a cat named Miso"]
    assert s.check_integrity() == []
    assert s.db.scalar("SELECT count(*) FROM page_vec") == 2


def test_sigkilled_promotion_completes_without_duplicate_rows(open_store, tmp_path):
    db = tmp_path / "memory.db"
    params = {"stm_capacity": 0, "tau": 3.0}
    s = open_store(db, **params)
    cid = s.conversations.create_conversation()
    s.intake.add_page(cid, "My name is Ann and I live in Berlin.", "Hi Ann!", embedding=basis(D, 0))
    s.intake.add_page(cid, "I work as a nurse in Berlin.", "Busy job!", embedding=mix(D, 0, 1, 0.95))
    assert [j.kind for j in s.jobs.list_jobs("pending")] == ["promote_segment"]
    s.close()
    _run_and_kill(db, "promote:between_items", params)
    s = open_store(db, **params)
    assert s.persona.count_traits() == 0 and s.jobs.pending() == 1
    assert s.jobs.run_pending(allow_llm=False) == 1
    s.jobs.run_pending(allow_llm=False)
    traits = [(t.dimension, t.value) for t in s.persona.list_traits()]
    assert len(traits) == len(set(traits)) and ("name", "Ann") in traits
    assert s.segments.list_segments()[0].promotions == 1
    n_k = s.persona.count_knowledge()
    # running promotion again for the same pages adds nothing
    s.jobs.enqueue("promote_segment", {"segment_id": s.segments.list_segments()[0].id})
    s.jobs.run_pending(allow_llm=False)
    assert s.persona.count_knowledge() == n_k and len(s.persona.list_traits()) == len(traits)
    assert s.check_integrity() == []


# --- LLM steps -----------------------------------------------------------------------------------


class ScriptedLLM:
    """Stands in for the chat model's complete_json(messages, schema): returns queued replies."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []

    def __call__(self, messages, schema):
        self.calls.append((messages, schema))
        r = self.replies.pop(0)
        if isinstance(r, Exception):
            raise r
        return json.loads(r) if isinstance(r, str) and r.startswith("{") else r


def _hot_segment(s, cid):
    s.intake.add_page(cid, "I adopted a beagle called Rex.", "Lovely!", embedding=basis(D, 0))
    s.intake.add_page(
        cid, "Rex and I walk by the lake every morning.", "Sounds peaceful.", embedding=mix(D, 0, 1, 0.95)
    )


def test_llm_promotion_uses_schema_and_stores_valid_items(open_store):
    llm = ScriptedLLM(
        {
            "traits": [
                {
                    "dimension": "Pets",
                    "value": "a beagle called Rex",
                    "evidence": "I adopted a beagle",
                    "confidence": 0.9,
                }
            ],
            "user_knowledge": ["The user walks Rex by the lake every morning"],
            "assistant_knowledge": [],
        }
    )
    s = open_store(llm=llm, llm_model_id="tiny-llm", stm_capacity=0, tau=3.0)
    cid = s.conversations.create_conversation()
    _hot_segment(s, cid)
    assert s.jobs.run_pending() == 1
    messages, schema = llm.calls[0]
    assert schema == PROMOTE_SCHEMA and messages[0]["role"] == "system"
    assert "Rex" in messages[1]["content"]
    t = s.persona.list_traits()[0]
    assert (t.dimension, t.value, t.model) == ("pets", "a beagle called Rex", "tiny-llm")
    k = s.persona.list_knowledge("user")[0]
    assert k.text == "The user walks Rex by the lake every morning" and k.model == "tiny-llm"
    assert k.source_page_ids  # provenance attributed to the matching page(s)


@pytest.mark.parametrize(
    "bad",
    [
        "not json at all",
        {"traits": "oops"},
        {"user_knowledge": ["x"]},
        RuntimeError("model crashed"),
        ["a", "list"],
    ],
)
def test_bad_llm_output_falls_back_and_logs(open_store, bad, caplog):
    s = open_store(llm=ScriptedLLM(bad), llm_model_id="tiny-llm", stm_capacity=0, tau=3.0)
    cid = s.conversations.create_conversation()
    _hot_segment(s, cid)
    assert s.jobs.run_pending() == 1
    assert any(e.kind == "llm_fallback" for e in s.event_log.events(limit=100))
    assert "LLM output rejected" in caplog.text
    for k in s.persona.list_knowledge():
        assert k.model == "extractive" and "oops" not in k.text and "crashed" not in k.text
    assert any("Rex" in k.text for k in s.persona.list_knowledge())


def test_junk_items_in_valid_llm_output_are_dropped(open_store):
    llm = ScriptedLLM(
        {
            "traits": [
                {"dimension": "", "value": "x", "confidence": 0.5},
                {"dimension": "pet", "value": "N/A", "confidence": 0.5},
                {"dimension": "pet", "value": '{"name": "Rex"}', "confidence": 0.5},
                {"dimension": "pet", "value": "beagle", "confidence": 7},
            ],
            "user_knowledge": ["Error: context window exceeded", "```json", "", "The user owns a beagle named Rex"],
            "assistant_knowledge": ["<|im_end|>"],
        }
    )
    s = open_store(llm=llm, llm_model_id="tiny-llm", stm_capacity=0, tau=3.0)
    cid = s.conversations.create_conversation()
    _hot_segment(s, cid)
    s.jobs.run_pending()
    assert [(t.dimension, t.value, t.confidence) for t in s.persona.list_traits()] == [("pet", "beagle", 0.6)]
    assert [k.text for k in s.persona.list_knowledge()] == ["The user owns a beagle named Rex"]


def test_items_the_conversation_does_not_state_are_dropped(open_store):
    # the twelve copies and the date "dimensions" are what the bundled 135M model answered (2026-11-30)
    llm = ScriptedLLM(
        {
            "traits": [{"dimension": "the_name_of_the_rose", "value": "The name of the Rose", "confidence": 0.9}] * 6
            + [
                {"dimension": "2023-11-14", "value": "2023-11-15", "confidence": 0.5},
                {"dimension": "pet", "value": "a beagle called Rex", "confidence": 0.8},
                {"dimension": "pet", "value": "a beagle called Rex", "confidence": 0.8},
                {"dimension": "occupation", "value": "astronaut", "confidence": 0.8},
                {"dimension": "likes", "value": "Peaceful", "confidence": 0.8},
            ],  # the assistant's word
            "user_knowledge": [
                "The user is a famous astronaut",
                "The user walks Rex by the lake every morning",
                "The user walks Rex by the lake every morning",
            ],
            "assistant_knowledge": ["The assistant will book a flight to Mars", "The assistant found it lovely"],
        }
    )
    s = open_store(llm=llm, llm_model_id="tiny-llm", stm_capacity=0, tau=3.0)
    cid = s.conversations.create_conversation()
    _hot_segment(s, cid)
    s.jobs.run_pending()
    assert [(t.dimension, t.value) for t in s.persona.list_traits()] == [("pet", "a beagle called Rex")]
    assert sorted(k.text for k in s.persona.list_knowledge()) == [
        "The assistant found it lovely",
        "The user walks Rex by the lake every morning",
    ]
    assert not any(e.kind == "llm_fallback" for e in s.event_log.events(limit=100))


def test_an_answer_with_nothing_stated_falls_back_to_what_the_user_said(open_store):
    # the bundled model mostly answers with empty lists: the persona would never grow
    llm = ScriptedLLM({"traits": [], "user_knowledge": [], "assistant_knowledge": []})
    s = open_store(llm=llm, llm_model_id="tiny-llm", stm_capacity=0, tau=3.0)
    cid = s.conversations.create_conversation()
    _hot_segment(s, cid)
    s.jobs.run_pending()
    fallback = [e for e in s.event_log.events(limit=100) if e.kind == "llm_fallback"]
    assert fallback and "nothing in the model's answer" in fallback[0].detail["reason"]
    texts = [k.text for k in s.persona.list_knowledge()]
    assert "The user adopted a beagle called Rex." in texts  # a statement about the user, not a quote
    assert all(k.model == "extractive" for k in s.persona.list_knowledge())


def test_a_model_rejected_three_times_in_a_row_is_not_asked_again_until_the_model_changes(open_store, tmp_path, clock):
    from memory_core.segments.promotion import LLM_RETRY_AFTER_S

    empty = {"traits": [], "user_knowledge": [], "assistant_knowledge": []}
    useful = {"traits": [], "user_knowledge": ["The user adopted a beagle"], "assistant_knowledge": []}
    llm = ScriptedLLM(*[empty] * 5, useful)
    path = tmp_path / "memory.db"
    s = open_store(path, llm=llm, llm_model_id="tiny-llm", stm_capacity=0, tau=3.0)
    cid = s.conversations.create_conversation()

    def promote_a_segment(k):
        s.intake.add_page(cid, f"I adopted a beagle, number {k}.", "Lovely!", embedding=basis(D, (2 * k) % D))
        s.intake.add_page(
            cid, f"Beagle {k} and I walk by the lake.", "Nice.", embedding=mix(D, (2 * k) % D, (2 * k + 1) % D, 0.95)
        )
        s.jobs.run_pending()

    for k in range(4):
        promote_a_segment(k)
    assert len(llm.calls) == 3  # the fourth promotion did not ask the model
    assert len([e for e in s.event_log.events(limit=1000) if e.kind == "promoted"]) == 4
    fallbacks = [e for e in s.event_log.events(limit=1000) if e.kind == "llm_fallback"]
    assert sorted(e.detail["in_a_row"] for e in fallbacks) == [1, 2, 3]
    assert any("not asked again" in e.summary for e in fallbacks)

    s.close()  # a restart does not pay the three tries again
    s = open_store(path, llm=llm, llm_model_id="tiny-llm", stm_capacity=0, tau=3.0)
    promote_a_segment(4)
    assert len(llm.calls) == 3
    s.promotion.llm_model_id = "a-bigger-llm"  # the user chose another model: it is asked
    promote_a_segment(5)
    assert len(llm.calls) == 4

    s.promotion.llm_model_id = "tiny-llm"  # a week later the first model gets one more try
    clock.advance(LLM_RETRY_AFTER_S)
    promote_a_segment(6)
    assert len(llm.calls) == 5
    promote_a_segment(7)  # rejected again: skipped for another week
    assert len(llm.calls) == 5

    s.promotion.llm_model_id = "a-bigger-llm"  # an accepted answer clears that model's count
    promote_a_segment(8)
    assert "The user adopted a beagle" in [k.text for k in s.persona.list_knowledge()]
    assert "a-bigger-llm" not in s.promotion.rejection_state()


def test_a_deferred_llm_step_leaves_the_job_pending_and_uncounted(open_store):
    from memory_core import LLMDeferred

    llm = ScriptedLLM(
        LLMDeferred("chat first"),
        {"traits": [], "user_knowledge": ["The user has a beagle, Rex"], "assistant_knowledge": []},
    )
    s = open_store(llm=llm, llm_model_id="tiny-llm", stm_capacity=0, tau=3.0)
    cid = s.conversations.create_conversation()
    _hot_segment(s, cid)
    assert s.jobs.run_pending() == 0
    job = s.jobs.list_jobs()[0]
    assert (job.kind, job.status, job.attempts, job.error) == ("promote_segment", "pending", 0, None)
    assert s.persona.list_knowledge() == [] and not any(e.kind == "llm_fallback" for e in s.event_log.events(limit=100))
    assert s.jobs.run_pending() == 1  # later, the model answers: stored as the LLM's
    assert [k.text for k in s.persona.list_knowledge()] == ["The user has a beagle, Rex"]
    assert s.jobs.list_jobs()[0].attempts == 1


def test_allow_llm_false_uses_extractive_path(open_store):
    llm = ScriptedLLM()
    s = open_store(llm=llm, stm_capacity=0, tau=3.0)
    cid = s.conversations.create_conversation()
    _hot_segment(s, cid)
    s.jobs.run_pending(allow_llm=False)
    assert llm.calls == [] and s.persona.list_knowledge()


@pytest.mark.slow
def test_real_small_llm_promotion_never_stores_junk(open_store, chat_model):
    """The bundled SmolLM2-135M with a schema grammar: whatever it says, only clean items are stored."""
    s = open_store(llm=chat_model.complete_json, llm_model_id="smollm2-135m", stm_capacity=0, tau=3.0)
    cid = s.conversations.create_conversation()
    _hot_segment(s, cid)
    assert s.jobs.run_pending() == 1
    from memory_core.persona.extract import clean_item

    for k in s.persona.list_knowledge():
        assert clean_item(k.text) == k.text
    for t in s.persona.list_traits():
        assert clean_item(t.value, 200) == t.value and t.dimension
    assert s.check_integrity() == []


def test_the_llm_free_path_names_a_favourite_by_what_it_is():
    from memory_core.persona.extract import PageText, extractive_extract

    out = extractive_extract(
        [
            PageText(
                1, "My favourite film is Spirited Away. My favorite hike is the Eiger trail.", "Both are classics.", 0.0
            )
        ]
    )
    assert [(t.dimension, t.value) for t in out.traits] == [
        ("favorite_film", "Spirited Away"),
        ("favorite_hike", "the Eiger trail"),
    ]


def test_the_llm_free_path_skips_likes_and_goals_that_point_elsewhere():
    from memory_core.persona.extract import PageText, extractive_extract

    said = (
        "I love it so much. I love your turtles. I love how uncomplicated it is. I'm going to make it work. "
        "I love creating art. I love watching them play. I'm trying to run a marathon. "
        "I'm going to a transgender conference this month. I'm going to Lisbon next week."
    )  # trips, not goals
    out = extractive_extract([PageText(1, said, "", 0.0)])
    assert [(t.dimension, t.value) for t in out.traits] == [
        ("likes", "creating art"),
        ("likes", "watching them play"),
        ("goals", "run a marathon"),
    ]


def test_the_llm_free_path_quotes_what_the_user_says_about_themselves_not_their_reactions():
    from memory_core.persona.extract import MAX_USER_FACTS, PageText, extractive_extract

    # sentences as LoCoMo imports write them (speaker label first); the kept ones are about the speaker,
    # the dropped ones react to the listener or point at something said elsewhere (2026-11-30 dev split)
    kept = [
        "Last weekend I joined a mentorship program for LGBTQ youth.",
        "It's my birthday on Friday and I'm throwing a garden party.",
        "It's important to me to put my words into action.",
        "Dance gives me an escape to be myself.",
        "I'm proud of researching visa requirements for countries I want to visit.",
    ]
    dropped = [
        "It was so interesting and blew me away!",
        "The pic takes me back to summer camp.",
        "I bet you were thrilled when everything finally worked out.",
        "I'm so glad you met people who share your interests.",
        "Here's a pic of my fam at the beach.",
        "Yeah, I agree with everything you said there.",
        "Your support and encouragement mean a lot to me.",
        "I hope your injury heals soon, it must be hard.",
        "I'm keen to try your recipe for the stew.",
        "Knowing you've got my back really helps keep me going.",
        "It's tough, but I'm sure it'll be worth it in the end.",
        "I find it fulfilling and meaningful.",
        "They boosted me through tough times and helped me grow.",
    ]
    assert len(kept) <= MAX_USER_FACTS
    pages = [
        PageText(i, f"Caroline: {s}", "Melanie: I'll send you the photos tomorrow.", 0.0)
        for i, s in enumerate(dropped + kept)
    ]
    out = extractive_extract(pages)
    quoted = sorted(f.text for f in out.facts if f.owner == "user")
    assert quoted == sorted(
        [
            "Last weekend the user joined a mentorship program for LGBTQ youth.",
            "It's the user's birthday on Friday and the user is throwing a garden party.",
            "It's important to the user to put their words into action.",
            "Dance gives the user an escape to be themselves.",
            "The user is proud of researching visa requirements for countries the user wants to visit.",
        ]
    )
    assert [f.text for f in out.facts if f.owner == "assistant"][
        0
    ] == "The assistant will send you the photos tomorrow."
    # a greeting or an interjection that opens the sentence is not quoted with it
    greeted = extractive_extract(
        [
            PageText(
                1,
                "Tim: Hey Nate, my favorite dessert is a raspberry tart. Yeah, I'm "
                "hiking with some buddies this weekend. Well-rounded training keeps "
                "me motivated for my marathon.",
                "",
                0.0,
            )
        ]
    )
    assert sorted(f.text for f in greeted.facts) == [
        "The user is hiking with some buddies this weekend.",
        "The user's favorite dessert is a raspberry tart.",
        "Well-rounded training keeps the user motivated for their marathon.",
    ]


def test_the_llm_free_path_keeps_a_like_or_goal_whole_and_without_filler():
    from memory_core.persona.extract import PageText, extractive_extract

    said = (
        "Connecting with the things I love makes writing fun. I love traveling too. "
        "I like to just take a look at the sunset- it reminds me to slow down. "
        "I'm trying to find a way to juggle studying with my fantasy reading hobby and my job at the bakery. "
        "I love escaping to that world. I'm hoping to get my head around the visa requirements for some "
        "places I want to visit."
    )
    out = extractive_extract([PageText(1, f"Tim: {said}", "", 0.0)])
    assert [(t.dimension, t.value) for t in out.traits] == [
        ("likes", "traveling"),
        ("likes", "just take a look at the sunset"),
        ("goals", "find a way to juggle studying with my fantasy reading hobby"),
        ("goals", "get my head around the visa requirements for some places I want"),
    ]
    assert out.traits[0].evidence == "I love traveling too."
