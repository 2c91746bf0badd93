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
# # 6. Multi-head attention
#
# [Self-attention](../book/glossary.md#term-self-attention) gives every position of a sequence a query, and
# that query gets one set of attention weights over the keys: one probability distribution, one weighted average of the
# values. A word in a sentence often needs several things at once, though: the word before
# it, the verb it belongs to, the noun it refers to. One average has to blend them.
# Multi-head attention runs several attentions side by side, each with its own projections
# of the same input, and then combines their answers. It is the form of attention every
# Transformer uses, and `nn.MultiheadAttention` is PyTorch's version of it.
#
# **What you will learn**
#
# - why a single [attention head](../book/glossary.md#term-attention-head) is limited: its output is one weighted average, so
#   the values it attends to are blended together;
# - [multi-head attention](../book/glossary.md#term-multi-head-attention) written twice: as a loop over heads with their own small
#   projections, and as one big projection reshaped into heads; and why the two are the same;
# - every shape on the way, from (B, T, D) to (B, H, T, D/H) and back, printed by running code;
# - what the [output projection](../book/glossary.md#term-output-projection) $W^O$ adds: without it each output feature comes from
#   one head, with it every output feature combines all heads;
# - that heads trained on a toy task take on different jobs: one looks at the previous
#   position, one at the next, one at the token that matches it;
# - why $H$ heads of [head dimension](../book/glossary.md#term-head-dimension) $D/H$ cost what one head of width $D$ costs,
#   counted in [FLOPs](../book/glossary.md#term-FLOP) and timed;
# - that `helpers.multihead.MultiHeadAttention` computes exactly what PyTorch's
#   `nn.MultiheadAttention` computes, including the translation of its padding mask.
#
# You need scaled dot-product attention (chapter 3), masks (chapter 4) and self-attention
# (chapter 5).

# %%
import copy
import math
import time

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from helpers.checks import check_shape
from helpers.figures.plotting import heatmap, multihead_diagram
from helpers.figures.widgets import slider_figure
from helpers.masks import to_key_padding_mask, valid_length_mask
from helpers.measure import attention_entropy, attention_flops
from helpers.multihead import MultiHeadAttention
from helpers.seeding import set_seed
from helpers.tasks.twins import (TwinsModel, relation_weights, train_twins, twins_accuracy,
                                 twins_task)

torch.set_num_threads(1)  # small tensors: one thread is as fast, and steadier
set_seed(0)

# %% [markdown]
# ## One head, one average
#
# Take the sentence *"The animal didn't cross the street because it was too tired."* To
# build a good representation of *it*, a model wants at least three pieces of information:
# what *it* refers to (*animal*, far back: coreference), which verb it is the subject of
# (*was*, right after it: syntax), and what came just before it (*because*). Each is found by
# a different rule. The referent is found by *content* (a noun that agrees with the pronoun),
# the neighbours by *position*.
#
# A single head has one query for *it* and returns
#
# $$
# \mathbf{o} = \sum_{j} \alpha_j \mathbf{v}_j, \qquad \sum_j \alpha_j = 1,
# $$
#
# one average. If it splits its weight between the two keys it needs, their values are
# added. When each value says only *what* its word is, as here, the output no longer says
# which piece came from which key. The cell below makes that concrete with one-hot values: in sentence 1 the previous word is *cat* and the referent
# is *dog*; in sentence 2 it is the other way round. A head that puts half its weight on each
# key returns the same vector for both sentences. Two heads, one looking at the previous word
# and one at the referent, return their two answers side by side, and the sentences stay
# distinguishable.

# %%
words = ["cat", "dog", "mat"]
value = dict(zip(words, torch.eye(3)))  # one-hot value vector of each word, (D,) with D = 3
sentences = {"sentence 1": ("cat", "dog"), "sentence 2": ("dog", "cat")}  # (previous, referent)

print(f"{'':>10}  {'one head, weights 0.5 / 0.5':>28}  {'two heads, concatenated':>26}")
for name, (previous, referent) in sentences.items():
    one_head = 0.5 * value[previous] + 0.5 * value[referent]  # (D,)
    two_heads = torch.cat([value[previous], value[referent]])  # (2D,)
    print(f"{name:>10}  {str(one_head.tolist()):>28}  {str(two_heads.int().tolist()):>26}")

# %% [markdown]
# With one head, sentences 1 and 2 are indistinguishable: the average forgot which word was
# where. That is because these values carry no position. Would values that also say where
# their word stands rescue the single head? Only if they *bind* the two. The cell below puts
# the referent at position 1 and the previous word at position 4 and tries three kinds of
# value vector: the word alone; the word with a one-hot position appended; and the word bound to its position, one feature for
# every (word, position) combination (the flattened outer product).
#

# %%
position = {"referent": 1, "previous": 4}  # where the two keys sit (query "it" at 5)
one_hot_position = torch.eye(6)  # (T, T) with T = 6


def word_alone(word, t):
    return value[word]  # (3,)


def word_and_position(word, t):
    return torch.cat([value[word], one_hot_position[t]])  # (3 + 6,)


def word_bound_to_position(word, t):
    return torch.outer(value[word], one_hot_position[t]).flatten()  # (3 * 6,)


same = {}
for make in (word_alone, word_and_position, word_bound_to_position):
    averages = [0.5 * make(previous, position["previous"]) + 0.5 * make(referent, position["referent"])
                for previous, referent in sentences.values()]  # one head, weights 0.5 / 0.5
    same[make.__name__] = torch.equal(*averages)
    print(f"{make.__name__:>22} ({len(averages[0]):>2} features): one head's outputs for the two "
          f"sentences are {'identical' if same[make.__name__] else 'different'}")
assert [len(make("cat", 4)) for make in (word_alone, word_and_position, word_bound_to_position)] == [3, 9, 18]
assert same == {"word_alone": True, "word_and_position": True, "word_bound_to_position": False}, f"got {same=}"

# %% [markdown]
# Appending the position does not help: the average of *cat at 4* and *dog at 1* holds
# half of *cat*, half of *dog*, half of position 4 and half of position 1, exactly as the
# average of *dog at 4* and *cat at 1* does. The pairing is lost in the sum. A position code
# *added* to the word vector, as in chapter 7, fares no better, for the same reason:
# $\tfrac12(\mathbf{w}_\text{cat} + \mathbf{p}_4) + \tfrac12(\mathbf{w}_\text{dog} + \mathbf{p}_1) = \tfrac12(\mathbf{w}_\text{dog} + \mathbf{p}_4) + \tfrac12(\mathbf{w}_\text{cat} + \mathbf{p}_1)$.
# Bound features keep the pairing, at a price in width: one feature per (word, position)
# pair, 18 here against 9 for the appended code, in general the product of the two sizes
# rather than their sum. So the blend is not always
# hopeless (a value computed by earlier layers may carry some such binding), but one head
# still returns a single blend that later layers must untangle.
#
# The binding puzzle is one symptom of a plainer limit, which the rest of the chapter
# measures: in one layer, a head gives each query *one* distribution over the keys. It could tilt its weights, say 0.7 and 0.3, but then it makes one lookup
# sharp at the cost of the other; the section *Heads learn different jobs* below measures
# what that costs a trained model.
#
# ### The idea: several heads, each with its own projections
#
# Multi-head attention gives each of $H$ heads its *own* learned projections of the queries,
# keys and values, so each head asks its own question of the same input: several queries run
# in parallel, each selecting its own group of information from the input, so that each head
# can attend to a different part of it. With queries $\mathbf{Q} \in \mathbb{R}^{Q \times D}$ ($Q$ queries) and keys and values
# $\mathbf{K}, \mathbf{V} \in \mathbb{R}^{K \times D}$ ($K$ keys; rows are vectors), head $i$ computes
# scaled dot-product attention on its projections,
#
# $$
# \mathrm{head}_i = \operatorname{softmax}\!\left(
# \frac{(\mathbf{Q}\mathbf{W}_i^Q)(\mathbf{K}\mathbf{W}_i^K)^\top}{\sqrt{d_h}}\right)
# \mathbf{V}\mathbf{W}_i^V \in \mathbb{R}^{Q \times d_h},
# \qquad
# \mathbf{W}_i^Q, \mathbf{W}_i^K, \mathbf{W}_i^V \in \mathbb{R}^{D \times d_h},
# $$
#
# and the heads' outputs are concatenated and mixed by one more learned matrix, the
# [output projection](../book/glossary.md#term-output-projection) $\mathbf{W}^O \in \mathbb{R}^{H d_h \times D}$:
#
# $$
# \operatorname{MultiHead}(\mathbf{Q}, \mathbf{K}, \mathbf{V})
# = [\mathrm{head}_1, \mathrm{head}_2, \dots, \mathrm{head}_H]\, \mathbf{W}^O
# \in \mathbb{R}^{Q \times D}.
# $$
#
# Each head works in its own $d_h$-dimensional [representation subspace](../book/glossary.md#term-representation-subspace): its
# projections choose which $d_h$ directions of the $D$ features it compares and which it
# passes on. The usual choice, and the one made everywhere in this book, is the
# [head dimension](../book/glossary.md#term-head-dimension) $d_h = D/H$. Then the concatenation has $D$ features again, and, as
# the section on cost shows, $H$ heads together cost about the FLOPs and parameters of one head of
# full width $D$: splitting the width buys several distributions for the price of one. (Not
# quite for free: the $H$ attention matrices take $H$ times the memory, as that section
# shows.)
#

