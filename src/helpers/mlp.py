"""Multilayer perceptrons and activation functions (chapter 1).

Each activation is written from its formula beside its derivative, so the chapter can check
the pair against PyTorch (forward) and autograd (backward). ``MLP`` is the plain stack of
fully connected layers that later chapters reuse: the Transformer's position-wise FFN is one.
Training loops and the classification helpers of chapter 1 are in
:mod:`helpers.tasks.classification`, the decision-boundary figure in
:mod:`helpers.figures.plotting`. Shape letters: N examples, B batch, T positions, D features.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from helpers.checks import check_int, check_tensor, describe, require

__all__ = [
    "relu",
    "relu_derivative",
    "sigmoid",
    "sigmoid_derivative",
    "tanh",
    "tanh_derivative",
    "gelu",
    "gelu_derivative",
    "identity",
    "identity_derivative",
    "ACTIVATIONS",
    "activation_module",
    "MLP",
]

_ANY_SHAPE = "(…)"  # the activations are elementwise: any shape in, the same shape out


# --- activations, each with its derivative -------------------------------------------------


def relu(x: torch.Tensor) -> torch.Tensor:
    """ReLU, max(0, x), elementwise; any shape in, the same shape out."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    return x.clamp_min(0)


def relu_derivative(x: torch.Tensor) -> torch.Tensor:
    """1 where x > 0, else 0 (the value 0 at x = 0, as autograd uses)."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    return (x > 0).to(x.dtype)


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    """The logistic sigmoid 1 / (1 + exp(-x)); for x below about -88 (float32) exp(-x) is
    inf and the result is exactly 0, never NaN."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    return 1 / (1 + torch.exp(-x))


def sigmoid_derivative(x: torch.Tensor) -> torch.Tensor:
    """sigmoid(x) * (1 - sigmoid(x)); at most 0.25, reached at x = 0."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    s = sigmoid(x)
    return s * (1 - s)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) = (e^x - e^-x) / (e^x + e^-x), computed as sign(x) (1 - e) / (1 + e) with
    e = exp(-2|x|) <= 1, so that no exponential can overflow."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    e = torch.exp(-2 * x.abs())
    return torch.sign(x) * (1 - e) / (1 + e)


def tanh_derivative(x: torch.Tensor) -> torch.Tensor:
    """1 - tanh(x)^2; equal to 1 at x = 0 and tending to 0 as |x| grows."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    return 1 - tanh(x) ** 2


def _normal_cdf(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))


def _normal_pdf(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, x * Phi(x) with Phi the standard normal CDF (the exact erf form, as
    ``F.gelu(x)`` with its default ``approximate="none"``)."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    return x * _normal_cdf(x)


def gelu_derivative(x: torch.Tensor) -> torch.Tensor:
    """Phi(x) + x * phi(x), with phi the standard normal density."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    return _normal_cdf(x) + x * _normal_pdf(x)


def identity(x: torch.Tensor) -> torch.Tensor:
    """x itself: no nonlinearity (a network of identities is one linear map)."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    return x


def identity_derivative(x: torch.Tensor) -> torch.Tensor:
    """1 everywhere."""
    check_tensor(x, "x", _ANY_SHAPE, floating=True)
    return torch.ones_like(x)


ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "relu": (relu, relu_derivative),
    "sigmoid": (sigmoid, sigmoid_derivative),
    "tanh": (tanh, tanh_derivative),
    "gelu": (gelu, gelu_derivative),
    "identity": (identity, identity_derivative),
}
"""name -> (function, derivative), both elementwise, written from the formulas; each takes
a floating tensor of any shape (ValueError otherwise) and returns one of the same shape."""

_MODULES = {
    "relu": nn.ReLU,
    "sigmoid": nn.Sigmoid,
    "tanh": nn.Tanh,
    "gelu": nn.GELU,
    "identity": nn.Identity,
}


def activation_module(name: str) -> nn.Module:
    """PyTorch's module for the activation ``name`` (a key of :data:`ACTIVATIONS`).

    The network uses PyTorch's own modules (fast, with exact gradients everywhere); the
    formulas in :data:`ACTIVATIONS` are checked against them in the tests and the chapter.
    ``"identity"`` gives ``nn.Identity``: a network with no nonlinearity at all.
    """
    require(
        isinstance(name, str) and name in _MODULES,
        f"activation must be one of {sorted(_MODULES)}, got {name!r}",
    )
    return _MODULES[name]()


# --- the network ------------------------------------------------------------------------


class MLP(nn.Module):
    """A multilayer perceptron: fully connected layers with an activation between them.

    ``MLP(2, [16, 16], 1)`` is Linear(2, 16) -> act -> Linear(16, 16) -> act -> Linear(16, 1);
    ``MLP(2, [], 1)`` is a single linear layer (a linear or logistic regression model).
    The layers act on the last axis, so the input may be (N, D_in) or (B, T, D_in): applied
    to a (B, T, D) tensor it is the Transformer's position-wise feed-forward network.

    Args:
        in_features: D_in, the size of the input's last axis (a positive integer).
        hidden_sizes: the width of each hidden layer, input side first (may be empty).
        out_features: D_out, the size of the output's last axis (a positive integer).
        activation: a key of :data:`ACTIVATIONS` (``"relu"``, ``"gelu"``, ...).

    Shapes: forward maps (..., D_in) to (..., D_out); the input must have the parameters'
    dtype (float32 unless the module was converted).
    """

    def __init__(
        self,
        in_features: int,
        hidden_sizes: Sequence[int],
        out_features: int,
        activation: str = "relu",
    ):
        super().__init__()
        widths = None
        if not isinstance(hidden_sizes, (str, bytes, torch.Tensor)):
            try:
                widths = list(hidden_sizes)
            except TypeError:
                pass
        require(
            widths is not None,
            f"hidden_sizes must be a sequence of widths such as "
            f"[16, 16], got {describe(hidden_sizes)}",
        )
        sizes = [
            check_int(in_features, "in_features", 1),
            *(check_int(h, f"hidden_sizes[{i}]", 1) for i, h in enumerate(widths)),
            check_int(out_features, "out_features", 1),
        ]
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(fan_in, fan_out), activation_module(activation)]
        self.layers = nn.Sequential(*layers[:-1])  # no activation after the output layer
        self.in_features, self.out_features = sizes[0], sizes[-1]
        self.activation = activation

    @property
    def linears(self) -> list[nn.Linear]:
        """The fully connected layers, input side first."""
        return [m for m in self.layers if isinstance(m, nn.Linear)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = f"(..., {self.in_features})"
        check_tensor(x, "x", shape, dtype=self.linears[0].weight.dtype)
        require(
            x.ndim >= 1 and x.shape[-1] == self.in_features,
            f"x must have shape {shape}, got {tuple(x.shape)}",
        )
        return self.layers(x)
