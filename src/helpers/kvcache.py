"""Autoregressive decoding with a KV cache, and without one for comparison.

At step t a decoder's new token attends to the keys and values of every earlier token.
Without a cache they are recomputed from the whole prefix at every step (O(t) projections
per step, O(T²) in all); a :class:`helpers.multihead.KVCache` keeps them, in buffers
preallocated and filled in place, so a step projects only the new token. The cache is a
parameter of :meth:`helpers.multihead.MultiHeadAttention.forward` (one implementation of
attention, as in LLMs-from-scratch); this module decodes with it, for inference only
(under ``torch.no_grad()``). Shapes use B, H, T, D. The timings of the two are measured
by :func:`helpers.measure.time_decoding`.
"""

from __future__ import annotations

import torch

from helpers.checks import check_features, check_instance, check_tensor
from helpers.masks import causal_mask
from helpers.multihead import KVCache, MultiHeadAttention

__all__ = ["decode_step", "decode_with_cache", "decode_without_cache"]


@torch.no_grad()
def decode_step(
    mha: MultiHeadAttention, x_t: torch.Tensor, cache: KVCache | None = None
) -> tuple[torch.Tensor, KVCache]:
    """One step of causal self-attention for the new token x_t (B, 1, D) with ``mha`` (a
    :class:`helpers.multihead.MultiHeadAttention`): only x_t is projected; its key and value
    join the cache (:class:`helpers.multihead.KVCache`, a new one if None) and its query
    attends to all T cached positions (itself included, so no mask is needed). It is
    ``mha(x_t, x_t, x_t, cache=cache)`` under ``torch.no_grad()`` (the cache is for
    inference), in the module's mode: call ``mha.eval()`` first. Returns ``(out (B, 1, D), cache)``."""
    check_instance(mha, MultiHeadAttention, "mha")
    check_features(x_t, "x_t", mha.d_model, "(B, 1, D)", dtype=mha.w_o.weight.dtype)
    check_tensor(x_t, "x_t", "(B, 1, D)", size={1: 1})
    cache = KVCache() if cache is None else cache
    out, _ = mha(x_t, x_t, x_t, cache=cache)  # (B, 1, D)
    return out, cache


@torch.no_grad()
def decode_with_cache(mha: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """Decode x (B, T, D) token by token with a :class:`helpers.multihead.KVCache`
    preallocated for T tokens; returns out (B, T, D) (empty for T = 0). Inference: runs
    under ``torch.no_grad()`` and in eval mode (the module's mode is restored)."""
    check_instance(mha, MultiHeadAttention, "mha")
    check_features(x, "x", mha.d_model, dtype=mha.w_o.weight.dtype)
    cache, outs, was_training = KVCache(capacity=max(x.shape[1], 1)), [], mha.training
    try:
        mha.eval()
        for t in range(x.shape[1]):
            out, _ = mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)
            outs.append(out)  # (B, 1, D)
    finally:
        mha.train(was_training)
    return torch.cat(outs, dim=1) if outs else x.new_zeros(x.shape)  # (B, T, D)


def decode_without_cache(mha: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """Decode x (B, T, D) without a cache: at step t, causal self-attention over the whole
    prefix x[:, :t+1] is recomputed and its last row kept. Returns out (B, T, D) (empty for
    T = 0). In eval mode, as :func:`decode_with_cache` (the module's mode is restored)."""
    check_instance(mha, MultiHeadAttention, "mha")
    check_features(x, "x", mha.d_model, dtype=mha.w_o.weight.dtype)
    outs, was_training = [], mha.training
    try:
        mha.eval()
        for t in range(1, x.shape[1] + 1):
            prefix = x[:, :t]  # (B, t, D)
            out, _ = mha(prefix, prefix, prefix, causal_mask(t, device=x.device)[None])
            outs.append(out[:, -1:])
    finally:
        mha.train(was_training)
    return torch.cat(outs, dim=1) if outs else x.new_zeros(x.shape)  # (B, T, D)
