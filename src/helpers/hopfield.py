"""Attention as memory: classical and modern (continuous) Hopfield networks.

Classical (Hopfield, 1982): P binary patterns x^μ ∈ {−1, +1}^N are stored in a symmetric
weight matrix by the Hebbian rule, W = (1/N) Σ_μ x^μ x^μᵀ with a zero diagonal; recall
flips one unit at a time to the sign of its input, which never raises the energy
E(s) = −½ sᵀ W s. About 0.138·N random patterns can be stored before recall breaks down.
The projection (pseudo-inverse) rule, W = X (XᵀX)⁻¹ Xᵀ with a zero diagonal, makes any set of
linearly independent patterns fixed points (so at most N of them), however correlated.

Modern (Ramsauer et al., 2020, "Hopfield Networks is All You Need"): with the patterns as
the columns of X (N, P), the update ξ ← X softmax(β Xᵀ ξ) is attention with the state as
the query and the stored patterns as keys and values, at scale β.

Shapes: N units (pattern length), P patterns; a leading (…) holds several states at once.
The chapter's experiments (corrupting a pattern, the capacity curve, the digit bitmaps) are
in :mod:`helpers.tasks.hopfield`.
"""

from __future__ import annotations

import torch

from helpers.checks import (
    ANY_RANK_FROM_1,
    check_generator,
    check_int,
    check_patterns_and_query,
    check_pm1,
    check_square,
    check_tensor,
    require,
)

__all__ = [
    "hebbian_weights",
    "projection_weights",
    "energy",
    "recall",
    "modern_hopfield_update",
    "hopfield_weights",
    "retrieve",
    "modern_energy",
]


def _sign(h: torch.Tensor, old: torch.Tensor, tie: float = 0.0) -> torch.Tensor:
    """sign(h), keeping the old value where |h| <= tie (so a tie never raises the energy)."""
    return torch.where(
        h > tie, torch.ones_like(old), torch.where(h < -tie, -torch.ones_like(old), old)
    )


def _tie_tolerance(weights: torch.Tensor) -> float:
    """How far from 0 an input h_i = Σ_j W_ij s_j of ±1 states may land by rounding alone: a
    sum that is exactly 0 (Hebbian weights k/N often cancel) comes out as ±1e-8 or so, with a
    sign that depends on the order of the additions, hence on the CPU's vector units. Counted
    as a tie, such an input keeps the unit's value on every CPU."""
    if not weights.is_floating_point():
        return 0.0
    scale = float(weights.detach().abs().sum(-1).max())  # the largest |h| a ±1 state can produce
    return 64 * torch.finfo(weights.dtype).eps * scale


def hebbian_weights(patterns: torch.Tensor) -> torch.Tensor:
    """Hebbian weights W = (1/N) Σ_μ x^μ x^μᵀ with a zero diagonal, for patterns (P, N) of
    ±1 (a float dtype is kept, an integer one becomes the default float). Returns W (N, N)."""
    check_tensor(patterns, "patterns", "(P, N)", ndim=2)
    check_pm1(patterns, "patterns", "(P, N)")
    if not patterns.is_floating_point():
        patterns = patterns.to(torch.get_default_dtype())
    num_units = patterns.shape[1]
    weights = patterns.T @ patterns / num_units  # (N, N)
    weights.fill_diagonal_(0.0)
    return weights


def projection_weights(patterns: torch.Tensor) -> torch.Tensor:
    """Projection (pseudo-inverse) weights for patterns (P, N) of ±1: W = X X⁺ with the
    patterns as the columns of X (N, P), X⁺ its Moore–Penrose pseudo-inverse, then a zero
    diagonal (Personnaz et al., 1985). Π = X X⁺ projects onto the span of the patterns, so
    unit i of W x^μ is (1 − Π_ii) x^μ_i: every pattern is a fixed point while the patterns
    are linearly independent and no Π_ii reaches 1. For mutually orthogonal patterns,
    X X⁺ = (1/N) X Xᵀ and the rule equals :func:`hebbian_weights`. Computed in float64;
    returns W (N, N), symmetric, in the patterns' float dtype (an integer dtype becomes the
    default float)."""
    check_tensor(patterns, "patterns", "(P, N)", ndim=2)
    check_pm1(patterns, "patterns", "(P, N)")
    dtype = patterns.dtype if patterns.is_floating_point() else torch.get_default_dtype()
    rows = patterns.to(torch.float64)  # (P, N): X transposed
    projector = torch.linalg.pinv(rows) @ rows  # (N, N): the projector onto the patterns' span
    projector = 0.5 * (projector + projector.T)  # exactly symmetric
    projector.fill_diagonal_(0.0)
    return projector.to(dtype)


