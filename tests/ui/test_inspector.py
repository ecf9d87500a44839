"""GUI tests of the memory inspector over a store filled by the real memory core (real embedder).

For each view: what is shown equals the database; edit, pin and forget act on the store and
the view refreshes; forgotten items disappear from retrieval; the trace of a chat reply lists
the pages its prompt contained. Dialogs are answered by replacing the panel's confirm/edit hooks.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt

from tests.ui.test_inspector_fixtures import (  # noqa: F401  (fixtures)
    ctx,
    fill_store,
    filled,
    load_all,
    panel_factory,
    random_items,
    settle,
    store,
)
from ui.inspector.dialogs import WIPE_PHRASE, TypedConfirmDialog


def _ids(recs):
    return [r.id for r in recs]


def _select_rows(table, rows):
    sm = table.selectionModel()
    sm.clearSelection()
    for r in rows:
        sm.select(
            table.model().index(r, 0), QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
        )
    sm.setCurrentIndex(table.model().index(rows[0], 0), QItemSelectionModel.SelectionFlag.NoUpdate)


# ---------------------------------------------------------------------- what is shown equals the database
def test_overview_shows_the_stats_and_events(qtbot, store, filled, panel_factory):
    panel = panel_factory("overview")
    st = store.stats()
    ov = panel.overview
    assert ov.stats["pages"] == st["pages"] and ov.stats["segments"] == st["segments"]
    assert ov.cards["stm"].value.text() == f"{st['pages']['stm']:,} pages"
    assert ov.cards["mtm"].value.text() == f"{st['segments']['mtm']:,} topics"
    n_facts = st["knowledge"]["user"]
    assert ov.cards["lpm"].value.text() == f"{n_facts:,} fact{'s' if n_facts != 1 else ''} · {st['traits']:,} traits"
    assert ov.cards["mtm"].bar.maximum() == store.params.tiers.mtm_capacity
    # the count is a line of its own: a bar 8 px high cannot hold it (it was drawn across the bar)
    assert not ov.cards["mtm"].bar.isTextVisible()
    assert ov.cards["mtm"].bar_text.text() == f"{st['segments']['mtm']:,} of {store.params.tiers.mtm_capacity:,}"
    evs = store.event_log.events(0, 100000)
    shown = ov.events.records()
    assert len(shown) == min(300, len(evs))
    assert [e.id for e in shown] == [e.id for e in reversed(evs)][: len(shown)]  # newest first
    from ui.inspector import fmt

    panel.set_details(True)  # the store card's technical figures
    assert st["pages_word_indexed"] == st["pages_total"] > 0  # the app stores token vectors as it adds pages
    words = f"words of {st['pages_word_indexed']:,} pages indexed ({fmt.size(st['word_index_bytes'])})"
    assert ov.cards["store"].sub.text().replace("\u200b", "").endswith(words)


def test_overview_says_what_background_work_is_waiting_for(qtbot, store, filled, panel_factory):
    """ "2 pending" alone leaves a user wondering; the card says what the queued jobs do."""
    store.jobs.enqueue("promote_segment", {"segment_id": 10**9})
    store.jobs.enqueue("promote_segment", {"segment_id": 10**9 + 1})
    assert store.stats()["pending_by_kind"] == {"promote_segment": 2}
    card = panel_factory("overview").overview.cards["jobs"]
    assert card.value.text() == "2 waiting"
    assert card.sub.text().replace("\u200b", "") == "2 busy topics to learn about you from, when the chat model is free"


@pytest.mark.parametrize("width, columns", [(1000, 3), (420, 2)])
def test_overview_cards_reflow_so_their_figures_are_not_cut_off(qtbot, store, filled, panel_factory, width, columns):
    panel = panel_factory("overview")
    panel.resize(width, 800)
    panel.show()
    qtbot.waitExposed(panel)
    ov = panel.overview
    qtbot.waitUntil(lambda: ov.columns == columns, timeout=3000)
    for card in ov.cards.values():
        assert card.value.width() >= card.value.sizeHint().width(), card.title.text()
        assert card.title.width() >= card.title.minimumSizeHint().width(), card.title.text()
    panel.set_details(True)
    qtbot.wait(50)
    sub = ov.cards["store"].sub  # a long model id breaks into lines instead of widening the card
    assert sub.width() >= sub.minimumSizeHint().width()
    assert sub.text().replace("\u200b", "").startswith("embedding model all-MiniLM-L6-v2, int8 (bundled) (384-d);")
    from ui.inspector import fmt

    assert (
        fmt.embedder_name("bge-small-models-0123456789-384d") == "bge-small-models" and fmt.embedder_name(None) == "?"
    )


def test_the_events_say_what_happened_without_scrolling_in_a_docked_panel(qtbot, store, filled, panel_factory):
    """Docked (about 520 px), the events table showed When, What and Item: its Summary ("page 2 entered
    short-term memory") began at 410 px and was cut after a few words (seen on the virtual screen). Now the
    sentence is the last column shown and takes the width left; the technical ones come with Details."""
    from app.wording import event_kind

    panel = panel_factory("overview")
    panel.resize(520, 800)
    panel.show()
    qtbot.waitExposed(panel)
    view = panel.overview.events_view
    col = panel.overview.events.column_index("summary")
    assert view.columnViewportPosition(col) + view.columnWidth(col) <= view.viewport().width()
    assert view.columnWidth(col) >= view.fontMetrics().horizontalAdvance("Page 12 saved from your chat (recent chat)")
    # its kind, after a compact time, was cut to "page adde…"
    what = panel.overview.events.column_index("kind")
    assert view.columnViewportPosition(what) + view.columnWidth(what) <= view.viewport().width()
    kinds = [event_kind(e.kind) for e in panel.overview.events.records()] + [event_kind("knowledge_confirmed")]
    longest = max(kinds, key=view.fontMetrics().horizontalAdvance)
    assert view.fontMetrics().horizontalAdvance(longest) < view.columnWidth(what)
    for key in ("item", "why", "raw"):  # technical: with Details only
        assert view.isColumnHidden(panel.overview.events.column_index(key))
    panel.set_details(True)
    assert not view.isColumnHidden(panel.overview.events.column_index("raw"))


def test_a_compact_time_for_narrow_columns():
    import datetime as dt

    from ui.inspector import fmt

    now = dt.datetime(2026, 12, 1, 9, 30).timestamp()
    assert fmt.when_short(dt.datetime(2026, 12, 1, 5, 14, 29).timestamp(), now) == "05:14:29"
    assert fmt.when_short(dt.datetime(2026, 11, 29, 5, 14, 29).timestamp(), now) == "Nov 29 05:14"
    assert fmt.when_short(dt.datetime(2025, 11, 29, 5, 14).timestamp(), now) == "2025-11-29"
    assert fmt.when_short(None, now) == "—"


def test_column_titles_align_as_their_cells(qtbot, store, panel_factory):
    """A title centred over the trace's 500-px "Why it was recalled" column sat at the far right edge of
    a docked panel, away from the text under it (seen on the virtual screen). Number columns keep the
    header's centred titles: right-aligned, a sort arrow covered their last letter ("Heat")."""
    from ui.inspector.columns import ALIGN_LEFT

    panel = panel_factory("trace")
    model = panel.trace.in_prompt

    def align(key):
        return model.headerData(
            model.column_index(key),
            Qt.Orientation.Horizontal,
            Qt.ItemDataRole.TextAlignmentRole,
        )

    assert align("reason") == ALIGN_LEFT and align("score") is None  # None: the header's own (centred)


def test_no_button_is_cut_off_in_a_docked_panel(qtbot, store, filled, panel_factory):
    from PySide6.QtWidgets import QPushButton

    panel = panel_factory("pages")
    panel.setFixedSize(panel.minimumWidth(), 800)  # as narrow as the window may dock it
    panel.show()
    qtbot.waitExposed(panel)
    cut = []
    for tab in (panel.overview, panel.segments, panel.pages, panel.persona, panel.trace):
        panel.tabs.setCurrentWidget(tab)
        qtbot.wait(50)
        cut += [
            (type(tab).__name__, b.text(), b.width(), b.sizeHint().width())
            for b in panel.findChildren(QPushButton)
            if b.isVisible() and b.width() < b.sizeHint().width()
        ]
    assert not cut


def test_pages_table_equals_the_database_and_sorts_and_filters_in_sql(qtbot, store, filled, panel_factory):
    panel = panel_factory("pages")
    m = panel.pages.model
    assert m.rowCount() == store.pages.count_pages()
    shown = load_all(m, panel)
    assert _ids(shown) == _ids(store.pages.list_pages(limit=10_000))  # default: newest first
    assert [m.index(r, m.column_index("user")).data() for r in range(3)] == [
        " ".join(p.user_text.split()) for p in store.pages.list_pages(limit=3)
    ]
    # click the "Page" header: ascending id, then descending
    header = panel.pages.table.horizontalHeader()
    col = m.column_index("id")
    header.setSortIndicator(col, Qt.SortOrder.AscendingOrder)
    settle(panel)
    assert _ids(load_all(m, panel)) == _ids(store.pages.list_pages(order_by="id", descending=False, limit=10_000))
    header.setSortIndicator(m.column_index("tier"), Qt.SortOrder.DescendingOrder)
    settle(panel)
    assert _ids(load_all(m, panel)) == _ids(store.pages.list_pages(order_by="tier", descending=True, limit=10_000))
    # a column that SQL cannot sort keeps the current order
    header.setSortIndicator(m.column_index("user"), Qt.SortOrder.AscendingOrder)
    settle(panel)
    assert m.order == ("tier", True) and header.sortIndicatorSection() == m.column_index("tier")
    # filters
    panel.pages.search.setText("Luna")
    qtbot.waitUntil(lambda: m.filters.get("text") == "Luna", timeout=3000)
    settle(panel)
    assert _ids(load_all(m, panel)) == _ids(store.pages.list_pages(text="Luna", order_by="tier", limit=10_000))
    panel.pages.search.setText("")
    panel.pages.tier.setCurrentIndex(panel.pages.tier.findData("stm"))
    qtbot.waitUntil(lambda: "text" not in m.filters, timeout=3000)
    settle(panel)
    assert m.rowCount() == store.pages.count_pages(tier="stm") > 0
    assert {p.tier for p in load_all(m, panel)} == {"stm"}


def test_page_detail_chain_navigation_and_links(qtbot, store, filled, panel_factory):
    chained = [p for p in store.pages.list_pages(limit=10_000) if p.prev_page_id and p.next_page_id]
    assert chained, "the memory core linked no dialogue chain"
    p = chained[0]
    panel = panel_factory()
    panel.show_page(p.id)
    settle(panel)
    view = panel.pages
    assert view.page.id == p.id and f"Page {p.id}" in view.detail.toPlainText()
    assert p.user_text in view.detail.toPlainText() and p.assistant_text in view.detail.toPlainText()
    assert view.prev_btn.isEnabled() and view.next_btn.isEnabled()
    view.prev_btn.click()
    settle(panel)
    assert view.page.id == p.prev_page_id
    view.next_btn.click()
    settle(panel)
    assert view.page.id == p.id
    # link to its segment
    view.seg_btn.click()
    settle(panel)
    assert panel.current_tab() == "segments" and panel.segments.segment.id == p.segment_id
    # ... and from the segment to its pages
    panel.segments.pages_btn.click()
    settle(panel)
    assert panel.current_tab() == "pages" and view.model.filters == {"segment_id": p.segment_id}
    assert sorted(_ids(load_all(view.model, panel))) == sorted(
        _ids(store.pages.list_pages(segment_id=p.segment_id, limit=10_000))
    )
    # link to the conversation message
    got = []
    panel.message_requested.connect(lambda cid, mid: got.append((cid, mid)))
    page_with_msg = store.pages.get(p.id)
    view.load_page(p.id)
    settle(panel)
    if page_with_msg.assistant_message_id or page_with_msg.user_message_id:
        view.msg_btn.click()
        assert got == [(p.conversation_id, page_with_msg.assistant_message_id or page_with_msg.user_message_id)]


def test_segments_table_heat_and_charts_equal_the_database(qtbot, store, filled, panel_factory):
    panel = panel_factory("segments")
    settle(panel)
    sv = panel.segments
    m = sv.model
    db = store.segments.list_segments(limit=10_000)
    shown = load_all(m, panel)
    assert _ids(shown) == _ids(db)  # hottest first
    for a, b in zip(shown, db):
        assert (a.n_visit, a.l_interaction, a.page_count, a.tier, a.pinned) == (
            b.n_visit,
            b.l_interaction,
            b.page_count,
            b.tier,
            b.pinned,
        )
        assert a.heat == pytest.approx(b.heat, abs=1e-3)
    heat_col = m.column_index("heat")
    from ui.inspector.columns import BarRole

    assert m.index(0, heat_col).data(BarRole) == pytest.approx(db[0].heat, abs=1e-3)
    assert sv.table.itemDelegateForColumn(heat_col) is sv.delegate
    # the chart of all segments: the hottest mid-term ones (hottest drawn at the top)
    hottest = store.segments.list_segments(tier="mtm", order_by="heat", limit=20)
    assert list(reversed(sv.chart.segment_ids)) == _ids(hottest)
    # one segment's heat over time, with the promotion threshold
    sv.show_segment(db[0].id)
    settle(panel)
    hist = sv.history.history
    assert hist is not None and hist.now[1] == pytest.approx(sv.segment.heat)
    names = [s.name() for s in sv.history.chart().series()]
    assert any(n.startswith("threshold") for n in names)
    # sort by pages (SQL) and filter by tier
    sv.table.horizontalHeader().setSortIndicator(m.column_index("page_count"), Qt.SortOrder.DescendingOrder)
    settle(panel)
    assert _ids(load_all(m, panel)) == _ids(store.segments.list_segments(order_by="page_count", limit=10_000))
    sv.tier.setCurrentIndex(sv.tier.findData("mtm"))
    settle(panel)
    assert m.rowCount() == store.segments.count_segments(tier="mtm")


def test_a_heat_just_below_tau_is_not_shown_as_tau(qtbot, store, filled, panel_factory):
    """4 new pages and a recency of 0.999 give a heat of 4.999 against τ = 5: not promoted, so not "5.00"
    (nor "0.00 below τ") anywhere the inspector shows it."""
    import time

    seg = store.segments.list_segments(tier="mtm", limit=1)[0]
    with store.transaction():
        store.db.execute(
            "UPDATE segment SET n_visit = 0, l_interaction = ?, last_access = ?, pinned = 0 WHERE id = ?",
            (
                int(store.params.heat.tau / store.params.heat.beta) - 1,
                time.time() - 0.001 * store.params.heat.mu,
                seg.id,
            ),
        )
    heat = store.segments.get(seg.id).heat
    assert store.params.heat.tau - 0.01 < heat < store.params.heat.tau
    panel = panel_factory("segments")
    sv = panel.segments
    settle(panel)
    load_all(sv.model, panel)
    row = sv.model.row_of_key(seg.id)
    assert sv.model.index(row, sv.model.column_index("heat")).data() == "4.99"
    sv.show_segment(seg.id)
    settle(panel)
    text = sv.detail.toPlainText()
    assert "Heat 4.99:" in text and "less than 0.01 below the threshold of 5" in text and "5.00" not in text
    assert "heat 4.99" in sv.history.chart().title()
    panel.set_details(True)  # the formula, with the core's own terms
    text = sv.detail.toPlainText()
    assert "heat 4.99 = 1·N_visit (0)" in text and "τ = 5" in text and "5.00" not in text


def test_persona_shows_traits_by_dimension_and_knowledge(qtbot, store, filled, panel_factory):
    traits = store.persona.list_traits(limit=10_000)
    assert traits, "the LLM-free promotion produced no traits"
    panel = panel_factory("persona")
    pv = panel.persona
    assert sorted(t.id for t in pv.traits.traits()) == sorted(t.id for t in traits)
    assert pv.traits.dimensions() == sorted({t.dimension for t in traits}, key=str.lower)
    for owner in ("user", "assistant"):
        assert _ids(pv.knowledge[owner].records()) == _ids(store.persona.list_knowledge(owner=owner, limit=10_000))
    t = traits[0]
    idx = pv.traits.index_of_key(("trait", t.id))
    pv.tree.setCurrentIndex(idx)
    settle(panel)
    assert pv.item[1].id == t.id and t.value in pv.detail.toPlainText()
    for src in t.source_page_ids:
        assert f"page {src}" in pv.detail.toPlainText()
    versions = store.persona.item_versions("trait", t.id)
    assert [v.version for v in pv.versions.records()] == [v.version for v in reversed(versions)]
    # an evidence link opens its source page
    if t.source_page_ids:
        panel.follow_link(f"page:{t.source_page_ids[0]}")
        settle(panel)
        assert panel.current_tab() == "pages" and panel.pages.page.id == t.source_page_ids[0]


def test_persona_headings_are_whole_in_a_docked_panel(qtbot, store, filled, panel_factory):
    """Docked (about 520 px), the heading over the user's facts read "What the assistant knows about the
    u" and its count was never seen (seen on the virtual screen)."""
    panel = panel_factory("persona")
    panel.resize(520, 760)
    qtbot.waitExposed(panel)
    settle(panel)
    pv = panel.persona
    labels = [pv.traits_label] + [pv.kviews[o].parentWidget().property("title_label") for o in ("user", "assistant")]
    n_user = len(store.persona.list_knowledge(owner="user", limit=10_000))
    assert labels[1].text() == f"Facts about you — {n_user} fact{'s' if n_user != 1 else ''}"
    for lab in labels:
        one_line = lab.fontMetrics().horizontalAdvance(lab.text()) <= lab.contentsRect().width()
        assert lab.isVisible() and (one_line or (lab.wordWrap() and lab.height() >= lab.heightForWidth(lab.width())))


# ---------------------------------------------------------------------- controls act on the store
def test_edit_page_reindexes_and_the_view_refreshes(qtbot, store, filled, panel_factory):
    panel = panel_factory("pages")
    view = panel.pages
    target = store.pages.list_pages(tier="mtm", limit=1)[0]
    view.load_page(target.id)
    settle(panel)
    panel.edit_texts = lambda title, fields, note="": ["I adopted a parrot called Zephyrine.", "Parrots are clever."]
    view.edit_btn.click()
    settle(panel)
    p = store.pages.get(target.id)
    assert p.user_text == "I adopted a parrot called Zephyrine."
    assert "Zephyrine" in view.detail.toPlainText()
    row = view.model.row_of_key(target.id)
    assert row is not None and "Zephyrine" in view.model.index(row, view.model.column_index("user")).data()
    hits = store.retrieve("Zephyrine the parrot", record_visits=False)
    assert target.id in [h.page.id for h in hits.pages]


def test_pin_page_and_segment(qtbot, store, filled, panel_factory):
    panel = panel_factory("pages")
    view = panel.pages
    target = store.pages.list_pages(limit=1)[0]
    view.table.select_key(target.id)
    settle(panel)
    assert view.page.id == target.id and view.pin_btn.text() == "Pin"
    view.pin_btn.click()
    settle(panel)
    assert store.pages.get(target.id).pinned
    assert panel.status_label.text() == f"Page {target.id} pinned."  # what the verb says it did
    row = view.model.row_of_key(target.id)
    assert view.model.index(row, view.model.column_index("pinned")).data() == "pinned"
    assert view.pin_btn.text() == "Unpin"
    view.pin_btn.click()
    settle(panel)
    assert not store.pages.get(target.id).pinned
    panel.show_tab("segments")
    settle(panel)
    seg = store.segments.list_segments(limit=1)[0]
    panel.segments.show_segment(seg.id)
    settle(panel)
    panel.segments.pin_btn.click()
    settle(panel)
    assert store.segments.get(seg.id).pinned
    assert panel.status_label.text() == f"Topic {seg.id} pinned."
    rec = panel.segments.model.peek(panel.segments.model.row_of_key(seg.id))
    assert rec.pinned


def test_multi_select_forget_pages_needs_confirmation_and_leaves_retrieval(qtbot, store, filled, panel_factory):
    panel = panel_factory("pages")
    view = panel.pages
    view.search.setText("Luna")
    qtbot.waitUntil(lambda: view.model.filters.get("text") == "Luna", timeout=3000)
    settle(panel)
    recs = load_all(view.model, panel)
    victims = [r.id for r in recs[:3]]
    query = "my cat Luna at the vet"
    before = [h.page.id for h in store.retrieve(query, record_visits=False).pages]
    assert set(victims) & set(before) or True
    _select_rows(view.table, [0, 1, 2])
    asked = []
    panel.confirm = lambda title, text, action="Forget": asked.append(text) or False
    view.forget_btn.click()
    settle(panel)
    assert asked and "3 pages" in asked[0]
    assert all(store.pages.get(i) is not None for i in victims)  # cancelled: nothing forgotten
    panel.confirm = lambda title, text, action="Forget": True
    view.forget_btn.click()
    settle(panel)
    assert all(store.pages.get(i) is None for i in victims)
    assert view.model.rowCount() == store.pages.count_pages(text="Luna")
    assert not set(victims) & set(_ids(load_all(view.model, panel)))
    for q in (query, "Luna knocked a glass off the table", "salmon cat food"):
        assert not set(victims) & {h.page.id for h in store.retrieve(q, record_visits=False).pages}


def test_forget_segment_from_the_segments_table(qtbot, store, filled, panel_factory):
    panel = panel_factory("segments")
    settle(panel)
    sv = panel.segments
    seg = store.segments.list_segments(limit=1)[0]
    pages = _ids(store.pages.list_pages(segment_id=seg.id, limit=10_000))
    row = sv.model.row_of_key(seg.id)
    _select_rows(sv.table, [row])
    panel.confirm = lambda title, text, action="Forget": True
    sv.forget_btn.click()
    settle(panel)
    assert store.segments.get(seg.id) is None
    assert all(store.pages.get(p) is None for p in pages)
    assert seg.id not in _ids(load_all(sv.model, panel))
    text = pages and store  # the segment's topic no longer comes back
    assert text is not None
    got = {h.page.id for h in store.retrieve(seg.summary[:200], record_visits=False).pages}
    assert not got & set(pages)


def test_edit_pin_forget_persona_items(qtbot, store, filled, panel_factory):
    panel = panel_factory("persona")
    pv = panel.persona
    t = store.persona.list_traits(limit=1)[0]
    pv.tree.setCurrentIndex(pv.traits.index_of_key(("trait", t.id)))
    settle(panel)
    panel.edit_texts = lambda title, fields, note="": ["mountain hiking and glaciers"]
    pv.edit_btn.click()
    settle(panel)
    t2 = store.persona.get_trait(t.id)
    assert t2.value == "mountain hiking and glaciers" and t2.version == t.version + 1
    assert [v.version for v in pv.versions.records()][0] == t2.version  # newest first
    assert any(v.text.endswith(t.value) or v.text == t.value for v in pv.versions.records())
    pv.pin_btn.click()
    settle(panel)
    assert store.persona.get_trait(t.id).pinned
    know = store.persona.list_knowledge(limit=1)
    if know:
        k = know[0]
        v = pv.kviews[k.owner]
        assert v.select_key(k.id)
        settle(panel)
        panel.edit_texts = lambda title, fields, note="": ["The user owns a cat named Luna who loves salmon."]
        pv.edit_btn.click()
        settle(panel)
        assert store.persona.get_knowledge(k.id).text == "The user owns a cat named Luna who loves salmon."
        assert pv.knowledge[k.owner].record(pv.knowledge[k.owner].row_of_key(k.id)).text.startswith("The user owns")
        panel.confirm = lambda *a, **kw: True
        assert v.select_key(k.id)
        settle(panel)
        pv.forget_btn.click()
        settle(panel)
        assert store.persona.get_knowledge(k.id) is None
        assert k.id not in _ids(pv.knowledge[k.owner].records())
        hits = store.retrieve("cat named Luna who loves salmon", record_visits=False).knowledge
        assert k.id not in [h.item.id for h in hits]
    pv.tree.setCurrentIndex(pv.traits.index_of_key(("trait", t.id)))
    settle(panel)
    panel.confirm = lambda *a, **kw: True
    pv.forget_btn.click()
    settle(panel)
    assert store.persona.get_trait(t.id) is None
    assert t.id not in [x.id for x in pv.traits.traits()]
    assert t.id not in [h.item.id for h in store.retrieve("hiking", record_visits=False).traits]


def test_pause_and_wipe_with_typed_confirmation(qtbot, store, filled, panel_factory):
    panel = panel_factory("overview")
    panel.pause_box.setChecked(True)
    settle(panel)
    assert store.is_paused() and panel.overview.banner.isVisibleTo(panel)
    assert store.intake.add_pages(filled["cat"], [{"user_text": "x y z", "assistant_text": "q"}]) == [0]
    panel.pause_box.setChecked(False)
    settle(panel)
    assert not store.is_paused()
    # wipe: refused without the phrase
    panel.confirm_typed = lambda *a, **kw: False
    panel.wipe_btn.click()
    settle(panel)
    assert store.pages.count_pages() > 0
    panel.show_tab("pages")
    settle(panel)
    panel.confirm_typed = lambda *a, **kw: True
    panel.wipe_btn.click()
    settle(panel)
    assert store.pages.count_pages() == 0 and store.segments.count_segments() == 0 and store.persona.count_traits() == 0
    assert panel.pages.model.rowCount() == 0
    assert panel.overview.stats["pages_total"] == 0


def test_typed_confirmation_dialog_needs_the_exact_phrase(qtbot):
    dlg = TypedConfirmDialog("Wipe", "sure?")
    qtbot.addWidget(dlg)
    assert not dlg.ok.isEnabled()
    dlg.edit.setText("forget")
    assert not dlg.ok.isEnabled()
    dlg.edit.setText(WIPE_PHRASE)
    assert dlg.ok.isEnabled()


# ---------------------------------------------------------------------- live updates keep selection and scroll
def test_live_refresh_keeps_selection_and_scroll(qtbot, store, panel_factory):
    cid = store.conversations.create_conversation("bulk")
    store.intake.add_pages(cid, random_items(900, store.dim))
    panel = panel_factory("pages")
    view = panel.pages
    table = view.table
    table.resize(900, 400)
    m = view.model
    # scroll to the middle (lazy blocks load), select a few rows there
    table.scrollTo(m.index(450, 0), table.ScrollHint.PositionAtTop)
    settle(panel)
    top_row = table.rowAt(0)
    assert top_row > 300
    top_id = m.peek(top_row).id
    rows = [top_row + 2, top_row + 3]
    _select_rows(table, rows)
    settle(panel)
    chosen = sorted(m.peek(r).id for r in rows)
    current = view.page.id
    # memory changes elsewhere (another connection): new pages on top, one page above the view forgotten
    store.intake.add_pages(cid, random_items(5, store.dim, start=1_900_000_000.0, seed=9))
    store.curation.forget("page", [m.peek(10).id])
    panel.notify_memory_event()
    qtbot.waitUntil(lambda: m.rowCount() == store.pages.count_pages(), timeout=10_000)
    settle(panel)
    sel = sorted(m.peek(i.row()).id for i in table.selectionModel().selectedRows())
    assert sel == chosen
    assert m.peek(table.currentIndex().row()).id == current and view.page.id == current
    assert m.peek(table.rowAt(0)).id == top_id  # the same record stays at the top


# ---------------------------------------------------------------------- retrieval trace
def test_trace_of_a_chat_reply_lists_the_pages_of_its_prompt(qtbot, store, filled, panel_factory, chat_model):
    from app.chat.agent import ChatAgent

    agent = ChatAgent(store, chat_model)
    cid = store.conversations.create_conversation("New chat")
    result = agent.send(cid, "What happened with my cat Luna at the vet?")
    included = result.trace["included"]["pages"]
    assert included, "the prompt recalled no page"
    panel = panel_factory()
    panel.show_trace_for_message(result.assistant_message_id)
    settle(panel)
    tv = panel.trace
    assert panel.current_tab() == "trace"
    assert tv.listed_page_ids("in_prompt") == included
    recalled = [h["page_id"] for h in result.trace["pages"]]
    assert sorted(tv.listed_page_ids("in_prompt") + tv.listed_page_ids("not_in_prompt")) == sorted(recalled)
    row = tv.in_prompt.records()[0]
    hit = next(h for h in result.trace["pages"] if h["page_id"] == row["page_id"])
    assert row["reason"] == hit["reason"] and row["score"] == pytest.approx(hit["score"])
    assert str(result.assistant_message_id) in tv.header.text()
    # a user message has no trace: the view says so instead of showing stale rows
    panel.show_trace_for_message(result.user_message_id)
    settle(panel)
    assert tv.listed_page_ids("in_prompt") == [] and "assistant reply" in tv.header.text()


def test_trace_shows_a_page_quoted_by_one_side(qtbot, store, filled, panel_factory, chat_model):
    """With room for three turns, the prompt takes the better side of the best pages first: a page quoted
    by one side shows that side only in the trace, and says so."""
    from app.chat.agent import ChatAgent

    store.params.quoting.recall_turns = 3
    result = ChatAgent(store, chat_model).send(
        store.conversations.create_conversation("q"), "What happened with my cat Luna at the vet?"
    )
    half = result.trace["half_pages"]
    assert half and len(result.trace["included"]["pages"]) <= 3, result.trace["included"]
    pid, side = next(iter(half.items()))
    page = store.pages.get(int(pid))
    said, other = (page.user_text, page.assistant_text) if side == "user" else (page.assistant_text, page.user_text)
    label = "User: " if side == "user" else "Assistant: "
    (block,) = [b for b in result.prompt.messages[-2]["content"].split("\n\n") if f"(page {pid})" in b]
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith(f"(page {pid})"))
    assert lines[start + 1 :] == [label + said.strip()] and other.strip() not in block
    panel = panel_factory()
    panel.show_trace_for_message(result.assistant_message_id)
    settle(panel)
    (row,) = [r for r in panel.trace.in_prompt.records() if r["page_id"] == int(pid)]
    assert row["text"] == label + said.strip()
    assert row["quoted"] == ("user side" if side == "user" else "reply")
    assert {r["quoted"] for r in panel.trace.in_prompt.records() if str(r["page_id"]) not in half} <= {"both sides"}
    col = panel.trace.in_prompt.column_index("quoted")
    assert panel.trace.in_prompt.headerData(col, Qt.Orientation.Horizontal) == "Quoted"


