"""A tiny encoder–decoder Transformer, a toy task to train it on a CPU, and greedy decoding.

The task: reverse a sequence of digits. Tokens: ``PAD = 0``, ``BOS = 1``, ``EOS = 2`` and
the digits 0–9 as tokens 3–12 (``VOCAB_SIZE = 13``). For the source ``4 7 1`` the decoder
reads ``BOS 1 7 4`` (``tgt_in``, teacher forcing) and must predict ``1 7 4 EOS``
(``tgt_out``). Everything is generated in code from a seed; nothing is downloaded.

Shapes: B batch, S source positions, T target positions, D features, H heads, V vocabulary.
"""

from __future__ import annotations

import math
import time

import torch
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from helpers.masks import causal_mask, valid_length_mask
from helpers.positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from helpers.transformer import DecoderBlock, EncoderBlock, LayerNorm, _positive_int

__all__ = ["Seq2SeqTransformer", "greedy_decode", "PAD", "BOS", "EOS", "FIRST_DIGIT",
           "VOCAB_SIZE", "reversal_batch", "source_valid_lens", "reversal_model",
           "train_seq2seq", "token_accuracy", "stability_run"]

PAD, BOS, EOS, FIRST_DIGIT = 0, 1, 2, 3
VOCAB_SIZE = FIRST_DIGIT + 10


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

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, ffn_hidden: int,
                 num_encoder_layers: int, num_decoder_layers: int, max_len: int,
                 dropout: float = 0.0, norm_first: bool = False,
                 positional: str = "sinusoidal"):
        super().__init__()
        self.vocab_size = _positive_int(vocab_size, "vocab_size")
        self.d_model = _positive_int(d_model, "d_model")
        self.max_len = _positive_int(max_len, "max_len")
        num_enc = _positive_int(num_encoder_layers, "num_encoder_layers")
        num_dec = _positive_int(num_decoder_layers, "num_decoder_layers")
        if positional not in ("sinusoidal", "learned"):
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {positional!r}")
        self.src_embedding = nn.Embedding(vocab_size, d_model)
        self.tgt_embedding = nn.Embedding(vocab_size, d_model)
        for embedding in (self.src_embedding, self.tgt_embedding):
            nn.init.normal_(embedding.weight, std=d_model ** -0.5)
        self.positional = (SinusoidalPositionalEncoding(d_model, max_len, dropout)
                           if positional == "sinusoidal"
                           else LearnedPositionalEncoding(max_len, d_model, dropout))
        block = dict(d_model=d_model, num_heads=num_heads, ffn_hidden=ffn_hidden,
                     dropout=dropout, norm_first=norm_first)
        self.encoder_layers = nn.ModuleList(EncoderBlock(**block) for _ in range(num_enc))
        self.decoder_layers = nn.ModuleList(DecoderBlock(**block) for _ in range(num_dec))
        self.encoder_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.output = nn.Linear(d_model, vocab_size)  # D → V

    def _embed(self, tokens, embedding: nn.Embedding, name: str) -> torch.Tensor:
        """Token ids (B, T) → √D · embedding + positions, (B, T, D), after input checks."""
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 \
                or tokens.dtype not in (torch.int64, torch.int32):
            got = (tuple(tokens.shape), tokens.dtype) if isinstance(tokens, torch.Tensor) \
                else type(tokens).__name__
            raise ValueError(f"{name} must be an integer tensor of token ids (B, T), got {got}")
        if tokens.shape[1] > self.max_len:
            raise ValueError(f"{name} has {tokens.shape[1]} positions but the positional table "
                             f"holds max_len={self.max_len} (shape {tuple(tokens.shape)})")
        if tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < self.vocab_size:
            raise ValueError(f"{name} must hold token ids in [0, vocab_size={self.vocab_size})")
        return self.positional(embedding(tokens) * math.sqrt(self.d_model))  # (B, T, D)

    def encode(self, src: torch.Tensor, src_valid_lens: torch.Tensor | None = None):
        """src (B, S) → ``(memory (B, S, D), src_mask (B, 1, 1, S) or None, weights)``,
        weights a list of (B, H, S, S), one per encoder layer."""
        x = self._embed(src, self.src_embedding, "src")  # (B, S, D)
        src_mask = None
        if src_valid_lens is not None:
            if not isinstance(src_valid_lens, torch.Tensor) \
                    or tuple(src_valid_lens.shape) != (src.shape[0],):
                got = tuple(src_valid_lens.shape) if isinstance(src_valid_lens, torch.Tensor) \
                    else type(src_valid_lens).__name__
                raise ValueError(f"src_valid_lens must have shape (B,) = ({src.shape[0]},), one "
                                 f"length per source sequence, got {got}")
            src_mask = valid_length_mask(src_valid_lens.to(src.device),
                                         src.shape[1])[:, None, None, :]  # (B, 1, 1, S)
        weights = []
        for layer in self.encoder_layers:
            x, w = layer(x, src_mask)  # (B, S, D), (B, H, S, S)
            weights.append(w)
        return self.encoder_norm(x), src_mask, weights

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor,
               src_mask: torch.Tensor | None = None):
        """tgt_in (B, T), memory (B, S, D) → ``(logits (B, T, V), self_weights, cross_weights)``,
        lists of (B, H, T, T) and (B, H, T, S), one per decoder layer."""
        x = self._embed(tgt_in, self.tgt_embedding, "tgt_in")  # (B, T, D)
        self_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device)  # (T, T)
        self_weights, cross_weights = [], []
        for layer in self.decoder_layers:
            x, w_self, w_cross = layer(x, memory, self_mask, src_mask)  # (B, T, D)
            self_weights.append(w_self)
            cross_weights.append(w_cross)
        return self.output(self.decoder_norm(x)), self_weights, cross_weights  # (B, T, V)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                src_valid_lens: torch.Tensor | None = None):
        # 1) encode the source once; 2) decode the whole target prefix with teacher forcing
        memory, src_mask, encoder_self = self.encode(src, src_valid_lens)  # (B, S, D)
        logits, decoder_self, cross = self.decode(tgt_in, memory, src_mask)  # (B, T, V)
        return logits, {"encoder_self": encoder_self, "decoder_self": decoder_self,
                        "cross": cross}


