"""The Transformer's other parts: FFN, LayerNorm, Add & Norm, encoder and decoder blocks.

Post-LN (the original paper, ``norm_first=False``) normalises after each residual sum,
``x = LN(x + sublayer(x))``; pre-LN (``norm_first=True``) normalises the sublayer's input,
``x = x + sublayer(LN(x))``, and the stack ends with one more LayerNorm. Blocks return
their attention weights; nothing is stashed on ``self``. ``from_torch`` builds a block
holding the weights of ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` so
the two can be shown equal. The full encoder–decoder model built from these blocks is
:class:`helpers.seq2seq.Seq2SeqTransformer`; the decoder-only model is
:class:`helpers.gpt.GPT`. :class:`RMSNorm` (Zhang and Sennrich, 2019) rescales each token by
its root mean square, with no mean and no shift; the blocks take it as ``norm="rms"``.

Mask convention: bool, **True = may attend**, broadcastable to (B, H, Q, K). Shapes: B
batch, T target positions, S source positions, D features (``d_model``), H heads.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from helpers.checks import (
    ANY_RANK_FROM_1,
    check_bool,
    check_bool_mask,
    check_features,
    check_head_mask,
    check_int,
    check_probability,
    check_real,
    check_tensor,
)
from helpers.multihead import MultiHeadAttention

__all__ = [
    "PositionWiseFFN",
    "LayerNorm",
    "RMSNorm",
    "batch_norm_tokens",
    "AddNorm",
    "EncoderBlock",
    "DecoderBlock",
]

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


class PositionWiseFFN(nn.Module):
    """The same two-layer MLP applied to every position: ``linear2(dropout(act(linear1(x))))``.

    ``PositionWiseFFN(d_model, ffn_hidden, dropout=0.0, activation="relu")``: ``linear1``
    is D → F (F = ``ffn_hidden``, usually 4·D), ``linear2`` F → D, the names of
    ``nn.TransformerEncoderLayer``; ``activation`` is ``"relu"`` or ``"gelu"``.
    forward: (B, T, D) → (B, T, D) (any (…, D) works); positions never mix.
    """

    def __init__(
        self, d_model: int, ffn_hidden: int, dropout: float = 0.0, activation: str = "relu"
    ):
        super().__init__()
        d_model = check_int(d_model, "d_model", minimum=1)
        ffn_hidden = check_int(ffn_hidden, "ffn_hidden", minimum=1)
        if not isinstance(activation, str) or activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}"
            )
        self.activation_name = activation
        self.linear1 = nn.Linear(d_model, ffn_hidden)  # D → F
        self.activation = _ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(check_probability(dropout))
        self.linear2 = nn.Linear(ffn_hidden, d_model)  # F → D

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        D, dtype = self.linear1.in_features, self.linear1.weight.dtype
        check_features(x, "x", D, "(…, D)", ANY_RANK_FROM_1, dtype)
        return self._forward(x)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        """The unchecked core of :meth:`forward`."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, T, D)


