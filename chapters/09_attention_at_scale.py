# %% tags=["remove-cell"]
# Run anywhere: on Colab or in a bare Jupyter, install the book's helpers package first.
BOOK_REPOSITORY = "https://github.com/attention-book/attention-mechanisms"
try:
    import helpers  # noqa: F401  (present in the book's own environment)
except ModuleNotFoundError:
    import importlib, importlib.metadata as md, json, os, pathlib, re, subprocess, sys, tempfile, time
    before = {(d.metadata["Name"] or "").lower().replace("_", "-"): d.version
              for d in md.distributions()}
    # Pin what the platform preinstalled (Colab: ipywidgets 7.7, torch, ...): pip adds
    # the helpers beside it and never replaces it.
    keep = ("torch", "numpy", "matplotlib", "pillow", "ipywidgets", "widgetsnbextension",
            "jupyterlab-widgets", "ipykernel", "ipython", "traitlets", "tqdm")
    # From HELPERS_SOURCE if set (a folder, a wheel or a pip URL), else from the clone of the
    # repository this notebook is in (editable; a Chinese notebook is 4 folders down), else
    # from the repository.
    here = pathlib.Path.cwd().resolve()
    clone = next((str(p) for p in (here, *here.parents[:4])
                  if (p / "src" / "helpers" / "__init__.py").is_file()), None)
    source = os.environ.get("HELPERS_SOURCE") or clone or "git+" + BOOK_REPOSITORY
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        pins, report = os.path.join(tmp, "keep.txt"), os.path.join(tmp, "report.json")
        pinned = [f"{n}=={before[n]}" for n in keep if n in before]
        with open(pins, "w") as f:
            f.write("\n".join(pinned))
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--constraint",
                              pins, "--report", report, *(["-e"] if source == clone else []),
                              source], capture_output=True, text=True)
        if pip.returncode != 0:
            err, url = pip.stderr, source.removeprefix("git+")
            why, fix = "pip failed", "read pip's message below"
            if re.search(r"resolve host|NameResolution|Failed to establish|unreachable", err):
                why = f"no network: pip could not reach {url if url != source else 'an index'}"
                fix = "connect to the internet"
            elif re.search(r"(?i)repository .*not found|could not read Username", err):
                why, fix = f"no public repository at {url}", "check the book's repository URL"
            elif re.search(r"ResolutionImpossible|conflicting dependencies", err):
                named = [p for p in pinned if p in err] or pinned
                why = f"a version conflict with what is preinstalled here ({', '.join(named)})"
                fix = "run the book in a fresh environment (python -m venv)"
            said = [line.strip() for line in err.splitlines()
                    if line.strip().startswith(("ERROR", "fatal"))] or [err.strip() or "nothing"]
            raise SystemExit(f"Could not install the book's helpers: {why}.\nTo do: {fix}, or "
                             "set os.environ['HELPERS_SOURCE'] to a clone or wheel of the book's "
                             f"repository and run this cell again.\npip said: {said[0][-300:]}")
        with open(report) as f:
            new = {i["metadata"]["name"]: i["metadata"]["version"]
                   for i in json.load(f)["install"]}
    print(f"Installed {', '.join(f'{n} {v}' for n, v in new.items())} "
          f"in {time.perf_counter() - started:.0f} s.")
    loaded = {d.lower().replace("_", "-") for module, dists in md.packages_distributions().items()
              if module in sys.modules and not module.startswith("_") for d in dists}
    stale = [n for n in new if n.lower().replace("_", "-") in before.keys() & loaded]
    if stale:  # an old version is already imported: only a restart loads the new one
        raise SystemExit(f"pip replaced {', '.join(stale)}, already imported here: restart "
                         "the kernel (Colab: Runtime > Restart session), then run all cells.")
    importlib.invalidate_caches()
    import helpers  # noqa: F401

# %% [markdown]
# # 9. Attention at scale
#
# Every attention layer in this book so far has compared every query with every key. For a
# sentence of ten words that is a hundred scores and nobody notices. For a book-length prompt of
# 131,072 tokens (a "128k" context) it is about 17 billion ($2^{34}$) scores per head, 32 GiB in 16-bit
# numbers, and the 32 heads of one layer of a 7-billion-parameter model would need 1 TiB for
# their score matrices, more than any accelerator holds. Speech meets this wall early, since audio runs at
# about 100 frames a second (chapter 5): ten seconds are already a thousand frames, a minute
# 6,000, and chapter 5 answered it with [truncated self-attention](../book/glossary.md#term-truncated-self-attention):
# let each frame look only at its neighbours. That changes the model. This chapter
# is mostly about answers that do *not*: exact attention, the same numbers to rounding,
# computed in a different order or with less repeated work. Three parts change the model
# itself to save work or memory (a sliding window with global tokens, keys and values shared
# among heads, and linear attention), and for each we count or measure what the change costs.
#
# **What you will learn**
#
# - where the quadratic cost of attention sits, measured: the time and [peak memory](../book/glossary.md#term-peak-memory) of
#   attention as the sequence grows, and the size of the score matrix at real context lengths;
# - the [online softmax](../book/glossary.md#term-online-softmax): a softmax computed in one pass with a running maximum and a
#   running sum, derived from one rescaling identity and written in a few lines;
# - [tiled attention](../book/glossary.md#term-tiled-attention), the idea behind [FlashAttention](../book/glossary.md#term-FlashAttention), in plain PyTorch: exact
#   attention, block by block over the keys, whose memory grows like $L$ instead of $L^2$
#   when nothing is kept for a backward pass (and what training needs on top of it);
# - why FlashAttention is fast on a GPU (it moves fewer bytes between memories) and why our
#   plain-PyTorch version is no speed record on a CPU;
# - a [sliding window](../book/glossary.md#term-sliding-window-attention) with [global tokens](../book/glossary.md#term-global-token) as a mask: its picture, its
#   score entries counted, and how far information travels through it in a stack of layers;
# - the [KV cache](../book/glossary.md#term-KV-cache) that makes generating text one token at a time affordable, checked
#   against recomputing everything, with its cost counted, timed on a toy layer, and modelled
#   for a real one;
# - [multi-query](../book/glossary.md#term-multi-query-attention-MQA) and [grouped-query attention](../book/glossary.md#term-grouped-query-attention-GQA), which share keys and values among query heads:
#   derived, checked against PyTorch, their cache counted in bytes, and their cost in
#   quality measured on a small trained task;
# - [linear attention](../book/glossary.md#term-linear-attention), which really is linear in $L$, and why it is not a free lunch:
#   how sharply it can focus depends on its feature map and on the map's output size $D'$,
#   and on our test none of the maps we try comes near the softmax.

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from helpers.checks import check_shape
from helpers.efficient import (elu_feature_map, linear_attention, naive_attention,
                               online_softmax, taylor_feature_map, tiled_attention)
from helpers.figures.plotting import heatmap
from helpers.figures.widgets import slider_figure
from helpers.kvcache import decode_with_cache, decode_without_cache
from helpers.masks import band_mask, causal_mask, reachable, sliding_window_mask
from helpers.measure import (attention_entropy, loglog_slope, memory_comparison,
                             peak_memory_bytes, time_call, time_decoding)
from helpers.multihead import KVCache, MultiHeadAttention
from helpers.seeding import set_seed
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

torch.set_num_threads(1)  # measured: several times faster here than 2 threads, steadier
set_seed(0)


# %% [markdown]
# ## The quadratic wall
#
# Take one head of self-attention over a sequence of $L$ tokens, with head dimension $d_h$ (the model width $D$ is shared among $H$ heads, $D = H d_h$).
# The queries, keys and values are $Q, K, V \in \mathbb{R}^{L \times d_h}$, and
#
# $$
# \mathbf Z = \frac{Q K^\top}{\sqrt{d_h}} \in \mathbb{R}^{L \times L}, \qquad
# \mathbf A = \operatorname{softmax}(\mathbf Z) \in \mathbb{R}^{L \times L}, \qquad
# O = \mathbf A V \in \mathbb{R}^{L \times d_h},
# $$
#
# with the softmax taken along each row: the scores $\mathbf Z$ and the weights $\mathbf A$. The inputs and the output hold $L \times d_h$ numbers
# each, but the two matrices in the middle hold $L^2$. Each of the two products costs $L^2 d_h$
# multiply-adds, so the work grows like $L^2 d_h$ per head, while the projections that make $Q$, $K$ and
# $V$ of all heads cost $L D^2$: linear in $L$. Chapter 5 set this against a recurrent
# network, whose cost is $\mathcal{O}(L D^2)$: for short sequences the projections
# dominate, and past $L \approx D$ (up to a small constant factor; summed over
# the $H$ heads the two products cost $2L^2 H d_h = 2L^2 D$) the scores take over. Memory is worse than time, because time can be spent
# one piece after another, while the $L^2$ scores of the textbook formula all exist at once.
#
# How large is the matrix of scores, $(B, H, L, L)$, for a real model? Take one layer of a
# model the size of Llama 2 7B (width $D = 4096$: 32 heads of $d_h = 128$, the shape of LLaMA-7B in
# [Touvron et al. [2023]](../book/references.bib#touvron2023), Table 2), one sequence, 16-bit numbers, and
# compare with the queries, keys and values of the same layer:

# %%
def gib(num_bytes):
    return num_bytes / 2**30


batch, heads, d_head, bytes_per_number = 1, 32, 128, 2  # one layer, 16-bit numbers
ratios = {}
print(f"{'L':>8} {'scores (B, H, L, L)':>20} {'Q, K and V':>12} {'ratio':>7}")
for length in [1_024, 4_096, 32_768, 131_072]:
    scores = batch * heads * length**2 * bytes_per_number
    qkv = 3 * batch * heads * length * d_head * bytes_per_number
    print(f"{length:8,d} {gib(scores):16.3f} GiB {gib(qkv):8.3f} GiB {scores / qkv:7.1f}")
    assert scores / qkv == length / (3 * d_head), "the ratio should be L / (3 d_h)"
    ratios[length] = scores / qkv
assert round(ratios[1_024], 1) == 2.7 and round(ratios[131_072]) == 341, ratios
assert batch * heads * 131_072**2 * bytes_per_number == 2**40, "1 TiB expected"
assert 131_072**2 == 2**34 and round(131_072**2 / 1e9) == 17, "scores of one head"
assert 131_072**2 * bytes_per_number == 32 * 2**30, "one head: 32 GiB in 16-bit"

# %% [markdown]
# Already at $L = 1024$ the scores take 2.7 times the memory of $Q$, $K$ and $V$ together;
# at a 128k-token context they take **1 TiB for one layer**, 341 times the inputs they are computed from (the
# ratio is $L / 3d_h$). Even the largest accelerators hold at most about 300 GB (141 GB on an
# H200, 192 GB on a B200). Whatever we do about long
# contexts, the $(L, L)$ matrix must never exist in full.
#
# On a small scale we can watch it exist. `helpers.measure.peak_memory_bytes(fn, *args)`
# runs `fn` under PyTorch's profiler, which records every allocation and every release of
# tensor memory with its size in bytes; the running total of those events is the memory held
# at each moment, and its maximum is the [peak memory](../book/glossary.md#term-peak-memory). Unlike the memory the operating
# system reports for the process, it is exact and gives the same count on every run, so the
# numbers below are checked when the book is tested. First the textbook attention,
# `naive_attention` (one head, $d_h = 64$, 32-bit numbers), against the size of one
# $(L, L)$ matrix:

# %%
lengths = [512, 1_024, 2_048, 4_096]
memory_rows = memory_comparison(lengths, d_head=64, block_size=128)  # naive and tiled
print(f"{'L':>6} {'naive peak':>12} {'one (L, L) matrix':>18} {'peak / matrix':>14}")
for row in memory_rows:
    matrix_bytes = row["length"] ** 2 * 4  # float32
    print(f"{row['length']:6d} {row['naive_bytes'] / 2**20:8.2f} MiB "
          f"{matrix_bytes / 2**20:14.2f} MiB {row['naive_bytes'] / matrix_bytes:14.4f}")
naive_slope = loglog_slope(lengths, [row["naive_bytes"] for row in memory_rows])
print(f"log-log slope of the naive peak: {naive_slope:.3f}")
assert 1.8 < naive_slope < 2.2, f"slope {naive_slope:.3f} outside (1.8, 2.2)"
for row in memory_rows:  # exactly two (L, L) matrices and the (L, d_h) output, float32
    assert row["naive_bytes"] == 2 * row["length"] ** 2 * 4 + row["length"] * 64 * 4, row

# %% [markdown]
# The peak is exactly two $(L, L)$ matrices plus the $(L, d_h)$ output, which is why the ratio
# in the last column is $2 + d_h / L$: the scores $\mathbf Z$ and the weights $\mathbf A$ are alive at the same
# moment (the softmax reads one while writing the other), and since
# `naive_attention` still holds $\mathbf Z$ when it computes $\mathbf A V$, the output is written while both
# $(L, L)$ matrices exist: $2L^2 + L d_h$ numbers.
# Doubling $L$ multiplies the peak by four, a slope of 2 on log-log axes.
#
# Time tells the same story. The cell below times the attention itself and, for comparison, one
# $64 \times 64$ linear projection of the same $L$ tokens, as in a one-head layer where $D = d_h = 64$
# (timings vary from run to run and machine to machine: the cell prints this machine's, and
# the book's tests do not compare them):

# %% mystnb={"image": {"alt": "Log-log plot of milliseconds per call against sequence length from 256 to 4096. The naive attention line rises steeply, with a fitted slope of about 2; the line of one linear projection lies far below it and rises with slope about 1."}} tags=["nbval-ignore-output"]
time_lengths = [256, 512, 1_024, 2_048, 4_096]
projection = torch.randn(64, 64) / 8  # (D, D), D = d_h = 64: one head
seconds = {"naive attention": [], "one linear projection": []}
for length in time_lengths:
    x = torch.randn(1, 1, length, 64)  # (B, H, L, d_h)
    seconds["naive attention"].append(time_call(lambda: naive_attention(x, x, x), repeats=3))
    seconds["one linear projection"].append(time_call(lambda: x @ projection, repeats=3))

fig, ax = plt.subplots(figsize=(4.8, 3.8))
for name, times in seconds.items():
    slope = loglog_slope(time_lengths[2:], times[2:])
    ax.loglog(time_lengths, [1e3 * s for s in times], "o-", label=f"{name} (slope {slope:.2f})")
ax.set(xlabel="sequence length $L$", ylabel="time per call (ms)",
       title="one head, $d_h = 64$, one CPU thread")
ax.set_xticks(time_lengths, labels=[str(n) for n in time_lengths])
ax.xaxis.set_minor_locator(plt.NullLocator())
ax.legend(fontsize=9)
fig.tight_layout()
attention_over_projection = seconds["naive attention"][-1] / seconds["one linear projection"][-1]
slopes_time = {name: loglog_slope(time_lengths[2:], times[2:]) for name, times in seconds.items()}
print(f"this machine: slopes {slopes_time['naive attention']:.2f} (attention) and "
      f"{slopes_time['one linear projection']:.2f} (projection); at L = 4096 the attention "
      f"takes {attention_over_projection:.0f} times as long (FLOP ratio 2L/d_h = 128)")
if not (slopes_time["naive attention"] > slopes_time["one linear projection"] + 0.5
        and attention_over_projection > 20):  # timings: a busy machine blurs them (never an error)
    print("Note: this run's timings do not show the pattern the text describes (a slope at least "
          "0.5 above the projection's, over 20 times its time at L = 4096). Other work on the "
          "machine blurs timings: rerun the cell when it is quiet, or run benchmarks/timings.py.")

