import pytest

from train.learn.packing import BudgetError, pack


def test_every_sequence_once_and_no_batch_over_budget():
    lengths = [5, 9, 3, 7, 1, 10, 2, 6]
    batches = pack(lengths, budget=12)
    seen = sorted(i for mb in batches for i in mb.indices)
    assert seen == list(range(len(lengths)))
    assert all(mb.tokens <= 12 for mb in batches)
    assert sum(mb.tokens for mb in batches) == sum(lengths)
    # first-fit-decreasing reaches the lower bound ceil(43 / 12) = 4 here
    assert len(batches) == 4


def test_one_sequence_at_exactly_the_budget_trains():
    assert [mb.lengths for mb in pack([36864], budget=36864)] == [(36864,)]


def test_an_oversize_sequence_names_the_fix():
    with pytest.raises(BudgetError, match="sequence 1 has 40 tokens.*at least 40"):
        pack([10, 40], budget=32)
