"""helpers.seq2seq: the full model and greedy decoding.

The model is built with :func:`helpers.tasks.reversal.reversal_model` (the chapter's
settings, seeded) and fed token ids of the reversal task; the task itself and the training
loop are tested in test_reversal.py.
"""

import pytest
import torch

from helpers import transformer
from helpers.seq2seq import Seq2SeqTransformer, greedy_decode
from helpers.tasks.reversal import BOS_ID, EOS_ID, FIRST_DIGIT, PAD_ID, VOCAB_SIZE, reversal_model

B, S, T = 4, 7, 5
SMALL = dict(d_model=16, num_heads=2, ffn_hidden=32, num_encoder_layers=1, num_decoder_layers=1)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: one thread avoids thread contention on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _tokens(shape, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(FIRST_DIGIT, VOCAB_SIZE, shape, generator=generator)


# --- the model ----------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_model_shapes_and_attention_dict(norm_first, positional):
    model = reversal_model(
        0, **{**SMALL, "num_decoder_layers": 2}, norm_first=norm_first, positional=positional
    )
    assert isinstance(model, Seq2SeqTransformer)
    src, tgt_in = _tokens((B, S), 0), _tokens((B, T), 1)
    logits, attention = model(src, tgt_in, torch.tensor([7, 3, 5, 1]))
    assert logits.shape == (B, T, VOCAB_SIZE)
    assert [len(attention[k]) for k in ("encoder_self", "decoder_self", "cross")] == [1, 2, 2]
    assert attention["encoder_self"][0].shape == (B, 2, S, S)
    assert all(w.shape == (B, 2, T, T) for w in attention["decoder_self"])
    assert all(w.shape == (B, 2, T, S) for w in attention["cross"])
    assert torch.all(attention["cross"][0][1, :, :, 3:] == 0)  # padding of source 1


def test_model_lives_in_seq2seq_only():
    """No re-export: helpers.transformer holds the blocks, helpers.seq2seq the model."""
    assert not hasattr(transformer, "Seq2SeqTransformer")
    assert not hasattr(transformer, "greedy_decode")


def test_model_decoder_is_causal_and_ignores_source_padding():
    model = reversal_model(0, **SMALL)
    src, tgt_in = _tokens((B, S), 2), _tokens((B, T), 3)
    logits, _ = model(src, tgt_in)
    for t in range(T - 1):
        changed = tgt_in.clone()
        changed[:, t + 1 :] = _tokens((B, T - t - 1), 10 + t)
        torch.testing.assert_close(model(src, changed)[0][:, : t + 1], logits[:, : t + 1])
    lens = torch.tensor([S, 4, 2, 6])
    padded = src.clone()
    padded[torch.arange(S) >= lens[:, None]] = PAD_ID  # different tokens beyond the lengths
    torch.testing.assert_close(model(padded, tgt_in, lens)[0], model(src, tgt_in, lens)[0])


def test_model_rejects_bad_input():
    model = reversal_model(0, **SMALL, max_len=6)
    src = _tokens((B, S - 1), 0)
    with pytest.raises(ValueError, match="tgt_in"):
        model(src, _tokens((B, 7), 1))  # longer than max_len = 6
    with pytest.raises(ValueError, match="src"):
        model(_tokens((B, 7), 1), _tokens((B, 3), 1))
    with pytest.raises(ValueError, match="tgt_in"):
        model(src, torch.full((B, 3), VOCAB_SIZE))  # not a token id
    with pytest.raises(ValueError, match="src"):
        model(src.float(), _tokens((B, 3), 1))
    with pytest.raises(ValueError, match="d_model"):
        reversal_model(0, d_model=18, num_heads=4)  # 18 % 4 != 0
    with pytest.raises(ValueError, match="ffn_hidden"):
        reversal_model(0, ffn_hidden=0)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, 7, BOS_ID)
    tgt = _tokens((B, 3), 1)
    for bad in (torch.full((1,), 2), torch.full((B, 1), 2), torch.full((B + 1,), 2), [2] * B):
        with pytest.raises(ValueError, match=r"src_valid_lens must have shape \(B,\)"):
            model(src, tgt, bad)  # (1,) would silently apply one length to every sequence