@torch.no_grad()
def greedy_decode(model: Seq2SeqTransformer, src: torch.Tensor, max_len: int, bos: int,
                  eos: int | None = None, src_valid_lens: torch.Tensor | None = None,
                  pad: int = PAD, return_attention: bool = False):
    """Generate up to ``max_len`` tokens per source, each time taking the most likely one.

    src (B, S). The decoder reruns on the whole prefix at every step (no KV cache: a
    later chapter adds one). After a sequence emits ``eos`` its further tokens are ``pad``;
    generation stops early when every sequence has emitted ``eos``. Runs in eval mode (the
    model's mode is restored). Returns tokens (B, N), N ≤ max_len, without the BOS; with
    ``return_attention=True`` also the cross-attention of the last step, a list (one per
    decoder layer) of (B, H, N, S): row i is what the decoder looked at to emit token i.
    """
    max_len = _positive_int(max_len, "max_len")
    if max_len > model.max_len:
        raise ValueError(f"max_len={max_len} exceeds the model's positional table "
                         f"(max_len={model.max_len})")
    was_training = model.training
    model.eval()
    try:
        memory, src_mask, _ = model.encode(src, src_valid_lens)  # (B, S, D)
        tokens = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
        finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(max_len):
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


# --- the toy task: reverse a digit sequence ------------------------------------------------

def reversal_batch(batch_size: int, length: int, generator: torch.Generator | None = None,
                   min_length: int | None = None):
    """A batch of the reversal task: ``(src (B, L), tgt_in (B, L+1), tgt_out (B, L+1))``.

    Every source has ``length`` = L digits, or, with ``min_length``, a random length in
    [min_length, L] padded with PAD. ``tgt_out`` is the reversed digits then EOS (then PAD);
    ``tgt_in`` is BOS then the reversed digits (then PAD). Draws from ``generator``.
    """
    batch_size, length = _positive_int(batch_size, "batch_size"), _positive_int(length, "length")
    lo = length if min_length is None else _positive_int(min_length, "min_length")
    if lo > length:
        raise ValueError(f"min_length={lo} must be <= length={length}")
    digits = torch.randint(FIRST_DIGIT, VOCAB_SIZE, (batch_size, length), generator=generator)
    lens = torch.randint(lo, length + 1, (batch_size, 1), generator=generator)  # (B, 1)
    positions = torch.arange(length + 1)  # (L+1,)
    src = digits.masked_fill(positions[:length] >= lens, PAD)  # (B, L)
    source_index = (lens - 1 - positions).clamp(0, length - 1)  # (B, L+1): reversed order
    tgt_out = torch.gather(src, 1, source_index)  # (B, L+1)
    tgt_out = torch.where(positions < lens, tgt_out,
                          torch.where(positions == lens, EOS, PAD))  # digits, EOS, PAD
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS), tgt_out[:, :-1]], dim=1)
    return src, tgt_in.masked_fill(tgt_in == EOS, PAD), tgt_out


def source_valid_lens(src: torch.Tensor) -> torch.Tensor:
    """The number of non-PAD tokens of each source (B, S) → (B,)."""
    return (src != PAD).sum(dim=-1)


