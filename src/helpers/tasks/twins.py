"""The twins task: a toy task on which the heads of one multi-head attention layer specialise,
its model, its training loop, and a summary of what each head attends to.

The *twins* task: a sequence of T = 8 items, each a symbol and a colour. Every symbol occurs
exactly twice (its two occurrences are *twins*); colours are drawn independently. At every
position a model must report three things: the symbol just before it, the symbol just after
it (both cyclically), and the colour of its twin. The first two are found by *position*
(offset −1 and +1), the third by *content* (the key with the same symbol), so a model with
one attention layer needs three sharp lookups at once, one per head.

Shapes use the book's letters: N sequences (the batch B), T positions, H heads, D features.
The entropy and the FLOP count of attention are in :mod:`helpers.measure`
(``attention_entropy``, ``attention_flops``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from helpers.checks import (
    check_bool,
    check_instance,
    check_int,
    check_real,
    check_tensor,
    require,
)
from helpers.multihead import MultiHeadAttention

__all__ = [
    "TARGETS",
    "TwinsData",
    "twins_task",
    "TwinsModel",
    "train_twins",
    "twins_accuracy",
    "relation_weights",
]

TARGETS = ("previous", "next", "twin colour")


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


def twins_task(
    num_sequences: int,
    *,
    seq_len: int = 8,
    vocab_size: int = 8,
    num_colours: int = 4,
    seed: int = 0,
) -> TwinsData:
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
    num_sequences = check_int(num_sequences, "num_sequences", 1)
    seq_len = check_int(seq_len, "seq_len", 4)
    if seq_len % 2:
        raise ValueError(f"seq_len must be even (every symbol occurs twice), got {seq_len}")
    vocab_size = check_int(vocab_size, "vocab_size", seq_len // 2)
    num_colours = check_int(num_colours, "num_colours", 1)
    generator = torch.Generator().manual_seed(check_int(seed, "seed", 0))
    chosen = torch.stack(
        [
            torch.randperm(vocab_size, generator=generator)[: seq_len // 2]
            for _ in range(num_sequences)
        ]
    )  # (N, T/2)
    order = torch.stack(
        [torch.randperm(seq_len, generator=generator) for _ in range(num_sequences)]
    )  # (N, T)
    symbols = chosen.repeat(1, 2).gather(1, order)  # (N, T), each symbol twice
    colours = torch.randint(num_colours, (num_sequences, seq_len), generator=generator)
    same = symbols[:, :, None] == symbols[:, None, :]  # (N, T, T)
    same &= ~torch.eye(seq_len, dtype=torch.bool)  # a position is not its own twin
    twin = same.int().argmax(dim=-1)  # (N, T)
    return TwinsData(
        symbols=symbols,
        colours=colours,
        twin=twin,
        previous=symbols.roll(1, dims=1),
        next=symbols.roll(-1, dims=1),
        twin_colour=colours.gather(1, twin),
    )


class TwinsModel(nn.Module):
    """Embeddings, one multi-head self-attention layer and a linear read-out, nothing else.

    ``TwinsModel(d_model, num_heads, seq_len=8, vocab_size=8, num_colours=4, positions=True)``:
    the input at position t is the sum of a learned symbol, colour and position embedding (D
    each; with ``positions=False`` there is no position embedding, and the model is permutation
    equivariant: permuting the positions of the input permutes those of every output);
    :class:`helpers.multihead.MultiHeadAttention` (attribute ``mha``) attends over the
    sequence; a linear layer (``readout``) turns each output into logits for the three
    targets. There is no residual connection, so everything the read-out knows about a
    position arrives through attention.

    ``forward(symbols, colours)`` takes (N, T) long tensors and returns ``(logits,
    weights)``: a dict of logits by target name ("previous", "next": (N, T, vocab_size);
    "twin colour": (N, T, num_colours)) and the attention weights (N, H, T, T).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        seq_len: int = 8,
        vocab_size: int = 8,
        num_colours: int = 4,
        positions: bool = True,
    ):
        super().__init__()
        d_model = check_int(d_model, "d_model", 1)
        num_heads = check_int(num_heads, "num_heads", 1)
        self.seq_len = check_int(seq_len, "seq_len", 1)
        vocab_size = check_int(vocab_size, "vocab_size", 1)
        num_colours = check_int(num_colours, "num_colours", 1)
        self.sizes = (vocab_size,) * 2 + (num_colours,)
        self.symbol_embedding = nn.Embedding(vocab_size, d_model)
        self.colour_embedding = nn.Embedding(num_colours, d_model)
        self.position_embedding = (
            nn.Embedding(seq_len, d_model) if check_bool(positions, "positions") else None
        )
        self.mha = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Linear(d_model, sum(self.sizes))

    def forward(self, symbols: torch.Tensor, colours: torch.Tensor):
        """symbols, colours (N, T) → ``({target: logits (N, T, C)}, weights (N, H, T, T))``."""
        for name, tensor, size in (
            ("symbols", symbols, self.sizes[0]),
            ("colours", colours, self.sizes[2]),
        ):
            check_tensor(tensor, name, f"(N, T={self.seq_len})", ndim=2, size={1: self.seq_len})
            require(
                tensor.dtype == torch.long,
                f"{name} must be a long tensor of shape (N, T={self.seq_len}), got dtype "
                f"{tensor.dtype}",
            )
            if tensor.numel() and not (int(tensor.min()) >= 0 and int(tensor.max()) < size):
                raise ValueError(
                    f"{name} must hold ids in [0, {size}), got ids from "
                    f"{int(tensor.min())} to {int(tensor.max())}"
                )
        require(
            symbols.shape == colours.shape,
            f"symbols and colours must have the same shape (N, T), got "
            f"{tuple(symbols.shape)} and {tuple(colours.shape)}",
        )
        x = self.symbol_embedding(symbols) + self.colour_embedding(colours)  # (N, T, D)
        if self.position_embedding is not None:
            x = x + self.position_embedding.weight  # (T, D), broadcast over the N sequences
        attended, weights = self.mha(x, x, x)  # (N, T, D), (N, H, T, T)
        logits = self.readout(attended).split(self.sizes, dim=-1)
        return dict(zip(TARGETS, logits)), weights