class LayerNorm(nn.Module):
    """Layer normalisation written out: each token's D features → mean 0, variance 1.

    ``y = (x − mean) / sqrt(var + eps) · weight + bias``, mean and (biased) variance over
    the last axis only, so every token is normalised on its own: no dependence on the batch
    or on padding. Equal to ``nn.LayerNorm(d_model, eps)``. (…, D) → (…, D).
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.d_model = check_int(d_model, "d_model", minimum=1)
        # eps < 0 lets var + eps reach 0 or below: inf or NaN outputs, never an error
        self.eps = check_real(eps, "eps", minimum=0)
        self.weight = nn.Parameter(torch.ones(self.d_model))  # (D,) gain γ
        self.bias = nn.Parameter(torch.zeros(self.d_model))  # (D,) shift b

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_features(x, "x", self.d_model, "(…, D)", ANY_RANK_FROM_1)
        return self._forward(x)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        """The unchecked core of :meth:`forward`."""
        if x.numel() == 0:  # no token: an empty result (var_mean would warn)
            return x * self.weight + self.bias  # (…, D)
        # the statistics in float32 at least (float16/bfloat16 round the mean too coarsely)
        exact = x.to(torch.promote_types(x.dtype, torch.float32))  # (…, D)
        var, mean = torch.var_mean(exact, dim=-1, unbiased=False, keepdim=True)  # (…, 1) each
        normalised = ((exact - mean) * torch.rsqrt(var + self.eps)).to(x.dtype)  # (…, D)
        return normalised * self.weight + self.bias  # (…, D)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: each token's D features divided by their RMS.

    ``y = x / sqrt(mean(x²) + eps) · weight``, the mean over the last axis only: no mean is
    subtracted and there is no shift, so it is :class:`LayerNorm` without its centring and
    its bias (Zhang and Sennrich, 2019). Equal to ``nn.RMSNorm(d_model, eps)``.
    (…, D) → (…, D).
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.d_model = check_int(d_model, "d_model", minimum=1)
        self.eps = check_real(eps, "eps", minimum=0)  # as LayerNorm's: eps < 0 gives NaN
        self.weight = nn.Parameter(torch.ones(self.d_model))  # (D,) gain γ

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_features(x, "x", self.d_model, "(…, D)", ANY_RANK_FROM_1)
        return self._forward(x)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        """The unchecked core of :meth:`forward`."""
        exact = x.to(torch.promote_types(x.dtype, torch.float32))  # (…, D), as in LayerNorm
        mean_square = exact.pow(2).mean(dim=-1, keepdim=True)  # (…, 1)
        return (exact * torch.rsqrt(mean_square + self.eps)).to(x.dtype) * self.weight  # (…, D)


_NORMS = {"layer": LayerNorm, "rms": RMSNorm}


def _make_norm(norm, d_model: int, eps: float = 1e-5) -> nn.Module:
    """``LayerNorm`` for ``norm="layer"``, ``RMSNorm`` for ``"rms"``."""
    if not isinstance(norm, str) or norm not in _NORMS:
        raise ValueError(f"norm must be one of {sorted(_NORMS)}, got {norm!r}")
    return _NORMS[norm](d_model, eps)


def batch_norm_tokens(
    x: torch.Tensor, valid: torch.Tensor | None = None, eps: float = 1e-5
) -> torch.Tensor:
    """Batch normalisation of tokens, for comparison with :class:`LayerNorm`: each of the
    D features → mean 0, variance 1 over all B·T tokens of the batch (no learned scale).

    x (B, T, D), floating; ``valid`` an optional bool (B, T), True = real token: statistics
    then use the real tokens only; ``eps`` a finite number >= 0. Returns (B, T, D). Unlike
    LayerNorm, a token's output depends on the other sequences in the batch (and, without
    ``valid``, on the padding). An empty batch (B·T = 0) gives an empty result.
    """
    check_tensor(x, "x", "(B, T, D)", ndim=3, floating=True)
    eps = check_real(eps, "eps", minimum=0)
    if valid is None:
        valid = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    check_bool_mask(valid, "valid", shape="(B, T)")
    if valid.shape != x.shape[:2]:
        raise ValueError(
            f"valid must be a bool tensor of shape (B, T) = "
            f"{tuple(x.shape[:2])}, got {(tuple(valid.shape), valid.dtype)}"
        )
    weight = valid.to(device=x.device, dtype=x.dtype)[..., None]  # (B, T, 1)
    count = weight.sum().clamp_min(1)
    mean = (x * weight).sum(dim=(0, 1)) / count  # (D,)
    var = ((x - mean) ** 2 * weight).sum(dim=(0, 1)) / count  # (D,)
    return (x - mean) * torch.rsqrt(var + eps)  # (B, T, D)


class AddNorm(nn.Module):
    """Residual connection then layer norm: ``forward(x, sublayer_out) =
    norm(x + dropout(sublayer_out))``, both (B, T, D) → (B, T, D). ``norm`` is a
    :class:`LayerNorm` (``norm="layer"``, the default) or an :class:`RMSNorm`
    (``norm="rms"``), ``dropout`` an ``nn.Dropout``."""

    def __init__(self, d_model: int, dropout: float = 0.0, eps: float = 1e-5, norm: str = "layer"):
        super().__init__()
        self.norm = _make_norm(norm, check_int(d_model, "d_model", minimum=1), eps)
        self.dropout = nn.Dropout(check_probability(dropout))

    def forward(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        check_features(x, "x", self.norm.d_model, "(…, D)", ANY_RANK_FROM_1)
        check_tensor(sublayer_out, "sublayer_out", "(…, D)", floating=True)
        if sublayer_out.shape != x.shape:
            raise ValueError(
                f"sublayer_out must have x's shape {tuple(x.shape)}, got "
                f"{tuple(sublayer_out.shape)}"
            )
        return self._forward(x, sublayer_out)

    def _forward(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        """The unchecked core of :meth:`forward`."""
        return self.norm._forward(x + self.dropout(sublayer_out))  # (B, T, D)


class _Block(nn.Module):
    """Shared by the encoder and decoder blocks: the residual wiring, post- or pre-LN."""

    def _sublayer(self, add_norm: AddNorm, x: torch.Tensor, fn):
        """Post-LN: ``add_norm(x, fn(x))``; pre-LN: ``x + dropout(fn(norm(x)))``.
        ``fn`` returns ``(out, weights)``; returns ``(new x, weights)``."""
        if self.norm_first:
            out, weights = fn(add_norm.norm._forward(x))
            return x + add_norm.dropout(out), weights
        out, weights = fn(x)
        return add_norm._forward(x, out), weights

    def _copy_common(self, layer: nn.Module, norms: tuple[str, ...]) -> None:
        """Copy the FFN and LayerNorm weights of a torch layer (checks done by the caller)."""
        with torch.no_grad():
            for name in ("linear1", "linear2"):
                getattr(self.ffn, name).weight.copy_(getattr(layer, name).weight)
                getattr(self.ffn, name).bias.copy_(getattr(layer, name).bias)
            for i, name in enumerate(norms):
                ours, theirs = getattr(self, f"add_norm{i + 1}").norm, getattr(layer, name)
                ours.weight.copy_(theirs.weight)
                ours.bias.copy_(theirs.bias)
                ours.eps = theirs.eps


def _torch_layer_settings(layer: nn.Module, kind: type, name: str) -> dict:
    """The constructor arguments of a block equal to an nn.Transformer*Layer."""
    if not isinstance(layer, kind):
        raise ValueError(f"{name} must be an nn.{kind.__name__}, got {type(layer).__name__}")
    act = layer.activation
    activation = (
        "relu"
        if act in (F.relu,) or isinstance(act, nn.ReLU)
        else "gelu"
        if act in (F.gelu,) or isinstance(act, nn.GELU)
        else None
    )
    if activation is None or getattr(act, "approximate", "none") != "none":
        raise ValueError(f"{name}.activation must be relu or (exact) gelu, got {act!r}")
    parts = [layer.linear1, layer.linear2] + [
        m for n, m in layer.named_children() if n.startswith("norm")
    ]
    if any(m.bias is None for m in parts):
        raise ValueError(f"{name} must be built with bias=True (this block always has biases)")
    return dict(
        d_model=layer.linear1.in_features,
        num_heads=layer.self_attn.num_heads,
        ffn_hidden=layer.linear1.out_features,
        dropout=layer.dropout.p,
        norm_first=bool(layer.norm_first),
        activation=activation,
    )


class EncoderBlock(_Block):
    """One encoder layer: self-attention and a position-wise FFN, each with Add & Norm.

    ``EncoderBlock(d_model, num_heads, ffn_hidden, dropout=0.0, norm_first=False,
    activation="relu", norm="layer")``; ``norm="rms"`` puts :class:`RMSNorm` in place of
    every :class:`LayerNorm`. Post-LN (default): ``x = norm1(x + sa(x)); x = norm2(x +
    ffn(x))``; pre-LN: ``x = x + sa(norm1(x)); x = x + ffn(norm2(x))``. Parts:
    ``self_attn`` (:class:`~helpers.multihead.MultiHeadAttention`), ``ffn``
    (:class:`PositionWiseFFN`), ``add_norm1``, ``add_norm2`` (:class:`AddNorm`; their
    norms are also ``norm1``, ``norm2``).

    ``forward(x, mask=None)``: x (B, T, D), bool mask (True = may attend) broadcastable to
    (B, H, T, T), e.g. a (B, T) padding mask as ``mask[:, None, None, :]``. Returns
    ``(out (B, T, D), weights (B, H, T, T))``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn_hidden: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        norm: str = "layer",
    ):
        super().__init__()
        self.ffn = PositionWiseFFN(d_model, ffn_hidden, dropout, activation)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.add_norm1, self.add_norm2 = (AddNorm(d_model, dropout, norm=norm) for _ in range(2))
        self.d_model, self.norm_first = int(d_model), check_bool(norm_first, "norm_first")

    norm1 = property(lambda self: self.add_norm1.norm)
    norm2 = property(lambda self: self.add_norm2.norm)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        check_features(x, "x", self.d_model, dtype=self.self_attn.w_o.weight.dtype)
        if mask is not None:
            shape = (x.shape[0], self.self_attn.num_heads, x.shape[1], x.shape[1])
            mask = check_head_mask(mask, "mask", shape)
        return self._forward(x, mask)

    def _forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """The unchecked core of :meth:`forward`."""
        # 1) self-attention: every position looks at every (unmasked) position
        x, weights = self._sublayer(
            self.add_norm1, x, lambda h: self.self_attn._forward(h, h, h, mask)
        )  # (B, T, D)
        # 2) position-wise feed-forward network
        x, _ = self._sublayer(
            self.add_norm2, x, lambda h: (self.ffn._forward(h), None)
        )  # (B, T, D)
        return x, weights  # (B, T, D), (B, H, T, T)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderBlock:
        """An EncoderBlock holding (copies of) the weights of an ``nn.TransformerEncoderLayer``
        (relu or gelu, with biases), same ``norm_first``, eps, dropout, device and dtype.
        Call it with batch-first inputs (B, T, D) whatever the layer's ``batch_first``."""
        with torch.random.fork_rng(devices=[]):  # throwaway init: keep the caller's stream
            block = cls(**_torch_layer_settings(layer, nn.TransformerEncoderLayer, "layer"))
        weight = layer.linear1.weight
        block.to(device=weight.device, dtype=weight.dtype)
        block.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        block._copy_common(layer, ("norm1", "norm2"))
        return block.train(layer.training)


