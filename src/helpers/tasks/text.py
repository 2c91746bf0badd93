"""The text of the decoder-only chapter: the book's own prose, characters as tokens, training.

The corpus is the Markdown of chapters 1–8 of this book (MIT licence, see LICENSE), with
links reduced to their text and HTML tags dropped. A frozen copy ships beside this module as
``book_prose.txt`` and :func:`book_prose` reads it, so the chapter's numbers do not move
when the prose of another chapter is edited; :func:`extract_prose` makes it again from the
notebooks (``python -m helpers.tasks.text chapters/0[1-8]_*.ipynb`` rewrites the file).

Shapes: B batch, T positions (``block_size``), V vocabulary (distinct characters), N the
number of characters in the corpus.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import torch
from torch.nn import functional as F

from helpers.checks import check_generator, check_int, check_real, check_tensor, require
from helpers.gpt import GPT

__all__ = [
    "PROSE_FILE",
    "extract_prose",
    "book_prose",
    "CharTokenizer",
    "lm_batch",
    "train_lm",
    "lm_loss",
    "unigram_loss",
    "norm_comparison",
]

#: The frozen corpus: the Markdown of chapters 1–8, as :func:`extract_prose` wrote it.
PROSE_FILE = Path(__file__).with_name("book_prose.txt")

_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^()\s]+\)")  # [text](url) → text
_TAG = re.compile(r"<[^>]+>")  # <details>, <summary>, …


def extract_prose(notebooks) -> str:
    """The Markdown cells of ``notebooks`` (paths to .ipynb files, in order) as plain text:
    links become their text, HTML tags are dropped, characters outside printable ASCII
    (and newline) are dropped, and cells are separated by a blank line."""
    cells = []
    for path in notebooks:
        notebook = json.loads(Path(path).read_text(encoding="utf-8"))
        for cell in notebook["cells"]:
            if cell["cell_type"] == "markdown":
                text = _TAG.sub("", _LINK.sub(r"\1", "".join(cell["source"])))
                cells.append("".join(c for c in text if c == "\n" or " " <= c <= "~").strip())
    return "\n\n".join(c for c in cells if c) + "\n"


def book_prose() -> str:
    """The frozen corpus, :data:`PROSE_FILE` (about 330,000 characters of the book's prose)."""
    if not PROSE_FILE.is_file():
        raise FileNotFoundError(
            f"{PROSE_FILE} is missing: reinstall the helpers from a clone of the book "
            "(pip install -e .), or rebuild it with python -m helpers.tasks.text "
            "chapters/0[1-8]_*.ipynb"
        )
    return PROSE_FILE.read_text(encoding="utf-8")


class CharTokenizer:
    """Characters as tokens: ``CharTokenizer(text)`` numbers the distinct characters of
    ``text`` in sorted order (V of them). ``encode(str) → ids (N,)`` (int64),
    ``decode(ids) → str``; ``chars`` lists them, ``vocab_size`` is V."""

    def __init__(self, text: str):
        require(isinstance(text, str) and len(text) > 0, "text must be a non-empty str")
        self.chars = sorted(set(text))
        self.vocab_size = len(self.chars)
        self._ids = {c: i for i, c in enumerate(self.chars)}

    def encode(self, text: str) -> torch.Tensor:
        """A str → its token ids (N,), int64; a character not in the vocabulary is refused."""
        require(isinstance(text, str), f"text must be a str, got {type(text).__name__}")
        unknown = sorted(set(text) - self._ids.keys())
        require(not unknown, f"text holds characters not in the vocabulary: {unknown[:5]}")
        return torch.tensor([self._ids[c] for c in text], dtype=torch.long)  # (N,)

    def decode(self, ids) -> str:
        """Token ids (a 1-D tensor or list) → the str they spell."""
        try:
            ids = torch.as_tensor(ids).reshape(-1).tolist()  # a tensor, list or list of 0-d
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"ids must be a 1-D sequence of token ids, got {ids!r}") from None
        require(
            all(isinstance(i, int) and 0 <= i < self.vocab_size for i in ids),
            f"ids must be token ids in [0, vocab_size={self.vocab_size})",
        )
        return "".join(self.chars[i] for i in ids)


