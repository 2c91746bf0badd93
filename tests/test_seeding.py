"""Tests for helpers.seeding: one call makes Python, NumPy and PyTorch repeatable."""

import random

import numpy as np
import pytest
import torch

from helpers.seeding import set_seed


def draw():
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_set_seed_makes_python_numpy_and_torch_reproducible():
    set_seed(123)
    first = draw()
    set_seed(123)
    assert draw() == first


def test_different_seeds_give_different_draws():
    set_seed(1)
    one = draw()
    set_seed(2)
    two = draw()
    assert all(a != b for a, b in zip(one, two))


def test_set_seed_accepts_numpy_integers():
    set_seed(np.int64(7))
    first = draw()
    set_seed(7)
    assert draw() == first


def test_set_seed_accepts_the_largest_numpy_seed():
    set_seed(2**32 - 1)
    first = draw()
    set_seed(2**32 - 1)
    assert draw() == first


@pytest.mark.parametrize("seed", [-1, 1.5, "3", None, True, float("nan"), torch.tensor(3)])
def test_set_seed_rejects_bad_seeds(seed):
    with pytest.raises(ValueError, match=r"seed must be a non-negative integer, got"):
        set_seed(seed)


def test_set_seed_rejects_seeds_numpy_cannot_take():
    with pytest.raises(
        ValueError, match=r"seed must be below 2\*\*32 = 4294967296 .*got 4294967296"
    ):
        set_seed(2**32)