# %% mystnb={"image": {"alt": "Block diagram of multi-head attention with H = 3 heads, read top to bottom. A box with the queries Q, keys K and values V, each with D features, branches into three head boxes side by side; each head projects them with its own query, key and value matrices from D to D/H features and runs scaled dot-product attention. The three outputs of D/H features go into a concat box of D features, then through the output projection W^O from D to D, to the output box of D features."}}
fig = multihead_diagram(num_heads=3)


# %% [markdown]
# *Block diagram of multi-head attention with $H = 3$ heads. The queries, keys and values,
# each with $D$ features, go to three head boxes side by side; each head projects them with
# its own $\mathbf{W}_i^Q, \mathbf{W}_i^K, \mathbf{W}_i^V$ to $D/H$ features and runs scaled
# dot-product attention. The three outputs of $D/H$ features are concatenated into $D$
# features, and one $D \to D$ matrix $\mathbf{W}^O$ maps the concatenation to the output.*
#

# %% [markdown]
# ## Multi-head attention as a loop over heads
#
# First the formula as written: a Python loop over heads, each with its own three small
# `nn.Linear` layers from $D$ to $D/H$ features, then the concatenation and $\mathbf{W}^O$.
# (`nn.Linear` computes $\mathbf{x}\mathbf{W}^\top + \mathbf{b}$ and stores the weight
# transposed, as a $(d_h, D)$ tensor; the layers also have biases, as in PyTorch's module.)
# The example is cross-attention, with 4 queries and 6 keys, so that the two lengths stay
# apart in the shapes.

# %%
def multihead_loop(queries, keys, values, head_layers, w_o):
    head_outputs, head_weights = [], []
    for w_q_i, w_k_i, w_v_i in head_layers:  # each head: its own three D -> D/H layers
        q, k, v = w_q_i(queries), w_k_i(keys), w_v_i(values)  # (B, Q, D/H), (B, K, D/H) x 2
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, Q, K)
        attention_weights = torch.softmax(scores, dim=-1)  # (B, Q, K)
        head_outputs.append(attention_weights @ v)  # (B, Q, D/H)
        head_weights.append(attention_weights)
    concat = torch.cat(head_outputs, dim=-1)  # (B, Q, H * D/H) = (B, Q, D)
    return w_o(concat), torch.stack(head_weights, dim=1)  # (B, Q, D), (B, H, Q, K)


set_seed(0)
B, Q, K, D, H = 2, 4, 6, 12, 3
head_dim = D // H
head_layers = [[nn.Linear(D, head_dim) for _ in range(3)] for _ in range(H)]
w_o = nn.Linear(D, D)
queries, keys, values = torch.randn(B, Q, D), torch.randn(B, K, D), torch.randn(B, K, D)

out_loop, weights_loop = multihead_loop(queries, keys, values, head_layers, w_o)
check_shape(out_loop, (B, Q, D))
check_shape(weights_loop, (B, H, Q, K))
print(f"B={B}, Q={Q}, K={K}, D={D}, H={H}: each head has {head_dim} features")
print(f"output {tuple(out_loop.shape)}, weights {tuple(weights_loop.shape)}")


# %% [markdown]
# ## All heads at once: one projection, then a reshape
#
# The loop runs $3H$ small matrix products and $H$ small attentions one after another. Look
# at what the heads' query projections do together. Stack the $H$ matrices
# $\mathbf{W}_i^Q \in \mathbb{R}^{D \times d_h}$ side by side into one $D \times D$ matrix,
#
# $$
# \mathbf{W}^Q = \big[\mathbf{W}_1^Q \;\; \mathbf{W}_2^Q \;\; \cdots \;\; \mathbf{W}_H^Q\big],
# \qquad
# \mathbf{Q}\mathbf{W}^Q = \big[\mathbf{Q}\mathbf{W}_1^Q \;\; \mathbf{Q}\mathbf{W}_2^Q \;\; \cdots \;\; \mathbf{Q}\mathbf{W}_H^Q\big].
# $$
#
# One $D \to D$ projection computes every head's queries at once: head $i$'s queries are
# features $(i-1)d_h$ to $i\,d_h - 1$ of the result. The same holds for keys and values. So
# the parallel form is
#
# 1. project queries, keys and values with one $D \to D$ layer each;
# 2. *split* the $D$ features into $H$ groups of $d_h$, (B, T, D) → (B, T, H, $d_h$), and
#    move the head axis forward, → (B, H, T, $d_h$), so that heads become one more batch axis;
# 3. run scaled dot-product attention once, batched over $B$ and $H$;
# 4. *merge* the heads back, (B, H, T, $d_h$) → (B, T, H, $d_h$) → (B, T, D), which is the
#    concatenation, and apply $\mathbf{W}^O$.
#
# Below, the parallel form is written out; then the small layers of the loop are stacked into
# big ones (for `nn.Linear`, whose weight is stored transposed, stacking columns of
# $\mathbf{W}^Q$ means stacking the rows of the weights, `torch.cat(..., dim=0)`) and the two
# forms are compared.

# %%
def multihead_parallel(queries, keys, values, w_q, w_k, w_v, w_o, num_heads):
    B, Q, D = queries.shape
    K, head_dim = keys.shape[1], D // num_heads
    # 1) project, 2) split D into H heads and move heads next to the batch axis
    q = w_q(queries).view(B, Q, num_heads, head_dim).transpose(1, 2)  # (B, H, Q, D/H)
    k = w_k(keys).view(B, K, num_heads, head_dim).transpose(1, 2)  # (B, H, K, D/H)
    v = w_v(values).view(B, K, num_heads, head_dim).transpose(1, 2)  # (B, H, K, D/H)
    # 3) scaled dot-product attention, batched over B and H
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (B, H, Q, K)
    attention_weights = torch.softmax(scores, dim=-1)  # (B, H, Q, K)
    heads = attention_weights @ v  # (B, H, Q, D/H)
    # 4) merge the heads (= concatenate them) and mix them with W^O
    concat = heads.transpose(1, 2).reshape(B, Q, D)  # (B, Q, D)
    return w_o(concat), attention_weights  # (B, Q, D), (B, H, Q, K)


def stack_heads(layers):
    # H small D -> D/H layers become one D -> D layer: stack their weights and biases
    big = nn.Linear(D, D)
    with torch.no_grad():
        big.weight.copy_(torch.cat([layer.weight for layer in layers], dim=0))  # (D, D)
        big.bias.copy_(torch.cat([layer.bias for layer in layers], dim=0))  # (D,)
    return big


w_q, w_k, w_v = (stack_heads([layers[j] for layers in head_layers]) for j in range(3))
out_parallel, weights_parallel = multihead_parallel(queries, keys, values,
                                                    w_q, w_k, w_v, w_o, num_heads=H)
torch.testing.assert_close(out_parallel, out_loop)
torch.testing.assert_close(weights_parallel, weights_loop)
print("the loop over heads and the reshaped parallel version agree")

# %% [markdown]
# The two agree: multi-head attention with $H$ heads of $D/H$ features *is* one $D \to D$
# projection per input followed by a reshape. The loop was only a slower way to write it.
#
# The book's helper `helpers.multihead.MultiHeadAttention(d_model, num_heads)` is the
# parallel version with input checks and masks. Its projections are the `nn.Linear`
# attributes `w_q`, `w_k`, `w_v` and `w_o`, so the same stacked weights can be loaded into
# it, and its `forward(queries, keys, values, mask=None)` returns `(out, weights)`.

# %%
helper = MultiHeadAttention(d_model=D, num_heads=H)
helper.load_state_dict({f"{name}.{p}": getattr(layer, p)
                        for name, layer in [("w_q", w_q), ("w_k", w_k), ("w_v", w_v),
                                            ("w_o", w_o)] for p in ("weight", "bias")})
