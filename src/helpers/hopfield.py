"""Attention as memory: classical and modern (continuous) Hopfield networks.

Classical (Hopfield, 1982): P binary patterns ξ ∈ {−1, +1}^N are stored in a symmetric
weight matrix by the Hebbian rule, W = (1/N) Σ_μ ξ_μ ξ_μᵀ with a zero diagonal; recall
flips one unit at a time to the sign of its input, which never raises the energy
E(s) = −½ sᵀ W s. About 0.138·N random patterns can be stored before recall breaks down.

Modern (Ramsauer et al., 2020, "Hopfield Networks is All You Need"): with the patterns as
the columns of X (N, P), the update ξ ← X softmax(β Xᵀ ξ) is attention with the state as
the query and the stored patterns as keys and values, at scale β.

Shapes: N units (pattern length), P patterns; a leading (…) holds several states at once.
"""

from __future__ import annotations

import torch

__all__ = ["hebbian_weights", "energy", "recall", "corrupt", "capacity_curve",
           "modern_hopfield_update", "hopfield_weights", "retrieve", "modern_energy",
           "digit_patterns", "DIGITS"]


def _check_binary(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor) or x.numel() == 0 \
            or not bool(((x == 1) | (x == -1)).all()):
        raise ValueError(f"{name} must be a non-empty tensor of -1 and +1 entries")


