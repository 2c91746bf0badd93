"""Multi-head attention: H scaled dot-product attentions side by side, on D/H features each.

``MultiHeadAttention(d_model, num_heads)`` projects queries, keys and values with the
``nn.Linear`` layers ``w_q``, ``w_k``, ``w_v`` (D → D), splits the D features into H heads
of D/H, runs scaled dot-product attention in every head at once, merges the heads back to
D features and projects them with ``w_o`` (D → D). It computes what
``nn.MultiheadAttention(d_model, num_heads, batch_first=True)`` computes, and
:meth:`MultiHeadAttention.from_torch` / :meth:`MultiHeadAttention.to_torch` move the
weights between the two. With ``num_kv_heads`` below H it is grouped-query attention
(Ainslie et al., 2023), or multi-query attention at ``num_kv_heads=1`` (Shazeer, 2019):
``w_k`` and ``w_v`` make only ``num_kv_heads`` heads of keys and values, each shared by a
group of H / ``num_kv_heads`` consecutive query heads, as
``F.scaled_dot_product_attention(..., enable_gqa=True)`` shares them. The attention itself
is the core of :func:`helpers.attention.scaled_dot_product_attention`, the same core every
attention module of the helpers calls. :class:`KVCache` holds the keys and values of the tokens
decoded so far; ``forward(..., cache=cache)`` uses and extends it.

Mask convention, as everywhere in the book: boolean, **True = may attend**, broadcastable
to the weights' shape (B, H, Q, K). A query whose keys are all masked gets all-zero
weights and a zero attention output (then ``w_o``'s bias), never NaN.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from helpers.attention import _sdpa
from helpers.checks import (
    check_bool,
    check_features,
    check_head_mask,
    check_instance,
    check_int,
    check_probability,
    check_tensor,
    require,
)

__all__ = ["MultiHeadAttention", "KVCache"]


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention with learned projections.

    ``MultiHeadAttention(d_model, num_heads, bias=True, dropout=0.0, num_kv_heads=None)``:
    D = ``d_model`` features split into H = ``num_heads`` heads of D/H features (D must be
    divisible by H). The projections are the ``nn.Linear`` attributes ``w_q``, ``w_k``,
    ``w_v`` and ``w_o``, each D → D, with biases when ``bias`` is True; ``dropout_p`` is
    the dropout probability of the weights (while training).

    ``num_kv_heads`` = H_kv (None: H) heads of keys and values, which must divide H:
    ``w_k`` and ``w_v`` are then D → H_kv·D/H, and query head h reads key-value head
    h // (H / H_kv), so each group of H / H_kv consecutive query heads shares one
    (grouped-query attention; H_kv = 1 is multi-query attention). The weights are still
    returned per query head, (B, H, Q, K).

    ``forward(queries, keys, values, mask=None, cache=None)`` takes queries (B, Q, D),
    keys (B, K, D), values (B, K, D) and an optional bool mask (True = may attend)
    broadcastable to (B, H, Q, K): (Q, K) for a causal mask, (B, 1, 1, K) for a padding
    mask (the (B, K) mask of :func:`helpers.masks.valid_length_mask` as
    ``mask[:, None, None, :]``), (B, 1, Q, K) or (B, H, Q, K). A 2-D mask is read as (Q, K)
    (one that could also be a (B, K) padding mask, because B == Q and Q != K, is refused), a
    3-D mask as (B, Q, K) or
    (B, 1, K), shared by the heads. It returns ``(out, weights)``: out (B, Q, D) and the
    weights of every head (B, H, Q, K); the returned weights are the undropped softmax.

    With a :class:`KVCache` as ``cache`` the new keys and values are appended to it and the
    queries attend to every cached position (K is then the cache's length): decoding one
    token at a time, ``mha(x_t, x_t, x_t, cache=cache)`` needs no mask. The cache holds
    the H_kv heads of keys and values, (B, H_kv, T, D/H), not H. It is for inference
    (under ``torch.no_grad()``).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        num_kv_heads: int | None = None,
    ):
        super().__init__()
        self.d_model = check_int(d_model, "d_model", minimum=1)
        self.num_heads = check_int(num_heads, "num_heads", minimum=1)
        require(
            self.d_model % self.num_heads == 0,
            f"d_model={self.d_model} must be divisible by num_heads={self.num_heads} "
            f"(each head gets d_model / num_heads features)",
        )
        self.head_dim = self.d_model // self.num_heads
        self.num_kv_heads = self.num_heads
        if num_kv_heads is not None:
            self.num_kv_heads = check_int(num_kv_heads, "num_kv_heads", minimum=1)
        require(
            self.num_heads % self.num_kv_heads == 0,
            f"num_kv_heads={self.num_kv_heads} must divide num_heads={self.num_heads} "
            f"(each key-value head serves num_heads / num_kv_heads query heads)",
        )
        self.dropout_p = check_probability(dropout)
        check_bool(bias, "bias")
        kv_features = self.num_kv_heads * self.head_dim  # H_kv · D/H
        self.w_q = nn.Linear(self.d_model, self.d_model, bias=bias)
        self.w_k = nn.Linear(self.d_model, kv_features, bias=bias)
        self.w_v = nn.Linear(self.d_model, kv_features, bias=bias)
        self.w_o = nn.Linear(self.d_model, self.d_model, bias=bias)

    def extra_repr(self) -> str:
        bias = self.w_o.bias is not None  # the constructor's arguments, as nn modules show them
        kv = "" if self.num_kv_heads == self.num_heads else f", num_kv_heads={self.num_kv_heads}"
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, bias={bias}, "
            f"dropout={self.dropout_p}{kv}"
        )

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, n·D/H) → (B, n, T, D/H): head h gets features h·D/H to (h+1)·D/H − 1;
        n = H for queries (D features), H_kv for keys and values. A reshape inside
        :meth:`forward`, unchecked: x must be (B, T, n·D/H)."""
        B, T, features = x.shape
        # contiguous: each head's (T, D/H) block is one matrix in memory, as batched matmuls want
        return x.view(B, T, features // self.head_dim, self.head_dim).transpose(1, 2).contiguous()

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, T, D/H) → (B, T, D): the inverse of :meth:`split_heads` (unchecked)."""
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.d_model)

    def _project(self, queries, keys, values):
        """``w_q(queries), w_k(keys), w_v(values)``; in self-attention (one tensor for all
        three) one (B, T, D) @ (D, 3D) product, as ``nn.MultiheadAttention`` does it."""
        if not (queries is keys and keys is values):
            return self.w_q(queries), self.w_k(keys), self.w_v(values)
        layers = (self.w_q, self.w_k, self.w_v)
        bias = None if self.w_q.bias is None else torch.cat([m.bias for m in layers])  # (3D,)
        weight = torch.cat([m.weight for m in layers])  # (3D, D), or (D + 2·H_kv·D/H, D)
        sizes = [m.out_features for m in layers]
        return F.linear(queries, weight, bias).split(sizes, dim=-1)

    def forward(self, queries, keys, values, mask=None, cache=None):
        """queries (B, Q, D), keys and values (B, K, D), bool mask broadcastable to
        (B, H, Q, K), optional :class:`KVCache` → ``(out (B, Q, D), weights (B, H, Q, K))``."""
        for name, x in (("queries", queries), ("keys", keys), ("values", values)):
            check_features(x, name, self.d_model, dtype=self.w_o.weight.dtype)
        require(
            queries.shape[0] == keys.shape[0] == values.shape[0]
            and keys.shape[1] == values.shape[1],
            f"queries, keys and values must have one batch size B, and keys and values one "
            f"number of keys K, got shapes {tuple(queries.shape)}, {tuple(keys.shape)} and "
            f"{tuple(values.shape)}",
        )
        check_instance(cache, KVCache, "cache", optional=True)
        num_keys = keys.shape[1] + (0 if cache is None else len(cache))
        shape = (queries.shape[0], self.num_heads, queries.shape[1], num_keys)
        mask = None if mask is None else check_head_mask(mask, "mask", shape)
        return self._forward(queries, keys, values, mask, cache)

    def _forward(self, queries, keys, values, mask=None, cache=None):
        """The unchecked core of :meth:`forward`."""
        # 1) project the queries, keys and values, then split D into H heads of D/H features
        q, k, v = (self.split_heads(x) for x in self._project(queries, keys, values))
        # q (B, H, Q, D/H), k and v (B, H_kv, K, D/H)
        if cache is not None:  # decoding: attend to every token so far
            k, v = cache.append(k, v)  # (B, H_kv, T, D/H) each: only H_kv heads are kept
        B, H, Q, K, group = *q.shape[:3], k.shape[-2], self.num_heads // self.num_kv_heads
        if group > 1:  # grouped-query: query head h reads key-value head h // group. The
            # group's queries become the rows of one head, so no key or value is copied
            q = q.reshape(B, self.num_kv_heads, group * Q, self.head_dim)  # (B, H_kv, G·Q, D/H)
            if mask is not None:
                mask = mask.expand(B, H, Q, K).reshape(B, self.num_kv_heads, group * Q, K)
        # 2) scaled dot-product attention in every head at once: scores / √(D/H), mask,
        #    softmax, weighted sum; the one core of helpers.attention
        heads, weights = _sdpa(q, k, v, mask, dropout_p=self.dropout_p, training=self.training)
        heads, weights = heads.view(B, H, Q, self.head_dim), weights.view(B, H, Q, K)
        # 3) merge the heads back to D features and project
        return self.w_o(self.merge_heads(heads)), weights  # (B, Q, D), (B, H, Q, K)

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """A ``MultiHeadAttention`` holding the weights (copied) of an ``nn.MultiheadAttention``.

        ``mha.in_proj_weight`` (3D, D) stacks W_q, W_k, W_v; ``in_proj_bias`` (3D,) their
        biases; ``out_proj`` is W_o. The module must use D features for queries, keys and
        values and neither ``add_bias_kv`` nor ``add_zero_attn``. Built on ``mha``'s device
        and dtype. Call it with ``batch_first=True`` inputs, (B, T, D).
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise ValueError(f"mha must be an nn.MultiheadAttention, got {type(mha).__name__}")
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError(
                "mha must have kdim == vdim == embed_dim and neither add_bias_kv "
                "nor add_zero_attn; this module has no such options"
            )
        bias = mha.in_proj_bias is not None
        weight = mha.in_proj_weight
        with torch.random.fork_rng(devices=[]):  # the weights are overwritten: do not let
            # their throwaway initialisation move the caller's random stream
            module = cls(mha.embed_dim, mha.num_heads, bias=bias, dropout=mha.dropout)
        module.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for i, linear in enumerate((module.w_q, module.w_k, module.w_v)):
                rows = slice(i * mha.embed_dim, (i + 1) * mha.embed_dim)
                linear.weight.copy_(weight[rows])  # (D, D)
                if bias:
                    linear.bias.copy_(mha.in_proj_bias[rows])  # (D,)
            module.w_o.weight.copy_(mha.out_proj.weight)
            if bias:
                module.w_o.bias.copy_(mha.out_proj.bias)
        return module.train(mha.training)

    def to_torch(self) -> nn.MultiheadAttention:
        """An ``nn.MultiheadAttention(batch_first=True)`` holding a copy of these weights.
        Only for ``num_kv_heads == num_heads``: ``nn.MultiheadAttention`` has no shared
        key-value heads."""
        require(
            self.num_kv_heads == self.num_heads,
            f"to_torch needs num_kv_heads == num_heads, got num_kv_heads={self.num_kv_heads} "
            f"and num_heads={self.num_heads}: nn.MultiheadAttention has no shared key-value "
            f"heads (use F.scaled_dot_product_attention(..., enable_gqa=True))",
        )
        weight = self.w_o.weight
        bias = self.w_o.bias is not None
        with torch.random.fork_rng(devices=[]):  # as in from_torch
            mha = nn.MultiheadAttention(
                self.d_model,
                self.num_heads,
                dropout=self.dropout_p,
                bias=bias,
                batch_first=True,
                device=weight.device,
                dtype=weight.dtype,
            )
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight]))
            mha.out_proj.weight.copy_(weight)
            if bias:
                mha.in_proj_bias.copy_(torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias]))
                mha.out_proj.bias.copy_(self.w_o.bias)
        return mha.train(self.training)


