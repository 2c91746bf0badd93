"""Autoregressive decoding with a KV cache, and without one for comparison.

At step t a decoder's new token attends to the keys and values of every earlier token.
Without a cache they are recomputed from the whole prefix at every step (O(t) projections
per step, O(T²) in all); :class:`KVCache` keeps them, in buffers preallocated and filled in
place, so a step projects only the new token. Works with
:class:`helpers.multihead.MultiHeadAttention`; shapes use B, H, T, D. The timings of the
two are measured by :func:`helpers.measure.time_decoding`.
"""

from __future__ import annotations

import torch

from helpers.attention import scaled_dot_product_attention
from helpers.checks import check_int, check_tensor, require
from helpers.masks import causal_mask
from helpers.multihead import MultiHeadAttention

__all__ = ["KVCache", "decode_step", "decode_with_cache", "decode_without_cache"]


class KVCache:
    """The keys and values of the tokens decoded so far, per head: ``keys`` and ``values``
    of shape (B, H, T, D/H) (None while empty). :meth:`append` adds a step's (B, H, 1, D/H).

    The cache owns two preallocated buffers of shape (B, H, capacity, D/H) and writes each
    step into the next free positions: no ``torch.cat`` of the whole cache per step. When
    full, the capacity doubles (one copy, so O(1) amortised per token); give
    ``capacity`` = the number of tokens to decode to avoid even that. The appended tensors
    are copied, never kept: changing them afterwards does not change the cache. Every
    append must match the first one's B, H, feature sizes, dtype and device."""

    def __init__(self, capacity: int | None = None):
        if capacity is not None:
            capacity = check_int(capacity, "capacity", minimum=1)
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
        return None if self._keys is None else self._keys[..., : self._length, :]

    @property
    def values(self) -> torch.Tensor | None:
        """The cached values (B, H, T, D/H), a view of the buffer; None while empty."""
        return None if self._values is None else self._values[..., : self._length, :]

    def _check(self, keys, values) -> None:
        check_tensor(keys, "keys", "(B, H, t, D/H)", ndim=4, floating=True)
        check_tensor(values, "values", "(B, H, t, D/H)", ndim=4, floating=True)
        if keys.shape[:3] != values.shape[:3]:
            raise ValueError(
                f"keys and values need the same (B, H, t), got keys "
                f"{tuple(keys.shape)} and values {tuple(values.shape)}"
            )
        if keys.dtype != values.dtype or keys.device != values.device:
            raise ValueError(
                f"keys and values need the same dtype and device, got "
                f"{keys.dtype} on {keys.device} and {values.dtype} on "
                f"{values.device}"
            )
        if self._keys is not None:
            for name, t, buffer in (("keys", keys, self._keys), ("values", values, self._values)):
                if t.shape[:2] != buffer.shape[:2] or t.shape[-1] != buffer.shape[-1]:
                    raise ValueError(
                        f"{name} of shape {tuple(t.shape)} do not fit the cache "
                        f"(B, H, ·, D/H) = {tuple(buffer.shape[:2])}, "
                        f"{buffer.shape[-1]}"
                    )
                if t.dtype != buffer.dtype or t.device != buffer.device:
                    raise ValueError(
                        f"{name} of dtype {t.dtype} on {t.device} do not fit the "
                        f"cache, which holds {buffer.dtype} on {buffer.device} "
                        f"(a copy would convert them silently)"
                    )

    def _grow(self, needed: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Make room for ``needed`` positions: allocate, or reallocate at double size."""
        if needed <= self.capacity and self._keys is not None:
            return
        capacity = max(needed, 2 * self.capacity, self._capacity_hint or 0)
        new_keys = keys.new_empty((*keys.shape[:2], capacity, keys.shape[-1]))
        new_values = values.new_empty((*values.shape[:2], capacity, values.shape[-1]))
        if self._keys is not None:  # copy what is cached (once per doubling)
            new_keys[..., : self._length, :] = self.keys
            new_values[..., : self._length, :] = self.values
        self._keys, self._values = new_keys, new_values

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy keys and values (B, H, t, D/H) (floating, one dtype and device; t may be 0)
        into the next t positions; return all of them, (B, H, T, D/H) each (views of the
        cache's buffers)."""
        self._check(keys, values)
        start, end = self._length, self._length + keys.shape[-2]
        self._grow(end, keys, values)
        self._keys[..., start:end, :] = keys  # a copy: the caller's tensors are not kept
        self._values[..., start:end, :] = values
        self._length = end
        return self.keys, self.values


def _check_mha(mha) -> None:
    require(
        isinstance(mha, MultiHeadAttention),
        f"mha must be a helpers.multihead.MultiHeadAttention, got {type(mha).__name__}",
    )


def _check_tokens(x, name: str, mha: MultiHeadAttention, shape: str, ndim: int = 3) -> None:
    """x (B, T, D): floating, D = mha.d_model, the dtype of mha's parameters."""
    check_tensor(x, name, shape, ndim=ndim, floating=True, dtype=mha.w_o.weight.dtype)
    if x.shape[-1] != mha.d_model:
        raise ValueError(
            f"{name} must have d_model={mha.d_model} features in the last axis, "
            f"got shape {tuple(x.shape)}"
        )


def decode_step(
    mha, x_t: torch.Tensor, cache: KVCache | None = None
) -> tuple[torch.Tensor, KVCache]:
    """One step of causal self-attention for the new token x_t (B, 1, D) with ``mha`` (a
    :class:`helpers.multihead.MultiHeadAttention`): only x_t is projected; its key and value
    join the cache and its query attends to all T cached positions (itself included, so no
    mask is needed). Dropout is not applied (decode in eval mode).
    Returns ``(out (B, 1, D), cache)``."""
    _check_mha(mha)
    if not isinstance(x_t, torch.Tensor) or x_t.dim() != 3 or x_t.shape[1] != 1:
        raise ValueError(
            f"x_t must have shape (B, 1, D), got "
            f"{tuple(x_t.shape) if isinstance(x_t, torch.Tensor) else type(x_t)}"
        )
    _check_tokens(x_t, "x_t", mha, "(B, 1, D)")
    require(
        cache is None or isinstance(cache, KVCache),
        f"cache must be a KVCache or None, got {type(cache).__name__}",
    )
    cache = KVCache() if cache is None else cache
    q = mha.split_heads(mha.w_q(x_t))  # (B, H, 1, D/H)
    keys, values = cache.append(mha.split_heads(mha.w_k(x_t)), mha.split_heads(mha.w_v(x_t)))
    heads, _ = scaled_dot_product_attention(q, keys, values)  # (B, H, 1, D/H)
    return mha.w_o(mha.merge_heads(heads)), cache  # (B, 1, D)


def decode_with_cache(mha, x: torch.Tensor) -> torch.Tensor:
    """Decode x (B, T, D) token by token with :func:`decode_step` and a cache preallocated
    for T tokens; returns out (B, T, D) (empty for T = 0)."""
    _check_mha(mha)
    _check_tokens(x, "x", mha, "(B, T, D)")
    cache, outs = KVCache(capacity=max(x.shape[1], 1)), []
    for t in range(x.shape[1]):
        out, cache = decode_step(mha, x[:, t : t + 1], cache)
        outs.append(out)
    return torch.cat(outs, dim=1) if outs else x.new_zeros(x.shape)  # (B, T, D)


def decode_without_cache(mha, x: torch.Tensor) -> torch.Tensor:
    """Decode x (B, T, D) without a cache: at step t, causal self-attention over the whole
    prefix x[:, :t+1] is recomputed and its last row kept. Returns out (B, T, D) (empty for
    T = 0)."""
    _check_mha(mha)
    _check_tokens(x, "x", mha, "(B, T, D)")
    outs = []
    for t in range(1, x.shape[1] + 1):
        prefix = x[:, :t]  # (B, t, D)
        out, _ = mha(prefix, prefix, prefix, causal_mask(t, device=x.device))
        outs.append(out[:, -1:])
    return torch.cat(outs, dim=1) if outs else x.new_zeros(x.shape)  # (B, T, D)
