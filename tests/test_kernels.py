"""Tests for helpers.kernels: Nadaraya–Watson attention pooling."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.kernels import NWKernelRegression, gaussian_kernel, nadaraya_watson
from helpers.tasks.regression import nadaraya_watson_data

finite = st.floats(min_value=-50, max_value=50, allow_nan=False, allow_infinity=False)
positive_w = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)


def kernel_ratio(queries, keys, values, w=1.0):
    """The textbook formula: sum_i K((q - k_i) w) y_i / sum_j K((q - k_j) w)."""
    kernel = gaussian_kernel((queries[:, None] - keys[None, :]) * w)  # (Q, K)
    return (kernel @ values) / kernel.sum(dim=1)


# --- gaussian_kernel -------------------------------------------------------------------


def test_gaussian_kernel_values():
    u = torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64)
    expected = torch.exp(-(u**2) / 2) / math.sqrt(2 * math.pi)
    torch.testing.assert_close(gaussian_kernel(u), expected)
    assert gaussian_kernel(0.0).item() == pytest.approx(1 / math.sqrt(2 * math.pi))
    assert gaussian_kernel(torch.tensor([1, 2])).dtype == torch.get_default_dtype()


def test_gaussian_kernel_is_a_density():
    u = torch.linspace(-10, 10, 20001, dtype=torch.float64)
    area = torch.trapezoid(gaussian_kernel(u), u)
    assert area.item() == pytest.approx(1.0, abs=1e-9)


# --- nadaraya_watson: weights ------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    queries=st.lists(finite, min_size=1, max_size=8),
    keys=st.lists(finite, min_size=1, max_size=8),
    w=positive_w,
)
def test_weights_are_a_distribution(queries, keys, w):
    q = torch.tensor(queries, dtype=torch.float64)
    k = torch.tensor(keys, dtype=torch.float64)
    v = torch.arange(len(keys), dtype=torch.float64)
    pred, weights = nadaraya_watson(q, k, v, w)
    assert weights.shape == (len(queries), len(keys))
    assert pred.shape == (len(queries),)
    assert torch.isfinite(weights).all()
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(len(queries), dtype=torch.float64))
    # a weighted average never leaves the range of the values
    assert (pred >= v.min() - 1e-9).all() and (pred <= v.max() + 1e-9).all()


def test_stable_for_huge_distances():
    keys = torch.tensor([0.0, 1.0, 2.0])
    values = torch.tensor([1.0, 2.0, 3.0])
    queries = torch.tensor([1e4, -1e4, 1e4 + 0.5])
    pred, weights = nadaraya_watson(queries, keys, values, w=1.0)
    assert torch.isfinite(weights).all() and torch.isfinite(pred).all()
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(3))
    # far to the right the nearest key (2.0) takes all the weight; far to the left, 0.0
    torch.testing.assert_close(pred, torch.tensor([3.0, 1.0, 3.0]))
    # the naive kernel ratio underflows to 0/0 there: that is why the softmax form is used
    assert torch.isnan(kernel_ratio(queries, keys, values)).all()


@settings(max_examples=40, deadline=None)
@given(
    queries=st.lists(finite, min_size=1, max_size=6),
    keys=st.lists(st.floats(-5, 5), min_size=1, max_size=6),
    w=st.floats(min_value=0.05, max_value=2.0),
)
def test_agrees_with_kernel_ratio(queries, keys, w):
    q = torch.tensor(queries, dtype=torch.float64).clamp(-5, 5)  # ratio finite here
    k = torch.tensor(keys, dtype=torch.float64)
    v = torch.linspace(-1, 1, len(keys), dtype=torch.float64)
    pred, _ = nadaraya_watson(q, k, v, w)
    torch.testing.assert_close(pred, kernel_ratio(q, k, v, w))


def test_agrees_with_torch_softmax():
    torch.manual_seed(0)
    q, k = torch.randn(7), torch.randn(11)
    v = torch.randn(11, 3)
    w = 1.7
    pred, weights = nadaraya_watson(q, k, v, w)
    expected = torch.softmax(-0.5 * ((q[:, None] - k[None, :]) * w) ** 2, dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(pred, expected @ v)
    assert pred.shape == (7, 3)


@pytest.mark.parametrize("w", [1e10, 1e20, 1e30, 3e38])
def test_weights_still_sum_to_one_when_the_scaled_distance_overflows(w):
    # (d·w)² overflows float32 here; the weight goes to the nearest allowed key, not NaN.
    queries, keys = torch.tensor([0.0, 1.0, 10.0]), torch.tensor([0.0, 0.5, 1.2, 3.0])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0])
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[0, 0] = False  # query 0's nearest allowed key is then 0.5
    pred, weights = nadaraya_watson(queries, keys, values, w=w, mask=mask)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(3))
    torch.testing.assert_close(pred, torch.tensor([2.0, 3.0, 4.0]))


def test_bandwidth_keyword_is_inverse_w():
    q, k, v = torch.randn(4), torch.randn(5), torch.randn(5)
    by_w = nadaraya_watson(q, k, v, w=4.0)
    by_sigma = nadaraya_watson(q, k, v, bandwidth=0.25)
    torch.testing.assert_close(by_w[1], by_sigma[1])
    torch.testing.assert_close(by_w[0], by_sigma[0])


def test_larger_w_is_sharper():
    q = torch.tensor([0.3])
    k = torch.linspace(-2, 2, 9)
    v = torch.zeros(9)
    peaks = [nadaraya_watson(q, k, v, w)[1].max().item() for w in (0.5, 1.0, 4.0, 16.0)]
    assert peaks == sorted(peaks)
    assert peaks[-1] > 0.99


def test_integer_inputs_are_converted():
    pred, weights = nadaraya_watson([0, 1], [0, 1, 2], [1, 2, 3])
    assert pred.dtype == torch.get_default_dtype()
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(2))


# --- masks (leave-one-out) ---------------------------------------------------------------


def test_mask_leaves_keys_out():
    x = torch.tensor([0.0, 0.5, 3.0])
    y = torch.tensor([1.0, 2.0, 5.0])
    mask = ~torch.eye(3, dtype=torch.bool)
    pred, weights = nadaraya_watson(x, x, y, w=2.0, mask=mask)
    assert torch.all(weights.diagonal() == 0)
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(3))
    for i in range(3):
        keep = torch.arange(3) != i
        pred_i, _ = nadaraya_watson(x[i : i + 1], x[keep], y[keep], w=2.0)
        torch.testing.assert_close(pred[i : i + 1], pred_i)


def test_fully_masked_row_is_zero_not_nan():
    mask = torch.tensor([[True, False], [False, False]])
    w = torch.tensor(1.0, requires_grad=True)
    pred, weights = nadaraya_watson(
        torch.zeros(2), torch.tensor([0.0, 1.0]), torch.tensor([2.0, 3.0]), w, mask=mask
    )
    torch.testing.assert_close(weights, torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    torch.testing.assert_close(pred, torch.tensor([2.0, 0.0]))
    pred.sum().backward()
    assert torch.isfinite(w.grad)


# --- gradients and the module ------------------------------------------------------------


def test_gradient_of_w_is_finite():
    data = nadaraya_watson_data(20, 10, seed=1)
    w = torch.tensor(1.0, requires_grad=True)
    pred, _ = nadaraya_watson(data.x_test, data.x_train, data.y_train, w)
    loss = torch.mean((pred - data.y_true) ** 2)
    loss.backward()
    assert w.grad is not None and torch.isfinite(w.grad)
    assert w.grad.item() != 0.0


def test_gradient_finite_for_far_queries():
    w = torch.tensor(2.0, requires_grad=True)
    pred, _ = nadaraya_watson(
        torch.tensor([1e4]), torch.tensor([0.0, 1.0]), torch.tensor([0.0, 1.0]), w
    )
    pred.sum().backward()
    assert torch.isfinite(w.grad)


def test_module_has_one_parameter_and_returns_weights():
    model = NWKernelRegression(w=2.0)
    params = list(model.parameters())
    assert len(params) == 1 and params[0].shape == ()
    assert model.bandwidth == pytest.approx(0.5)
    q, k, v = torch.randn(3), torch.randn(6), torch.randn(6, 2)
    pred, weights = model(q, k, v)
    expected = nadaraya_watson(q, k, v, 2.0)
    torch.testing.assert_close(pred, expected[0])
    torch.testing.assert_close(weights, expected[1])
    assert not any(isinstance(val, torch.Tensor) for val in vars(model).values())
    assert "w=2.0000" in repr(model)


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(keys=torch.zeros(4), values=torch.zeros(3)), ["keys", "values", "(4,)", "(3,)"]),
        (dict(queries=torch.zeros(2, 2)), ["queries", "(2, 2)", "1-D"]),
        (dict(keys=torch.zeros(3, 1)), ["keys", "(3, 1)", "1-D"]),
        (dict(values=torch.zeros(3, 1, 1)), ["values", "(3, 1, 1)"]),
        (dict(keys=torch.zeros(0), values=torch.zeros(0)), ["keys", "at least one"]),
        (dict(w=0.0), ["w", "0.0", "> 0"]),
        (dict(w=-1.0), ["w", "-1.0", "> 0"]),
        (dict(w=float("nan")), ["w", "nan", "finite"]),
        (dict(w=float("inf")), ["w", "inf", "finite"]),
        (dict(w=True), ["w", "True", "finite"]),
        (dict(w=torch.tensor([1.0, 2.0])), ["w", "0-d", "(2,)"]),
        (dict(w=torch.tensor(True)), ["w", "real number", "torch.bool"]),
        (dict(w=torch.tensor(float("nan"))), ["w", "nan", "finite"]),
        (dict(w="wide"), ["w", "'wide'"]),
        (dict(bandwidth=float("inf")), ["bandwidth", "inf", "finite"]),
        (dict(bandwidth=0.0), ["bandwidth", "0.0", "> 0"]),
        (dict(w=2.0, bandwidth=0.5), ["w", "bandwidth", "not both"]),
        (dict(mask=torch.ones(2, 2, dtype=torch.bool)), ["mask", "(2, 3)", "(2, 2)"]),
        (dict(mask=torch.ones(2, 3)), ["mask", "bool", "torch.float32"]),
    ],
)
def test_errors_name_the_argument(kwargs, words):
    args = dict(queries=torch.zeros(2), keys=torch.zeros(3), values=torch.zeros(3))
    args.update(kwargs)
    with pytest.raises(ValueError) as info:
        nadaraya_watson(**args)
    for word in words:
        assert word in str(info.value)


def test_no_queries_give_empty_results():
    pred, weights = nadaraya_watson(torch.zeros(0), torch.zeros(3), torch.zeros(3, 2))
    assert pred.shape == (0, 2) and weights.shape == (0, 3)
