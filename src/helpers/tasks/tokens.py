"""Toy token sequences for the masking chapter: padding, vocabularies, tables.

A batch of sentences of different lengths becomes one rectangular tensor by appending (or
prepending) a padding token; the number of real tokens in each row is its *valid length*,
from which :func:`helpers.masks.valid_length_mask` builds the mask. :func:`format_matrix`
prints a small mask or weight matrix as an aligned table with token labels. The special
tokens are the strings ``PAD_TOKEN``, ``BOS_TOKEN`` and ``EOS_TOKEN``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from helpers.checks import (
    as_real_array,
    check_vocab,
    require,
)

__all__ = [
    "PAD_TOKEN",
    "BOS_TOKEN",
    "EOS_TOKEN",
    "pad_tokens",
    "build_vocab",
    "encode",
    "decode",
    "format_matrix",
]

PAD_TOKEN, BOS_TOKEN, EOS_TOKEN = "<pad>", "<bos>", "<eos>"


def _token_lists(sentences, name: str = "sentences") -> list[list[str]]:
    """Return ``sentences`` as lists of string tokens (a string is split on whitespace)."""
    if isinstance(sentences, (str, bytes)) or not isinstance(sentences, Sequence):
        raise ValueError(
            f"{name} must be a list of sentences (strings or token lists), "
            f"got {type(sentences).__name__}"
        )
    tokens = []
    for i, sentence in enumerate(sentences):
        row = sentence.split() if isinstance(sentence, str) else list(sentence)
        if not all(isinstance(token, str) for token in row):
            raise ValueError(
                f"{name}[{i}] must be a string or a list of string tokens, got {sentence!r}"
            )
        tokens.append(row)
    return tokens


def pad_tokens(
    sentences, *, length: int | None = None, pad: str = PAD_TOKEN, side: str = "right"
) -> tuple[list[list[str]], torch.Tensor]:
    """Pad sentences of different lengths to one length T with ``pad`` tokens.

    Each sentence is a string (split on whitespace) or a list of tokens. Right padding (the
    default) appends the pad tokens, so the real tokens of every row start at position 0;
    left padding prepends them, so the real tokens end at position T - 1 (what a model that
    generates text to the right of a batch of prompts needs).

    Args:
        sentences: B sentences.
        length: T, the padded length; by default the longest sentence's length.
        pad: the padding token.
        side: ``"right"`` or ``"left"``.

    Returns:
        ``(padded, valid_lens)``: B token lists of length T, and an int64 tensor of shape
        (B,) holding the number of real tokens in each row.
    """
    tokens = _token_lists(sentences)
    require(isinstance(pad, str), f"pad must be a string token, got {pad!r}")
    if not isinstance(side, str) or side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    longest = max((len(row) for row in tokens), default=0)
    if length is None:
        length = longest
    if isinstance(length, bool) or not isinstance(length, int) or length < longest:
        raise ValueError(
            f"length must be an integer >= the longest sentence ({longest} tokens), got {length!r}"
        )
    padded = [
        row + [pad] * (length - len(row)) if side == "right" else [pad] * (length - len(row)) + row
        for row in tokens
    ]
    valid_lens = torch.tensor([len(row) for row in tokens], dtype=torch.long)  # (B,)
    return padded, valid_lens


def build_vocab(
    sentences, specials: Sequence[str] = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN)
) -> dict[str, int]:
    """A token -> id dictionary: the special tokens first (``<pad>`` gets id 0), then every
    other token in order of first appearance.

    Args:
        sentences: sentences (strings or token lists), as for :func:`pad_tokens`.
        specials: tokens that get the first ids, in this order.

    Returns:
        A dict mapping each distinct token to an id in ``range(len(vocab))``.
    """
    if (
        isinstance(specials, (str, bytes))
        or not isinstance(specials, Sequence)
        or not all(isinstance(token, str) for token in specials)
    ):
        raise ValueError(f"specials must be a list of string tokens, got {specials!r}")
    vocab: dict[str, int] = {}
    for token in list(specials) + [t for row in _token_lists(sentences) for t in row]:
        vocab.setdefault(token, len(vocab))
    return vocab


def encode(padded, vocab: dict[str, int]) -> torch.Tensor:
    """Turn B token lists of equal length T into an int64 tensor of ids, shape (B, T).

    Args:
        padded: B token lists, all of length T (pad them first with :func:`pad_tokens`).
        vocab: the token -> id dictionary from :func:`build_vocab`.

    Returns:
        An int64 tensor of shape (B, T).
    """
    rows = _token_lists(padded, "padded")
    check_vocab(vocab)
    lengths = sorted({len(row) for row in rows})
    if len(lengths) > 1:
        raise ValueError(
            f"padded must hold token lists of one length T, got lengths "
            f"{lengths}; pad them first with pad_tokens"
        )
    unknown = sorted({t for row in rows for t in row if t not in vocab})
    if unknown:
        raise ValueError(f"padded holds tokens that are not in vocab: {unknown}")
    return torch.tensor([[vocab[t] for t in row] for row in rows], dtype=torch.long)


def decode(ids: torch.Tensor, vocab: dict[str, int]) -> list[list[str]]:
    """The inverse of :func:`encode`: ids of shape (B, T) -> B lists of T tokens."""
    if (
        not isinstance(ids, torch.Tensor)
        or ids.dim() != 2
        or ids.is_floating_point()
        or ids.is_complex()
        or ids.dtype == torch.bool
    ):
        got = (tuple(ids.shape), ids.dtype) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"ids must be a 2-D integer tensor (B, T), got {got}")
    check_vocab(vocab)
    tokens = {i: t for t, i in vocab.items()}
    missing = sorted({int(i) for i in ids.flatten()} - set(tokens))
    if missing:
        raise ValueError(f"ids holds ids that are not in vocab: {missing}")
    return [[tokens[int(i)] for i in row] for row in ids]


def format_matrix(
    matrix,
    *,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    fmt: str = "{:.3f}",
    true: str = "1",
    false: str = "·",
) -> str:
    """A 2-D matrix (Q, K) as an aligned text table, for printing masks and weights.

    A boolean matrix is written with ``true`` / ``false`` (``1`` and ``·`` by default, so a
    mask reads at a glance); any other matrix with ``fmt`` (``-inf`` and ``nan`` print as
    such). Columns are right-aligned to their widest entry or label.

    Args:
        matrix: a 2-D tensor, array or nested list of shape (Q, K).
        row_labels: Q labels printed to the left of the rows (e.g. query tokens).
        col_labels: K labels printed above the columns (e.g. key tokens).
        fmt: the format of a number.
        true, false: the text of a True and a False entry of a boolean matrix.

    Returns:
        The table as one string of Q (+1 with ``col_labels``) lines.
    """
    is_bool = getattr(matrix, "dtype", None) in (torch.bool, np.dtype(bool))  # tensor or array
    data = as_real_array(matrix)
    if data.ndim != 2:
        raise ValueError(f"matrix must be 2-D (Q, K), got shape {tuple(data.shape)}")
    num_rows, num_cols = data.shape
    for name, labels, size in (
        ("row_labels", row_labels, num_rows),
        ("col_labels", col_labels, num_cols),
    ):
        if labels is None:
            continue
        if (
            isinstance(labels, (str, bytes))
            or not isinstance(labels, Sequence)
            or not all(isinstance(label, str) for label in labels)
        ):
            raise ValueError(f"{name} must be a list of strings, got {labels!r}")
        if len(labels) != size:
            raise ValueError(
                f"{name} must hold {size} labels for a matrix of shape "
                f"{tuple(data.shape)}, got {len(labels)}"
            )
    for name, text in (("fmt", fmt), ("true", true), ("false", false)):
        require(isinstance(text, str), f"{name} must be a string, got {text!r}")
    try:
        cells = [
            [(true if value else false) if is_bool else fmt.format(value) for value in row]
            for row in data
        ]
    except (ValueError, TypeError, IndexError, KeyError) as error:
        raise ValueError(
            f"fmt must format one number, e.g. '{{:.3f}}', got {fmt!r} ({error})"
        ) from None
    widths = [
        max(
            [len(cells[i][j]) for i in range(num_rows)]
            + ([len(col_labels[j])] if col_labels is not None else []),
            default=0,
        )
        for j in range(num_cols)
    ]
    left = max((len(label) for label in row_labels), default=0) if row_labels else 0
    lines = []
    if col_labels is not None:
        lines.append(" " * left + "".join(f"  {c:>{w}}" for c, w in zip(col_labels, widths)))
    for i, row in enumerate(cells):
        label = f"{row_labels[i]:>{left}}" if row_labels is not None else ""
        lines.append(label + "".join(f"  {c:>{w}}" for c, w in zip(row, widths)))
    return "\n".join(lines)
