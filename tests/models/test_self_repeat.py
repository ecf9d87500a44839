"""SelfRepeatPenalty: a reply that continues an earlier reply word for word is pushed off it."""

import numpy as np

from models.self_repeat import SelfRepeatPenalty

VOCAB = 50


def _run(pen: SelfRepeatPenalty, prompt: list[int], reply: list[int]) -> np.ndarray:
    """Feed the prompt, then the reply token by token; the scores offered for the token after it."""
    ids = list(prompt)
    pen(np.array(ids), np.zeros(VOCAB, dtype=np.float32))
    scores = np.zeros(VOCAB, dtype=np.float32)
    for tok in reply:
        ids.append(tok)
        scores = pen(np.array(ids), np.zeros(VOCAB, dtype=np.float32))
    return scores


def test_a_copy_of_an_earlier_reply_is_penalised_more_with_every_token():
    earlier = [[10, 11, 12, 13, 14, 15, 16]]
    drops = []
    for n in range(1, 6):
        pen = SelfRepeatPenalty(earlier, multiplier=0.8, base=1.75, allowed=3)
        scores = _run(pen, [1, 2, 3], earlier[0][:n])
        nxt = earlier[0][n]
        drops.append(float(-scores[nxt]))
        assert np.count_nonzero(scores) == (1 if n >= 3 else 0)  # only the continuing token
    assert drops[:2] == [0.0, 0.0]  # up to `allowed` tokens are free
    assert np.allclose(drops[2:], [0.8, 0.8 * 1.75, 0.8 * 1.75**2])


def test_the_user_s_words_and_the_prompt_cost_nothing():
    # the prompt holds the same tokens (a user message, recalled memory): only earlier replies count
    pen = SelfRepeatPenalty([[40, 41]], allowed=2)
    scores = _run(pen, [10, 11, 12, 13, 14], [10, 11, 12, 13])
    assert not scores.any() and pen.penalised == 0


def test_the_longest_match_decides_and_a_new_token_ends_the_copy():
    earlier = [[5, 6, 7, 8], [6, 7, 9]]  # "6 7" continues as 8 in one reply, as 9 in the other
    pen = SelfRepeatPenalty(earlier, multiplier=1.0, base=2.0, allowed=2)
    scores = _run(pen, [0], [5, 6, 7])
    assert scores[8] == -2.0 and scores[9] == -1.0  # 3-token match → 2**1; 2-token match → 2**0
    scores = _run(SelfRepeatPenalty(earlier, multiplier=1.0, base=2.0, allowed=2), [0], [5, 6, 7, 30, 6])
    assert not scores.any()  # the copy broke at 30; one token since is free


def test_replies_do_not_run_into_each_other_and_off_means_off():
    earlier = [[1, 2, 3], [4, 5, 6]]
    pen = SelfRepeatPenalty(earlier, allowed=3)
    assert not _run(pen, [0], [1, 2, 3]).any()  # the end of a reply: nothing continues it
    assert not _run(SelfRepeatPenalty(earlier, multiplier=0.0, allowed=1), [0], [1, 2]).any()
    assert not SelfRepeatPenalty([]).active


def _longest_shared_run(a: str, b: str) -> int:
    """Words in the longest stretch `a` and `b` share, word for word."""
    wa, wb = a.lower().split(), b.lower().split()
    best = 0
    for i in range(len(wa)):
        for j in range(len(wb)):
            k = 0
            while i + k < len(wa) and j + k < len(wb) and wa[i + k] == wb[j + k]:
                k += 1
            best = max(best, k)
    return best


LIGHTHOUSE = (
    "The old lighthouse keeper counted seventeen gulls, three fishing boats and one red kite over "
    "the harbour every morning before breakfast."
)


def _greedy_reply(chat_model, question: str, penalty: float) -> str:
    """The bundled model's greedy reply to `question`, after it answered LIGHTHOUSE to the first one."""
    msgs = [
        {"role": "user", "content": "Describe the lighthouse keeper's morning."},
        {"role": "assistant", "content": LIGHTHOUSE},
        {"role": "user", "content": question},
    ]
    saved = chat_model.config.self_repeat_penalty
    try:
        chat_model.config.self_repeat_penalty = penalty
        return "".join(chat_model.stream(msgs, temperature=0.0, max_tokens=60))
    finally:
        chat_model.config.self_repeat_penalty = saved


def test_the_bundled_model_asked_to_repeat_itself_no_longer_recites(chat_model):
    ask = "Please repeat your last answer, word for word."
    plain = _greedy_reply(chat_model, ask, 0.0)
    penalised = _greedy_reply(chat_model, ask, 0.8)
    assert _longest_shared_run(plain, LIGHTHOUSE) >= 12, plain  # greedy: a recital (of 20 words)
    assert _longest_shared_run(penalised, LIGHTHOUSE) < _longest_shared_run(plain, LIGHTHOUSE) - 5, penalised
    assert chat_model.last_self_repeat.penalised > 0
    list(chat_model.stream([{"role": "user", "content": "Hi"}], max_tokens=4))  # no earlier reply: none
    assert chat_model.last_self_repeat is None


def test_the_bundled_model_still_restates_a_fact_of_its_own_reply(chat_model):
    # a short restatement is free (up to `allowed` tokens, then gently penalised): with 3 or 4 free
    # tokens the model, asked this, described the keeper's beard instead
    reply = _greedy_reply(chat_model, "And what did he count?", 0.8)
    assert "seventeen gulls" in reply, reply
