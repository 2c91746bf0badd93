"""The helpers on a GPU, as Colab's GPU runtime uses them: every tensor helper run on each
device, its result checked to be ON that device (dtype kept) and equal to the same call on
the CPU in float64; no tensor built inside a helper (mask, position table, bias, arange) on
the CPU while the inputs are elsewhere; a few training steps of the chapters' small models
on the device; and what a reader passes as ``generator=`` on CUDA.

On a machine with CUDA, from the repository root::

    PYTHONPATH=src python3 -m pytest -p no:cacheprovider -q -x --no-header -o addopts="" \\
        tests/test_cuda.py

Without CUDA only the CPU half runs (``DEVICES`` is ``["cpu"]``), a few seconds, as part of
``make test``. TF32 is switched off on the GPU so that float32 matmuls stay within 1e-4 of
float64. The tests whose GPU result may legitimately differ from the CPU's at a rounding
boundary (T5's float32 bucket arithmetic) come last, so that ``-x`` stops on them only after
everything else has run.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch.nn import functional as F

from helpers import attention, efficient, hopfield, kernels, masks, positional, relative
from helpers.gpt import GPT, next_token_probs
from helpers.kvcache import decode_with_cache, decode_without_cache
from helpers.measure import attention_entropy, time_decoding
from helpers.memory import MemoryNetwork
from helpers.mlp import MLP
from helpers.multihead import KVCache, MultiHeadAttention
from helpers.scoring import (
    AdditiveAttention,
    BilinearAttention,
    DotProductAttention,
    ScaledDotProductAttention,
    additive_scores,
    bilinear_scores,
)
from helpers.selfattention import SelfAttention, windowed_attention
from helpers.seq2seq import greedy_decode
from helpers.tasks import hopfield as hopfield_tasks
from helpers.tasks import memory_qa, recall, reversal, text
from helpers.tasks import scoring as scoring_tasks
from helpers.tasks.classification import decision_grid, train_full_batch, two_moons
from helpers.tasks.images import image_to_patches, patches_to_image
from helpers.tasks.twins import TwinsModel, train_twins, twins_task
from helpers.transformer import (
    AddNorm,
    DecoderBlock,
    EncoderBlock,
    LayerNorm,
    PositionWiseFFN,
    RMSNorm,
    batch_norm_tokens,
)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
RTOL = ATOL = 1e-4  # float32 on the device against float64 on the CPU


@pytest.fixture(autouse=True)
def _no_tf32():
    """Full float32 matmuls on the GPU (TF32 would round to ~1e-3)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