def test_trace_shows_an_earlier_asking_of_the_question_as_left_out(qtbot, store, filled, panel_factory, chat_model):
    from app.chat.agent import ChatAgent

    agent = ChatAgent(store, chat_model)
    question = "What happened with my cat Luna at the vet?"
    first = store.conversations.create_conversation("first")
    agent.send(first, question)
    store.jobs.run_pending(allow_llm=False)
    (asked,) = store.pages.list_pages(conversation_id=first)
    result = agent.send(store.conversations.create_conversation("again"), question)
    panel = panel_factory()
    panel.show_trace_for_message(result.assistant_message_id)
    settle(panel)
    tv = panel.trace
    assert asked.id not in tv.listed_page_ids("in_prompt")
    (row,) = [r for r in tv.not_in_prompt.records() if r["page_id"] == asked.id]
    assert row["left_out"] == "the same question, asked before: its reply is not evidence" and row["rank"] == 0
    # both tables of the retrieval draw score bars on one scale: the best score of either
    col = tv.in_prompt.column_index("score")
    best = max(r["score"] for m in (tv.in_prompt, tv.not_in_prompt) for r in m.records())
    assert [v.itemDelegateForColumn(col).scale() for v in (tv.in_prompt_view, tv.not_in_prompt_view)] == [best, best]
    tv.query.setText(question)  # the test-query box says the same
    tv.run_btn.click()
    settle(panel)
    assert [r["left_out"] for r in tv.not_in_prompt.records() if r["page_id"] == asked.id] == [row["left_out"]]


