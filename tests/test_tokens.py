"""Tests for helpers.tasks.tokens: padding, vocabularies and the text tables of chapter 4."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from helpers.masks import valid_length_mask
from helpers.tasks.tokens import (
    BOS_TOKEN,
    EOS_TOKEN,
    PAD_TOKEN,
    build_vocab,
    decode,
    encode,
    format_matrix,
    pad_tokens,
)

SENTENCES = ["I like you", "hello", "attention is all you need"]


def test_pad_tokens_right_and_valid_lens():
    padded, valid_lens = pad_tokens(SENTENCES)
    assert padded[1] == ["hello", PAD_TOKEN, PAD_TOKEN, PAD_TOKEN, PAD_TOKEN]
    assert padded[2] == "attention is all you need".split()
    assert torch.equal(valid_lens, torch.tensor([3, 1, 5]))
    assert valid_lens.dtype == torch.long


def test_pad_tokens_left_and_given_length():
    padded, valid_lens = pad_tokens([["a", "b"], ["c"]], length=4, side="left", pad="_")
    assert padded == [["_", "_", "a", "b"], ["_", "_", "_", "c"]]
    assert valid_lens.tolist() == [2, 1]


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(length=2), r"length must be an integer >= the longest sentence \(5 tokens\), got 2"),
        (dict(side="middle"), r"side must be 'right' or 'left', got 'middle'"),
        (dict(length=True), r"length must be an integer"),
    ],
)
def test_pad_tokens_rejects_bad_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        pad_tokens(SENTENCES, **kwargs)


@pytest.mark.parametrize("sentences", ["a single string", [["a", 1]], 3])
def test_pad_tokens_rejects_bad_sentences(sentences):
    with pytest.raises(ValueError, match=r"sentences"):
        pad_tokens(sentences)


@given(
    st.lists(st.lists(st.sampled_from("abcde"), min_size=0, max_size=6), min_size=1, max_size=5),
    st.integers(0, 3),
    st.sampled_from(["right", "left"]),
)
def test_pad_tokens_property(sentences, extra, side):
    longest = max(len(s) for s in sentences)
    padded, valid_lens = pad_tokens(sentences, length=longest + extra, side=side)
    mask = torch.tensor([[t != PAD_TOKEN for t in row] for row in padded])
    assert all(len(row) == longest + extra for row in padded)
    assert valid_lens.tolist() == [len(s) for s in sentences]
    if side == "right":  # right padding is exactly what valid_length_mask describes
        assert torch.equal(mask, valid_length_mask(valid_lens, longest + extra))
    else:
        assert torch.equal(mask, valid_length_mask(valid_lens, longest + extra).flip(-1))
    kept = [[t for t in row if t != PAD_TOKEN] for row in padded]
    assert kept == sentences


def test_build_vocab_specials_first_then_first_appearance():
    vocab = build_vocab(["b a", "a c"])
    assert list(vocab) == [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, "b", "a", "c"]
    assert list(vocab.values()) == list(range(6))
    assert build_vocab(["x"], specials=())["x"] == 0


def test_encode_decode_round_trip():
    padded, _ = pad_tokens(SENTENCES)
    vocab = build_vocab(SENTENCES)
    ids = encode(padded, vocab)
    assert ids.shape == (3, 5) and ids.dtype == torch.long
    assert (ids[1, 1:] == vocab[PAD_TOKEN]).all() and vocab[PAD_TOKEN] == 0
    assert decode(ids, vocab) == padded


def test_encode_rejects_ragged_and_unknown():
    vocab = build_vocab(["a b"])
    with pytest.raises(ValueError, match=r"one length T, got lengths \[1, 2\]"):
        encode([["a"], ["a", "b"]], vocab)
    with pytest.raises(ValueError, match=r"not in vocab: \['z'\]"):
        encode([["a", "z"]], vocab)


def test_decode_rejects_bad_ids():
    vocab = build_vocab(["a"])
    with pytest.raises(ValueError, match=r"2-D integer tensor"):
        decode(torch.zeros(3, dtype=torch.long), vocab)
    with pytest.raises(ValueError, match=r"not in vocab: \[9\]"):
        decode(torch.tensor([[0, 9]]), vocab)


def test_format_matrix_bool_with_labels():
    mask = torch.tensor([[True, False], [True, True]])
    text = format_matrix(mask, row_labels=["q0", "query1"], col_labels=["k0", "key1"])
    assert text.splitlines() == [
        "        k0  key1",
        "    q0   1     ·",
        "query1   1     1",
    ]


def test_format_matrix_numbers_inf_and_nan():
    text = format_matrix(torch.tensor([[0.5, float("-inf")], [float("nan"), 1.0]]), fmt="{:.2f}")
    assert text.splitlines() == ["  0.50  -inf", "   nan  1.00"]


def test_format_matrix_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"must be 2-D \(Q, K\), got shape \(3,\)"):
        format_matrix(torch.zeros(3))
    with pytest.raises(ValueError, match=r"col_labels must hold 2 labels"):
        format_matrix(torch.zeros(2, 2), col_labels=["a"])


def test_special_tokens():
    assert (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN) == ("<pad>", "<bos>", "<eos>")


def test_pad_tokens_rejects_a_pad_that_is_not_a_string():
    with pytest.raises(ValueError, match="pad must be a string token, got 0"):
        pad_tokens(SENTENCES, pad=0)


@pytest.mark.parametrize("specials", ["<pad>", [PAD_TOKEN, 1], 3])
def test_build_vocab_rejects_bad_specials(specials):
    with pytest.raises(ValueError, match="specials must be a list of string tokens"):
        build_vocab(["a"], specials=specials)


@pytest.mark.parametrize("vocab", [["a"], {"a": "0"}, {"a": True}, None])
def test_encode_and_decode_reject_a_bad_vocab(vocab):
    with pytest.raises(ValueError, match="vocab must be a dict"):
        encode([["a"]], vocab)
    with pytest.raises(ValueError, match="vocab must be a dict"):
        decode(torch.zeros(1, 1, dtype=torch.long), vocab)


@pytest.mark.parametrize(
    "ids", [torch.zeros(1, 2, dtype=torch.bool), torch.zeros(1, 2, dtype=torch.complex64), [[0, 1]]]
)
def test_decode_rejects_ids_that_are_not_integers(ids):
    with pytest.raises(ValueError, match=r"ids must be a 2-D integer tensor"):
        decode(ids, build_vocab(["a"]))


def test_format_matrix_empty_axes():
    assert format_matrix(torch.zeros(0, 3)) == ""
    assert format_matrix(torch.zeros(2, 0), row_labels=["a", "bb"]).splitlines() == [" a", "bb"]
    assert format_matrix(torch.zeros(0, 2), col_labels=["k0", "k1"]) == "  k0  k1"


def test_format_matrix_numpy_and_lists():
    assert format_matrix(np.eye(2), fmt="{:.0f}").splitlines() == ["  1  0", "  0  1"]
    assert format_matrix([[1, 2]], fmt="{:.1f}") == "  1.0  2.0"


@pytest.mark.parametrize(
    "matrix", [[["a", "b"]], [[1, 2], [3]], torch.ones(2, 2, dtype=torch.cfloat), "ab", None]
)
def test_format_matrix_rejects_what_is_not_a_real_matrix(matrix):
    with pytest.raises(ValueError, match="matrix"):
        format_matrix(matrix)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(fmt=3), "fmt must be a string"),
        (dict(fmt="{:d}"), "fmt must format one number"),
        (dict(fmt="{0} {1}"), "fmt must format one number"),
        (dict(true=1), "true must be a string"),
        (dict(row_labels="ab"), "row_labels must be a list of strings"),
        (dict(col_labels=[1, 2]), "col_labels must be a list of strings"),
    ],
)
def test_format_matrix_rejects_bad_formats_and_labels(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        format_matrix(torch.zeros(2, 2), **kwargs)