def _loss(model: TwinsModel, data: TwinsData) -> torch.Tensor:
    device = next(model.parameters()).device  # the data go where the model is
    logits, _ = model(data.symbols.to(device), data.colours.to(device))
    return sum(
        F.cross_entropy(logits[name].flatten(0, 1), target.to(device).flatten())
        for name, target in data.targets().items()
    )


def train_twins(
    model: TwinsModel, data: TwinsData, *, steps: int = 150, lr: float = 0.03
) -> list[float]:
    """Train ``model`` on ``data`` by full-batch Adam; return the loss before each step.

    The loss is the sum of the three cross-entropies (one per target), averaged over the
    N · T positions. Nothing here is random, so the result depends only on the initial
    weights (seed before building the model).
    """
    check_instance(model, TwinsModel, "model")
    check_instance(data, TwinsData, "data")
    steps = check_int(steps, "steps", 0)
    lr = check_real(lr, "lr", minimum=0, exclusive_minimum=True)
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
    check_instance(model, TwinsModel, "model")
    check_instance(data, TwinsData, "data")
    was_training = model.training
    try:
        with torch.no_grad():
            device = next(model.parameters()).device
            logits, _ = model.eval()(data.symbols.to(device), data.colours.to(device))
    finally:
        model.train(was_training)
    return {
        name: (logits[name].argmax(dim=-1).cpu() == target.cpu()).float().mean().item()
        for name, target in data.targets().items()
    }


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
    check_tensor(weights, "weights", "(N, H, T, T)", ndim=4, floating=True)
    require(
        weights.shape[-1] == weights.shape[-2],
        f"weights must have shape (N, H, T, T), got shape {tuple(weights.shape)}",
    )
    N, H, T, _ = weights.shape
    check_tensor(twin, "twin", f"(N, T) = {(N, T)}", ndim=2)
    require(
        tuple(twin.shape) == (N, T),
        f"twin must have shape (N, T) = {(N, T)}, got shape {tuple(twin.shape)}",
    )
    require(
        twin.dtype == torch.long,
        f"twin must be a long tensor of key positions, got dtype {twin.dtype}",
    )
    if twin.numel() and not (int(twin.min()) >= 0 and int(twin.max()) < T):
        raise ValueError(
            f"twin must hold key positions in [0, {T}), got positions from "
            f"{int(twin.min())} to {int(twin.max())}"
        )
    positions = torch.arange(T, device=weights.device)  # (T,)
    keys = {"previous": (positions - 1) % T, "next": (positions + 1) % T, "self": positions}
    out = {name: weights[:, :, positions, key].mean(dim=(0, 2)) for name, key in keys.items()}
    index = twin[:, None, :, None].expand(N, H, T, 1)  # (N, H, T, 1)
    out["twin"] = weights.gather(-1, index).mean(dim=(0, 2, 3))  # (H,)
    return {name: out[name] for name in ("previous", "next", "twin", "self")}