class KVCache:
    """The keys and values of the tokens decoded so far, per head: ``keys`` and ``values``
    of shape (B, H, T, D/H) (None while empty). :meth:`append` adds a step's (B, H, 1, D/H);
    :meth:`MultiHeadAttention.forward` calls it when given the cache, with its H_kv heads of
    keys and values (H here is then H_kv).

    For inference only: the buffers are written in place, which autograd cannot
    differentiate through, so appending tensors that require grad while grad is enabled is
    refused (decode under ``torch.no_grad()``).

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

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy keys and values (B, H, t, D/H) (floating, one dtype and device; t may be 0)
        into the next t positions; return all of them, (B, H, T, D/H) each (views of the
        cache's buffers)."""
        check_tensor(keys, "keys", "(B, H, t, D/H)", ndim=4, floating=True)
        check_tensor(values, "values", "(B, H, t, D/H)", ndim=4, floating=True)
        require(
            not (torch.is_grad_enabled() and (keys.requires_grad or values.requires_grad)),
            "the KV cache is for inference: keys and values that require grad are refused "
            "while grad is enabled (its buffers are written in place); decode under "
            "torch.no_grad()",
        )
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

        start, end = self._length, self._length + keys.shape[-2]
        self._grow(end, keys, values)
        self._keys[..., start:end, :] = keys  # a copy: the caller's tensors are not kept
        self._values[..., start:end, :] = values
        self._length = end
        return self.keys, self.values

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
