"""Multi-head attention, looked at head by head: a toy task whose heads specialise, and tools
to summarise what each head attends to and what multi-head attention costs.

The *twins* task: a sequence of T = 8 items, each a symbol and a colour. Every symbol occurs
exactly twice (its two occurrences are *twins*); colours are drawn independently. At every
position a model must report three things: the symbol just before it, the symbol just after
it (both cyclically), and the colour of its twin. The first two are found by *position*
(offset −1 and +1), the third by *content* (the key with the same symbol), so a model with
one attention layer needs three sharp lookups at once, one per head.

Shapes use the book's letters: N sequences (the batch B), T positions, H heads, D features.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from helpers.multihead import MultiHeadAttention

__all__ = ["TwinsData", "twins_task", "TwinsModel", "train_twins", "twins_accuracy",
           "relation_weights", "attention_entropy", "attention_flops"]

TARGETS = ("previous", "next", "twin colour")


def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class TwinsData:
    """A batch of the twins task; every field is a long tensor of shape (N, T).

    ``symbols`` and ``colours`` are the inputs; ``twin`` is the position of the other
    occurrence of each position's symbol; ``previous`` and ``next`` are the symbols at
    positions t − 1 and t + 1 (cyclically); ``twin_colour`` is the colour at ``twin``.
    """

    symbols: torch.Tensor
    colours: torch.Tensor
    twin: torch.Tensor
    previous: torch.Tensor
    next: torch.Tensor
    twin_colour: torch.Tensor

    def targets(self) -> dict[str, torch.Tensor]:
        """The three targets by name ("previous", "next", "twin colour"), each (N, T)."""
        return dict(zip(TARGETS, (self.previous, self.next, self.twin_colour)))


def twins_task(num_sequences: int, *, seq_len: int = 8, vocab_size: int = 8,
               num_colours: int = 4, seed: int = 0) -> TwinsData:
    """Generate ``num_sequences`` twins sequences with a private generator seeded by ``seed``.

    Each sequence holds ``seq_len // 2`` distinct symbols out of ``vocab_size``, each twice,
    in a random order, and a random colour (out of ``num_colours``) at every position.

    Args:
        num_sequences: N, at least 1.
        seq_len: T, even and at least 4.
        vocab_size: symbols to draw from, at least T / 2.
        num_colours: colours to draw from, at least 1.
        seed: seed of the generator (the global RNG is not touched).

    Returns:
        A :class:`TwinsData` whose fields are (N, T) long tensors.
    """
    num_sequences = _check_int(num_sequences, "num_sequences", 1)
    seq_len = _check_int(seq_len, "seq_len", 4)
    if seq_len % 2:
        raise ValueError(f"seq_len must be even (every symbol occurs twice), got {seq_len}")
    vocab_size = _check_int(vocab_size, "vocab_size", seq_len // 2)
    num_colours = _check_int(num_colours, "num_colours", 1)
    generator = torch.Generator().manual_seed(_check_int(seed, "seed", 0))
    chosen = torch.stack([torch.randperm(vocab_size, generator=generator)[:seq_len // 2]
                          for _ in range(num_sequences)])  # (N, T/2)
    order = torch.stack([torch.randperm(seq_len, generator=generator)
                         for _ in range(num_sequences)])  # (N, T)
    symbols = chosen.repeat(1, 2).gather(1, order)  # (N, T), each symbol twice
    colours = torch.randint(num_colours, (num_sequences, seq_len), generator=generator)
    same = symbols[:, :, None] == symbols[:, None, :]  # (N, T, T)
    same &= ~torch.eye(seq_len, dtype=torch.bool)  # a position is not its own twin
    twin = same.int().argmax(dim=-1)  # (N, T)
    return TwinsData(symbols=symbols, colours=colours, twin=twin,
                     previous=symbols.roll(1, dims=1), next=symbols.roll(-1, dims=1),
                     twin_colour=colours.gather(1, twin))


class TwinsModel(nn.Module):
    """Embeddings, one multi-head self-attention layer and a linear read-out, nothing else.

    ``TwinsModel(d_model, num_heads, seq_len=8, vocab_size=8, num_colours=4)``: the input
    at position t is the sum of a learned symbol, colour and position embedding (D each);
    :class:`helpers.attention.MultiHeadAttention` (attribute ``mha``) attends over the
    sequence; a linear layer (``readout``) turns each output into logits for the three
    targets. There is no residual connection, so everything the read-out knows about a
    position arrives through attention.

    ``forward(symbols, colours)`` takes (N, T) long tensors and returns ``(logits,
    weights)``: a dict of logits by target name ("previous", "next": (N, T, vocab_size);
    "twin colour": (N, T, num_colours)) and the attention weights (N, H, T, T).
    """

    def __init__(self, d_model: int, num_heads: int, *, seq_len: int = 8, vocab_size: int = 8,
                 num_colours: int = 4):
        super().__init__()
        self.seq_len = _check_int(seq_len, "seq_len", 1)
        self.sizes = (_check_int(vocab_size, "vocab_size", 1),) * 2 + (
            _check_int(num_colours, "num_colours", 1),)
        self.symbol_embedding = nn.Embedding(vocab_size, d_model)
        self.colour_embedding = nn.Embedding(num_colours, d_model)
        self.position_embedding = nn.Embedding(seq_len, d_model)
        self.mha = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Linear(d_model, sum(self.sizes))

    def forward(self, symbols: torch.Tensor, colours: torch.Tensor):
        """symbols, colours (N, T) → ``({target: logits (N, T, C)}, weights (N, H, T, T))``."""
        for name, tensor in (("symbols", symbols), ("colours", colours)):
            if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2 \
                    or tensor.shape[1] != self.seq_len or tensor.dtype != torch.long:
                got = (tuple(tensor.shape), tensor.dtype) if isinstance(tensor, torch.Tensor) \
                    else type(tensor).__name__
                raise ValueError(f"{name} must be a long tensor of shape (N, T={self.seq_len}),"
                                 f" got {got}")
        x = (self.symbol_embedding(symbols) + self.colour_embedding(colours)
             + self.position_embedding.weight)  # (N, T, D)
        attended, weights = self.mha(x, x, x)  # (N, T, D), (N, H, T, T)
        logits = self.readout(attended).split(self.sizes, dim=-1)
        return dict(zip(TARGETS, logits)), weights


def _loss(model: TwinsModel, data: TwinsData) -> torch.Tensor:
    logits, _ = model(data.symbols, data.colours)
    return sum(F.cross_entropy(logits[name].flatten(0, 1), target.flatten())
               for name, target in data.targets().items())


def train_twins(model: TwinsModel, data: TwinsData, *, steps: int = 150,
                lr: float = 0.03) -> list[float]:
    """Train ``model`` on ``data`` by full-batch Adam; return the loss before each step.

    The loss is the sum of the three cross-entropies (one per target), averaged over the
    N · T positions. Nothing here is random, so the result depends only on the initial
    weights (seed before building the model).
    """
    steps = _check_int(steps, "steps", 0)
    if not isinstance(lr, numbers.Real) or not lr > 0:
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    model.train()
    for _ in range(steps):
        loss = _loss(model, data)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def twins_accuracy(model: TwinsModel, data: TwinsData) -> dict[str, float]:
    """The fraction of the N · T positions whose argmax prediction is right, by target.
    The model is run in eval mode, without gradients, and left in the mode it was in."""
    was_training = model.training
    try:
        with torch.no_grad():
            logits, _ = model.eval()(data.symbols, data.colours)
    finally:
        model.train(was_training)
    return {name: (logits[name].argmax(dim=-1) == target).float().mean().item()
            for name, target in data.targets().items()}


def relation_weights(weights: torch.Tensor, twin: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each head's mean attention weight on four keys: previous, next, twin and itself.

    Args:
        weights: attention weights of shape (N, H, T, T) (queries × keys).
        twin: (N, T) long, the position of each query's twin key.

    Returns:
        A dict with keys "previous", "next", "twin" and "self", each a (H,) tensor: the
        weight a query puts on key t − 1, t + 1 (cyclically), its twin, and itself,
        averaged over the N · T queries. A twin may sit next to its query, so the four
        keys can overlap and the four numbers need not sum to at most 1.
    """
    if not isinstance(weights, torch.Tensor) or weights.dim() != 4 \
            or weights.shape[-1] != weights.shape[-2]:
        got = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights)
        raise ValueError(f"weights must have shape (N, H, T, T), got {got}")
    N, H, T, _ = weights.shape
    if not isinstance(twin, torch.Tensor) or tuple(twin.shape) != (N, T):
        got = tuple(twin.shape) if isinstance(twin, torch.Tensor) else type(twin)
        raise ValueError(f"twin must have shape (N, T) = {(N, T)}, got {got}")
    positions = torch.arange(T, device=weights.device)  # (T,)
    keys = {"previous": (positions - 1) % T, "next": (positions + 1) % T, "self": positions}
    out = {name: weights[:, :, positions, key].mean(dim=(0, 2)) for name, key in keys.items()}
    index = twin[:, None, :, None].expand(N, H, T, 1)  # (N, H, T, 1)
    out["twin"] = weights.gather(-1, index).mean(dim=(0, 2, 3))  # (H,)
    return {name: out[name] for name in ("previous", "next", "twin", "self")}


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Mean entropy (in nats) of the attention distribution of each head.

    Args:
        weights: (B, H, Q, K) attention weights, each row a distribution over K keys.

    Returns:
        A (H,) tensor: −Σ_k w log w per query, averaged over B and Q. 0 means every query
        looks at a single key; log K means uniform weights.
    """
    if not isinstance(weights, torch.Tensor) or weights.dim() != 4:
        got = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights)
        raise ValueError(f"weights must have shape (B, H, Q, K), got {got}")
    return -torch.special.xlogy(weights, weights).sum(dim=-1).mean(dim=(0, 2))


def attention_flops(batch: int, num_queries: int, num_keys: int, d_model: int,
                    num_heads: int, head_dim: int | None = None) -> dict[str, int]:
    """Floating-point operations of one multi-head attention forward pass, stage by stage.

    A matrix product of (m, n) by (n, p) counts 2·m·n·p FLOPs (a multiply and an add), the
    convention of ``torch.utils.flop_counter``; biases, the scaling, the softmax and
    reshapes are not counted. With ``head_dim=None`` each head has D/H features (the
    standard split); pass another ``head_dim`` to price heads of any size, the output
    projection then mapping H·head_dim features back to D.

    Args:
        batch, num_queries, num_keys: B, Q and K.
        d_model: D, the feature size of queries, keys, values and output.
        num_heads: H.
        head_dim: features per head; D/H by default (D must then be divisible by H).

    Returns:
        A dict of ints: "projections" (Q, K, V), "scores" (Q·Kᵀ of every head),
        "weighted sum" (weights · V), "output" (W^O), "total", and "score entries"
        (B·H·Q·K, the number of softmax inputs: the one count that grows with H).
    """
    B = _check_int(batch, "batch", 1)
    Q = _check_int(num_queries, "num_queries", 1)
    K = _check_int(num_keys, "num_keys", 1)
    D = _check_int(d_model, "d_model", 1)
    H = _check_int(num_heads, "num_heads", 1)
    if head_dim is None:
        if D % H:
            raise ValueError(f"d_model={D} must be divisible by num_heads={H}, "
                             f"or pass head_dim")
        head_dim = D // H
    d_h = _check_int(head_dim, "head_dim", 1)
    flops = {
        "projections": 2 * B * (Q + 2 * K) * D * H * d_h,
        "scores": 2 * B * H * Q * K * d_h,
        "weighted sum": 2 * B * H * Q * K * d_h,
        "output": 2 * B * Q * H * d_h * D,
    }
    flops["total"] = sum(flops.values())
    flops["score entries"] = B * H * Q * K
    return flops
