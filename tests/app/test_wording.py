from app.wording import count


def test_count_says_one_page_and_many_pages():
    assert count(1, "page") == "1 page"
    assert count(0, "page") == "0 pages"
    assert count(12345, "segment") == "12,345 segments"
    assert count(None, "fact") == "0 facts"
    assert count(2, "memory") == "2 memories"
    assert count(2, "persona item") == "2 persona items"
    assert count(3, "child", "children") == "3 children"


def test_pending_work_says_what_the_queued_memory_jobs_do():
    from app.wording import pending_work

    assert pending_work({"promote_segment": 2, "index_tokens": 1}) == (
        "2 busy topics to learn about you from, when the chat model is free; indexing the words of older pages"
    )
    assert pending_work({"add_page": 1, "reembed": 1}) == (
        "1 reply to save as memory pages; re-reading memory with the new embedding model"
    )
    assert pending_work({"add_page": 0, "read_in_context": 3}) == "re-reading older pages, each after the one before it"
    assert pending_work({"tidy_up": 2}) == "2 memory updates (tidy_up)"  # a kind this build has no words for
    assert pending_work({}) == "" and pending_work(None) == ""


def test_heat_is_cut_not_rounded():
    """A heat of 4.999 is not promoted at τ = 5, so it must not read "5.00"."""
    from app.wording import heat, heat_gap

    assert [heat(h) for h in (4.999, 5.0, 2.3, 0.0, 12.456)] == ["4.99", "5.00", "2.30", "0.00", "12.45"]
    assert [heat_gap(g) for g in (0.35, 0.01, 0.001)] == ["0.35", "0.01", "less than 0.01"]


def test_internal_terms_are_found_as_words_only():
    from app.wording import internal_terms_in

    assert internal_terms_in("STM (FIFO), heat ≥ τ = 5, cos 0.05, N_visit 3, llm fallback") == [
        "STM",
        "FIFO",
        "τ",
        "cos",
        "N_visit",
        "llm fallback",
    ]
    assert internal_terms_in("the cost of a cosy close match; recent chat; topics") == []


def test_a_recall_reason_in_plain_words():
    """The ranking's own reason ("cos 0.05 (+0.04 over the usual) + word by word 0.60 + keyword match 'live'")
    as a person reads it, with nothing of the ranking's terms left."""
    from app.wording import internal_terms_in, plain_left_out, plain_reason

    said = plain_reason("cos 0.05 (+0.04 over the usual) + word by word 0.60 + keyword match 'live'")
    assert said == "Weak match in meaning; your words match in part; matched the word “live”"
    assert plain_reason("cos 0.71 + date named in the question + follows page 12") == (
        "Very close in meaning; from the date you named; the reply after page 12, which matched"
    )
    assert plain_reason("similar (cos 0.52) + keyword match + pinned") == (
        "Close in meaning; matched your words; pinned by you"
    )
    assert plain_reason("segment 3 (cos 0.41, keywords 0.20)") == "Topic 3: somewhat close in meaning, shares words"
    assert plain_reason("short-term memory (recent dialogue of this conversation)") == (
        "From the recent messages of this chat"
    )
    assert plain_reason("persona trait (confidence 0.80)") == "Part of your profile"
    assert plain_reason("") == "—"
    refused = "scored 0.35, under the quoting floor of 0.4, and its meaning does not stand out (cos 0.12, +0.01 over the usual)"
    assert plain_left_out(refused) == "Too weak a match to quote"
    assert plain_left_out(
        "scored 0.52, over the quoting floor of 0.4 (words, date or segment), but its meaning is "
        "too far from the message (cos 0.15 < 0.2)"
    ) == ("Matched words, but its meaning is too far from your message")
    for text in (said, plain_left_out(refused), plain_reason("a new rule with cos 0.3 + segment 4 (cos 0.2)")):
        assert internal_terms_in(text) == [], text


def test_memory_events_as_sentences():
    from app.wording import event_sentence, internal_terms_in

    assert event_sentence("promoted", "segment", 3, {"traits": 1, "knowledge": 2}) == (
        "Learned 2 facts and 1 trait about you from topic 3"
    )
    assert event_sentence("promoted", "segment", 3, {"traits": 0, "knowledge": 0}) == (
        "Read topic 3 for your profile: nothing new"
    )
    assert event_sentence("knowledge_added", "knowledge", 26, {"owner": "user"}) == "New fact about you (fact 26)"
    # a regenerate forgets the replaced reply's page: not "forgotten by the user"
    assert event_sentence("forgotten", "page", 224, {}, "page 224 forgotten by the user") == (
        "Page 224 removed from memory"
    )
    assert event_sentence("page_moved", "page", 5, {"segment_id": 2, "how": "created"}) == (
        "Page 5 started a new topic (topic 2)"
    )
    fallback = event_sentence(
        "llm_fallback", "segment", 4, {}, "LLM output for segment 4 was rejected; used the extractive path"
    )
    assert internal_terms_in(fallback) == [] and "topic 4" in fallback
    # a kind this build has no sentence for: its summary, its words made plain
    said = event_sentence("tidied", "segment", 9, {}, "segment 9 tidied (N_visit 3, STM)")
    assert internal_terms_in(said) == [] and said.startswith("Topic 9 tidied")


def test_heat_in_words_says_when_a_topic_is_read_for_the_profile():
    from app.wording import heat_in_words

    assert heat_in_words(3, 2, 5.4, 5.0) == (
        "Used in 3 replies, 2 new messages — its new messages will be read for your profile soon"
    )
    assert heat_in_words(0, 1, 1.9, 5.0) == (
        "Not used in a reply yet, 1 new message — not busy enough yet to be read for your profile"
    )
    assert heat_in_words(4, 0, 5.2, 5.0, promotions=1).endswith(
        "read for your profile 1 time; nothing new to read since"
    )
    assert heat_in_words(1, 0, 1.99, 2.0, promotions=2).endswith("2 times; nothing new to read since")
    assert heat_in_words(1, 0, 1.99, 2.0).endswith("nothing new to read for your profile")


def test_when_a_message_was_written():
    import datetime as dt

    from app.wording import when

    now = dt.datetime(2026, 12, 2, 9, 30).timestamp()
    assert when(dt.datetime(2026, 12, 2, 8, 5).timestamp(), now) == "08:05"
    assert when(dt.datetime(2026, 12, 1, 23, 59).timestamp(), now) == "Yesterday 23:59"
    assert when(dt.datetime(2026, 5, 3, 14, 5).timestamp(), now) == "3 May 14:05"
    assert when(dt.datetime(2023, 5, 3, 14, 5).timestamp(), now) == "3 May 2023"
    assert when(None, now) == ""
