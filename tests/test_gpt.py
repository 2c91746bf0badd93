"""helpers.gpt: the decoder-only model and sampling; helpers.tasks.text: its data and training."""

import json
import math

import pytest
import torch
from torch import nn

from helpers.gpt import GPT, next_token_probs
from helpers.masks import causal_mask
from helpers.tasks.text import (
    PROSE_FILE,
    CharTokenizer,
    book_prose,
    extract_prose,
    lm_batch,
    lm_loss,
    norm_comparison,
    train_lm,
    unigram_loss,
)
from helpers.transformer import EncoderBlock, LayerNorm, RMSNorm

V, D, H, F_HIDDEN, LAYERS, MAX_LEN, B, T = 11, 16, 4, 32, 2, 12, 3, 7


def model(**kw) -> GPT:
    torch.manual_seed(0)
    return GPT(V, D, H, F_HIDDEN, LAYERS, MAX_LEN, **kw)


def tokens(b=B, t=T, seed=0) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


# --- sampling ---------------------------------------------------------------------------------


def test_next_token_probs_is_softmax_of_scaled_top_k():
    logits = torch.randn(4, V, generator=torch.Generator().manual_seed(0))
    for temperature in (0.3, 1.0, 2.5):
        torch.testing.assert_close(
            next_token_probs(logits, temperature), torch.softmax(logits / temperature, -1)
        )
        probs = next_token_probs(logits, temperature, top_k=3)
        kept = logits.topk(3, dim=-1).indices
        expected = torch.zeros_like(logits).scatter(
            -1, kept, torch.softmax(logits.gather(-1, kept) / temperature, -1)
        )
        torch.testing.assert_close(probs, expected)
        assert ((probs > 0).sum(-1) == 3).all()


def test_top_k_one_is_greedy_and_top_k_v_changes_nothing():
    logits = torch.randn(5, V, generator=torch.Generator().manual_seed(1))
    greedy = nn.functional.one_hot(logits.argmax(-1), V).float()
    torch.testing.assert_close(next_token_probs(logits, 0.7, 1), greedy)
    torch.testing.assert_close(next_token_probs(logits, 0.7, V), next_token_probs(logits, 0.7))


def test_temperature_raises_the_entropy():
    logits = torch.randn(V, generator=torch.Generator().manual_seed(2)) * 3

    def entropy(p):
        return float(-(p * p.clamp_min(1e-30).log()).sum())

    values = [entropy(next_token_probs(logits, t)) for t in (0.1, 0.5, 1.0, 2.0, 10.0)]
    assert values == sorted(values) and values[-1] < math.log(V) + 1e-6


# --- the model --------------------------------------------------------------------------------


def test_forward_equals_blocks_written_out():
    gpt, idx = model(), tokens()
    x = gpt.token_embedding(idx) + gpt.position_embedding(torch.arange(T))
    for block in gpt.blocks:
        assert isinstance(block, EncoderBlock) and block.norm_first
        x = x + block.self_attn(block.norm1(x), block.norm1(x), block.norm1(x), causal_mask(T))[0]
        x = x + block.ffn(block.norm2(x))
    logits, weights = gpt(idx)
    torch.testing.assert_close(logits, gpt.final_norm(x) @ gpt.token_embedding.weight.T)
    assert logits.shape == (B, T, V) and len(weights) == LAYERS
    assert weights[0].shape == (B, H, T, T)
    assert (weights[0].triu(1) == 0).all()  # no weight on the future


def test_the_model_is_causal():
    gpt, idx = model(), tokens()
    changed = idx.clone()
    changed[:, 4] = (changed[:, 4] + 1) % V
    before, after = gpt(idx)[0], gpt(changed)[0]
    torch.testing.assert_close(before[:, :4], after[:, :4])
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_tied_and_untied_heads():
    tied, untied = model(), model(tie_weights=False)
    assert tied.head.weight is tied.token_embedding.weight
    assert untied.head.weight is not untied.token_embedding.weight
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(untied) - count(tied) == V * D
    assert tied.head.bias is None


