"""Tests for helpers.utils: seeding and shape checks."""

import random

import numpy as np
import pytest
import torch

from helpers.utils import check_shape, require, set_seed


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


@pytest.mark.parametrize("seed", [-1, 1.5, "3", None, True])
def test_set_seed_rejects_bad_seeds(seed):
    with pytest.raises(ValueError, match=r"seed must be a non-negative integer, got"):
        set_seed(seed)


@pytest.mark.parametrize("shape", [(2, 3, 4), (None, 3, 4), (2, None, None), (None, None, None)])
def test_check_shape_accepts_matching_shapes(shape):
    check_shape(torch.zeros(2, 3, 4), shape)
    check_shape(np.zeros((2, 3, 4)), shape)


@pytest.mark.parametrize("shape, shown", [
    ((2, 3, 5), r"\(2, 3, 5\)"),
    ((None, 4, 4), r"\('\*', 4, 4\)"),
    ((2, 3), r"\(2, 3\)"),
    ((2, 3, 4, 1), r"\(2, 3, 4, 1\)"),
    ((None, None), r"\('\*', '\*'\)"),
])
def test_check_shape_rejects_mismatches(shape, shown):
    with pytest.raises(ValueError, match=rf"expected a tensor of shape {shown}, "
                                         rf"got shape \(2, 3, 4\)"):
        check_shape(torch.zeros(2, 3, 4), shape)


def test_require():
    require(True, "never raised")
    with pytest.raises(ValueError, match="the message"):
        require(False, "the message")
