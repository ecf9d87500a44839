"""The chat agent end to end with the bundled GGUF, the real embedder and a real store file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from app.chat.agent import ChatAgent
from memory_core import MemoryStore
from models.chat import CancelToken


def test_turn_persists_messages_trace_and_job(agent, store):
    cid = agent.new_conversation()
    tokens = []
    result = agent.send(cid, "Hello! My name is Ada.", on_token=tokens.append)
    assert result.status == "complete"
    assert "".join(tokens) == result.text and result.text
    msgs = store.conversations.list_messages(cid)
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[0].content == "Hello! My name is Ada."
    assert msgs[1].content == result.text
    assert msgs[1].meta["stats"]["prompt_tokens"] > 0
    assert msgs[1].meta["stats"]["completion_tokens"] > 0
    assert "trace" in msgs[1].meta
    assert store.jobs.pending() == 1
    assert store.conversations.get_conversation(cid).title.startswith("Hello! My name is Ada")
    store.jobs.run_pending(allow_llm=False)
    assert store.pages.count_pages(conversation_id=cid) == 1


def test_fact_from_early_turn_recalled_in_new_conversation(agent, store):
    cid = agent.new_conversation()
    statements = [
        "My sister Margot lives in Lisbon and teaches violin.",
        "Today I repaired the brakes on my bicycle.",
        "I am reading a book about the history of tea.",
        "We had pasta with pesto for dinner.",
        "The weather was rainy all weekend.",
        "I started learning to play chess online.",
    ]
    for text in statements:
        agent.send(cid, text)
        store.jobs.run_pending(allow_llm=False)
    # STM capacity is 3: the first pages overflowed into mid-term memory
    assert store.pages.count_pages(conversation_id=cid, tier="stm") == 3
    assert (
        store.pages.count_pages(conversation_id=cid, tier="mtm")
        + store.pages.count_pages(conversation_id=cid, tier="archive")
        == 3
    )
    other = agent.new_conversation()
    result = agent.send(other, "Where does my sister Margot live?")
    page_ids = [p["page_id"] for p in result.trace["pages"]]
    first_page = store.pages.list_pages(conversation_id=cid, order_by="timestamp", descending=False, limit=1)[0]
    assert first_page.id in page_ids
    assert first_page.id in result.trace["included"]["pages"]
    assert "Lisbon" in result.prompt.messages[-2]["content"]  # recalled pages sit with the question


# what the bundled model once replied to it, in the app (a long reply dilutes the page's vector)
BEAGLE_REPLY = (
    "I'm so sorry to hear that. I'd be more than happy to help you with your situation. Please, go ahead and "
    "share the details of your beagle with me. I'll take care of it myself while I do my job.\n\nThat sounds "
    "like a fantastic move! If you have any specific questions or concerns about the Beagle, just let me know. "
    "And don't worry if you're not 100% sure about the Beagle's origins; we can always make an appointment with "
    "the breeder to get more information. I'm happy to help out and do whatever it takes to ensure the best "
    "possible care for your precious pup.\n\nI'll take care of it, and I'll keep a close eye on things to make "
    "sure everything goes smoothly. And if you have any other questions or need anything else, just let me "
    "know. We're all about helping each other out here!\n\nSo, what's the story with Pepper? Is there "
    "something specific you'd like to share more about?"
)


def test_a_reworded_question_quotes_the_page_that_shares_no_word_with_it(agent, store):
    # no keyword in common ("dog" / "beagle", "name" / "called") and a wordy reply: the page scores its
    # cosine alone, under the combined floor, yet it stands out from the rest of memory and is quoted
    cid = agent.new_conversation()
    beagle_id = store.intake.add_page(cid, "Hi! I adopted a beagle called Pepper last week.", BEAGLE_REPLY)
    beagle = store.pages.get(beagle_id)
    store.intake.add_pages(
        agent.new_conversation(),
        [
            {"user_text": "The weather was rainy all weekend.", "assistant_text": "Perfect weather for a book."},
            {"user_text": "I am reading a book about the history of tea.", "assistant_text": "Tea has a long history."},
        ],
    )
    result = agent.send(agent.new_conversation(), "What is the name of my dog?")
    hit = next(p for p in result.trace["pages"] if p["page_id"] == beagle.id)
    assert hit["score"] < store.params.quoting.recall_min_score and "keyword" not in hit["reason"], hit
    assert hit["similarity"] >= store.params.quoting.recall_min_similarity
    assert hit["standout"] >= store.params.quoting.recall_min_standout
    assert beagle.id in result.trace["included"]["pages"]
    assert "Pepper" in result.prompt.messages[-2]["content"]


def test_asking_again_in_a_new_chat_does_not_recall_the_first_answer(agent, store):
    cid = agent.new_conversation()
    agent.send(cid, "My sister Margot lives in Lisbon and teaches violin.")
    first = agent.new_conversation()
    agent.send(first, "Which city does my sister Margot live in?")
    store.jobs.run_pending(allow_llm=False)
    (asked,) = store.pages.list_pages(conversation_id=first)
    again = agent.send(agent.new_conversation(), "Which city does my sister Margot live in?")
    assert asked.id not in [p["page_id"] for p in again.trace["pages"]]
    assert [p["page_id"] for p in again.trace["skipped"]] == [asked.id]
    assert f"(page {asked.id})" not in again.prompt.messages[-2]["content"]  # the earlier answer is not quoted
    assert "Lisbon" in again.prompt.messages[-2]["content"]  # the fact is


def test_stop_keeps_partial_reply(agent, store):
    cid = agent.new_conversation()
    cancel = CancelToken()
    seen = []

    def on_token(chunk):
        seen.append(chunk)
        if len(seen) == 3:
            cancel.cancel()

    agent.max_tokens = 200
    result = agent.send(cid, "Tell me a long story about a lighthouse keeper.", on_token=on_token, cancel=cancel)
    assert result.status == "stopped"
    stored = store.conversations.get_message(result.assistant_message_id)
    assert stored.status == "stopped"
    assert stored.content == "".join(seen)


def test_regenerate_makes_sibling_and_edit_branches(agent, store):
    cid = agent.new_conversation()
    first = agent.send(cid, "Name a colour.")
    store.jobs.run_pending(allow_llm=False)
    again = agent.regenerate(first.assistant_message_id)
    assert again.user_message_id == first.user_message_id
    siblings = store.conversations.message_children(first.user_message_id)
    assert {m.id for m in siblings} == {first.assistant_message_id, again.assistant_message_id}
    store.jobs.run_pending(allow_llm=False)
    # the rejected reply's page is forgotten: one page for this exchange
    assert store.pages.count_pages(conversation_id=cid) == 1
    edited = agent.edit_and_resend(first.user_message_id, "Name a fruit.")
    branch = store.conversations.list_messages(cid)
    assert [m.content for m in branch if m.role == "user"] == ["Name a fruit."]
    assert store.conversations.get_message(first.user_message_id) is not None  # the old branch is kept
    assert edited.user_message_id != first.user_message_id


def test_a_message_asking_to_remember_keeps_its_fact_at_once(agent, store):
    cid = agent.new_conversation()
    result = agent.send(cid, "Remember that my locker code is 4312. Thanks!")
    kept = result.stats["remembered"]
    assert kept["outcome"] == "added" and kept["text"] == "my locker code is 4312"
    (k,) = store.persona.list_knowledge(owner="user")
    assert (k.id, k.text, k.model) == (kept["id"], "my locker code is 4312", "user")
    assert store.conversations.get_message(result.assistant_message_id).meta["stats"]["remembered"] == kept
    # stored before retrieval: this very reply's prompt holds it, and so does a new chat's
    assert k.id in result.trace["included"]["knowledge"]
    other = agent.send(agent.new_conversation(), "What is my locker code?")
    assert k.id in other.trace["included"]["knowledge"]
    assert any("my locker code is 4312" in m["content"] for m in other.prompt.messages if m["role"] == "system")
    # regenerating the reply does not store it again; saying it again confirms it
    regen = agent.regenerate(result.assistant_message_id)
    assert "remembered" not in regen.stats and store.persona.get_knowledge(k.id).version == 1
    again = agent.send(cid, "Please remember: my locker code is 4312")
    # a confirmation counts, it is no new version (issue 31)
    assert again.stats["remembered"]["outcome"] == "confirmed" and store.persona.get_knowledge(k.id).version == 1
    assert store.persona.get_knowledge(k.id).confirmations == 1
    # a paused or incognito chat keeps nothing; a question about memory is not a request
    paused = agent.new_conversation()
    store.conversations.set_conversation_flags(paused, memory_paused=True)
    secret = agent.new_conversation()
    store.conversations.set_conversation_flags(secret, incognito=True)
    for c, text in (
        (paused, "Remember that I take the bus at 7."),
        (secret, "Remember that I take the bus at 7."),
        (cid, "Do you remember my locker code?"),
    ):
        assert "remembered" not in agent.send(c, text).stats
    assert store.persona.count_knowledge() == 1


def test_a_request_at_the_end_of_a_message_keeps_what_came_before(agent, store):
    cid = agent.new_conversation()
    result = agent.send(cid, "I am allergic to peanuts, so please remember that.")
    kept = result.stats["remembered"]
    assert (kept["outcome"], kept["text"]) == ("added", "I am allergic to peanuts")
    assert kept["id"] in result.trace["included"]["knowledge"]
    assert [k.text for k in store.persona.list_knowledge(owner="user")] == ["I am allergic to peanuts"]


def test_incognito_reads_and_writes_nothing(agent, store):
    cid = agent.new_conversation()
    agent.send(cid, "Remember that my locker code is 4312.")
    store.jobs.run_pending(allow_llm=False)
    pages_before, jobs_before = store.pages.count_pages(), len(store.jobs.list_jobs())
    secret = agent.new_conversation()
    store.conversations.set_conversation_flags(secret, incognito=True)
    result = agent.send(secret, "What is my locker code?")
    store.jobs.run_pending(allow_llm=False)
    assert result.trace.get("memory") == "off"
    assert not any("4312" in m["content"] for m in result.prompt.messages)
    assert store.pages.count_pages() == pages_before
    assert len(store.jobs.list_jobs()) == jobs_before


def test_paused_conversation_reads_but_does_not_write(agent, store):
    cid = agent.new_conversation()
    store.conversations.set_conversation_flags(cid, memory_paused=True)
    agent.send(cid, "Something private.")
    store.jobs.run_pending(allow_llm=False)
    assert store.pages.count_pages() == 0
    assert store.jobs.pending() == 0


KILL_SCRIPT = textwrap.dedent("""
    import sys
    from app.chat.agent import ChatAgent
    from memory_core import MemoryStore
    from models.embedder import OnnxEmbedder
    from models.llama_cpp_backend import LlamaCppChatModel
    e = OnnxEmbedder()
    store = MemoryStore.open(sys.argv[1], e.embed, embed_model_id=e.model_id, dim=e.dim)
    agent = ChatAgent(store, LlamaCppChatModel(n_ctx=2048, max_tokens=5000, temperature=1.0), max_tokens=5000)
    cid = agent.new_conversation()
    def on_token(chunk):
        print("TOKEN", flush=True)
    agent.send(cid, "Please write an extremely long essay about the ocean, tides and sailing.", on_token=on_token)