def test_norm_choice_reaches_every_norm():
    for norm, kind in (("layer", LayerNorm), ("rms", RMSNorm)):
        gpt = model(norm=norm)
        norms = [m for m in gpt.modules() if isinstance(m, (LayerNorm, RMSNorm))]
        assert len(norms) == 2 * LAYERS + 1 and all(isinstance(m, kind) for m in norms)


def test_generate_matches_sampling_by_hand():
    gpt, prompt = model(), tokens(1, 3)
    out = gpt.generate(
        prompt, 4, temperature=0.8, top_k=5, generator=torch.Generator().manual_seed(0)
    )
    assert out.shape == (1, 7) and torch.equal(out[:, :3], prompt)
    generator, idx = torch.Generator().manual_seed(0), prompt
    with torch.no_grad():
        for _ in range(4):
            probs = next_token_probs(gpt(idx)[0][:, -1], 0.8, 5)
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], 1)
    assert torch.equal(out, idx)


def test_generate_crops_to_max_len_and_restores_the_mode():
    gpt = model().train()
    out = gpt.generate(tokens(2, MAX_LEN), 5, generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, MAX_LEN + 5) and gpt.training
    assert gpt.generate(tokens(1, 2), 0).shape == (1, 2)


def test_the_model_overfits_a_repeating_text():
    text = "abcabcabdabcabcabd" * 20
    tokenizer = CharTokenizer(text)
    data = tokenizer.encode(text)
    torch.manual_seed(0)
    gpt = GPT(tokenizer.vocab_size, 16, 2, 32, 1, 12)
    losses = train_lm(
        gpt,
        data,
        steps=40,
        batch_size=8,
        block_size=12,
        lr=2e-2,
        generator=torch.Generator().manual_seed(0),
    )
    assert losses[-1] < 0.4 < losses[0]
    assert lm_loss(gpt, data, 12) < unigram_loss(data, data, tokenizer.vocab_size) - 0.5


# --- the text task ------------------------------------------------------------------------------


def test_tokenizer_round_trip_and_refusals():
    tokenizer = CharTokenizer("hello world")
    assert tokenizer.vocab_size == len(set("hello world"))
    ids = tokenizer.encode("hold")
    assert ids.dtype == torch.int64 and tokenizer.decode(ids) == "hold"
    assert tokenizer.decode(list(ids)) == "hold"  # a list of 0-d tensors
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tokenizer.encode("xyz")
    with pytest.raises(ValueError, match="token ids"):
        tokenizer.decode([99])


def test_lm_batch_targets_are_inputs_shifted():
    data = torch.arange(50)
    x, y = lm_batch(data, 4, 8, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 8) and torch.equal(y, x + 1)


def test_unigram_loss_of_a_uniform_text_is_log_v():
    data = torch.arange(4).repeat(100)
    assert abs(unigram_loss(data, data, 4) - math.log(4)) < 1e-9


def test_the_frozen_prose_is_the_book_chapters_extracted(tmp_path):
    text = book_prose()
    assert PROSE_FILE.is_file() and text.startswith("# 1. MLP and activations")
    assert 200_000 < len(text) < 500_000 and all(c == "\n" or " " <= c <= "~" for c in text)
    notebook = tmp_path / "n.ipynb"
    cell = {
        "cell_type": "markdown",
        "metadata": {},
        "source": ["See [the glossary](g.md#x) ", "<b>now</b> — ok"],
    }
    notebook.write_text(json.dumps({"cells": [cell]}))
    assert extract_prose([notebook]) == "See the glossary now  ok\n"


def test_norm_comparison_is_paired_and_repeatable():
    text = "the cat sat on the mat. " * 40
    tokenizer = CharTokenizer(text)
    data = tokenizer.encode(text)
    kw = dict(steps=3, d_model=8, num_heads=2, ffn_hidden=16, block_size=8, batch_size=4)
    first = norm_comparison(data, data, tokenizer.vocab_size, [0, 1], **kw)
    again = norm_comparison(data, data, tokenizer.vocab_size, [0, 1], **kw)
    assert first == again and set(first) == {"layer", "rms"}
    assert all(len(v) == 2 and all(math.isfinite(x) for x in v) for v in first.values())