def test_decode_names_the_positional_table_and_memory():
    """The texts the chapter prints."""
    model = reversal_model(0)
    with pytest.raises(ValueError) as error:
        model.decode(torch.full((1, 17), BOS_ID), torch.zeros(1, 8, 64))
    assert str(error.value) == (
        "tgt_in has 17 positions but the positional table holds max_len=16 (shape (1, 17))"
    )


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(vocab_size=0), "vocab_size must be a positive integer"),
        (dict(num_encoder_layers=0), "num_encoder_layers must be a positive integer"),
        (dict(num_decoder_layers=1.5), "num_decoder_layers must be a positive integer"),
        (dict(max_len=-1), "max_len must be a positive integer"),
        (dict(positional=["learned"]), "positional must be 'sinusoidal' or 'learned'"),
        (dict(norm_first="False"), "norm_first must be True or False"),
        (dict(dropout=float("nan")), "dropout must be a probability"),
    ],
)
def test_model_rejects_bad_settings(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        reversal_model(0, **{**SMALL, **kwargs})


def test_model_rejects_mismatched_batches_and_bad_lengths():
    model = reversal_model(0, **SMALL)
    src, tgt = _tokens((B, S), 0), _tokens((B + 1, T), 1)
    with pytest.raises(ValueError, match=r"tgt_in must have src's batch size B=4"):
        model(src, tgt)
    tgt = _tokens((B, T), 1)
    with pytest.raises(ValueError, match="src_valid_lens must be an integer tensor"):
        model(src, tgt, torch.full((B,), 2.5))
    with pytest.raises(ValueError, match=r"src_valid_lens must hold lengths in \[0, S=7\]"):
        model(src, tgt, torch.tensor([7, 8, 1, 1]))
    with pytest.raises(ValueError, match=r"src_valid_lens must hold lengths in \[0, S=7\]"):
        model(src, tgt, torch.tensor([7, -1, 1, 1]))
    with pytest.raises(ValueError, match=r"tgt_in must be a torch.Tensor"):
        model(src, [[BOS_ID]])


def test_model_handles_an_empty_batch():
    model = reversal_model(0, **SMALL)
    logits, attention = model(_tokens((0, S), 0), _tokens((0, T), 1))
    assert logits.shape == (0, T, VOCAB_SIZE)
    assert attention["cross"][0].shape == (0, 2, T, S)


# --- greedy decoding ------------------------------------------------------------------------


def test_greedy_decode_shapes_and_consistency():
    model = reversal_model(0, **SMALL).train()
    src = _tokens((B, S), 4)
    tokens, cross = greedy_decode(model, src, 6, BOS_ID, return_attention=True)
    assert model.training  # mode restored
    assert tokens.shape == (B, 6) and tokens.dtype == torch.long
    assert len(cross) == 1 and cross[0].shape == (B, 2, 6, S)
    # every token is the argmax of a teacher-forced pass over the decoded prefix
    tgt_in = torch.cat([torch.full((B, 1), BOS_ID), tokens[:, :-1]], dim=1)
    model.eval()
    logits, attention = model(src, tgt_in)
    assert torch.equal(logits.argmax(-1), tokens)
    torch.testing.assert_close(attention["cross"][0], cross[0])


def test_greedy_decode_stops_at_eos_and_pads():
    model = reversal_model(0, **SMALL)
    with torch.no_grad():  # make EOS the most likely token after the first step
        model.output.bias.zero_()
        model.output.bias[EOS_ID] = 50.0
    tokens = greedy_decode(model, _tokens((B, S), 5), 8, BOS_ID, eos=EOS_ID)
    assert tokens.shape == (B, 1) and torch.all(tokens == EOS_ID)  # stopped early
    with torch.no_grad():
        model.output.bias[EOS_ID] = 0.0
        model.output.bias[5] = 50.0
    assert greedy_decode(model, _tokens((B, S), 5), 8, BOS_ID, eos=EOS_ID).shape == (B, 8)


def test_greedy_decode_pads_finished_sequences_with_pad():
    model = reversal_model(0, **SMALL)
    src = _tokens((B, S), 6)
    free = greedy_decode(model, src, 5, BOS_ID)  # (B, 5), no eos: never stops
    eos, pad = int(free[0, 1]), VOCAB_SIZE - 1  # row 0 emits eos at step 1
    out = greedy_decode(model, src, 5, BOS_ID, eos=eos, pad=pad)
    for row in range(B):
        hits = (free[row] == eos).nonzero()
        end = int(hits[0]) + 1 if len(hits) else 5
        expected = free[row, :end].tolist() + [pad] * (5 - end)
        assert out[row].tolist() == expected[: out.shape[1]]
    assert (out[0] == pad).any()  # row 0 finished early: pad after its eos


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(bos=VOCAB_SIZE), r"bos must be a token id in \[0, vocab_size=13\)"),
        (dict(bos=-1), "bos must be a non-negative integer"),
        (dict(bos=1.0), "bos must be a non-negative integer"),
        (dict(eos=20), "eos must be a token id"),
        (dict(pad=13), "pad must be a token id"),
        (dict(max_len=0), "max_len must be a positive integer"),
        (dict(return_attention="yes"), "return_attention must be True or False"),
    ],
)
def test_greedy_decode_rejects_bad_arguments(kwargs, pattern):
    model = reversal_model(0, **SMALL)
    arguments = {"max_len": 4, "bos": BOS_ID, **kwargs}
    with pytest.raises(ValueError, match=pattern):
        greedy_decode(model, _tokens((B, S), 0), **arguments)


def test_greedy_decode_rejects_a_model_of_another_kind():
    with pytest.raises(ValueError, match="model must be a Seq2SeqTransformer"):
        greedy_decode(torch.nn.Linear(2, 2), _tokens((B, S), 0), 4, BOS_ID)
