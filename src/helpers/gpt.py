"""A tiny decoder-only (GPT-style) language model, and sampling with temperature and top-k.

:class:`GPT` is a token embedding plus a learned position embedding, a stack of pre-norm
blocks with causal self-attention (each one :class:`helpers.transformer.EncoderBlock` with
``norm_first=True`` called with a causal mask: a decoder block without cross-attention), a
final norm and a linear head onto the vocabulary, tied to the token embedding or not.
:func:`next_token_probs` turns the last logits into the distribution that sampling draws
from; :meth:`GPT.generate` samples one token at a time. The text data and the training loop
live in :mod:`helpers.tasks.text`.

Shapes: B batch, T positions, D features (``d_model``), H heads, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.checks import (
    check_bool,
    check_generator,
    check_int,
    check_real,
    check_tensor,
    require,
)
from helpers.masks import causal_mask
from helpers.transformer import EncoderBlock, LayerNorm, RMSNorm

__all__ = ["GPT", "next_token_probs"]


def _next_token_probs(logits: torch.Tensor, temperature: float, top_k: int | None):
    """The unchecked core of :func:`next_token_probs`: logits (…, V) → probabilities (…, V)."""
    scaled = logits / temperature  # (…, V): T < 1 sharpens, T > 1 flattens
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]  # (…, 1), the k-th largest
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))  # keep the top k (and ties)
    return torch.softmax(scaled, dim=-1)  # (…, V)


def next_token_probs(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None
) -> torch.Tensor:
    """The distribution sampling draws the next token from: ``softmax(top_k(logits / T))``.

    logits (…, V), floating; ``temperature`` T > 0 divides them (T → 0 approaches greedy
    decoding, T = 1 is the model's own distribution, T > 1 flattens it); ``top_k`` (None
    or 1 ≤ k ≤ V) keeps the k largest logits and gives every other token probability 0
    (a token tied with the k-th largest is kept too). Returns probabilities (…, V).
    """
    check_tensor(logits, "logits", "(…, V)", ndim=range(1, 65), floating=True)
    temperature = check_real(temperature, "temperature", minimum=0, exclusive_minimum=True)
    if top_k is not None:
        top_k = check_int(top_k, "top_k", minimum=1)
        require(
            top_k <= logits.shape[-1],
            f"top_k must be at most the number of logits, V = logits.shape[-1] = "
            f"{logits.shape[-1]}, got {top_k}",
        )
    return _next_token_probs(logits, temperature, top_k)


class GPT(nn.Module):
    """A decoder-only Transformer language model in the style of GPT-2 and nanoGPT.

    ``GPT(vocab_size, d_model, num_heads, ffn_hidden, num_layers, max_len, dropout=0.0,
    norm="layer", tie_weights=True)``: ``token_embedding`` (V → D) plus
    ``position_embedding`` (``max_len`` learned positions), ``num_layers`` pre-norm
    :class:`~helpers.transformer.EncoderBlock` s (GELU FFN of width ``ffn_hidden``) called
    with a causal mask, a final norm (``"layer"``: LayerNorm, ``"rms"``: RMSNorm, also
    inside the blocks) and ``head`` (D → V, no bias), whose weight is the token embedding's
    when ``tie_weights``. Embeddings start N(0, 1/D), linear layers at PyTorch's default.

    ``forward(idx)``: token ids (B, T), T ≤ ``max_len``. Returns ``(logits (B, T, V),
    weights)``, weights a list (one per layer) of (B, H, T, T): position t sees 0..t only.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_heads: int,
        ffn_hidden: int,
        num_layers: int,
        max_len: int,
        dropout: float = 0.0,
        norm: str = "layer",
        tie_weights: bool = True,
    ):
        super().__init__()
        self.vocab_size = check_int(vocab_size, "vocab_size", minimum=1)
        self.d_model = check_int(d_model, "d_model", minimum=1)
        self.max_len = check_int(max_len, "max_len", minimum=1)
        num_layers = check_int(num_layers, "num_layers", minimum=1)
        self.tie_weights = check_bool(tie_weights, "tie_weights")
        self.token_embedding = nn.Embedding(vocab_size, d_model)  # V → D
        self.position_embedding = nn.Embedding(max_len, d_model)  # T → D
        self.blocks = nn.ModuleList(
            EncoderBlock(d_model, num_heads, ffn_hidden, dropout, True, "gelu", norm)
            for _ in range(num_layers)
        )
        # the blocks have checked ``norm``
        self.final_norm = RMSNorm(d_model) if norm == "rms" else LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)  # D → V
        self.apply(self._init_weights)
        if self.tie_weights:
            self.head.weight = self.token_embedding.weight  # one (V, D) matrix, used twice
        self.register_buffer("mask", causal_mask(max_len), persistent=False)  # (T, T)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Embedding):  # unit-size logits at the start through the tie
            nn.init.normal_(module.weight, mean=0.0, std=self.d_model**-0.5)

    def forward(self, idx: torch.Tensor):
        check_tensor(idx, "idx", "(B, T)", ndim=2)
        require(
            idx.dtype in (torch.int64, torch.int32),
            f"idx must hold integer token ids, got dtype {idx.dtype}",
        )
        require(
            idx.numel() == 0 or 0 <= int(idx.min()) <= int(idx.max()) < self.vocab_size,
            f"idx must hold token ids in [0, vocab_size={self.vocab_size})",
        )
        require(
            idx.shape[1] <= self.max_len,
            f"idx has {idx.shape[1]} positions but the model holds max_len={self.max_len}",
        )
        return self._forward(idx)

    def _forward(self, idx: torch.Tensor):
        """The unchecked core of :meth:`forward`."""
        B, T = idx.shape
        positions = torch.arange(T, device=idx.device)  # (T,)
        x = self.token_embedding(idx) + self.position_embedding(positions)  # (B, T, D)
        mask = self.mask[:T, :T]  # (T, T), True on and below the diagonal
        weights = []
        for block in self.blocks:
            x, w = block._forward(x, mask)  # (B, T, D), (B, H, T, T)
            weights.append(w)
        return self.head(self.final_norm._forward(x)), weights  # (B, T, V)

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Continue each prompt by ``max_new_tokens`` sampled tokens.

        idx (B, T) token ids, T ≥ 1; at each step the model reads the last ``max_len``
        tokens, and the next token is drawn from :func:`next_token_probs` of the last
        position's logits with ``torch.multinomial(..., generator=generator)``. Runs in
        eval mode (the model's mode is restored). Returns (B, T + max_new_tokens), on
        ``idx``'s device (the model's).

        ``generator`` may live on any device: the draw is made on the generator's device
        (the probabilities, (B, V), are moved there and the tokens back), so a CPU
        ``torch.Generator().manual_seed(s)`` works with a model on CUDA, and a
        ``torch.Generator(device="cuda")`` keeps the draw on the GPU. With None, torch's
        global stream of the model's device is used.
        """
        check_tensor(idx, "idx", "(B, T)", ndim=2)
        require(
            idx.dtype in (torch.int64, torch.int32),
            f"idx must hold integer token ids, got dtype {idx.dtype}",
        )
        require(
            idx.numel() == 0 or 0 <= int(idx.min()) <= int(idx.max()) < self.vocab_size,
            f"idx must hold token ids in [0, vocab_size={self.vocab_size})",
        )
        require(idx.shape[1] >= 1, f"idx must hold a prompt of at least one token, got {idx.shape}")
        max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0)
        temperature = check_real(temperature, "temperature", minimum=0, exclusive_minimum=True)
        if top_k is not None:
            top_k = check_int(top_k, "top_k", minimum=1)
            require(
                top_k <= self.vocab_size, f"top_k must be at most V={self.vocab_size}, got {top_k}"
            )
        generator = check_generator(generator)
        was_training = self.training
        self.eval()
        try:
            for _ in range(max_new_tokens):
                logits, _ = self._forward(idx[:, -self.max_len :])  # (B, t, V)
                probs = _next_token_probs(logits[:, -1], temperature, top_k)  # (B, V)
                if generator is not None:  # draw where the generator lives
                    probs = probs.to(generator.device)
                next_token = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
                next_token = next_token.to(idx.device)
                idx = torch.cat([idx, next_token], dim=1)  # (B, t + 1)
        finally:
            self.train(was_training)
        return idx
