"""Random add/retrieve/edit/forget/pin/promote/evict sequences keep the store's invariants:
every page in exactly one tier, base/vec/FTS tables agree, no orphan rows."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, precondition, rule

from memory_core import MemoryParams, MemoryStore, RetrievalBudget

from .conftest import Clock

WORDS = [
    "dog",
    "cat",
    "hiking",
    "Berlin",
    "coffee",
    "guitar",
    "marathon",
    "nurse",
    "garden",
    "tomato",
    "chess",
    "rain",
    "python",
    "sushi",
    "violin",
    "I live in Paris",
    "I love painting",
    "my name is Zoe",
    "東京",
    "寿司",
]
text_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


def make_machine(embedder):
    class MemoryMachine(RuleBasedStateMachine):
        pages = Bundle("pages")

        def __init__(self):
            super().__init__()
            self.dir = Path(tempfile.mkdtemp(prefix="mnemo-sm-"))
            self.clock = Clock()
            self.store = MemoryStore.open(
                self.dir / "m.db",
                embedder.embed,
                embed_model_id=embedder.model_id,
                dim=embedder.dim,
                params=MemoryParams.from_flat(stm_capacity=2, mtm_capacity=3, tau=2.5, theta=0.6),
                clock=self.clock,
            )
            self.convs = [
                self.store.conversations.create_conversation("a"),
                self.store.conversations.create_conversation("b"),
            ]
            self.alive: set[int] = set()

        def teardown(self):
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

        @rule(target=pages, conv=st.integers(0, 1), u=text_st, a=text_st)
        def add_page(self, conv, u, a):
            self.clock.advance(30)
            pid = self.store.intake.add_page(self.convs[conv], u, a)
            assert pid > 0
            self.alive.add(pid)
            return pid

        @rule(conv=st.integers(0, 1), items=st.lists(st.tuples(text_st, text_st), min_size=1, max_size=4))
        def add_pages(self, conv, items):
            self.clock.advance(30)
            ids = self.store.intake.add_pages(
                self.convs[conv], [{"user_text": u, "assistant_text": a} for u, a in items]
            )
            self.alive.update(ids)

        @rule(q=text_st, conv=st.sampled_from([None, 0, 1]))
        def retrieve(self, q, conv):
            r = self.store.retrieve(q, None if conv is None else self.convs[conv], RetrievalBudget(pages=4))
            ids = [h.page.id for h in r.pages + r.stm]
            assert len(ids) == len(set(ids))
            assert set(ids) <= self.alive
            r.to_trace()

        @rule(pid=pages, u=text_st)
        def edit(self, pid, u):
            if pid in self.alive:
                self.store.curation.edit_page(pid, user_text=u)

        @rule(pid=consumes(pages))
        def forget_page(self, pid):
            n = self.store.curation.forget("page", pid)
            assert n == (1 if pid in self.alive else 0)
            self.alive.discard(pid)
            assert self.store.pages.get(pid) is None

        @rule(pid=pages)
        def forget_segment_of(self, pid):
            p = self.store.pages.get(pid)
            if p is not None and p.segment_id is not None:
                gone = {x.id for x in self.store.pages.list_pages(segment_id=p.segment_id, limit=10_000)}
                self.store.curation.forget("segment", p.segment_id)
                self.alive -= gone

        @rule(pid=pages, on=st.booleans())
        def pin_page(self, pid, on):
            self.store.curation.pin("page", pid, on)

        @rule(pid=pages, on=st.booleans())
        def pin_segment(self, pid, on):
            p = self.store.pages.get(pid)
            if p is not None and p.segment_id is not None:
                self.store.curation.pin("segment", p.segment_id, on)

        @rule()
        def promote(self):
            self.store.jobs.run_pending(allow_llm=False)

        @precondition(lambda self: self.store.persona.count_knowledge() > 0)
        @rule(data=st.data())
        def forget_knowledge(self, data):
            ks = self.store.persona.list_knowledge(include_archived=True)
            self.store.curation.forget("knowledge", data.draw(st.sampled_from([k.id for k in ks])))

        @rule(dt=st.sampled_from([10.0, 1e5, 1e7]))
        def time_passes(self, dt):
            self.clock.advance(dt)

        @invariant()
        def consistent(self):
            assert self.store.check_integrity() == []
            tiers = dict(self.store.db.rows("SELECT tier, count(*) FROM page GROUP BY tier"))
            assert set(tiers) <= {"stm", "mtm", "archive"}
            assert sum(tiers.values()) == len(self.alive) == self.store.pages.count_pages()
            for cid in self.convs:
                assert self.store.pages.count_pages(tier="stm", conversation_id=cid) <= 2
            unpinned_mtm = self.store.db.scalar(
                "SELECT count(*) FROM segment s WHERE tier = 'mtm' AND pinned = 0 AND NOT EXISTS "
                "(SELECT 1 FROM page p WHERE p.segment_id = s.id AND p.pinned = 1)"
            )
            if self.store.segments.count_segments(tier="mtm") > 3:
                assert unpinned_mtm == 0  # over capacity only when everything left is pinned

    return MemoryMachine


def test_memory_state_machine(embedder):
    machine = make_machine(embedder)
    machine.TestCase.settings = settings(
        max_examples=20,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    machine.TestCase().runTest()
