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
# # 4. Masking
#
# So far every query could look at every key. Two everyday situations need less. A batch of
# sentences of different lengths is filled up to one common length, and the filler is not
# data: no query should look at it. And a language model that learns to predict the next word
# must not look at the words it is trying to predict. Both are handled the same way. A boolean
# *mask* says, for every query and every key, whether the query may attend to that key, and
# the softmax hands out weight only where the mask allows it. (This attention mask is not the
# `[MASK]` token of BERT [[Devlin et al., 2019]](../book/references.bib#devlin2019), §3.1, which replaces some
# input tokens by a placeholder the model must fill in: that changes the input, while an
# attention mask leaves the input alone and decides which keys each query may read.)
#
# **What you will learn**
#
# - why batches need [padding](../book/glossary.md#term-padding), and how each sequence's [valid length](../book/glossary.md#term-valid-length) becomes a
#   boolean [attention mask](../book/glossary.md#term-attention-mask);
# - the [masked softmax](../book/glossary.md#term-masked-softmax), derived step by step, including its one tricky case: a query
#   with nothing to attend to must get zero weights (not uniform weights, and not NaN);
# - [padding masks](../book/glossary.md#term-padding-mask) for a batch, broadcast from (B, K) to (B, Q, K);
# - the [causal mask](../book/glossary.md#term-causal-mask) and [masked self-attention](../book/glossary.md#term-masked-self-attention): how a [language model](../book/glossary.md#term-language-model)
#   trains on every prefix of a sentence in a single pass, checked against a loop over the
#   prefixes;
# - how to combine masks, and how to translate the book's convention (True = may attend) into
#   those of `nn.MultiheadAttention`, additive masks, d2l and Hugging Face.
#
# You need the softmax and the scaled dot-product score $q^\top k / \sqrt{d}$ of chapter 3.
# The outputs below were made with PyTorch 2.13, whose version the set-up cell prints. Some of
# what the chapter shows of PyTorch's own functions is recent: the `scale=` argument of
# `F.scaled_dot_product_attention` needs PyTorch 2.1, `torch.nn.attention.sdpa_kernel` 2.3, and
# zero weights for a query whose keys are all masked 2.5, so the chapter needs PyTorch 2.5 or later.

# %%
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.patches import Rectangle
from torch import nn

from helpers.attention import masked_softmax, scaled_dot_product_attention
from helpers.checks import check_shape
from helpers.figures.plotting import heatmap
from helpers.figures.widgets import slider_figure, slider_heatmap
from helpers.masks import (causal_mask, from_key_padding_mask, to_additive_mask,
                           to_key_padding_mask, valid_length_mask)
from helpers.seeding import set_seed
from helpers.tasks.tokens import build_vocab, encode, format_matrix, pad_tokens

torch.set_num_threads(1)  # tiny tensors: one thread is as fast, and steadier
set_seed(0)
if torch.__version__ < "2.5":  # a fully masked row gives NaN in SDPA before 2.5
    warnings.warn(f"this chapter needs PyTorch >= 2.5, found {torch.__version__}")
print(f"PyTorch {torch.__version__.split('+')[0]}")  # without the build tag (+cpu, +cu126)

# %% [markdown]
# ## Why batches need padding
#
# Models are trained on mini-batches: $B$ sequences stacked into one tensor, so that one
# matrix product processes all of them at once. A tensor is rectangular; a batch of sentences
# is not. Here are three sentences, each wrapped in the begin- and end-of-sequence tokens
# `<bos>` and `<eos>` that language models use, with 5, 3 and 7 tokens.
#
# The standard fix is [padding](../book/glossary.md#term-padding): append a filler token `<pad>` to the shorter sentences
# until every row has the length $T$ of the longest. How many real tokens a row holds is its
# [valid length](../book/glossary.md#term-valid-length) $L_b$. `helpers.tasks.tokens.pad_tokens` does the padding and returns the
# valid lengths; `build_vocab` numbers the tokens, with `<pad>` as id 0, and `encode` turns the
# padded rows into one (B, T) tensor of ids.

# %%
sentences = ["<bos> I like you <eos>",
             "<bos> hello <eos>",
             "<bos> attention is all you need <eos>"]
padded, valid_lens = pad_tokens(sentences)  # B token lists of length T, (B,)
vocab = build_vocab(sentences)  # token -> id, "<pad>" is 0
token_ids = encode(padded, vocab)  # (B, T)
B, T = token_ids.shape
check_shape(valid_lens, (B,))

for row, length in zip(padded, valid_lens):
    print(" ".join(f"{token:>9}" for token in row), f"  valid length {length}")
print("token ids (B, T):")
print(token_ids)

# %% [markdown]
# The tensor is rectangular now, but padding has also added keys. To see what they do, run
# [self-attention](../book/glossary.md#term-self-attention) over the batch: the queries, keys and values all come from the same
# sequence (in code, `attention(x, x, x)`), so every token's output is a weighted average over
# the tokens of its own sentence. Each token is embedded by a random `nn.Embedding` whose
# `padding_idx` row, the vector of `<pad>`, is all zeros. Queries and keys are the embeddings
# times two fixed random $D \times D$ matrices, scored with the scaled dot product; the values
# are the embeddings themselves. Later chapters learn such matrices; for masking, any will do.

# %%
D = 8  # features per token
set_seed(0)
embedding = nn.Embedding(len(vocab), D, padding_idx=vocab["<pad>"])  # <pad> -> zeros
w_query, w_key = torch.randn(D, D) / D**0.5, torch.randn(D, D) / D**0.5


def embed(ids):
    return embedding(ids).detach()  # (..., T) ids -> (..., T, D) vectors


x = embed(token_ids)  # (B, T, D)


def attention_scores(x):
    # (..., T, D) -> (..., T, T): scaled dot products of queries x W_q and keys x W_k
    return (x @ w_query) @ (x @ w_key).transpose(-2, -1) / D**0.5


def attention_no_mask(x):
    attention_weights = torch.softmax(attention_scores(x), dim=-1)  # (..., T, T)
    return attention_weights @ x, attention_weights  # (..., T, D), (..., T, T)


print(f"<pad> embedding: {embedding.weight[vocab['<pad>']].tolist()}")

# %% [markdown]
# Take the shortest sentence, `<bos> hello <eos>`, run it alone, and then again padded to 5,
# 7 and 9 tokens, as it would be in batches whose longest sentence had those lengths. The
# table gives the share of its real queries' weight that lands on `<pad>` keys, and how far
# its three outputs move from those of the sentence alone.

# %%
hello_ids = token_ids[1:2, :3]  # (1, 3): "<bos> hello <eos>", no padding
alone, _ = attention_no_mask(embed(hello_ids))  # (1, 3, D)
print(f"{'padded length':>13} {'weight on <pad>':>16} {'largest change':>15}")
pad_shares = []
for length in [3, 5, 7, 9]:
    pads = torch.full((1, length - 3), vocab["<pad>"])  # (1, length - 3)
    out, weights = attention_no_mask(embed(torch.cat([hello_ids, pads], dim=1)))
    pad_shares.append(weights[0, :3, 3:].sum(dim=-1).mean().item())  # mean over queries
    change = (out[0, :3] - alone[0]).abs().max().item()
    print(f"{length:13d} {pad_shares[-1]:16.3f} {change:15.3f}")
assert pad_shares[0] == 0 and all(a < b for a, b in zip(pad_shares, pad_shares[1:])), f"got {pad_shares[0]=}"
assert 0.6 < pad_shares[-1] < 2 / 3, f"got {pad_shares[-1]=}"  # six pads: nearly two thirds of the weight

# %% [markdown]
# Without a mask, a sentence's outputs depend on how much padding its batch happened to need:
# `hello` is represented differently in a batch whose longest sentence has 5 tokens than in
# one whose longest has 9, and with six pads nearly two thirds of its attention goes to them.
# (How large a share belongs to this draw of the random embedding and matrices: another seed
# gives another share. That it grows with every pad added does not: each pad's key is the
# zero vector and scores 0, so each added pad adds $e^0 = 1$ both to the pads' unnormalised
# weight and to the softmax's denominator, while the real keys' terms stay as they were.)
# A zero vector does not make padding harmless. A zero key scores $q^\top 0 = 0$, which in a
# softmax is a perfectly ordinary score ($e^0 = 1$, the same as any other key scoring 0), and
# a zero value drags the average towards zero. Padding has to be kept out of the softmax
# altogether, and that takes a mask.
#
# ## Valid lengths as boolean masks
#
# Sentence $b$ has $L_b$ real tokens at positions $0, \dots, L_b - 1$, followed by padding.
# Key $j$ of sentence $b$ may be attended to exactly when it is real:
#
# $$
# m_{bj} = [\, j < L_b \,] \qquad (b = 0, \dots, B - 1;\ j = 0, \dots, K - 1),
# $$
#
# where $[\cdot]$ is True when the condition holds. This (B, K) boolean tensor is an
# [attention mask](../book/glossary.md#term-attention-mask). The convention of this book, used everywhere: **True means the
# query may attend to this key**, the convention of `F.scaled_dot_product_attention`. Other
# libraries chose differently, as the table at the end of the chapter shows.
#
# In code, one comparison between the positions (K,) and the lengths (B, 1) broadcasts to
# (B, K). `helpers.masks.valid_length_mask` does the same after checking its input.

