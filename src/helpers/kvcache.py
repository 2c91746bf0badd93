"""Autoregressive decoding with a KV cache, and without one for comparison.

At step t a decoder's new token attends to the keys and values of every earlier token.
Without a cache they are recomputed from the whole prefix at every step (O(t) projections
per step, O(T²) in all); :class:`KVCache` keeps them, in buffers preallocated and filled in
place, so a step projects only the new token.
Works with :class:`helpers.attention.MultiHeadAttention`; shapes use B, H, T, D.
"""

from __future__ import annotations

import math
import time

import torch

from helpers.attention import scaled_dot_product_attention
from helpers.masks import causal_mask

__all__ = ["KVCache", "decode_step", "decode_with_cache", "decode_without_cache",
           "time_decoding"]


class KVCache:
    """The keys and values of the tokens decoded so far, per head: ``keys`` and ``values``
    of shape (B, H, T, D/H) (None while empty). :meth:`append` adds a step's (B, H, 1, D/H).

    The cache owns two preallocated buffers of shape (B, H, capacity, D/H) and writes each
    step into the next free positions: no ``torch.cat`` of the whole cache per step. When
    full, the capacity doubles (one copy, so O(1) amortised per token); give
    ``capacity`` = the number of tokens to decode to avoid even that. The appended tensors
    are copied, never kept: changing them afterwards does not change the cache."""

    def __init__(self, capacity: int | None = None):
        if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, int)
                                     or capacity < 1):
            raise ValueError(f"capacity must be a positive integer or None, got {capacity!r}")
        self._capacity_hint = capacity
        self._keys: torch.Tensor | None = None  # (B, H, capacity, D/H) buffer
        self._values: torch.Tensor | None = None
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def capacity(self) -> int:
        """Positions allocated so far (0 before the first append)."""
        return 0 if self._keys is None else self._keys.shape[-2]

    @property
    def keys(self) -> torch.Tensor | None:
        """The cached keys (B, H, T, D/H), a view of the buffer; None while empty."""
        return None if self._keys is None else self._keys[..., :self._length, :]

    @property
    def values(self) -> torch.Tensor | None:
        """The cached values (B, H, T, D/H), a view of the buffer; None while empty."""
        return None if self._values is None else self._values[..., :self._length, :]

    def _check(self, keys, values) -> None:
        for name, t in (("keys", keys), ("values", values)):
            if not isinstance(t, torch.Tensor) or t.dim() != 4:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"{name} must be a tensor (B, H, t, D/H), got {got}")
        if keys.shape[:3] != values.shape[:3]:
            raise ValueError(f"keys and values need the same (B, H, t), got keys "
                             f"{tuple(keys.shape)} and values {tuple(values.shape)}")
        if self._keys is not None:
            for name, t, buffer in (("keys", keys, self._keys), ("values", values, self._values)):
                if t.shape[:2] != buffer.shape[:2] or t.shape[-1] != buffer.shape[-1]:
                    raise ValueError(f"{name} of shape {tuple(t.shape)} do not fit the cache "
                                     f"(B, H, ·, D/H) = {tuple(buffer.shape[:2])}, "
                                     f"{buffer.shape[-1]}")

    def _grow(self, needed: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Make room for ``needed`` positions: allocate, or reallocate at double size."""
        if needed <= self.capacity:
            return
        capacity = max(needed, 2 * self.capacity, self._capacity_hint or 0)
        new_keys = keys.new_empty((*keys.shape[:2], capacity, keys.shape[-1]))
        new_values = values.new_empty((*values.shape[:2], capacity, values.shape[-1]))
        if self._keys is not None:  # copy what is cached (once per doubling)
            new_keys[..., :self._length, :] = self.keys
            new_values[..., :self._length, :] = self.values
        self._keys, self._values = new_keys, new_values

    def append(self, keys: torch.Tensor,
               values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy keys and values (B, H, t, D/H) into the next t positions; return all of
        them, (B, H, T, D/H) each (views of the cache's buffers)."""
        self._check(keys, values)
        start, end = self._length, self._length + keys.shape[-2]
        self._grow(end, keys, values)
        self._keys[..., start:end, :] = keys  # a copy: the caller's tensors are not kept
        self._values[..., start:end, :] = values
        self._length = end
        return self.keys, self.values


def decode_step(mha, x_t: torch.Tensor,
                cache: KVCache | None = None) -> tuple[torch.Tensor, KVCache]:
    """One step of causal self-attention for the new token x_t (B, 1, D) with ``mha`` (a
    :class:`helpers.attention.MultiHeadAttention`): only x_t is projected; its key and value
    join the cache and its query attends to all T cached positions (itself included, so no
    mask is needed). Dropout is not applied (decode in eval mode).
    Returns ``(out (B, 1, D), cache)``."""
    if not isinstance(x_t, torch.Tensor) or x_t.dim() != 3 or x_t.shape[1] != 1:
        raise ValueError(f"x_t must have shape (B, 1, D), got "
                         f"{tuple(x_t.shape) if isinstance(x_t, torch.Tensor) else type(x_t)}")
    cache = KVCache() if cache is None else cache
    q = mha.split_heads(mha.w_q(x_t))  # (B, H, 1, D/H)
    keys, values = cache.append(mha.split_heads(mha.w_k(x_t)), mha.split_heads(mha.w_v(x_t)))
    heads, _ = scaled_dot_product_attention(q, keys, values)  # (B, H, 1, D/H)
    return mha.w_o(mha.merge_heads(heads)), cache  # (B, 1, D)


def decode_with_cache(mha, x: torch.Tensor) -> torch.Tensor:
    """Decode x (B, T, D) token by token with :func:`decode_step` and a cache preallocated
    for T tokens; returns out (B, T, D)."""
    cache, outs = KVCache(capacity=max(x.shape[1], 1)), []
    for t in range(x.shape[1]):
        out, cache = decode_step(mha, x[:, t:t + 1], cache)
        outs.append(out)
    return torch.cat(outs, dim=1)  # (B, T, D)


def decode_without_cache(mha, x: torch.Tensor) -> torch.Tensor:
    """Decode x (B, T, D) without a cache: at step t, causal self-attention over the whole
    prefix x[:, :t+1] is recomputed and its last row kept. Returns out (B, T, D)."""
    outs = []
    for t in range(1, x.shape[1] + 1):
        prefix = x[:, :t]  # (B, t, D)
        out, _ = mha(prefix, prefix, prefix, causal_mask(t, device=x.device))
        outs.append(out[:, -1:])
    return torch.cat(outs, dim=1)  # (B, T, D)


def time_decoding(mha, lengths, batch=1, repeats=3, seed=0) -> list[dict]:
    """Seconds to decode T tokens with and without the cache (best of ``repeats``
    alternating runs, under ``no_grad``) for each T in ``lengths``. Returns
    ``[{"length", "cache_s", "recompute_s", "speedup"}, …]``; prints nothing."""
    rows = []
    for length in lengths:
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(batch, length, mha.d_model, generator=gen, dtype=mha.w_o.weight.dtype)
        best = {"cache_s": math.inf, "recompute_s": math.inf}
        with torch.no_grad():
            for _ in range(repeats):  # alternate, so that a busy machine slows both alike
                for name, fn in (("cache_s", decode_with_cache),
                                 ("recompute_s", decode_without_cache)):
                    start = time.perf_counter()
                    fn(mha, x)
                    best[name] = min(best[name], time.perf_counter() - start)
        rows.append({"length": length, **best, "speedup": best["recompute_s"] / best["cache_s"]})
    return rows
