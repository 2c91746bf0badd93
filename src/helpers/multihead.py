"""Multi-head attention: H scaled dot-product attentions side by side, on D/H features each.

``MultiHeadAttention(d_model, num_heads)`` projects queries, keys and values with the
``nn.Linear`` layers ``w_q``, ``w_k``, ``w_v`` (D → D), splits the D features into H heads
of D/H, runs scaled dot-product attention in every head at once, merges the heads back to
D features and projects them with ``w_o`` (D → D). It computes what
``nn.MultiheadAttention(d_model, num_heads, batch_first=True)`` computes, and
:meth:`MultiHeadAttention.from_torch` / :meth:`MultiHeadAttention.to_torch` move the
weights between the two. The attention itself is :func:`helpers.attention.scaled_dot_product_attention`,
the same core every attention module of the helpers calls.

Mask convention, as everywhere in the book: boolean, **True = may attend**, broadcastable
to the weights' shape (B, H, Q, K). A query whose keys are all masked gets all-zero
weights and a zero attention output (then ``w_o``'s bias), never NaN.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from helpers.attention import scaled_dot_product_attention
from helpers.checks import check_bool, check_head_mask, check_int, check_probability, check_tensor

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention with learned projections.

    ``MultiHeadAttention(d_model, num_heads, bias=True, dropout=0.0)``: D = ``d_model``
    features split into H = ``num_heads`` heads of D/H features (D must be divisible by
    H). The projections are the ``nn.Linear`` attributes ``w_q``, ``w_k``, ``w_v`` and
    ``w_o``, each D → D, with biases when ``bias`` is True.

    ``forward(queries, keys, values, mask=None)`` takes queries (B, Q, D), keys (B, K, D),
    values (B, K, D) and an optional bool mask (True = may attend) broadcastable to
    (B, H, Q, K): (Q, K) for a causal mask, (B, 1, 1, K) for a padding mask (the (B, K)
    mask of :func:`helpers.masks.valid_length_mask` as ``mask[:, None, None, :]``),
    (B, 1, Q, K) or (B, H, Q, K); a 2-D mask is always read as (Q, K), so never pass a
    (B, K) mask as it is, and a 3-D mask always as (B, Q, K) or (B, 1, K), shared by the
    heads. It returns ``(out, weights)``: out (B, Q, D) and the
    weights of every head (B, H, Q, K). ``dropout`` (while training) drops weights used for
    ``out``; the returned weights are the undropped softmax.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, dropout: float = 0.0):
        super().__init__()
        self.d_model = check_int(d_model, "d_model", minimum=1)
        self.num_heads = check_int(num_heads, "num_heads", minimum=1)
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by num_heads="
                f"{self.num_heads} (each head gets d_model / num_heads features)"
            )
        self.head_dim = self.d_model // self.num_heads
        self.dropout = check_probability(dropout)
        check_bool(bias, "bias")
        self.w_q = nn.Linear(self.d_model, self.d_model, bias=bias)
        self.w_k = nn.Linear(self.d_model, self.d_model, bias=bias)
        self.w_v = nn.Linear(self.d_model, self.d_model, bias=bias)
        self.w_o = nn.Linear(self.d_model, self.d_model, bias=bias)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"bias={self.w_o.bias is not None}, dropout={self.dropout}"
        )

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) → (B, H, T, D/H): head h gets features h·D/H to (h+1)·D/H − 1."""
        check_tensor(x, "x", f"(B, T, D={self.d_model})", ndim=3, size={-1: self.d_model})
        B, T, _ = x.shape
        # contiguous: each head's (T, D/H) block is one matrix in memory, as batched matmuls want
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, T, D/H) → (B, T, D): the inverse of :meth:`split_heads`."""
        check_tensor(
            x,
            "x",
            f"(B, H={self.num_heads}, T, D/H={self.head_dim})",
            ndim=4,
            size={1: self.num_heads, -1: self.head_dim},
        )
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.d_model)  # (B, T, D)

    def _check_inputs(self, queries, keys, values) -> None:
        dtype = self.w_o.weight.dtype
        for name, tensor, letter in (
            ("queries", queries, "Q"),
            ("keys", keys, "K"),
            ("values", values, "K"),
        ):
            check_tensor(tensor, name, f"(B, {letter}, D)", ndim=3)
            if tensor.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must have d_model={self.d_model} features in the "
                    f"last axis, got shape {tuple(tensor.shape)}"
                )
            check_tensor(tensor, name, f"(B, {letter}, D)", dtype=dtype)
        if not queries.shape[0] == keys.shape[0] == values.shape[0]:
            raise ValueError(
                f"queries, keys and values must have the same batch size B, got "
                f"shapes {tuple(queries.shape)}, {tuple(keys.shape)} and "
                f"{tuple(values.shape)}"
            )
        if keys.shape[1] != values.shape[1]:
            raise ValueError(
                f"keys and values must hold the same number of keys K, got keys "
                f"of shape {tuple(keys.shape)} and values {tuple(values.shape)}"
            )

    def _head_mask(self, mask, shape: torch.Size) -> torch.Tensor:
        """The mask with the rank of the weights (B, H, Q, K), nothing expanded: the rule of
        :func:`helpers.checks.check_head_mask` (2-D is (Q, K), 3-D is (B, Q|1, K))."""
        return check_head_mask(mask, "mask", shape)

    def _project(self, queries, keys, values):
        """``w_q(queries), w_k(keys), w_v(values)``. In self-attention (one tensor for all
        three) that is one (B, T, D) @ (D, 3D) product, as ``nn.MultiheadAttention`` does it:
        faster, and tested equal to the three projections."""
        if queries is keys and keys is values:
            weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])  # (3D, D)
            bias = (
                None
                if self.w_q.bias is None
                else torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
            )  # (3D,)
            return F.linear(queries, weight, bias).split(self.d_model, dim=-1)
        return self.w_q(queries), self.w_k(keys), self.w_v(values)

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """queries (B, Q, D), keys and values (B, K, D), bool mask broadcastable to
        (B, H, Q, K) → ``(out (B, Q, D), weights (B, H, Q, K))``."""
        self._check_inputs(queries, keys, values)
        B, Q, _ = queries.shape
        K, H = keys.shape[1], self.num_heads
        if mask is not None:
            mask = self._head_mask(mask, torch.Size((B, H, Q, K)))
        # 1) project the queries, keys and values, then split D into H heads of D/H features
        q, k, v = self._project(queries, keys, values)  # (B, Q|K, D) each
        q = self.split_heads(q)  # (B, H, Q, D/H)
        k = self.split_heads(k)  # (B, H, K, D/H)
        v = self.split_heads(v)  # (B, H, K, D/H)
        # 2) scaled dot-product attention in every head at once: scores / √(D/H), mask,
        #    softmax, weighted sum; the one core of helpers.attention
        heads, weights = scaled_dot_product_attention(
            q, k, v, mask, dropout=self.dropout, training=self.training
        )
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
        """An ``nn.MultiheadAttention(batch_first=True)`` holding a copy of these weights."""
        weight = self.w_o.weight
        bias = self.w_o.bias is not None
        with torch.random.fork_rng(devices=[]):  # as in from_torch
            mha = nn.MultiheadAttention(
                self.d_model,
                self.num_heads,
                dropout=self.dropout,
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
