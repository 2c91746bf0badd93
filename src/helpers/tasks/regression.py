"""1-D regression tasks (chapters 1 to 3): toy data made in code (never downloaded), each
seeded by an argument, and the training loop of Nadaraya–Watson regression.

The data sets are the curve of the Nadaraya–Watson chapter (:func:`nw_target`,
:func:`nadaraya_watson_data`) and a bumpy curve for universal approximation
(:func:`wiggly_target`, :func:`sample_function`); :func:`train_nw` fits the inverse
bandwidth of a :class:`helpers.kernels.NWKernelRegression`. Shape letters: N training
points, M test points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from helpers.checks import check_bool, check_int, check_real, check_tensor, describe, require
from helpers.kernels import NWKernelRegression

__all__ = [
    "RegressionData",
    "nadaraya_watson_data",
    "nw_target",
    "wiggly_target",
    "sample_function",
    "train_nw",
]


def nw_target(x: torch.Tensor) -> torch.Tensor:
    """The curve of the Nadaraya–Watson chapter: f(x) = 2 sin(x) + x^0.8 (with x^0.8
    taken as 0 for x < 0), elementwise on a floating tensor of any shape."""
    check_tensor(x, "x", "(…)", floating=True)
    return 2 * torch.sin(x) + x.clamp_min(0) ** 0.8


def wiggly_target(x: torch.Tensor) -> torch.Tensor:
    """A 1-D function with bumps of several widths, for universal approximation:
    sin(3x) + 0.5 cos(7x) exp(-x²/2) + 0.3 x, elementwise on a floating tensor."""
    check_tensor(x, "x", "(…)", floating=True)
    return torch.sin(3 * x) + 0.5 * torch.cos(7 * x) * torch.exp(-(x**2) / 2) + 0.3 * x


@dataclass(frozen=True)
class RegressionData:
    """A 1-D regression set: training pairs (N,), and a test grid (M,) with the true curve."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_true: torch.Tensor


def nadaraya_watson_data(
    num_train: int = 50,
    num_test: int = 50,
    *,
    noise: float = 0.5,
    x_max: float = 5.0,
    seed: int = 0,
) -> RegressionData:
    """Noisy samples of :func:`nw_target` on [0, x_max), training inputs sorted.

    Args:
        num_train: N, the number of (key, value) training pairs (a positive integer).
        num_test: M, the number of evenly spaced test queries on [0, x_max) (positive).
        noise: the standard deviation of the Gaussian noise added to the targets (>= 0).
        x_max: the right end of the input range (finite, > 0).
        seed: the random seed, a non-negative integer (the same seed always gives the
            same data).

    Returns:
        A :class:`RegressionData` with float32 tensors.
    """
    num_train = check_int(num_train, "num_train", 1)
    num_test = check_int(num_test, "num_test", 1)
    check_real(noise, "noise", minimum=0)
    check_real(x_max, "x_max", minimum=0, exclusive_minimum=True)
    seed = check_int(seed, "seed")
    gen = torch.Generator().manual_seed(seed)
    x_train, _ = torch.sort(torch.rand(num_train, generator=gen) * x_max)
    y_train = nw_target(x_train) + noise * torch.randn(num_train, generator=gen)
    x_test = torch.arange(num_test, dtype=torch.float32) * (x_max / num_test)
    return RegressionData(x_train, y_train, x_test, nw_target(x_test))


def sample_function(
    fn: Callable[[torch.Tensor], torch.Tensor],
    num_points: int = 200,
    *,
    low: float = -3.0,
    high: float = 3.0,
    noise: float = 0.0,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Evenly spaced inputs (N, 1) on [low, high] and targets fn(x) (+ noise), shape (N, 1).

    Args:
        fn: maps the (N, 1) float32 inputs to (N, 1) targets, e.g. :func:`wiggly_target`.
        num_points: N, an integer >= 2.
        low, high: the ends of the input range, finite with low < high.
        noise: the standard deviation of the Gaussian noise added to the targets (>= 0).
        seed: the seed of the noise, a non-negative integer.
    """
    require(callable(fn), f"fn must be a function of x (N, 1), got {describe(fn)}")
    num_points = check_int(num_points, "num_points", 2)
    check_real(low, "low")
    check_real(high, "high")
    require(high > low, f"high must be greater than low, got low={low}, high={high}")
    check_real(noise, "noise", minimum=0)
    seed = check_int(seed, "seed")
    gen = torch.Generator().manual_seed(seed)
    x = torch.linspace(low, high, num_points).unsqueeze(1)
    targets = fn(x)
    require(
        isinstance(targets, torch.Tensor) and tuple(targets.shape) == tuple(x.shape),
        f"fn must map x of shape {tuple(x.shape)} to a tensor of the same shape, got "
        f"{describe(targets)}",
    )
    y = targets + noise * torch.randn(x.shape, generator=gen)
    return x, y


def train_nw(
    model: NWKernelRegression,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    epochs: int,
    lr: float,
    *,
    leave_one_out: bool = True,
) -> list[float]:
    """Fit ``model.w`` by full-batch gradient descent (plain SGD) on the training set.

    Every training input is a query; the keys and values are the training pairs. With
    ``leave_one_out=True`` a query may not attend to its own key (a mask with a False
    diagonal), so it must be predicted from the *other* points. With ``False`` it may,
    and the loss can be driven to 0 by ``w → ∞``: the model memorises. There is no
    randomness: the same inputs give the same losses. SGD without momentum keeps no state,
    so two calls of ``n`` epochs equal one call of ``2n``.

    Args:
        model: the :class:`helpers.kernels.NWKernelRegression` to train (updated in place).
        x_train: (N,) training inputs, a floating tensor.
        y_train: (N,) training targets, a floating tensor.
        epochs: the number of gradient steps (a non-negative integer).
        lr: the learning rate (finite, > 0).
        leave_one_out: leave each point's own key out of its query's keys.

    Returns:
        The mean squared training loss before each step, a list of ``epochs`` floats.
    """
    require(
        isinstance(model, NWKernelRegression),
        f"model must be an NWKernelRegression, got {describe(model)}",
    )
    epochs = check_int(epochs, "epochs")
    lr = check_real(lr, "lr", minimum=0, exclusive_minimum=True)
    check_bool(leave_one_out, "leave_one_out")
    check_tensor(x_train, "x_train", "(N,)", floating=True)
    check_tensor(y_train, "y_train", "(N,)", floating=True)
    if x_train.dim() != 1 or tuple(y_train.shape) != tuple(x_train.shape):
        raise ValueError(
            f"x_train and y_train must both be 1-D (N,) of the same length, got "
            f"shapes {tuple(x_train.shape)} and {tuple(y_train.shape)}"
        )
    num_train = x_train.shape[0]
    if leave_one_out and num_train < 2:
        raise ValueError(f"leave-one-out training needs at least 2 points, got N={num_train}")
    if num_train == 0:
        raise ValueError("train_nw needs at least 1 training point, got N=0")
    mask = ~torch.eye(num_train, dtype=torch.bool) if leave_one_out else None  # (N, N)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad()
        pred, _ = model(x_train, x_train, y_train, mask=mask)  # (N,)
        loss = torch.mean((pred - y_train) ** 2)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses
