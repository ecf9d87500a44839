from app.wording import count


def test_count_says_one_page_and_many_pages():
    assert count(1, "page") == "1 page"
    assert count(0, "page") == "0 pages"
    assert count(12345, "segment") == "12,345 segments"
    assert count(None, "fact") == "0 facts"
    assert count(2, "memory") == "2 memories"
    assert count(2, "persona item") == "2 persona items"
    assert count(3, "child", "children") == "3 children"