def draw(*shape, seed=0):
    """A float64 CPU tensor of standard normals, repeatable."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def on(device, *tensors):
    """The float64 CPU tensors as float32 on ``device`` (one tensor, or a tuple)."""
    moved = tuple(t.float().to(device) for t in tensors)
    return moved[0] if len(moved) == 1 else moved


def check(got, want, device, what, dtype=torch.float32, rtol=RTOL, atol=ATOL):
    """``got`` is on ``device`` with ``dtype`` and within tolerance of ``want`` (CPU)."""
    assert isinstance(got, torch.Tensor), f"{what}: got {type(got).__name__}, not a tensor"
    assert got.device.type == device.type, f"{what}: result on {got.device}, inputs on {device}"
    assert got.dtype == dtype, f"{what} on {device}: dtype {got.dtype}, expected {dtype}"
    assert tuple(got.shape) == tuple(want.shape), (
        f"{what} on {device}: shape {tuple(got.shape)}, CPU gives {tuple(want.shape)}"
    )
    if dtype == torch.bool or not dtype.is_floating_point:
        same = torch.equal(got.cpu(), want.cpu().to(dtype))
        assert same, (
            f"{what} on {device}: {int((got.cpu() != want.cpu()).sum())} entries differ from CPU"
        )
        return
    a, b = got.detach().cpu().double(), want.detach().cpu().double()
    both_nan = torch.isnan(a) & torch.isnan(b)
    err = (a - b).abs().masked_fill(both_nan, 0.0)
    worst = float(err.max()) if err.numel() else 0.0
    assert torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True), (
        f"{what} on {device}: max abs error {worst:.3g} against CPU float64 "
        f"(rtol={rtol}, atol={atol})"
    )


def twin(factory, device, seed=0):
    """(float64 CPU module, float32 module on ``device``) with the same weights."""
    torch.manual_seed(seed)
    module = factory()
    return copy.deepcopy(module).double().eval(), module.to(device).eval()


# ---------------------------------------------------------------- the attention core
def test_attention_core(device):
    q64, k64, v64 = draw(2, 3, 5, 4, seed=1), draw(2, 3, 6, 4, seed=2), draw(2, 3, 6, 3, seed=3)
    q, k, v = on(device, q64, k64, v64)
    lens = torch.tensor([6, 0])  # the second sequence has no key: zero rows
    mask = masks.valid_length_mask(lens.to(device), 6)[:, None, None, :]  # (B, 1, 1, K)
    mask_cpu = masks.valid_length_mask(lens, 6)[:, None, None, :]
    out, w = attention.scaled_dot_product_attention(q, k, v, mask)
    ref_out, ref_w = attention.scaled_dot_product_attention(q64, k64, v64, mask_cpu)
    check(out, ref_out, device, "scaled_dot_product_attention out")
    check(w, ref_w, device, "scaled_dot_product_attention weights")
    scores64 = q64 @ k64.transpose(-2, -1)
    out, w = attention.attend(on(device, scores64), v, mask)
    check(out, attention.attend(scores64, v64, mask_cpu)[0], device, "attend out")
    check(w, attention.masked_softmax(scores64, mask_cpu), device, "attend weights")
    causal = masks.causal_mask(5, 6, device=device)
    got = attention.masked_softmax(on(device, scores64), causal)
    check(
        got, attention.masked_softmax(scores64, masks.causal_mask(5, 6)), device, "masked_softmax"
    )
    # a CPU mask (grid_mask and adjacency_mask build on the CPU) with inputs on the device
    out, _ = attention.scaled_dot_product_attention(q, k, v, masks.causal_mask(5, 6))
    check(out, attention.scaled_dot_product_attention(q64, k64, v64, causal.cpu())[0], device,
          "scaled_dot_product_attention with a CPU mask")  # fmt: skip
    half = attention.scaled_dot_product_attention(q.half(), k.half(), v.half(), causal)[0]
    want = attention.scaled_dot_product_attention(q64, k64, v64, causal.cpu())[0]
    check(half, want, device, "float16 attention", torch.float16, rtol=1e-2, atol=1e-2)


def test_masks_follow_the_device(device):
    def same(got, want, what):
        check(got, want, device, what, dtype=torch.bool)

    same(masks.causal_mask(4, 6, device=device), masks.causal_mask(4, 6), "causal_mask")
    same(masks.band_mask(5, 1, 7, device=device), masks.band_mask(5, 1, 7), "band_mask")
    for glob in ([0, 4], torch.tensor([0, 4]), torch.tensor([0, 4], device=device)):
        for causal in (False, True):
            got = masks.sliding_window_mask(6, 1, global_tokens=glob, causal=causal, device=device)
            want = masks.sliding_window_mask(6, 1, global_tokens=[0, 4], causal=causal)
            same(
                got,
                want,
                f"sliding_window_mask(global_tokens on {getattr(glob, 'device', 'a list')})",
            )
    lens = torch.tensor([[1, 3], [0, 4]])
    same(masks.valid_length_mask(lens.to(device), 4), masks.valid_length_mask(lens, 4),
         "valid_length_mask (B, Q)")  # fmt: skip
    same(masks.valid_length_mask(lens[:, 0].to(device), 4, 3),
         masks.valid_length_mask(lens[:, 0], 4, 3), "valid_length_mask (B,) with Q")  # fmt: skip
    pad = masks.valid_length_mask(torch.tensor([2, 4], device=device), 4)
    same(masks.to_key_padding_mask(pad), ~pad.cpu(), "to_key_padding_mask")
    same(masks.from_key_padding_mask(~pad), pad.cpu(), "from_key_padding_mask")
    additive = masks.to_additive_mask(pad)
    check(additive, masks.to_additive_mask(pad.cpu()), device, "to_additive_mask")
    band = masks.band_mask(5, 1, device=device)
    same(masks.reachable([band, band]), masks.reachable([band.cpu()] * 2), "reachable")


# ---------------------------------------------------------------- scoring modules
@pytest.mark.parametrize(
    "factory",
    [
        DotProductAttention,
        ScaledDotProductAttention,
        lambda: AdditiveAttention(4, 3, 5),
        lambda: BilinearAttention(4, 3),
    ],
    ids=["dot", "scaled", "additive", "bilinear"],
)
def test_scoring_modules(device, factory):
    ref, mod = twin(factory, device)
    dk = 3 if isinstance(mod, (AdditiveAttention, BilinearAttention)) else 4
    q64, k64, v64 = draw(2, 5, 4, seed=1), draw(2, 6, dk, seed=2), draw(2, 6, 3, seed=3)
    mask = masks.causal_mask(5, 6, device=device)
    out, w = mod(*on(device, q64, k64, v64), mask)
    ref_out, ref_w = ref(q64, k64, v64, mask.cpu())
    name = type(mod).__name__
    check(out, ref_out, device, f"{name} out")
    check(w, ref_w, device, f"{name} weights")
    check(mod.scores(*on(device, q64, k64)), ref.scores(q64, k64), device, f"{name}.scores")


def test_score_functions(device):
    q64, k64 = draw(2, 5, 4, seed=1), draw(2, 6, 3, seed=2)
    wq, wk, wv, w = draw(7, 4, seed=3), draw(7, 3, seed=4), draw(7, seed=5), draw(4, 3, seed=6)
    got = additive_scores(*on(device, q64, k64, wq, wk, wv))
    check(got, additive_scores(q64, k64, wq, wk, wv), device, "additive_scores")
    check(bilinear_scores(*on(device, q64, k64, w)), bilinear_scores(q64, k64, w), device,
          "bilinear_scores")  # fmt: skip


# ---------------------------------------------------------------- multi-head attention
@pytest.mark.parametrize("num_kv_heads", [None, 2, 1], ids=["mha", "gqa", "mqa"])
def test_multihead(device, num_kv_heads):
    ref, mod = twin(lambda: MultiHeadAttention(8, 4, num_kv_heads=num_kv_heads), device)
    x64, m64 = draw(2, 5, 8, seed=1), draw(2, 7, 8, seed=2)
    x, m = on(device, x64, m64)
    causal = masks.causal_mask(5, device=device)
    out, w = mod(x, x, x, causal)
    ref_out, ref_w = ref(x64, x64, x64, causal.cpu())
    check(out, ref_out, device, f"MultiHeadAttention(num_kv_heads={num_kv_heads}) out")
    check(w, ref_w, device, f"MultiHeadAttention(num_kv_heads={num_kv_heads}) weights")
    pad = masks.valid_length_mask(torch.tensor([7, 3], device=device), 7)[:, None, None, :]
    out, _ = mod(x, m, m, pad)
    check(out, ref(x64, m64, m64, pad.cpu())[0], device, "cross-attention with padding")
    with torch.no_grad():  # the KV cache, one token at a time, against the whole prefix
        cached = decode_with_cache(mod, x)
        check(cached, decode_without_cache(ref, x64), device, "decode_with_cache")
        check(decode_without_cache(mod, x), decode_without_cache(ref, x64), device,
              "decode_without_cache")  # fmt: skip
        cache = KVCache()
        for t in range(5):
            out, _ = mod(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)
        assert cache.keys.device.type == device.type, f"KVCache keys on {cache.keys.device}"
        check(out, cached[:, -1:], device, "forward(cache=...) last step")


def test_from_and_to_torch(device):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(device).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    x = on(device, draw(2, 5, 8))
    mask = masks.causal_mask(5, device=device)
    want, _ = theirs(x, x, x, attn_mask=~mask, need_weights=False)
    check(ours(x, x, x, mask)[0], want.cpu().double(), device, "from_torch", rtol=1e-4)
    assert ours.to_torch().in_proj_weight.device.type == device.type, "to_torch left the device"


def test_self_attention(device):
    ref, mod = twin(lambda: SelfAttention(6, 4, 5), device)
    x64 = draw(2, 7, 6)
    causal = masks.causal_mask(7, device=device)
    out, w = mod(on(device, x64), causal)
    ref_out, ref_w = ref(x64, causal.cpu())
    check(out, ref_out, device, "SelfAttention out")
    check(w, ref_w, device, "SelfAttention weights")
    q64, k64, v64 = draw(2, 7, 4, seed=1), draw(2, 7, 4, seed=2), draw(2, 7, 3, seed=3)
    out, w = windowed_attention(*on(device, q64, k64, v64), 2)
    ref_out, ref_w = windowed_attention(q64, k64, v64, 2)
    check(out, ref_out, device, "windowed_attention out")
    check(w, ref_w, device, "windowed_attention band weights")


# ---------------------------------------------------------------- positions
def test_positional_encodings(device):
    for factory in (
        lambda: positional.SinusoidalPositionalEncoding(8, max_len=16),
        lambda: positional.LearnedPositionalEncoding(16, 8),
    ):
        ref, mod = twin(factory, device)
        x64 = draw(2, 9, 8)
        check(mod(on(device, x64)), ref(x64), device, type(mod).__name__)
    x64 = draw(2, 3, 9, 8)
    x = on(device, x64)
    check(positional.rotary_embedding(x), positional.rotary_embedding(x64), device, "RoPE")
    at = [0, 5, 7, 100, 2, 3, 4, 1, 9]
    for positions in (at, torch.tensor(at), torch.tensor(at, device=device)):
        check(positional.rotary_embedding(x, positions), positional.rotary_embedding(x64, at),
              device, f"RoPE, positions on {getattr(positions, 'device', 'a list')}")  # fmt: skip
    table = positional.sinusoidal_encoding(9, 8, dtype=torch.float64)
    check(positional.sinusoidal_encoding(9, 8).to(device), table, device, "sinusoidal table")


def test_relative_positions(device):
    index = relative.relative_index(5, 2, 7, device=device)
    check(index, relative.relative_index(5, 2, 7), device, "relative_index", dtype=torch.long)
    q64, k64, v64 = draw(2, 5, 4, seed=1), draw(2, 7, 4, seed=2), draw(2, 7, 3, seed=3)
    rk64, rv64 = draw(5, 4, seed=4), draw(5, 3, seed=5)
    q, k, v, rk, rv = on(device, q64, k64, v64, rk64, rv64)
    check(relative.shaw_scores(q, k, rk), relative.shaw_scores(q64, k64, rk64), device,
          "shaw_scores")  # fmt: skip
    out, w = relative.shaw_attention(q, k, v, rk, rv)
    ref_out, ref_w = relative.shaw_attention(q64, k64, v64, rk64, rv64)
    check(out, ref_out, device, "shaw_attention out")
    check(w, ref_w, device, "shaw_attention weights")
    bias = relative.alibi_bias(4, 3, 7, device=device)
    check(bias, relative.alibi_bias(4, 3, 7).double(), device, "alibi_bias")
    # ALiBi added to scores on the device, as a decoder does
    scores = on(device, draw(4, 3, 7)) + bias
    assert scores.device.type == device.type


# ---------------------------------------------------------------- transformer blocks
@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post", "pre"])
def test_blocks(device, norm, norm_first):
    kw = dict(d_model=8, num_heads=2, ffn_hidden=16, norm_first=norm_first, norm=norm)
    ref, mod = twin(lambda: EncoderBlock(**kw), device)
    x64, m64 = draw(2, 5, 8, seed=1), draw(2, 6, 8, seed=2)
    x, m = on(device, x64, m64)
    pad = masks.valid_length_mask(torch.tensor([5, 2], device=device), 5)[:, None, None, :]
    out, w = mod(x, pad)
    ref_out, ref_w = ref(x64, pad.cpu())
    check(out, ref_out, device, f"EncoderBlock({norm}, norm_first={norm_first}) out")
    check(w, ref_w, device, "EncoderBlock weights")
    ref, mod = twin(lambda: DecoderBlock(**kw), device)
    causal = masks.causal_mask(5, device=device)
    src_pad = masks.valid_length_mask(torch.tensor([6, 3], device=device), 6)[:, None, None, :]
    got = mod(x, m, causal, src_pad)
    want = ref(x64, m64, causal.cpu(), src_pad.cpu())
    for name, g, r in zip(("out", "self weights", "cross weights"), got, want, strict=True):
        check(g, r, device, f"DecoderBlock({norm}, norm_first={norm_first}) {name}")


def test_norms_and_ffn(device):
    x64 = draw(3, 4, 8) * 3 + 1
    x = on(device, x64)
    for factory in (
        lambda: LayerNorm(8),
        lambda: RMSNorm(8),
        lambda: PositionWiseFFN(8, 16, activation="gelu"),
    ):
        ref, mod = twin(factory, device)
        check(mod(x), ref(x64), device, type(mod).__name__)
    ref, mod = twin(lambda: AddNorm(8, norm="rms"), device)
    check(mod(x, x), ref(x64, x64), device, "AddNorm")
    valid = torch.tensor([[True] * 4, [True, True, False, False], [True] * 4])
    check(batch_norm_tokens(x, valid.to(device)), batch_norm_tokens(x64, valid), device,
          "batch_norm_tokens")  # fmt: skip
    check(batch_norm_tokens(x), batch_norm_tokens(x64), device, "batch_norm_tokens, no mask")
    ref, mod = twin(lambda: MLP(8, [16, 16], 3, activation="tanh"), device)
    check(mod(x), ref(x64), device, "MLP")


# ---------------------------------------------------------------- models
def small_gpt(norm="layer"):
    return GPT(11, 16, 4, 32, 2, 12, norm=norm)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_gpt_forward(device, norm):
    ref, mod = twin(lambda: small_gpt(norm), device)
    idx = torch.randint(0, 11, (3, 9), generator=torch.Generator().manual_seed(0))
    logits, weights = mod(idx.to(device))
    ref_logits, ref_weights = ref(idx)
    check(logits, ref_logits, device, f"GPT({norm}) logits")
    check(weights[-1], ref_weights[-1], device, f"GPT({norm}) last layer's weights")
    probs = next_token_probs(logits[:, -1], temperature=0.7, top_k=3)
    check(probs, next_token_probs(ref_logits[:, -1], 0.7, 3), device, "next_token_probs")


def test_gpt_generate(device):
    """A CPU generator works on every device and draws the tokens the CPU model draws."""
    torch.manual_seed(0)
    cpu_model = small_gpt().eval()
    mod = copy.deepcopy(cpu_model).to(device)
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    for temperature, top_k in ((1.0, None), (0.8, 4), (1.5, 1)):
        got = mod.generate(prompt.to(device), 10, temperature, top_k,
                           generator=torch.Generator().manual_seed(3))  # fmt: skip
        want = cpu_model.generate(prompt, 10, temperature, top_k,
                                  generator=torch.Generator().manual_seed(3))  # fmt: skip
        what = f"GPT.generate(temperature={temperature}, top_k={top_k}) with a CPU generator"
        check(got, want, device, what, dtype=torch.long)
    greedy = mod.generate(prompt.to(device), 6, top_k=1)  # no generator: the global stream
    assert greedy.device.type == device.type, f"generate's tokens on {greedy.device}"
    check(greedy, cpu_model.generate(prompt, 6, top_k=1), device, "top_k=1 (greedy)",
          dtype=torch.long)  # fmt: skip
    generator = torch.Generator(device=device).manual_seed(5)  # a generator of the device
    first = mod.generate(prompt.to(device), 8, 1.2, 5, generator=generator)
    again = mod.generate(prompt.to(device), 8, 1.2, 5, generator=generator.manual_seed(5))
    check(first, again.cpu(), device, f"generate with a {device.type} generator", torch.long)
    assert int(first.min()) >= 0 and int(first.max()) < 11, "generate drew an id outside V"


def test_memory_network(device):
    ref, mod = twin(lambda: MemoryNetwork(len(memory_qa.WORDS), 8, hops=2), device)
    story, question, _ = memory_qa.qa_stories(6, 2, torch.Generator().manual_seed(0))
    logits, weights = mod(story.to(device), question.to(device))
    ref_logits, ref_weights = ref(story, question)
    check(logits, ref_logits, device, "MemoryNetwork logits")
    check(weights, ref_weights, device, "MemoryNetwork hop weights")


def test_seq2seq(device):
    ref, mod = twin(lambda: reversal.reversal_model(0, d_model=16, ffn_hidden=32), device)
    src, tgt_in, _ = reversal.reversal_batch(3, 5, torch.Generator().manual_seed(0), 2)
    lens = reversal.source_valid_lens(src)
    logits = mod(src.to(device), tgt_in.to(device), lens.to(device))[0]
    check(logits, ref(src, tgt_in, lens)[0], device, "Seq2SeqTransformer logits")
    logits = mod(src.to(device), tgt_in.to(device), lens)[0]  # lengths left on the CPU
    check(logits, ref(src, tgt_in, lens)[0], device, "Seq2SeqTransformer, CPU valid lengths")
    got = greedy_decode(mod, src.to(device), 6, reversal.BOS_ID, reversal.EOS_ID, lens.to(device))
    want = greedy_decode(ref, src, 6, reversal.BOS_ID, reversal.EOS_ID, lens)
    check(got, want, device, "greedy_decode", dtype=torch.long)


def test_twins_model(device):
    ref, mod = twin(lambda: TwinsModel(8, 2), device)
    data = twins_task(4)
    got = mod(data.symbols.to(device), data.colours.to(device))
    want = ref(data.symbols, data.colours)
    for name in got[0]:
        check(got[0][name], want[0][name], device, f"TwinsModel logits[{name}]")
    check(got[1], want[1], device, "TwinsModel weights")


# ---------------------------------------------------------------- Hopfield, kernels, efficient
def test_hopfield(device):
    gen = torch.Generator().manual_seed(0)
    patterns = (torch.randint(0, 2, (3, 16), generator=gen) * 2 - 1).double()  # N = 16: exact
    weights = hopfield.hebbian_weights(patterns)
    w = weights.float().to(device)
    check(w, weights, device, "hebbian_weights")
    check(hopfield.projection_weights(patterns.float().to(device)),
          hopfield.projection_weights(patterns), device, "projection_weights")  # fmt: skip
    start = hopfield_tasks.corrupt(patterns.long(), 0.25, torch.Generator().manual_seed(1))
    start_dev = hopfield_tasks.corrupt(
        patterns.long().to(device), 0.25, torch.Generator().manual_seed(1)
    )
    check(start_dev, start, device, "corrupt with a CPU generator", dtype=torch.long)
    check(hopfield.energy(w, start_dev.float()), hopfield.energy(weights, start.double()),
          device, "energy")  # fmt: skip
    for mode in ("sync", "async"):
        got, energies = hopfield.recall(w, start_dev, 3, mode, torch.Generator().manual_seed(2))
        want, ref_energies = hopfield.recall(weights, start, 3, mode,
                                             torch.Generator().manual_seed(2))  # fmt: skip
        check(got, want, device, f"recall({mode}) state")
        check(energies, ref_energies, device, f"recall({mode}) energies")
    x64, xi64 = draw(6, 4, seed=1), draw(5, 6, seed=2)
    x, xi = on(device, x64, xi64)
    for fn in (hopfield.hopfield_weights, hopfield.modern_hopfield_update, hopfield.modern_energy):
        check(fn(x, xi, 2.0), fn(x64, xi64, 2.0), device, fn.__name__)
    check(hopfield.retrieve(x, xi, 2.0, 3), hopfield.retrieve(x64, xi64, 2.0, 3), device,
          "retrieve")  # fmt: skip


def test_kernels(device):
    q64, k64, v64 = draw(5, seed=1), draw(7, seed=2), draw(7, seed=3)
    q, k, v = on(device, q64, k64, v64)
    mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(0)) > 0.3
    for m in (None, mask, mask.to(device)):
        pred, w = kernels.nadaraya_watson(q, k, v, 1.5, mask=m)
        ref_pred, ref_w = kernels.nadaraya_watson(
            q64, k64, v64, 1.5, mask=None if m is None else mask
        )
        check(pred, ref_pred, device, "nadaraya_watson prediction")
        check(w, ref_w, device, "nadaraya_watson weights")
    ref, mod = twin(lambda: kernels.NWKernelRegression(2.0), device)
    check(mod(q, k, v)[0], ref(q64, k64, v64)[0], device, "NWKernelRegression")
    check(kernels.gaussian_kernel(q), kernels.gaussian_kernel(q64), device, "gaussian_kernel")


def test_efficient_attention(device):
    q64, k64, v64 = draw(2, 2, 9, 4, seed=1), draw(2, 2, 11, 4, seed=2), draw(2, 2, 11, 3, seed=3)
    q, k, v = on(device, q64, k64, v64)
    mask = masks.valid_length_mask(torch.tensor([11, 4]), 11)[:, None, None, :]
    want = efficient.naive_attention(q64, k64, v64, mask, is_causal=True)
    for m in (mask, mask.to(device)):
        check(efficient.naive_attention(q, k, v, m, is_causal=True), want, device,
              f"naive_attention, mask on {m.device}")  # fmt: skip
        got = efficient.tiled_attention(q, k, v, m, True, block_size=3, query_block_size=4)
        check(got, want, device, f"tiled_attention, mask on {m.device}")
    scores64 = draw(3, 10)
    check(efficient.online_softmax(on(device, scores64), block_size=3),
          torch.softmax(scores64, -1), device, "online_softmax")  # fmt: skip
    state = efficient.OnlineSoftmaxState.empty((3, 1), device=device)
    state = efficient.online_softmax_update(state, on(device, scores64))
    assert state.max.device.type == device.type, f"OnlineSoftmaxState on {state.max.device}"
    kq64 = draw(2, 6, 4, seed=4)
    for fmap in (efficient.elu_feature_map, efficient.taylor_feature_map):
        for causal in (False, True):
            got = efficient.linear_attention(on(device, kq64), k[0, :, :6], v[0, :, :6], fmap,
                                             causal)  # fmt: skip
            want = efficient.linear_attention(kq64, k64[0, :, :6], v64[0, :, :6], fmap, causal)
            check(got, want, device, f"linear_attention({fmap.__name__}, causal={causal})")


def test_scoring_tasks_images_and_measures(device):
    w64 = torch.softmax(draw(3, 5), -1)
    w = on(device, w64)
    for fn in (scoring_tasks.softmax_jacobian, scoring_tasks.softmax_jacobian_norm,
               scoring_tasks.hardmax, attention_entropy):  # fmt: skip
        check(fn(w), fn(w64), device, fn.__name__)
    check(scoring_tasks.softmax_with_temperature(w, 0.5),
          scoring_tasks.softmax_with_temperature(w64, 0.5), device, "softmax_with_temperature")  # fmt: skip
    q64, k64, w1, w2 = draw(2, 4, 3, seed=1), draw(2, 5, 2, seed=2), draw(6, 5, seed=3), draw(6)
    check(scoring_tasks.concat_mlp_scores(*on(device, q64, k64, w1, w2)),
          scoring_tasks.concat_mlp_scores(q64, k64, w1, w2), device, "concat_mlp_scores")  # fmt: skip
    image64 = draw(3, 8, 12)
    patches = image_to_patches(on(device, image64), 4)
    check(patches, image_to_patches(image64, 4), device, "image_to_patches")
    check(patches_to_image(patches, 4, 8, 12), image64, device, "patches_to_image")
    rows = time_decoding(MultiHeadAttention(8, 2).to(device), [3], repeats=1)
    assert all(math.isfinite(r["speedup"]) for r in rows), f"time_decoding on {device}: {rows}"


# ---------------------------------------------------------------- data and generators
def test_data_generators_with_cpu_generators(device):
    """The task generators draw on the CPU (a CPU generator, any device) and the helpers
    that take data move them where the model is; a batch on the device is the same batch."""
    data = text.CharTokenizer("abcdefgh" * 8).encode("abcdefgh" * 8)
    x, y = text.lm_batch(data.to(device), 4, 6, torch.Generator().manual_seed(0))
    ref_x, ref_y = text.lm_batch(data, 4, 6, torch.Generator().manual_seed(0))
    check(x, ref_x, device, "lm_batch x, CPU generator, data on the device", dtype=torch.long)
    check(y, ref_y, device, "lm_batch y", dtype=torch.long)
    rec = recall.recall_task(4, 6, generator=torch.Generator().manual_seed(0))
    assert rec.keys.device.type == "cpu", "recall_task's data are made on the CPU"


def test_generators_of_the_device(device):
    """A generator of the device itself, where the helper draws on its device."""
    patterns = torch.tensor([[1, -1, 1, -1, 1, 1, -1, -1]] * 2, device=device)
    a = hopfield_tasks.corrupt(patterns, 0.5, torch.Generator(device=device).manual_seed(0))
    b = hopfield_tasks.corrupt(patterns, 0.5, torch.Generator(device=device).manual_seed(0))
    assert a.device.type == device.type and torch.equal(a, b), "corrupt: not repeatable"
    assert int((a != patterns).sum(-1).min()) == 4, "corrupt flipped the wrong count"
    w = hopfield.hebbian_weights(patterns[:1].float())
    state, _ = hopfield.recall(w, a, 2, "async", torch.Generator(device=device).manual_seed(0))
    assert state.device.type == device.type, f"recall's state on {state.device}"


# ---------------------------------------------------------------- a few training steps
def falls(losses, what, device):
    first, last = losses[0], losses[-1]
    assert all(math.isfinite(x) for x in losses), f"{what} on {device}: non-finite loss {losses}"
    assert last < first, f"{what} on {device}: loss did not fall ({first:.4g} -> {last:.4g})"


def test_train_reversal(device):
    model = reversal.reversal_model(0, d_model=16, ffn_hidden=32, num_heads=2).to(device)
    history = reversal.train_seq2seq(model, 12, batch_size=16, lr=3e-3, length=5)
    falls(history["loss"], "train_seq2seq (reversal)", device)
    assert next(model.parameters()).device.type == device.type
    acc = reversal.token_accuracy(model, 16, length=5)
    assert 0.0 <= acc <= 1.0, f"token_accuracy on {device}: {acc}"


def test_train_gpt(device):
    tok = text.CharTokenizer("the cat sat on the mat. " * 20)
    data = tok.encode("the cat sat on the mat. " * 20)  # on the CPU: train_lm moves batches
    torch.manual_seed(0)
    model = GPT(tok.vocab_size, 16, 2, 32, 1, 8).to(device)
    losses = text.train_lm(model, data, 15, 8, 8, 1e-2, torch.Generator().manual_seed(0))
    falls(losses, "train_lm (GPT)", device)
    assert math.isfinite(text.lm_loss(model, data, 8, 4)), f"lm_loss on {device}"
    assert math.isfinite(text.lm_loss(model, data.to(device), 8, 4)), "lm_loss, data on device"


def test_train_memory_network(device):
    data = memory_qa.qa_stories(64, 1, torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = MemoryNetwork(len(memory_qa.WORDS), 8, hops=1).to(device)
    losses = memory_qa.train_memory_network(
        model, data, 15, 0.05, 32, torch.Generator().manual_seed(0)
    )
    falls(losses, "train_memory_network", device)
    acc = memory_qa.accuracy(model, data)
    assert 0.0 <= acc <= 1.0, f"memory_qa.accuracy on {device}: {acc}"


@pytest.mark.parametrize("scheme", recall.SCHEMES)
def test_train_recall(device, scheme):
    model = recall.RecallModel(scheme, seeds=(0, 1), d_model=8, num_heads=2, train_len=6)
    ref = copy.deepcopy(model).double()
    model.to(device)
    data = recall.recall_task(8, 9, seed=1)  # longer than train_len: positions past the table
    with torch.no_grad():
        got = model(data.keys.to(device), data.values.to(device))
        check(got, ref(data.keys, data.values), device, f"RecallModel({scheme}) logits")
        check(model(data.keys, data.values), got.cpu(), device, f"RecallModel({scheme}), CPU data")
    before = recall.recall_scores(model, recall.recall_task(32, 6, seed=2))[1]
    recall.train_recall(model, steps=20, batch_size=16, lr=0.01)
    after = recall.recall_scores(model, recall.recall_task(32, 6, seed=2))[1]
    for b, a in zip(before, after, strict=True):
        falls([b, a], f"train_recall({scheme})", device)


def test_train_small_classifiers(device):
    x, y = two_moons(64, seed=0)
    torch.manual_seed(0)
    model = MLP(2, [8], 2).to(device)
    losses = train_full_batch(model, x, y, F.cross_entropy, 10, 0.05)
    falls(losses, "train_full_batch", device)
    xx, yy, probs = decision_grid(model, x, resolution=5)
    assert probs.device == x.device and probs.shape == (5, 5), "decision_grid's probabilities"
    torch.manual_seed(0)
    twins = TwinsModel(8, 2).to(device)
    falls(train_twins(twins, twins_task(8), steps=10), "train_twins", device)


# ---------------------------------------------------------------- CPU-runnable regressions
@pytest.mark.parametrize("scheme", ["sinusoidal", "learned", "t5"])
def test_recall_model_builds_nothing_on_the_cpu(scheme):
    """On the meta device a tensor built on the CPU inside forward raises "Tensor on device
    cpu is not on the expected device meta", the error CUDA gives; RecallModel added a CPU
    sinusoidal table (and ALiBi bias) to its inputs before this file. (RoPE's and ALiBi's
    paths read values, which meta tensors have none of: the GPU run covers them.)"""
    meta = torch.device("meta")
    model = recall.RecallModel(scheme, seeds=(0, 1), d_model=8, num_heads=2, train_len=6)
    data = recall.recall_task(4, 9)
    out = model.to(meta)(data.keys.to(meta), data.values.to(meta))
    assert out.device == meta and out.shape == (2, 4, 8), f"RecallModel({scheme}) on meta"


def test_cores_run_on_meta():
    """The unchecked cores build their masks and positions on the input's device."""
    meta = torch.device("meta")
    ids = torch.zeros(2, 5, dtype=torch.long, device=meta)
    logits, _ = GPT(11, 16, 4, 32, 2, 12).to(meta)._forward(ids)
    assert logits.device == meta, f"GPT._forward on meta gave {logits.device}"
    story = torch.zeros(2, 3, 4, dtype=torch.long, device=meta)
    logits, _ = MemoryNetwork(20, 8, 2).to(meta)._forward(story, ids[:, :4])
    assert logits.device == meta, f"MemoryNetwork._forward on meta gave {logits.device}"
    q = torch.empty(2, 7, 4, device=meta)
    out, weights = windowed_attention(q, q, q, 2)
    assert out.device == weights.device == meta, "windowed_attention left the meta device"


