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


def test_decode_names_the_positional_table_and_memory():
    """The texts the chapter prints."""
    model = reversal_model(0)
    with pytest.raises(ValueError) as error:
        model.decode(torch.full((1, 17), BOS_ID), torch.zeros(1, 8, 64))
    assert str(error.value) == (
        "tgt_in has 17 positions but the positional table holds max_len=16 (shape (1, 17))"
    )


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
