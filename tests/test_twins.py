"""Tests for helpers.tasks.twins: the twins task, its model, training and head summaries.
(The entropy and FLOP counts of attention are tested in test_measure.py.)"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.multihead import MultiHeadAttention
from helpers.seeding import set_seed
from helpers.tasks.twins import (
    TARGETS,
    TwinsData,
    TwinsModel,
    relation_weights,
    train_twins,
    twins_accuracy,
    twins_task,
)


@given(
    num_sequences=st.integers(1, 20),
    half=st.integers(2, 6),
    extra=st.integers(0, 4),
    seed=st.integers(0, 1000),
)
@settings(max_examples=30, deadline=None)
def test_twins_task_every_symbol_twice_and_targets_consistent(num_sequences, half, extra, seed):
    seq_len = 2 * half
    data = twins_task(num_sequences, seq_len=seq_len, vocab_size=half + extra, seed=seed)
    for field in (
        data.symbols,
        data.colours,
        data.twin,
        data.previous,
        data.next,
        data.twin_colour,
    ):
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


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_sequences=0),
        dict(num_sequences=2, seq_len=7),
        dict(num_sequences=2, seq_len=8, vocab_size=3),
        dict(num_sequences=2, num_colours=0),
        dict(num_sequences=2.5),
    ],
)
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
    with pytest.raises(ValueError, match="positions must be True or False"):
        TwinsModel(12, 3, positions="no")


def test_model_without_positions_is_permutation_equivariant():
    set_seed(0)
    data = twins_task(4, seed=3)
    order = torch.tensor([3, 0, 6, 1, 7, 2, 5, 4])
    for positions in (False, True):
        model = TwinsModel(12, 3, positions=positions)
        assert (model.position_embedding is None) is (not positions)
        logits, weights = model(data.symbols, data.colours)
        logits_p, weights_p = model(data.symbols[:, order], data.colours[:, order])
        same = [
            torch.allclose(logits_p[name], logits[name][:, order], atol=1e-5) for name in TARGETS
        ]
        same.append(torch.allclose(weights_p, weights[:, :, order][:, :, :, order], atol=1e-6))
        assert all(same) is (not positions), (positions, same)


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
    heads = torch.stack(
        [
            eye.roll(-1, dims=1),
            eye.roll(1, dims=1),  # previous, next
            eye[twin[0]],
            eye,
            torch.full((T, T), 1 / T),
        ]
    )  # twin, self, uniform
    relations = relation_weights(heads[None], twin)  # (1, 5, T, T)
    torch.testing.assert_close(relations["previous"], torch.tensor([1, 0, 0, 0, 1 / T]))
    torch.testing.assert_close(relations["next"], torch.tensor([0, 1, 0, 0, 1 / T]))
    torch.testing.assert_close(relations["twin"], torch.tensor([0, 0, 1, 0, 1 / T]))
    torch.testing.assert_close(relations["self"], torch.tensor([0, 0, 0, 1, 1 / T]))
    with pytest.raises(ValueError, match="twin"):
        relation_weights(heads[None], twin[:, :3])
    with pytest.raises(ValueError, match="weights"):
        relation_weights(heads, twin)


def test_targets_and_the_model_attention():
    assert TARGETS == ("previous", "next", "twin colour")
    data = twins_task(3)
    assert isinstance(data, TwinsData) and tuple(data.targets()) == TARGETS
    set_seed(0)
    model = TwinsModel(12, 3)
    assert isinstance(model.mha, MultiHeadAttention) and model.mha.num_heads == 3


@pytest.mark.parametrize(
    "kwargs",
    [dict(num_sequences=2, seed=-1), dict(num_sequences=2, seed=1.0), dict(num_sequences=True)],
)
def test_twins_task_rejects_bad_seed_and_counts(kwargs):
    with pytest.raises(ValueError):
        twins_task(**kwargs)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((0, 1), {}, "d_model must be a positive integer"),
        ((8, 0), {}, "num_heads must be a positive integer"),
        ((8.0, 2), {}, "d_model must be a positive integer"),
        ((8, 2), {"seq_len": 0}, "seq_len must be a positive integer"),
        ((8, 2), {"vocab_size": 0}, "vocab_size must be a positive integer"),
        ((8, 2), {"num_colours": -4}, "num_colours must be a positive integer"),
    ],
)
def test_model_rejects_bad_sizes(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        TwinsModel(*args, **kwargs)


def test_model_rejects_bad_inputs():
    set_seed(0)
    model = TwinsModel(8, 2)
    data = twins_task(4)
    with pytest.raises(ValueError, match="symbols must be a torch.Tensor"):
        model(data.symbols.tolist(), data.colours)
    with pytest.raises(ValueError, match="colours must have shape"):
        model(data.symbols, data.colours[0])
    with pytest.raises(ValueError, match=r"symbols must hold ids in \[0, 8\)"):
        model(data.symbols + 8, data.colours)
    with pytest.raises(ValueError, match=r"colours must hold ids in \[0, 4\)"):
        model(data.symbols, data.colours - 1)
    with pytest.raises(ValueError, match="same shape"):
        model(data.symbols, data.colours[:2])
    logits, weights = model(data.symbols[:0], data.colours[:0])  # no sequences: empty outputs
    assert logits["previous"].shape == (0, 8, 8) and weights.shape == (0, 2, 8, 8)


@pytest.mark.parametrize("lr", [float("nan"), float("inf"), -0.1, "0.1", True])
def test_train_twins_rejects_bad_learning_rates(lr):
    model = TwinsModel(8, 2)
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        train_twins(model, twins_task(2), steps=1, lr=lr)


def test_train_and_accuracy_reject_what_is_not_a_twins_model_or_data():
    model, data = TwinsModel(8, 2), twins_task(2)
    with pytest.raises(ValueError, match="model must be a TwinsModel"):
        train_twins(torch.nn.Linear(2, 2), data)
    with pytest.raises(ValueError, match="data must be a TwinsData"):
        train_twins(model, (data.symbols, data.colours))
    with pytest.raises(ValueError, match="model must be a TwinsModel"):
        twins_accuracy(None, data)
    with pytest.raises(ValueError, match="data must be a TwinsData"):
        twins_accuracy(model, data.symbols)
    assert train_twins(model, data, steps=0) == []


def test_relation_weights_rejects_bad_input():
    weights = torch.full((2, 3, 4, 4), 0.25)
    twin = torch.tensor([[1, 0, 3, 2], [2, 3, 0, 1]])
    assert relation_weights(weights, twin)["twin"].shape == (3,)
    with pytest.raises(ValueError, match="weights must be a floating-point tensor"):
        relation_weights(weights.long(), twin)
    with pytest.raises(ValueError, match="weights must have shape"):
        relation_weights(weights[..., :3], twin)
    with pytest.raises(ValueError, match="twin must be a torch.Tensor"):
        relation_weights(weights, twin.tolist())
    with pytest.raises(ValueError, match="twin must be a long tensor"):
        relation_weights(weights, twin.float())
    with pytest.raises(ValueError, match=r"twin must hold key positions in \[0, 4\)"):
        relation_weights(weights, twin + 1)
