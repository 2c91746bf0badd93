"""Toy data sets generated in code (never downloaded), each seeded by an argument."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .utils import require

__all__ = ["RegressionData", "nadaraya_watson_data", "nw_target", "wiggly_target",
           "sample_function", "two_moons", "two_circles"]


def nw_target(x: torch.Tensor) -> torch.Tensor:
    """The curve of the Nadaraya–Watson chapter: f(x) = 2 sin(x) + x^0.8."""
    return 2 * torch.sin(x) + x.clamp_min(0) ** 0.8


def wiggly_target(x: torch.Tensor) -> torch.Tensor:
    """A 1-D function with bumps of several widths, for universal approximation."""
    return torch.sin(3 * x) + 0.5 * torch.cos(7 * x) * torch.exp(-x**2 / 2) + 0.3 * x


@dataclass(frozen=True)
class RegressionData:
    """A 1-D regression set: training pairs (N,), and a test grid (M,) with the true curve."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_true: torch.Tensor


def nadaraya_watson_data(num_train: int = 50, num_test: int = 50, *, noise: float = 0.5,
                         x_max: float = 5.0, seed: int = 0) -> RegressionData:
    """Noisy samples of :func:`nw_target` on [0, x_max), training inputs sorted.

    Args:
        num_train: N, the number of (key, value) training pairs.
        num_test: M, the number of evenly spaced test queries on [0, x_max).
        noise: the standard deviation of the Gaussian noise added to the targets.
        x_max: the right end of the input range.
        seed: the random seed (the same seed always gives the same data).

    Returns:
        A :class:`RegressionData` with float32 tensors.
    """
    require(num_train >= 1, f"num_train must be at least 1, got {num_train}")
    require(num_test >= 1, f"num_test must be at least 1, got {num_test}")
    require(math.isfinite(noise) and noise >= 0, f"noise must be finite and >= 0, got {noise}")
    gen = torch.Generator().manual_seed(seed)
    x_train, _ = torch.sort(torch.rand(num_train, generator=gen) * x_max)
    y_train = nw_target(x_train) + noise * torch.randn(num_train, generator=gen)
    x_test = torch.arange(num_test, dtype=torch.float32) * (x_max / num_test)
    return RegressionData(x_train, y_train, x_test, nw_target(x_test))


def sample_function(fn, num_points: int = 200, *, low: float = -3.0, high: float = 3.0,
                    noise: float = 0.0, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Evenly spaced inputs (N, 1) on [low, high] and targets fn(x) (+ noise), shape (N, 1)."""
    require(num_points >= 2, f"num_points must be at least 2, got {num_points}")
    require(high > low, f"high must be greater than low, got low={low}, high={high}")
    gen = torch.Generator().manual_seed(seed)
    x = torch.linspace(low, high, num_points).unsqueeze(1)
    y = fn(x) + noise * torch.randn(x.shape, generator=gen)
    return x, y


def two_moons(num_points: int = 200, *, noise: float = 0.1,
              seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two interleaving half circles: inputs (N, 2) float32, labels (N,) int64 in {0, 1}."""
    require(num_points >= 2, f"num_points must be at least 2, got {num_points}")
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


def two_circles(num_points: int = 200, *, noise: float = 0.05, factor: float = 0.5,
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """An inner circle (label 1) inside an outer one (label 0): (N, 2) and (N,)."""
    require(num_points >= 2, f"num_points must be at least 2, got {num_points}")
    require(0 < factor < 1, f"factor must be in (0, 1), got {factor}")
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