def test_trace_says_why_a_recalled_page_was_not_quoted(qtbot, store, filled, panel_factory, chat_model):
    from app.chat.agent import ChatAgent
    from app.chat.prompting import QuoteFloor

    store.params.quoting.recall_min_score = 2.0  # a high floor: most recalled pages stay out of the prompt
    result = ChatAgent(store, chat_model).send(
        store.conversations.create_conversation("q"), "What happened with my cat Luna at the vet?"
    )
    panel = panel_factory()
    panel.show_trace_for_message(result.assistant_message_id)
    settle(panel)
    rows = panel.trace.not_in_prompt.records()
    hits = {p["page_id"]: p for p in result.trace["pages"]}
    floor = QuoteFloor.from_params(store.params)
    refused = [r for r in rows if r["page_id"] in hits and not floor.admits(_ns(hits[r["page_id"]]))]
    assert refused, [(r["page_id"], r["left_out"], hits.get(r["page_id"])) for r in rows]
    assert all(r["left_out"] == floor.refusal(_ns(hits[r["page_id"]])) for r in refused), [
        (r["left_out"], floor.refusal(_ns(hits[r["page_id"]]))) for r in refused
    ]
    assert all(
        "under the quoting floor" in r["left_out"] or "too far from the message" in r["left_out"] for r in refused
    ), refused
    assert not any(r["left_out"] == "not used" for r in refused)
    # the reason is on screen in a docked-width panel, without scrolling sideways
    panel.resize(520, 720)
    panel.show()
    settle(panel)
    view = panel.trace.not_in_prompt_view
    col = panel.trace.not_in_prompt.column_index("left_out")
    assert not view.isColumnHidden(col)
    assert view.columnViewportPosition(col) + 120 <= view.viewport().width(), (
        view.columnViewportPosition(col),
        view.viewport().width(),
    )


def _ns(hit: dict):
    from types import SimpleNamespace

    return SimpleNamespace(**hit)


def test_test_query_box_recalls_like_the_store_without_visits(qtbot, store, filled, panel_factory):
    panel = panel_factory("trace")
    tv = panel.trace
    visits = {s.id: s.n_visit for s in store.segments.list_segments(limit=10_000)}
    q = "pasta dinner party for my friends"
    tv.query.setText(q)
    tv.run_btn.click()
    settle(panel)
    from memory_core import RetrievalBudget

    # the chat agent's budget: the best `recall_turns` pages, whose turns a reply quotes from
    budget = RetrievalBudget(pages=store.params.quoting.recall_turns)
    expected = [h.page.id for h in store.retrieve(q, budget=budget, record_visits=False).pages]
    assert len(expected) == store.params.quoting.recall_turns
    assert tv.listed_page_ids("not_in_prompt") == expected
    assert all(r["reason"] for r in tv.not_in_prompt.records())
    assert {s.id: s.n_visit for s in store.segments.list_segments(limit=10_000)} == visits
    assert tv.segs.rowCount() > 0 and tv.items.rowCount() == len(store.retrieve(q, record_visits=False).traits) + len(
        store.retrieve(q, record_visits=False).knowledge
    )


def test_export_from_the_inspector(qtbot, store, filled, panel_factory, tmp_path, monkeypatch):
    import json

    from PySide6.QtWidgets import QFileDialog

    panel = panel_factory("overview")
    target = tmp_path / "memory.json"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), "JSON, complete (*.json)"))
    )
    with qtbot.waitSignal(panel.exported, timeout=30_000) as sig:
        panel.export_btn.click()
    assert sig.args == [str(target)] and panel.export_btn.isEnabled()
    doc = json.loads(target.read_text(encoding="utf-8"))
    assert [p["id"] for p in doc["pages"]] == [
        p.id for p in store.pages.list_pages(order_by="id", descending=False, limit=100_000)
    ]
    assert "Exported" in panel.status_label.text()
    # a file that cannot be written: a message, no file, the button back
    (tmp_path / "a-file").write_text("")
    panel.export_to(str(tmp_path / "a-file" / "x.md"))
    settle(panel)
    assert "Export failed" in panel.status_label.text() and panel.export_btn.isEnabled()


