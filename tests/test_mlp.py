"""helpers.mlp: activations against PyTorch and autograd, the MLP, training, boundaries."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from helpers.mlp import (ACTIVATIONS, MLP, accuracy, activation_module, class1_probability,
                         decision_grid, plot_decision_boundary, train_full_batch)
from helpers.utils import set_seed

PYTORCH = {"relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "gelu": F.gelu,
           "identity": lambda x: x}
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
    x = torch.cat([torch.linspace(-10, 10, 2001),
                   torch.tensor([-1e30, -1e4, -100.0, -88.8, 0.0, 88.8, 100.0, 1e4, 1e30])])
    out = function(x)
    assert torch.isfinite(out).all(), f"{name} gives a non-finite value"
    torch.testing.assert_close(out, PYTORCH[name](x))


@pytest.mark.parametrize("name", NAMES)
def test_derivative_matches_autograd_of_pytorch(name):
    _, derivative = ACTIVATIONS[name]
    x = torch.cat([torch.linspace(-10, 10, 2001), torch.tensor([-1e4, -100.0, 100.0, 1e4])])
    leaf = x.clone().requires_grad_()
    slope, = torch.autograd.grad(PYTORCH[name](leaf).sum(), leaf)
    assert torch.isfinite(derivative(x)).all()
    torch.testing.assert_close(derivative(x), slope)


@pytest.mark.parametrize("name", NAMES)
@given(values=st.lists(finite, min_size=1, max_size=20))
def test_activation_and_derivative_property(name, values):
    function, derivative = ACTIVATIONS[name]
    x = torch.tensor(values, dtype=torch.float32)
    leaf = x.clone().requires_grad_()
    slope, = torch.autograd.grad(PYTORCH[name](leaf).sum(), leaf)
    torch.testing.assert_close(function(x), PYTORCH[name](x))
    torch.testing.assert_close(derivative(x), slope)


def test_derivative_matches_autograd_in_float64():
    x = torch.linspace(-6, 6, 601, dtype=torch.float64)
    for name in NAMES:
        _, derivative = ACTIVATIONS[name]
        leaf = x.clone().requires_grad_()
        slope, = torch.autograd.grad(PYTORCH[name](leaf).sum(), leaf)
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


def test_activation_module_rejects_unknown_names():
    with pytest.raises(ValueError, match="activation must be one of"):
        activation_module("swish")
    with pytest.raises(ValueError, match="activation"):
        MLP(2, [4], 1, activation="softplus")


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


@pytest.mark.parametrize("bad", [
    dict(in_features=0, hidden_sizes=[4], out_features=1),
    dict(in_features=2, hidden_sizes=[4, 0], out_features=1),
    dict(in_features=2, hidden_sizes=[4], out_features=-1),
    dict(in_features=2.0, hidden_sizes=[4], out_features=1),
    dict(in_features=2, hidden_sizes=4, out_features=1),
    dict(in_features=2, hidden_sizes=[True], out_features=1),
])
def test_mlp_rejects_bad_sizes(bad):
    with pytest.raises(ValueError):
        MLP(**bad)


def test_mlp_rejects_wrong_input_width():
    net = MLP(3, [4], 1)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 3\), got \(5, 4\)"):
        net(torch.randn(5, 4))


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


# --- training ----------------------------------------------------------------------------

def _regression():
    x = torch.linspace(-2, 2, 64).unsqueeze(1)
    return x, torch.sin(2 * x)


def test_train_full_batch_is_repeatable_and_learns():
    x, y = _regression()
    runs = []
    for _ in range(2):
        set_seed(3)
        net = MLP(1, [16], 1, activation="tanh")
        runs.append(train_full_batch(net, x, y, nn.MSELoss(), steps=200, lr=0.02))
    assert runs[0] == runs[1]
    assert len(runs[0]) == 200
    assert runs[0][-1] < runs[0][0] / 10


def test_train_full_batch_sgd_and_callback():
    x, y = _regression()
    set_seed(0)
    net = MLP(1, [8], 1)
    seen = []
    losses = train_full_batch(net, x, y, nn.MSELoss(), steps=5, lr=0.05, optimizer="sgd",
                              callback=lambda step, model: seen.append((step, model is net)))
    assert seen == [(s, True) for s in range(1, 6)]
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(steps=0, lr=0.1), "steps"),
    (dict(steps=2.5, lr=0.1), "steps"),
    (dict(steps=3, lr=0.0), "lr"),
    (dict(steps=3, lr=float("nan")), "lr"),
    (dict(steps=3, lr=0.1, optimizer="lbfgs"), "optimizer"),
])
def test_train_full_batch_rejects_bad_arguments(kwargs, match):
    x, y = _regression()
    with pytest.raises(ValueError, match=match):
        train_full_batch(MLP(1, [2], 1), x, y, nn.MSELoss(), **kwargs)


# --- classification helpers ----------------------------------------------------------------

def test_class1_probability_for_one_and_two_logits():
    logits = torch.tensor([[0.0], [2.0]])
    torch.testing.assert_close(class1_probability(logits), torch.sigmoid(logits[:, 0]))
    pairs = torch.tensor([[0.0, 0.0], [1.0, 3.0]])
    torch.testing.assert_close(class1_probability(pairs), torch.softmax(pairs, 1)[:, 1])
    with pytest.raises(ValueError, match="logits"):
        class1_probability(torch.zeros(4, 3))


class _Halfplane(nn.Module):
    """Logit 10 * x_1: class 1 exactly where x_1 > 0."""

    def forward(self, x):
        return 10 * x[:, :1]


def test_accuracy_and_decision_grid():
    x = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [2.0, 1.0], [-2.0, -1.0]])
    y = torch.tensor([0, 1, 1, 0])
    model = _Halfplane()
    assert accuracy(model, x, y) == 1.0
    assert accuracy(model, x, 1 - y) == 0.0
    xx, yy, probs = decision_grid(model, x, resolution=21, margin=0.5)
    assert xx.shape == yy.shape == probs.shape == (21, 21)
    assert xx.min() == pytest.approx(-2.5) and xx.max() == pytest.approx(2.5)
    assert yy.min() == pytest.approx(-1.5) and yy.max() == pytest.approx(1.5)
    assert ((probs >= 0) & (probs <= 1)).all()
    torch.testing.assert_close(probs, torch.sigmoid(10 * xx))
    with pytest.raises(ValueError):
        decision_grid(model, torch.zeros(5, 3))
    with pytest.raises(ValueError):
        accuracy(model, x, y[:3])


def test_plot_decision_boundary_returns_the_figure():
    x = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [2.0, 1.0], [-2.0, -1.0]])
    y = torch.tensor([0, 1, 1, 0])
    fig, ax = plt.subplots()
    assert plot_decision_boundary(_Halfplane(), x, y, ax=ax, title="half-plane") is fig
    assert ax.get_title() == "half-plane"
    own = plot_decision_boundary(MLP(2, [4], 1), x, y, colorbar=False)
    assert own is not fig and len(own.axes) == 1
    plt.close("all")
