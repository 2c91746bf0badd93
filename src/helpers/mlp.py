"""Multilayer perceptrons and activation functions (chapter 1).

Each activation is written from its formula beside its derivative, so the chapter can check
the pair against PyTorch (forward) and autograd (backward). ``MLP`` is the plain stack of
fully connected layers that later chapters reuse: the Transformer's position-wise FFN is one.
Shape letters: N examples, B batch, T positions, D features.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import matplotlib
import matplotlib.pyplot as plt
import torch
from torch import nn

from .utils import check_shape, require

__all__ = [
    "relu", "relu_derivative", "sigmoid", "sigmoid_derivative", "tanh", "tanh_derivative",
    "gelu", "gelu_derivative", "ACTIVATIONS", "activation_module", "MLP", "train_full_batch",
    "class1_probability", "accuracy", "decision_grid", "plot_decision_boundary",
]


# --- activations, each with its derivative -------------------------------------------------

def relu(x: torch.Tensor) -> torch.Tensor:
    """ReLU, max(0, x), elementwise; any shape in, the same shape out."""
    return x.clamp_min(0)


def relu_derivative(x: torch.Tensor) -> torch.Tensor:
    """1 where x > 0, else 0 (the value 0 at x = 0, as autograd uses)."""
    return (x > 0).to(x.dtype)


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    """The logistic sigmoid 1 / (1 + exp(-x)); for x below about -88 (float32) exp(-x) is
    inf and the result is exactly 0, never NaN."""
    return 1 / (1 + torch.exp(-x))


def sigmoid_derivative(x: torch.Tensor) -> torch.Tensor:
    """sigmoid(x) * (1 - sigmoid(x)); at most 0.25, reached at x = 0."""
    s = sigmoid(x)
    return s * (1 - s)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) = (e^x - e^-x) / (e^x + e^-x), computed as sign(x) (1 - e) / (1 + e) with
    e = exp(-2|x|) <= 1, so that no exponential can overflow."""
    e = torch.exp(-2 * x.abs())
    return torch.sign(x) * (1 - e) / (1 + e)


def tanh_derivative(x: torch.Tensor) -> torch.Tensor:
    """1 - tanh(x)^2; equal to 1 at x = 0 and tending to 0 as |x| grows."""
    return 1 - tanh(x) ** 2


def _normal_cdf(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))