def test_add_remembers_a_fact_and_a_trait_the_user_writes(qtbot, store, filled, panel_factory):
    """Persona ▸ Add…: the fact is in memory at once, recalled for a question, and shown in the lists."""
    panel = panel_factory("persona")
    pv = panel.persona
    assert pv.add_btn.isEnabled()
    offered = []

    def ask(dimensions):
        offered.extend(dimensions)
        return {"kind": "knowledge", "about": "user", "text": "I am allergic to peanuts.", "pin": True}

    panel.ask_new_item = ask
    pv.add_btn.click()
    settle(panel)
    (k,) = [
        k for k in store.persona.list_knowledge(owner="user", limit=10_000) if k.text == "I am allergic to peanuts."
    ]
    assert k.pinned and k.model == "user"
    assert k.id in _ids(pv.knowledge["user"].records())
    assert panel.status_label.text() == f"Remembered as fact {k.id}: I am allergic to peanuts."
    assert offered == pv.traits.dimensions()
    assert pv.item is not None and pv.item[0] == "knowledge" and pv.item[1].id == k.id  # selected, details shown
    assert "I am allergic to peanuts." in pv.detail.toPlainText() and "by you" in pv.detail.toPlainText()
    hits = store.retrieve("Can I eat peanut butter?", record_visits=False).knowledge
    assert k.id in [h.item.id for h in hits]
    # saying it again confirms it (a count, no new version of the same words); a trait goes under its dimension
    pv.add_btn.click()
    settle(panel)
    again = store.persona.get_knowledge(k.id)
    assert (again.version, again.confirmations) == (1, 1)
    assert panel.status_label.text().startswith(f"Already remembered as fact {k.id}")
    panel.ask_new_item = lambda dims: {"kind": "trait", "dimension": "likes", "value": "bebop jazz", "pin": False}
    pv.add_btn.click()
    settle(panel)
    (t,) = [t for t in store.persona.list_traits(limit=10_000) if t.value == "bebop jazz"]
    assert t.dimension == "likes" and t.id in [r.id for r in pv.traits.traits()]
    # cancelled: nothing changes
    before = store.persona.count_knowledge() + store.persona.count_traits()
    panel.ask_new_item = lambda dims: None
    pv.add_btn.click()
    settle(panel)
    assert store.persona.count_knowledge() + store.persona.count_traits() == before
    # a link to an item that was forgotten since (an old reply's "remembered as fact N") says so
    store.curation.forget("knowledge", k.id)
    panel.show_persona_item("knowledge", k.id)
    settle(panel)
    assert pv.item is None and f"Fact {k.id} is no longer in memory" in pv.detail.toPlainText()


