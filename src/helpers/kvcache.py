"""Autoregressive decoding with a KV cache, and without one for comparison.

At step t a decoder's new token attends to the keys and values of every earlier token.
Without a cache they are recomputed from the whole prefix at every step (O(t) projections
per step, O(T²) in all); :class:`KVCache` keeps them, so a step projects only the new token.
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
    of shape (B, H, T, D/H) (None while empty). :meth:`append` adds a step's (B, H, 1, D/H)."""

    def __init__(self):
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def append(self, keys: torch.Tensor,
               values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add keys and values (B, H, t, D/H); return all of them, (B, H, T, D/H) each."""
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=-2)  # (B, H, T, D/H)
            self.values = torch.cat([self.values, values], dim=-2)
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
    """Decode x (B, T, D) token by token with :func:`decode_step`; returns out (B, T, D)."""
    cache, outs = KVCache(), []
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