class DecoderBlock(_Block):
    """One decoder layer: masked self-attention, cross-attention to the encoder output
    (``memory``), and a position-wise FFN, each with Add & Norm (post- or pre-LN).

    Same arguments as :class:`EncoderBlock` (``norm="rms"`` for RMSNorm).
    Parts: ``self_attn``, ``cross_attn`` (MultiHeadAttention), ``ffn``, ``add_norm1..3``
    (norms also ``norm1..3``), the names of ``nn.TransformerDecoderLayer``'s parts
    (``multihead_attn`` there is ``cross_attn`` here).

    ``forward(x, memory, self_mask=None, memory_mask=None)``: x (B, T, D), memory (B, S, D);
    ``self_mask`` broadcastable to (B, H, T, T), usually the causal (T, T) mask of
    :func:`helpers.masks.causal_mask`; ``memory_mask`` broadcastable to (B, H, T, S), e.g.
    the source padding mask as ``mask[:, None, None, :]``. Returns ``(out (B, T, D),
    self_weights (B, H, T, T), cross_weights (B, H, T, S))``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn_hidden: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        norm: str = "layer",
    ):
        super().__init__()
        self.ffn = PositionWiseFFN(d_model, ffn_hidden, dropout, activation)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.add_norm1, self.add_norm2, self.add_norm3 = (
            AddNorm(d_model, dropout, norm=norm) for _ in range(3)
        )
        self.d_model, self.norm_first = int(d_model), check_bool(norm_first, "norm_first")

    norm1 = property(lambda self: self.add_norm1.norm)
    norm2 = property(lambda self: self.add_norm2.norm)
    norm3 = property(lambda self: self.add_norm3.norm)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ):
        dtype = self.self_attn.w_o.weight.dtype
        check_features(x, "x", self.d_model, dtype=dtype)
        check_features(memory, "memory", self.d_model, "(B, S, D)", dtype=dtype)
        if memory.shape[0] != x.shape[0]:
            raise ValueError(
                f"memory must have x's batch size B={x.shape[0]}, got shape {tuple(memory.shape)}"
            )
        (B, T, _), S, H = x.shape, memory.shape[1], self.self_attn.num_heads
        if self_mask is not None:
            self_mask = check_head_mask(self_mask, "self_mask", (B, H, T, T))
        if memory_mask is not None:
            memory_mask = check_head_mask(memory_mask, "memory_mask", (B, H, T, S))
        return self._forward(x, memory, self_mask, memory_mask)

    def _forward(self, x, memory, self_mask=None, memory_mask=None):
        """The unchecked core of :meth:`forward`."""
        # 1) masked self-attention over the target prefix
        x, self_weights = self._sublayer(
            self.add_norm1, x, lambda h: self.self_attn._forward(h, h, h, self_mask)
        )  # (B, T, D)
        # 2) cross-attention: queries from the decoder, keys and values from the encoder
        x, cross_weights = self._sublayer(
            self.add_norm2, x, lambda h: self.cross_attn._forward(h, memory, memory, memory_mask)
        )
        # 3) position-wise feed-forward network
        x, _ = self._sublayer(
            self.add_norm3, x, lambda h: (self.ffn._forward(h), None)
        )  # (B, T, D)
        return x, self_weights, cross_weights  # (B, T, D), (B, H, T, T), (B, H, T, S)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderBlock:
        """A DecoderBlock holding (copies of) the weights of an ``nn.TransformerDecoderLayer``
        (``self_attn`` → ``self_attn``, ``multihead_attn`` → ``cross_attn``, linear1/2,
        norm1..3). Call it with batch-first inputs."""
        with torch.random.fork_rng(devices=[]):  # as in EncoderBlock.from_torch
            block = cls(**_torch_layer_settings(layer, nn.TransformerDecoderLayer, "layer"))
        weight = layer.linear1.weight
        block.to(device=weight.device, dtype=weight.dtype)
        block.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        block.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        block._copy_common(layer, ("norm1", "norm2", "norm3"))
        return block.train(layer.training)
