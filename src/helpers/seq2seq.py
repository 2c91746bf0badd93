"""A tiny encoder–decoder Transformer and greedy decoding.

:class:`Seq2SeqTransformer` stacks the blocks of :mod:`helpers.transformer` between token
embeddings and an output projection; :func:`greedy_decode` generates with it one token at a
time. The chapter's toy task (reverse a sequence of digits), its token ids and the training
loop live in :mod:`helpers.tasks.reversal`.

Shapes: B batch, S source positions, T target positions, D features, H heads, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from helpers.checks import (
    check_bool,
    check_features,
    check_head_mask,
    check_int,
    check_tensor,
    check_token_id,
    require,
)
from helpers.masks import causal_mask, valid_length_mask
from helpers.positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from helpers.transformer import DecoderBlock, EncoderBlock, LayerNorm

__all__ = ["Seq2SeqTransformer", "greedy_decode"]


class Seq2SeqTransformer(nn.Module):
    """Embeddings (× √D) + positions → encoder stack → decoder stack → output projection.

    ``Seq2SeqTransformer(vocab_size, d_model, num_heads, ffn_hidden, num_encoder_layers,
    num_decoder_layers, max_len, dropout=0.0, norm_first=False, positional="sinusoidal")``.
    Source and target have their own ``nn.Embedding`` (initialised N(0, 1/D), so that the
    √D-scaled embedding has unit-size entries like the positional table), and share the
    positional encoding ("sinusoidal" or "learned", at most ``max_len`` positions). Pre-LN
    stacks (``norm_first=True``) end with a final :class:`~helpers.transformer.LayerNorm`.

    ``forward(src, tgt_in, src_valid_lens=None)``: token ids src (B, S) and tgt_in (B, T),
    optional source lengths (B,) (keys beyond them are masked). Returns ``(logits (B, T, V),
    attention)``, attention a dict of lists (one tensor per layer): ``"encoder_self"``
    (B, H, S, S), ``"decoder_self"`` (B, H, T, T) and ``"cross"`` (B, H, T, S).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_heads: int,
        ffn_hidden: int,
        num_encoder_layers: int,
        num_decoder_layers: int,
        max_len: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        positional: str = "sinusoidal",
    ):
        super().__init__()
        self.vocab_size = check_int(vocab_size, "vocab_size", minimum=1)
        self.d_model = check_int(d_model, "d_model", minimum=1)
        self.max_len = check_int(max_len, "max_len", minimum=1)
        num_enc = check_int(num_encoder_layers, "num_encoder_layers", minimum=1)
        num_dec = check_int(num_decoder_layers, "num_decoder_layers", minimum=1)
        if not isinstance(positional, str) or positional not in ("sinusoidal", "learned"):
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {positional!r}")
        check_bool(norm_first, "norm_first")
        self.src_embedding = nn.Embedding(vocab_size, d_model)
        self.tgt_embedding = nn.Embedding(vocab_size, d_model)
        for embedding in (self.src_embedding, self.tgt_embedding):
            nn.init.normal_(embedding.weight, std=d_model**-0.5)
        self.positional = (
            SinusoidalPositionalEncoding(d_model, max_len, dropout)
            if positional == "sinusoidal"
            else LearnedPositionalEncoding(max_len, d_model, dropout)
        )
        block = dict(
            d_model=d_model,
            num_heads=num_heads,
            ffn_hidden=ffn_hidden,
            dropout=dropout,
            norm_first=norm_first,
        )
        self.encoder_layers = nn.ModuleList(EncoderBlock(**block) for _ in range(num_enc))
        self.decoder_layers = nn.ModuleList(DecoderBlock(**block) for _ in range(num_dec))
        self.encoder_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.output = nn.Linear(d_model, vocab_size)  # D → V

    def _embed(self, tokens, embedding: nn.Embedding, name: str) -> torch.Tensor:
        """Token ids (B, T) → √D · embedding + positions, (B, T, D), after input checks."""
        if (
            not isinstance(tokens, torch.Tensor)
            or tokens.dim() != 2
            or tokens.dtype not in (torch.int64, torch.int32)
        ):
            got = (
                (tuple(tokens.shape), tokens.dtype)
                if isinstance(tokens, torch.Tensor)
                else type(tokens).__name__
            )
            raise ValueError(f"{name} must be an integer tensor of token ids (B, T), got {got}")
        if tokens.shape[1] > self.max_len:
            raise ValueError(
                f"{name} has {tokens.shape[1]} positions but the positional table "
                f"holds max_len={self.max_len} (shape {tuple(tokens.shape)})"
            )
        if tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < self.vocab_size:
            raise ValueError(f"{name} must hold token ids in [0, vocab_size={self.vocab_size})")
        return self.positional(embedding(tokens) * math.sqrt(self.d_model))  # (B, T, D)

    def encode(self, src: torch.Tensor, src_valid_lens: torch.Tensor | None = None):
        """src (B, S) → ``(memory (B, S, D), src_mask (B, 1, 1, S) or None, weights)``,
        weights a list of (B, H, S, S), one per encoder layer. ``src_valid_lens``: optional
        integer lengths (B,) in [0, S]; keys beyond them are masked."""
        x = self._embed(src, self.src_embedding, "src")  # (B, S, D)
        src_mask = None
        if src_valid_lens is not None:
            if not isinstance(src_valid_lens, torch.Tensor) or tuple(src_valid_lens.shape) != (
                src.shape[0],
            ):
                got = (
                    tuple(src_valid_lens.shape)
                    if isinstance(src_valid_lens, torch.Tensor)
                    else type(src_valid_lens).__name__
                )
                raise ValueError(
                    f"src_valid_lens must have shape (B,) = ({src.shape[0]},), one "
                    f"length per source sequence, got {got}"
                )
            if (
                src_valid_lens.is_floating_point()
                or src_valid_lens.is_complex()
                or src_valid_lens.dtype == torch.bool
            ):
                raise ValueError(
                    f"src_valid_lens must be an integer tensor of lengths, got "
                    f"dtype {src_valid_lens.dtype}"
                )
            if (
                src_valid_lens.numel()
                and not 0 <= int(src_valid_lens.min()) <= int(src_valid_lens.max()) <= src.shape[1]
            ):
                raise ValueError(
                    f"src_valid_lens must hold lengths in [0, S={src.shape[1]}], "
                    f"got {src_valid_lens.tolist()}"
                )
            src_mask = valid_length_mask(src_valid_lens.to(src.device), src.shape[1])[
                :, None, None, :
            ]  # (B, 1, 1, S)
        weights = []
        for layer in self.encoder_layers:
            x, w = layer._forward(x, src_mask)  # (B, S, D), (B, H, S, S)
            weights.append(w)
        return self.encoder_norm(x), src_mask, weights

    def decode(
        self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None = None
    ):
        """tgt_in (B, T), memory (B, S, D) → ``(logits (B, T, V), self_weights, cross_weights)``,
        lists of (B, H, T, T) and (B, H, T, S), one per decoder layer. ``src_mask``: optional
        bool mask broadcastable to (B, H, T, S), as :meth:`encode` returns it."""
        x = self._embed(tgt_in, self.tgt_embedding, "tgt_in")  # (B, T, D)
        check_features(memory, "memory", self.d_model, "(B, S, D)", dtype=self.output.weight.dtype)
        require(
            memory.shape[0] == tgt_in.shape[0],
            f"memory must have tgt_in's batch size B={tgt_in.shape[0]}, got shape "
            f"{tuple(memory.shape)}",
        )
        if src_mask is not None:  # (B, H, T, S), the rule of MultiHeadAttention
            heads = self.decoder_layers[0].cross_attn.num_heads
            shape = (tgt_in.shape[0], heads, tgt_in.shape[1], memory.shape[1])
            src_mask = check_head_mask(src_mask, "src_mask", shape)
        self_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device)[None]  # (1, T, T)
        self_weights, cross_weights = [], []
        for layer in self.decoder_layers:
            x, w_self, w_cross = layer._forward(x, memory, self_mask, src_mask)  # (B, T, D)
            self_weights.append(w_self)
            cross_weights.append(w_cross)
        return self.output(self.decoder_norm(x)), self_weights, cross_weights  # (B, T, V)

    def forward(
        self, src: torch.Tensor, tgt_in: torch.Tensor, src_valid_lens: torch.Tensor | None = None
    ):
        for name, tokens in (("src", src), ("tgt_in", tgt_in)):
            check_tensor(tokens, name, "(B, T)", ndim=2)
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(
                f"tgt_in must have src's batch size B={src.shape[0]}, got shape "
                f"{tuple(tgt_in.shape)}"
            )
        # 1) encode the source once; 2) decode the whole target prefix with teacher forcing
        memory, src_mask, encoder_self = self.encode(src, src_valid_lens)  # (B, S, D)
        logits, decoder_self, cross = self.decode(tgt_in, memory, src_mask)  # (B, T, V)
        return logits, {"encoder_self": encoder_self, "decoder_self": decoder_self, "cross": cross}