def _normal_pdf(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, x * Phi(x) with Phi the standard normal CDF (the exact erf form, as
    ``F.gelu(x)`` with its default ``approximate="none"``)."""
    return x * _normal_cdf(x)


def gelu_derivative(x: torch.Tensor) -> torch.Tensor:
    """Phi(x) + x * phi(x), with phi the standard normal density."""
    return _normal_cdf(x) + x * _normal_pdf(x)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def _identity_derivative(x: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(x)


ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "relu": (relu, relu_derivative),
    "sigmoid": (sigmoid, sigmoid_derivative),
    "tanh": (tanh, tanh_derivative),
    "gelu": (gelu, gelu_derivative),
    "identity": (_identity, _identity_derivative),
}
"""name -> (function, derivative), both elementwise, written from the formulas."""

_MODULES = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "gelu": nn.GELU,
            "identity": nn.Identity}


def activation_module(name: str) -> nn.Module:
    """PyTorch's module for the activation ``name`` (a key of :data:`ACTIVATIONS`).

    The network uses PyTorch's own modules (fast, with exact gradients everywhere); the
    formulas in :data:`ACTIVATIONS` are checked against them in the tests and the chapter.
    ``"identity"`` gives ``nn.Identity``: a network with no nonlinearity at all.
    """
    require(name in _MODULES,
            f"activation must be one of {sorted(_MODULES)}, got {name!r}")
    return _MODULES[name]()


# --- the network ------------------------------------------------------------------------

def _positive_int(value, name: str) -> int:
    require(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
            f"{name} must be a positive integer, got {value!r}")
    return value


class MLP(nn.Module):
    """A multilayer perceptron: fully connected layers with an activation between them.

    ``MLP(2, [16, 16], 1)`` is Linear(2, 16) -> act -> Linear(16, 16) -> act -> Linear(16, 1);
    ``MLP(2, [], 1)`` is a single linear layer (a linear or logistic regression model).
    The layers act on the last axis, so the input may be (N, D_in) or (B, T, D_in): applied
    to a (B, T, D) tensor it is the Transformer's position-wise feed-forward network.

    Args:
        in_features: D_in, the size of the input's last axis.
        hidden_sizes: the width of each hidden layer, input side first (may be empty).
        out_features: D_out, the size of the output's last axis.
        activation: a key of :data:`ACTIVATIONS` (``"relu"``, ``"gelu"``, ...).

    Shapes: forward maps (..., D_in) to (..., D_out).
    """

    def __init__(self, in_features: int, hidden_sizes: Sequence[int], out_features: int,
                 activation: str = "relu"):
        super().__init__()
        require(not isinstance(hidden_sizes, (int, str)),
                f"hidden_sizes must be a sequence of widths such as [16, 16], "
                f"got {hidden_sizes!r}")
        sizes = [_positive_int(in_features, "in_features"),
                 *(_positive_int(h, "hidden_sizes entries") for h in hidden_sizes),
                 _positive_int(out_features, "out_features")]
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(fan_in, fan_out), activation_module(activation)]
        self.layers = nn.Sequential(*layers[:-1])  # no activation after the output layer
        self.in_features, self.out_features = in_features, out_features
        self.activation = activation

    @property
    def linears(self) -> list[nn.Linear]:
        """The fully connected layers, input side first."""
        return [m for m in self.layers if isinstance(m, nn.Linear)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require(x.ndim >= 1 and x.shape[-1] == self.in_features,
                f"x must have shape (..., {self.in_features}), got {tuple(x.shape)}")
        return self.layers(x)


def train_full_batch(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: Callable,
                     steps: int, lr: float, optimizer: str = "adam",
                     callback: Callable[[int, nn.Module], None] | None = None) -> list[float]:
    """Train ``model`` on the whole data set at every step; return the loss of every step.

    Nothing random happens inside (no shuffling, no dropout draws unless the model has
    them), so seeding the model's initialisation makes the run repeatable.

    Args:
        model: the network; its parameters are updated in place.
        x: inputs (N, D_in); y: targets in whatever form ``loss_fn`` takes.
        loss_fn: ``loss_fn(model(x), y)`` returns a scalar tensor, e.g. ``nn.MSELoss()``.
        steps: the number of gradient steps; lr: the learning rate.
        optimizer: ``"adam"`` or ``"sgd"``.
        callback: called as ``callback(step, model)`` after each step (1-based), e.g. to
            keep snapshots for a slider.

    Returns:
        ``steps`` floats: entry i is the loss before update i + 1.
    """
    _positive_int(steps, "steps")
    require(isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0,
            f"lr must be a positive finite number, got {lr!r}")
    optimizers = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}
    require(optimizer in optimizers,
            f"optimizer must be one of {sorted(optimizers)}, got {optimizer!r}")
    opt = optimizers[optimizer](model.parameters(), lr=lr)
    losses = []
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if callback is not None:
            callback(step, model)
    return losses


# --- binary classification: probabilities, accuracy, decision boundaries ----------------

def class1_probability(logits: torch.Tensor) -> torch.Tensor:
    """P(class 1) from logits (N, 1) (sigmoid) or (N, 2) (softmax); returns (N,)."""
    require(logits.ndim == 2 and logits.shape[1] in (1, 2),
            f"logits must have shape (N, 1) or (N, 2), got {tuple(logits.shape)}")
    if logits.shape[1] == 1:
        return torch.sigmoid(logits[:, 0])
    return torch.softmax(logits, dim=1)[:, 1]


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of the labels y (N,) in {0, 1} that ``model`` gets right on x (N, 2)."""
    check_shape(y, (x.shape[0],))
    predicted = (class1_probability(model(x)) > 0.5).long()
    return (predicted == y.long()).float().mean().item()


@torch.no_grad()
def decision_grid(model: nn.Module, x: torch.Tensor, resolution: int = 100,
                  margin: float = 0.5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Evaluate a binary classifier on a grid covering the points x (N, 2).

    Args:
        model: maps (M, 2) inputs to logits (M, 1) or (M, 2).
        x: the data points (N, 2); the grid spans their range plus ``margin`` on each side.
        resolution: R, the number of grid points along each axis.

    Returns:
        ``(xx, yy, probs)``, each (R, R): grid coordinates (as ``meshgrid(indexing="xy")``)
        and P(class 1) at each grid point.
    """
    check_shape(x, (None, 2))
    _positive_int(resolution, "resolution")
    low, high = x.min(dim=0).values - margin, x.max(dim=0).values + margin
    xx, yy = torch.meshgrid(torch.linspace(low[0], high[0], resolution),
                            torch.linspace(low[1], high[1], resolution), indexing="xy")
    grid = torch.stack([xx.reshape(-1), yy.reshape(-1)], dim=1)  # (R*R, 2)
    probs = class1_probability(model(grid)).reshape(resolution, resolution)
    return xx, yy, probs


def plot_decision_boundary(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                           ax: matplotlib.axes.Axes | None = None, *, resolution: int = 100,
                           title: str | None = None,
                           colorbar: bool = True) -> matplotlib.figure.Figure:
    """Shade P(class 1) over the plane, draw the 0.5 contour and the labelled points.

    Args:
        model: a binary classifier on 2-D inputs (see :func:`decision_grid`).
        x: points (N, 2); y: labels (N,) in {0, 1} (class 0 white circles, class 1 black
            triangles).
        ax: the axes to draw into; a new figure is made when ``None``.
        resolution: grid points per axis; title: the panel title; colorbar: add one.

    Returns:
        The figure holding ``ax``.
    """
    check_shape(y, (x.shape[0],))
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 3.6))
    xx, yy, probs = decision_grid(model, x, resolution)
    shading = ax.contourf(xx, yy, probs, levels=torch.linspace(0, 1, 11).tolist(),
                          cmap="viridis", alpha=0.75)
    if 0 < probs.min() < 0.5 < probs.max():
        ax.contour(xx, yy, probs, levels=[0.5], colors="white", linewidths=2)
    # class 0 lies on the dark end of viridis, class 1 on the bright end
    for label, marker, face, edge in ((0, "o", "white", "black"), (1, "^", "black", "white")):
        points = x[y == label]
        ax.scatter(points[:, 0], points[:, 1], s=16, marker=marker, c=face, edgecolors=edge,
                   linewidths=0.5, label=f"class {label}")
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(shading, ax=ax, label="P(class 1)")
    return ax.figure
