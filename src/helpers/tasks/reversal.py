"""The reversal task of the Transformer chapter: data, the model's settings, training.

The task: reverse a sequence of digits. Token ids: ``PAD_ID = 0``, ``BOS_ID = 1``,
``EOS_ID = 2`` and the digits 0–9 as ids 3–12 (``FIRST_DIGIT = 3``, ``VOCAB_SIZE = 13``).
For the source ``4 7 1`` the decoder reads ``BOS 1 7 4`` (``tgt_in``, teacher forcing) and
must predict ``1 7 4 EOS`` (``tgt_out``). Everything is generated in code from a seed;
nothing is downloaded. The model is :class:`helpers.seq2seq.Seq2SeqTransformer`.

Shapes: B batch, S source positions (the digit count), T = S + 1 target positions, V vocabulary.
"""

from __future__ import annotations

import contextlib
import time

import torch
from torch.nn import functional as F
from tqdm.auto import tqdm

from helpers.checks import (
    check_bool,
    check_generator,
    check_instance,
    check_int,
    check_lengths,
    check_real,
    check_tensor,
    require,
)
from helpers.seq2seq import Seq2SeqTransformer, greedy_decode

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "FIRST_DIGIT",
    "VOCAB_SIZE",
    "reversal_batch",
    "source_valid_lens",
    "reversal_model",
    "train_seq2seq",
    "token_accuracy",
    "stability_run",
]

PAD_ID, BOS_ID, EOS_ID, FIRST_DIGIT = 0, 1, 2, 3
VOCAB_SIZE = FIRST_DIGIT + 10
_OPTIMIZERS = {"adam": torch.optim.Adam, "radam": torch.optim.RAdam}


def reversal_batch(
    batch_size: int,
    length: int,
    generator: torch.Generator | None = None,
    min_length: int | None = None,
):
    """A batch of the reversal task: ``(src (B, S), tgt_in (B, S+1), tgt_out (B, S+1))``.

    Every source has ``length`` = S digits, or, with ``min_length``, a random length in
    [min_length, S] padded with PAD_ID. ``tgt_out`` is the reversed digits then EOS_ID
    (then PAD_ID); ``tgt_in`` is BOS_ID then the reversed digits (then PAD_ID). Draws from
    ``generator`` (torch's global generator if None), a CPU ``torch.Generator``: the batch
    is made on the CPU (move it with ``.to(device)``). ``batch_size`` may be 0.
    """
    batch_size = check_int(batch_size, "batch_size")
    length, lo = check_lengths(length, min_length)
    check_generator(generator)
    digits = torch.randint(FIRST_DIGIT, VOCAB_SIZE, (batch_size, length), generator=generator)
    lens = torch.randint(lo, length + 1, (batch_size, 1), generator=generator)  # (B, 1)
    positions = torch.arange(length + 1)  # (S+1,)
    src = digits.masked_fill(positions[:length] >= lens, PAD_ID)  # (B, S)
    source_index = (lens - 1 - positions).clamp(0, length - 1)  # (B, S+1): reversed order
    tgt_out = torch.gather(src, 1, source_index)  # (B, S+1)
    tgt_out = torch.where(
        positions < lens, tgt_out, torch.where(positions == lens, EOS_ID, PAD_ID)
    )  # digits, EOS_ID, PAD_ID
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS_ID), tgt_out[:, :-1]], dim=1)
    return src, tgt_in.masked_fill(tgt_in == EOS_ID, PAD_ID), tgt_out


def source_valid_lens(src: torch.Tensor) -> torch.Tensor:
    """The number of non-PAD_ID tokens of each source: integer ids (B, S) → (B,)."""
    check_tensor(src, "src", "(B, S)", ndim=2)
    if src.is_floating_point() or src.is_complex() or src.dtype == torch.bool:
        raise ValueError(
            f"src must be an integer tensor of token ids (B, S), got dtype {src.dtype}"
        )
    return (src != PAD_ID).sum(dim=-1)