# %%
positions = torch.arange(T)  # (K,)
naive_mask = positions[None, :] < valid_lens[:, None]  # (1, K) < (B, 1) -> (B, K)
pad_mask = valid_length_mask(valid_lens, num_keys=T)  # (B, K), True = may attend
check_shape(pad_mask, (B, T))
assert pad_mask.dtype == torch.bool and torch.equal(naive_mask, pad_mask), f"got {pad_mask.dtype=}, {torch.bool=}"
assert torch.equal(pad_mask, token_ids != vocab["<pad>"])  # right padding: not <pad>

print(format_matrix(pad_mask, row_labels=[f"sentence {b}, L = {n}"
                                          for b, n in enumerate(valid_lens.tolist())],
                    col_labels=[f"k{j}" for j in range(T)]))

# %% [markdown]
# One length per sentence treats all the queries of a sentence alike. Sometimes each query
# needs its own length. With `valid_lens` of shape (B, Q), query $i$ of sentence $b$ gets
# length $L_{bi}$ and the mask becomes (B, Q, K):
#
# $$
# m_{bij} = [\, j < L_{bi} \,].
# $$
#
# Two uses. Giving the real queries length $L_b$ and the padding queries length 0 masks
# queries as well as keys: a padding query then sees nothing at all (what the softmax should
# do with such a row is the subject of a later section). And giving query $i$ the length
# $i + 1$, whatever the sentence, lets each position see itself and the positions before it:
# that staircase is the *causal mask*, the second half of this chapter.

# %%
per_query_lens = torch.where(pad_mask, valid_lens[:, None], 0)  # (B, Q): L_b or 0
query_key_mask = valid_length_mask(per_query_lens, num_keys=T)  # (B, Q, K)
check_shape(query_key_mask, (B, T, T))
assert torch.equal(query_key_mask, pad_mask[:, :, None] & pad_mask[:, None, :])
growing_lens = torch.arange(1, T + 1).expand(B, T)  # (B, Q): query i gets length i + 1
growing_mask = valid_length_mask(growing_lens, num_keys=T)  # (B, Q, K)

print("per-query lengths of sentence 1:", per_query_lens[1].tolist())
print(format_matrix(query_key_mask[1], row_labels=padded[1], col_labels=padded[1]))


# %% mystnb={"image": {"alt": "Three 7 by 7 boolean masks for the sentence '<bos> hello <eos>' and four pads, yellow for True and purple for False. Left: the first three key columns are yellow in every row. Middle: only the top-left 3 by 3 block is yellow. Right: a lower-triangular staircase, yellow on and below the diagonal."}}
def token_heatmap(ax, matrix, tokens, title, vmax=1.0, colorbar=True, annotate=False):
    # A (Q, K) heatmap with the tokens as tick labels (queries down, keys across).
    heatmap(matrix, ax=ax, title=title, vmax=vmax, colorbar=colorbar, annotate=annotate,
            xticklabels=tokens, yticklabels=tokens, xlabel="keys", ylabel="queries")
    ax.tick_params(axis="x", labelrotation=90)
    return ax


fig, axes = plt.subplots(1, 3, figsize=(10, 3.8))
panels = [(pad_mask[1].expand(T, T), "1-D lengths (B,): keys only"),
          (query_key_mask[1], "2-D lengths: queries and keys"),
          (growing_mask[1], "2-D lengths i + 1: a staircase")]
for ax, (matrix, title) in zip(axes, panels):
    token_heatmap(ax, matrix, padded[1], title, colorbar=ax is axes[-1])
fig.tight_layout();

# %% [markdown]
# *Three masks for sentence 1 (`<bos> hello <eos>` and four pads); yellow is True (may
# attend), purple False.* On the left, one length per sentence: every query may look at the
# three real keys, and the padding columns are closed. In the middle, per-query lengths also
# close the rows of the padding queries, leaving a 3 × 3 block. On the right, the per-query
# lengths $1, 2, \dots, 7$ give a staircase, lower-triangular, that ignores where the padding
# is; combining it with padding comes later in the chapter.
#
# ## Masked softmax, step by step
#
# Given one query's scores $s_1, \dots, s_K$ and its mask $m_1, \dots, m_K$, the masked softmax
# is the softmax over the allowed keys alone, with weight 0 on the others:
#
# $$
# \alpha_j = \frac{m_j \exp(s_j - s_{\max})}{\sum_{k=1}^{K} m_k \exp(s_k - s_{\max})},
# \qquad s_{\max} = \max_{k:\, m_k} s_k ,
# $$
#
# reading $m_j$ as 1 or 0. Subtracting $s_{\max}$, the largest *allowed* score, changes nothing
# mathematically (it cancels between numerator and denominator) but keeps every exponent at
# most 0, so `exp` can never overflow. If no key is allowed the formula is $0/0$; this case is
# the subject of the next section, and the answer used here is $\alpha_j = 0$ for every $j$.
#
# The standard way to compute it: write $-\infty$ into the masked scores, since
# $\exp(-\infty) = 0$ removes them from both sums. Below are four queries over five keys,
# each with its own valid length; the last query, with length 0, may attend to nothing.

# %%
set_seed(1)
example_lens = torch.tensor([3, 5, 1, 0])  # the last query may attend to nothing
scores = 2 * torch.randn(4, 5)  # (Q, K): a row of scores per query
mask = valid_length_mask(example_lens, num_keys=5)  # (Q, K), True = may attend
labels = [f"L = {n}" for n in example_lens.tolist()]
keys_labels = [f"k{j}" for j in range(5)]
print("scores:")
print(format_matrix(scores, row_labels=labels, col_labels=keys_labels))
print("mask:")
print(format_matrix(mask, row_labels=labels, col_labels=keys_labels))


# %% [markdown]
# **Step 1: check the mask, then fill with $-\infty$.** The mask must be boolean (a 0/1
# float mask would be *added* to the scores by some libraries, a different convention) and
# must broadcast to the scores' shape. Only then are the masked scores replaced.
#
# **Step 2: subtract the row maximum.** The maximum of a non-empty row is the largest allowed
# score, exactly $s_{\max}$. In the empty row it is $-\infty$, and $-\infty - (-\infty)$ is NaN, so
# there the maximum is replaced by 0 (any finite number would do: that row is all $-\infty$
# either way).

# %%
def check_mask(mask, scores):
    fits = torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape
    if mask.dtype != torch.bool or not fits:
        raise ValueError("mask must be a bool tensor that broadcasts to the scores")


# 1) check the mask, then fill the masked scores with -inf
check_mask(mask, scores)
filled = scores.masked_fill(~mask, float("-inf"))  # (Q, K)
print("1) filled:")
print(format_matrix(filled, row_labels=labels, col_labels=keys_labels))

# 2) subtract the largest allowed score of each row
row_max = filled.amax(dim=-1, keepdim=True)  # (Q, 1), -inf for the empty row
print("2) row maxima:", [f"{value:.3f}" for value in row_max.flatten().tolist()])
row_max = torch.where(torch.isinf(row_max), 0.0, row_max)  # avoid -inf - (-inf) = NaN
shifted = filled - row_max  # (Q, K): each row's largest allowed entry is now 0
print(format_matrix(shifted, row_labels=labels, col_labels=keys_labels))

# %% [markdown]
# **Step 3: exponentiate.** Masked entries become exactly 0, and every allowed entry lies in
# $(0, 1]$, with 1 at the row's maximum.
#
# **Step 4: normalise.** Divide by the row sum. A row with at least one allowed key contains
# that 1, so its sum is at least 1 and the division is safe. The empty row sums to 0; dividing
# by `total.clamp_min(1)` leaves every other row alone and turns the empty row's $0/0$ into
# $0/1 = 0$, with finite gradients. (A `torch.where` that picks 0 after computing $0/0$ would
# leave NaN in the gradients of the row's intermediate results. Here they stop at the masked
# scores, since the fill of step 1 passes no gradient to the entries it overwrote; but a mask
# *added* to the scores, as an additive mask is, lets them through to the scores and to every
# parameter behind them.)

# %%
# 3) exponentiate: masked entries become exactly 0
exps = shifted.exp()  # (Q, K)
print("3) exp:")
print(format_matrix(exps, row_labels=labels, col_labels=keys_labels))

# 4) normalise; a row with an allowed key sums to >= 1, the empty row to 0
total = exps.sum(dim=-1, keepdim=True)  # (Q, 1)
print("4) row sums:", [f"{value:.3f}" for value in total.flatten().tolist()])
weights = exps / total.clamp_min(1.0)  # (Q, K)
print(format_matrix(weights, row_labels=labels, col_labels=keys_labels))
print("weights sum to:", [f"{value:.3f}" for value in weights.sum(dim=-1).tolist()])


# %% [markdown]
# Gathered into one function, the four steps are the masked softmax. Two references should
# agree with it: the helper `helpers.attention.masked_softmax`, and PyTorch's own
# `F.scaled_dot_product_attention` with a boolean `attn_mask` (True = may attend, the same
# convention). The latter returns outputs, not weights, but a small trick recovers the
# weights: with `scale=1`, identity keys turn the queries into the scores themselves
# ($q\, I^\top = q$), and identity values turn the output into the weights ($\alpha I = \alpha$).