out_helper, weights_helper = helper(queries, keys, values)
torch.testing.assert_close(out_helper, out_loop)
torch.testing.assert_close(weights_helper, weights_loop)
print(helper)
print("helpers.multihead.MultiHeadAttention agrees with the loop and the parallel version")

# %% [markdown]
# ## Tracing the shapes
#
# The reshapes are where multi-head code goes wrong, so here is every step for self-attention
# on a batch of $B = 2$ sequences of $T = 5$ positions with $D = 12$ features and $H = 3$
# heads ($d_h = 4$). Each tensor is checked with `check_shape` as it is made, the split and
# merge are compared with the helper's `split_heads` and `merge_heads`, and the end result
# with the helper's forward pass.

# %%
set_seed(0)
B, T, D, H = 2, 5, 12, 3
mha = MultiHeadAttention(D, H)
x = torch.randn(B, T, D)
trace = []


def step(symbolic, operation, tensor, shape):
    check_shape(tensor, shape)
    trace.append((symbolic, operation, tuple(tensor.shape)))
    return tensor


step("(B, T, D)", "input x", x, (B, T, D))
q = step("(B, T, D)", "queries x W^Q (keys, values alike)", mha.w_q(x), (B, T, D))
q = step("(B, T, H, D/H)", ".view: split D into H heads", q.view(B, T, H, D // H),
         (B, T, H, D // H))
q = step("(B, H, T, D/H)", ".transpose(1, 2): heads to a batch axis", q.transpose(1, 2),
         (B, H, T, D // H))
torch.testing.assert_close(q, mha.split_heads(mha.w_q(x)))
k, v = mha.split_heads(mha.w_k(x)), mha.split_heads(mha.w_v(x))  # (B, H, T, D/H) each
scores = step("(B, H, T, T)", "scores q k^T / sqrt(D/H)",
              q @ k.transpose(-2, -1) / math.sqrt(D // H), (B, H, T, T))
attention_weights = step("(B, H, T, T)", "softmax over the keys",
                         torch.softmax(scores, dim=-1), (B, H, T, T))
heads = step("(B, H, T, D/H)", "weights @ v: one output per head",
             attention_weights @ v, (B, H, T, D // H))

# %%
merged = step("(B, T, H, D/H)", ".transpose(1, 2): positions back in front",
              heads.transpose(1, 2), (B, T, H, D // H))
concat = step("(B, T, D)", ".reshape: concatenate the heads",
              merged.reshape(B, T, D), (B, T, D))
torch.testing.assert_close(concat, mha.merge_heads(heads))
out = step("(B, T, D)", "x W^O: mix the heads", mha.w_o(concat), (B, T, D))

out_helper, weights_helper = mha(x, x, x)
torch.testing.assert_close(out, out_helper)
torch.testing.assert_close(attention_weights, weights_helper)
assert [i for i, (symbolic, _, _) in enumerate(trace) if symbolic == "(B, H, T, T)"] == [4, 5], f"got {[i for i, (symbolic, _, _) in enumerate(trace) if symbolic == '(B, H, T, T)']=}"
print(f"B={B}, T={T}, D={D}, H={H}, D/H={D // H}\n")
print(f"{'step':>4}  {'shape':<15} {'numbers':<15} operation")
for i, (symbolic, operation, shape) in enumerate(trace):
    print(f"{i:>4}  {symbolic:<15} {str(shape):<15} {operation}")

# %% [markdown]
# Two details in the table are easy to get wrong. The split is a `view` followed by a
# `transpose`, and the order matters: `x.view(B, H, T, D // H)` would also have the right
# shape, but it would cut the flat memory in the wrong places and give each head a mix of
# positions instead of a slice of features. And after the second `transpose` the tensor is no
# longer contiguous in memory, so the merge needs `reshape` (or `.contiguous().view`), not
# `view`.
#
# The scores and the softmax weights made from them (steps 4 and 5) are the only
# (B, H, T, T) tensors: every head has its own T × T attention matrix. That is where the heads differ; everything else is one big matrix product.
#
# ## $W^O$: letting the heads talk to each other
#
# Split $\mathbf{W}^O$ into $H$ horizontal slices $\mathbf{W}^O_i \in \mathbb{R}^{d_h \times D}$,
# one per head (rows $(i-1)d_h$ to $i\,d_h - 1$). Multiplying a concatenation by a stacked
# matrix is a sum of products,
#
# $$
# [\mathrm{head}_1, \dots, \mathrm{head}_H]\, \mathbf{W}^O
# = \sum_{i=1}^{H} \mathrm{head}_i\, \mathbf{W}^O_i .
# $$
#
# So each head writes into *all* $D$ output features, through its own slice, and the heads'
# contributions are added. Without $\mathbf{W}^O$ the output would be the bare concatenation,
# and output feature $j$ would be feature $j \bmod d_h$ of one head and nothing else: no
# output feature could combine what two heads found. The first cell checks the sum; the
# second changes one head's value projection at a time and records which output features
# move.

# %%
concat_heads = [heads[:, i].detach() for i in range(H)]  # H tensors (B, T, D/H)
w_o_slices = mha.w_o.weight.detach().T.split(D // H, dim=0)  # H slices (D/H, D) of W^O
as_sum = sum(head @ w_o_slice for head, w_o_slice in zip(concat_heads, w_o_slices))
torch.testing.assert_close(as_sum + mha.w_o.bias, out)
print("concat(heads) W^O = sum over heads of head_i W^O_i (+ bias)")


def output_change(w_o_layer):
    # (H, D): largest change of each output feature when one head's values are perturbed
    base, _ = multihead_parallel(x, x, x, mha.w_q, mha.w_k, mha.w_v, w_o_layer, H)
    rows = []
    for head in range(H):
        w_v_changed = copy.deepcopy(mha.w_v)
        with torch.no_grad():
            w_v_changed.weight[head * (D // H):(head + 1) * (D // H)] += torch.randn(D // H, D)
        changed, _ = multihead_parallel(x, x, x, mha.w_q, mha.w_k, w_v_changed, w_o_layer, H)
        rows.append((changed - base).abs().amax(dim=(0, 1)).detach())  # (D,)
    return torch.stack(rows)


set_seed(1)
change = {"without W^O": output_change(nn.Identity()), "with W^O": output_change(mha.w_o)}
for name, matrix in change.items():
    moved = (matrix > 1e-6).sum(dim=1).tolist()
    print(f"{name:>11}: output features moved by heads 1, 2, 3: {moved} (of {D})")
assert ((change["without W^O"] > 1e-6).sum(dim=1) == D // H).all()
assert (change["with W^O"] > 1e-6).all()

# %% mystnb={"image": {"alt": "Two heatmaps with one row per head (head 1 to 3) and the 12 output features across, on one colour scale; each row shows how much every output feature changes when that head's value projection is perturbed. Left, without W^O: three separate coloured blocks of four features, head 1 on the first four, head 2 on the next four and head 3 on the last four, and dark everywhere else. Right, with W^O: every row is coloured across all twelve features, in dimmer, more even colours."}}
fig, axes = plt.subplots(1, 2, figsize=(9.5, 2.9))
vmax = max(matrix.max().item() for matrix in change.values())
for ax, (name, matrix) in zip(axes, change.items()):
    heatmap(matrix, ax=ax, vmax=vmax, xlabel="output feature",
            ylabel="head whose values changed",
            title=f"|change in output|, {name.replace('W^O', '$W^O$')}",
            yticklabels=[f"head {i + 1}" for i in range(H)])
fig.tight_layout()

# %% [markdown]
# *Each row is one experiment: one head's value projection is perturbed, and the colour shows
# how much each of the 12 output features changes. Left, without $W^O$: three separate blocks
# of four features, one per head, and dark everywhere else. Right, with $W^O$: every row is
# coloured across all twelve features.*
#
# Without $\mathbf{W}^O$, changing head 1 moves features 0–3 and nothing else; each head owns
# a block of the output. With it, every head reaches every output feature. That is the job of
# $\mathbf{W}^O$: to mix the heads' findings into one representation, in which a single
# feature can be a weighted sum of what several heads found. $\mathbf{W}^O$ is linear, so it
# cannot by itself compute a conjunction such as "the previous word is a verb *and* the
# referent is plural"; the feed-forward network that follows it in a Transformer, with its
# nonlinearity, can turn such a sum into one. The sum form
# also says that heads are independent until this point; the only place one head's result
# meets another's is the addition after $\mathbf{W}^O$ (and, in a Transformer, the layers
# that follow).

# %% [markdown]
# ## Heads learn different jobs
#
# Does giving a model several heads make them do different things? Here is a toy task that
# needs three different lookups at every position, and a model small enough to train in a few
# seconds.
#
# **The twins task.** A sequence has $T = 8$ items. Each is a symbol (a letter from A to H)
# and a colour (red, green, blue or yellow). The sequence holds four different symbols, each
# exactly twice, in a random order; the two occurrences of a symbol are *twins*. Colours are
# random. At every position the model must output three things:
#
# 1. the symbol at the **previous** position (cyclically: position 0's previous is position 7);
# 2. the symbol at the **next** position (cyclically);
# 3. the **colour of its twin**.
#
# The first two are lookups by *position* (offset −1 and +1); the third is a lookup by
# *content*, since the twin can be anywhere and is recognised only by having the same symbol.
# `helpers.tasks.twins.twins_task` generates sequences, `TwinsModel` is the model: symbol, colour
# and position embeddings are added (a learned [positional encoding](../book/glossary.md#term-positional-encoding), the subject of the
# next chapter), one `MultiHeadAttention` layer attends, and a linear read-out maps each
# position's output to the three predictions. There is no residual connection, so everything
# the read-out learns about a position has to come through attention. Here is one test
# sequence:

# %%
letters, colour_names = "ABCDEFGH", ["red", "green", "blue", "yellow"]
train_data, test_data = twins_task(512, seed=0), twins_task(1024, seed=1)
example = 0  # the test sequence shown in the figures
symbols, colours = test_data.symbols[example], test_data.colours[example]  # (T,), (T,)
labels = [f"{t}:{letters[s]}" for t, s in enumerate(symbols.tolist())]  # for the heatmaps

print(f"{'position':>8} {'symbol':>6} {'colour':>7} | {'previous':>8} {'next':>5} "
      f"{'twin':>5} {'twin colour':>11}")
for t in range(8):
    twin = test_data.twin[example, t].item()
    print(f"{t:>8} {letters[symbols[t]]:>6} {colour_names[colours[t]]:>7} | "
          f"{letters[test_data.previous[example, t]]:>8} {letters[test_data.next[example, t]]:>5}"
          f" {twin:>5} {colour_names[test_data.twin_colour[example, t]]:>11}")

# %% [markdown]
# Train two models of the same width $D = 24$ and the same number of parameters: one with
# $H = 3$ heads of 8 features, one with a single head of 24 features. Both see the same 512
# training sequences (full batch, 80 steps of Adam) and are scored on 1,024 fresh test
# sequences. One training run depends on its random initialisation, so each model is trained
# from five initialisations (seeds 0 to 4), and what the cell prints is how many seeds show each
# outcome. (The runs take a few seconds.) The figures after it look inside the two models of seed 0.
#

# %%
seeds = range(5)
models, runs = {}, {3: [], 1: []}  # models: the seed-0 models, looked at below
for num_heads in (3, 1):
    for seed in seeds:
        set_seed(seed)
        model = TwinsModel(d_model=24, num_heads=num_heads)
        losses = train_twins(model, train_data, steps=80, lr=0.03)
        with torch.no_grad():
            _, seed_weights = model(test_data.symbols, test_data.colours)  # (N, H, T, T)
        runs[num_heads].append({"loss": losses[-1], "accuracy": twins_accuracy(model, test_data),
                                "relations": relation_weights(seed_weights, test_data.twin),
                                "entropy": attention_entropy(seed_weights).mean().item()})
        if seed == 0:
            models[num_heads] = model

count = {h: sum(p.numel() for p in model.parameters()) for h, model in models.items()}
assert count[3] == count[1], f"got {count[3]=}, {count[1]=}"
print(f"parameters: {count[3]} in both models; {len(seeds)} seeds each, the same data and training")


# %%
def seeds_where(condition, num_heads):
    return f"{sum(bool(condition(run)) for run in runs[num_heads])} of {len(seeds)}"


def report(label, value):
    print(f"  {label:<60} {value}")


relation_names = ["previous", "next", "twin", "self"]
jobs = [tuple(run["relations"][name].argmax().item() for name in relation_names[:3])
        for run in runs[3]]  # per seed: which head holds the previous, next and twin jobs
print("3 heads of 8: seeds in which")
report("train loss < 0.01 and all three test accuracies > 99%",
       seeds_where(lambda r: r["loss"] < 0.01 and min(r["accuracy"].values()) > 0.99, 3))
report("each relation has its own head (mean weight on it > 0.9)",
       seeds_where(lambda r: all(r["relations"][n].max() > 0.9 for n in relation_names[:3]), 3))
report("different assignments of the three jobs to the heads", len(set(jobs)))

kind = ["previous" if run["accuracy"]["previous"] > run["accuracy"]["next"] else "next"
        for run in runs[1]]
best = [max(run["accuracy"]["previous"], run["accuracy"]["next"]) for run in runs[1]]
other = [min(run["accuracy"]["previous"], run["accuracy"]["next"]) for run in runs[1]]
# a guess with no lookup: the colour most common among the other 7 positions (ties split)
one_hot_colours = nn.functional.one_hot(test_data.colours, 4)  # (N, T, colours)
counts = one_hot_colours.sum(dim=1, keepdim=True) - one_hot_colours  # colours of the other 7
top = counts == counts.max(dim=-1, keepdim=True).values  # (N, T, colours)
majority = (top.gather(-1, test_data.twin_colour[..., None])[..., 0] / top.sum(-1)).mean().item()
chance_loss = 2 * math.log(8) + math.log(4)  # uniform guesses on the three targets
print("1 head of 24: seeds in which")
report(f"train loss between 2.2 and 2.6 (uniform guessing: {chance_loss:.2f})",
       seeds_where(lambda r: 2.2 < r["loss"] < 2.6, 1))
report("the head became a previous-symbol / a next-symbol head",
       f"{kind.count('previous')} / {kind.count('next')}")
report("test accuracy on that neighbour > 90%", f"{sum(a > 0.9 for a in best)} of {len(seeds)}")
report("test accuracy on the other neighbour < 35%", f"{sum(a < 0.35 for a in other)} of {len(seeds)}")
report(f"test accuracy on the twin colour < {100 * majority:.1f}% (*)",
       seeds_where(lambda r: r["accuracy"]["twin colour"] < majority, 1))
report("mean entropy of its weights between 1.5 and 2.0 nats",
       seeds_where(lambda r: 1.5 < r["entropy"] < 2.0, 1))
print(f"(*) {100 * majority:.1f}%: guessing the colour most common among the other 7 positions")


# %% [markdown]
# Same width, same number of parameters, same training, five seeds each. The three-head
# model solves all three parts on unseen sequences in every seed, and in every seed each
# relation gets a head of its own. The single head, in every seed, makes itself a
# *neighbour* head: a previous-symbol head in three seeds, a next-symbol head in two (which
# one depends on the initialisation). It gets that neighbour right more than 90% of the time
# (median about 95%) and fails the other two targets. On the other neighbour it stays below
# 35%, about what a guess among the sequence's other three symbols would score (29%); on the
# twin colour it scores less than the 46% one gets by guessing, with no lookup at all, the
# colour most common among the other positions. Its weights are spread out (mean entropy
# between 1.5 and 2.0 nats, where uniform weights have 2.08): it tilts its one distribution
# towards one neighbour rather than making any sharp lookup.
#
# These details belong to this training (Adam, learning rate 0.03, 80 steps) and this width. In checks not
# shown here, both models were retrained with one setting changed at a time, five seeds
# each. Trained many times longer, the three-head model still solved everything, and the
# single head kept one neighbour and stayed near the guess on the other, but its twin-colour
# accuracy crept up to about the majority guess, in some seeds a little above it. With a
# smaller learning rate and many more steps the picture was the same as here, with sharper
# single-head weights; stopped after only 80 steps at that smaller rate, neither model had
# finished (the single head was then partly right on both neighbours). With a much larger
# learning rate, training became unstable for both: the three-head model failed the twin
# colour in every seed, and the single head made a *sharp* lookup of one neighbour (entropy
# near zero) instead of a tilted blur. That setting compares two failed trainings and says
# nothing about heads. A wider model at this learning rate (also in a check not shown) gave
# the single head the same sharp lookup of one neighbour, while the three heads still made
# three sharp lookups. So the entropy band and the twin-colour number above describe this
# training; the outcome (one neighbour, no three lookups) held in every run that trained.
#
# So in this model, one attention layer with no residual connection and a linear read-out,
# one distribution per query did not make three sharp lookups at once in any seed or setting
# tried, and three did. That is a statement about one layer. With several layers and a residual connection, a single head per layer
# can look up one thing in each layer and keep what earlier layers found. In checks not shown
# here (five seeds each, with a longer training of their own), giving the one-head layer a
# residual connection did not rescue it: it still learned one neighbour in every seed. A
# stack of three one-head layers with a residual connection solved the whole task in every
# seed, a stack of two in most. So the number of distributions per layer
# is what this experiment isolates, not the number a deep model can use. And
# [Michel et al. [2019]](../book/references.bib#michel2019) find that in most layers of trained translation and BERT models,
# all heads but one can be removed at test time without a significant loss (Section 3.2).
# They prune one layer at a time, with every other layer keeping all its heads, so this does
# not say that a model with one head per layer would do as well.
#
# What did the three heads learn? For every head of the seed-0 model, the table gives the
# mean attention weight (over all 8,192 test queries) on four keys: the previous position,
# the next position, the twin, and the query itself; and the mean entropy of its weights, in
# nats (0 for a head that looks at a single key, $\log 8 = 2.08$ for uniform weights).
#

# %%
with torch.no_grad():
    weights = {h: model(test_data.symbols, test_data.colours)[1] for h, model in models.items()}
frames = {f"head {i + 1}": weights[3][:, i] for i in range(3)}  # (N, T, T) each
frames["single head"] = weights[1][:, 0]
accuracy_seed0 = twins_accuracy(models[3], test_data)  # the model pruned in exercise 5
relations = {name: relation_weights(w[:, None], test_data.twin) for name, w in frames.items()}
entropy = {name: attention_entropy(w).mean().item() for name, w in frames.items()}

print(f"{'3-head model':>12} {'previous':>9} {'next':>6} {'twin':>6} {'self':>6} {'entropy':>8}")
for name in ("head 1", "head 2", "head 3"):
    print(f"{name:>12} " + " ".join(f"{relations[name][k].item():{w}.2f}" for k, w in
                                    [("previous", 9), ("next", 6), ("twin", 6), ("self", 6)])
          + f" {entropy[name]:8.2f}")
job = {}
for relation_name in ("previous", "next", "twin"):
    best_head = max(("head 1", "head 2", "head 3"), key=lambda n: relations[n][relation_name].item())
    assert relations[best_head][relation_name].item() > 0.95, f"{best_head}: {relation_name} weight"
    job[best_head] = relation_name
assert len(job) == 3, "each relation has its own head"
print("\n" + ", ".join(f"{head} looks at the {relation}" for head, relation in sorted(job.items())))


# %% tags=["remove-cell"]
# Checks of the numbers quoted around the tables (5 seeds; they hold on AVX-512, AVX2 and SSE4 kernels).
next_differs = (test_data.next != test_data.symbols).float().mean().item()
assert abs(next_differs / 3 - 0.29) < 0.01, f"guess among 3 symbols: {next_differs / 3:.3f}"
assert abs(majority - 0.46) < 0.005, f"majority-colour guess {majority:.3f}"
assert abs(math.log(8) - 2.08) < 0.005, f"got {abs(math.log(8) - 2.08)=}"
assert all(r["loss"] < 0.01 and min(r["accuracy"].values()) > 0.99 for r in runs[3]), \
    [(r["loss"], r["accuracy"]) for r in runs[3]]
assert len(set(jobs)) >= 2, f"job assignments {jobs}: expected them to change with the seed"
best_sorted = sorted(best)
assert 0.9 < best_sorted[len(best) // 2] < 0.98, f"median neighbour accuracy {best_sorted}"
assert all(a < 0.35 for a in other), f"other-neighbour accuracies {other}"
assert 2 <= kind.count("previous") <= 3, f"single-head kinds {kind}"  # 3 / 2 here; a flip of one seed is tolerated
twin_head = next(head for head, relation in job.items() if relation == "twin")
for neighbour in ("previous", "next"):
    value = relations[twin_head][neighbour].item()
    assert abs(value - 1 / 7) < 0.01, f"twin head's weight on the {neighbour} key {value:.3f}"
assert all(entropy[head] < 0.05 for head in job), {head: entropy[head] for head in job}
assert 1.5 < entropy["single head"] < 2.0, f"single-head entropy {entropy['single head']:.3f}"


# %% [markdown]
# Each head has taken one job, with almost all of its weight on one key and an entropy close
# to zero. The twin head's weight of about 0.14 on the previous and the next position is no
# contradiction: a query's twin is equally likely to be at any of the other seven positions,
# so for about one query in seven it sits at the previous position (and for another seventh
# at the next), and then the twin head looks there too.
#
# The slider shows the weights on the example sequence, head by head, and finally the single
# head of the one-head model (seed 0, a previous-symbol head); the title of each heatmap names the head it shows and the model
# it belongs to. Rows are queries, columns are keys, both labelled
# `position:symbol`; the bar chart beside the heatmap gives the same head's mean weights over
# all test sequences, as in the table.

# %%
def relation_bars(ax, frame_name):
    heights = [relations[frame_name][name].item() for name in relation_names]
    ax.bar(relation_names, heights, color=["C0", "C1", "C2", "C7"])
    ax.set(ylim=(0, 1.05), ylabel="mean attention weight", xlabel="key relative to the query",
           title=f"{frame_name}: 1,024 test sequences")


def render_head(frame_name):
    fig, (ax_map, ax_bars) = plt.subplots(1, 2, figsize=(9.2, 3.6))
    model = "1-head model" if frame_name == "single head" else "3-head model"
    heatmap(frames[frame_name][example], ax=ax_map, vmax=1.0, xlabel="keys (position:symbol)",
            ylabel="queries", xticklabels=labels, yticklabels=labels,
            title=f"{frame_name} ({model}),\nexample sequence")
    relation_bars(ax_bars, frame_name)
    fig.tight_layout()
    return fig


head_slider = slider_figure(render_head, list(frames), description="attention head", fmt="{}")
head_slider

# %% [markdown]
# Moving the slider: head 1, head 2 and head 3 each show one bright cell per row, in three
# different patterns. Head 1 pairs up the positions holding the same letter (the twins);
# head 2 is a diagonal shifted by one to the left (the previous position); head 3 is one
# shifted to the right (the next position). The single head's map is a blur spread over each row, a little
# brighter on one side of the diagonal. The cell below prints, for the example sequence, the key each head of the three-head
# model looks at most from every query (its argmax), which is what the bright cells show, and
# checks it against the three rules.

# %%
heads = ["head 1", "head 2", "head 3"]
print(f"{'query':>6} | " + " ".join(f"{name:>11}" for name in heads))
argmax = {name: frames[name][example].argmax(dim=-1) for name in heads}  # (T,) each
for t in range(8):
    print(f"{labels[t]:>6} | " + " ".join(f"{labels[argmax[name][t]]:>11}" for name in heads))

positions = torch.arange(8)
rule = {"previous": (positions - 1) % 8, "next": (positions + 1) % 8,
        "twin": test_data.twin[example]}
for head, relation_name in job.items():
    assert torch.equal(argmax[head], rule[relation_name]), head
assert job == {"head 1": "twin", "head 2": "previous", "head 3": "next"}, job  # as the text says
print("\nevery head's argmax follows its rule on all 8 queries")


# %% [markdown]
# Nobody told the heads which job to take; the assignment is whatever the random
# initialisation and training settled on: over the five seeds, the three jobs landed on the
# three heads in four different orders. What the experiment shows is that with three distributions available, this
# model used them for three different relations, two found by position and one by content.
# (A head that looks at the previous position is also the first half of the two-layer
# *induction heads* that [Olsson et al. [2022]](../book/references.bib#olsson2022) study in trained language models.)
#
# Heads in trained Transformers show some of the same division of labour, and a lot of
# redundancy too. In BERT, [Clark et al. [2019]](../book/references.bib#clark2019) find heads that attend to the previous or
# the next token (Section 3), heads that follow syntactic relations, such as one in which
# direct objects attend to their verbs, and heads that link coreferent words (Section 4). In
# the encoder self-attention of a Transformer translation model, [Voita et al. [2019]](../book/references.bib#voita2019)
# find positional, syntactic and rare-word heads (their Section 5, "Characterizing heads"),
# and can prune most of the other heads with little loss: on English–Russian, 38 of the 48
# encoder heads for a drop of only 0.15 BLEU (their abstract). [Michel et al. [2019]](../book/references.bib#michel2019) remove
# heads one at a time at test time and find that removing any single head rarely costs much
# (Section 3.1); pruned jointly, in order of importance, about 20% of the heads of a
# translation model and 40% of BERT's can go before the score falls noticeably (Section 4,
# Figure 3). [Kovaleva et al. [2019]](../book/references.bib#kovaleva2019) find that BERT's heads mostly repeat a small set of
# attention patterns (Figure 1), and that disabling some heads even improves a fine-tuned
# model (abstract). So specialised heads exist, but most heads of a trained model can go one
# at a time, and many can go together. Exercise 5 removes the heads of the toy model one at a
# time.
#
# ## The cost: $H$ heads of $D/H$ cost one head of $D$
#
# Why $d_h = D/H$ rather than giving every head the full width? Count the work. A product of
# an $(n_1, n_2)$ and an $(n_2, n_3)$ matrix takes $n_1 n_2 n_3$ multiplications and as many additions,
# $2 n_1 n_2 n_3$ floating-point operations ([FLOPs](../book/glossary.md#term-FLOP)). For self-attention on $B$
# sequences of $T$ positions:
#
# | stage | one head of width $D$ | $H$ heads of width $D/H$ |
# |---|---|---|
# | projections $\mathbf{Q}, \mathbf{K}, \mathbf{V}$ | $3 \cdot 2BTD^2$ | $3 \cdot 2BTD^2$ (one $D \to D$ product each) |
# | scores $\mathbf{q}\mathbf{k}^\top$ | $2BT^2D$ | $H \cdot 2BT^2 (D/H) = 2BT^2D$ |
# | weighted sum of values | $2BT^2D$ | $H \cdot 2BT^2 (D/H) = 2BT^2D$ |
# | output projection $\mathbf{W}^O$ | $2BTD^2$ | $2BTD^2$ |
#
# The factor $H$ from the number of heads cancels the factor $1/H$ from their width in every
# row, so the total, $8BTD^2 + 4BT^2D$, does not depend on $H$, and neither does the number
# of parameters, $4D^2 + 4D$. The one thing that does grow with $H$ is the number of score
# entries, $BHT^2$: there are $H$ attention matrices. In arithmetic that is elementwise work (scale, softmax),
# small next to the products as long as $H$ is much smaller than $D$. In *memory* it is not
# small: training keeps the attention weights for the backward pass, $BHT^2$ numbers per
# layer, $H$ times as many as one head needs. They grow with $T^2$ while the layer's other
# stored tensors, of $BTD$ numbers each, grow with $T$, so once $HT$ is several times $D$ they
# are the largest thing the layer stores; fused kernels avoid storing them
# ([Dao et al. [2022]](../book/references.bib#dao2022); chapter 9).
# `helpers.measure.attention_flops` implements the table; the cell below prints it for
# $B = 4$, $T = 64$, $D = 512$ and checks it against PyTorch's own FLOP counter
# (`torch.utils.flop_counter.FlopCounterMode`), which counts the matrix products that
# actually ran in `MultiHeadAttention`. Its last column is the number of attention weights.
#

# %%
B, T, D = 4, 64, 512
head_counts = [1, 2, 4, 8, 16]
x_cost = torch.randn(B, T, D)
stages = ["projections", "scores", "weighted sum", "output", "total"]
print(f"B={B}, T={T}, D={D}; MFLOPs (millions) per forward pass\n")
print(f"{'H':>3} {'D/H':>4} " + " ".join(f"{s:>12}" for s in stages)
      + f" {'parameters':>11} {'score entries':>14}")
for h in head_counts:
    flops = attention_flops(B, T, T, D, h)
    module = MultiHeadAttention(D, h)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(x_cost, x_cost, x_cost)
    assert counter.get_total_flops() == flops["total"], f"got {counter.get_total_flops()=}, {flops['total']=}"
    parameters = sum(p.numel() for p in module.parameters())
    print(f"{h:>3} {D // h:>4} " + " ".join(f"{flops[s] / 1e6:12.1f}" for s in stages)
          + f" {parameters:>11,} {flops['score entries']:>14,}")
assert len({attention_flops(B, T, T, D, h)["total"] for h in head_counts}) == 1
print("\nPyTorch's FlopCounterMode counts the same totals")

# %% [markdown]
# Identical FLOPs and parameters for every $H$; only the score entries grow, from 16,384 weights for one head to 131,072 for eight. Now the clock.
# The cell below times one forward pass of `MultiHeadAttention` with $H = 1, 2, 4, 8$ at the
# same sizes. Timings depend on the machine and on whatever else it is doing, so this cell's
# output is not checked by the book's tests and the text does not quote its numbers; it
# only checks, with a wide margin, that eight heads take between half and twice the time
# of one, and prints a note, never an error, when a busy machine's timings fall outside
# (`benchmarks/timings.py` checks the same range as a budget, in `make bench`). To be fair to every size on a busy machine, the sizes take turns, 20 rounds; each
# keeps its fastest time for the printout, and the check uses the median over the rounds of
# the ratio between eight heads and one, two measurements taken moments apart.

# %% tags=["nbval-ignore-output"]
set_seed(0)
timed = {h: MultiHeadAttention(D, h).eval() for h in (1, 2, 4, 8)}
fastest = {h: float("inf") for h in timed}
ratios = []  # per round: time of H = 8 / time of H = 1, measured moments apart
with torch.no_grad():
    for _ in range(20):  # interleaved rounds: a busy moment slows every size alike
        seconds = {}
        for h, module in timed.items():
            start = time.perf_counter()
            module(x_cost, x_cost, x_cost)
            seconds[h] = time.perf_counter() - start
            fastest[h] = min(fastest[h], seconds[h])
        ratios.append(seconds[8] / seconds[1])
for h, seconds in fastest.items():
    print(f"H = {h}: {1e3 * seconds:6.2f} ms per forward pass, "
          f"{seconds / fastest[1]:4.2f} x the time of one head")
median_ratio = torch.tensor(ratios).median().item()
if not 0.5 <= median_ratio <= 2.0:  # timings: other work on the machine can blur them (never an error)
    print(f"Note: in this run eight heads took {median_ratio:.2f} x the time of one (median over "
          "the rounds), outside the factor of two the text expects. Other work on the machine "
          "blurs timings: rerun the cell when the machine is quiet, or run benchmarks/timings.py.")

# %% [markdown]
# The check allows a factor of two either way. The FLOP count predicts four equal times;
# measured, more heads are often somewhat slower, by an amount that depends on the machine
# (see the printout, which is not checked). What differences there are come from the batched products over
# $B \cdot H$ smaller matrices and from the softmax over $H$ times more score entries. That
# cost grows with $T^2$, so for long sequences and many heads it becomes noticeable; fused kernels such as the
# flash-attention path of `F.scaled_dot_product_attention` exist to make that part cheap, by
# never writing the T × T scores to memory.
#
# Had each head kept the full width $D$, every row of the table would be $H$ times larger
# (exercise 2): multi-head attention would cost as much as $H$ separate attention layers.
# Splitting the width is what makes several heads affordable, and it is also the price of
# having them: each head compares queries and keys in only $D/H$ dimensions (exercise 3).
# Chapter 9 meets variants that share one set of keys and values among all the query heads
# (multi-query attention) or among each group of them (grouped-query attention), which shrink the keys and values a decoder has to keep.
#
# ## The same computation as PyTorch's `nn.MultiheadAttention`
#
# PyTorch's `nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)` computes the same
# function with differently named parameters:
#
# - `in_proj_weight`, a $(3D, D)$ tensor, stacks the three input projections: rows $0$ to
#   $D-1$ are $\mathbf{W}^Q$ (in `nn.Linear`'s transposed layout), rows $D$ to $2D-1$ are
#   $\mathbf{W}^K$, rows $2D$ to $3D-1$ are $\mathbf{W}^V$; `in_proj_bias` $(3D,)$ stacks
#   their biases;
# - `out_proj` is an `nn.Linear(D, D)`: $\mathbf{W}^O$ and its bias.
#
# Its padding mask, `key_padding_mask` (B, K), uses the opposite convention to this book:
# **True means ignore this key**. `helpers.masks.to_key_padding_mask` translates the book's
# (B, K) [padding mask](../book/glossary.md#term-padding-mask) (True = may attend) into it. Our module takes the mask as
# `mask[:, None, None, :]`, shape (B, 1, 1, K), broadcast over heads and queries. The cell
# below copies the weights by hand, block by block, from a PyTorch module whose biases are
# made random (PyTorch starts them at zero, which would hide a misplaced bias), and runs both
# on two padded sequences of valid lengths 6 and 4.

# %%
set_seed(0)
B, T, D, H = 2, 6, 16, 4
torch_mha = nn.MultiheadAttention(D, H, batch_first=True).eval()
with torch.no_grad():
    torch_mha.in_proj_bias.normal_()
    torch_mha.out_proj.bias.normal_()
book_mha = MultiHeadAttention(D, H).eval()
with torch.no_grad():  # in_proj_weight (3D, D) = [W_q; W_k; W_v], in_proj_bias (3D,) likewise
    for layer, weight, bias in zip((book_mha.w_q, book_mha.w_k, book_mha.w_v),
                                   torch_mha.in_proj_weight.chunk(3, dim=0),
                                   torch_mha.in_proj_bias.chunk(3, dim=0)):
        layer.weight.copy_(weight)  # (D, D)
        layer.bias.copy_(bias)  # (D,)
    book_mha.w_o.load_state_dict(torch_mha.out_proj.state_dict())

x = torch.randn(B, T, D)
mask = valid_length_mask(torch.tensor([6, 4]), T)  # (B, K), True = may attend
key_padding_mask = to_key_padding_mask(mask)  # (B, K), True = ignore
print("book mask (True = may attend):\n", mask.int())
print("key_padding_mask (True = ignore):\n", key_padding_mask.int())

# %%
out_torch, weights_torch = torch_mha(x, x, x, key_padding_mask=key_padding_mask,
                                     need_weights=True, average_attn_weights=False)
out_book, weights_book = book_mha(x, x, x, mask=mask[:, None, None, :])
check_shape(weights_torch, (B, H, T, T))
torch.testing.assert_close(out_book, out_torch, atol=1e-5, rtol=1e-5)
torch.testing.assert_close(weights_book, weights_torch, atol=1e-5, rtol=1e-5)
assert (weights_book[1, :, :, 4:] == 0).all()  # no weight on sequence 2's padding
print("outputs (B, T, D) equal to 1e-5")
print("per-head weights (B, H, T, T) equal to 1e-5 (average_attn_weights=False)")

from_torch = MultiHeadAttention.from_torch(torch_mha).eval()
out_from_torch, _ = from_torch(x, x, x, mask=mask[:, None, None, :])
torch.testing.assert_close(out_from_torch, out_torch, atol=1e-5, rtol=1e-5)
print("MultiHeadAttention.from_torch copies the same blocks: equal to 1e-5")

out_wrong, weights_wrong = torch_mha(x, x, x, key_padding_mask=mask)  # the book's mask, NOT converted
assert (weights_wrong[1, :, :4] == 0).all()  # sequence 2 attends only to its padding (keys 4, 5)
print(f"unconverted mask: sequence 1 has all keys ignored -> NaN outputs: "
      f"{out_wrong[0].isnan().all().item()}")

# %% [markdown]
# Outputs and every head's weights agree to $10^{-5}$. The last line shows why the
# conversion matters: given the book's mask as it is, PyTorch ignores every real key of the
# first sequence (it has no padding, so its mask is all True, which PyTorch reads as "ignore
# everything") and returns NaN. In the second sequence it would attend *only* to the padding.
# Neither failure raises an error, so convert at the boundary, always with the helper.
#
# By default (`average_attn_weights=True`) PyTorch returns the weights averaged over the
# heads, shape (B, Q, K); the per-head weights that this chapter's heatmaps show need
# `average_attn_weights=False`.
#
# ## Bad input: $D$ must split evenly into $H$ heads
#
# The split reshapes $D$ features into $H \times d_h$, so $H$ must divide $D$. The helper
# checks this when the module is built, and says what it got and what it needed:

# %%
try:
    MultiHeadAttention(d_model=10, num_heads=3)
except ValueError as error:
    print(f"ValueError: {error}")
print("head counts that work for d_model=10:", [h for h in range(1, 11) if 10 % h == 0])

# %% tags=["remove-cell"]
try:
    nn.MultiheadAttention(10, 3)
    raise RuntimeError("expected PyTorch to refuse d_model=10 with 3 heads")
except AssertionError:
    pass
assert 512 // 8 == 64 and 768 // 12 == 64

# %% [markdown]
# PyTorch's `nn.MultiheadAttention(10, 3)` refuses the same configuration (with an
# `AssertionError`). In practice $D$ is chosen as a multiple of $H$, e.g. $D = 512$ with
# $H = 8$ heads of 64 features in the original Transformer ([Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section
# 3.2.2), or $D = 768$ with 12 heads of 64 in BERT-base ([Devlin et al. [2019]](../book/references.bib#devlin2019), Section 3).
#
# ## Summary
#
# - One attention head gives each query one distribution over the keys and returns one
#   weighted average, so whatever it attends to is blended. A query that needs several
#   things at once (a neighbour, a referent, a verb) needs several distributions.
# - Multi-head attention runs $H$ heads, each with its own projections
#   $\mathbf{W}_i^Q, \mathbf{W}_i^K, \mathbf{W}_i^V$ into a $D/H$-dimensional subspace, and
#   combines them as $[\mathrm{head}_1, \dots, \mathrm{head}_H]\,\mathbf{W}^O$: an ensemble
#   of attentions, each in its own representation subspace, whose findings are fused.
# - The loop over heads equals one $D \to D$ projection per input followed by a reshape,
#   (B, T, D) → (B, T, H, D/H) → (B, H, T, D/H); all heads then run as one batched
#   attention, and the merge (B, H, T, D/H) → (B, T, H, D/H) → (B, T, D) is the
#   concatenation.
# - $\mathbf{W}^O$ is what lets heads combine: the concatenation times $\mathbf{W}^O$ is
#   $\sum_i \mathrm{head}_i \mathbf{W}^O_i$, so every head writes into every output feature.
#   Without it each output feature would come from one head.
# - Trained on a task that needs three lookups (previous position, next position, matching
#   symbol), three heads took one job each and solved it, in 5 of 5 seeds. In this one-layer
#   model without a residual connection, a single head of the same width and parameter count
#   learned one neighbour lookup and failed the other two, in 5 of 5 seeds (other learning
#   rates and longer training, in checks not shown, changed the details but not this). In trained
#   Transformers heads specialise too, but most can be removed one at a time with little loss.
# - With $d_h = D/H$, the FLOPs ($8BTD^2 + 4BT^2D$ for self-attention) and parameters
#   ($4D^2 + 4D$) do not depend on $H$; only the $BHT^2$ softmax entries grow with it, and
#   with them the memory that training keeps for the backward pass.
# - `helpers.multihead.MultiHeadAttention` equals `nn.MultiheadAttention(batch_first=True)`
#   with its weights copied (`in_proj_weight` holds $\mathbf{W}^Q$, $\mathbf{W}^K$,
#   $\mathbf{W}^V$ as three row blocks) and its padding mask converted with
#   `to_key_padding_mask`, since PyTorch's True means *ignore*.
#
# Multi-head attention is the attention layer of the Transformer, and of the rest of this
# book. It knows nothing about order, which is why the toy model needed position embeddings;
# the next chapter is about [positional encoding](../book/glossary.md#term-positional-encoding). The Transformer chapters then wrap
# this module with a residual connection and layer normalisation, add the position-wise
# feed-forward network of chapter 1, and stack the result, using the causal mask of chapter 4
# in the decoder.
#
# ## Exercises
#
# **1. Parameters do not depend on $H$.** Count the parameters of
# `MultiHeadAttention(d_model=64, num_heads=h)` for $h = 1, 2, 4, 8, 16, 32, 64$ and explain
# the number with a formula. How many parameters does one head "own"?
#
# <details>
# <summary>Solution</summary>
#
# Four $D \times D$ weight matrices and four bias vectors: $4D^2 + 4D = 16{,}640$ for
# $D = 64$, whatever $H$ is. Splitting into heads only decides how the $D$ features of each
# projection are grouped. Head $i$ owns its $D \times d_h$ column block of each of
# $\mathbf{W}^Q$, $\mathbf{W}^K$, $\mathbf{W}^V$, its $d_h$ rows of $\mathbf{W}^O$ and $d_h$
# entries of each input bias, $4Dd_h + 3d_h = (4D^2 + 3D)/H$ in all; the $D$ entries of the
# output bias belong to no head. The cell below counts.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 1.
for h in (1, 2, 4, 8, 16, 32, 64):
    module = MultiHeadAttention(d_model=64, num_heads=h)
    total = sum(p.numel() for p in module.parameters())
    per_head = (4 * 64 * 64 + 3 * 64) // h
    print(f"H = {h:>2}: {total:,} parameters (4D^2 + 4D = {4 * 64**2 + 4 * 64:,}), "
          f"{per_head:,} owned by each head")

# %% [markdown]
# **2. Heads that keep the full width.** Suppose every head projected to $d_h = D$ features
# instead of $D/H$, so that $\mathbf{W}^O$ maps $HD$ features back to $D$. Using
# `attention_flops(..., head_dim=D)`, compare the cost with the usual split for $B = 4$,
# $T = 64$, $D = 512$ and $H = 8$. How many parameters would the layer have?
#
# <details>
# <summary>Solution</summary>
#
# Every stage grows by the factor $H$: each of the $H$ heads now does the work of a full
# single-head attention, so the total is $8 \times$ the split version's (4,563 instead of
# 570 million FLOPs here), and the parameters grow the same way: $\mathbf{W}^Q$,
# $\mathbf{W}^K$, $\mathbf{W}^V$ are $D \times HD$ and $\mathbf{W}^O$ is $HD \times D$,
# $4HD^2 + 3HD + D$ in all, about 8.4 million instead of 1.05 million. This is why the
# original Transformer sets $d_k = d_v = D/H$ ([Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section 3.2.2): with it
# the heads come for free, while full-width heads would multiply the cost of every layer. (In
# this case $\mathbf{W}^O$ also reduces the dimension, from $HD$ back to $D$.)
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 2.
B, T, D, H = 4, 64, 512, 8
split = attention_flops(B, T, T, D, H)
full = attention_flops(B, T, T, D, H, head_dim=D)
for stage in ("projections", "scores", "weighted sum", "output", "total"):
    print(f"{stage:>12}: {split[stage] / 1e6:8.1f} MFLOPs split, "
          f"{full[stage] / 1e6:8.1f} full width ({full[stage] / split[stage]:.0f}x)")
print(f"parameters: {4 * D**2 + 4 * D:,} split, {4 * H * D**2 + 3 * H * D + D:,} full width")

# %% [markdown]
# **3. The low-rank bottleneck.** Head $i$'s score matrix is
# $(\mathbf{X}\mathbf{W}_i^Q)(\mathbf{X}\mathbf{W}_i^K)^\top$ (up to the scale and biases),
# a $T \times T$ matrix. What is the largest rank it can have? Check with
# `torch.linalg.matrix_rank` for a random `MultiHeadAttention(16, 8)` without biases
# (`bias=False`) on $T = 10$ positions, and compare with $H = 1$. What does this say about
# using very many heads?
#
# <details>
# <summary>Solution</summary>
#
# It is the product of a $T \times d_h$ and a $d_h \times T$ matrix, so its rank is at most
# $d_h = D/H$. With $D = 16$ and $H = 8$ each head's scores have rank 2, however many
# positions there are; with one head of 16 features the rank can reach $\min(T, 16) = 10$.
# A rank-2 score matrix cannot express arbitrary attention patterns over 10 positions. This
# is the [low-rank bottleneck](../book/glossary.md#term-low-rank-bottleneck) named by [Bhojanapalli et al. [2020]](../book/references.bib#bhojanapalli2020): as $H$ grows at fixed
# $D$, each head becomes less expressive. Their remedy (abstract) is to choose the head size
# independently of $H$, as large as the sequence length, instead of $D/H$. More heads is not
# free after all: what they gain in number they lose in width. The bound is on the *scores*:
# the softmax acts entry by entry, so the weight matrix it returns is in general of full rank
# (the cell finds rank 10 for every head, computing in float64), but only weight patterns whose logits have rank at most $d_h$ can be reached.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 3.
set_seed(0)
x_rank = torch.randn(1, 10, 16, dtype=torch.float64)  # (B, T, D) with T = 10, in float64
for h in (1, 2, 4, 8):
    module = MultiHeadAttention(16, h, bias=False).double()
    q = module.split_heads(module.w_q(x_rank))  # (1, H, T, D/H)
    k = module.split_heads(module.w_k(x_rank))  # (1, H, T, D/H)
    scores = q @ k.transpose(-2, -1) / math.sqrt(16 // h)  # (1, H, T, T)
    ranks = torch.linalg.matrix_rank(scores)[0].tolist()  # (H,)
    weight_ranks = torch.linalg.matrix_rank(torch.softmax(scores, dim=-1))[0].tolist()  # (H,)
    print(f"H = {h}: head dimension {16 // h:>2}, rank of each head's 10 x 10 scores: {ranks}")
    print(f"{'':>24}rank of each head's 10 x 10 weights: {weight_ranks}")
    assert ranks == [min(10, 16 // h)] * h and weight_ranks == [10] * h, (ranks, weight_ranks)


# %% [markdown]
# **4. Heads have no order.** Take a `MultiHeadAttention(12, 3)` and build a second module
# whose heads are the first one's in the order 3, 1, 2. Which rows or columns of `w_q`,
# `w_k`, `w_v` and `w_o` must move? Check that the two modules give the same output, and
# that their per-head weights are the same up to the permutation.
#
# <details>
# <summary>Solution</summary>
#
# Head $i$ is rows $(i-1)d_h$ to $i\,d_h - 1$ of the `nn.Linear` weights (and biases) of
# `w_q`, `w_k` and `w_v`, and the same range of *columns* of `w_o.weight` (the inputs of
# $\mathbf{W}^O$); `w_o`'s bias belongs to no head and stays. Permuting those blocks
# together permutes the terms of $\sum_i \mathrm{head}_i \mathbf{W}^O_i$, a sum whose order
# does not matter, so the output is unchanged, and the weights come out with their head axis
# permuted. "Head 1" is only a position in a tensor; which head learns which job is decided
# by the random initialisation, as the twins experiment noted.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 4.
set_seed(0)
original = MultiHeadAttention(12, 3)
order = [2, 0, 1]  # new head j is old head order[j]
rows = torch.cat([torch.arange(4 * i, 4 * i + 4) for i in order])  # feature permutation, (D,)
permuted = copy.deepcopy(original)
with torch.no_grad():
    for name in ("w_q", "w_k", "w_v"):
        getattr(permuted, name).weight.copy_(getattr(original, name).weight[rows])
        getattr(permuted, name).bias.copy_(getattr(original, name).bias[rows])
    permuted.w_o.weight.copy_(original.w_o.weight[:, rows])
x_perm = torch.randn(2, 5, 12)
out_a, weights_a = original(x_perm, x_perm, x_perm)
out_b, weights_b = permuted(x_perm, x_perm, x_perm)
torch.testing.assert_close(out_a, out_b)
torch.testing.assert_close(weights_a[:, order], weights_b)
print("same output; the per-head weights are the same, in the order 3, 1, 2")

# %% [markdown]
# **5. Removing a head.** [Head pruning](../book/glossary.md#term-head-pruning) removes heads from a trained model. In the
# three-head twins model of this chapter, remove one head at a time by zeroing its slice of
# $\mathbf{W}^O$ (its columns of `mha.w_o.weight`) and measure the test accuracy of each
# target. Before running it, predict the result from the per-head table.
#
# <details>
# <summary>Solution</summary>
#
# By the sum form $\sum_i \mathrm{head}_i \mathbf{W}^O_i$, zeroing $\mathbf{W}^O_i$ deletes
# head $i$'s contribution and nothing else. Each head did one job, so removing it should
# ruin exactly that target and leave the other two almost untouched, and that is what the
# cell below measures: the accuracy of the removed head's target falls to about what a
# uniform guess scores (12.5% for one of eight symbols, 25% for one of four colours), while
# the other two targets stay at 100% (to the nearest percent). This is one run, on the
# seed-0 model (the other seeds also gave every job a head of its own; pruning them, in a check not shown here, gave the same pattern). In large trained models the picture is less
# tidy: [Michel et al. [2019]](../book/references.bib#michel2019) remove heads one at a time at test time and find that
# removing any single head rarely costs much (Section 3.1), which says nothing about removing
# many together; pruned jointly, in order of importance, 20% (translation) to 40% (BERT) of the
# heads can go before the score falls noticeably (Section 4, Figure 3). [Voita et al. [2019]](../book/references.bib#voita2019) prune 38 of the 48
# encoder heads of a translation model for a loss of 0.15 BLEU (abstract), the specialised
# heads being the last to go.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 5.
head_dim = 24 // 3
print(f"{'removed':>8} " + " ".join(f"{name:>11}" for name in accuracy_seed0))
for head in range(3):
    pruned = copy.deepcopy(models[3])
    with torch.no_grad():
        pruned.mha.w_o.weight[:, head * head_dim:(head + 1) * head_dim] = 0.0
    pruned_accuracy = twins_accuracy(pruned, test_data)
    print(f"{'head ' + str(head + 1):>8} "
          + " ".join(f"{100 * a:10.0f}%" for a in pruned_accuracy.values())
          + f"   (head {head + 1} looked at the {job[f'head {head + 1}']})")
    target = {"previous": "previous", "next": "next", "twin": "twin colour"}[job[f"head {head + 1}"]]
    chance = 0.25 if target == "twin colour" else 0.125
    assert abs(pruned_accuracy[target] - chance) < 0.02, f"{target}: {pruned_accuracy[target]:.3f}"
    assert all(a >= 0.995 for name, a in pruned_accuracy.items() if name != target), pruned_accuracy