def test_new_item_dialog_asks_for_what_each_kind_needs(qtbot):
    from ui.inspector.dialogs import NewPersonaItemDialog

    dlg = NewPersonaItemDialog(["hobbies", "likes"])
    qtbot.addWidget(dlg)
    dlg.show()
    assert not dlg.ok.isEnabled() and dlg.fact.isVisible() and not dlg.value.isVisible()
    dlg.fact.setPlainText("  My sister lives in Leeds.  ")
    assert dlg.ok.isEnabled()
    assert dlg.item() == {"kind": "knowledge", "about": "user", "text": "My sister lives in Leeds.", "pin": False}
    dlg.kind.setCurrentIndex(1)
    assert dlg.item()["about"] == "assistant"
    dlg.kind.setCurrentIndex(2)
    assert dlg.value.isVisible() and not dlg.fact.isVisible() and not dlg.ok.isEnabled()
    assert [dlg.dimension.itemText(i) for i in range(3)] == ["hobbies", "likes", "dislikes"]
    dlg.dimension.setCurrentText("favourite_food")
    dlg.value.setText("ramen")
    dlg.pin.setChecked(True)
    assert dlg.ok.isEnabled()
    assert dlg.item() == {"kind": "trait", "dimension": "favourite_food", "value": "ramen", "pin": True}