# %%
def masked_softmax_naive(scores, mask):
    check_mask(mask, scores)
    filled = scores.masked_fill(~mask, float("-inf"))  # 1) masked scores -> -inf
    row_max = filled.amax(dim=-1, keepdim=True)  # 2) the largest allowed score
    row_max = torch.where(torch.isinf(row_max), 0.0, row_max)
    exps = (filled - row_max).exp()  # 3) masked entries -> 0
    return exps / exps.sum(dim=-1, keepdim=True).clamp_min(1.0)  # 4) empty rows -> 0


identity = torch.eye(5)
sdpa_weights = F.scaled_dot_product_attention(scores, identity, identity,
                                              attn_mask=mask, scale=1.0)  # (Q, K)
torch.testing.assert_close(masked_softmax_naive(scores, mask), weights)
torch.testing.assert_close(masked_softmax(scores, mask), weights)
torch.testing.assert_close(sdpa_weights, weights)
print("the four steps, helpers.attention.masked_softmax and "
      "F.scaled_dot_product_attention agree")

# %% [markdown]
# The same holds for whole attention layers. Below, random queries, keys and values for a
# batch of two sequences, with a (B, Q, K) mask that includes an empty row, go through the
# book's `scaled_dot_product_attention` and PyTorch's.

# %%
set_seed(2)
q, k, v = torch.randn(2, 4, 6), torch.randn(2, 5, 6), torch.randn(2, 5, 3)
batch_lens = torch.tensor([[3, 5, 1, 0], [2, 2, 4, 5]])  # (B, Q): one length per query
batch_mask = valid_length_mask(batch_lens, num_keys=5)  # (B, Q, K)
out, attention_weights = scaled_dot_product_attention(q, k, v, batch_mask)
check_shape(out, (2, 4, 3))
check_shape(attention_weights, (2, 4, 5))
reference = F.scaled_dot_product_attention(q, k, v, attn_mask=batch_mask)
torch.testing.assert_close(out, reference)
print("row sums of the weights:")
print(format_matrix(attention_weights.sum(dim=-1), row_labels=["batch 0", "batch 1"]))

# %% mystnb={"image": {"alt": "A 4 by 5 heatmap of weights with the values written in the cells. Row L = 3 has weight on keys k0 to k2 only, row L = 5 on all five keys, row L = 1 has weight 1.00 on k0, and row L = 0 is 0.00 everywhere."}}
fig, ax = plt.subplots(figsize=(4.8, 3.4))
heatmap(weights, ax=ax, annotate=True, xticklabels=keys_labels, yticklabels=labels,
        title="masked softmax weights")
fig.tight_layout();

# %% [markdown]
# *The weights of the four example queries, with values printed in the cells.* Each non-empty row's
# weight lies to the left of its valid length and sums to 1; the query with $L = 1$ puts all
# of it on its only key; the query with $L = 0$ is zero from end to end.
#
# ## A query with nothing to attend to
#
# When does a query have no allowed key? Earlier we saw one case: padding queries under a
# query-and-key mask. Others arise as soon as masks are combined: a left-padded batch under a
# causal mask (later in this chapter), a sequence that is entirely padding, cross-attention
# to an empty memory. What should such a query get?
#
# Keep the stakes in view. On every row that has an allowed key, the answers below agree
# (the next cell checks it), and in self-attention with correct masks no real token's row is
# empty, since a real query may always attend to itself. The choice therefore decides what the
# empty rows hold, in self-attention rows that a correct model computes and then discards
# (cross-attention to an empty memory is the exception, and there zeros say the truth: nothing
# was received), and whether they
# hold NaN, which, unlike a discarded number, spreads into the loss and the gradients. In
# self-attention it reaches a real output only through a bug, such as code that reads the discarded rows.
#
# The output of attention is $\sum_{j:\, m_j} \alpha_j v_j$, a sum over the allowed keys. With
# no allowed key it is an *empty sum*, and an empty sum is 0. All-zero weights say exactly
# that: this query received nothing. The two common shortcuts say something else. d2l's own `masked_softmax` (Section 11.3,
# "Attention Scoring Functions", subsection "Masked Softmax Operation" [[Zhang et al., 2023]](../book/references.bib#zhang2023d2l))
# fills masked scores with a large negative number, $-10^6$, instead of $-\infty$: it calls
# its inner helper `_sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)`, which
# writes the fill by index assignment, `X[~mask] = value`. Production code usually fills with
# the most negative finite number of the scores' dtype, `torch.finfo(dtype).min` (Hugging Face
# Transformers builds its additive masks this way), which fits in float16 where $-10^6$ does
# not, and which, like $-10^6$, gives an empty row uniform weights when it is written into the
# scores, as `masked_fill` does. *Added* to float16 scores, as an additive mask is, it can
# overflow: a negative enough score takes the sum below float16's most negative finite number, to
# $-\infty$, and an empty row in which every entry overflows is NaN again. A plain softmax over a row filled with
# $-\infty$ computes $0/0$.

# %%
d2l_style = torch.softmax(scores.masked_fill(~mask, -1e6), dim=-1)  # fill with -1e6
inf_plain = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
book = masked_softmax(scores, mask)
print("weights of the query with L = 0:")
fill_names = ["fill -1e6 (d2l)", "fill -inf, softmax", "masked_softmax"]
print(format_matrix(torch.stack([d2l_style[3], inf_plain[3], book[3]]),
                    row_labels=fill_names, col_labels=keys_labels, fmt="{:.4f}"))
torch.testing.assert_close(d2l_style[:3], book[:3])  # equal where a key is allowed
torch.testing.assert_close(d2l_style[3], torch.full((5,), 0.2))
assert torch.isnan(inf_plain[3]).all() and torch.isfinite(inf_plain[:3]).all()
assert torch.finfo(torch.float16).min == -65504, f"got {torch.finfo(torch.float16).min=}"  # the most negative finite float16
half_scores = scores.half()  # float16: its most negative finite number is -65504
try:
    half_scores.masked_fill(~mask, -1e6)
except RuntimeError as error:  # masked_fill refuses a fill float16 cannot hold
    assert "overflow" in str(error), f"got {str(error)=}"
    print(f"float16 masked_fill(~mask, -1e6): RuntimeError: {error}")
else:
    raise AssertionError("masked_fill accepted -1e6 in float16")
half_filled = half_scores.clone()
half_filled[~mask] = -1e6  # d2l's sequence_mask writes the fill this way, silently
assert torch.isneginf(half_filled[~mask]).all()
half_weights = torch.softmax(half_filled.float(), dim=-1)  # (Q, K)
assert torch.isnan(half_weights[3]).all() and torch.isfinite(half_weights[:3]).all()
print(f"float16 X[~mask] = -1e6 stores {half_filled[3, 0].item()}; "
      f"the L = 0 row's weights: {half_weights[3, 0].item()}")
half_min = torch.finfo(torch.float16).min  # -65504, the dtype-safe fill
half_safe = torch.softmax(half_scores.masked_fill(~mask, half_min).float(), dim=-1)
torch.testing.assert_close(half_safe[:3], book[:3], atol=2e-3, rtol=0)  # float16 scores
torch.testing.assert_close(half_safe[3], torch.full((5,), 0.2))  # uniform, like -1e6
print(f"float16 masked_fill(~mask, finfo(float16).min): the L = 0 row's weights "
      f"{half_safe[3, 0].item():.1f} on each key, as with -1e6")

# %% [markdown]
# All three agree on every row that has an allowed key, as long as its allowed scores are far
# above $-10^6$ (exercise 1 gives scores for which they are not): $e^{-10^6}$ underflows to exactly 0,
# just like $e^{-\infty}$. They part only on the empty row.
#
# - **Uniform weights (the $-10^6$ fill).** Every score in the row is $-10^6$, the softmax of
#   equal scores is uniform, and the query gets $1/K$ on every key: the keys the mask
#   forbade, which is all of them. Its output is the plain average of the values it was told
#   not to read: padding treated as if it were real data. The number even depends on how
#   much padding the batch has ($1/5$ here, $1/7$ if padded to 7), and if the forbidden keys
#   include future tokens (we will meet this case) the average leaks them. Nothing flags the
#   problem; the output looks like any other vector. It does harm only where something reads
#   that row; the section on left padding below shows where such rows arise.
# - **NaN (a plain softmax after the $-\infty$ fill).** $\exp(-\infty - (-\infty))$ is NaN.
#   A NaN does not stay where it is. Multiplying the row by 0 to ignore it does not help,
#   since $0 \cdot \text{NaN} = \text{NaN}$: the loss becomes NaN, and backpropagation carries
#   NaN into the gradient of every value vector, so every parameter upstream of them.
#   The $-10^6$ fill is no cure either in float16, whose most negative *finite* number is
#   $-65504$ (float16 also holds $-\infty$). There `scores.masked_fill(~mask, -1e6)` refuses
#   the fill with an overflow `RuntimeError`, and an index assignment `X[~mask] = -1e6`, the way d2l's `_sequence_mask` writes it, silently stores $-\infty$: the empty row is NaN
#   again, as printed above. The dtype-aware fill `torch.finfo(dtype).min` fits, and gives the
#   empty row the same uniform weights as $-10^6$ in float32.
# - **Zeros (`masked_softmax`).** Output 0, loss and gradients finite.
#
# The cell below makes the second point concrete: a loss that multiplies the empty query's
# output by 0, so that it should not matter, backpropagated to the values.