@torch.no_grad()
def greedy_decode(
    model: Seq2SeqTransformer,
    src: torch.Tensor,
    max_new_tokens: int,
    bos: int,
    eos: int | None = None,
    src_valid_lens: torch.Tensor | None = None,
    pad: int = 0,
    return_attention: bool = False,
):
    """Generate up to ``max_new_tokens`` tokens per source, each time taking the most likely one.

    src (B, S); ``bos`` starts every target, ``eos`` (optional) ends one, ``pad`` (id 0 by
    default) fills a sequence after its ``eos``: all three are token ids of the model's
    vocabulary. The decoder reruns on the whole prefix at every step (no KV cache: a
    later chapter adds one). Generation stops early when every sequence has emitted ``eos``.
    Runs in eval mode (the model's mode is restored). Returns tokens (B, N), N ≤ max_new_tokens,
    without the BOS; with ``return_attention=True`` also the cross-attention of the last
    step, a list (one per decoder layer) of (B, H, N, S): row i is what the decoder looked
    at to emit token i.
    """
    if not isinstance(model, Seq2SeqTransformer):
        raise ValueError(f"model must be a Seq2SeqTransformer, got {type(model).__name__}")
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    if max_new_tokens > model.max_len:
        raise ValueError(
            f"max_new_tokens={max_new_tokens} exceeds the model's positional table (max_len={model.max_len})"
        )
    bos = check_token_id(bos, "bos", model.vocab_size)
    eos = None if eos is None else check_token_id(eos, "eos", model.vocab_size)
    pad = check_token_id(pad, "pad", model.vocab_size)
    check_bool(return_attention, "return_attention")
    was_training = model.training
    model.eval()
    try:
        memory, src_mask, _ = model.encode(src, src_valid_lens)  # (B, S, D)
        tokens = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
        finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(max_new_tokens):
            logits, _, cross = model.decode(tokens, memory, src_mask)  # (B, t, V)
            next_token = logits[:, -1].argmax(dim=-1)  # (B,)
            if eos is not None:
                next_token = next_token.masked_fill(finished, pad)
                finished |= next_token == eos
            tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t + 1)
            if eos is not None and bool(finished.all()):
                break
    finally:
        model.train(was_training)
    return (tokens[:, 1:], cross) if return_attention else tokens[:, 1:]
