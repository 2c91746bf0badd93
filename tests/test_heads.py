"""Tests for helpers.heads: the twins task, its model, head summaries and FLOP counts."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from helpers.attention import MultiHeadAttention
from helpers.heads import (TwinsModel, attention_entropy, attention_flops, relation_weights,
                           train_twins, twins_accuracy, twins_task)
from helpers.utils import set_seed


@given(num_sequences=st.integers(1, 20), half=st.integers(2, 6), extra=st.integers(0, 4),
       seed=st.integers(0, 1000))
@settings(max_examples=30, deadline=None)
def test_twins_task_every_symbol_twice_and_targets_consistent(num_sequences, half, extra, seed):
    seq_len = 2 * half
    data = twins_task(num_sequences, seq_len=seq_len, vocab_size=half + extra, seed=seed)
    for field in (data.symbols, data.colours, data.twin, data.previous, data.next,
                  data.twin_colour):
        assert field.shape == (num_sequences, seq_len) and field.dtype == torch.long
    for row in data.symbols:
        counts = torch.bincount(row)
        assert set(counts[counts > 0].tolist()) == {2}
    positions = torch.arange(seq_len)
    assert (data.twin != positions).all()
    assert (data.symbols.gather(1, data.twin) == data.symbols).all()
    assert (data.twin.gather(1, data.twin) == positions).all()  # twins point at each other
    assert (data.previous == data.symbols[:, (positions - 1) % seq_len]).all()
    assert (data.next == data.symbols[:, (positions + 1) % seq_len]).all()
    assert (data.twin_colour == data.colours.gather(1, data.twin)).all()


def test_twins_task_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    a, b = twins_task(5, seed=3), twins_task(5, seed=3)
    assert torch.equal(torch.rand(1), before)
    assert torch.equal(a.symbols, b.symbols) and torch.equal(a.colours, b.colours)
    assert not torch.equal(a.symbols, twins_task(5, seed=4).symbols)


@pytest.mark.parametrize("kwargs", [dict(num_sequences=0), dict(num_sequences=2, seq_len=7),
                                    dict(num_sequences=2, seq_len=8, vocab_size=3),
                                    dict(num_sequences=2, num_colours=0),
                                    dict(num_sequences=2.5)])
def test_twins_task_bad_input(kwargs):
    with pytest.raises(ValueError):
        twins_task(**kwargs)


def test_model_shapes_and_bad_input():
    set_seed(0)
    model = TwinsModel(12, 3, vocab_size=8, num_colours=4)
    data = twins_task(5)
    logits, weights = model(data.symbols, data.colours)
    assert logits["previous"].shape == (5, 8, 8) and logits["next"].shape == (5, 8, 8)
    assert logits["twin colour"].shape == (5, 8, 4)
    assert weights.shape == (5, 3, 8, 8)
    torch.testing.assert_close(weights.sum(-1), torch.ones(5, 3, 8))
    with pytest.raises(ValueError, match="symbols"):
        model(data.symbols.float(), data.colours)
    with pytest.raises(ValueError, match="colours"):
        model(data.symbols, data.colours[:, :4])
    with pytest.raises(ValueError, match="divisible"):
        TwinsModel(10, 3)


def test_training_makes_three_heads_specialise():
    torch.set_num_threads(1)
    train, test = twins_task(512, seed=0), twins_task(256, seed=1)
    set_seed(0)
    model = TwinsModel(24, 3)
    losses = train_twins(model, train, steps=150, lr=0.03)
    assert losses[-1] < 0.01 * losses[0]
    model.train()
    accuracy = twins_accuracy(model, test)
    assert model.training, "twins_accuracy must leave the model in the mode it found it in"
    assert min(accuracy.values()) > 0.99
    _, weights = model(test.symbols, test.colours)
    relations = relation_weights(weights.detach(), test.twin)
    best = {name: int(relations[name].argmax()) for name in ("previous", "next", "twin")}
    assert sorted(best.values()) == [0, 1, 2]  # one head per relation
    for name, head in best.items():
        assert relations[name][head] > 0.9


def test_train_twins_bad_input():
    model = TwinsModel(8, 2)
    with pytest.raises(ValueError, match="lr"):
        train_twins(model, twins_task(2), lr=0)
    with pytest.raises(ValueError, match="steps"):
        train_twins(model, twins_task(2), steps=-1)


def test_relation_weights_on_hand_made_heads():
    T = 6
    twin = torch.tensor([[3, 4, 5, 0, 1, 2]])  # (1, T)
    eye = torch.eye(T)
    heads = torch.stack([eye.roll(-1, dims=1), eye.roll(1, dims=1),  # previous, next
                         eye[twin[0]], eye, torch.full((T, T), 1 / T)])  # twin, self, uniform
    relations = relation_weights(heads[None], twin)  # (1, 5, T, T)
    torch.testing.assert_close(relations["previous"], torch.tensor([1, 0, 0, 0, 1 / T]))
    torch.testing.assert_close(relations["next"], torch.tensor([0, 1, 0, 0, 1 / T]))
    torch.testing.assert_close(relations["twin"], torch.tensor([0, 0, 1, 0, 1 / T]))
    torch.testing.assert_close(relations["self"], torch.tensor([0, 0, 0, 1, 1 / T]))
    with pytest.raises(ValueError, match="twin"):
        relation_weights(heads[None], twin[:, :3])
    with pytest.raises(ValueError, match="weights"):
        relation_weights(heads, twin)


def test_attention_entropy_limits():
    one_hot = torch.eye(5).expand(2, 1, 5, 5)
    uniform = torch.full((2, 1, 5, 5), 0.2)
    entropy = attention_entropy(torch.cat([one_hot, uniform], dim=1))
    torch.testing.assert_close(entropy, torch.tensor([0.0, math.log(5)]))
    with pytest.raises(ValueError):
        attention_entropy(torch.ones(5, 5))


@given(batch=st.integers(1, 3), num_queries=st.integers(1, 6), num_keys=st.integers(1, 6),
       head_dim=st.integers(1, 4), num_heads=st.sampled_from([1, 2, 4]),
       self_attention=st.booleans())
@settings(max_examples=20, deadline=None)
def test_flops_match_torch_flop_counter(batch, num_queries, num_keys, head_dim, num_heads,
                                        self_attention):
    d_model = head_dim * num_heads
    module = MultiHeadAttention(d_model, num_heads)
    queries = torch.randn(batch, num_queries, d_model)
    keys = queries if self_attention else torch.randn(batch, num_keys, d_model)
    with FlopCounterMode(display=False) as counter:
        module(queries, keys, keys)
    expected = attention_flops(batch, num_queries, keys.shape[1], d_model, num_heads)
    assert counter.get_total_flops() == expected["total"]


def test_flops_do_not_depend_on_the_number_of_heads_but_score_entries_do():
    counts = [attention_flops(2, 16, 16, 64, h) for h in (1, 2, 4, 8, 64)]
    assert len({c["total"] for c in counts}) == 1
    assert [c["score entries"] for c in counts] == [2 * h * 256 for h in (1, 2, 4, 8, 64)]
    full = attention_flops(2, 16, 16, 64, 8, head_dim=64)  # 8 heads, no split
    assert full["total"] == 8 * counts[0]["total"]
    with pytest.raises(ValueError, match="divisible"):
        attention_flops(1, 2, 2, 10, 3)
    with pytest.raises(ValueError, match="num_heads"):
        attention_flops(1, 2, 2, 10, 0)