# %%
set_seed(3)
values = torch.randn(5, 3)  # (K, Dv): one value vector per key
query_is_real = torch.tensor([1.0, 1.0, 1.0, 0.0])  # the loss ignores the empty query
fills = [lambda s: torch.softmax(s.masked_fill(~mask, -1e6), dim=-1),
         lambda s: torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1),
         lambda s: masked_softmax(s, mask)]
for name, weights_of in zip(fill_names, fills):
    values_leaf = values.clone().requires_grad_()
    out = weights_of(scores) @ values_leaf  # (Q, Dv)
    loss = (out.sum(dim=-1) * query_is_real).sum()  # the empty query counts 0 times
    loss.backward()
    nan_grads = values_leaf.grad.isnan().sum().item()
    row = ", ".join(f"{value:7.4f}" for value in out[3].tolist())
    print(f"{name:>18}: output [{row}], loss {loss.item():.4f}, "
          f"NaN gradients {nan_grads} of {values_leaf.grad.numel()}")
mean_row = ", ".join(f"{value:7.4f}" for value in values.mean(dim=0).tolist())
print(f"{'mean of the values':>18}: [{mean_row}]")

# %% [markdown]
# The $-10^6$ fill hands the empty query the average of all five values, the NaN version
# poisons the loss and all 15 gradient entries, and the masked softmax returns a zero vector
# with the same finite loss as the $-10^6$ fill. This is the convention of this book, and
# since PyTorch 2.5 also that of `F.scaled_dot_product_attention`: the 2.5 release notes
# (backwards-incompatible changes, section nn, pull request #131863) record that a fully
# masked row, which gave NaN up to 2.4, now gives zeros. SDPA has several backends, and the
# change covers two kinds: the *math* backend (`SDPBackend.MATH`, the plain
# scores-softmax-sum reference, whose softmax became a `_safe_softmax` that sets a row of
# all-$-\infty$ scores to 0) and the *fused* kernels that accept a mask. On a CPU, as here,
# SDPA runs its fused CPU kernel, `SDPBackend.FLASH_ATTENTION`, when the inputs allow it
# (among other conditions, queries, keys and values must be 4-D, (B, H, Q, D)), and the math
# backend otherwise: the 2-D and 3-D checks above ran on the math backend. The cell below
# adds a batch axis and a head axis to the example above and forces each backend in turn with
# `torch.nn.attention.sdpa_kernel`. A GPU has other kernels; the release notes show the zero
# row on a CUDA device, but check your own device and version before relying on it.
# `nn.MultiheadAttention` depends on how it is called. On its default path,
# `need_weights=True` (it also returns the weights), a query whose keys are all masked still
# comes out as NaN. With `need_weights=False` it hands the heads to SDPA, whose attention
# output for that query is 0, and the module returns what its output projection makes of a
# zero vector, the bias `out_proj.bias`. Its inference fast path (evaluation mode, no
# gradients, the same tensor as query, key and value) gives NaN again in PyTorch 2.13. The conventions section shows the three cases.

# %%
from torch.nn.attention import SDPBackend, sdpa_kernel

identity = torch.eye(5)[None, None]  # (1, 1, K, K): scale=1 and identities give the weights
for backend in [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]:
    with sdpa_kernel(backend):  # only this backend may run; it raises if it cannot
        backend_weights = F.scaled_dot_product_attention(
            scores[None, None], identity, identity, attn_mask=mask, scale=1.0)[0, 0]  # (Q, K)
    torch.testing.assert_close(backend_weights, masked_softmax(scores, mask))
    assert (backend_weights[3] == 0).all()
    row = ", ".join(f"{value:.1f}" for value in backend_weights[3].tolist())
    print(f"{backend.name:>15}: the query with L = 0 gets [{row}]")


# %% [markdown]
# ## Padding masks for a batch: from (B, K) to (B, Q, K)
#
# Back to the padded batch. In self-attention the scores of sentence $b$ form a $T \times T$
# matrix, one row per query; a [padding mask](../book/glossary.md#term-padding-mask) closes the padding columns of every row.
# The (B, K) mask from the valid lengths becomes (B, 1, K) with one `[:, None, :]`, and
# broadcasting copies it over the $Q$ query rows:
#
# $$
# m_{bij} = [\, j < L_b \,] \quad \text{for every query } i.
# $$
#
# The test of a correct padding mask is the one that failed at the start of the chapter: each
# sentence's outputs must not depend on the padding, so they must equal the outputs of the
# sentence run alone, unpadded. The cell runs the book's `scaled_dot_product_attention`
# with the queries and keys of before, checks it against PyTorch's, and checks every
# sentence.

# %%
def self_attention(x, mask=None):
    # (..., T, D) -> (..., T, D), (..., T, T): attention(x, x, x) with x W_q, x W_k
    return scaled_dot_product_attention(x @ w_query, x @ w_key, x, mask)


key_mask = pad_mask[:, None, :]  # (B, 1, K): broadcasts over the queries
out, pad_weights = self_attention(x, key_mask)  # (B, T, D), (B, T, T)
check_shape(pad_weights, (B, T, T))
reference = F.scaled_dot_product_attention(x @ w_query, x @ w_key, x,
                                           attn_mask=key_mask)
torch.testing.assert_close(out, reference)
for b, length in enumerate(valid_lens.tolist()):
    alone, _ = self_attention(x[b, :length])  # (L, D): the sentence without padding
    torch.testing.assert_close(out[b, :length], alone)
for b, length in enumerate(valid_lens.tolist()):  # a <pad> query: all scores 0, even spread
    torch.testing.assert_close(pad_weights[b, length:, :length],
                               torch.full((T - length, length), 1 / length))
print("weight on padding keys:", pad_weights.masked_select(~key_mask.expand(B, T, T))
      .abs().max().item())
print("every real position equals its sentence run alone, without padding")

# %% mystnb={"image": {"alt": "Three 7 by 7 heatmaps of attention weights, one per sentence. In each, the columns of the padding keys are dark (zero) in every row, including the rows of the padding queries; the weight of every row lies in the first L columns."}}
fig, axes = plt.subplots(1, 3, figsize=(10, 3.8))
for b, ax in enumerate(axes):
    token_heatmap(ax, pad_weights[b], padded[b], f"sentence {b}, L = {valid_lens[b]}",
                  vmax=pad_weights.max().item(), colorbar=b == B - 1)
fig.tight_layout();

# %% [markdown]
# *Attention weights of the three padded sentences, one panel per sentence.* In every row the
# padding columns are zero, and the weight of each row is spread over the first $L_b$ keys.
# The rows of the padding *queries* are not empty: a `<pad>` query still attends to the real
# keys (its vector is zero, so all its scores are 0 and it spreads its weight evenly over
# them), and its output is computed and then ignored (by the loss, which skips padding targets, e.g.
# with `F.cross_entropy(..., ignore_index=pad_id)` as in exercise 5, or by a query mask as in
# the middle panel of the earlier figure). Masking keys is what protects the real tokens; masking
# padding queries too only tidies rows that nobody reads.
#
# ### Live figure: growing the valid length
#
# The slider below takes the longest sentence, `<bos> attention is all you need <eos>`, and
# treats it as if only its first $L$ tokens were real, with queries and keys both masked
# (per-query lengths $L$ for the first $L$ queries, 0 for the rest). Drag it from $L = 1$ to
# $L = 7$: the block of allowed weights grows from the top-left corner, each query spreading
# its weight over more keys, and the rows below the block stay empty.

# %%
scores_2 = attention_scores(x[2])  # (T, T): the longest sentence, unmasked scores
lengths = list(range(1, T + 1))


def length_mask(length):
    # (Q, K): queries and keys of the first `length` tokens only
    lens = torch.where(torch.arange(T) < length, length, 0)  # (Q,) per-query lengths
    return valid_length_mask(lens[None], num_keys=T)[0]


weights_by_length = {n: masked_softmax(scores_2, length_mask(n)) for n in lengths}
slider_heatmap(lambda n: weights_by_length[n], lengths, description="valid length L",
               initial=4, title="masked weights, sentence 2", figsize=(5.4, 4.2),
               xticklabels=padded[2], yticklabels=padded[2])

# %% [markdown]
# What the slider shows, frame by frame: the number of non-zero weights in each row (query),
# the number of empty rows, and the weight query `<bos>` gives to itself, which shrinks as it
# shares its attention with more keys.

# %%
print(f"{'L':>2}  {'non-zero weights per query':<28} {'empty rows':>10} "
      f"{'<bos> on <bos>':>15}")
