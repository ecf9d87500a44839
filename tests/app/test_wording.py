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
        "2 hot segments to learn persona facts from, when the chat model is free; indexing the words of older pages"
    )
    assert pending_work({"add_page": 1, "reembed": 1}) == (
        "1 reply to file as memory pages; re-embedding memory with the new embedding model"
    )
    assert (
        pending_work({"add_page": 0, "read_in_context": 3}) == "re-embedding pages, each read after the one before it"
    )
    assert pending_work({"tidy_up": 2}) == "2 jobs of kind tidy_up"  # a kind this build has no words for
    assert pending_work({}) == "" and pending_work(None) == ""


def test_heat_is_cut_not_rounded():
    """A heat of 4.999 is not promoted at τ = 5, so it must not read "5.00"."""
    from app.wording import heat, heat_gap

    assert [heat(h) for h in (4.999, 5.0, 2.3, 0.0, 12.456)] == ["4.99", "5.00", "2.30", "0.00", "12.45"]
    assert [heat_gap(g) for g in (0.35, 0.01, 0.001)] == ["0.35", "0.01", "less than 0.01"]