@contextlib.contextmanager
def _seeded(seed: int, device: torch.device):
    """Seed the random stream of ``device`` (the CPU's, or one CUDA device's) with ``seed``
    for the block, and give the caller's streams back afterwards: ``torch.manual_seed``
    inside ``fork_rng(devices=[])`` would reseed every CUDA stream and restore none."""
    cuda = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.default_generator.manual_seed(seed)
        if cuda:
            torch.cuda.default_generators[device.index or 0].manual_seed(seed)
        yield


def reversal_model(seed: int = 0, **overrides) -> Seq2SeqTransformer:
    """The chapter's tiny model, seeded: D=64, H=4, F=128, 2+2 layers, max_len 16 (any
    argument of :class:`Seq2SeqTransformer` can be overridden)."""
    seed = check_int(seed, "seed")
    config = dict(
        vocab_size=VOCAB_SIZE,
        d_model=64,
        num_heads=4,
        ffn_hidden=128,
        num_encoder_layers=2,
        num_decoder_layers=2,
        max_len=16,
    )
    config.update(overrides)
    with _seeded(seed, torch.device("cpu")):  # the weights are drawn on the CPU
        return Seq2SeqTransformer(**config)


@torch.no_grad()
def token_accuracy(
    model: Seq2SeqTransformer,
    num_sequences: int = 1000,
    seed: int = 10_000,
    length: int = 8,
    min_length: int | None = None,
    batch_size: int = 500,
) -> float:
    """Fraction of target tokens (digits and EOS_ID) that greedy decoding gets right on
    ``num_sequences`` held-out sequences drawn from ``seed`` (pick one the training did
    not use). A sequence that stops early counts its missing tokens as wrong."""
    check_instance(model, Seq2SeqTransformer, "model")
    num_sequences = check_int(num_sequences, "num_sequences", minimum=1)
    generator = torch.Generator().manual_seed(check_int(seed, "seed"))
    length, _ = check_lengths(length, min_length)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    device = next(model.parameters()).device  # the batches go where the model is
    correct = total = 0
    for start in range(0, num_sequences, batch_size):
        n = min(batch_size, num_sequences - start)
        src, _, tgt_out = (t.to(device) for t in reversal_batch(n, length, generator, min_length))
        out = greedy_decode(model, src, length + 1, BOS_ID, EOS_ID, source_valid_lens(src))
        out = F.pad(out, (0, tgt_out.shape[1] - out.shape[1]), value=PAD_ID)  # (B, S+1)
        real = tgt_out != PAD_ID
        correct += int(((out == tgt_out) & real).sum())
        total += int(real.sum())
    return correct / total