for n in lengths:
    nonzero = (weights_by_length[n] > 0).sum(dim=-1)  # (Q,)
    print(f"{n:2d}  {str(nonzero.tolist()):<28} {int((nonzero == 0).sum()):10d} "
          f"{weights_by_length[n][0, 0].item():15.4f}")
    assert nonzero.tolist() == [n] * n + [0] * (T - n), f"got {nonzero.tolist()=}, {[n] * n + [0] * (T - n)=}"
    assert torch.allclose(weights_by_length[n].sum(-1), (torch.arange(T) < n).float())
self_weight = [weights_by_length[n][0, 0].item() for n in lengths]
assert all(a >= b for a, b in zip(self_weight, self_weight[1:]))

# %% [markdown]
# ## The causal mask: training on every prefix at once
#
# A [language model](../book/glossary.md#term-language-model) learns to continue text: given the tokens so far, predict the
# next. A model that generates text one token after another, each conditioned on everything
# before it, is called [autoregressive](../book/glossary.md#term-autoregressive). Its training task is to predict each token
# from *all* the tokens before it. (An n-gram model has the same task with a shorter memory:
# it predicts each token from the last $n - 1$ tokens only, a bigram model from the one
# just before.) The most direct way to train on a sentence is a loop that feeds the model a
# prefix one token longer at each step:

# %%
sentence = padded[0][: valid_lens[0]]  # ["<bos>", "I", "like", "you", "<eos>"]
for t in range(1, len(sentence)):
    print(f"step {t}: input {' '.join(sentence[:t]):<18} -> predict {sentence[t]}")

# %% [markdown]
# That is four forward passes for one five-token sentence, each recomputing what the last
# one computed, and 999 for a thousand-token document. In *training*, where the whole
# sentence is known in advance, a Transformer does all of them at once. It feeds the whole
# sentence in a single pass, and a mask hides from each position the tokens after it.
# (Generation cannot do this: the next token does not exist until the model has predicted it,
# so generating still takes one step per new token; exercise 3 shows how a cache of keys and
# values keeps each step small.)
#
# $$
# m_{ij} = [\, j \le i \,] \qquad (i, j = 0, \dots, T - 1).
# $$
#
# Query $i$ may attend to keys $0, \dots, i$: itself and its past, never its future. This
# lower-triangular matrix is the [causal mask](../book/glossary.md#term-causal-mask) (also called the look-ahead mask), and
# self-attention under it is [masked self-attention](../book/glossary.md#term-masked-self-attention). Read row by row, it turns one
# sentence into a table of prefixes, each row one token longer than the last; the hidden
# tokens are printed as `·`, the dot that marks False in the book's printed masks:

# %%
T0 = len(sentence)
lm_mask = causal_mask(T0)  # (Q, K), True = may attend
assert torch.equal(lm_mask, torch.arange(T0)[None, :] <= torch.arange(T0)[:, None])
assert torch.equal(lm_mask, torch.ones(T0, T0, dtype=torch.bool).tril())
for i in range(T0):
    row = [token if lm_mask[i, j] else "·" for j, token in enumerate(sentence)]  # · = hidden
    target = sentence[i + 1] if i + 1 < T0 else "(nothing left)"
    print(" ".join(f"{token:<6}" for token in row), f"  -> predicts {target}")

# %% [markdown]
# Each row is one of the steps of the loop. Row $i$ sees exactly the prefix of length $i + 1$
# and is trained to predict token $i + 1$, so the whole table is trained in one forward pass
# of the sentence: the model predicts at every position at once, each position from the
# tokens it may see. The last row has nothing left to predict, so in practice the input is
# the sentence without its last token and the targets are the sentence without its first:
# the targets are the inputs shifted by one. Feeding the true previous tokens as input,
# rather than the model's own guesses, is called [teacher forcing](../book/glossary.md#term-teacher-forcing).
#
# Does one masked pass really compute what the loop computes? The claim is exact: the output
# at position $t$ under the causal mask should equal the output of the last position when the
# model is run on the prefix of length $t + 1$ alone, with no mask at all (a prefix has no
# future to hide). The cell checks it for the helper and for PyTorch's `is_causal=True`.

# %%
x0 = x[0, :T0]  # (T, D): "<bos> I like you <eos>"
parallel, causal_weights = self_attention(x0, causal_mask(T0))  # one pass
prefix_outputs = []
for t in range(T0):  # the loop: one pass per prefix
    prefix_out, _ = self_attention(x0[: t + 1])  # no mask: the prefix has no future
    prefix_outputs.append(prefix_out[t])  # the output of its last position
sequential = torch.stack(prefix_outputs)  # (T, D)
torch.testing.assert_close(parallel, sequential)
is_causal = F.scaled_dot_product_attention(x0 @ w_query, x0 @ w_key, x0, is_causal=True)
torch.testing.assert_close(parallel, is_causal)
print(f"{T0} passes over prefixes = 1 pass under the causal mask "
      f"(largest difference below 1e-6: {(parallel - sequential).abs().max().item() < 1e-6})")

# %% [markdown]
# The same holds for the training loss. Add a linear layer from the $D$ features to scores
# over the vocabulary (the *logits*) and a cross-entropy loss, and this tiny model is a
# language model. The loss of the one masked pass, over the four predictions of the sentence,
# equals the average of the four losses of the loop.

# %%
set_seed(4)
to_vocab = torch.randn(D, len(vocab))  # (D, V): features -> logits over the vocabulary
inputs, targets = token_ids[0, : T0 - 1], token_ids[0, 1:T0]  # shifted by one: (T-1,)
x_in = embed(inputs)  # (T-1, D)
logits = self_attention(x_in, causal_mask(T0 - 1))[0] @ to_vocab  # (T-1, V)
parallel_loss = F.cross_entropy(logits, targets)
loop_losses = []
for t in range(T0 - 1):  # prefix of length t + 1 predicts token t + 1
    last = self_attention(x_in[: t + 1])[0][t] @ to_vocab  # (V,)
    loop_losses.append(F.cross_entropy(last[None], targets[t : t + 1]))
loop_loss = torch.stack(loop_losses).mean()
torch.testing.assert_close(parallel_loss, loop_loss)
print(f"{'loss of one masked pass:':<37} {parallel_loss.item():.4f}")
print(f"{f'mean loss of {T0 - 1} passes over prefixes:':<37} {loop_loss.item():.4f}")

# %% [markdown]
# Why the mask is needed, and not merely convenient: without it, position $t$ could read token
# $t + 1$, the very token it must predict, and the model would learn to copy it instead
# of to predict it, a trick that fails at generation time, when the next token does not exist
# yet. The check below changes the fourth token (`you` becomes `hello`) and measures how much
# the output at each position moves. Under the causal mask only the changed position and the
# positions after it move; without the mask every position does.

# %%
changed_ids = token_ids[0, :T0].clone()
changed_ids[3] = vocab["hello"]  # "<bos> I like hello <eos>"
x_changed = embed(changed_ids)  # (T, D)
print(f"{'position':>12} " + " ".join(f"{token:>7}" for token in sentence))
for name, m in [("causal mask", causal_mask(T0)), ("no mask", None)]:
    moved = (self_attention(x_changed, m)[0] - self_attention(x0, m)[0]).abs().amax(-1)
    print(f"{name:>12} " + " ".join(f"{value:7.4f}" for value in moved.tolist()))
    if m is not None:
        assert (moved[:3] == 0).all() and (moved[3:] > 0).all()
    else:
        assert (moved > 0).all()

# %% [markdown]
# The causal mask is also a special case of the per-query valid lengths of earlier: giving
# query $i$ the length $i + 1$ is $[\, j < i + 1 \,] = [\, j \le i \,]$. This is how d2l's
# Transformer decoder builds it during training ([[Zhang et al., 2023]](../book/references.bib#zhang2023d2l), Section 11.7, "The
# Transformer Architecture"): its `TransformerDecoderBlock.forward` passes the lengths
# `torch.arange(1, num_steps + 1)`, repeated for every sequence of the batch.

# %%
staircase = valid_length_mask(torch.arange(1, T0 + 1)[None], num_keys=T0)[0]  # (Q, K)
assert torch.equal(staircase, causal_mask(T0))
print(format_matrix(causal_mask(T0), row_labels=sentence, col_labels=sentence))

# %% [markdown]
# ### Live figure: what a query at position $t$ can see
#
# Drag the slider along the sentence. On the left, the causal attention weights of the
# sentence, with the current query's row framed; on the right, that query's weights over the
# keys, with the keys it may not see labelled `(hidden)` (their weight is 0). The query at position $t$ sees $t + 1$
# keys, and its weight is spread over them alone.

# %%
causal_vmax = causal_weights.max().item()


def draw_query(t):
    fig, (ax_map, ax_bar) = plt.subplots(1, 2, figsize=(9, 3.6))
    token_heatmap(ax_map, causal_weights, sentence, "causal weights", vmax=causal_vmax)
    frame = Rectangle((-0.5, t - 0.5), T0, 1, fill=False, edgecolor="red", lw=2)
    ax_map.add_patch(frame)  # the row of query t
    shown = [token if j <= t else "(hidden)" for j, token in enumerate(sentence)]
    ax_bar.bar(range(T0), causal_weights[t], color=["C0" if j <= t else "0.7"
                                                    for j in range(T0)])
    ax_bar.set_xticks(range(T0), labels=shown, rotation=45)
    ax_bar.set(ylim=(0, 1.05), xlabel="keys", ylabel="attention weight",
               title=f"query {t} ({sentence[t]}) sees {t + 1} key{'s' if t else ''}")
    fig.tight_layout()
    return fig