def _sign(h: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """sign(h), keeping the old value where h = 0 (so a tie never raises the energy)."""
    return torch.where(h > 0, torch.ones_like(old), torch.where(h < 0, -torch.ones_like(old), old))


def hebbian_weights(patterns: torch.Tensor) -> torch.Tensor:
    """Hebbian weights W = (1/N) Σ_μ ξ_μ ξ_μᵀ with a zero diagonal, for patterns (P, N) of
    ±1 (a float dtype is kept, an integer one becomes the default float). Returns W (N, N)."""
    _check_binary(patterns, "patterns")
    if patterns.dim() != 2:
        raise ValueError(f"patterns must be 2-D (P, N), got shape {tuple(patterns.shape)}")
    if not patterns.is_floating_point():
        patterns = patterns.to(torch.get_default_dtype())
    num_units = patterns.shape[1]
    weights = patterns.T @ patterns / num_units  # (N, N)
    weights.fill_diagonal_(0.0)
    return weights


def energy(weights: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """E(s) = −½ sᵀ W s for W (N, N) and states (…, N); returns (…), 0-d for one state."""
    state = state.to(weights.dtype)
    return -0.5 * ((state @ weights) * state).sum(dim=-1)


def recall(weights: torch.Tensor, state: torch.Tensor, steps: int = 10, mode: str = "async",
           generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the Hopfield dynamics from ``state`` (…, N) of ±1 for ``steps`` steps.

    ``mode="async"``: a step is one sweep over all N units in a random order (drawn from
    ``generator``), each set in turn to the sign of its current input h_i = Σ_j W_ij s_j
    (kept when h_i = 0); with a symmetric, zero-diagonal W the energy never increases.
    ``mode="sync"``: all units at once, s ← sign(W s) (may end in a 2-cycle). Several states
    (…, N) are updated side by side, in the same unit order.

    Returns ``(final_state (…, N), energies (steps + 1, …))``, the energy before the first
    step and after each one.
    """
    if mode not in ("async", "sync"):
        raise ValueError(f"mode must be 'async' or 'sync', got {mode!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, got {steps!r}")
    _check_binary(state, "state")
    num_units = weights.shape[0]
    if weights.shape != (num_units, num_units) or state.shape[-1] != num_units:
        raise ValueError(f"weights must be (N, N) and state (…, N), got weights "
                         f"{tuple(weights.shape)} and state {tuple(state.shape)}")
    state = state.to(weights.dtype).clone()
    energies = [energy(weights, state)]
    for _ in range(steps):
        previous = state.clone()
        if mode == "sync":
            state = _sign(state @ weights, state)  # W is symmetric: (W s)ᵀ = sᵀ W
        else:
            for i in torch.randperm(num_units, generator=generator).tolist():
                state[..., i] = _sign(state @ weights[i], state[..., i])  # row i = column i
        energies.append(energy(weights, state))
        if torch.equal(state, previous):  # a fixed point: the remaining steps change nothing
            energies += [energies[-1]] * (steps + 1 - len(energies))
            break
    return state, torch.stack(energies)


def corrupt(pattern: torch.Tensor, fraction: float,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """A copy of ``pattern`` (…, N) of ±1 with round(fraction · N) units flipped, chosen at
    random (separately for each pattern of a batch) from ``generator``."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")
    _check_binary(pattern, "pattern")
    num_flips = round(fraction * pattern.shape[-1])
    order = torch.rand(pattern.shape, generator=generator).argsort(dim=-1)  # random permutation
    flip = order < num_flips  # exactly num_flips True per row
    return torch.where(flip, -pattern, pattern)


def capacity_curve(num_units: int, pattern_counts, trials: int = 5,
                   generator: torch.Generator | None = None, steps: int = 5,
                   tolerance: float = 0.02) -> torch.Tensor:
    """For each count P in ``pattern_counts``: store P random patterns of N = ``num_units``
    units, start recall (async, ``steps`` sweeps) at each stored pattern and count it as
    kept if at most ``tolerance`` · N units end up wrong (a near-fixed point). Returns the
    fraction kept, averaged over ``trials`` sets of patterns: a tensor of shape
    (len(pattern_counts),). It falls from about 1 to about 0 near P ≈ 0.138 N."""
    fractions = []
    for count in pattern_counts:
        kept = 0
        for _ in range(trials):
            patterns = torch.randint(0, 2, (count, num_units), generator=generator) * 2.0 - 1.0
            final, _ = recall(hebbian_weights(patterns), patterns, steps, generator=generator)
            wrong = (final != patterns).float().mean(dim=-1)  # (P,)
            kept += int((wrong <= tolerance).sum())
        fractions.append(kept / (count * trials))
    return torch.tensor(fractions)


# ---------------------------------------------------------------- modern Hopfield network
def hopfield_weights(patterns: torch.Tensor, xi: torch.Tensor, beta: float) -> torch.Tensor:
    """The attention weights softmax(β Xᵀ ξ) over the P stored patterns, for X (N, P) (the
    patterns as columns) and states ξ (…, N). Returns (…, P)."""
    if patterns.dim() != 2 or xi.shape[-1] != patterns.shape[0]:
        raise ValueError(f"patterns must be (N, P) and xi (…, N), got patterns "
                         f"{tuple(patterns.shape)} and xi {tuple(xi.shape)}")
    return torch.softmax(beta * (xi @ patterns), dim=-1)  # (…, P)


def modern_hopfield_update(patterns: torch.Tensor, xi: torch.Tensor, beta: float) -> torch.Tensor:
    """One update of the modern Hopfield network, ξ_new = X softmax(β Xᵀ ξ): attention with
    query ξ, keys = values = Xᵀ (P, N) and scale β. X (N, P), ξ (…, N) → ξ_new (…, N)."""
    return hopfield_weights(patterns, xi, beta) @ patterns.T  # (…, P) @ (P, N)


def retrieve(patterns: torch.Tensor, xi: torch.Tensor, beta: float,
             steps: int = 1) -> torch.Tensor:
    """Apply :func:`modern_hopfield_update` ``steps`` times from ξ (…, N); returns (…, N).
    Large β retrieves the stored pattern nearest ξ (usually in one step); small β ends near
    the mean of the patterns, a metastable state that averages them."""
    for _ in range(steps):
        xi = modern_hopfield_update(patterns, xi, beta)
    return xi


def modern_energy(patterns: torch.Tensor, xi: torch.Tensor, beta: float) -> torch.Tensor:
    """E(ξ) = −(1/β) log Σ_μ exp(β x_μᵀ ξ) + ½ ξᵀ ξ (Ramsauer et al. without the constant
    terms); the update never raises it. X (N, P), ξ (…, N) → (…)."""
    return -torch.logsumexp(beta * (xi @ patterns), dim=-1) / beta + 0.5 * (xi * xi).sum(-1)


# ---------------------------------------------------------------- digit bitmaps
DIGITS = {  # 7 rows × 5 columns, '#' = on (+1), '.' = off (−1)
    0: ".###. #...# #..## #.#.# ##..# #...# .###.",
    1: "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    2: ".###. #...# ....# ...#. ..#.. .#... #####",
    3: "####. ....# ....# .###. ....# ....# ####.",
    4: "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    5: "##### #.... ####. ....# ....# #...# .###.",
    6: "..##. .#... #.... ####. #...# #...# .###.",
    7: "##### ....# ...#. ..#.. .#... .#... .#...",
    8: ".###. #...# #...# .###. #...# #...# .###.",
    9: ".###. #...# #...# .#### ....# ...#. .##..",
}


def digit_patterns(dtype: torch.dtype | None = None) -> torch.Tensor:
    """The digits 0–9 as 7 × 5 bitmaps (drawn in :data:`DIGITS`), flattened row by row to
    N = 35 units of ±1. Returns (10, 35); view one as an image with ``.reshape(7, 5)``."""
    rows = [[1.0 if c == "#" else -1.0 for c in DIGITS[d].replace(" ", "")] for d in range(10)]
    return torch.tensor(rows, dtype=dtype or torch.get_default_dtype())