def test_trace_items_show_score_and_prompt_use_without_scrolling(qtbot, store, panel_factory):
    """In the docked inspector (about 520 px), the "Persona & knowledge" table showed only Kind and
    Item: Score and "In prompt" sat after a 430-px Item column, off to the right."""
    panel = panel_factory("trace")
    panel.resize(520, 700)
    tv = panel.trace
    tv.tabs.setCurrentIndex(1)
    tv.items.set_rows(
        [
            {
                "kind": "user knowledge",
                "key": ("knowledge", 1),
                "text": "my sister Ana lives in Porto",
                "score": 0.69,
                "reason": "similar (cos 0.69)",
                "in_prompt": "yes",
            }
        ]
    )
    settle(panel)
    view = tv.items_view
    for key in ("score", "in_prompt"):
        col = tv.items.column_index(key)
        assert view.columnViewportPosition(col) + view.columnWidth(col) <= view.viewport().width(), key


def test_trace_header_names_the_words_weighed_half(qtbot, store, panel_factory):
    """A query word on most pages (an imported dialogue's speaker names) counts half in the query's
    vector (MemoryParams.ranking.common_word_mix); the trace says which."""
    from ui.inspector.tracing import TraceData

    panel = panel_factory("trace")
    panel.trace.set_data(TraceData("query", "What did Ana bake?", common_words=["ana"]))
    assert "On most pages, so half left out of the query's meaning: ana" in panel.trace.header.text()
    panel.trace.set_data(TraceData("query", "What did Ana bake?"))
    assert "On most pages" not in panel.trace.header.text()
