"""Seeding: one call makes a chapter's cell print the same on every run."""

from __future__ import annotations

import random

import numpy as np
import torch

from helpers.checks import check_int

__all__ = ["set_seed"]

_SEED_LIMIT = 2**32  # NumPy's legacy seed must lie in [0, 2**32)


def set_seed(seed: int) -> None:
    """Seed Python's ``random``, NumPy and PyTorch (CPU) so a cell prints the same every run.

    Args:
        seed: a non-negative integer below 2**32 (NumPy's limit); a NumPy integer is fine.
    """
    seed = check_int(seed, "seed")
    if seed >= _SEED_LIMIT:
        raise ValueError(f"seed must be below 2**32 = {_SEED_LIMIT} (NumPy's limit), got {seed}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