slider_figure(draw_query, list(range(T0)), description="query position t", initial=2,
              fmt=lambda t: f"{t} ({sentence[t]})")

# %%
print(f"{'t':>2} {'query':>6}  {'visible keys':<30} {'non-zero':>8} {'sum':>6}")
for t in range(T0):
    row = causal_weights[t]
    visible = [token for j, token in enumerate(sentence) if lm_mask[t, j]]
    nonzero = int((row > 0).sum())
    print(f"{t:2d} {sentence[t]:>6}  {' '.join(visible):<30} {nonzero:8d} "
          f"{row.sum():6.3f}")
    assert nonzero == t + 1 and (row[t + 1 :] == 0).all(), f"got {nonzero=}, {t + 1=}"

# %% [markdown]
# ## Combining padding and causal masks
#
# A language model trained on a padded batch needs both masks at once: key $j$ is open to
# query $i$ of sentence $b$ only if it is real *and* not in the future,
#
# $$
# m_{bij} = [\, j < L_b \,] \wedge [\, j \le i \,].
# $$
#
# With boolean masks, "and" is `&`, and broadcasting lines the shapes up: the padding mask
# (B, 1, K) and the causal mask (Q, K), read as (1, Q, K), combine to (B, Q, K). For right
# padding the same mask also comes from per-query lengths $\min(i + 1, L_b)$.

# %%
lm_batch_mask = pad_mask[:, None, :] & causal_mask(T)  # (B, 1, K) & (Q, K) -> (B, Q, K)
check_shape(lm_batch_mask, (B, T, T))
assert lm_batch_mask.any(dim=-1).all()  # right padding: key 0 is open to every query
lens_min = torch.minimum(torch.arange(1, T + 1)[None, :], valid_lens[:, None])  # (B, Q)
assert torch.equal(lm_batch_mask, valid_length_mask(lens_min, num_keys=T))

out, lm_weights = self_attention(x, lm_batch_mask)  # (B, T, D), (B, T, T)
reference = F.scaled_dot_product_attention(x @ w_query, x @ w_key, x,
                                           attn_mask=lm_batch_mask)
torch.testing.assert_close(out, reference)
for b, length in enumerate(valid_lens.tolist()):  # each sentence alone, unpadded
    alone, _ = self_attention(x[b, :length], causal_mask(length))
    torch.testing.assert_close(out[b, :length], alone)
print("every real position equals its sentence alone under the causal mask")
print(format_matrix(lm_batch_mask[1], row_labels=padded[1], col_labels=padded[1]))

# %% mystnb={"image": {"alt": "Three 7 by 7 heatmaps of attention weights under the combined mask. Each is lower-triangular; in the shorter sentences the triangle stops at the last real key, so the padding rows repeat the last real row's pattern over the real keys."}}
fig, axes = plt.subplots(1, 3, figsize=(10, 3.8))
for b, ax in enumerate(axes):
    token_heatmap(ax, lm_weights[b], padded[b], f"sentence {b}:\npadding & causal",
                  vmax=lm_weights.max().item(), colorbar=b == B - 1)
fig.tight_layout();

# %% [markdown]
# *Weights of the three sentences under padding and causal masks.* Every panel is
# lower-triangular, and in the two shorter sentences the triangle is cut at the last real
# key: a padding query sees the real tokens and the earlier padding keys are closed, so its
# row spreads over the $L_b$ real keys. No row is empty, because with right padding key 0 is
# always real and never in the future.
#
# ### Left padding makes empty rows
#
# Decoder-only models that generate from a batch of prompts pad the *left*, so that every
# prompt ends at the last position and the next token of every row is generated at the same
# place. (Training batches, and the encoder inputs of encoder–decoder models, are usually
# padded on the right, as in the rest of this chapter.) Then the first
# positions of a short sentence are padding, and under the causal mask their queries may
# see only keys at or before their own position, which are all padding (themselves included):
# their rows are empty. Here the uniform
# weights of the $-10^6$ fill break the causal mask itself, on these rows.

# %%
left_padded, _ = pad_tokens(sentences, side="left")
left_real = encode(left_padded, vocab) != vocab["<pad>"]  # (B, K), True = real token
left_mask = left_real[:, None, :] & causal_mask(T)  # (B, Q, K)
empty_rows = ~left_mask.any(dim=-1)  # (B, Q)
print("empty rows per sentence:", empty_rows.sum(dim=-1).tolist())
print(format_matrix(left_mask[1], row_labels=left_padded[1], col_labels=left_padded[1]))

scores_left = attention_scores(embed(encode(left_padded, vocab)))  # (B, T, T)
d2l_left = torch.softmax(scores_left.masked_fill(~left_mask, -1e6), dim=-1)
book_left = masked_softmax(scores_left, left_mask)
print("row 0 of sentence 1 (a <pad> query at position 0):")
print(format_matrix(torch.stack([d2l_left[1, 0], book_left[1, 0]]),
                    row_labels=["fill -1e6", "masked_softmax"],
                    col_labels=left_padded[1]))
future_share = d2l_left[1, 0, 1:].sum().item()
print(f"weight the -1e6 fill puts on the future of position 0: {future_share:.3f}")
assert empty_rows.sum(dim=-1).tolist() == (T - valid_lens).tolist(), f"got {empty_rows.sum(dim=-1).tolist()=}, {(T - valid_lens).tolist()=}"
assert (book_left[empty_rows] == 0).all()
assert abs(future_share - 6 / 7) < 1e-6 and empty_rows[1].sum() == 4, f"got {abs(future_share - 6 / 7)=}, {empty_rows[1].sum()=}"

# %% [markdown]
# The four `<pad>` queries at the start of `<bos> hello <eos>` have empty rows. With the
# $-10^6$ fill, the first gives $1/7$ of its weight to every key, six sevenths of it to
# keys in its future, among them all three real tokens, `<bos> hello <eos>`: precisely what
# the causal mask exists to forbid. The masked softmax gives it nothing. (Only these padding rows are
# affected: every real query sees itself, and padding positions are closed as keys to every
# real query, so the leak cannot reach a real token's output or the loss. It is still a silent
# violation of the mask, and any code that reads those rows, such as a mean over all
# positions, would pick it up. Libraries that use left padding
# usually also shift the position numbers so that every sentence starts at position 0.)
#
# ## Mask conventions across libraries
#
# Every library agrees on what a mask is for and disagrees on how to write it down. The
# book's masks are boolean with **True = may attend**; this table says what the others
# expect, and how to convert the book's `mask` to each.
#
# Below, SDPA is `F.scaled_dot_product_attention` and MHA is `nn.MultiheadAttention`.
#
# | argument | meaning | shape | from the book's `mask` |
# |---|---|---|---|
# | SDPA `attn_mask`, bool | **True = may attend** | broadcasts to (B, H, Q, K) | `mask` |
# | SDPA `attn_mask`, float | added to the scores | broadcasts to (B, H, Q, K) | `to_additive_mask(mask)` |
# | MHA `key_padding_mask`, bool | **True = ignore** | (B, K) | `to_key_padding_mask(mask)` |
# | MHA `attn_mask`, bool | **True = not allowed** | (Q, K) or (B·H, Q, K) | `~mask` |
# | MHA `attn_mask`, `nn.Transformer` `tgt_mask`, float | added to the scores | (Q, K) or (B·H, Q, K) | `to_additive_mask(mask)` |
# | d2l `valid_lens`, int | the first $L$ keys may be attended | (B,) or (B, Q) | `mask.sum(-1)` (right padding) |
# | Hugging Face `attention_mask`, int | **1 = attend**, 0 = padding | (B, K) | `mask.long()` |
#
# A float mask is an [additive mask](../book/glossary.md#term-additive-mask): 0 where attention is allowed, $-\infty$ where it
# is not, added to the scores before the softmax.
#
# `nn.MultiheadAttention` uses two conventions of its own, both the opposite of the book's,
# and it does not refuse a mask written the other way round: a boolean tensor of the right
# shape is accepted whichever convention it follows. Converting once, at the boundary, with
# a named function wherever there is one, keeps the meaning in one place. The check below
# runs one module on one batch with the mask in each of its forms, and compares every result
# with the book's attention applied by hand to `nn.MultiheadAttention`'s own weights.

# %%
set_seed(5)
mha = nn.MultiheadAttention(D, num_heads=2, batch_first=True)


