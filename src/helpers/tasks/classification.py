"""Binary classification in the plane (chapter 1): toy data sets made in code, each seeded
by an argument, a full-batch training loop, and the classifier's probabilities, accuracy
and decision grid.

The figure of a decision boundary is :func:`helpers.figures.plotting.plot_decision_boundary`.
Shape letters: N examples, R grid points per axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from helpers.checks import (
    check_int,
    check_real,
    check_shape,
    check_tensor,
    describe,
    require,
)

__all__ = [
    "two_moons",
    "two_circles",
    "train_full_batch",
    "class1_probability",
    "accuracy",
    "decision_grid",
]


# --- data -----------------------------------------------------------------------------------


def two_moons(
    num_points: int = 200, *, noise: float = 0.1, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two interleaving half circles: inputs (N, 2) float32, labels (N,) int64 in {0, 1}.

    Args:
        num_points: N, an integer >= 2 (N // 2 points of class 0, the rest class 1).
        noise: the standard deviation of the Gaussian noise added to the points (>= 0).
        seed: the random seed, a non-negative integer.
    """
    num_points = check_int(num_points, "num_points", 2)
    check_real(noise, "noise", minimum=0)
    seed = check_int(seed, "seed")
    gen = torch.Generator().manual_seed(seed)
    n0 = num_points // 2
    n1 = num_points - n0
    t0 = torch.rand(n0, generator=gen) * math.pi
    t1 = torch.rand(n1, generator=gen) * math.pi
    upper = torch.stack([torch.cos(t0), torch.sin(t0)], dim=1)
    lower = torch.stack([1 - torch.cos(t1), 0.5 - torch.sin(t1)], dim=1)
    x = torch.cat([upper, lower]) + noise * torch.randn(num_points, 2, generator=gen)
    y = torch.cat([torch.zeros(n0, dtype=torch.long), torch.ones(n1, dtype=torch.long)])
    perm = torch.randperm(num_points, generator=gen)
    return x[perm], y[perm]


def two_circles(
    num_points: int = 200, *, noise: float = 0.05, factor: float = 0.5, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """An inner circle (label 1) inside an outer one (label 0): (N, 2) and (N,).

    Args:
        num_points: N, an integer >= 2 (N // 2 points on the outer circle).
        noise: the standard deviation of the Gaussian noise added to the points (>= 0).
        factor: the inner circle's radius, in (0, 1) (the outer one has radius 1).
        seed: the random seed, a non-negative integer.
    """
    num_points = check_int(num_points, "num_points", 2)
    check_real(noise, "noise", minimum=0)
    check_real(
        factor, "factor", minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True
    )
    seed = check_int(seed, "seed")
    gen = torch.Generator().manual_seed(seed)
    n0 = num_points // 2
    n1 = num_points - n0
    t = torch.rand(num_points, generator=gen) * 2 * math.pi
    radius = torch.cat([torch.ones(n0), torch.full((n1,), factor)])
    x = torch.stack([radius * torch.cos(t), radius * torch.sin(t)], dim=1)
    x = x + noise * torch.randn(num_points, 2, generator=gen)
    y = torch.cat([torch.zeros(n0, dtype=torch.long), torch.ones(n1, dtype=torch.long)])
    perm = torch.randperm(num_points, generator=gen)
    return x[perm], y[perm]


# --- training -------------------------------------------------------------------------------


def train_full_batch(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable,
    steps: int,
    lr: float,
    optimizer: str = "adam",
    callback: Callable[[int, nn.Module], None] | None = None,
) -> list[float]:
    """Train ``model`` on the whole data set at every step; return the loss of every step.

    Nothing random happens inside (no shuffling, no dropout draws unless the model has
    them), so seeding the model's initialisation makes the run repeatable.

    Args:
        model: the network (an ``nn.Module`` with parameters); updated in place.
        x: inputs (N, D_in), a floating tensor; y: targets, a tensor in whatever form
            ``loss_fn`` takes.
        loss_fn: ``loss_fn(model(x), y)`` returns a scalar tensor, e.g. ``nn.MSELoss()``.
        steps: the number of gradient steps (a positive integer); lr: the learning rate
            (finite, > 0).
        optimizer: ``"adam"`` or ``"sgd"``.
        callback: called as ``callback(step, model)`` after each step (1-based), e.g. to
            keep snapshots for a slider.

    Returns:
        ``steps`` floats: entry i is the loss before update i + 1.
    """
    require(isinstance(model, nn.Module), f"model must be an nn.Module, got {describe(model)}")
    parameters = list(model.parameters())
    require(len(parameters) > 0, "model must have parameters to train, got none")
    check_tensor(x, "x", "(N, D_in)", floating=True)
    require(isinstance(y, torch.Tensor), f"y must be a torch.Tensor, got {describe(y)}")
    require(callable(loss_fn), f"loss_fn must be callable, got {describe(loss_fn)}")
    steps = check_int(steps, "steps", 1)
    lr = check_real(lr, "lr", minimum=0, exclusive_minimum=True)
    optimizers = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}
    require(
        isinstance(optimizer, str) and optimizer in optimizers,
        f"optimizer must be one of {sorted(optimizers)}, got {optimizer!r}",
    )
    require(
        callback is None or callable(callback),
        f"callback must be callable or None, got {describe(callback)}",
    )
    opt = optimizers[optimizer](parameters, lr=lr)
    x, y = x.to(parameters[0].device), y.to(parameters[0].device)  # on the model's device
    model.train()  # dropout and the like on while training (the model is left training)
    losses = []
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        require(
            isinstance(loss, torch.Tensor) and loss.dim() == 0,
            f"loss_fn must return a scalar (0-d) tensor, got {describe(loss)}",
        )
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if callback is not None:
            callback(step, model)
    return losses


