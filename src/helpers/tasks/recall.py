"""The recall task of the positional-encoding chapter: length extrapolation, five schemes.

The task (a "passkey"-style associative recall): a sequence of T tokens, each a *key* (out
of ``num_keys``) and a *value* (out of ``num_values``). The last token is the query: a key
and no value. Exactly one earlier token, the *needle*, carries the query's key; the model
must output the needle's value. The needle sits ``distance`` positions before the query;
the other keys are drawn from the remaining ones, so the answer is found by content alone
and no position information is needed to solve it. Chance is ``1 / num_values``.

The model, :class:`RecallModel`, is one attention layer (the query token attends to every
token, itself included), a residual connection and a linear read-out. Its one varying
factor is the position scheme (:data:`SCHEMES`):

- ``"sinusoidal"``: the sinusoidal table added to the input (defined at every position);
- ``"learned"``: a learned table of ``train_len`` rows added to the input; positions past
  the table reuse its last row (clamped): the scheme has no row for them;
- ``"rope"``: queries and keys rotated (:func:`helpers.positional.rotary_embedding`);
- ``"alibi"``: the fixed bias ``−m_h (i − j)`` (:func:`helpers.relative.alibi_bias`);
- ``"t5"``: a learned bias per head and causal bucket
  (:func:`helpers.relative.relative_position_bucket`).

Shapes: N sequences, T positions, H heads, D features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from helpers.checks import check_instance, check_int, check_real, require
from helpers.positional import rotary_embedding, sinusoidal_encoding
from helpers.relative import alibi_bias, relative_position_bucket

__all__ = ["SCHEMES", "RecallData", "recall_task", "RecallModel", "train_recall", "recall_scores"]

SCHEMES = ("sinusoidal", "learned", "rope", "alibi", "t5")


@dataclass(frozen=True)
class RecallData:
    """A batch of the recall task.

    ``keys`` and ``values`` (N, T) are the inputs (the query's value is the blank id
    ``num_values``); ``answer`` (N,) is the needle's value; ``distance`` (N,) how far the
    needle sits before the query."""

    keys: torch.Tensor
    values: torch.Tensor
    answer: torch.Tensor
    distance: torch.Tensor


def recall_task(
    num_sequences: int,
    seq_len: int,
    *,
    min_distance: int = 1,
    max_distance: int | None = None,
    num_keys: int = 16,
    num_values: int = 8,
    generator: torch.Generator | None = None,
    seed: int = 0,
) -> RecallData:
    """``num_sequences`` sequences of ``seq_len`` tokens, the needle at a distance drawn
    uniformly from ``min_distance … max_distance`` (default ``seq_len − 1``) before the
    query. Draws from ``generator`` if given (a CPU ``torch.Generator``: the data are made
    on the CPU), else from a private one seeded by ``seed``."""
    num_sequences = check_int(num_sequences, "num_sequences", minimum=1)
    seq_len = check_int(seq_len, "seq_len", minimum=2)
    min_distance = check_int(min_distance, "min_distance", minimum=1)
    max_distance = seq_len - 1 if max_distance is None else check_int(max_distance, "max_distance")
    require(
        min_distance <= max_distance <= seq_len - 1,
        f"need 1 <= min_distance <= max_distance <= seq_len - 1, got {min_distance}, "
        f"{max_distance}, {seq_len}",
    )
    num_keys = check_int(num_keys, "num_keys", minimum=2)
    num_values = check_int(num_values, "num_values", minimum=2)
    check_instance(generator, torch.Generator, "generator", optional=True)
    if generator is None:
        generator = torch.Generator().manual_seed(check_int(seed, "seed"))
    n = num_sequences
    query = torch.randint(0, num_keys, (n,), generator=generator)  # (N,)
    shift = torch.randint(1, num_keys, (n, seq_len), generator=generator)  # never 0
    keys = (query[:, None] + shift) % num_keys  # (N, T): every key differs from the query's
    values = torch.randint(0, num_values, (n, seq_len), generator=generator)  # (N, T)
    distance = torch.randint(min_distance, max_distance + 1, (n,), generator=generator)
    needle = seq_len - 1 - distance  # (N,)
    rows = torch.arange(n)
    keys[rows, needle] = query
    keys[:, -1] = query
    values[:, -1] = num_values  # the query has no value
    return RecallData(keys, values, values[rows, needle].clone(), distance)


def _uniform(generator, shape, bound):
    return (torch.rand(shape, generator=generator) * 2 - 1) * bound


class RecallModel(nn.Module):
    """Several independently initialised copies of one attention layer for the recall task,
    trained side by side (one copy per seed), with the position scheme ``scheme``.

    ``RecallModel(scheme, seeds=(0, 1, 2, 3, 4), d_model=32, num_heads=2, train_len=16,
    num_keys=16, num_values=8, t5_buckets=8, t5_max_distance=16)``. Every parameter has a
    leading axis of S = len(seeds) copies; copy s is initialised from a generator seeded by
    ``seeds[s]`` (embeddings N(0, 1), weights U(±1/√D) as ``nn.Linear``; T5 biases 0), so
    the copies are S separate models computed in one pass (drawn on the CPU, so the same on
    every device; move the model with ``.to(device)``). ``forward(keys, values)`` takes
    long tensors (S, N, T) (or (N, T), shared; moved to the model's device) and returns the
    logits (S, N, num_values) at the last position; the attention weights of the last
    call, (S, N, H, T), stay in ``self.weights``.
    """

    def __init__(
        self,
        scheme: str,
        seeds=(0, 1, 2, 3, 4),
        d_model: int = 32,
        num_heads: int = 2,
        train_len: int = 16,
        num_keys: int = 16,
        num_values: int = 8,
        t5_buckets: int = 8,
        t5_max_distance: int = 16,
    ):
        super().__init__()
        require(scheme in SCHEMES, f"scheme must be one of {SCHEMES}, got {scheme!r}")
        self.seeds = tuple(check_int(seed, "seeds") for seed in seeds)
        require(len(self.seeds) >= 1, "seeds must hold at least one seed")
        self.scheme, self.num_heads = scheme, check_int(num_heads, "num_heads", minimum=1)
        self.d_model = check_int(d_model, "d_model", minimum=2)
        require(d_model % (2 * num_heads) == 0, "d_model must be a multiple of 2 * num_heads")
        self.train_len = check_int(train_len, "train_len", minimum=2)
        self.num_keys = check_int(num_keys, "num_keys", minimum=2)
        self.num_values = check_int(num_values, "num_values", minimum=2)
        self.t5_buckets, self.t5_max_distance = t5_buckets, t5_max_distance
        d, bound = d_model, 1 / math.sqrt(d_model)
        shapes = {
            "key_embedding": ((num_keys, d), None),
            "value_embedding": ((num_values + 1, d), None),  # + the blank
            "w_qkv": ((d, 3 * d), bound),
            "b_qkv": ((3 * d,), bound),
            "w_o": ((d, d), bound),
            "b_o": ((d,), bound),
            "w_out": ((d, num_values), bound),
            "b_out": ((num_values,), bound),
        }
        if scheme == "learned":
            shapes["positions"] = ((train_len, d), None)
        params = {name: [] for name in shapes}
        for seed in self.seeds:
            generator = torch.Generator().manual_seed(seed)
            for name, (shape, scale) in shapes.items():
                made = torch.randn(shape, generator=generator) if scale is None else None
                params[name].append(made if made is not None else _uniform(generator, shape, scale))
        for name, copies in params.items():
            setattr(self, name, nn.Parameter(torch.stack(copies)))  # (S, …)
        if scheme == "t5":
            self.t5_bias = nn.Parameter(torch.zeros(len(self.seeds), num_heads, t5_buckets))
        self.weights = None

    def _heads(self, x):  # (S, N, T, D) -> (S, N, H, T, D/H)
        s, n, t, _ = x.shape
        return x.reshape(s, n, t, self.num_heads, -1).transpose(2, 3)

    def forward(self, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        copies = len(self.seeds)
        if keys.dim() == 2:
            keys, values = keys.expand(copies, -1, -1), values.expand(copies, -1, -1)
        t, device = keys.shape[-1], self.key_embedding.device  # build on the model's device
        keys, values = keys.to(device), values.to(device)
        member = torch.arange(copies, device=device)[:, None, None]  # (S, 1, 1)
        x = self.key_embedding[member, keys] + self.value_embedding[member, values]  # (S, N, T, D)
        if self.scheme == "sinusoidal":
            x = x + sinusoidal_encoding(t, self.d_model, dtype=x.dtype).to(device)
        elif self.scheme == "learned":  # clamp: positions past the table reuse its last row
            clamped = torch.arange(t, device=device).clamp(max=self.train_len - 1)  # (T,)
            x = x + self.positions[:, None, clamped]
        qkv = x @ self.w_qkv[:, None] + self.b_qkv[:, None, None]  # (S, N, T, 3D)
        q, k, v = qkv.split(self.d_model, dim=-1)
        q, k, v = self._heads(q[:, :, -1:]), self._heads(k), self._heads(v)  # query: last token
        if self.scheme == "rope":
            q = rotary_embedding(q, torch.tensor([t - 1], device=device))
            k = rotary_embedding(k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (S, N, H, 1, T)
        if self.scheme == "alibi":
            bias = alibi_bias(self.num_heads, 1, t, device=device)  # (H, 1, T), float32
            scores = scores + bias.to(x.dtype)
        elif self.scheme == "t5":
            offsets = torch.arange(t, device=device) - (t - 1)  # key position − query position
            buckets = relative_position_bucket(
                offsets,
                bidirectional=False,
                num_buckets=self.t5_buckets,
                max_distance=self.t5_max_distance,
            )  # (T,)
            scores = scores + self.t5_bias[:, None, :, None, buckets]  # (S, 1, H, 1, T)
        weights = torch.softmax(scores, dim=-1)  # (S, N, H, 1, T)
        self.weights = weights[..., 0, :].detach()
        pooled = (weights @ v).flatten(2)  # (S, N, H·1·D/H) = (S, N, D)
        hidden = x[:, :, -1] + pooled @ self.w_o + self.b_o[:, None]
        return hidden @ self.w_out + self.b_out[:, None]  # (S, N, num_values)


def train_recall(
    model: RecallModel,
    *,
    steps: int = 300,
    batch_size: int = 64,
    lr: float = 0.01,
) -> list[float]:
    """Train every copy on its own fresh batches of length ``model.train_len`` (needle
    anywhere), with Adam; the data of copy s come from a generator seeded by
    ``1000 + model.seeds[s]``. Adam acts elementwise and the loss is a sum over copies, so
    each copy trains as it would alone. The batches are drawn on the CPU and moved to the
    model's device. Returns each copy's last batch loss."""
    check_instance(model, RecallModel, "model")
    steps, batch_size = check_int(steps, "steps"), check_int(batch_size, "batch_size", minimum=1)
    lr = check_real(lr, "lr", minimum=0, exclusive_minimum=True)
    generators = [torch.Generator().manual_seed(1000 + seed) for seed in model.seeds]
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = torch.full((len(generators),), float("nan"))
    for _ in range(steps):
        batches = [
            recall_task(
                batch_size,
                model.train_len,
                num_keys=model.num_keys,
                num_values=model.num_values,
                generator=g,
            )
            for g in generators
        ]
        keys = torch.stack([b.keys for b in batches])  # (S, N, T)
        values = torch.stack([b.values for b in batches])
        answer = torch.stack([b.answer for b in batches]).to(model.key_embedding.device)
        logits = model(keys, values)  # (S, N, V); answer (S, N), on the model's device
        losses = F.cross_entropy(logits.flatten(0, 1), answer.flatten(), reduction="none")
        losses = losses.reshape(answer.shape).mean(1)  # (S,)
        optimizer.zero_grad()
        losses.sum().backward()
        optimizer.step()
    model.eval()
    return losses.tolist()


def recall_scores(model: RecallModel, data: RecallData) -> tuple[list[float], list[float]]:
    """Each copy's accuracy and mean cross-entropy (nats) on ``data`` (shared by all; moved
    to the model's device)."""
    check_instance(model, RecallModel, "model")
    check_instance(data, RecallData, "data")
    with torch.no_grad():
        logits = model(data.keys, data.values)  # (S, N, V)
    answer = data.answer.to(logits.device).expand(len(model.seeds), -1)
    accuracy = (logits.argmax(-1) == answer).float().mean(1)
    loss = F.cross_entropy(logits.transpose(1, 2), answer, reduction="none").mean(1)
    return accuracy.tolist(), loss.tolist()
