"""A small sample of the fault-injection runner (tests/bench/fault_injection.py runs 50 kills and
more): each scenario killed once at a random moment, restarted through the app's start path or
the terminal's, and nothing lost, doubled or damaged."""

from __future__ import annotations

import pytest

from tests.reliability.faults import SCENARIOS, run


@pytest.mark.parametrize("seed", [7])
def test_kills_in_every_scenario_lose_nothing(tmp_path, seed):
    """Every scenario runs at least once; rounds go on until as many workers were killed mid-work."""
    tally = run(len(SCENARIOS), seed, root=tmp_path)
    summary = tally.summary()
    assert summary["kills"] == len(SCENARIOS)
    assert set(summary["by_scenario"]) == set(SCENARIOS)
    assert summary["lost_user_messages"] == 0, summary
    assert summary["lost_memory"] == 0, summary
    assert summary["duplicates"] == 0, summary
    assert summary["integrity_failures"] == 0, summary
    assert summary["other_problems"] == [], summary
