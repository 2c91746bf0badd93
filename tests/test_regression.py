"""Tests for helpers.tasks.regression: toy data made in code, seeded by an argument, and
the training loop of Nadaraya–Watson regression."""

import math

import pytest
import torch

from helpers.kernels import NWKernelRegression
from helpers.tasks.regression import (
    RegressionData,
    nadaraya_watson_data,
    nw_target,
    sample_function,
    train_nw,
    wiggly_target,
)


def test_nw_target_known_values():
    x = torch.tensor([0.0, math.pi / 2, math.pi])
    expected = torch.tensor([0.0, 2 + (math.pi / 2) ** 0.8, math.pi**0.8])
    torch.testing.assert_close(nw_target(x), expected, atol=1e-5, rtol=1e-5)


def test_wiggly_target_known_value():
    assert wiggly_target(torch.tensor(0.0)).item() == pytest.approx(0.5)


def test_nadaraya_watson_data_shapes_dtypes_and_range():
    data = nadaraya_watson_data(num_train=30, num_test=20, x_max=4.0, seed=3)
    assert isinstance(data, RegressionData)
    assert data.x_train.shape == data.y_train.shape == (30,)
    assert data.x_test.shape == data.y_true.shape == (20,)
    for t in (data.x_train, data.y_train, data.x_test, data.y_true):
        assert t.dtype == torch.float32
    assert torch.all(data.x_train[1:] >= data.x_train[:-1])  # sorted keys
    assert data.x_train.min() >= 0 and data.x_train.max() < 4.0
    torch.testing.assert_close(data.x_test, torch.arange(20) * 0.2)
    torch.testing.assert_close(data.y_true, nw_target(data.x_test))


def test_nadaraya_watson_data_without_noise_lies_on_the_curve():
    data = nadaraya_watson_data(num_train=10, noise=0.0, seed=1)
    torch.testing.assert_close(data.y_train, nw_target(data.x_train))


def test_nadaraya_watson_data_is_deterministic_by_seed():
    a, b = nadaraya_watson_data(seed=5), nadaraya_watson_data(seed=5)
    c = nadaraya_watson_data(seed=6)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_train, b.y_train)
    assert not torch.equal(a.x_train, c.x_train)


def test_nadaraya_watson_data_ignores_the_global_seed():
    torch.manual_seed(0)
    a = nadaraya_watson_data(seed=2)
    torch.manual_seed(99)
    b = nadaraya_watson_data(seed=2)
    assert torch.equal(a.y_train, b.y_train)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"num_train": 0}, r"num_train must be a positive integer, got 0"),
        ({"num_test": 0}, r"num_test must be a positive integer, got 0"),
        ({"noise": -0.1}, r"noise must be a finite number >= 0, got -0.1"),
        ({"noise": float("nan")}, r"noise must be a finite number >= 0, got nan"),
        # regressions: these were accepted (or failed inside torch)
        ({"num_train": 2.5}, r"num_train must be a positive integer, got 2.5"),
        ({"num_test": True}, r"num_test must be a positive integer, got True"),
        ({"noise": float("inf")}, r"noise must be a finite number >= 0, got inf"),
        ({"noise": True}, r"noise must be a finite number >= 0, got True"),
        ({"x_max": 0.0}, r"x_max must be a finite number > 0, got 0.0"),
        ({"x_max": -5.0}, r"x_max must be a finite number > 0, got -5.0"),
        ({"x_max": float("nan")}, r"x_max must be a finite number > 0, got nan"),
        ({"seed": -1}, r"seed must be a non-negative integer, got -1"),
        ({"seed": 1.5}, r"seed must be a non-negative integer, got 1.5"),
    ],
)
def test_nadaraya_watson_data_rejects_bad_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        nadaraya_watson_data(**kwargs)


def test_sample_function_shapes_grid_and_noise():
    x, y = sample_function(torch.sin, 11, low=-1.0, high=1.0)
    assert x.shape == y.shape == (11, 1)
    torch.testing.assert_close(x[:, 0], torch.linspace(-1, 1, 11))
    torch.testing.assert_close(y, torch.sin(x))
    _, noisy = sample_function(torch.sin, 11, low=-1.0, high=1.0, noise=0.1, seed=4)
    _, again = sample_function(torch.sin, 11, low=-1.0, high=1.0, noise=0.1, seed=4)
    assert torch.equal(noisy, again) and not torch.equal(noisy, y)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"num_points": 1}, r"num_points must be an integer >= 2, got 1"),
        ({"low": 1.0, "high": 1.0}, r"high must be greater than low, got low=1.0, high=1.0"),
        # regressions: these were accepted (or failed inside torch)
        ({"num_points": 3.0}, r"num_points must be an integer >= 2, got 3.0"),
        ({"low": float("nan")}, r"low must be a finite real number, got nan"),
        ({"high": float("inf")}, r"high must be a finite real number, got inf"),
        ({"noise": -0.5}, r"noise must be a finite number >= 0, got -0.5"),
        ({"seed": None}, r"seed must be a non-negative integer, got None"),
    ],
)
def test_sample_function_rejects_bad_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        sample_function(torch.sin, **kwargs)