def lm_batch(data: torch.Tensor, batch_size: int, block_size: int, generator=None):
    """B random windows of ``data`` (N,): inputs x (B, T) and targets y (B, T), y being x
    shifted one character on (the next character at every position), on ``data``'s device.
    The window starts are drawn on the CPU: ``generator`` is a CPU ``torch.Generator`` (or
    None, torch's global CPU stream) whatever the device of ``data``, so a seed gives the
    same windows on every device."""
    check_tensor(data, "data", "(N,)", ndim=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    block_size = check_int(block_size, "block_size", minimum=1)
    require(len(data) > block_size, f"data must be longer than block_size={block_size}")
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(block_size)  # (T,)
    x = data[starts[:, None] + offsets]  # (B, T)
    y = data[starts[:, None] + offsets + 1]  # (B, T)
    return x, y


def train_lm(
    model,
    data: torch.Tensor,
    steps: int,
    batch_size: int = 32,
    block_size: int = 64,
    lr: float = 3e-3,
    generator: torch.Generator | None = None,
) -> list[float]:
    """Train a language model (logits (B, T, V) first in what it returns) on random windows
    of ``data`` (N,) with AdamW and next-character cross-entropy, the learning rate decaying
    from ``lr`` to ``lr / 10`` along a cosine. The windows are drawn by :func:`lm_batch`
    (``generator`` a CPU ``torch.Generator``, on any device) and moved to the model's
    device. Returns the training loss of every step."""
    steps = check_int(steps, "steps", minimum=1)
    lr = check_real(lr, "lr", minimum=0, exclusive_minimum=True)
    generator = check_generator(generator)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    schedule = lambda step: 0.1 + 0.45 * (1 + math.cos(math.pi * step / steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    losses = []
    device = next(model.parameters()).device  # the batches go where the model is
    model.train()
    for _ in range(steps):
        x, y = (t.to(device) for t in lm_batch(data, batch_size, block_size, generator))
        logits = model(x)[0]  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def lm_loss(model, data: torch.Tensor, block_size: int = 64, max_windows: int = 64) -> float:
    """Mean next-character cross-entropy (nats) of ``model`` on up to ``max_windows``
    evenly spaced, non-overlapping windows of ``data`` (N,): the same windows every call,
    moved to the model's device."""
    check_tensor(data, "data", "(N,)", ndim=1)
    block_size = check_int(block_size, "block_size", minimum=1)
    max_windows = check_int(max_windows, "max_windows", minimum=1)
    count = min(max_windows, (len(data) - 1) // block_size)
    require(count >= 1, f"data must be longer than block_size={block_size}")
    stride = (len(data) - 1) // count
    starts = torch.arange(count) * stride  # (B,)
    offsets = torch.arange(block_size)  # (T,)
    x, y = data[starts[:, None] + offsets], data[starts[:, None] + offsets + 1]  # (B, T)
    device = next(model.parameters()).device
    x, y = x.to(device), y.to(device)
    was_training = model.training
    model.eval()
    logits = model(x)[0]  # (B, T, V)
    model.train(was_training)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()


def unigram_loss(train: torch.Tensor, test: torch.Tensor, vocab_size: int) -> float:
    """Cross-entropy (nats) on ``test`` (N,) of the unigram model of ``train`` (M,): every
    character predicted with its frequency in ``train`` (add-one smoothed), ignoring context."""
    check_tensor(train, "train", "(M,)", ndim=1)
    check_tensor(test, "test", "(N,)", ndim=1)
    vocab_size = check_int(vocab_size, "vocab_size", minimum=1)
    counts = torch.bincount(train, minlength=vocab_size).double() + 1  # (V,)
    log_probs = (counts / counts.sum()).log()  # (V,)
    return -log_probs[test].mean().item()


def norm_comparison(
    train: torch.Tensor,
    val: torch.Tensor,
    vocab_size: int,
    seeds,
    norms=("layer", "rms"),
    steps: int = 150,
    **model_kwargs,
) -> dict[str, list[float]]:
    """Train one :class:`~helpers.gpt.GPT` per norm and seed, everything else equal, and
    return each norm's validation losses (:func:`lm_loss` on ``val``), one per seed.

    A seed fixes both the initial weights and the batches, so the two norms of a seed see
    the same data in the same order. ``model_kwargs``: ``d_model``, ``num_heads``,
    ``ffn_hidden``, ``num_layers``, ``block_size`` (also the model's ``max_len``),
    ``batch_size`` and ``lr``."""
    kw = dict(d_model=32, num_heads=4, ffn_hidden=128, num_layers=1, block_size=32)
    kw = {**kw, "batch_size": 64, "lr": 2e-2, **model_kwargs}
    block_size, batch_size, lr = kw.pop("block_size"), kw.pop("batch_size"), kw.pop("lr")
    results: dict[str, list[float]] = {norm: [] for norm in norms}
    for seed in seeds:
        for norm in norms:
            torch.manual_seed(seed)
            model = GPT(vocab_size, max_len=block_size, norm=norm, **kw)
            generator = torch.Generator().manual_seed(seed)
            train_lm(model, train, steps, batch_size, block_size, lr, generator)
            results[norm].append(lm_loss(model, val, block_size))
    return results


if __name__ == "__main__":  # rebuild the frozen corpus from the notebooks named
    PROSE_FILE.write_text(extract_prose(sorted(sys.argv[1:])), encoding="utf-8")
    print(f"wrote {PROSE_FILE} ({PROSE_FILE.stat().st_size:,} bytes)")