# ---------------------------------------------------------------- last: may differ on a GPU
def test_t5_buckets_match_the_cpu(device):
    """T5's buckets use a float32 logarithm (as Mesh TensorFlow and Hugging Face do); a GPU's
    logf may round differently at an exact bucket boundary, so this runs last."""
    offsets = torch.arange(-300, 301)
    for bidirectional, num_buckets, max_distance in (
        (True, 32, 128),
        (False, 8, 16),
        (False, 32, 128),
    ):
        got = relative.relative_position_bucket(offsets.to(device), bidirectional, num_buckets,
                                                max_distance)  # fmt: skip
        want = relative.relative_position_bucket(offsets, bidirectional, num_buckets, max_distance)
        what = f"relative_position_bucket(bidirectional={bidirectional}, {num_buckets}, {max_distance})"
        check(got, want, device, what, dtype=torch.long)


def test_a_cuda_generator_cannot_draw_cpu_batches(device):
    """What the docstrings of lm_batch, train_lm, train_memory_network and the task
    generators say: their generator is a CPU one; a CUDA generator is refused by torch."""
    if device.type != "cuda":
        pytest.skip("needs a CUDA device")
    data = torch.arange(20)
    with pytest.raises(RuntimeError):
        text.lm_batch(data, 4, 6, torch.Generator(device=device))