""")


def test_sigkill_during_streaming_keeps_user_message_and_job_runs(tmp_path, embedder):
    db = tmp_path / "crash.sqlite3"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(db)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    tokens = 0
    deadline = time.time() + 120
    while tokens < 5 and time.time() < deadline:  # the first token is flushed at once
        line = proc.stdout.readline()
        if not line:
            break
        tokens += line.startswith("TOKEN")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert tokens >= 5, "the subprocess never streamed"

    store = MemoryStore.open(db, embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)
    try:
        conv = store.conversations.list_conversations()[0]
        msgs = store.conversations.list_messages(conv.id)
        assert msgs[0].role == "user" and "extremely long essay" in msgs[0].content
        assert msgs[1].status == "streaming" and msgs[1].content  # partial text was flushed
        agent = ChatAgent(store, None)
        assert agent.recover_interrupted() == 1
        assert store.conversations.get_message(msgs[1].id).status == "interrupted"
        assert store.jobs.pending() == 1
        store.jobs.run_pending(allow_llm=False)
        pages = store.pages.list_pages(conversation_id=conv.id)
        assert len(pages) == 1 and "extremely long essay" in pages[0].user_text
        assert agent.recover_interrupted() == 0  # idempotent
    finally:
        store.close()


def test_a_template_with_one_system_message_gets_recall_first(store, chat_model):
    """Some GGUF chat templates refuse a system message after the first; the agent then puts the
    recalled memory in the first system message instead, and the turn completes."""

    class OneSystemTemplate:
        def __init__(self, model):
            self._m = model

        def __getattr__(self, name):
            return getattr(self._m, name)

        def count_messages_tokens(self, messages):
            if any(m["role"] == "system" for m in messages[1:]):
                raise ValueError("Conversation roles must alternate user/assistant/user/assistant/...")
            return self._m.count_messages_tokens(messages)

    agent = ChatAgent(store, OneSystemTemplate(chat_model), reply_reserve=256, max_tokens=8)
    cid = agent.new_conversation()
    agent.send(cid, "My sister Margot lives in Lisbon.")
    store.jobs.run_pending(allow_llm=False)
    other = agent.new_conversation()
    result = agent.send(other, "Where does my sister live?")
    assert result.status == "complete"
    assert [m["role"] for m in result.prompt.messages] == ["system", "user"]
    assert "Lisbon" in result.prompt.messages[0]["content"]


def test_a_server_refusing_a_second_system_message_gets_recall_first(store, chat_model):
    """An OpenAI-compatible server may refuse the layout only when it generates; the turn is
    retried once with recall in the first system message, and later turns use that layout."""
    from models.errors import ModelError

    class StrictServer:
        def __init__(self, model):
            self._m = model
            self.refused = 0

        def __getattr__(self, name):
            return getattr(self._m, name)

        def stream(self, messages, **kw):
            if any(m["role"] == "system" for m in messages[1:]):
                self.refused += 1
                raise ModelError("server error 400: System message must be at the beginning.")
            return self._m.stream(messages, **kw)

    model = StrictServer(chat_model)
    agent = ChatAgent(store, model, reply_reserve=256, max_tokens=8)
    cid = agent.new_conversation()
    agent.send(cid, "My sister Margot lives in Lisbon.")
    store.jobs.run_pending(allow_llm=False)
    result = agent.send(agent.new_conversation(), "Where does my sister live?")
    assert result.status == "complete" and model.refused == 1
    assert [m["role"] for m in result.prompt.messages] == ["system", "user"]
    assert "Lisbon" in result.prompt.messages[0]["content"]
    again = agent.send(agent.new_conversation(), "Where does Margot live?")
    assert again.status == "complete" and model.refused == 1  # the layout is remembered


def test_half_of_a_surrogate_pair_in_a_message_is_replaced_not_fatal(agent, store):
    cid = agent.new_conversation()
    result = agent.send(cid, "pasted from a broken clipboard: \ud800!")
    assert result.status == "complete"
    assert store.conversations.list_messages(cid)[0].content == "pasted from a broken clipboard: \ufffd!"
    assert store.retrieve("clipboard \udfff").query == "clipboard \ufffd"


def test_warming_a_conversation_lets_the_next_reply_skip_its_dialogue(agent, store, chat_model):
    cid = store.conversations.create_conversation("garden")
    for i in range(4):
        store.conversations.add_message(cid, "user", f"Question {i}: how do gardens handle drought in region {i}?")
        store.conversations.add_message(cid, "assistant", "Mulch, deep watering, native plants and shade. " * 4)
    store.persona.add_trait("hobby", "gardening")  # the persona is part of the stable prefix
    chat_model._llm.reset()  # a fresh start: nothing cached
    warmed = agent.warm(cid)
    assert warmed > 200
    result = agent.send(cid, "What keeps the soil moist?")
    assert result.status == "complete"
    assert result.stats["cached_prompt_tokens"] >= warmed - 2  # system, persona, dialogue: all reused
    assert result.stats["prompt_tokens"] - result.stats["cached_prompt_tokens"] < 120
    assert agent.warm(None) > 0  # a new chat: system prompt and persona


def test_warming_is_nothing_for_a_model_without_a_local_cache(store):
    class Remote:  # e.g. the OpenAI-compatible HTTP backend
        n_ctx = 4096

    from app.chat.agent import ChatAgent

    assert ChatAgent(store, Remote()).warm(store.conversations.create_conversation()) == 0


LOOPING = "Write a poem where every line is 'the sea is calm tonight'."


def _most_repeated_line(text: str) -> int:
    lines = [" ".join(x.lower().strip(" ,.").split()) for x in text.splitlines()]
    return max((lines.count(x) for x in lines if len(x.split()) >= 3), default=0)


@pytest.mark.parametrize("guarded", [True, False])
def test_a_reply_that_loops_is_stopped_and_keeps_what_came_before_the_loop(store, chat_model, monkeypatch, guarded):
    # The bundled model, greedy and without a repeat penalty, sings this stanza again and again to the token
    # limit. (The default sampling makes loops rarer; the guard is for those that still happen.)
    monkeypatch.setattr(chat_model.config, "temperature", 0.0)
    monkeypatch.setattr(chat_model.config, "repeat_penalty", 1.0)
    agent = ChatAgent(store, chat_model, reply_reserve=256, max_tokens=160, repetition_guard=guarded)
    streamed = []
    result = agent.send(agent.new_conversation(), LOOPING, on_token=streamed.append)
    if not guarded:  # the same request without the guard: the loop runs on (the test can tell)
        assert _most_repeated_line(result.text) >= 6 and result.stats["finish_reason"] == "length"
        return
    assert result.stats["finish_reason"] == "repetition"
    assert result.stats["completion_tokens"] < 160
    assert 1 <= _most_repeated_line(result.text) <= 2  # one stanza (its refrain line is in it twice)
    assert "".join(streamed).startswith(result.text)  # what was shown, less the loop
    stored = store.conversations.get_message(result.assistant_message_id)
    assert stored.content == result.text and stored.status == "complete"
    assert stored.meta["stats"]["finish_reason"] == "repetition"


def test_a_chat_is_titled_by_its_first_message_cut_between_words():
    from app.chat.agent import title_from

    assert title_from("  What does my\nsister do?  ") == "What does my sister do?"
    long = "Hi! My name is Dana, I keep bees on my roof in Lyon and my sister Ines is visiting next week."
    assert title_from(long) == "Hi! My name is Dana, I keep bees on my roof in Lyon and my…"
    assert len(title_from(long)) <= 60
    assert title_from("x" * 100) == "x" * 59 + "…"  # one long word: cut inside it
    assert title_from("   ") == "New chat"


class _Framed:
    """The real chat model, its reply stream framed by fixed chunks (`before`, `after`) as a model may
    write them, or made of them alone (`alone`): the agent's handling of what a model writes is under
    test, and the bundled model writes such things only now and then."""

    def __init__(self, model, *, before=(), after=(), alone: bool = False):
        self._m = model
        self._before, self._after, self._alone = list(before), list(after), alone

    def __getattr__(self, name):
        return getattr(self._m, name)

    def stream(self, messages, **kw):
        yield from self._before
        if not self._alone:
            yield from self._m.stream(messages, **kw)
        yield from self._after


def test_the_prompts_memory_tags_written_back_by_the_model_are_dropped(store, chat_model):
    """The bundled model sometimes writes "<memory>" into a reply, as a header before its answer or
    before invented page quotes. The stream is the real model's, with such an ending added to it, the
    tag split over two chunks as a tokenizer may split it: the tag goes (never shown, not stored, not
    remembered), the words around it stay."""

    echoing = _Framed(
        chat_model, after=["\nHere's the answer: <mem", "ory>", "\nMy grandmother grew up in Porto.</memory> a < b"]
    )
    agent = ChatAgent(store, echoing, reply_reserve=256, max_tokens=12)
    streamed = []
    result = agent.send(agent.new_conversation(), "Where did my grandmother grow up?", on_token=streamed.append)
    assert result.status == "complete" and result.stats["markup_removed"] == 2
    assert result.text.endswith("Here's the answer: \nMy grandmother grew up in Porto. a < b")
    assert "".join(streamed) == result.text and "memory>" not in result.text
    assert store.conversations.get_message(result.assistant_message_id).content == result.text
    store.jobs.run_pending(allow_llm=False)
    assert "<memory>" not in store.pages.list_pages()[0].assistant_text  # nor does it reach memory

    from app.chat.prompting import MarkupFilter

    # a "<" that begins no tag is held only until it is clear, then shown; a tag is dropped
    f = MarkupFilter()
    assert [f.feed(c) for c in ("if a <", "= b", " use </", "me", "nu>", " ok <m")] == [
        "if a ",
        "<= b",
        " use ",
        "",
        "</menu>",
        " ok ",
    ]
    assert f.rest() == "<m" and f.removed == 0
    assert f.feed("x</memory>y") == "xy" and f.removed == 1


def _writes_the_dialogue_on(model):
    """A reply opened by a role label and followed by a turn nobody said, the label and a page header split
    over chunks as a tokenizer may split them: what the bundled model does now and then when pages are
    quoted to it (app.chat.quoted_turns). The middle is fixed too: the real model's own 12 tokens, drawn with
    the next seed of the session, sometimes held a header of their own and changed what was counted."""
    return _Framed(
        model,
        before=[
            "Us",
            "er: My grandmother grew up in Porto.\n[2023-11",
            "-15 08:49] (page 1)\n",
            "She grew up by the river.",
        ],
        after=["\nAssis", "tant: Porto is a lovely city.\nUser: Thanks!"],
        alone=True,
    )


def test_a_reply_that_writes_the_quoted_dialogue_on_ends_before_the_turn_nobody_said(store, chat_model):
    agent = ChatAgent(store, chat_model, reply_reserve=256, max_tokens=12)
    agent.send(agent.new_conversation(), "My grandmother grew up in Porto.")
    store.jobs.run_pending(allow_llm=False)
    agent = ChatAgent(store, _writes_the_dialogue_on(chat_model), reply_reserve=256, max_tokens=12)
    streamed = []
    result = agent.send(agent.new_conversation(), "Where did my grandmother grow up?", on_token=streamed.append)
    assert result.prompt.included["pages"]  # a page was quoted: the filter is on
    # the opening line recites the quoted page: shown as the page's words, attributed as it was said
    assert result.text.startswith("You said: “My grandmother grew up in Porto.”\n")
    assert "User:" not in result.text and "Assistant:" not in result.text and "(page 1)" not in result.text
    assert result.status == "complete" and result.stats["finish_reason"] == "invented_turn"
    assert result.stats["quoting_removed"] == 2  # the recitation and the header
    assert "".join(streamed).rstrip() == result.text  # what was shown is what is kept
    assert store.conversations.get_message(result.assistant_message_id).content == result.text
    store.jobs.run_pending(allow_llm=False)
    assert all("Assistant:" not in p.assistant_text for p in store.pages.list_pages())  # nor does it reach memory


@pytest.mark.parametrize(
    "message",
    [
        "Where did my grandmother grow up?",  # nothing quoted
        "Write a dialogue about where my grandmother grew up.",
    ],
)  # labels asked for
def test_labels_stay_where_no_page_was_quoted_or_a_dialogue_was_asked_for(store, chat_model, message):
    if message.startswith("Write"):
        ChatAgent(store, chat_model, reply_reserve=256, max_tokens=12).send(
            store.conversations.create_conversation(), "My grandmother grew up in Porto."
        )
        store.jobs.run_pending(allow_llm=False)
    agent = ChatAgent(store, _writes_the_dialogue_on(chat_model), reply_reserve=256, max_tokens=12)
    result = agent.send(agent.new_conversation(), message)
    assert bool(result.prompt.included["pages"]) is message.startswith("Write")
    assert result.text.startswith("User: My grandmother grew up in Porto.\n[2023-11-15 08:49] (page 1)\n")
    assert result.text.endswith("\nAssistant: Porto is a lovely city.\nUser: Thanks!")
    assert result.stats["finish_reason"] != "invented_turn" and "quoting_removed" not in result.stats


def test_a_reply_that_copies_the_notation_of_quoted_facts_is_filtered_too(store, chat_model):
    """Known facts are quoted as "- (user) …"; the bundled model writes "(user) …" back as well."""
    store.persona.add_knowledge("user", "My locker code is 4312")
    agent = ChatAgent(
        store,
        _Framed(chat_model, before=["(us", "er) My locker code is 4312.\n(assistant) Anything else?"], alone=True),
        reply_reserve=256,
        max_tokens=12,
    )
    result = agent.send(agent.new_conversation(), "What is my locker code?")
    assert result.prompt.included["knowledge"] and not result.prompt.included["pages"]
    assert result.text == "My locker code is 4312." and result.stats["finish_reason"] == "invented_turn"


def test_a_recited_answer_of_an_imported_chatgpt_chat_is_chatgpts(store, chat_model):
    cid = store.conversations.create_conversation("Lenses", source="chatgpt", external_id="c1")
    store.intake.add_page(
        cid, "Which lens should I buy for street photography?", "A 35 mm prime lens suits street photography best."
    )
    agent = ChatAgent(
        store,
        _Framed(chat_model, before=["Assistant: A 35 mm prime lens suits street photography best."], alone=True),
        reply_reserve=256,
        max_tokens=12,
    )
    result = agent.send(agent.new_conversation(), "Which lens did I decide on for street photography?")
    assert result.prompt.included["pages"]
    assert result.text == "ChatGPT replied: “A 35 mm prime lens suits street photography best.”"


def test_a_reply_that_only_recites_a_page_keeps_no_trailing_line_break(store, chat_model):
    ChatAgent(store, chat_model, reply_reserve=256, max_tokens=12).send(
        store.conversations.create_conversation(), "My grandmother grew up in Porto."
    )
    store.jobs.run_pending(allow_llm=False)
    agent = ChatAgent(
        store,
        _Framed(chat_model, before=["User: My grandmother grew up in Porto.", "\n"], alone=True),
        reply_reserve=256,
        max_tokens=12,
    )
    result = agent.send(agent.new_conversation(), "Where did my grandmother grow up?")
    assert result.text == "You said: “My grandmother grew up in Porto.”"
    assert result.stats["finish_reason"] != "invented_turn" and result.stats["quoting_removed"] == 1


def test_a_message_asking_to_forget_takes_the_fact_and_the_pages_that_said_it(agent, store):
    """ "Forget that …" in a chat: the matching fact and the pages holding every content word of it go
    before the reply is composed, and the request itself (which repeats it) is not kept as a page."""
    cid = agent.new_conversation()
    kept = agent.send(cid, "Remember that my locker code is 4312.").stats["remembered"]
    agent.send(cid, "My sister Margot lives in Lisbon.")
    agent.send(agent.new_conversation(), "The locker room at my gym smells of chlorine.")
    store.jobs.run_pending(allow_llm=False)
    pages_before = store.pages.count_pages()
    # the page that said it, and any reply of the model that repeated it (the bundled model sometimes
    # does, depending on what it ran before); not the gym's
    holding = [
        p.id
        for p in store.pages.list_pages(limit=100)
        if all(w in f"{p.user_text} {p.assistant_text}".lower() for w in ("locker", "code", "4312"))
    ]
    other = agent.new_conversation()
    result = agent.send(other, "Please forget that my locker code is 4312.")
    forgot = result.stats["forgot"]
    assert forgot["what"] == "my locker code is 4312" and forgot["facts"] == [[kept["id"]]]
    assert forgot["pages"] == len(holding) >= 1
    assert store.persona.get_knowledge(kept["id"]) is None
    assert result.trace["included"]["knowledge"] == []  # this very reply cannot recall it
    store.jobs.run_pending(allow_llm=False)
    assert store.pages.count_pages() == pages_before - len(holding)  # the request is not kept as a page
    assert not any("4312" in p.user_text + p.assistant_text for p in store.pages.list_pages(limit=100))
    assert any("chlorine" in p.user_text for p in store.pages.list_pages(limit=100))
    assert store.conversations.get_message(result.assistant_message_id).meta["stats"]["forgot"] == forgot
    # regenerating it keeps no page either; nothing left to match says so
    agent.regenerate(result.assistant_message_id)
    again = agent.send(other, "Forget that my locker code is 4312")
    assert again.stats["forgot"] == {"what": "my locker code is 4312", "facts": [], "pages": 0}
    store.jobs.run_pending(allow_llm=False)
    assert store.pages.count_pages() == pages_before - len(holding)
    # in an incognito chat memory is not touched at all
    secret = agent.new_conversation()
    store.conversations.set_conversation_flags(secret, incognito=True)
    agent.send(agent.new_conversation(), "My sister Margot lives in Lisbon.")  # said again: the page above may be
    store.jobs.run_pending(allow_llm=False)  # gone (its reply repeated the code)
    margot = store.pages.count_pages(text="Margot")
    assert margot >= 1
    assert "forgot" not in agent.send(secret, "Forget that my sister Margot lives in Lisbon.").stats
    assert store.pages.count_pages(text="Margot") == margot