def test_sample_function_rejects_a_bad_function():
    """Regression: a non-callable raised TypeError; a wrong-shaped result broadcast silently."""
    with pytest.raises(ValueError, match=r"fn must be a function of x \(N, 1\), got 3"):
        sample_function(3)
    with pytest.raises(
        ValueError,
        match=r"fn must map x of shape \(5, 1\) to a tensor of the "
        r"same shape, got a tensor of shape \(5,\)",
    ):
        sample_function(lambda x: x[:, 0], 5)
    with pytest.raises(ValueError, match=r"fn must map x .* got 1.0"):
        sample_function(lambda x: 1.0, 5)


@pytest.mark.parametrize("target", [nw_target, wiggly_target])
@pytest.mark.parametrize(
    "x, pattern",
    [
        (1.5, r"x must be a torch.Tensor of shape \(…\), got 1.5"),
        ([0.0, 1.0], r"x must be a torch.Tensor"),
        (torch.tensor([1, 2]), r"x must be a floating-point tensor, got dtype torch.int64"),
    ],
)
def test_targets_reject_what_is_not_a_floating_tensor(target, x, pattern):
    """The targets are curves over real x: a number or list (TypeError before) and an
    int tensor are refused, as everywhere a floating tensor is needed."""
    with pytest.raises(ValueError, match=pattern):
        target(x)


# --- train_nw ----------------------------------------------------------------------------


def test_train_nw_leave_one_out_is_deterministic_and_learns():
    data = nadaraya_watson_data(50, 50, seed=0)
    runs = []
    for _ in range(2):
        model = NWKernelRegression(w=1.0)
        losses = train_nw(model, data.x_train, data.y_train, epochs=30, lr=2.0)
        runs.append((losses, model.w.item()))
    assert runs[0] == runs[1]
    losses, w = runs[0]
    assert len(losses) == 30 and losses[-1] < losses[0]
    assert 2.0 < w < 6.0  # converges to a finite, sharper kernel than w = 1


def test_train_nw_without_leave_one_out_memorises():
    data = nadaraya_watson_data(50, 50, seed=0)
    model = NWKernelRegression(w=1.0)
    losses = train_nw(model, data.x_train, data.y_train, epochs=100, lr=5.0, leave_one_out=False)
    first_w = model.w.item()
    train_nw(model, data.x_train, data.y_train, epochs=100, lr=5.0, leave_one_out=False)
    assert model.w.item() > first_w > 6.0  # w keeps growing
    assert all(b <= a for a, b in zip(losses, losses[1:]))


def test_train_nw_validates():
    model = NWKernelRegression()
    x = torch.zeros(5)
    with pytest.raises(ValueError, match="epochs"):
        train_nw(model, x, x, epochs=-1, lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        train_nw(model, x, x, epochs=1, lr=0.0)
    with pytest.raises(ValueError, match=r"x_train and y_train.*\(5,\) and \(4,\)"):
        train_nw(model, x, torch.zeros(4), epochs=1, lr=0.1)
    with pytest.raises(ValueError, match="at least 2 points"):
        train_nw(model, torch.zeros(1), torch.zeros(1), epochs=1, lr=0.1)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(model=torch.nn.Linear(1, 1)), r"model must be an NWKernelRegression, got"),
        (dict(epochs=2.0), r"epochs must be a non-negative integer, got 2.0"),
        (dict(epochs=True), r"epochs must be a non-negative integer, got True"),
        (dict(lr=float("nan")), r"lr must be a finite number > 0, got nan"),
        (dict(lr=float("inf")), r"lr must be a finite number > 0, got inf"),
        (dict(lr=-1.0), r"lr must be a finite number > 0, got -1.0"),
        (dict(x_train=[0.0, 1.0, 2.0]), r"x_train must be a torch.Tensor of shape \(N,\)"),
        (
            dict(y_train=torch.tensor([0, 1, 2])),
            r"y_train must be a floating-point tensor, got "
            r"dtype torch.int64",
        ),
        (
            dict(x_train=torch.zeros(3, 1), y_train=torch.zeros(3, 1)),
            r"x_train and y_train must "
            r"both be 1-D",
        ),
        (dict(leave_one_out="yes"), r"leave_one_out must be True or False, got 'yes'"),
        (
            dict(x_train=torch.zeros(0), y_train=torch.zeros(0), leave_one_out=False),
            r"at least 1 training point, got N=0",
        ),
    ],
)
def test_train_nw_rejects_bad_arguments(kwargs, pattern):
    """Regression: another model failed inside the loop with a TypeError and
    leave_one_out="yes" counted as True; lists and int tensors are refused now (the inputs
    are floating tensors, as the chapter's data are)."""
    args = dict(
        model=NWKernelRegression(),
        x_train=torch.arange(3.0),
        y_train=torch.arange(3.0),
        epochs=1,
        lr=0.1,
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=pattern):
        train_nw(**args)


def test_train_nw_with_zero_epochs_returns_no_losses():
    model = NWKernelRegression(w=1.5)
    assert train_nw(model, torch.arange(3.0), torch.arange(3.0), epochs=0, lr=0.1) == []
    assert model.w.item() == 1.5