def reversal_model(seed: int = 0, **overrides) -> Seq2SeqTransformer:
    """The chapter's tiny model, seeded: D=64, H=4, F=128, 2+2 layers, max_len 16 (any
    argument of :class:`Seq2SeqTransformer` can be overridden)."""
    config = dict(vocab_size=VOCAB_SIZE, d_model=64, num_heads=4, ffn_hidden=128,
                  num_encoder_layers=2, num_decoder_layers=2, max_len=16)
    config.update(overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Seq2SeqTransformer(**config)


@torch.no_grad()
def token_accuracy(model: Seq2SeqTransformer, num_sequences: int = 1000, seed: int = 10_000,
                   length: int = 8, min_length: int | None = None,
                   batch_size: int = 500) -> float:
    """Fraction of target tokens (digits and EOS) that greedy decoding gets right on
    ``num_sequences`` held-out sequences drawn from ``seed`` (pick one the training did
    not use). A sequence that stops early counts its missing tokens as wrong."""
    generator = torch.Generator().manual_seed(seed)
    correct = total = 0
    for start in range(0, _positive_int(num_sequences, "num_sequences"), batch_size):
        n = min(batch_size, num_sequences - start)
        src, _, tgt_out = reversal_batch(n, length, generator, min_length)
        out = greedy_decode(model, src, length + 1, BOS, EOS, source_valid_lens(src))
        out = F.pad(out, (0, tgt_out.shape[1] - out.shape[1]), value=PAD)  # (B, L+1)
        real = tgt_out != PAD
        correct += int(((out == tgt_out) & real).sum())
        total += int(real.sum())
    return correct / total


def train_seq2seq(model: Seq2SeqTransformer, steps: int, batch_size: int = 64,
                  lr: float = 1e-3, warmup_steps: int = 0, seed: int = 0,
                  progress: bool = True, length: int = 8, min_length: int | None = None,
                  eval_every: int | None = None, target_accuracy: float | None = None,
                  eval_sequences: int = 500) -> dict:
    """Train on fresh reversal batches with Adam, cross-entropy ignoring PAD.

    The learning rate rises linearly from lr/warmup_steps to ``lr`` over ``warmup_steps``
    steps, then stays. Batches come from a generator seeded with ``seed`` and the global
    RNG (dropout) is seeded with it inside a ``fork_rng`` (restored afterwards), so a run is
    repeatable given the model's initial weights. A tqdm bar goes to stderr (``progress``).
    With ``eval_every``, :func:`token_accuracy` (held-out seed 10 000) is measured every so
    many steps, and training stops once it reaches ``target_accuracy``.

    Returns a dict: ``"loss"`` and ``"lr"`` per step, ``"accuracy"`` a list of
    ``(step, accuracy)``, ``"steps"`` done, ``"seconds"`` of wall time (evaluation included).
    """
    steps, warmup = _positive_int(steps, "steps"), int(warmup_steps)
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive finite number, got {lr!r}")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0)
    generator = torch.Generator().manual_seed(seed)
    history = {"loss": [], "lr": [], "accuracy": [], "steps": 0}
    start = time.perf_counter()
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for step in tqdm(range(1, steps + 1), disable=not progress, desc="training"):
            src, tgt_in, tgt_out = reversal_batch(batch_size, length, generator, min_length)
            logits, _ = model(src, tgt_in, source_valid_lens(src))  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
            optimizer.zero_grad()
            loss.backward()
            history["lr"].append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
            history["loss"].append(loss.item())
            history["steps"] = step
            if eval_every and step % eval_every == 0:
                accuracy = token_accuracy(model, eval_sequences, length=length,
                                          min_length=min_length)
                model.train()
                history["accuracy"].append((step, accuracy))
                if target_accuracy is not None and accuracy >= target_accuracy:
                    break
    history["seconds"] = time.perf_counter() - start
    return history


def stability_run(norm_first: bool, warmup_steps: int, lr: float = 1e-2, steps: int = 100,
                  seed: int = 0, num_layers: int = 4, d_model: int = 32,
                  batch_size: int = 32) -> list[float]:
    """Training losses (one per step) of a deeper, narrower model (``num_layers`` encoder and
    decoder layers, D = ``d_model``) at a high ``lr``, for comparing post-LN and pre-LN with
    and without warm-up. With the defaults (seed 0; mean loss of the last 20 steps),
    post-LN without warm-up ends near 1.76 and the other three between 0.26 and 0.76."""
    model = reversal_model(seed, d_model=d_model, num_heads=4, ffn_hidden=2 * d_model,
                           num_encoder_layers=num_layers, num_decoder_layers=num_layers,
                           norm_first=norm_first)
    return train_seq2seq(model, steps, batch_size=batch_size, lr=lr,
                         warmup_steps=warmup_steps, seed=seed, progress=False)["loss"]