# %% [markdown]
# *Time per call against $L$ on log-log axes; the legend gives the slope fitted over the three
# longest lengths.* The projection grows about linearly (slope near 1) and the attention
# about quadratically (slope near 2; the printout gives this machine's values, and the
# cell checks only that the attention's slope exceeds the projection's by 0.5, and says so
# in a note, never an error, when a busy machine blurs it). It
# can exceed 2 at the longest lengths, where the $(L, L)$ matrices outgrow the processor's
# caches and, on some machines, are slow merely to allocate (a section below measures this). By the FLOP count alone, $2L^2 d_h$ against
# $L D^2$ multiply-adds with $D = d_h = 64$, the attention costs $2L/d_h = 128$ times as much as the
# projection at $L = 4096$; the measured ratio is printed above, and the cell checks only
# that it exceeds 20, since it depends on the machine (`benchmarks/timings.py` checks both
# as budgets, in `make bench`). Truncated attention attacks this by computing fewer scores. The next two
# sections keep every score but never store more than a thin slice of them.
#
# ## The online softmax
#
# ### Why the maximum is subtracted
#
# The softmax of a row of scores $s_1, \dots, s_K$ is
#
# $$
# \operatorname{softmax}(s)_j = \frac{e^{s_j}}{\sum_{i} e^{s_i}}
# = \frac{e^{s_j - m}}{\sum_{i} e^{s_i - m}}, \qquad m = \max_i s_i .
# $$
#
# The two forms are equal, because the factor $e^{-m}$ cancels, but only the second survives
# on a computer. Exponentials grow fast, $e^{50} \approx 5.2 \times 10^{21}$, and a 32-bit
# float overflows to infinity just past $e^{88.7}$, and then the softmax becomes
# $\infty / \infty$, not a number. After subtracting the maximum every exponent is at most 0,
# every exponential lies in $(0, 1]$, and the largest one is exactly 1:

# %%
scores = torch.tensor([1e4, 1e4 - 1.0, -1e4, 0.0])
plain = torch.exp(scores) / torch.exp(scores).sum()
stable = torch.exp(scores - scores.max()) / torch.exp(scores - scores.max()).sum()
print("exp(scores)            :", torch.exp(scores).tolist())
print("without subtracting max:", plain.tolist())
print("with the max subtracted:", [round(w, 4) for w in stable.tolist()])
torch.testing.assert_close(stable, torch.softmax(scores, dim=0))
assert f"{math.exp(50):.1e}" == "5.2e+21"
assert torch.exp(torch.tensor(88.7)).isfinite() and torch.exp(torch.tensor(88.75)).isinf()


# %% [markdown]
# The stable softmax reads the row three times: once for the maximum $m$, once for the
# denominator $\ell = \sum_i e^{s_i - m}$, once to divide. Each pass needs the whole row, and for
# attention the rows together are the $(L, L)$ matrix. To avoid storing it, we want the
# statistics in **one** pass, seeing the scores a block at a time and never going back. The
# obstacle is that every term of $\ell$ is measured against the *final* maximum, which is known
# only at the end.
#
# ### One pass: keep the sum relative to the maximum so far
#
# After the first $n$ scores, keep two numbers: the maximum so far and the sum measured
# against it,
#
# $$
# m_n = \max_{i \le n} s_i, \qquad \ell_n = \sum_{i \le n} e^{s_i - m_n} .
# $$
#
# When a new block of scores $s_j$, $j \in \mathcal B$, arrives, the maximum may grow to
# $m' = \max\big(m_n, \max_{j \in \mathcal B} s_j\big)$. The terms already summed were measured
# against the old maximum, and one identity moves them to the new one:
#
# $$
# e^{s_i - m'} = e^{m_n - m'}\, e^{s_i - m_n} .
# $$
#
# Summing it over $i \le n$ gives the update
#
# $$
# \ell' = \sum_{i \le n} e^{s_i - m'} + \sum_{j \in \mathcal B} e^{s_j - m'}
#       = e^{m_n - m'}\, \ell_n + \sum_{j \in \mathcal B} e^{s_j - m'} .
# $$
#
# The factor $e^{m_n - m'}$ is at most 1 (the maximum never falls), so nothing
# overflows; it equals 1 when the block brings no new maximum. Starting from $m_0 = -\infty$,
# $\ell_0 = 0$, after the last block $m$ is the maximum of the row and $\ell$ its
# denominator, exactly. This is the [online softmax](../book/glossary.md#term-online-softmax) of Milakov and Gimelshein
# [[Milakov and Gimelshein, 2018]](../book/references.bib#milakov2018) (their Algorithm 3). In code, for one row:

# %%
def online_softmax_open(scores, block_size):
    # One row of scores (K,), read once, block by block, for its max m and denominator l.
    m, l = torch.tensor(float("-inf")), torch.tensor(0.0)
    for block in scores.split(block_size):
        m_new = torch.maximum(m, block.max())
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum()  # rescale, then add
        m = m_new
    return torch.exp(scores - m) / l  # a softmax must still normalise; attention will not


row = torch.tensor([0.5, 1.0, -0.3, 2.5, 1.2, 0.1, 4.0, 3.0, -1.0, 3.9])  # ten scores
print("block      scores     max so far  e^(m - m')  l so far  l measured directly")
m, l = float("-inf"), 0.0
for k, block in enumerate(row.split(2)):
    m_new = max(m, block.max().item())
    rescale = math.exp(m - m_new)  # e^(m - m')
    m, l = m_new, l * rescale + torch.exp(block - m_new).sum().item()
    direct = torch.exp(row[:2 * k + 2] - m).sum().item()  # from scratch, for comparison
    print(f"{k:5d} {block[0]:5.1f} {block[1]:5.1f} {m:11.4f} {rescale:10.4f} {l:9.4f} "
          f"{direct:20.4f}")
    assert abs(l - direct) < 1e-5, f"block {k}: running sum {l} != direct {direct}"
torch.testing.assert_close(online_softmax_open(row, 2), torch.softmax(row, dim=0))

# %% [markdown]
# The table follows a row of ten scores in blocks of two. In block 0 there is nothing to
# rescale yet ($e^{m - m'} = e^{-\infty} = 0$). In blocks 1 and 3 the maximum jumps, $e^{m - m'}$
# falls below 1 and the sum so far is scaled down before the new terms are added: the old
# terms are re-measured against the larger maximum. In blocks 2 and 4 the maximum stays,
# $e^{m - m'} = 1$, and the sum only grows. In every row the running sum equals
# the sum computed from scratch. Now the check against `torch.softmax` and against the
# helper, for several block sizes and for scores around $\pm 10^4$, where the unstable
# formula fails:

# %%
set_seed(2)
for spread in [1.0, 30.0, 1e4]:
    rows = spread * (2 * torch.rand(4, 37) - 1)  # (4, K): 37 keys, not a multiple of a block
    for block_size in [1, 5, 16, 37]:
        expected = torch.softmax(rows, dim=-1)
        mine = torch.stack([online_softmax_open(r, block_size) for r in rows])
        torch.testing.assert_close(mine, expected)
        torch.testing.assert_close(online_softmax(rows, block_size=block_size), expected)
    print(f"scores in [-{spread:g}, {spread:g}]: online softmax = torch.softmax "
          "for block sizes 1, 5, 16, 37")


# %% [markdown]
# A softmax on its own still needs a second look at the scores to divide them by $\ell$.
# Attention does not: it wants $\sum_j p_j v_j$, and that sum can be carried along with $\ell$
# and divided once at the very end.
#
# ## Tiled attention
#
# ### Carrying the output along
#
# For one query with scores $s_j = q \cdot k_j / \sqrt{d_h}$, the output is
#
# $$
# o = \sum_j \frac{e^{s_j - m}}{\ell}\, v_j = \frac{a}{\ell}, \qquad
# a = \sum_j e^{s_j - m}\, v_j \in \mathbb{R}^{d_h} .
# $$
#
# The unnormalised sum $a$ is made of the same terms $e^{s_j - m}$ as $\ell$, only weighted by
# the value vectors, so the same identity rescales it. Process the keys in blocks
# $\mathcal B_1, \mathcal B_2, \dots$ and keep three running quantities per query: the
# maximum $m$, the denominator $\ell$ and the accumulator $a$. For each block,
#
# $$
# m' = \max\Big(m, \max_{j \in \mathcal B} s_j\Big), \qquad
# \ell \leftarrow e^{m - m'}\, \ell + \sum_{j \in \mathcal B} e^{s_j - m'}, \qquad
# a \leftarrow e^{m - m'}\, a + \sum_{j \in \mathcal B} e^{s_j - m'}\, v_j ,
# $$
#
# then $m \leftarrow m'$. After the last block, $o = a / \ell$: exact attention, although no
# query ever held more than one block of its scores.
#
# Do this for all $L$ queries at once. The state is $m$ and $\ell$, $L$ numbers each, and
# $a$, an $(L, d_h)$ matrix; each step computes one $(L, b)$ tile of scores for a block of $b$
# keys, folds it in and throws it away. The memory is $\mathcal{O}(L b + L d_h)$, linear in $L$, instead
# of $\mathcal{O}(L^2)$, as long as nothing is kept for a backward pass (inference, or
# `torch.no_grad()`; training is the subject of a section below). This is [tiled attention](../book/glossary.md#term-tiled-attention), the core of FlashAttention
# [[Dao et al., 2022]](../book/references.bib#dao2022) (Algorithm 1 of the paper, which also tiles the queries; we come back to
# that). A causal mask fits in
# without trouble: in each tile the scores of keys after their query are set to $-\infty$, so
# $e^{-\infty} = 0$ adds nothing. With the causal mask every query may see key 0, which is in
# the first block, so $m$ is finite from the first step on.

# %%
def tiled_attention_open(q, k, v, block_size=128, is_causal=False):
    # q, k, v: (B, H, L, d_h). Exact attention, one block of keys at a time.
    num_queries, d = q.shape[-2], q.shape[-1]
    q = q / math.sqrt(d)
    m = q.new_full((*q.shape[:-1], 1), float("-inf"))  # running max (B, H, L, 1)
    l = q.new_zeros((*q.shape[:-1], 1))  # running denominator (B, H, L, 1)
    acc = torch.zeros_like(q)  # running sum of exp(s - m) v (B, H, L, d_h)
    for start in range(0, k.shape[-2], block_size):
        k_block = k[..., start:start + block_size, :]  # (B, H, b, d_h)
        v_block = v[..., start:start + block_size, :]  # (B, H, b, d_h)
        s = q @ k_block.transpose(-2, -1)  # (B, H, L, b): the only scores in memory
        if is_causal:  # key j is visible to query i iff j <= i
            key_positions = torch.arange(start, start + s.shape[-1])
            future = key_positions > torch.arange(num_queries)[:, None]  # (L, b)
            s = s.masked_fill(future, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)  # (B, H, L, b) unnormalised weights
        rescale = torch.exp(m - m_new)  # e^(m - m'): what was summed under the old max
        l = rescale * l + p.sum(dim=-1, keepdim=True)
        acc = rescale * acc + p @ v_block
        m = m_new
    return acc / l  # (B, H, L, d_h)


# %% [markdown]
# Check it against PyTorch's own `F.scaled_dot_product_attention`, with and without the
# causal mask, for a block size that divides $L$ and one that does not; then the same for the
# helper `helpers.efficient.tiled_attention`, which also accepts a boolean mask and can tile
# the queries too:

# %%
set_seed(3)
q, k, v = torch.randn(3, 2, 4, 500, 64).unbind(0)  # (B, H, L, d_h) each: L = 500
for is_causal in [False, True]:
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    for block_size in [128, 100, 7]:
        torch.testing.assert_close(tiled_attention_open(q, k, v, block_size, is_causal),
                                   expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(tiled_attention(q, k, v, is_causal=is_causal,
                                                   block_size=block_size,
                                                   query_block_size=64),
                                   expected, atol=1e-5, rtol=1e-5)
    check_shape(expected, (2, 4, 500, 64))
    print(f"causal={is_causal!s:5}: tiled attention (ours and the helper's) equals "
          "F.scaled_dot_product_attention to 1e-5 for blocks of 128, 100 and 7 keys")

# %% [markdown]
# ### Memory in inference: $\mathcal{O}(L\,(b + d_h))$ against $\mathcal{O}(L^2)$
#
# The same measurement as before, now for both versions: one head, $d_h = 64$, blocks of
# $b = 128$ keys, 32-bit numbers, under `torch.no_grad()` as in inference.

# %%
print(f"{'L':>6} {'naive peak':>12} {'tiled peak':>12} {'naive / tiled':>14}")
for row in memory_rows:
    print(f"{row['length']:6d} {row['naive_bytes'] / 2**20:8.2f} MiB "
          f"{row['tiled_bytes'] / 2**20:8.2f} MiB {row['ratio']:14.2f}")
naive_peaks = [row["naive_bytes"] for row in memory_rows]
tiled_peaks = [row["tiled_bytes"] for row in memory_rows]
slopes = {"naive": loglog_slope(lengths, naive_peaks),
          "tiled": loglog_slope(lengths, tiled_peaks)}
print(f"growth exponents (log-log slopes): naive {slopes['naive']:.3f}, "
      f"tiled {slopes['tiled']:.3f}")
print(f"at L = 4096 the tiled version needs {memory_rows[-1]['ratio']:.1f} times less memory")
assert 1.8 < slopes["naive"] < 2.2 and 0.8 < slopes["tiled"] < 1.2, slopes
tile_bytes = 4_096 * 128 * 4  # one (L, b) tile of float32 scores at L = 4096
print(f"one (L, b) tile of scores at L = 4096: {tile_bytes / 2**20:.2f} MiB")
assert tiled_peaks[-1] < 8 * 2**20, f"tiled peak {tiled_peaks[-1]} B not below 8 MiB"
naive_128k = 2 * 131_072**2 * 4 + 131_072 * 64 * 4  # two (L, L) matrices and the output
tiled_128k = tiled_peaks[-1] * 131_072 // 4_096  # the tiled peak is linear in L
print(f"extrapolated to L = 131,072: {naive_128k / tiled_128k:.0f} times less memory")
assert 560 < naive_128k / tiled_128k < 600, naive_128k / tiled_128k
assert round(memory_rows[-1]["ratio"]) == 18 and round(naive_128k / tiled_128k, -1) == 580, \
    (memory_rows[-1]["ratio"], naive_128k / tiled_128k)
assert 7 * 2**20 <= tiled_peaks[-1] < 7.25 * 2**20, tiled_peaks  # 2 MiB tile + five (L, d_h)

# %% [markdown]
# The tiled peak doubles when $L$ doubles (slope 1) and the naive one quadruples (slope 2), so
# the ratio between them doubles too: 18 times less memory at $L = 4096$, and it would be
# about 580 times less at 128k tokens (extrapolated above). The tiled peak, 7.08 MiB, is the 2 MiB tile of scores
# (the weights $e^{s - m'}$ overwrite it in place) plus five $(L, d_h)$ arrays of 1 MiB each,
# alive together while the accumulator is updated: the scaled queries, the old accumulator,
# the rescaled one, the product of the tile with the block of values and their sum. Drawn on log-log axes:

# %% mystnb={"image": {"alt": "Log-log plot of peak memory in MiB against L from 512 to 4096. The naive attention line climbs from about 2 MiB to 129 MiB with slope 2, lying on a dotted guide for two L-by-L matrices; the tiled line climbs from about 0.9 to 7 MiB with slope 1."}}
fig, ax = plt.subplots(figsize=(4.8, 3.8))
ax.loglog(lengths, [b / 2**20 for b in naive_peaks], "o-", label="naive attention")
ax.loglog(lengths, [b / 2**20 for b in tiled_peaks], "s-", label="tiled, $b = 128$")
ax.loglog(lengths, [2 * n**2 * 4 / 2**20 for n in lengths], "k:", lw=1,
          label="two $(L, L)$ float32 matrices")
ax.set(xlabel="sequence length $L$", ylabel="peak memory (MiB)",
       title="peak memory of one head, $d_h = 64$ (measured)")
ax.set_xticks(lengths, labels=[str(n) for n in lengths])
ax.xaxis.set_minor_locator(plt.NullLocator())
ax.legend(fontsize=9)
fig.tight_layout()

# %% [markdown]
# *Measured peak memory against $L$, log-log.* The naive line sits on the dotted line of two
# $(L, L)$ matrices and climbs twice as steeply as the tiled one, which stays below 8 MiB.

# %% [markdown]
# ### Memory in training: autograd brings the $L^2$ back
#
# All of this holds when nothing is kept for a backward pass. Under autograd, PyTorch saves
# what each operation needs for its gradient, and in the loop above that is, for every block
# of keys, two $(L, b)$ tiles and one $(L, d_h)$ array: the tile of scores $s$ (the maximum
# `amax` needs its input for its gradient), the tile of weights $e^{s - m'}$ (the output of
# `exp`, and the input of the product with the values) and the accumulator before it is
# rescaled. Over all $L / b$ blocks that is two $(L, L)$ matrices' worth again, plus $L / b$
# copies of an $(L, d_h)$ array: at $L = 4096$ and $b = 128$, 128 MiB plus 32 MiB.
# The same measurement at $L = 4096$, with inputs that require gradients (the forward pass
# only; the peak is reached before the backward starts):

# %%
x = torch.randn(1, 1, 4_096, 64, generator=torch.Generator().manual_seed(0))
x = x.requires_grad_()  # (B, H, L, d_h); autograd keeps what the backward pass needs
grad_peaks = {"naive": peak_memory_bytes(naive_attention, x, x, x),
              "tiled, b = 128": peak_memory_bytes(tiled_attention, x, x, x, block_size=128),
              "tiled, b = 128, checkpointed": peak_memory_bytes(
                  torch.utils.checkpoint.checkpoint, tiled_attention, x, x, x,
                  use_reentrant=False)}
for name, peak in grad_peaks.items():
    print(f"{name:>29}: {peak / 2**20:7.2f} MiB")
assert grad_peaks["tiled, b = 128"] > grad_peaks["naive"] > 100 * 2**20, grad_peaks
assert grad_peaks["tiled, b = 128, checkpointed"] < 1.5 * tiled_peaks[-1], grad_peaks  # ~inference

# %% tags=["remove-cell"]
# Check: what autograd saves in the tiled loop at L = 4096, b = 128 (one head, d_h = 64).
saved = {}


def record(tensor):
    saved[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
    return tensor


with torch.autograd.graph.saved_tensors_hooks(record, lambda tensor: tensor):
    tiled_attention(x, x, x, block_size=128)
tile_storages = [n for n in saved.values() if n == 4_096 * 128 * 4]
row_storages = [n for n in saved.values() if n == 4_096 * 64 * 4]
assert len(tile_storages) == 2 * 4_096 // 128, f"got {len(tile_storages)=}"  # s and exp(s - m') for every block
assert len(row_storages) >= 4_096 // 128, f"got {len(row_storages)=}"  # an accumulator for every block
assert sum(tile_storages) == 128 * 2**20 and 4_096 // 128 * 2**20 == 32 * 2**20, f"got {sum(tile_storages)=}"
assert round(grad_peaks["naive"] / 2**20) == 129 and round(grad_peaks["tiled, b = 128"] / 2**20) == 167, f"got {round(grad_peaks['naive'] / 2 ** 20)=}, {round(grad_peaks['tiled, b = 128'] / 2 ** 20)=}"
assert round(grad_peaks["tiled, b = 128, checkpointed"] / 2**20) == 10, f"got {round(grad_peaks['tiled, b = 128, checkpointed'] / 2 ** 20)=}"
assert round(tiled_peaks[-1] / 2**20) == 7, f"got {round(tiled_peaks[-1] / 2 ** 20)=}"
saved.clear()
with torch.autograd.graph.saved_tensors_hooks(record, lambda tensor: tensor):
    naive_attention(x, x, x)
assert [n for n in saved.values() if n >= 4_096**2 * 4] == [4_096**2 * 4], f"got {[n for n in saved.values() if n >= 4096 ** 2 * 4]=}"  # the weights A only


# %% [markdown]
# Under autograd the tiled loop needs *more* memory than the naive version, 167 MiB against
# 129 MiB: it saves two tiles per block, so two $(L, L)$ matrices' worth (128 MiB) are stored
# after all, plus a copy of the accumulator for every block (32 MiB); the naive version's
# autograd keeps a single $(L, L)$ matrix, the weights $\mathbf A$, which exist at its peak anyway. Tiling saves memory in training only if the backward pass
# does not rely on stored tiles. FlashAttention's answer is [recomputation](../book/glossary.md#term-recomputation)
# [[Dao et al., 2022]](../book/references.bib#dao2022) (Section 3.1, and the backward pass in Appendix B): the forward pass
# keeps only the output and the two statistics $m$ and $\ell$ per row, and the backward pass
# rebuilds each tile of $\mathbf Z$ and $\mathbf A$ from $Q$, $K$ and those statistics, one tile at a time,
# so the memory stays linear in $L$ at the price of doing the score products again. The last
# line shows the same trade made coarsely with PyTorch's `torch.utils.checkpoint`: the
# forward pass keeps only the inputs, and its peak falls back to 10 MiB, close to the 7 MiB of
# inference. (That
# generic tool would rebuild the whole graph, $(L, L)$ matrix included, during the backward
# pass; FlashAttention's backward works tile by tile.) Chunked exact attention written in
# framework operations, with checkpointing for the backward pass, is the method of Rabe and
# Staats [[Rabe and Staats, 2021]](../book/references.bib#rabe2021), published shortly before FlashAttention.

# %% [markdown]
# ### Watching one query row converge
#
# What does the running state look like while the blocks stream past? Take one query and 64
# keys in 8 blocks of 8. The query was made to resemble key 45, so the largest score arrives
# late, in block 5. The function below runs the update for this one row and keeps the state
# after every block:

# %%
def trace_one_row(scores, values, block_size):
    # The running max m, denominator l and accumulator a after each block of keys.
    m, l, acc, states = float("-inf"), 0.0, torch.zeros(values.shape[-1]), []
    for start in range(0, len(scores), block_size):
        s, v = scores[start:start + block_size], values[start:start + block_size]
        m_new = max(m, s.max().item())
        p = torch.exp(s - m_new)  # (b,)
        rescale = math.exp(m - m_new)  # e^(m - m'); e^(-inf) = 0 before the first block
        m, l, acc = m_new, rescale * l + p.sum().item(), rescale * acc + p @ v
        states.append((m, l, acc.clone()))
    return states


set_seed(11)
keys_row, values_row = torch.randn(64, 16), torch.randn(64, 16)  # (K, d_h) each
query_row = keys_row[45] + 0.5 * torch.randn(16)  # (d_h,): resembles key 45
scores_row = keys_row @ query_row / 4  # (K,), scaled by 1 / sqrt(16)
exact_weights = torch.softmax(scores_row, dim=0)
exact_out = exact_weights @ values_row  # (d_h,)
states = trace_one_row(scores_row, values_row, block_size=8)


# %%
def render_block(num_blocks):
    m, l, acc = states[num_blocks - 1]
    seen = 8 * num_blocks
    running = torch.exp(scores_row[:seen] - m) / l  # weights implied by the state so far
    error = (acc / l - exact_out).abs().max().item()
    fig, (ax_w, ax_o) = plt.subplots(1, 2, figsize=(8.5, 3.4))
    ax_w.axvspan(-0.5, seen - 0.5, color="0.9", label="keys seen")
    ax_w.bar(range(seen), running, color="C0", label="running weights")
    ax_w.step(range(64), exact_weights, where="mid", color="k", lw=0.8, label="exact")
    ax_w.set(xlabel="key", ylabel="weight", xlim=(-0.5, 63.5), ylim=(0, 1.05),
             title=f"after block {num_blocks - 1}: m = {m:.2f}, l = {l:.2f}")
    ax_w.legend(fontsize="small", loc="upper left")
    ax_o.bar(range(16), acc / l, color="C1", label="running output a / l")
    ax_o.plot(range(16), exact_out, "kx", label="exact output")
    ax_o.set(xlabel="output feature", ylabel="value", ylim=(-2.2, 2.2),
             title=f"largest error {error:.3f}")
    ax_o.legend(fontsize="small", loc="lower left")
    fig.tight_layout()
    return fig


slider_figure(render_block, list(range(1, 9)), description="key blocks consumed",
              initial=3)

# %% [markdown]
# *Each frame shows the state after a number of key blocks. Left: the weights the running
# state implies for the keys seen so far (blue bars, on the grey band of keys already read),
# against the exact softmax weights (black steps). Right: the running output $a / \ell$ (orange
# bars) against the exact output (black crosses).* While the large score is unread, the state
# is a perfectly good softmax over the keys it has seen, with weights summing to 1 over them,
# and the output is far from the exact one. When block 5 arrives, the maximum jumps, every
# earlier term is multiplied by $e^{m - m'}$, the early weights shrink to
# within about 15% of their exact sizes ($\ell$ still lacks the last two blocks' terms) and the output jumps most of the way to the exact one; the last two blocks remove the
# remaining error. The numbers behind the frames:

# %%
print("block  keys seen  running max m  denominator l  largest error of a / l")
errors, maxima = [], []
for block, (m, l, acc) in enumerate(states):
    errors.append((acc / l - exact_out).abs().max().item())
    maxima.append(m)
    print(f"{block:5d} {8 * block + 8:10d} {m:14.4f} {l:14.4f} {errors[-1]:23.3f}")
assert all(a <= b for a, b in zip(maxima, maxima[1:])), "the running max never falls"
assert errors[0] > 0.5 and errors[-1] < 1e-6, errors
torch.testing.assert_close(torch.tensor(states[-1][1]),
                           torch.exp(scores_row - scores_row.max()).sum())


# %% [markdown]
# The maximum never falls and jumps twice, a little in block 1 and a lot in block 5, where
# the denominator shrinks from 9.30 to 1.76 because every earlier term is re-measured against
# the new maximum. The error falls from 1.2 to 0.16 at block 5 and to rounding level after the
# last block, where $m$ is the row's maximum and $\ell$ its exact softmax denominator.
#
# ### Skipping whole tiles: causal and truncated attention
#
# Tiling has a second benefit. With queries tiled too, attention is a grid of
# $(b \times b)$ tiles, one for each pair of a query block and a key block. A tile whose
# scores are all masked contributes nothing and need not be computed at all. Under the causal
# mask every tile above the diagonal is empty, and under the band mask of truncated attention
# (chapter 5), where query $i$ sees keys $j$ with $|i - j| \le w$, only tiles near the
# diagonal survive. Count them for blocks of $b = 128$ and a window of $w = 256$ positions:

# %%
def tiles_needed(mask, block):
    # Number of (block x block) tiles of a (L, L) bool mask holding any visible entry.
    n = mask.shape[0] // block
    return int(mask.view(n, block, n, block).any(dim=3).any(dim=1).sum())


print(f"{'L':>6} {'all tiles':>10} {'causal':>8} {'band, w = 256':>14}")
tile_counts = {}
for length in [1_024, 2_048, 4_096]:
    tile_counts[length] = [(length // 128) ** 2, tiles_needed(causal_mask(length), 128),
                           tiles_needed(band_mask(length, 256), 128)]
    print(f"{length:6d} {tile_counts[length][0]:10d} {tile_counts[length][1]:8d} "
          f"{tile_counts[length][2]:14d}")
assert tile_counts[4_096][2] < 2.1 * tile_counts[2_048][2], tile_counts  # linear growth

set_seed(4)
x = torch.randn(1, 1, 1_000, 64)  # (B, H, L, d_h)
band = band_mask(1_000, 256)
torch.testing.assert_close(tiled_attention(x, x, x, mask=band, block_size=128),
                           naive_attention(x, x, x, mask=band), atol=1e-5, rtol=1e-5)
print("tiled attention with the band mask equals naive attention with it")

# %% [markdown]
# The causal mask halves the work (a little more than half the tiles remain: the diagonal
# tiles are needed). The band of truncated attention needs a number of tiles that grows
# linearly with $L$: of the 1024 tiles at 4096 tokens it keeps 154. This is how
# sliding-window attention, truncated attention's name in large language models, is
# implemented in practice: a tiled kernel that never visits the empty tiles.
# (`helpers.efficient.tiled_attention` skips the key blocks after the last query of a causal
# query block; it applies other masks but does not skip their empty tiles.)
#
# ### A sliding window with global tokens
#
# A window has a blind spot: in one layer a token sees only its neighbours, and a stack of
# $n$ such layers carries information at most $n w$ positions. Longformer
# [[Beltagy et al., 2020]](../book/references.bib#beltagy2020) (Section 3.1) keeps the
# sliding window and adds *global attention* at a few chosen positions, such as a
# classification token: a [global token](../book/glossary.md#term-global-token) attends to every position, and every position
# attends to it. BigBird [[Zaheer et al., 2020]](../book/references.bib#zaheer2020)
# (Section 2) combines the same window and global tokens with a few random keys for each
# query, which we leave out. As a mask (True = may attend) the window and the global tokens
# are three terms joined by "or",
#
# $$
# M_{ij} = \big[\,|i - j| \le w\,\big] \,\lor\, \big[\,i \text{ is global}\,\big]
# \,\lor\, \big[\,j \text{ is global}\,\big],
# $$
#
# and a causal model keeps only the entries with $j \le i$. In code, against the helper
# `helpers.masks.sliding_window_mask`:

# %%
def sliding_window_open(length, window, global_tokens, causal=False):
    # (T, T) bool: the band |i - j| <= w, or the row or the column of a global token.
    positions = torch.arange(length)
    is_global = torch.isin(positions, torch.tensor(global_tokens, dtype=torch.long))  # (T,)
    near = (positions[:, None] - positions[None, :]).abs() <= window  # (T, T)
    mask = near | is_global[:, None] | is_global[None, :]
    return mask & causal_mask(length) if causal else mask


for causal in [False, True]:
    for window, global_tokens in [(3, [0]), (2, [0, 17]), (5, [])]:
        helper = sliding_window_mask(32, window, global_tokens=global_tokens, causal=causal)
        assert torch.equal(helper, sliding_window_open(32, window, global_tokens, causal)), \
            f"masks differ at w = {window}, global tokens {global_tokens}, causal = {causal}"
print("sliding_window_mask equals the three-term mask, with and without the causal mask")

# %% mystnb={"image": {"alt": "Three 32-by-32 boolean masks, queries down and keys across, allowed entries bright. Left: a diagonal band seven entries wide. Middle: the same band plus a full bright first row and first column, the global token 0. Right: the middle mask cut to its lower triangle by the causal mask, so the first row keeps a single entry and the first column stays bright."}}
masks_shown = {"window, w = 3": sliding_window_mask(32, 3),
               "window and global token 0": sliding_window_mask(32, 3, global_tokens=[0]),
               "the same, causal": sliding_window_mask(32, 3, global_tokens=[0], causal=True)}
fig, axes = plt.subplots(1, 3, figsize=(10, 3.9))
for ax, (title, mask) in zip(axes, masks_shown.items()):
    heatmap(mask.float(), ax=ax, vmax=1.0, title=title, colorbar=False)
fig.tight_layout()
print("allowed entries of the 32 x 32 masks: "
      + "; ".join(f"{title}: {int(mask.sum())}" for title, mask in masks_shown.items()))
assert [int(m.sum()) for m in masks_shown.values()] == [212, 268, 150], "mask counts changed"

# %% [markdown]
# *Three $32 \times 32$ masks, queries down, keys across, allowed entries bright. Left, the
# window: a band seven entries wide. Middle, the same band with position 0 global: its row
# and its column are bright. Right, the causal version: the global token's row keeps only
# its own entry, since a causal token 0 has nothing before it to read.*
#
# The score entries, counted (for $T \ge w + g$, as in every case below; in a shorter
# sequence the ends must be counted separately). The band has $T(2w + 1) - w(w + 1)$
# entries ($2w + 1$ per row, less the $w(w + 1)$ that fall off the two ends); $g$ global tokens add their rows and
# columns, $2gT - g^2$ entries, of which $g(2w + 1)$ were in the band already when the
# global tokens are the first $g \le w + 1$ positions. For $w = 128$ and two global tokens,
# against full attention's $T^2$:

# %%
def window_entries(length, window, num_global):
    # Allowed (i, j) of sliding_window_mask with the first num_global positions global.
    band = length * (2 * window + 1) - window * (window + 1)
    return band + 2 * num_global * length - num_global**2 - num_global * (2 * window + 1)


print(f"{'T':>7} {'full T^2':>13} {'window + 2 global':>18} {'share':>7} {'tiles of 128':>13}")
for length in [1_024, 4_096, 16_384]:
    entries = window_entries(length, 128, 2)
    if length <= 4_096:  # build the (T, T) mask and count its entries and tiles
        mask = sliding_window_mask(length, 128, global_tokens=[0, 1])
        assert int(mask.sum()) == entries, f"counted {int(mask.sum())}, formula {entries}"
        tiles = f"{tiles_needed(mask, 128):5d} of {(length // 128) ** 2:5d}"
    else:
        tiles = ""
    print(f"{length:7,d} {length**2:13,d} {entries:18,d} {entries / length**2:7.1%} {tiles:>13}")
assert window_entries(16_384, 128, 2) < 0.02 * 16_384**2, "the window should keep under 2%"
assert 0.23 < window_entries(1_024, 128, 2) / 1_024**2 < 0.26, "about a quarter at T = 1024"

# %% [markdown]
# When $T$ is much larger than $w$, the window with two global tokens keeps about
# $(2w + 1 + 2g)/T$ of the scores (the estimate leaves out the entries the band loses at its
# two ends and those the global rows and columns share with it): counted, about a
# quarter at $T = 1024$, under 2% at $T = 16{,}384$, and the count grows linearly in $T$. The count
# of tiles says the same for a tiled kernel: the band's tiles plus one row and one column of
# tiles for the global tokens. A dense mask saves none of this work: masked attention still
# computes all $T^2$ scores and throws most of them away. The saving needs a kernel that
# visits only the needed tiles, and `benchmarks/inference.py` times one such blocked version
# against full attention on your machine (times are not printed in this chapter).
#
# What do the global tokens buy? Information travels one window per layer, so token $j$ can
# influence token $i$ through a stack of layers only along a chain of allowed entries.
# `helpers.masks.reachable` multiplies the layers' masks (chapter 5) and answers how many
# layers a token needs to reach another that is two windows and one position away:

# %%
length, window, far = 64, 4, 9  # far = 2w + 1: two windows and one position away
query_at, key_at = 40, 40 - far
stacks = {"window only": band_mask(length, window),
          "window and global token 0": sliding_window_mask(length, window, global_tokens=[0]),
          "the same, causal": sliding_window_mask(length, window, global_tokens=[0], causal=True)}
layers_needed = {}
for name, mask in stacks.items():
    layers_needed[name] = next(n for n in range(1, 10) if reachable([mask] * n)[query_at, key_at])
    everyone = reachable([mask] * 2)[:, :].all().item()
    print(f"{name:>25}: token {key_at} reaches token {query_at} after {layers_needed[name]} "
          f"layers; after 2 layers every token reaches every other: {everyone}")
assert list(layers_needed.values()) == [3, 2, 3], layers_needed

# %% [markdown]
# With the window alone, token 31 reaches token 40 only after $\lceil 9 / 4 \rceil = 3$
# layers. With a global token, two layers suffice for this pair and for every other
# pair: one layer writes into the global token, the next reads it. In a causal model the
# same global token at position 0 helps nothing here: it may read only itself, so it has
# nothing from other tokens to pass on (every later token reads token 0 itself directly, in
# one layer), and the information again needs three layers along the window. (A
# global token placed later would carry what came before it.) So in an encoder a handful of
# global tokens gives every token a two-layer route to every other for $\mathcal O(gT)$
# extra scores; in a causal decoder that route exists only from before a global token to
# after it.
#
# ## Why FlashAttention is fast on a GPU, and ours is not on a CPU
#
# So far we have saved memory, not time: tiled attention does the same multiplications as the
# naive version, plus the rescaling. Yet FlashAttention made attention on GPUs several times
# faster (the paper reports, for instance, training GPT-2 up to 3 times faster end to end than
# the Hugging Face implementation, Section 4.1, Table 2). The
# reason is where the bytes live.
#
# Two levels of a GPU's memory matter here (there are more: each compute unit's registers,
# the fastest of all, and a shared L2 cache of some tens of MB between the two below). The
# [high-bandwidth memory (HBM)](../book/glossary.md#term-high-bandwidth-memory-HBM) is the large
# one, 40 to 80 GB on an A100, read at about 1.5 to 2 TB/s. The
# [on-chip SRAM](../book/glossary.md#term-on-chip-SRAM) is tiny, about 192 KB next to each of the 108 compute units, but about
# ten times faster (an estimated 19 TB/s; the figures are those of the paper's Section 2.1). Arithmetic is so fast that the textbook attention spends most of its time
# moving data: it writes $\mathbf Z$ to HBM, reads it back for the softmax, writes $\mathbf A$, reads $\mathbf A$
# again for $\mathbf A V$, each an $(L, L)$ matrix per head. An operation whose speed is set by that
# traffic rather than by its arithmetic is [memory-bound](../book/glossary.md#term-memory-bound).
#
# FlashAttention performs the whole loop of this section inside one GPU program, a
# [fused kernel](../book/glossary.md#term-kernel-fusion), so the score tile never leaves the chip. In the
# original algorithm [[Dao et al., 2022]](../book/references.bib#dao2022) (Algorithm 1) the *outer* loop runs over the blocks
# of $K$ and $V$, each loaded into SRAM once, and the inner loop over the blocks of queries,
# whose running $m$, $\ell$ and output are read from HBM and written back at every inner
# step. That is still far less traffic than the $(L, L)$ matrices: the paper's Theorem 2
# counts $\Theta(L^2 d_h^2 / n_\text{SRAM})$ HBM accesses for an SRAM of $n_\text{SRAM}$ numbers, against
# $\Theta(L d_h + L^2)$ for the textbook formula. FlashAttention-2 [[Dao, 2024]](../book/references.bib#dao2023)
# (Algorithm 1 and Section 3.1) swaps the two loops, which is the order of our code: each
# compute unit keeps one block of queries with its $m$, $\ell$ and accumulator on the chip
# (in its SRAM and registers; the tile of scores lives in registers)
# while the blocks of $K$ and $V$ stream past, and writes only the final output, plus one statistic
# $m + \ln \ell$ per row for the backward pass, to HBM. In
# both versions the $(L, L)$ traffic disappears and the arithmetic stays the same. For training it adds the
# recomputation described above: instead of storing $\mathbf A$ for the backward pass, it stores only
# $m$ and $\ell$ per row and recomputes the tiles of $\mathbf Z$ when they are needed, more arithmetic
# for much less memory and memory traffic, and still a win: the paper's Figure 2 (left)
# compares the two for one GPT-2 configuration, more FLOPs but far fewer HBM reads and
# writes, and less time [[Dao et al., 2022]](../book/references.bib#dao2022).
#
# Our version has none of that. Every line of the loop is a separate PyTorch operation that
# writes its result to main memory and reads it back in the next line, and Python adds its
# own overhead for every block. A CPU also has small fast memories, its caches (typically a
# few MiB per core and tens of MiB shared), which play the role of the SRAM, and PyTorch's
# own CPU kernel for `F.scaled_dot_product_attention` is a tiled C++ implementation in the
# FlashAttention style. Timing the three (the cell prints this machine's ratios; the book's
# tests do not compare them):

# %% mystnb={"image": {"alt": "Log-log plot of milliseconds per call against L from 256 to 4096 for naive attention, our tiled attention and PyTorch's scaled_dot_product_attention. At short lengths the tiled version is the slowest; at the longest lengths the naive version grows fastest; PyTorch's fused kernel is at or near the bottom throughout."}} tags=["nbval-ignore-output"]
seconds_fused = {"naive": [], "tiled (ours, b = 128)": [], "F.scaled_dot_product_attention": []}
functions = [naive_attention, lambda q, k, v: tiled_attention(q, k, v, block_size=128),
             F.scaled_dot_product_attention]
for length in time_lengths:
    x = torch.randn(1, 1, length, 64)  # (B, H, L, d_h)
    for name, fn in zip(seconds_fused, functions):
        seconds_fused[name].append(time_call(lambda: fn(x, x, x), repeats=3))

fig, ax = plt.subplots(figsize=(4.8, 3.8))
for (name, times), marker in zip(seconds_fused.items(), "os^"):
    ax.loglog(time_lengths, [1e3 * s for s in times], marker=marker, label=name)
ax.set(xlabel="sequence length $L$", ylabel="time per call (ms)",
       title="one head, $d_h = 64$, one CPU thread")
ax.set_xticks(time_lengths, labels=[str(n) for n in time_lengths])
ax.xaxis.set_minor_locator(plt.NullLocator())
ax.legend(fontsize=9)
fig.tight_layout()
for index in [-2, -1]:
    naive_s = seconds_fused["naive"][index]
    print(f"L = {time_lengths[index]}: tiled / naive time {seconds_fused['tiled (ours, b = 128)'][index] / naive_s:.2f}, "
          f"fused / naive {seconds_fused['F.scaled_dot_product_attention'][index] / naive_s:.2f}")


# %% [markdown]
# *Time per call of the three versions against $L$, log-log.* The honest reading: at the shortest lengths our tiled loop is the slowest of the three, because its Python loop and its many
# small operations cost more than the arithmetic they organise. At longer lengths (from which length on depends on the machine) the tiled loop can catch
# up with the naive version or overtake it: a ratio below 1 in the
# printout means it did on the machine that built this page (the tests do not check it).
# It is tempting to read that as FlashAttention's effect in miniature, the naive version's
# 64 MiB matrices no longer fitting in the caches. But the naive version also asks for two
# fresh $(L, L)$ matrices at every call. One factor changed separates the two: the same naive
# computation, written into two $(L, L)$ buffers allocated once, outside the timing (timings
# of this machine, not compared by the tests):

# %% tags=["nbval-ignore-output"]
def naive_attention_reused(q, k, v, scores, weights):
    # The naive computation, written into two (B, H, L, L) buffers allocated by the caller.
    torch.matmul(q, k.transpose(-2, -1), out=scores)  # the scores Z
    scores.mul_(1 / math.sqrt(q.shape[-1]))
    torch.sub(scores, scores.amax(dim=-1, keepdim=True), out=weights).exp_()  # the weights A
    weights.div_(weights.sum(dim=-1, keepdim=True))
    return weights @ v  # (B, H, L, d_h)


for length in [2_048, 4_096]:
    x = torch.randn(1, 1, length, 64)  # (B, H, L, d_h)
    buffers = torch.empty(2, 1, 1, length, length).unbind(0)  # allocated once, not timed
    torch.testing.assert_close(naive_attention_reused(x, x, x, *buffers), naive_attention(x, x, x))
    reuse_seconds = {
        "naive, two fresh (L, L) matrices per call": lambda: naive_attention(x, x, x),
        "naive, two (L, L) buffers reused": lambda: naive_attention_reused(x, x, x, *buffers),
        "tiled (ours, b = 128)": lambda: tiled_attention(x, x, x, block_size=128)}
    for name, fn in reuse_seconds.items():
        reuse_seconds[name] = time_call(fn, repeats=3)
        print(f"L = {length}, {name:>41}: {reuse_seconds[name] * 1e3:5.0f} ms")
    fresh, reused, tiled = reuse_seconds.values()
    print(f"L = {length}: reused / fresh {reused / fresh:.2f}; tiled / fresh {tiled / fresh:.2f}; "
          f"tiled / reused {tiled / reused:.2f}")
del buffers

# %% [markdown]
# On the machine that built this page, at $L = 4096$ reusing the buffers cuts the naive
# version's time by a large fraction (the ratio reused / fresh), and against it the tiled
# loop keeps only a fraction of its advantage, or none (tiled / reused against tiled /
# fresh). At $L = 2048$ the result changes from run to run on this machine: fresh memory is
# sometimes cheap there, and then neither reusing it nor tiling gains anything. So what the
# tiled loop saved at the longest length was mostly the cost of fresh memory; the caches
# can account at most for the rest. (With Linux's usual C library, a block this large is handed back to the operating system
# when it is freed, and
# the system maps each of its pages again when it is first written; how much that costs
# differs a lot between machines, one more reason these timings are not checked.) PyTorch's
# fused kernel, which keeps its tiles in cache, allocates no $(L, L)$ matrix and pays no
# Python overhead, is the one to use. It is tiled in memory as well:

# %%
x = torch.randn(1, 1, 4_096, 64)  # (B, H, L, d_h)
with torch.no_grad():
    fused_peak = peak_memory_bytes(F.scaled_dot_product_attention, x, x, x)
assert fused_peak < memory_rows[-1]["naive_bytes"] / 10, f"fused peak {fused_peak} B"
print("at L = 4096, F.scaled_dot_product_attention's peak memory is below a tenth of "
      "the naive version's")


# %% [markdown]
# The lesson is not "tiling makes attention fast" but "tiling makes it possible to keep the
# work in fast memory". On a GPU, with a fused kernel, that is a large speed-up and a linear
# memory footprint; in interpreted Python it is
# mainly the memory footprint; the modest speed-up it showed here at the longest length came
# mostly from the naive version's fresh allocations, not from the caches.
#
# ## The KV cache: generating without recomputing
#
# ### What is recomputed without it
#
# Chapter 4 showed how a [language model](../book/glossary.md#term-language-model) is trained in parallel: the whole sequence
# goes in at once, and the [causal mask](../book/glossary.md#term-causal-mask) stops each position from seeing its future. Generation cannot
# work that way. It is [autoregressive](../book/glossary.md#term-autoregressive): token $t + 1$ is chosen from the output at
# position $t$, then fed back in, so the tokens arrive one at a time.
#
# The naive way to generate runs the model on the whole prefix $x_1, \dots, x_t$ at every
# step and keeps only the last output. Look at what that recomputes. Nothing at an
# earlier position $i < t$ changes when token $t$ arrives. In the first layer, the key
# $k_i = W_k x_i$ and the value $v_i = W_v x_i$ are computed from the token $x_i$ alone. In a
# deeper layer, $x_i$ is the previous layer's output at position $i$, which depends on all
# the tokens $1, \dots, i$, but, because of the causal mask, on no later one; so it is fixed
# once token $i$ has been processed, and so are the key, the value and the output row
# computed from it (checked below for two stacked layers). The only new work is the new token's query, key and value,
# and one new row of scores (for one head of dimension $d_h$; every head does the same with its
# own rows of $W_q$, $W_k$ and $W_v$):
#
# $$
# q_t = W_q x_t, \qquad
# o_t = [v_1, \dots, v_t]\,
#       \operatorname{softmax}\!\Big(\frac{[k_1, \dots, k_t]^\top q_t}{\sqrt{d_h}}\Big) .
# $$
#
# So keep the keys and values of the tokens seen so far, per layer and per head, and append
# one of each at every step: this store is the [KV cache](../book/glossary.md#term-KV-cache). Real systems generate in two
# phases: a [prefill](../book/glossary.md#term-prefill), which runs the prompt through the model in parallel exactly as in
# training and fills the cache, then the decoding steps, one token each. One step with a
# cache, for a `MultiHeadAttention` layer, written out:

# %%
def decode_step_open(mha, x_t, keys, values):
    # x_t (B, 1, D): the new token; keys, values (B, H, t - 1, D/H): the cache so far.
    q_t = mha.split_heads(mha.w_q(x_t))  # (B, H, 1, D/H): only the new token's query
    keys = torch.cat([keys, mha.split_heads(mha.w_k(x_t))], dim=-2)  # (B, H, t, D/H)
    values = torch.cat([values, mha.split_heads(mha.w_v(x_t))], dim=-2)  # (B, H, t, D/H)
    scores = q_t @ keys.transpose(-2, -1) / math.sqrt(q_t.shape[-1])  # (B, H, 1, t)
    heads = torch.softmax(scores, dim=-1) @ values  # (B, H, 1, D/H); no mask: t sees <= t
    return mha.w_o(mha.merge_heads(heads)), keys, values  # (B, 1, D) and the cache


set_seed(5)
d_model, num_heads, steps = 64, 4, 12
mha = MultiHeadAttention(d_model, num_heads).eval()
tokens = torch.randn(2, steps, d_model)  # (B, T, D): token vectors, arriving one by one
with torch.no_grad():
    keys = values = torch.zeros(2, num_heads, 0, d_model // num_heads)  # empty cache
    outs = []
    for t in range(steps):
        out, keys, values = decode_step_open(mha, tokens[:, t:t + 1], keys, values)
        outs.append(out)
    cached = torch.cat(outs, dim=1)  # (B, T, D)
    parallel, _ = mha(tokens, tokens, tokens, causal_mask(steps))  # training, all at once
    torch.testing.assert_close(cached, parallel)
    torch.testing.assert_close(decode_with_cache(mha, tokens), parallel)
    torch.testing.assert_close(decode_without_cache(mha, tokens), parallel)
check_shape(keys, (2, num_heads, steps, d_model // num_heads))
print(f"{steps} steps with the cache = recomputing every prefix = one causal pass")
print(f"cache after {steps} steps: keys and values of shape {tuple(keys.shape)} each")

# %% tags=["remove-cell"]
# Check: in a stack of causal layers, nothing at positions < t changes when token t arrives.
set_seed(5)
second_layer = MultiHeadAttention(d_model, num_heads).eval()


def two_layers(x):  # (B, T, D) -> (B, T, D): two causal self-attention layers
    hidden, _ = mha(x, x, x, causal_mask(x.shape[1]))
    return second_layer(hidden, hidden, hidden, causal_mask(x.shape[1]))[0]


with torch.no_grad():
    for t in range(2, steps + 1):
        torch.testing.assert_close(two_layers(tokens[:, :t - 1]), two_layers(tokens[:, :t])[:, :-1])


# %% [markdown]
# Three ways to the same numbers: our cached step, the helpers' `decode_with_cache` and
# `decode_without_cache`, and the single parallel pass with a causal mask that training uses.
#
# ### What the cache saves, counted
#
# At step $t$ with model width $D$, one attention layer without the cache projects all $t$
# tokens (queries, keys, values and the output projection, $4 t D^2$ multiply-adds) and
# computes $t^2$ scores and a $t \times t$ weighted sum over all heads ($2 t^2 D$). With the
# cache it projects one token ($4 D^2$) and computes one row ($2 t D$). Counting two
# [FLOPs](../book/glossary.md#term-FLOP) per multiply-add:

# %%
def step_flops(t, d_model, cached):
    # FLOPs of one decoding step at position t in one attention layer (2 per multiply-add).
    rows = 1 if cached else t  # rows projected and scored at this step
    return 2 * (4 * rows * d_model**2 + 2 * rows * t * d_model)


print(f"{'step t':>7} {'D':>5} {'without cache':>14} {'with cache':>11} {'ratio':>6}")
for t, width in [(32, 64), (64, 64), (128, 64), (256, 64), (4_096, 4_096)]:
    without, with_cache = step_flops(t, width, False), step_flops(t, width, True)
    print(f"{t:7,d} {width:5,d} {without:14.3e} {with_cache:11.3e} {without / with_cache:6.0f}")
total_without = sum(step_flops(t, 64, False) for t in range(1, 257))
total_with = sum(step_flops(t, 64, True) for t in range(1, 257))
print(f"all 256 steps, D = 64: {total_without:.3e} FLOPs without, {total_with:.3e} with "
      f"the cache ({total_without / total_with:.1f} times fewer)")

# %% [markdown]
# The ratio at step $t$ is exactly $t$, since
# $4tD^2 + 2t^2D = t\,(4D^2 + 2tD)$: recomputing the prefix does the cached step's work once
# for every token in it. Over a whole generation of $T$ tokens the cost drops from
# $\mathcal{O}(T^2 D^2 + T^3 D)$ to $\mathcal{O}(T D^2 + T^2 D)$. (A cleverer recomputation that projects only
# the last query still re-projects all $t$ keys and values, so it remains linear in $t$ per
# step.) The measured speed-up on this CPU, for a layer with $D = 64$ and 4 heads, and the
# time of one decoding step set against the time its arithmetic needs (timings are this
# machine's, printed but not compared by the tests):

# %% mystnb={"image": {"alt": "Two panels. Left: log-log time to generate T tokens for T from 32 to 256; the recompute line rises more steeply than the KV cache line, which is nearly linear. Right: the speed-up, time without cache divided by time with cache, rising with T to several times at T = 256."}} tags=["nbval-ignore-output"]
decode_lengths = [32, 64, 128, 256]
timing_rows = time_decoding(mha, decode_lengths, batch=1, repeats=3)
speedups = [row["speedup"] for row in timing_rows]

fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(9, 3.4))
ax_t.loglog(decode_lengths, [r["recompute_s"] * 1e3 for r in timing_rows], "o-",
            label="recompute every prefix")
ax_t.loglog(decode_lengths, [r["cache_s"] * 1e3 for r in timing_rows], "s-", label="KV cache")
ax_t.set(xlabel="tokens generated $T$", ylabel="time to generate (ms)",
         title="decoding T tokens, one layer")
ax_s.plot(decode_lengths, speedups, "o-", color="C2")
ax_s.set(xlabel="tokens generated $T$", ylabel="speed-up", ylim=(0, None),
         title="time without cache / with cache")
for ax in (ax_t, ax_s):
    ax.set_xticks(decode_lengths, labels=[str(n) for n in decode_lengths])
    ax.xaxis.set_minor_locator(plt.NullLocator())
ax_t.legend(fontsize=9)
fig.tight_layout()
if not speedups[-1] > 1.5 or not max(speedups) < total_without / total_with / 3:  # timings
    print(f"Note: this run's speed-ups ({', '.join(f'{x:.1f}' for x in speedups)}) do not show "
          "what the text describes (over 1.5 at T = 256, a third of the FLOP ratio at most). "
          "Other work on the machine blurs timings: rerun the cell when it is quiet, or run "
          "benchmarks/timings.py.")

square = torch.randn(256, 256)  # a product large enough to run near the CPU's arithmetic speed
flops_per_second = 2 * 256**3 / time_call(lambda: square @ square, repeats=5)
longest, arithmetic_share = timing_rows[-1], {}
for name, key, cached in [("KV cache", "cache_s", True), ("recompute", "recompute_s", False)]:
    step_s = longest[key] / longest["length"]  # mean time of one step over T = 256 steps
    flops = sum(step_flops(t, 64, cached) for t in range(1, 257)) / 256  # mean FLOPs per step
    arithmetic_share[name] = flops / flops_per_second / step_s
    print(f"{name:>9}: {step_s * 1e6:6.0f} µs per step; its {flops:.1e} FLOPs at this CPU's "
          f"matrix-product speed take {flops / flops_per_second * 1e6:6.1f} µs "
          f"({arithmetic_share[name]:.1%} of the step)")
if not arithmetic_share["KV cache"] < 0.2:  # the cached step is overhead; timings, never an error
    print("Note: in this run the cached step's arithmetic took 20 % of its time or more. Other "
          "work on the machine blurs timings: rerun the cell when it is quiet.")

# %% [markdown]
# *Left: time to generate $T$ tokens with and without the cache, log-log. Right: their ratio.*
# The cache wins, but by far less than the FLOP ratio, which is 150 over 256 steps (the
# cell checks a factor of three below it at least, and a speed-up above 1.5 at $T = 256$). The last lines printed say why, for
# this toy layer. A cached step at $D = 64$ does fewer than $10^5$ FLOPs, which this CPU's
# arithmetic finishes in about a microsecond, yet the step takes a hundred times as long or
# more (the share printed is below 1% here; the cell checks only that it is below 20%):
# almost all of it is a fixed cost per step that has nothing to do with the arithmetic:
# the Python interpreter, PyTorch's dispatch of a dozen small operations, and the checks of
# their inputs. Memory is not the limit here either: the
# layer's weights (64 KiB) and the whole cache at $T = 256$ (128 KiB) fit in the CPU's caches.
# A recomputed step pays that fixed cost too, and takes longer (the printout above), while
# its arithmetic is still a few percent of its time (the share printed). To see
# what the rest is, change one factor, the width: the cell below times both kinds of step
# at $D = 16$ and $D = 64$ (4 heads, $t = 256$), and, alone, the masked softmax of the
# recomputed step's $H t^2$ scores as the layer computes it (timings of this machine, not
# compared by the tests):

# %% tags=["nbval-ignore-output"]
from helpers.attention import masked_softmax

print(f"{'D':>3} {'cached step':>12} {'recomputed step, t = 256':>25} {'its FLOPs':>10} "
      f"{'its masked softmax':>19}")
for width in [16, 64]:  # one factor changed: the width D, with 4 heads and t = 256
    layer = MultiHeadAttention(width, 4).eval()
    prefix = torch.randn(1, 256, width)  # (B, t, D)
    cached_s = time_call(lambda: decode_with_cache(layer, prefix[:, :64]), repeats=3) / 64
    recompute_s = time_call(lambda: layer(prefix, prefix, prefix, causal_mask(256)), repeats=10)
    scores_256 = torch.randn(1, 4, 256, 256)  # (B, H, t, t): the step's scores, all heads
    softmax_s = time_call(lambda: masked_softmax(scores_256, causal_mask(256)), repeats=10)
    print(f"{width:3d} {cached_s * 1e6:9.0f} µs {recompute_s * 1e6:22.0f} µs "
          f"{step_flops(256, width, False):10.2e} "
          f"{softmax_s * 1e6:10.0f} µs ({softmax_s / recompute_s:.0%})")
assert scores_256.numel() == 4 * 256**2 == 262_144, scores_256.shape  # H t^2 scores


# %% [markdown]
# On the machine that built this page, the cached step takes about as long at $D = 16$ as
# at $D = 64$, as a fixed cost should. The recomputed step does not get much faster at
# $D = 16$ either, although it does about five times fewer FLOPs there (printed), and a
# large share of it (printed) is the masked softmax over the $H t^2 = 262{,}144$ scores:
# elementwise passes over memory, which the FLOP count, made of matrix products only,
# leaves out. So at this size neither step's time is set by its FLOPs, and neither is the
# ratio of the two: the fixed cost of a step and the elementwise work on the scores set it.
# (The shares vary from run to run on a busy machine; the pattern is what we read.)
#
# At real widths the fixed cost is small against the work, and a different limit takes
# over, which we can count but not measure here. A cached step reads every weight of the
# layer ($4D^2$ numbers) and the whole cache ($2tD$) to do $4D^2 + 2tD$ multiply-adds: one
# multiply-add, two FLOPs, per number read, or one FLOP per byte in 16-bit numbers.
# Recomputing the prefix reuses each weight for $t$ tokens, about $t$ FLOPs per byte. An
# A100 GPU does up to 312 TFLOP/s in 16-bit matrix products
# [[Dao, 2024]](../book/references.bib#dao2023) (Section 3.1) and reads its HBM at 1.5 to 2 TB/s
# [[Dao et al., 2022]](../book/references.bib#dao2022) (Section 2.1): a computation that does fewer than
# about $312 / 2 = 156$ FLOPs per byte it reads waits for memory, it is
# [memory-bound](../book/glossary.md#term-memory-bound). The simplest model of a step's time, the
# larger of its arithmetic time at peak speed and its reading time at full bandwidth
# (ignoring launch costs and the fraction of peak that real kernels reach), gives for one
# layer of width $D = 4096$ in 16-bit numbers, one sequence:

# %%
def modelled_step_seconds(t, d_model, cached, flops_per_s=312e12, bytes_per_s=2.0e12):
    # Roofline model of one decoding step, 16-bit numbers: max(arithmetic, memory traffic).
    weights = 4 * d_model**2  # W_q, W_k, W_v, W_o, read once per step
    if cached:
        numbers_read = weights + 2 * t * d_model  # plus the whole cache
    else:
        numbers_read = weights + 5 * t * d_model  # plus x, q, k, v and the output of t tokens
    return max(step_flops(t, d_model, cached) / flops_per_s, 2 * numbers_read / bytes_per_s)


print(f"{'step t':>7} {'FLOP ratio':>11} {'cached (µs)':>12} {'recompute (µs)':>15} "
      f"{'time ratio':>11}")
modelled = {}
for t in [32, 128, 512, 2_048, 8_192]:
    cached_s, recompute_s = (modelled_step_seconds(t, 4_096, c) for c in (True, False))
    modelled[t] = recompute_s / cached_s
    print(f"{t:7,d} {step_flops(t, 4_096, False) / step_flops(t, 4_096, True):11.0f} "
          f"{cached_s * 1e6:12.1f} {recompute_s * 1e6:15.1f} {modelled[t]:11.1f}")
assert modelled[32] < 1.1 and modelled[128] < 1.1, modelled  # both wait for the weights
assert 5 < modelled[2_048] < 20 and modelled[8_192] < 8_192 / 100, modelled

# %% [markdown]
# In this model the cache saves $t$ times the FLOPs at step $t$ but, up to $t$ of about
# 150, almost no time: both versions spend the step reading the same weights. Only beyond
# that does recomputation become limited by arithmetic, and the time saved grows like
# $t / 156$ rather than $t$. The model ignores everything that makes real steps slower
# (kernel launches, a fraction of peak speed), so its times are lower bounds, but the
# conclusion does not depend on the details: at one sequence per step, a cached step is
# memory-bound at any width. That is why serving systems batch many sequences into each
# decoding step: the weights are then read once for all of them, and the FLOPs per byte
# grow with the batch.
#
# A cache should also be cheap to extend. The step above appends with `torch.cat`, which
# copies the whole cache at every step, $\mathcal{O}(t)$ extra traffic per step and $\mathcal{O}(T^2)$ over a
# generation. The helpers' `KVCache` preallocates its buffers for the tokens to come and
# writes each new key and value in place.
#
# ### Sharing keys and values: multi-query and grouped-query attention
#
# The cache is not free either: it holds $2 \times L \times D$ numbers per layer (keys and
# values for every head), and every decoding step reads all of it to compute one row of
# scores. For long contexts the cache, not the weights, becomes the memory that limits how
# many sequences a server can generate at once (exercise 3), and reading it makes decoding
# memory-bound. A common remedy shares keys and values among query heads.
# [Multi-query attention](../book/glossary.md#term-multi-query-attention-MQA) [[Shazeer, 2019]](../book/references.bib#shazeer2019) (Section 3) keeps the $H$ query heads
# but a single head of keys and values, which all of them read.
# [Grouped-query attention](../book/glossary.md#term-grouped-query-attention-GQA) [[Ainslie et al., 2023]](../book/references.bib#ainslie2023) (Section 2) sits in between: $H_\text{kv}$
# key-value heads, each shared by a group of $H / H_\text{kv}$ consecutive query heads, so
# that query head $h$ reads key-value head $\lfloor h H_\text{kv} / H \rfloor$. $H_\text{kv} = H$ is
# multi-head attention and $H_\text{kv} = 1$ multi-query attention. Only the key and value
# projections shrink, from $D \times D$ to $D \times H_\text{kv} d_h$, and with them the cache,
# by the factor $H / H_\text{kv}$. Ainslie et al. also turn a trained multi-head model into a
# grouped one (their Section 2, "uptraining"): the key and value projections of each
# group are mean-pooled into one, and training continues with a small fraction of the
# original pre-training compute (5%, which their abstract states for the conversion to
# multi-query attention).
#
# In the open, grouped-query attention is multi-head attention after each key-value head has
# been repeated for the query heads of its group. `MultiHeadAttention(..., num_kv_heads=...)`
# is the helper; PyTorch's `F.scaled_dot_product_attention(..., enable_gqa=True)` is the
# reference:

# %%
def grouped_query_attention_open(mha, x, mask):
    # x (B, T, D); mha has H query heads and H_kv key-value heads.
    group = mha.num_heads // mha.num_kv_heads  # query heads per key-value head
    q = mha.split_heads(mha.w_q(x))  # (B, H, T, d_h)
    k = mha.split_heads(mha.w_k(x))  # (B, H_kv, T, d_h): w_k makes only H_kv heads
    v = mha.split_heads(mha.w_v(x))  # (B, H_kv, T, d_h)
    k = k.repeat_interleave(group, dim=1)  # (B, H, T, d_h): head h gets key head h // group
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(mha.head_dim)).masked_fill(~mask, -math.inf)
    return mha.w_o(mha.merge_heads(torch.softmax(scores, dim=-1) @ v))  # (B, T, D)


set_seed(9)
x, caches = torch.randn(2, 10, 64), {}  # (B, T, D); the caches of the three layers
for kv_heads in [4, 2, 1]:
    gqa = MultiHeadAttention(64, 4, num_kv_heads=kv_heads).eval()  # H = 4, d_h = 16
    with torch.no_grad():
        ours = grouped_query_attention_open(gqa, x, causal_mask(10))
        torch.testing.assert_close(gqa(x, x, x, causal_mask(10))[0], ours)
        q, k, v = (gqa.split_heads(w(x)) for w in (gqa.w_q, gqa.w_k, gqa.w_v))
        reference = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        torch.testing.assert_close(gqa.w_o(gqa.merge_heads(reference)), ours)
        cache = caches[kv_heads] = KVCache()
        steps = [gqa(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], cache=cache)[0]
                 for t in range(10)]
        torch.testing.assert_close(torch.cat(steps, dim=1), ours)
    print(f"H_kv = {kv_heads}: w_k, w_v map D = 64 to {gqa.w_k.out_features:2d} features; "
          f"cache keys {tuple(cache.keys.shape)}; equal to the helper, to SDPA with "
          "enable_gqa and to cached decoding")

# %% [markdown]
# All of them agree, and the cache keeps only the $H_\text{kv}$ heads: the repetition happens
# after the cache, at attention time. The helper does not even repeat the keys and values (no copy for each query head): it
# stacks the queries of a group as the rows of one head (a reshape of the queries), so each
# key-value head is read once for its whole group.
# In bytes, for the toy layers above (counted, and checked against the keys and values the
# caches hold; the buffers behind them may have room for more tokens, since a full cache
# doubles its capacity) and for a model shaped like Llama 2 7B, which has the shape of LLaMA-7B
# ([Touvron et al. [2023]](../book/references.bib#touvron2023), Table 2: 32 layers of 32
# heads of $d_h = 128$), in 16-bit numbers at 4,096 tokens:

# %%
def kv_cache_bytes(tokens, layers, kv_heads, d_head, bytes_per_number=2, batch=1):
    return 2 * batch * tokens * layers * kv_heads * d_head * bytes_per_number  # keys, values


for kv_heads, cache in caches.items():  # the toy layers above: B = 2, T = 10, d_h = 16
    held = sum(t.numel() * t.element_size() for t in (cache.keys, cache.values))
    assert held == kv_cache_bytes(10, 1, kv_heads, 16, 4, batch=2), (kv_heads, held)
print("toy layer (H = 4, d_h = 16), 2 sequences of 10 tokens, float32: "
      + ", ".join(f"H_kv = {h}: {kv_cache_bytes(10, 1, h, 16, 4, batch=2):,d} B" for h in caches))
print("Llama 2 7B shape (32 layers, H = 32, d_h = 128), 16-bit numbers:")
for name, kv_heads in [("multi-head", 32), ("grouped-query", 8), ("multi-query", 1)]:
    print(f"{name:>14}, H_kv = {kv_heads:2d}: {kv_cache_bytes(1, 32, kv_heads, 128) / 2**10:4.0f} "
          f"KiB per token, {kv_cache_bytes(4_096, 32, kv_heads, 128) / 2**20:5,.0f} MiB per "
          "4k-token sequence")
assert kv_cache_bytes(4_096, 32, 32, 128) == 2 * 2**30, "2 GiB for multi-head"
assert kv_cache_bytes(4_096, 32, 8, 128) == 2**29 and kv_cache_bytes(4_096, 32, 1, 128) == 2**26, \
    "512 MiB and 64 MiB expected"


# %% [markdown]
# Each halving of $H_\text{kv}$ halves the cache: 2 GiB per 4k-token sequence with 32
# key-value heads, 512 MiB with 8, 64 MiB with one. Since a decoding step reads the whole
# cache, a memory-bound step also reads $H / H_\text{kv}$ times fewer bytes of it;
# `benchmarks/inference.py` times one step of the helper with $H_\text{kv} = 16, 4, 1$ on
# your machine (not printed here: times vary).
#
# What does sharing cost in quality? One small task, trained with each $H_\text{kv}$
# for the same fixed budget: associative recall. A sequence holds 8 pairs (key, value), keys drawn without
# repetition from 16 and values from 16; a last position holds one of the 8 keys, and the
# model must name its value. Each pair is one position (the sum of a key and a value
# embedding), so one attention layer can solve it: the last position's query must find the
# position holding its key and copy that position's value. The model is that layer,
# $D = 16$, $H = 4$ heads of $d_h = 4$, and a linear readout; chance is $\ln 16 = 2.77$
# nats of cross-entropy.

# %%
def recall_batch(shape, generator, num_keys=16, num_values=16, num_pairs=8):
    # (…, N) distinct keys and their values; a query key among them and its value (…,).
    keys = torch.rand(*shape, num_keys, generator=generator).argsort(-1)[..., :num_pairs]
    values = torch.randint(num_values, (*shape, num_pairs), generator=generator)
    pick = torch.randint(num_pairs, (*shape, 1), generator=generator)
    return keys, values, keys.gather(-1, pick)[..., 0], values.gather(-1, pick)[..., 0]


class Recall(nn.Module):
    # One attention layer: the query position reads the pair that holds its key.
    def __init__(self, num_kv_heads, d_model=16, num_heads=4, num_keys=16, num_values=16):
        super().__init__()
        self.key, self.value = nn.Embedding(num_keys, d_model), nn.Embedding(num_values, d_model)
        self.marker = nn.Parameter(torch.randn(d_model))  # marks the query position
        self.attention = MultiHeadAttention(d_model, num_heads, num_kv_heads=num_kv_heads)
        self.readout = nn.Linear(d_model, num_values)

    def forward(self, keys, values, query):  # (B, N), (B, N), (B,) -> logits (B, num_values)
        pairs = self.key(keys) + self.value(values)  # (B, N, D): one position per pair
        asked = (self.key(query) + self.marker)[:, None]  # (B, 1, D)
        context = torch.cat([pairs, asked], dim=1)  # (B, N + 1, D)
        return self.readout(self.attention(asked, context, context)[0][:, 0])


# %% [markdown]
# Five seeds for each $H_\text{kv}$, 200 steps of Adam on batches of 64, then the loss and the
# accuracy on 2,000 fresh sequences. The five models of one setting train side by side:
# `torch.func.vmap` runs stacked copies of the parameters, and since Adam updates each
# number on its own, every copy gets the updates it would get alone on the same batches, up to
# floating-point rounding (batched kernels round differently, and the differences grow over
# the steps, so a copy trained alone does not end bit for bit the same); only faster here.

# %%
def train_recall(num_kv_heads, seeds=range(5), steps=200, batch=64, lr=1e-2):
    models = []
    for seed in seeds:
        set_seed(seed)
        models.append(Recall(num_kv_heads))
    params, _ = stack_module_state(models)  # every parameter with a leading seed axis
    logits_of = vmap(lambda p, *data: functional_call(models[0], p, data))
    optimizer = torch.optim.Adam(params.values(), lr=lr)
    data = torch.Generator().manual_seed(100)
    for _ in range(steps):
        *inputs, target = recall_batch((len(seeds), batch), data)  # (S, B, …)
        loss = F.cross_entropy(logits_of(params, *inputs).transpose(1, 2), target)
        optimizer.zero_grad()
        (loss * len(seeds)).backward()  # the sum of the seeds' own mean losses
        optimizer.step()
    *inputs, target = recall_batch((len(seeds), 2_000), torch.Generator().manual_seed(200))
    with torch.no_grad():
        logits = logits_of(params, *inputs)  # (S, 2000, num_values)
    losses = F.cross_entropy(logits.transpose(1, 2), target, reduction="none").mean(-1)
    return sorted(losses.tolist()), (logits.argmax(-1) == target).float().mean(-1).tolist()


recall = {kv_heads: train_recall(kv_heads) for kv_heads in [4, 2, 1]}
print(f"chance: ln 16 = {math.log(16):.2f}; test loss over 5 seeds, median (range)")
for kv_heads, (losses, accuracies) in recall.items():
    kv_parameters = 2 * (16 * 4 * kv_heads + 4 * kv_heads)  # w_k and w_v, with biases
    print(f"H_kv = {kv_heads} ({kv_parameters:3d} key-value parameters): {losses[2]:.2g} "
          f"({losses[0]:.2g} to {losses[4]:.2g}); lowest accuracy {min(accuracies):.1%}")

# %% tags=["remove-cell"]
# Check: every run learned, and the ranges over seeds overlap (no ordering is claimed).
for kv_heads, (losses, accuracies) in recall.items():
    assert losses[4] < 0.1 and min(accuracies) > 0.99, (kv_heads, losses, accuracies)
ranges = {kv_heads: (losses[0], losses[4]) for kv_heads, (losses, _) in recall.items()}
assert all(low <= other_high and other_low <= high for low, high in ranges.values()
           for other_low, other_high in ranges.values()), f"ranges that do not overlap: {ranges}"
assert all(losses[4] < math.log(16) / 100 for losses, _ in recall.values()), recall
with torch.random.fork_rng(devices=[]):  # the parameter count printed, against the module
    for kv_heads in recall:
        layer = Recall(kv_heads).attention
        counted = sum(p.numel() for w in (layer.w_k, layer.w_v) for p in w.parameters())
        assert counted == 2 * (16 * 4 * kv_heads + 4 * kv_heads), (kv_heads, counted)

# %% [markdown]
# All fifteen runs learn the task: every test loss is more than a hundred times below
# chance, and no run misses more than 1% of the 2,000 test sequences. The ranges
# over seeds overlap, so on this task sharing the keys and values of 4 heads in 2 groups, or
# in one, costs nothing we can measure in the final loss, although multi-query attention has a quarter
# of the key and value parameters. That is what this experiment shows, and no more: one layer,
# one task that needs one sharp lookup per query, $d_h = 4$, 200 steps at the learning rate in
# the code, enough for all fifteen runs here to learn the task (with other seeds an occasional run is still short of that bar at 200 steps, though far below chance). It compares the runs at the end of training, once each has learned, not how fast
# each setting learns: stopped earlier, or trained with a smaller learning rate or narrower
# heads, the three settings need not end equal, and this experiment does not say which would
# lag. It does not say that
# sharing is free in large pretrained models: Ainslie et al. report that multi-query
# attention can lose quality there and that grouped-query attention comes close to
# multi-head attention at a speed close to multi-query attention's (their abstract).
#
# ## Linear attention
#
# ### Reordering the product
#
# All the tricks so far compute softmax attention exactly, and the work stays $\mathcal{O}(L^2 d_h)$ per
# head. Changing the attention itself can do better. Write softmax attention (one head, queries
# and keys of dimension $d_h$) with a similarity function,
# $\operatorname{sim}(q, k) = \exp(q \cdot k / \sqrt{d_h})$:
#
# $$
# o_i = \frac{\sum_j \operatorname{sim}(q_i, k_j)\, v_j}{\sum_j \operatorname{sim}(q_i, k_j)} .
# $$
#
# Now replace the similarity by a dot product of features, $\operatorname{sim}(q, k) = \phi(q)^\top \phi(k)$, with a [feature map](../book/glossary.md#term-feature-map)
# $\phi: \mathbb{R}^{d_h} \to \mathbb{R}^{D'}$ whose similarities are never negative.
# Katharopoulos et al. [[Katharopoulos et al., 2020]](../book/references.bib#katharopoulos2020) use $\phi(x) = \operatorname{elu}(x) + 1$
# (their Section 3.2.1, Equation 7), applied to each coordinate, so that its output size is
# $D' = d_h$; other maps have many more features, as we will see.
# Because the similarity now factorises, the sum over $j$ can be taken *before* meeting the
# query:
#
# $$
# o_i = \frac{\phi(q_i)^\top \sum_j \phi(k_j)\, v_j^\top}{\phi(q_i)^\top \sum_j \phi(k_j)} .
# $$
#
# In matrix form this is the associativity of the matrix product: the $(L, L)$ matrix
# $\phi(Q)\phi(K)^\top$ costs $\mathcal{O}(L^2 D')$ and its product with $V$ another $\mathcal{O}(L^2 d_h)$, while
# the $(D', d_h)$ matrix $\phi(K)^\top V$ and the product of $\phi(Q)$ with it cost
# $\mathcal{O}(L D' d_h)$: [linear attention](../book/glossary.md#term-linear-attention). With elu + 1, $D' = d_h$, and the two orders cost
# $\mathcal{O}(L^2 d_h)$ against $\mathcal{O}(L d_h^2)$. Both orders, in code, and the helper:

# %%
set_seed(6)
q, k, v = torch.randn(3, 2, 4, 256, 16).unbind(0)  # (B, H, L, d_h) each
phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)  # positive (B, H, L, D'), D' = d_h

similarity = phi_q @ phi_k.transpose(-2, -1)  # (B, H, L, L): what linear attention avoids
explicit = similarity / similarity.sum(dim=-1, keepdim=True) @ v  # O(L^2 (D' + d_h))

kv_state = phi_k.transpose(-2, -1) @ v  # (B, H, D', d_h): the same size for any L
normaliser = phi_q @ phi_k.sum(dim=-2).unsqueeze(-1)  # (B, H, L, 1)
reordered = phi_q @ kv_state / normaliser  # O(L D' d_h)

torch.testing.assert_close(reordered, explicit)
torch.testing.assert_close(linear_attention(q, k, v), explicit)
for length, d in [(256, 16), (131_072, 128)]:
    print(f"L = {length:7,d}, d_h = D' = {d:3d}: L^2 d_h = {length**2 * d:.2e} multiply-adds, "
          f"L d_h^2 = {length * d**2:.2e} ({length / d:,.0f} times fewer)")


# %% [markdown]
# ### The causal form is a recurrent network
#
# With a causal mask, $o_i$ sums over $j \le i$ only, and the two sums become running sums:
#
# $$
# \mathbf U_i = \mathbf U_{i-1} + \phi(k_i)\, v_i^\top, \qquad
# \mathbf u_i = \mathbf u_{i-1} + \phi(k_i), \qquad
# o_i = \frac{\phi(q_i)^\top \mathbf U_i}{\phi(q_i)^\top \mathbf u_i} .
# $$
#
# That is a [recurrent network](../book/glossary.md#term-recurrent-neural-network-RNN) whose state is the
# $(D', d_h)$ matrix $\mathbf U$ and the vector $\mathbf u$ of $D'$ numbers, a fixed size however long the sequence, where
# softmax attention needs a KV cache that grows with every token. This is the sense of the
# title of Katharopoulos et al., "Transformers are RNNs", derived in their Section 3.4. The loop, against the masked
# explicit form and the helper's prefix sums:

# %%
def causal_linear_attention_rnn(q, k, v):
    # One token at a time: a (D', d_h) state U and a (D',) normaliser u. q, k, v (L, d_h).
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)  # (L, D'), D' = d_h here
    state, normaliser, outs = torch.zeros(phi_k.shape[-1], v.shape[-1]), torch.zeros(phi_k.shape[-1]), []
    for t in range(q.shape[0]):
        state = state + torch.outer(phi_k[t], v[t])  # U: add this token's key-value pair
        normaliser = normaliser + phi_k[t]  # u
        outs.append(phi_q[t] @ state / (phi_q[t] @ normaliser))
    return torch.stack(outs)  # (L, d_h)


q1, k1, v1 = q[0, 0], k[0, 0], v[0, 0]  # (L, d_h) each: one head
masked = similarity[0, 0] * causal_mask(256)  # (L, L): similarities of keys j <= i
torch.testing.assert_close(causal_linear_attention_rnn(q1, k1, v1),
                           masked / masked.sum(dim=-1, keepdim=True) @ v1)
torch.testing.assert_close(linear_attention(q1, k1, v1, is_causal=True),
                           causal_linear_attention_rnn(q1, k1, v1))
print(f"recurrent state: {16 * 16 + 16} numbers at every step; a KV cache at step 256 "
      f"holds {2 * 256 * 16}")

# %% [markdown]
# ### The price: it is not softmax attention
#
# Linear attention is a different layer, not a faster way to compute the same one. On the
# same inputs its outputs differ, and with elu + 1 its weights are much flatter. Two
# properties of the feature map decide how sharp the weights can be.
#
# - **Rank.** The $(L, L)$ matrix of linear weights is $\phi(Q)\phi(K)^\top$ with its rows
#   rescaled, so its rank is at most the output size $D'$ of the feature map: the head
#   dimension $d_h$ for an elementwise map such as elu + 1, but not in general. That rules out
#   the identity once $L > D'$, and more generally any pattern in which more than $D'$ queries
#   each pick out a different key; it does not rule out every sharp pattern (all queries on
#   the same key is a matrix of rank 1).
# - **Growth.** The exponential turns score *differences* into weight *ratios*, so a lead of
#   a few units gives one key almost all the weight. With elu + 1, $\phi(q)^\top\phi(k)$
#   grows only linearly as the query is scaled up, so scaling barely sharpens anything.
#
# A second feature map separates the two. The degree-2 Taylor map of Based
# [[Arora et al., 2024]](../book/references.bib#arora2024) is built so that
# $\phi(q)^\top\phi(k) = 1 + s + s^2/2$ with $s = q \cdot k / \sqrt{d_h}$, the first three
# terms of $e^s$: $\phi(x) = [1,\; x,\; \operatorname{vec}(x x^\top) / \sqrt 2]$ for
# $x$ scaled by $d_h^{-1/4}$, which gives $D' = 1 + d_h + d_h^2$ features (the helper
# `taylor_feature_map`; each product $x_a x_b$ with $a \ne b$ appears twice, so $d_h(d_h + 1)/2$ distinct ones would do). Some of its
# features are negative, but $1 + s + s^2/2 \ge 1/2$, so no similarity is. It has more
# features than keys in the test below, and similarities that grow quadratically.
#
# A clean test: 32 keys, and queries that are each a multiple $c$ of their own key, so that
# the ideal attention is "each query to its own key", the identity matrix. Increase the
# sharpness $c$ and compare, for the softmax, elu + 1 ($D' = d_h = 16$) and the Taylor map
# ($D' = 273$), the weight each query puts on its own key, the
# [entropy](../book/glossary.md#term-entropy) of the rows (0 for one-hot, $\ln 32 = 3.47$ for uniform) and the rank:

# %%
set_seed(7)
keys_32 = 4 * F.normalize(torch.randn(32, 16), dim=-1)  # (K, d_h), every key of norm sqrt(d_h)


def kernel_weights(queries, feature_map):
    # Linear attention's weights (Q, K): similarities phi(q)·phi(k), each row normalised.
    sim = feature_map(queries) @ feature_map(keys_32).T  # (Q, K)
    return sim / sim.sum(dim=-1, keepdim=True)


def all_weights(c):
    queries = c * keys_32  # query i points at key i
    return {"softmax": torch.softmax(queries @ keys_32.T / 4, dim=-1),  # / sqrt(16)
            "elu + 1": kernel_weights(queries, elu_feature_map),
            "Taylor": kernel_weights(queries, taylor_feature_map)}


names = ["softmax", "elu + 1", "Taylor"]
print(f"D' = {elu_feature_map(keys_32).shape[-1]} for elu + 1, "
      f"{taylor_feature_map(keys_32).shape[-1]} for the Taylor map")
print(f"{'':5} {'weight on its own key':^26}  {'entropy of a row':^26}  {'rank':^10}")
print(f"{'c':>5} " + (" ".join(f"{name:>8}" for name in names) + "  ") * 2 + "  s / e / T")
own, entropy, rank = {}, {}, {}
for c in [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]:
    weights = all_weights(c)
    own[c] = {n: w.diagonal().mean().item() for n, w in weights.items()}
    entropy[c] = {n: attention_entropy(w).mean().item() for n, w in weights.items()}
    rank[c] = {n: int(torch.linalg.matrix_rank(w)) for n, w in weights.items()}
    print(f"{c:5g} " + " ".join(f"{own[c][n]:8.4f}" for n in names) + "  "
          + " ".join(f"{entropy[c][n]:8.4f}" for n in names) + "  "
          + " / ".join(f"{rank[c][n]}" for n in names))
gram_squared = (keys_32 @ keys_32.T) ** 2  # as c grows, 1 + s + s^2/2 -> s^2/2
taylor_limit = (gram_squared / gram_squared.sum(dim=-1, keepdim=True)).diagonal().mean().item()
print(f"Taylor map as c grows without bound: own-key weight -> {taylor_limit:.4f}")


# %% tags=["remove-cell"]
# Check: the numbers the prose quotes about the sharpness test.
assert all(own[c]["softmax"] > 0.99 for c in [4.0, 8.0]), own
assert all(0.031 < own[c]["elu + 1"] < 0.06 for c in own), own  # uniform: 1/32 = 0.031
assert all(entropy[c]["elu + 1"] > 3.4 for c in own), entropy
assert all(0.30 < own[c]["Taylor"] < 0.36 for c in [2.0, 4.0, 8.0]), own
assert all(entropy[c]["Taylor"] > 2.4 for c in own) and entropy[8.0]["softmax"] < 0.01, entropy
assert 0.33 < taylor_limit < 0.35, taylor_limit
assert all(rank[c]["softmax"] == 32 and rank[c]["Taylor"] == 32 for c in own), rank
assert all(rank[c]["elu + 1"] <= 16 for c in own), rank
one_key = torch.zeros(32, 32)
one_key[:, 0] = 1.0  # every query entirely on key 0: sharp, and of rank 1
assert torch.linalg.matrix_rank(one_key) == 1, "a one-key pattern should have rank 1"


# %% [markdown]
# As $c$ grows the softmax weights become the identity: from $c = 4$ on, on average more than
# 99% of a row sits on its own key and the entropy is near 0; the rank is the full 32 at every
# $c$. The elu + 1 weights barely move: about 5% of each row on the right key (uniform weights
# would give 3.1%), an entropy close to $\ln 32$, and rank 16 at most, whatever $c$, so they
# could not be the identity even if they were sharper. The Taylor map is not limited to rank 16
# (its rank is the full 32, since $D' = 273 > 32$) and is about six times sharper than elu + 1, yet it
# saturates: its similarities grow like $c^2$ for every key, so the weights tend to the ratios
# of the squared scores, 0.34 on the own key here (printed above), and scaling the query
# further does not help. So "linear attention cannot focus" is, on this test, a statement about elu + 1
# at $D' = d_h$: the rank bound is set by $D'$, and the sharpness by how fast the similarity
# grows.
#
# Performer [[Choromanski et al., 2021]](../book/references.bib#choromanski2021) (Section 2.3, Lemma 1) goes
# further with *positive random features*: $D'$ random directions $w_r$ drawn from a standard
# normal distribution and $\phi(x)_r = e^{w_r \cdot x - \|x\|^2/2} / \sqrt{D'}$ (again for
# $x$ scaled by $d_h^{-1/4}$), whose dot product estimates $e^{s}$ itself without bias, more
# precisely the more features there are. The same test at $c = 4$, with five draws of the
# random directions for each $D'$ (median and range over the draws); `linear_attention`
# accepts any such map:

# %%
def positive_random_features(num_features, seed, d_h=16):
    # Performer's map for exp(q·k/sqrt(d_h)): D' = num_features positive features.
    directions = torch.randn(num_features, d_h, generator=torch.Generator().manual_seed(seed))

    def feature_map(x):  # (…, d_h) -> (…, D')
        x = x / d_h**0.25  # then x·y = q·k / sqrt(d_h)
        return torch.exp(x @ directions.T - (x * x).sum(dim=-1, keepdim=True) / 2) \
            / math.sqrt(num_features)
    return feature_map


random_own, random_rank = {}, {}
for num_features in [16, 256, 4_096]:
    draws = [kernel_weights(4.0 * keys_32, positive_random_features(num_features, seed))
             for seed in range(5)]  # (Q, K) weights for five random draws
    random_own[num_features] = sorted(w.diagonal().mean().item() for w in draws)
    random_rank[num_features] = max(int(torch.linalg.matrix_rank(w)) for w in draws)
    low, median, high = (random_own[num_features][i] for i in (0, 2, 4))
    print(f"D' = {num_features:5,d} random features, c = 4: own-key weight {median:.2f} "
          f"(range {low:.2f} to {high:.2f}), largest rank {random_rank[num_features]}")
print(f"for comparison at c = 4: softmax {own[4.0]['softmax']:.3f}, "
      f"elu + 1 {own[4.0]['elu + 1']:.3f}, Taylor {own[4.0]['Taylor']:.3f}")
features = positive_random_features(256, seed=0)
torch.testing.assert_close(
    linear_attention(4.0 * keys_32, keys_32, keys_32, feature_map=features),
    kernel_weights(4.0 * keys_32, features) @ keys_32)

# %% tags=["remove-cell"]
# Check: the random-feature numbers the prose quotes (five draws each, any CPU).
medians = {n: values[2] for n, values in random_own.items()}
assert own[4.0]["elu + 1"] * 2 < random_own[16][0] and random_own[16][4] < 0.25, random_own
assert random_rank[16] <= 16 and random_rank[4_096] == 32, random_rank
assert medians[16] < medians[256] < medians[4_096], medians
assert 0.55 < random_own[4_096][0] and random_own[4_096][4] < 0.8, random_own

# %% [markdown]
# With as many random features as elu + 1 has ($D' = 16$) the weights are still limited to
# rank 16, but already about three times as sharp as elu + 1's, so at equal $D'$ the
# flatness is partly the choice of map. With more features the own-key weight keeps rising,
# to about two thirds at $D' = 4096$, still well short of the softmax's 0.998 at $c = 4$:
# on this test the estimates improve only slowly with $D'$: sixteen times as many features
# raise the own-key weight by half. And every feature costs: the
# state $\mathbf U$ has $D' \times d_h$ numbers, 256 times elu + 1's at $D' = 4096$, and
# the time per token grows with it. The same weights at $c = 4$, side by side:

# %% mystnb={"image": {"alt": "Three 32-by-32 heatmaps of attention weights, queries down and keys across, on one colour scale from 0 to 1, all at c = 4. Left, softmax attention: a bright yellow diagonal on a dark background. Middle, linear attention with elu + 1: uniformly dark, every weight near 1/32. Right, linear attention with the Taylor map: a clearly visible but dim diagonal, holding on average about a third of a row's weight, on a dark background."}}
weights_4 = all_weights(4.0)
fig, axes = plt.subplots(1, 3, figsize=(10, 3.9))
for ax, (name, title) in zip(axes, [("softmax", "softmax attention"),
                                    ("elu + 1", "linear, elu + 1 (D' = 16)"),
                                    ("Taylor", "linear, Taylor (D' = 273)")]):
    heatmap(weights_4[name], ax=ax, vmax=1.0, title=f"{title},\nc = 4")
fig.tight_layout()
exact = F.scaled_dot_product_attention(q, k, v)  # the random inputs of the cells above
for name, feature_map in [("elu + 1", elu_feature_map), ("Taylor", taylor_feature_map)]:
    relative = ((linear_attention(q, k, v, feature_map=feature_map) - exact).norm()
                / exact.norm()).item()
    print(f"on the random inputs of the cells above, linear attention with {name} differs "
          f"from softmax attention by {relative:.0%} (relative norm of the outputs)")

# %% [markdown]
# *Three $32 \times 32$ heatmaps of attention weights on the same colour scale, queries down,
# keys across, at $c = 4$. Left, softmax: a bright diagonal on a dark background, each query
# on its own key. Middle, linear attention with elu + 1: an almost uniformly dark field, every
# weight near 1/32. Right, the Taylor map: a dim but clear diagonal, on average about a
# third of a row's weight.* On the random inputs, too, linear and softmax attention give outputs that differ by a
# large fraction of their size, with either map.
#
# So linear attention buys $\mathcal{O}(L)$ time and a constant-size state at a price in sharpness,
# which depends on the feature map and, for one family of maps (the random features),
# grows as the state shrinks: with elu + 1 and $D' = d_h$ it hardly focuses on this test;
# maps with more features, or faster-growing similarities, focus better and cost a larger
# state. At equal $D'$ the map matters too (random features against elu + 1 at $D' = 16$,
# or against the Taylor map at about 256 features). Our test is one synthetic pattern.
# On language, Arora et al. [[Arora et al., 2024]](../book/references.bib#arora2024) report
# (abstract) a trade-off between the size of a model's recurrent state and its ability to
# recall tokens seen earlier in the context ("copy the token that came after the last
# occurrence of this one"), where softmax attention, which keeps every key, does best.
# Later work changes how the state is updated: Mamba [[Gu and Dao, 2023]](../book/references.bib#gu2023)
# lets the input decide, token by token, how much of the state to keep (gating), and the
# delta rule of Schlag et al. [[Schlag et al., 2021]](../book/references.bib#schlag2021) overwrites what
# a key stored instead of adding to it; many long-context models mix a few softmax layers
# with many cheaper ones. Which trade is right depends on the task; the
# exact methods of this chapter make no trade at all.
#
# ## Summary
#
# - Attention's score and weight matrices hold $B \cdot H \cdot L^2$ numbers, and the work is
#   $\mathcal{O}(L^2 d_h)$ per head: at 128k tokens the scores of one layer would take 1 TiB. Measured: the naive
#   peak memory is two $(L, L)$ matrices plus the output (slope 2 on log-log axes), and the time grows
#   quadratically while projections grow linearly.
# - The **online softmax** finds a row's maximum $m$ and denominator $\ell$ in one pass over
#   blocks: when the maximum grows to $m'$, the sum so far is rescaled by $e^{m - m'} \le 1$.
#   It equals `torch.softmax`, also for scores around $\pm 10^4$.
# - **Tiled attention** carries the output along: $a \leftarrow e^{m - m'} a + \sum e^{s - m'} v$,
#   and $o = a / \ell$ at the end. It equals `F.scaled_dot_product_attention` to $10^{-5}$,
#   with or without a causal mask, and in inference its memory grows like $L\,(b + d_h)$, linear in $L$: 18
#   times less than naive at $L = 4096$. Under autograd the saved tiles (scores and weights) bring the $L^2$ back
#   (167 MiB against the naive 129 MiB); FlashAttention keeps training memory linear by
#   recomputing the tiles in the backward pass. Masks that empty whole tiles (causal, truncated) let it skip them.
# - A **sliding window with global tokens** (Longformer, BigBird) keeps about $(2w + 1 + 2g)/T$
#   of the scores when $T$ is much larger than $w$; counted exactly, under 2% at $T = 16{,}384$, $w = 128$, $g = 2$. Through
#   a global token every token reaches every other in two layers without a causal mask;
#   with one, a global token at position 0 relays nothing from other tokens (only its own
#   input reaches every later token).
# - **FlashAttention** is tiled attention as one fused GPU kernel: the tiles stay on the chip
#   (SRAM and registers), so the $(L, L)$ traffic to HBM disappears (FlashAttention-2 puts the query blocks
#   in the outer loop, as our code does). That, not fewer FLOPs, is why it is
#   faster. In Python on a CPU the same loop saves memory; the little time it saved at the longest length here
#   came mostly from the naive version's fresh allocations, not from the caches (measured by
#   reusing its buffers); PyTorch's fused CPU kernel saves both.
# - The **KV cache** stores each token's key and value, which the causal mask makes final,
#   so a decoding step projects one token and computes one row of scores: $t$ times fewer
#   FLOPs at step $t$, with identical outputs. The time saved is much smaller. In our toy
#   layer ($D = 64$) a fixed cost per step (Python, dispatch, input checks) dominates the
#   cached step, and elementwise work on the $t^2$ scores much of the recomputed one, which
#   barely changes when the width, and with it the FLOPs, shrinks: measured. At real widths, counted with a roofline model, a cached step reads
#   every weight and the whole cache for one multiply-add per number, so it is memory-bound,
#   and on an A100 recomputation is memory-bound too up to $t \approx 150$. The cache's size,
#   $2LD$ numbers per layer, becomes the limit for long contexts.
# - **Multi-query and grouped-query attention** keep $H$ query heads but only $H_\text{kv}$
#   heads of keys and values, each read by a group of $H / H_\text{kv}$ query heads: repeat the
#   keys and values per group and it is multi-head attention (checked against PyTorch's
#   `enable_gqa`). The cache shrinks by $H / H_\text{kv}$, counted: 2 GiB, 512 MiB and 64 MiB
#   per 4k-token sequence for a Llama-2-7B shape with 32, 8 and 1 key-value heads. On our
#   recall task (one layer, five seeds each, 200 steps, by which each of these fifteen runs has learned) all three
#   settings learn, and their final losses overlap; how fast each learns is not compared.
# - **Linear attention** replaces $\exp(q \cdot k / \sqrt{d_h})$ by $\phi(q)^\top\phi(k)$,
#   with a feature map of output size $D'$, and reorders the product to $\mathcal{O}(L D' d_h)$; its
#   causal form is an RNN with a fixed $(D', d_h)$ state. Its weights have rank at most $D'$
#   (no identity pattern over more than $D'$ keys). On our 32-key test, elu + 1
#   ($D' = d_h = 16$) stays flat; the degree-2 Taylor map ($D' = 273$) and Performer's random
#   features ($D' = 256$ and 4096) reach rank 32 and focus better, but none comes near the
#   softmax, and a larger $D'$ means a larger state.
#
# ## Exercises
#
# **1. A 128k context.** For one layer with 32 heads and one sequence of 131,072 tokens, how
# much memory would the attention weights take in 16-bit numbers? Training keeps them for
# the backward pass in each of 32 layers: how much is that? Besides the inputs $Q$, $K$, $V$ and the
# output $O$, which the backward pass of any attention needs, FlashAttention keeps only the
# statistics $m$ and $\ell$ per row, in 32-bit numbers (FlashAttention-2 keeps their
# combination $m + \ln \ell$, one number per row): how much memory is that extra state for
# the 32 layers, and how does it compare with the output $O$ (head dimension $d_h = 128$,
# 16-bit numbers)?
#
# <details>
# <summary>Solution</summary>
#
# The weights are $32 \times 131072^2$ numbers of 2 bytes: $2^{40}$ bytes, 1 TiB per layer,
# 32 TiB for 32 layers, far beyond any machine. The two statistics $m$ and $\ell$,
# two 32-bit numbers per row, take $2 \times 32 \times 131072 \times 4$ bytes = 32 MiB per
# layer, 1 GiB for 32 layers: 32,768 times less than the weights. FlashAttention-2's one
# number per row halves that again: 16 MiB per layer, 512 MiB for 32 layers, a factor of
# 65,536 less. These factors compare the *extra* state with the weights. The output $O$,
# which the backward pass also needs, is $32 \times 131072 \times 128 \times 2$ bytes = 1 GiB per
# layer, 32 times the statistics, and $Q$, $K$ and $V$ are as large again each; so a layer
# keeps about 4 GiB instead of more than 1 TiB. The recomputation in the backward pass
# rebuilds each tile of $\mathbf A$ from $Q$, $K$ and the statistics when it is needed.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 1.
heads_1, length_1, layers_1 = 32, 131_072, 32
weights_bytes = heads_1 * length_1**2 * 2
for name, per_row in [("m and l (FlashAttention)", 2), ("m + ln l (FlashAttention-2)", 1)]:
    stats_bytes = per_row * heads_1 * length_1 * 4
    print(f"{name}: {stats_bytes / 2**20:.0f} MiB per layer, "
          f"{layers_1 * stats_bytes / 2**20:.0f} MiB for {layers_1} layers "
          f"({weights_bytes // stats_bytes:,} times less than the weights)")
    assert weights_bytes // stats_bytes == {2: 32_768, 1: 65_536}[per_row], f"got {weights_bytes // stats_bytes=}"
print(f"weights, one layer: {weights_bytes / 2**40:.0f} TiB; "
      f"{layers_1} layers: {layers_1 * weights_bytes / 2**40:.0f} TiB")
output_bytes = heads_1 * length_1 * 128 * 2  # O, d_h = 128, 16-bit
print(f"the output O, one layer: {output_bytes / 2**30:.0f} GiB "
      f"({output_bytes // (2 * heads_1 * length_1 * 4)} times the statistics m and l)")
assert weights_bytes == 2**40 and 2 * heads_1 * length_1 * 4 * layers_1 == 2**30, weights_bytes
assert output_bytes == 2**30, output_bytes


# %% [markdown]
# **2. Choosing the block size.** A FlashAttention-style kernel holds in SRAM, for square
# blocks of $b$ queries and $b$ keys and head dimension $d_h$: the blocks of $Q$, $K$ and $V$
# in 16-bit numbers ($3b d_h$ numbers), the tile of scores in 32-bit ($b^2$), the accumulator in
# 32-bit ($b d_h$) and $m$, $\ell$ in 32-bit ($2b$). With 192 KB of SRAM, what is the largest
# power of two $b$ that fits for $d_h = 64$ and for $d_h = 128$? Why not simply take $b$ as
# small as possible?
#
# <details>
# <summary>Solution</summary>
#
# The bytes needed are $6b d_h + 4b^2 + 4b d_h + 8b$. For $d_h = 64$, $b = 128$ needs 145 KiB and
# fits, $b = 256$ needs 418 KiB and does not; for $d_h = 128$, $b = 64$ needs 96.5 KiB and
# $b = 128$ needs 225 KiB, too much. Small blocks fit easily but waste the hardware: every
# block of queries streams all of $K$ and $V$ through the chip once, so the traffic from HBM
# is about $(L / b) \cdot 2 L d_h$ numbers and grows as $b$ shrinks, and tiny tiles keep the
# matrix units poorly fed. Real kernels therefore take the largest tiles that fit, often
# rectangular (for example 128 queries by 64 keys), tuned for each GPU and head dimension.
# This budget is a simplified model, so its answer ($b = 64$ at $d_h = 128$) is not what real
# kernels pick: they keep the tile of scores in registers rather than in SRAM, a single
# block of work cannot use all 192 KB, and FlashAttention-2 chooses among blocks of 64 or
# 128 queries by 64 or 128 keys for each head dimension and GPU [[Dao, 2024]](../book/references.bib#dao2023) (Section 3.3).
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 2.
def sram_bytes(b, d):
    return 2 * 3 * b * d + 4 * b * b + 4 * b * d + 4 * 2 * b  # Q, K, V; Z tile; acc; m and l


for d in [64, 128]:
    fits = [b for b in [16, 32, 64, 128, 256] if sram_bytes(b, d) <= 192 * 1024]
    print(f"d_h = {d:3d}: " + ", ".join(f"b = {b}: {sram_bytes(b, d) / 1024:.1f} KiB"
                                      for b in [64, 128, 256])
          + f"  -> largest that fits: b = {max(fits)}")


# %% [markdown]
# **3. How many sequences fit?** A GPU with 80 GB ($80 \times 10^9$ bytes) of memory serves a
# model shaped like Llama 2 7B: 32 layers, 32 query heads of $d_h = 128$, 16-bit numbers, and
# 13.4 GB of weights (6.7 billion parameters of 2 bytes). Llama 2 uses grouped-query
# attention only in its 34B and 70B models ([Touvron et al. [2023]](../book/references.bib#touvron2023b), Section 2.2 and
# Table 1), so take the key-value heads as a free choice: with 32, 8 and 1 of them, how
# many sequences of 4,096 tokens fit in the memory beside the weights, and how many of
# 131,072 tokens (ignoring every other buffer)?
#
# <details>
# <summary>Solution</summary>
#
# The memory left is $80 - 13.4 = 66.6$ GB. A 4k-token sequence caches
# $2 \times 4096 \times 32 \times H_\text{kv} \times 128 \times 2$ bytes: 2 GiB (2.15 GB) with
# 32 key-value heads, 512 MiB with 8 and 64 MiB with one, so 31, 124 and 992 sequences fit.
# At 128k tokens each sequence needs 32 times as much: 64 GiB (68.7 GB) with 32 key-value
# heads, more than the memory left, so not even one sequence fits; 3 fit with 8 heads and
# 31 with one. This is one reason why many long-context models share their key-value heads.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 3.
free_bytes = 80e9 - 2 * 6.7e9  # memory left beside the weights
fitting = {}
for tokens in [4_096, 131_072]:
    for kv_heads in [32, 8, 1]:
        per_sequence = kv_cache_bytes(tokens, 32, kv_heads, 128)
        fitting[tokens, kv_heads] = int(free_bytes // per_sequence)
        print(f"{tokens:7,d} tokens, {kv_heads:2d} key-value head{'s' * (kv_heads > 1)}: "
              f"{per_sequence / 2**20:7,.0f} MiB per sequence, {fitting[tokens, kv_heads]:4d} fit")
assert list(fitting.values()) == [31, 124, 992, 0, 3, 31], fitting


# **4. Merging two partial results.** Split the keys (and their values) into two halves and
# let two workers each compute attention over one half, returning for every query its row
# maximum $m_1$ (or $m_2$), denominator $\ell_1$ ($\ell_2$) and *normalised* output $o_1$
# ($o_2$). Show how to combine them into the exact output over all keys, and check it in code.
# (This is how long sequences are split across the compute units of one GPU during decoding,
# and across several GPUs in ring attention.)
#
# <details>
# <summary>Solution</summary>
#
# Move both halves to the common maximum $m = \max(m_1, m_2)$. The denominator of half $r$
# measured against $m$ is $w_r = \ell_r e^{m_r - m}$, and its unnormalised output is
# $w_r o_r$. The full denominator is $w_1 + w_2$ and the full output
#
# $$
# o = \frac{w_1\, o_1 + w_2\, o_2}{w_1 + w_2} ,
# $$
#
# a weighted average of the two partial outputs, each weighted by how much softmax mass its
# half holds. It is the tiled-attention update with a "block" that is a whole half, and it
# works for any number of parts, merged in any order.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 4.
def partial_attention(q, k, v):
    # Attention over some keys, with each query's row max m and denominator l.
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (Q, K_part)
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)
    return m, l, p @ v / l  # (Q, 1), (Q, 1), (Q, Dv)


set_seed(8)
q4, k4, v4 = torch.randn(6, 64), torch.randn(100, 64), torch.randn(100, 32)
m1, l1, o1 = partial_attention(q4, k4[:40], v4[:40])
m2, l2, o2 = partial_attention(q4, k4[40:], v4[40:])
m = torch.maximum(m1, m2)
w1, w2 = l1 * torch.exp(m1 - m), l2 * torch.exp(m2 - m)
merged = (w1 * o1 + w2 * o2) / (w1 + w2)
torch.testing.assert_close(merged, F.scaled_dot_product_attention(q4, k4, v4))
print("merged halves = attention over all 100 keys; share of softmax mass in the first "
      f"half, first query: {(w1 / (w1 + w2))[0].item():.4f}")
