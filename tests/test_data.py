"""Tests for helpers.data: toy data sets made in code, seeded by an argument."""

import math

import pytest
import torch

from helpers.data import (RegressionData, nadaraya_watson_data, nw_target, sample_function,
                          two_circles, two_moons, wiggly_target)


def test_nw_target_known_values():
    x = torch.tensor([0.0, math.pi / 2, math.pi])
    expected = torch.tensor([0.0, 2 + (math.pi / 2) ** 0.8, math.pi ** 0.8])
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


@pytest.mark.parametrize("kwargs, pattern", [
    ({"num_train": 0}, r"num_train must be at least 1, got 0"),
    ({"num_test": 0}, r"num_test must be at least 1, got 0"),
    ({"noise": -0.1}, r"noise must be finite and >= 0, got -0.1"),
    ({"noise": float("nan")}, r"noise must be finite and >= 0, got nan"),
])
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


@pytest.mark.parametrize("kwargs, pattern", [
    ({"num_points": 1}, r"num_points must be at least 2, got 1"),
    ({"low": 1.0, "high": 1.0}, r"high must be greater than low, got low=1.0, high=1.0"),
])
def test_sample_function_rejects_bad_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        sample_function(torch.sin, **kwargs)


@pytest.mark.parametrize("make", [two_moons, two_circles])
@pytest.mark.parametrize("num_points", [2, 7, 200])
def test_classification_sets_shapes_dtypes_and_balance(make, num_points):
    x, y = make(num_points, seed=0)
    assert x.shape == (num_points, 2) and x.dtype == torch.float32
    assert y.shape == (num_points,) and y.dtype == torch.int64
    assert set(y.tolist()) <= {0, 1}
    assert int((y == 0).sum()) == num_points // 2
    assert int((y == 1).sum()) == num_points - num_points // 2


@pytest.mark.parametrize("make", [two_moons, two_circles])
def test_classification_sets_are_deterministic_and_shuffled(make):
    x1, y1 = make(100, seed=3)
    x2, y2 = make(100, seed=3)
    x3, _ = make(100, seed=4)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, x3)
    assert not torch.equal(y1, torch.sort(y1).values)  # labels are not in blocks


def test_two_circles_without_noise_have_the_right_radii():
    x, y = two_circles(50, noise=0.0, factor=0.3, seed=0)
    radius = x.norm(dim=1)
    torch.testing.assert_close(radius[y == 0], torch.ones(25), atol=1e-5, rtol=0)
    torch.testing.assert_close(radius[y == 1], torch.full((25,), 0.3), atol=1e-5, rtol=0)


def test_two_moons_without_noise_lie_on_their_half_circles():
    x, y = two_moons(60, noise=0.0, seed=0)
    upper, lower = x[y == 0], x[y == 1]
    torch.testing.assert_close(upper.norm(dim=1), torch.ones(30), atol=1e-5, rtol=0)
    assert (upper[:, 1] >= 0).all()
    centre = torch.tensor([1.0, 0.5])
    torch.testing.assert_close((lower - centre).norm(dim=1), torch.ones(30), atol=1e-5, rtol=0)
    assert (lower[:, 1] <= 0.5).all()


@pytest.mark.parametrize("call, pattern", [
    (lambda: two_moons(1), r"num_points must be at least 2, got 1"),
    (lambda: two_circles(1), r"num_points must be at least 2, got 1"),
    (lambda: two_circles(10, factor=1.0), r"factor must be in \(0, 1\), got 1.0"),
    (lambda: two_circles(10, factor=0.0), r"factor must be in \(0, 1\), got 0.0"),
])
def test_classification_sets_reject_bad_arguments(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()