def mha_by_hand(x, mask):
    # nn.MultiheadAttention's forward, with the book's attention; mask (B|1, 1|H, Q, K)
    H, head_dim = mha.num_heads, D // mha.num_heads
    q, k, v = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    split = lambda t: t.view(B, T, H, head_dim).transpose(1, 2)  # (B, H, T, D/H)
    out, _ = scaled_dot_product_attention(split(q), split(k), split(v), mask)
    return mha.out_proj(out.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


expected_pad = mha_by_hand(x, pad_mask[:, None, None, :])  # mask (B, 1, 1, K)
expected_lm = mha_by_hand(x, lm_batch_mask[:, None])  # mask (B, 1, Q, K)
got = {"key_padding_mask = to_key_padding_mask(mask)":
       mha(x, x, x, key_padding_mask=to_key_padding_mask(pad_mask))[0],
       "  + attn_mask = ~causal_mask(T)  (bool)":
       mha(x, x, x, key_padding_mask=to_key_padding_mask(pad_mask),
           attn_mask=~causal_mask(T))[0],
       "  + attn_mask = to_additive_mask(causal_mask(T)), float padding":
       mha(x, x, x, key_padding_mask=to_additive_mask(pad_mask),
           attn_mask=to_additive_mask(causal_mask(T)))[0]}
for (name, out), expected in zip(got.items(), [expected_pad, expected_lm, expected_lm]):
    torch.testing.assert_close(out, expected)
    print(f"matches the book's attention: {name}")

# %% [markdown]
# All three forms give the book's result. (The two masks passed to `nn.MultiheadAttention`
# together should have the same type: mixing a boolean `key_padding_mask` with a float
# `attn_mask` still works, with a deprecation warning.) PyTorch's own causal mask for
# `nn.Transformer` is the additive form of the book's, a key padding mask written the
# PyTorch way (True = padding) comes back with `from_key_padding_mask`, and the remaining
# conventions are a cast or a count away.

# %%
assert torch.equal(nn.Transformer.generate_square_subsequent_mask(T0),
                   to_additive_mask(causal_mask(T0)))
hf_attention_mask = pad_mask.long()  # Hugging Face: 1 = attend, 0 = padding
assert torch.equal(hf_attention_mask.bool(), pad_mask)
assert torch.equal(hf_attention_mask.sum(dim=-1), valid_lens)  # d2l's valid lengths
torch_style = token_ids == vocab["<pad>"]  # as PyTorch code builds it: True = pad
assert torch.equal(from_key_padding_mask(torch_style), pad_mask)  # -> the book's mask
assert torch.equal(to_key_padding_mask(pad_mask), torch_style)  # and back
with warnings.catch_warnings(record=True) as caught:  # bool padding, float causal mask
    warnings.simplefilter("always")
    mixed = mha(x, x, x, key_padding_mask=to_key_padding_mask(pad_mask),
                attn_mask=to_additive_mask(causal_mask(T)))[0]
torch.testing.assert_close(mixed, expected_lm)  # still works ...
assert any("deprecated" in str(w.message) for w in caught)  # ... with a warning
print(f"sentence 1: {' '.join(padded[1])}, valid length (d2l) {valid_lens[1].item()}")
forms = [("book mask, True = may attend", pad_mask.int()),
         ("Hugging Face attention_mask", hf_attention_mask),
         ("key_padding_mask, True = ignore", to_key_padding_mask(pad_mask).int()),
         ("additive mask", to_additive_mask(pad_mask))]
for name, form in forms:
    row = form[1]
    print(f"{name:>32}: {' '.join(f'{value:>4g}' for value in row.tolist())}")

# %% [markdown]
# And the mistake the conversions prevent: the book's mask handed straight to
# `key_padding_mask`. PyTorch reads True as *ignore*, so the short sentences attend to their
# padding only, and the full-length sentence, whose mask is all True, has nothing left. On the
# default path (`need_weights=True`) it comes out as NaN. With `need_weights=False` it comes
# out as `out_proj.bias` at every position (zero here, where the bias still has its initial
# value): finite, so no NaN check will catch the mistake. The fast path used for inference
# gives NaN again.

# %%
wrong = mha(x, x, x, key_padding_mask=pad_mask)[0]  # the book's mask, unconverted
for b in range(B):
    if wrong[b].isnan().any():
        nan_rows = int(wrong[b].isnan().any(dim=-1).sum())
        print(f"sentence {b}: NaN in {nan_rows} of {T} outputs")
    else:
        error = (wrong[b] - expected_pad[b]).abs().max().item()
        print(f"sentence {b}: largest error {error:.4f} (it attended to padding only)")
assert wrong[2].isnan().all()
quiet = mha(x, x, x, key_padding_mask=pad_mask, need_weights=False)[0]  # through SDPA
torch.testing.assert_close(quiet[2], mha.out_proj.bias.expand(T, D))  # 0, then + bias
assert torch.isfinite(quiet).all()
mha.eval()  # the inference fast path: eval mode, no gradients, query is key is value
with torch.no_grad():
    fast = mha(x, x, x, key_padding_mask=pad_mask, need_weights=False)[0]
mha.train()
assert fast[2].isnan().all()
print(f"need_weights=False: sentence 2 = out_proj.bias, largest |value| "
      f"{quiet[2].abs().max().item():.4f}; inference fast path: NaN in "
      f"{int(fast[2].isnan().any(dim=-1).sum())} of {T} outputs")

# %% [markdown]
# ## When a mask is wrong, fail loudly
#
# A wrong mask rarely crashes anything. A length that does not match the tensor, or a
# mask laid along the wrong axes, still gives numbers of the right shape, and the model
# trains, only worse. So the helpers check their input and raise a `ValueError` that names
# the argument, what it got and what it needed. A negative length is always a bug. So is a
# length longer than the keys: it means the lengths and the tensor disagree (lengths counted
# before truncating, say), and quietly treating it as "all keys" would hide that. A mask that
# does not broadcast to the scores' (…, Q, K) shape, and a 0/1 float mask where a boolean
# one is needed, are refused too.

# %%
bad_calls = {
    "a negative valid length":
        lambda: valid_length_mask(torch.tensor([3, -1]), num_keys=5),
    "a valid length longer than num_keys":
        lambda: valid_length_mask(torch.tensor([3, 7]), num_keys=5),
    "a (3, 5) mask for scores of shape (2, 4, 5)":
        lambda: masked_softmax(torch.zeros(2, 4, 5), torch.ones(3, 5) > 0),
    "a 0/1 float mask":
        lambda: masked_softmax(torch.zeros(4, 5), torch.ones(4, 5)),
}
for what, call in bad_calls.items():
    try:
        call()
    except ValueError as error:
        print(f"{what}:\n    ValueError: {error}")
    else:
        raise AssertionError(f"{what} was accepted")

# %% [markdown]
# One mistake no check can catch is a mask that broadcasts, but along the wrong axes. With
# heads the scores are (B, H, Q, K), and a (B, Q, K) mask needs a head axis, `mask[:, None]`,
# before use. Without it, broadcasting aligns the mask's batch axis with the heads: when
# $B \ne H$ (and $B \ne 1$) that is an error, but when $B = H$ it is silently accepted (exercise 4).
#
# ## Summary
#
# - Batches are rectangular and sentences are not, so short sentences are **padded**. Without
#   a mask the padding takes part in attention, and a sentence's outputs depend on how much
#   padding its batch needed.
# - A **valid length** $L_b$ per sequence gives the (B, K) mask $[\, j < L_b \,]$; per-query
#   lengths (B, Q) give (B, Q, K) masks. This book's masks are boolean, **True = may attend**.
# - The **masked softmax**: check the mask, fill with $-\infty$, subtract the largest allowed
#   score, exponentiate, divide by the row sum (clamped at 1). It agrees with
#   `helpers.attention.masked_softmax` and with `F.scaled_dot_product_attention`.
# - A query with no allowed key gets **all-zero weights**, an empty sum. The $-10^6$ fill gives
#   it uniform weights over the keys it was forbidden (padding, or the future); a plain
#   softmax after a $-\infty$ fill gives NaN, which poisons the loss and the gradients. The
#   choice matters only on such empty rows, which a correct model discards (and on rows whose
#   allowed scores come near the fill, exercise 1); in float16 the
#   fill must fit the dtype, hence the common `torch.finfo(dtype).min`.
# - A **padding mask** (B, K) becomes (B, 1, K) and broadcasts over the queries; then every
#   real position's output equals that of its sentence run alone, unpadded.
# - The **causal mask** $[\, j \le i \,]$ lets each position see only itself and its past. One
#   pass of masked self-attention computes what a loop over all $T$ prefixes computes, outputs
#   and loss alike: that is how a language model trains on every prefix in parallel (generation
#   still produces one token per step).
# - Masks combine with `&` and broadcasting, e.g. (B, 1, K) & (Q, K) → (B, Q, K).
# - Libraries disagree on conventions: `nn.MultiheadAttention` reads True as *ignore* or
#   *not allowed*, additive masks use 0 / $-\infty$, Hugging Face uses 1 = attend. Convert at
#   the boundary with `to_key_padding_mask`, `to_additive_mask` and friends.
#
# ## Exercises
#
# **1. $-10^6$ is not $-\infty$.** Take the row of scores $(-2 \cdot 10^6,\ -2 \cdot 10^6 + 1,\ 3)$
# with the last key masked (such scores are unusual, but a model with unnormalised features
# can produce them). What weights do the $-10^6$ fill and `masked_softmax` give?
#
# <details>
# <summary>Solution</summary>
#
# The $-10^6$ fill replaces the masked score 3 by $-10^6$, which is *larger* than both allowed
# scores, so after subtracting the row maximum the masked key is the only one left: it gets
# weight 1 and the allowed keys get $e^{-10^6}$, that is 0. The fill constant only works while
# every real score is far above it. `masked_softmax` never compares the fill with real
# scores (it subtracts the largest *allowed* score) and gives the correct $(0.269, 0.731, 0)$,
# the softmax of $(0, 1)$.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 1.
row = torch.tensor([[-2e6, -2e6 + 1, 3.0]], dtype=torch.float64)
row_mask = torch.tensor([[True, True, False]])
both = torch.cat([torch.softmax(row.masked_fill(~row_mask, -1e6), dim=-1),
                  masked_softmax(row, row_mask)])
print(format_matrix(both, row_labels=["fill -1e6", "masked_softmax"],
                    col_labels=["k0", "k1", "k2 (masked)"], fmt="{:.4f}"))

# %% [markdown]
# **2. Masked scores do not matter.** Show, for random scores and a random mask, that
# `masked_softmax` equals the ordinary softmax of the allowed scores alone, that changing the
# masked scores (to $\pm 10^{30}$, say) changes nothing, and that their gradients are exactly
# zero.
#
# <details>
# <summary>Solution</summary>
#
# A masked score is overwritten by $-\infty$ before anything else touches it, so its value
# never reaches the output. The helper writes it with `torch.where(mask, scores, -inf)`, which,
# like `masked_fill`, passes no gradient back to the entries it did not select. For each row, the weights on the allowed keys are the softmax of the sub-vector of
# allowed scores, and 0 elsewhere. The cell checks all three claims on a (6, 8) example.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 2.
set_seed(6)
s = torch.randn(6, 8, requires_grad=True)
m = torch.rand(6, 8) < 0.6
m[:, 0] = True  # at least one allowed key per row
w = masked_softmax(s, m)
for i in range(6):
    torch.testing.assert_close(w[i, m[i]], torch.softmax(s[i, m[i]], dim=0))
s_wild = torch.where(m, s.detach(), torch.where(torch.rand(6, 8) < 0.5, 1e30, -1e30))
torch.testing.assert_close(masked_softmax(s_wild, m), w.detach())
(w * torch.randn(6, 8)).sum().backward()
assert (s.grad[~m] == 0).all()
print("softmax of the allowed scores; masked scores have no effect and zero gradient")

# %% [markdown]
# **3. Generating with a cache.** At generation time a language model feeds one new token at
# position $t$ and keeps the keys and values of positions $0, \dots, t-1$ from earlier steps, to which it adds its own:
# $Q = 1$, $K = t + 1$. What does `causal_mask(1, t + 1)` allow, why is it wrong here, and what
# is the right mask? Check that the right mask reproduces row $t$ of the full causal pass.
#
# <details>
# <summary>Solution</summary>
#
# `causal_mask` is aligned to the top-left corner, like `is_causal=True` in PyTorch: its
# single row is row 0 of the square mask, so the new query would see only key 0. The query is
# really at position $t$, the *last* row of the square mask, which is all True: the mask aligned
# to the bottom-right corner, `causal_mask(K)[-Q:]`. For one query that means no mask at all.
# In general, with $Q$ new queries over $K$ cached keys, take the last $Q$ rows of the
# $K \times K$ causal mask. PyTorch has this alignment built in:
# `torch.nn.attention.bias.causal_lower_right(Q, K)` can be passed as `attn_mask` to
# `F.scaled_dot_product_attention` (its top-left twin is `causal_upper_left`, what
# `is_causal=True` means); the cell checks that it gives the same output.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 3.
t = 3
new_query = x0[t : t + 1] @ w_query  # (1, D): the token at position t
cached_keys, cached_values = x0[: t + 1] @ w_key, x0[: t + 1]  # (t + 1, D)
print("causal_mask(1, t + 1):", causal_mask(1, t + 1).int().tolist())
print("causal_mask(t + 1)[-1:]:", causal_mask(t + 1)[-1:].int().tolist())
right, _ = scaled_dot_product_attention(new_query, cached_keys, cached_values,
                                        causal_mask(t + 1)[-1:])
wrong, _ = scaled_dot_product_attention(new_query, cached_keys, cached_values,
                                        causal_mask(1, t + 1))
torch.testing.assert_close(right[0], parallel[t])
from torch.nn.attention.bias import causal_lower_right  # PyTorch's bottom-right mask
lower_right = F.scaled_dot_product_attention(
    new_query[None, None], cached_keys[None, None], cached_values[None, None],
    attn_mask=causal_lower_right(1, t + 1))[0, 0]  # (1, D)
torch.testing.assert_close(lower_right, right)
print(f"bottom-right mask matches the full pass; top-left is off by "
      f"{(wrong[0] - parallel[t]).abs().max().item():.4f}")

# %% [markdown]
# **4. A missing head axis.** Multi-head scores are (B, H, Q, K). Pass a (B, Q, K) padding
# mask without `[:, None]` to `scaled_dot_product_attention` with (B, H, Q, D) queries, once
# with $B = 3, H = 2$ and once with $B = H = 2$. What happens in each case?
#
# <details>
# <summary>Solution</summary>
#
# Broadcasting aligns shapes from the right, so the mask's first axis lines up with the
# *heads*. With $B = 3, H = 2$ the sizes 3 and 2 clash and the helper raises a `ValueError`.
# With $B = H = 2$ the shapes agree and the call succeeds, but head $h$ of *every* sentence
# uses the mask of sentence $h$: sentence 0's second head sees sentence 1's padding pattern.
# No shape check can see this; writing the head axis explicitly, `mask[:, None]`, can.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 4.
set_seed(7)
for batch, heads in [(3, 2), (2, 2)]:
    q4 = torch.randn(batch, heads, 4, 6)  # (B, H, Q, D), self-attention: K = Q
    lens4 = torch.tensor([1, 4, 2][:batch])  # (B,)
    mask4 = valid_length_mask(lens4, num_keys=4, num_queries=4)  # (B, Q, K)
    try:
        _, w_wrong = scaled_dot_product_attention(q4, q4, q4, mask4)
    except ValueError as error:
        print(f"B = {batch}, H = {heads}: ValueError: {error}")
        continue
    _, w_right = scaled_dot_product_attention(q4, q4, q4, mask4[:, None])
    seen, should = int((w_wrong[0, 1, 0] > 0).sum()), int((w_right[0, 1, 0] > 0).sum())
    print(f"B = {batch}, H = {heads}: accepted; keys seen by sentence 0, head 1: "
          f"{seen} (should be {should})")

# %% [markdown]
# **5. Padding in the loss.** Masks keep padding out of attention; the loss must skip it
# too. Compute the language-model loss of the whole padded batch of this chapter (inputs
# without the last column, targets without the first, the combined padding and causal mask),
# using `F.cross_entropy(..., ignore_index=...)` to skip padding targets. Show that it equals
# the average, over all real targets, of the losses of the three sentences run alone.
#
# <details>
# <summary>Solution</summary>
#
# With `ignore_index` set to the id of `<pad>`, cross-entropy averages over the targets that
# are not padding, $4 + 2 + 6 = 12$ of them here. Since the mask makes every real position's
# output equal to that of its sentence run alone, the batch loss equals the sum of the
# per-sentence summed losses divided by 12. Without `ignore_index` the padding targets would
# count as real predictions, "`<pad>` after `<eos>`" and "`<pad>` after `<pad>`", tasks the
# model would happily learn.
#
# The cell builds the key mask from `valid_lens - 1`, not `valid_lens`. An input position
# counts as real when its *target* is real, so sentence $b$ has $L_b - 1$ real inputs; its
# `<eos>`, fed as an input only to predict a `<pad>` target, is closed as a key too. That
# changes nothing: under the causal mask no counted query (all of them earlier) could see it,
# and the cell checks that the loss with `valid_lens` is the same.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 5.
batch_inputs, batch_targets = token_ids[:, :-1], token_ids[:, 1:]  # (B, T-1)
batch_mask = valid_length_mask(valid_lens - 1, T - 1)[:, None, :] & causal_mask(T - 1)
batch_logits = self_attention(embed(batch_inputs), batch_mask)[0] @ to_vocab
batch_loss = F.cross_entropy(batch_logits.flatten(0, 1), batch_targets.flatten(),
                             ignore_index=vocab["<pad>"])  # skip <pad> targets
total, count = 0.0, 0
for b, length in enumerate(valid_lens.tolist()):  # each sentence alone, unpadded
    ids = token_ids[b, :length]
    out_b, _ = self_attention(embed(ids[:-1]), causal_mask(length - 1))
    logits_b = out_b @ to_vocab  # (L - 1, V)
    total += F.cross_entropy(logits_b, ids[1:], reduction="sum")
    count += length - 1
torch.testing.assert_close(batch_loss, total / count)
eos_open = valid_length_mask(valid_lens.clamp(max=T - 1), T - 1)[:, None, :] & causal_mask(T - 1)
eos_open_logits = self_attention(embed(batch_inputs), eos_open)[0] @ to_vocab
torch.testing.assert_close(F.cross_entropy(eos_open_logits.flatten(0, 1), batch_targets.flatten(),
                                           ignore_index=vocab["<pad>"]), batch_loss)
print(f"batch loss {batch_loss.item():.4f} = mean over {count} real targets "
      f"{(total / count).item():.4f}")
