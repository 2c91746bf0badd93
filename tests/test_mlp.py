"""helpers.mlp: activations against PyTorch and autograd, and the MLP.

Training and the classification helpers are tested in test_classification.py, the
decision-boundary figure in test_plotting.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from helpers.mlp import ACTIVATIONS, MLP, activation_module
from helpers.seeding import set_seed

PYTORCH = {
    "relu": F.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "gelu": F.gelu,
    "identity": lambda x: x,
}
NAMES = sorted(ACTIVATIONS)
finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, width=32)


def test_every_activation_has_a_reference_and_a_module():
    assert set(ACTIVATIONS) == set(PYTORCH) == {"relu", "sigmoid", "tanh", "gelu", "identity"}
    for name in NAMES:
        x = torch.linspace(-3, 3, 13)
        torch.testing.assert_close(activation_module(name)(x), PYTORCH[name](x))


@pytest.mark.parametrize("name", NAMES)
def test_activation_matches_pytorch_on_a_grid_and_extremes(name):
    function, _ = ACTIVATIONS[name]
    x = torch.cat(
        [
            torch.linspace(-10, 10, 2001),
            torch.tensor([-1e30, -1e4, -100.0, -88.8, 0.0, 88.8, 100.0, 1e4, 1e30]),
        ]
    )
    out = function(x)
    assert torch.isfinite(out).all(), f"{name} gives a non-finite value"
    torch.testing.assert_close(out, PYTORCH[name](x))


@pytest.mark.parametrize("name", NAMES)
def test_derivative_matches_autograd_of_pytorch(name):
    _, derivative = ACTIVATIONS[name]
    x = torch.cat([torch.linspace(-10, 10, 2001), torch.tensor([-1e4, -100.0, 100.0, 1e4])])
    leaf = x.clone().requires_grad_()
    (slope,) = torch.autograd.grad(PYTORCH[name](leaf).sum(), leaf)
    assert torch.isfinite(derivative(x)).all()
    torch.testing.assert_close(derivative(x), slope)


@pytest.mark.parametrize("name", NAMES)
@given(values=st.lists(finite, min_size=1, max_size=20))
def test_activation_and_derivative_property(name, values):
    function, derivative = ACTIVATIONS[name]
    x = torch.tensor(values, dtype=torch.float32)
    leaf = x.clone().requires_grad_()
    (slope,) = torch.autograd.grad(PYTORCH[name](leaf).sum(), leaf)
    torch.testing.assert_close(function(x), PYTORCH[name](x))
    torch.testing.assert_close(derivative(x), slope)


def test_derivative_matches_autograd_in_float64():
    x = torch.linspace(-6, 6, 601, dtype=torch.float64)
    for name in NAMES:
        _, derivative = ACTIVATIONS[name]
        leaf = x.clone().requires_grad_()
        (slope,) = torch.autograd.grad(PYTORCH[name](leaf).sum(), leaf)
        torch.testing.assert_close(derivative(x), slope, rtol=1e-10, atol=1e-12)


def test_saturation_and_peaks():
    sigmoid_derivative = ACTIVATIONS["sigmoid"][1]
    tanh_derivative = ACTIVATIONS["tanh"][1]
    gelu_derivative = ACTIVATIONS["gelu"][1]
    grid = torch.linspace(-8, 8, 16001, dtype=torch.float64)
    assert sigmoid_derivative(grid).max().item() == pytest.approx(0.25)
    assert tanh_derivative(grid).max().item() == pytest.approx(1.0)
    assert gelu_derivative(grid).max().item() == pytest.approx(1.1289, abs=1e-4)
    for derivative in (sigmoid_derivative, tanh_derivative):
        assert derivative(torch.tensor([-20.0, 20.0])).abs().max() < 1e-8


@pytest.mark.parametrize("name", NAMES)
def test_activations_of_empty_tensors_are_empty(name):
    for fn in ACTIVATIONS[name]:
        assert fn(torch.zeros(0, 3)).shape == (0, 3)


# --- MLP ---------------------------------------------------------------------------------


def test_mlp_layout_and_shapes():
    net = MLP(3, [8, 4], 2, activation="tanh")
    kinds = [type(m) for m in net.layers]
    assert kinds == [nn.Linear, nn.Tanh, nn.Linear, nn.Tanh, nn.Linear]
    assert [(m.in_features, m.out_features) for m in net.linears] == [(3, 8), (8, 4), (4, 2)]
    assert net(torch.randn(5, 3)).shape == (5, 2)
    assert net(torch.randn(2, 7, 3)).shape == (2, 7, 2)
    assert net(torch.randn(3)).shape == (2,)
    linear = MLP(2, [], 1)
    assert [type(m) for m in linear.layers] == [nn.Linear]


def test_mlp_matches_the_formula():
    set_seed(0)
    net = MLP(3, [5], 2, activation="gelu")
    x = torch.randn(4, 3)
    first, second = net.linears
    by_hand = F.gelu(x @ first.weight.T + first.bias) @ second.weight.T + second.bias
    torch.testing.assert_close(net(x), by_hand)


def test_mlp_takes_any_iterable_of_widths_and_numpy_integers():
    net = MLP(np.int64(2), (w for w in [3, 4]), 1)
    assert [(m.in_features, m.out_features) for m in net.linears] == [(2, 3), (3, 4), (4, 1)]
    assert type(net.in_features) is int


def test_mlp_in_float64_and_on_an_empty_batch():
    net = MLP(3, [4], 2).double()
    assert net(torch.zeros(5, 3, dtype=torch.float64)).dtype == torch.float64
    assert MLP(3, [4], 2)(torch.zeros(0, 3)).shape == (0, 2)


@given(depth=st.integers(1, 4), width=st.integers(1, 8), seed=st.integers(0, 1000))
def test_linear_stack_collapses_to_one_linear_map(depth, width, seed):
    set_seed(seed)
    net = MLP(3, [width] * depth, 2, activation="identity")
    weight, bias = torch.eye(3), torch.zeros(3)
    with torch.no_grad():
        for layer in net.linears:
            weight, bias = weight @ layer.weight.T, bias @ layer.weight.T + layer.bias
        x = torch.randn(6, 3)
        torch.testing.assert_close(net(x), x @ weight + bias)


@given(batch=st.integers(1, 3), positions=st.integers(1, 6), seed=st.integers(0, 1000))
def test_position_wise_application(batch, positions, seed):
    set_seed(seed)
    ffn = MLP(4, [16], 4, activation="gelu")
    tokens = torch.randn(batch, positions, 4)
    out = ffn(tokens)
    for t in range(positions):
        torch.testing.assert_close(out[:, t], ffn(tokens[:, t]))
    edited = tokens.clone()
    edited[:, 0] += 1.0
    assert torch.equal(ffn(edited)[:, 1:], out[:, 1:])