# --- binary classification: probabilities, accuracy, decision grid --------------------------


def class1_probability(logits: torch.Tensor) -> torch.Tensor:
    """P(class 1) from floating logits (N, 1) (sigmoid) or (N, 2) (softmax); returns (N,)."""
    check_tensor(logits, "logits", "(N, 1) or (N, 2)", floating=True)
    require(
        logits.ndim == 2 and logits.shape[1] in (1, 2),
        f"logits must have shape (N, 1) or (N, 2), got {tuple(logits.shape)}",
    )
    if logits.shape[1] == 1:
        return torch.sigmoid(logits[:, 0])
    return torch.softmax(logits, dim=1)[:, 1]


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of the labels y (N,) in {0, 1} that ``model`` gets right on x (N, D_in).

    Args:
        model: maps x to logits (N, 1) or (N, 2), as :func:`class1_probability` takes.
        x: the inputs (N, D_in), floating, N >= 1.
        y: the labels (N,), 0 or 1 (any real or bool dtype).
    """
    require(callable(model), f"model must be callable (e.g. an nn.Module), got {describe(model)}")
    check_tensor(x, "x", "(N, D_in)", ndim=2, floating=True)
    check_tensor(y, "y", "(N,)")
    check_shape(y, (x.shape[0],))
    require(x.shape[0] > 0, "accuracy needs at least one example, got N=0")
    require(
        not y.is_complex() and bool(((y == 0) | (y == 1)).all()),
        f"y must hold the labels 0 and 1 only, got values {sorted(set(y.tolist()))[:5]}",
    )
    predicted = (class1_probability(model(x)) > 0.5).long()
    return (predicted == y.long()).float().mean().item()


@torch.no_grad()
def decision_grid(
    model: nn.Module, x: torch.Tensor, resolution: int = 100, margin: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Evaluate a binary classifier on a grid covering the points x (N, 2).

    Args:
        model: maps (M, 2) inputs to logits (M, 1) or (M, 2).
        x: the data points (N, 2), floating, N >= 1; the grid spans their range plus
            ``margin`` on each side.
        resolution: R, the number of grid points along each axis (a positive integer).
        margin: how far the grid reaches beyond the points (finite, >= 0).

    Returns:
        ``(xx, yy, probs)``, each (R, R), on ``x``'s device: grid coordinates (as
        ``meshgrid(indexing="xy")``) and P(class 1) at each grid point. The grid is fed
        to the model on the device of its parameters (x's if it has none).
    """
    require(callable(model), f"model must be callable (e.g. an nn.Module), got {describe(model)}")
    check_tensor(x, "x", "(N, 2)", floating=True)
    check_shape(x, (None, 2))
    require(x.shape[0] > 0, "x must hold at least one point to span the grid, got N=0")
    resolution = check_int(resolution, "resolution", 1)
    check_real(margin, "margin", minimum=0)
    low, high = (x.min(dim=0).values - margin).tolist(), (x.max(dim=0).values + margin).tolist()
    axes = (torch.linspace(low[i], high[i], resolution) for i in range(2))
    xx, yy = torch.meshgrid(*axes, indexing="xy")  # (R, R) each, on the CPU
    grid = torch.stack([xx.reshape(-1), yy.reshape(-1)], dim=1)  # (R*R, 2)
    parameter = next(model.parameters(), None) if isinstance(model, nn.Module) else None
    grid = grid.to(x.device if parameter is None else parameter.device)
    probs = class1_probability(model(grid)).reshape(resolution, resolution)
    return xx.to(x.device), yy.to(x.device), probs.to(x.device)