def energy(weights: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """E(s) = −½ sᵀ W s for W (N, N) and states (…, N); returns (…), 0-d for one state.
    The states are converted to W's dtype (so ±1 integers are fine)."""
    num_units = check_square(weights, "weights")
    check_tensor(
        state, "state", f"(…, N) with N={num_units}", ndim=ANY_RANK_FROM_1, size={-1: num_units}
    )
    require(
        state.dtype != torch.bool and not state.is_complex(),
        f"state must hold real numbers (±1), got dtype {state.dtype}",
    )
    state = state.to(weights.dtype)
    return -0.5 * ((state @ weights) * state).sum(dim=-1)


def recall(
    weights: torch.Tensor,
    state: torch.Tensor,
    steps: int = 10,
    mode: str = "async",
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the Hopfield dynamics from ``state`` (…, N) of ±1 for ``steps`` steps.

    ``mode="async"``: a step is one sweep over all N units in a random order (drawn from
    ``generator``, on the generator's device: a CPU one, the default, gives the same order
    whatever the device of ``weights`` and ``state``), each set in turn to the sign of its current input h_i = Σ_j W_ij s_j
    (kept when h_i = 0, or within rounding of 0, so that a tie is a tie on every CPU); with a
    symmetric, zero-diagonal W the energy never increases.
    ``mode="sync"``: all units at once, s ← sign(W s) (may end in a 2-cycle). Several states
    (…, N) are updated side by side, in the same unit order.

    Returns ``(final_state (…, N), energies (steps + 1, …))``, the energy before the first
    step and after each one.
    """
    if mode not in ("async", "sync"):
        raise ValueError(f"mode must be 'async' or 'sync', got {mode!r}")
    steps = check_int(steps, "steps")
    check_generator(generator)
    check_pm1(state, "state", "(…, N)")
    num_units = check_square(weights, "weights")
    if state.shape[-1] != num_units:
        raise ValueError(
            f"weights must be (N, N) and state (…, N), got weights "
            f"{tuple(weights.shape)} and state {tuple(state.shape)}"
        )
    state = state.to(weights.dtype).clone()
    tie = _tie_tolerance(weights)
    draw_device = None if generator is None else generator.device  # the order: a CPU draw
    # energy() keeps its input for autograd: give it a copy, as the sweep writes in place
    energies = [energy(weights, state.clone())]
    for _ in range(steps):
        previous = state.clone()
        if mode == "sync":
            state = _sign(state @ weights, state, tie)  # W is symmetric: (W s)ᵀ = sᵀ W
        else:
            order = torch.randperm(num_units, generator=generator, device=draw_device)
            for i in order.tolist():
                state[..., i] = _sign(state @ weights[i], state[..., i], tie)  # row i = column i
        energies.append(energy(weights, state.clone()))
        if torch.equal(state, previous):  # a fixed point: the remaining steps change nothing
            energies += [energies[-1]] * (steps + 1 - len(energies))
            break
    return state, torch.stack(energies)


# ---------------------------------------------------------------- modern Hopfield network
def hopfield_weights(patterns: torch.Tensor, xi: torch.Tensor, beta: float) -> torch.Tensor:
    """The attention weights softmax(β Xᵀ ξ) over the P stored patterns, for X (N, P) (the
    patterns as columns), states ξ (…, N) of the same floating dtype and a finite β > 0.
    Returns (…, P)."""
    beta = check_patterns_and_query(patterns, xi, beta)
    return torch.softmax(beta * (xi @ patterns), dim=-1)  # (…, P)


def modern_hopfield_update(patterns: torch.Tensor, xi: torch.Tensor, beta: float) -> torch.Tensor:
    """One update of the modern Hopfield network, ξ_new = X softmax(β Xᵀ ξ): attention with
    query ξ, keys = values = Xᵀ (P, N) and scale β. X (N, P), ξ (…, N) → ξ_new (…, N)."""
    return hopfield_weights(patterns, xi, beta) @ patterns.T  # (…, P) @ (P, N)


def retrieve(patterns: torch.Tensor, xi: torch.Tensor, beta: float, steps: int = 1) -> torch.Tensor:
    """Apply :func:`modern_hopfield_update` ``steps`` times from ξ (…, N); returns (…, N).
    Large β retrieves the stored pattern nearest ξ (usually in one step); small β ends near
    the mean of the patterns, a metastable state that averages them."""
    beta = check_patterns_and_query(patterns, xi, beta)
    steps = check_int(steps, "steps")
    for _ in range(steps):
        xi = modern_hopfield_update(patterns, xi, beta)
    return xi


def modern_energy(patterns: torch.Tensor, xi: torch.Tensor, beta: float) -> torch.Tensor:
    """E(ξ) = −(1/β) log Σ_μ exp(β x^μᵀ ξ) + ½ ξᵀ ξ (Ramsauer et al. without the constant
    terms); the update never raises it. X (N, P), ξ (…, N) → (…)."""
    beta = check_patterns_and_query(patterns, xi, beta)
    return -torch.logsumexp(beta * (xi @ patterns), dim=-1) / beta + 0.5 * (xi * xi).sum(-1)