def train_seq2seq(
    model: Seq2SeqTransformer,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    warmup_steps: int = 0,
    seed: int = 0,
    progress: bool = False,
    length: int = 8,
    min_length: int | None = None,
    eval_every: int | None = None,
    target_accuracy: float | None = None,
    eval_sequences: int = 500,
    stop_loss: float | None = None,
    optimizer: str = "adam",
) -> dict:
    """Train on fresh reversal batches with Adam (or ``optimizer="radam"``: RAdam, Liu et
    al. 2020), cross-entropy ignoring PAD_ID.

    The learning rate rises linearly from lr/warmup_steps to ``lr`` over ``warmup_steps``
    steps, then stays. Batches come from a generator seeded with ``seed`` and the global
    RNG (dropout) is seeded with it inside a ``fork_rng`` (restored afterwards), so a run is
    repeatable given the model's initial weights. With ``progress=True`` a tqdm bar shows the steps (off by default, so a saved notebook keeps no bar).
    With ``eval_every`` (a positive number of steps; None or 0: never), :func:`token_accuracy`
    (held-out seed 10 000) is measured every so many steps, and training stops once it
    reaches ``target_accuracy`` (in [0, 1]). With ``stop_loss`` (a positive number),
    training stops once the mean training loss of the last 5 steps is below it.

    Returns a dict: ``"loss"`` and ``"lr"`` per step, ``"accuracy"`` a list of
    ``(step, accuracy)``, ``"steps"`` done, ``"seconds"`` of wall time (evaluation included).
    """
    check_instance(model, Seq2SeqTransformer, "model")
    steps = check_int(steps, "steps", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    lr = check_real(lr, "lr", minimum=0, exclusive_minimum=True)
    warmup = check_int(warmup_steps, "warmup_steps")
    seed = check_int(seed, "seed")
    check_bool(progress, "progress")
    length, _ = check_lengths(length, min_length)
    eval_every = 0 if eval_every is None else check_int(eval_every, "eval_every")
    if target_accuracy is not None:
        target_accuracy = check_real(target_accuracy, "target_accuracy", minimum=0, maximum=1)
        require(
            eval_every > 0,
            f"target_accuracy needs eval_every > 0 (the accuracy is measured every so many "
            f"steps), got eval_every={eval_every}",
        )
    eval_sequences = check_int(eval_sequences, "eval_sequences", minimum=1)
    if stop_loss is not None:
        stop_loss = check_real(stop_loss, "stop_loss", minimum=0, exclusive_minimum=True)
    require(
        isinstance(optimizer, str) and optimizer in _OPTIMIZERS,
        f"optimizer must be one of {sorted(_OPTIMIZERS)}, got {optimizer!r}",
    )
    optimizer = _OPTIMIZERS[optimizer](model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
    )
    generator = torch.Generator().manual_seed(seed)
    history = {"loss": [], "lr": [], "accuracy": [], "steps": 0}
    start = time.perf_counter()
    model.train()
    device = next(model.parameters()).device  # the batches go where the model is
    with _seeded(seed, device):  # dropout's draws: repeatable, the caller's stream untouched
        for step in tqdm(range(1, steps + 1), disable=not progress, desc="training"):
            batch = reversal_batch(batch_size, length, generator, min_length)
            src, tgt_in, tgt_out = (t.to(device) for t in batch)
            logits, _ = model(src, tgt_in, source_valid_lens(src))  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)
            optimizer.zero_grad()
            loss.backward()
            history["lr"].append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
            history["loss"].append(loss.item())
            history["steps"] = step
            if stop_loss is not None and step >= 5 and sum(history["loss"][-5:]) / 5 < stop_loss:
                break
            if eval_every and step % eval_every == 0:
                accuracy = token_accuracy(
                    model, eval_sequences, length=length, min_length=min_length
                )
                model.train()
                history["accuracy"].append((step, accuracy))
                if target_accuracy is not None and accuracy >= target_accuracy:
                    break
    history["seconds"] = time.perf_counter() - start
    return history


def stability_run(
    norm_first: bool,
    warmup_steps: int,
    lr: float = 1e-2,
    steps: int = 100,
    seed: int = 0,
    num_layers: int = 4,
    d_model: int = 32,
    batch_size: int = 32,
    length: int = 8,
    stop_loss: float | None = None,
    optimizer: str = "adam",
) -> list[float]:
    """Training losses (one per step) of a narrow model (``num_layers`` encoder and decoder
    layers, D = ``d_model``, F = 2D, 4 heads) on sources of ``length`` digits at a high
    ``lr``, for comparing post-LN and pre-LN with and without warm-up. With ``stop_loss``
    the run stops once the mean loss of its last 5 steps is below it, so the number of
    losses returned is the number of steps it took to learn (or ``steps`` if it never did).
    ``optimizer`` is "adam" or "radam"."""
    d_model = check_int(d_model, "d_model", minimum=1)
    model = reversal_model(
        seed,
        d_model=d_model,
        num_heads=4,
        ffn_hidden=2 * d_model,
        num_encoder_layers=num_layers,
        num_decoder_layers=num_layers,
        norm_first=norm_first,
    )
    return train_seq2seq(
        model,
        steps,
        batch_size=batch_size,
        lr=lr,
        warmup_steps=warmup_steps,
        seed=seed,
        progress=False,
        length=length,
        stop_loss=stop_loss,
        optimizer=optimizer,
    )["loss"]
