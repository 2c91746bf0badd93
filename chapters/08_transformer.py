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
# # 8. The Transformer's other parts
#
# Attention is the famous part of the [Transformer](../book/glossary.md#term-Transformer), but attention alone does not make
# a network that trains. Around its attention sublayers the Transformer has four more parts:
# positional encoding, layer normalisation, residual connections, and the position-wise
# feed-forward network (FFN). Chapter 7 did the first. This chapter does the other
# three, puts them together with attention into encoder and decoder blocks, assembles a small
# encoder–decoder Transformer, and trains it on a laptop CPU in well under a minute.
#
# **What you will learn**
#
# - what [residual connections](../book/glossary.md#term-residual-connection) do for a deep network, measured as
#   gradient norms layer by layer under two initialisations;
# - [layer normalisation](../book/glossary.md#term-layer-normalisation) against [batch normalisation](../book/glossary.md#term-batch-normalisation): which numbers each one
#   averages over, and why the Transformer normalises each token on its own;
# - that the position-wise feed-forward network is chapter 1's MLP applied at every position;
# - [Add & Norm](../book/glossary.md#term-Add-Norm), and the encoder block in its two orders, [post-LN](../book/glossary.md#term-post-LN) and
#   [pre-LN](../book/glossary.md#term-pre-LN), shown equal to PyTorch's `nn.TransformerEncoderLayer`;
# - the decoder block: masked self-attention, then cross-attention whose queries come from
#   the decoder and whose keys and values come from the encoder;
# - how a causal mask lets a decoder learn every position of a sequence in one pass;
# - a tiny Transformer that, in one training run, learns to reverse digit strings to over 99 % accuracy, with an
#   explorer of its attention maps, layer by layer and head by head;
# - whether, and how much, a [learning-rate warm-up](../book/glossary.md#term-learning-rate-warm-up) helps a post-LN and a
#   pre-LN Transformer, measured as the steps each needs to learn, over five seeds, in one small
#   model at one high learning rate.

# %%
import math

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.nn import functional as F

from helpers.checks import check_shape
from helpers.figures.plotting import heatmap
from helpers.figures.widgets import slider_figure, slider_heatmap_2d
from helpers.masks import causal_mask, to_key_padding_mask, valid_length_mask
from helpers.mlp import MLP
from helpers.multihead import MultiHeadAttention
from helpers.seeding import set_seed
from helpers.seq2seq import greedy_decode
from helpers.tasks.reversal import (BOS_ID, EOS_ID, FIRST_DIGIT, PAD_ID, reversal_batch,
                                    reversal_model, source_valid_lens, stability_run,
                                    token_accuracy, train_seq2seq)
from helpers.transformer import (AddNorm, DecoderBlock, EncoderBlock, LayerNorm,
                                 PositionWiseFFN, batch_norm_tokens)

torch.set_num_threads(1)  # tiny tensors: one thread is as fast, and steadier on a busy CPU
set_seed(0)


# %% [markdown]
# ## Residual connections
#
# A Transformer stacks many layers: 6 encoder and 6 decoder blocks in the original ([Vaswani et al. [2017]](../book/references.bib#vaswani2017),
# Section 3.1), each
# with two or three sublayers, and dozens of blocks (around a hundred in the largest) in large language models. Depth brings a
# risk that chapter 1 met as the [vanishing gradient](../book/glossary.md#term-vanishing-gradient). Write a network of
# $n_\text{layers}$ layers as $h_l = f_l(h_{l-1})$ for $l = 1, \dots, n_\text{layers}$. By the
# chain rule the gradient of the loss $\mathcal L$ with respect to an early activation is a
# product of Jacobians, one per layer,
#
# $$
# \frac{\partial \mathcal L}{\partial h_0}
# = \frac{\partial \mathcal L}{\partial h_{n_\text{layers}}}\, J_{n_\text{layers}} \cdots J_2 J_1,
# \qquad J_l = \frac{\partial f_l}{\partial h_{l-1}} .
# $$
#
# If every $J_l$ shrinks vectors by about the same factor, the product shrinks exponentially
# in $n_\text{layers}$ and the first layers barely learn; if every $J_l$ stretches them, it
# grows exponentially. Depth alone decides neither: for a layer $\tanh(W h)$ the Jacobian is
# $\mathrm{diag}(\tanh')\,W$, and whether it shrinks or stretches depends on the scale of $W$,
# that is, on how the weights were initialised (and, later, on how training has changed
# them). A [residual connection](../book/glossary.md#term-residual-connection) (also called a skip or shortcut connection) adds the
# layer's input back to its output,
#
# $$
# h_l = h_{l-1} + f_l(h_{l-1}), \qquad
# \frac{\partial h_l}{\partial h_{l-1}} = I + J_l .
# $$
#
# Now every factor contains the identity. Expanding the product of the $(I + J_l)$ gives a sum
# whose first term is $I$ itself: a path on which the gradient reaches $h_0$ untouched,
# whatever the $J_l$ are. The layer $f_l$ only has to learn a *correction* to its input.
#
# Measure it, changing one thing at a time. Stack 30 layers of `Linear` + $\tanh$ (width 64),
# once plainly and once with residual connections, under two initialisations of the weights:
# PyTorch's default for `nn.Linear` (uniform, standard deviation $1/\sqrt{3 \cdot 64}$, so
# every layer shrinks its input), and Xavier initialisation
# ([Glorot and Bengio [2010]](../book/references.bib#glorot2010), Eq. 16: variance $2/(\text{fan-in} + \text{fan-out})$)
# multiplied by PyTorch's recommended gain for $\tanh$, $5/3$, with zero biases, which keeps
# the signal's size roughly constant through the stack. Push the same batch through each of the
# four stacks and read the norm of each layer's weight gradient, for five seeds:

# %%
def gradient_norms(residual, init="default", depth=30, width=64, seed=0):
    # Weight-gradient norm of every layer of a stack of Linear + tanh layers.
    set_seed(seed)
    h = torch.randn(128, width)  # (N, D): a batch of 128 inputs, the same for every stack
    layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))  # PyTorch default
    if init == "xavier-tanh":
        for layer in layers:
            nn.init.xavier_normal_(layer.weight, gain=nn.init.calculate_gain("tanh"))  # 5/3
            nn.init.zeros_(layer.bias)
    for layer in layers:
        update = torch.tanh(layer(h))  # F_l(h)
        h = h + update if residual else update  # h_l
    h.pow(2).mean().backward()  # any scalar loss will do
    return torch.stack([layer.weight.grad.norm() for layer in layers])  # (depth,)


seeds = range(5)
stacks = {(init, residual): torch.stack([gradient_norms(residual, init, seed=s) for s in seeds])
          for init in ["default", "xavier-tanh"] for residual in [False, True]}  # (seeds, 30)
spread = {key: g.amax(1) / g.amin(1) for key, g in stacks.items()}  # (seeds,): largest / smallest
first_over_last = {key: g[:, 0] / g[:, -1] for key, g in stacks.items()}  # (seeds,)


def median_range(values, fmt):
    return f"{values.median():{fmt}} ({values.min():{fmt}} to {values.max():{fmt}})"


print(f"{'median (range) over 5 seeds':<28}  {'largest / smallest layer':<28}  first / last layer")
for (init, residual), values in spread.items():
    name = f"{init}, {'residual' if residual else 'plain'}"
    print(f"{name:<28}  {median_range(values, '.2g'):<28}  "
          f"{median_range(first_over_last[(init, residual)], '.2g')}")

deeper = {(init, residual, depth): torch.stack([gradient_norms(residual, init, depth, seed=s)
                                                for s in seeds])  # (seeds, depth)
          for depth in [60, 100] for init in ["default", "xavier-tanh"] for residual in [False, True]}
deep_spread = {key: g.amax(1) / g.amin(1) for key, g in deeper.items()}  # (seeds,)


def about(value):  # one significant figure: at 100 layers the values differ between CPUs
    return f"{float(f'{value:.1g}'):g}"


print(f"\n{'median largest / smallest, about':<32}{'30 layers':>10}{'60 layers':>11}{'100 layers':>11}")
for (init, residual), values in spread.items():
    name = f"{init}, {'residual' if residual else 'plain'}"
    print(f"{name:<32}{about(values.median()):>10}" + "".join(
        f"{about(deep_spread[(init, residual, depth)].median()):>11}" for depth in [60, 100]))
print("(inf: the first layer's gradient underflows to exactly 0 in float32)")

# %% tags=["remove-cell"]
default_plain, xavier_plain = spread[("default", False)], spread[("xavier-tanh", False)]
residual_spreads = torch.cat([spread[("default", True)], spread[("xavier-tanh", True)]])
assert default_plain.min() > 1e6, f"default plain spread {default_plain.min():.2e} not > 1e6"
assert xavier_plain.max() < 20, f"Xavier plain spread {xavier_plain.max():.1f} not < 20"
assert torch.all(first_over_last[("xavier-tanh", False)] > 1), "Xavier plain: first layer not larger"
assert residual_spreads.max() < 20, f"residual spread {residual_spreads.max():.1f} not < 20"
assert spread[("default", True)].max() < 2, f"{spread[('default', True)].max():.2f} not < 2"
assert torch.all(spread[("xavier-tanh", True)] > xavier_plain), "residual spread not the larger"
xavier_residual_100, xavier_plain_100 = (deep_spread[("xavier-tanh", r, 100)] for r in [True, False])
assert xavier_residual_100.min() > 100, f"Xavier residual spread at 100 layers {xavier_residual_100}"
assert xavier_plain_100.min() > xavier_residual_100.max(), f"{xavier_plain_100}, {xavier_residual_100}"
grow = deeper[("xavier-tanh", False, 100)][:, 0] / deeper[("xavier-tanh", False, 100)][:, -1]
assert grow.min() > 1000, f"Xavier plain, 100 layers, first / last layer {grow}"
assert deep_spread[("default", True, 100)].max() < 10, f"{deep_spread[('default', True, 100)]}"
assert torch.all(deeper[("default", False, 100)][:, 0] == 0), "default plain, 100 layers: no underflow"


# %% mystnb={"image": {"alt": "Two line plots, sharing a log-scale y-axis, of the weight-gradient norm of each of the 30 layers (layer 1 next to the input) for seed 0, for a plain tanh stack (circles) and a residual one (squares). Left, PyTorch's default initialisation: the plain curve climbs steadily from bottom left to top right, its first layer's gradient about seven orders of magnitude below its last layer's, while the residual curve is nearly flat near the top. Right, Xavier initialisation with the tanh gain: both curves fall gently from the first layer to the last, within about one order of magnitude, the residual one higher."}}
fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.6), sharey=True)
layer_index = torch.arange(1, 31)
for ax, init, title in [(axes[0], "default", "PyTorch default initialisation"),
                        (axes[1], "xavier-tanh", "Xavier initialisation, tanh gain")]:
    ax.semilogy(layer_index, stacks[(init, False)][0], "o-", ms=3, label="plain: h = tanh(W h)")
    ax.semilogy(layer_index, stacks[(init, True)][0], "s-", ms=3,
                label="residual: h = h + tanh(W h)")
    ax.set(xlabel="layer (1 = next to the input)", title=title)
    ax.legend(fontsize=9)
axes[0].set_ylabel("weight-gradient norm (log scale)")
fig.tight_layout()

# %% [markdown]
# *Gradient norm per layer for seed 0, on a logarithmic axis; left, PyTorch's default
# initialisation; right, Xavier initialisation with the $\tanh$ gain. Left: the plain stack's
# curve (circles) climbs steadily from bottom left to top right, so the layer next to the
# input receives a gradient about seven orders of magnitude smaller than the last layer, while
# the residual stack's curve (squares) is nearly flat. Right: both curves stay within about
# one order of magnitude and fall gently from the first layer to the last, the residual one
# higher.*
#
# With PyTorch's default initialisation and plain gradient descent, the plain stack's first layer
# would barely move at the learning rate that suits its last layer (an optimiser such as Adam,
# which scales each weight's step by the size of that weight's recent gradients, narrows the
# gap). Depth alone did not cause that: with the
# $\tanh$-matched initialisation the *same* 30-layer plain stack passes the gradient back
# within a factor of 10, and its first layer even gets the larger gradient. What the residual connections
# change is how much the answer depends on the initialisation. In this set-up (width 64, the
# mean square of the last layer's output as the loss), change only the initialisation, and the
# plain stack's spread of gradient norms across layers goes from under 10 to over $10^6$; the
# residual stack's stays below 20 under both. These bounds belong to this set-up: the spreads
# move with the width and with the loss (with another loss or a larger width the Xavier plain
# stack's spread can pass 10), while the gap of several orders of magnitude between the two
# initialisations of the plain stack is what stays. Residual connections do not make every
# layer's gradient the same size, though: with this loss, under Xavier initialisation the
# residual stack's spread (about 12) is larger than the plain stack's (not with every loss).
# The gradient grows on its way back to the input: each factor $I + J_l$ passes it on and,
# under this initialisation, also stretches it. (The growing stream works the other way: a
# later layer's weight gradient is scaled by its larger input.) Nor is the robustness independent of depth (the second table:
# the same stacks at 60 and 100 layers, medians over the same five seeds). Under Xavier
# initialisation with the $\tanh$ gain the plain stack's gradients now *grow* towards the
# input, to a spread of about 6000 at 100 layers, and the residual stack's spread grows too,
# to about 500: smaller than the plain stack's, far from flat. Under the default
# initialisation the residual stack's spread stays near 5, while the plain stack's first-layer
# gradient underflows to exactly zero. So in these $\tanh$ stacks residual connections made
# the gradients much less sensitive to the initialisation, not insensitive to depth; deep
# residual networks add normalisation (the next section) and some scale each residual branch
# down at initialisation, as GPT-2 does by $1/\sqrt{2 n_\text{layers}}$ for its $2 n_\text{layers}$ residual layers (the paper's *N*)
# ([Radford et al. [2019]](../book/references.bib#radford2019), Section 2.3). A good initialisation only sets the starting point. Training then
# moves the weights, and the identity term keeps a path open for the gradient whatever the
# weights become. This is also how residual connections were introduced:
# [He et al. [2016]](../book/references.bib#he2016) (Section 4.1, Figure 4 and Table 2; Figure 1 shows the
# same on CIFAR-10) found that deeper *plain* networks, batch-normalised and with gradients
# they checked did not vanish, still reached a higher *training* error than shallower ones,
# and that residual connections removed the gap.
#
# The price is one addition, and one constraint: $f_l(h)$ must have the same shape as $h$.
# That is why every sublayer of a Transformer maps $D$ features to $D$ features, and why $D$
# (`d_model`) is the one width that runs through the whole network. The sum
# $h_0 + f_1 + f_2 + \cdots$ that the layers keep adding to is called the
# [residual stream](../book/glossary.md#term-residual-stream).
#
# ## Layer normalisation
#
# Residual sums grow: each layer adds its output to the stream, and nothing stops the scale of
# the activations from drifting as training changes the weights. A normalisation layer resets
# the scale. (The division by $\sqrt{d_k}$ in scaled dot-product attention does a related
# job for the scores: it keeps them in a range where the softmax and its gradients behave.)
#
# The question is *which numbers to average over*. Picture the activations of a batch of
# sentences as a tensor of shape (B, T, D).
# [Layer normalisation](../book/glossary.md#term-layer-normalisation) ([Ba et al. [2016]](../book/references.bib#ba2016), Section 3, Eq. 3) normalises each token's
# $D$ features on their own:
#
# $$
# \mu_{bt} = \frac1D \sum_{j=1}^{D} x_{btj}, \qquad
# \sigma_{bt}^2 = \frac1D \sum_{j=1}^{D} (x_{btj} - \mu_{bt})^2, \qquad
# \mathrm{LN}(x_{bt}) = \boldsymbol\gamma \odot \frac{x_{bt} - \mu_{bt}}{\sqrt{\sigma_{bt}^2 + \epsilon}} + \mathbf b ,
# $$
#
# with a learned gain $\boldsymbol\gamma \in \mathbb{R}^D$ and shift $\mathbf b \in \mathbb{R}^D$ (initially 1
# and 0) that let the network undo the normalisation where it helps, and a small
# $\epsilon$ (here $10^{-5}$) against division by zero.
# [Batch normalisation](../book/glossary.md#term-batch-normalisation) ([Ioffe and Szegedy [2015]](../book/references.bib#ioffe2015), Section 3, Algorithm 1), the standard in
# convolutional networks, goes the other way: it normalises each *feature* $j$ over all the
# tokens in the batch,
#
# $$
# \mu_j = \frac{1}{BT} \sum_{b, t} x_{btj}, \qquad
# \sigma_j^2 = \frac{1}{BT} \sum_{b, t} (x_{btj} - \mu_j)^2 .
# $$
#
# A batch of three sentences of lengths 5, 3 and 2, padded to 5 with zero vectors, with six
# features on very different scales:

# %%
set_seed(0)
lengths = torch.tensor([5, 3, 2])
valid = valid_length_mask(lengths, 5)  # (B, T): True = real token
scale = torch.tensor([1.0, 2.0, 5.0, 0.5, 1.0, 3.0])
offset = torch.tensor([3.0, -1.0, 0.0, 10.0, 2.0, -4.0])
x = (torch.randn(3, 5, 6) * scale + offset) * valid[..., None]  # (B, T, D), padding = 0


def layer_norm_by_hand(x, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)  # (B, T, 1): one mean per token
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (B, T, 1), biased variance
    return (x - mean) / torch.sqrt(var + eps)  # (B, T, D)


def batch_norm_by_hand(x, eps=1e-5):
    mean = x.mean(dim=(0, 1))  # (D,): one mean per feature, over all B*T tokens
    var = ((x - mean) ** 2).mean(dim=(0, 1))  # (D,)
    return (x - mean) / torch.sqrt(var + eps)  # (B, T, D)


def rounded(value):  # 4 decimals; + 0.0 turns a rounded -0.0 into 0.0 on every CPU
    return round(float(value), 4) + 0.0


ln, bn = layer_norm_by_hand(x), batch_norm_by_hand(x)
print("sentence 0, each token:   LN mean    LN std   |  BN mean    BN std")
for t in range(5):
    print(f"  token {t}:             {rounded(ln[0, t].mean()):+8.4f}  "
          f"{ln[0, t].std(unbiased=False):8.4f}   |  {rounded(bn[0, t].mean()):+8.4f}  "
          f"{bn[0, t].std(unbiased=False):8.4f}")
print("BN per feature, mean over the batch:",
      " ".join(f"{rounded(m):+.4f}" for m in bn.mean((0, 1))))

# %% [markdown]
# Under layer normalisation every token has mean 0 and standard deviation 1 across its
# features. Under batch normalisation the tokens do not (their means reach 0.75 and their
# standard deviations range from 0.25 to 1.27), while each *feature* has mean 0 over the batch
# (the last line). The padding counts as data in these batch statistics, which is the first
# problem. Check both against the
# library versions: `helpers.transformer.LayerNorm`, with a random gain and shift, against
# `nn.LayerNorm`, and the batch version against `batch_norm_tokens` and PyTorch's functional
# batch norm on the flattened tokens:

# %%
set_seed(1)
ours, theirs = LayerNorm(6), nn.LayerNorm(6)
with torch.no_grad():
    ours.weight.copy_(torch.randn(6))
    ours.bias.copy_(torch.randn(6))
    theirs.load_state_dict({"weight": ours.weight, "bias": ours.bias})
torch.testing.assert_close(ours(x), theirs(x))
torch.testing.assert_close(LayerNorm(6)(x), ln)  # gain 1, shift 0: exactly the formula
torch.testing.assert_close(batch_norm_tokens(x), bn)
torch.testing.assert_close(F.batch_norm(x.reshape(-1, 6), None, None, training=True),
                           bn.reshape(-1, 6))
print("helpers LayerNorm = nn.LayerNorm; batch norm by hand = batch_norm_tokens = F.batch_norm")

# %% [markdown]
# Now the property that decides the matter. Normalise sentence 0 alone, in the padded batch,
# and in the batch with the padding excluded from the statistics (`batch_norm_tokens(x,
# valid)`). Layer normalisation gives sentence 0 the same output every time; batch
# normalisation gives three different answers:

# %%
alone = x[:1]  # (1, T, D): sentence 0 in a batch of its own
for name, norm in [("layer norm", layer_norm_by_hand), ("batch norm", batch_norm_by_hand)]:
    reference = norm(alone)[0]
    in_batch = (norm(x)[0] - reference).abs().max()
    print(f"{name}: sentence 0 changes by up to {in_batch:.4f} when batched with the others")
masked = (batch_norm_tokens(x, valid)[0] - batch_norm_by_hand(alone)[0]).abs().max()
print(f"batch norm, padding excluded: still changes by up to {masked:.4f}")
more_padding = F.pad(x, (0, 0, 0, 3))  # the same batch padded to T = 8
changed = (batch_norm_by_hand(more_padding)[0, :5] - bn[0]).abs().max()
print(f"batch norm: padding the batch to T = 8 changes sentence 0 by up to {changed:.4f}")
assert (layer_norm_by_hand(x)[0] - layer_norm_by_hand(alone)[0]).abs().max() < 1e-6, f"got {(layer_norm_by_hand(x)[0] - layer_norm_by_hand(alone)[0]).abs().max()=}"
assert masked > 0.1 and changed > 0.1, f"got {masked=}, {changed=}"

# %% [markdown]
# Under batch normalisation, what a token turns into depends on which other sentences share
# its batch and how much padding they carry. A decoder has a worse problem. In training it
# reads the whole target sequence in one teacher-forced pass (a later section shows how), and
# relies on a causal mask so that position $t$ never sees the tokens after $t$. Batch
# statistics over (B, T) are averages over *every* position, the later ones included, so they
# carry information from the future into every earlier position, around the mask. Change only
# the last token (position 4) of sentence 0 and see which outputs move:

# %%
later = x.clone()
later[0, 4] += 3.0  # a different last token in sentence 0; positions 0-3 unchanged
for name, norm in [("layer norm", layer_norm_by_hand), ("batch norm", batch_norm_by_hand)]:
    moved = (norm(later)[:, :4] - norm(x)[:, :4]).abs().max()
    print(f"{name}: outputs at positions 0-3 (all sentences) move by up to {moved:.4f}")
assert (layer_norm_by_hand(later)[:, :4] - ln[:, :4]).abs().max() == 0, f"got {(layer_norm_by_hand(later)[:, :4] - ln[:, :4]).abs().max()=}"
assert (batch_norm_by_hand(later)[:, :4] - bn[:, :4]).abs().max() > 0.05, f"got {(batch_norm_by_hand(later)[:, :4] - bn[:, :4]).abs().max()=}"

# %% [markdown]
# Under batch normalisation the earlier positions, in every sentence of the batch, depend on
# a token they must not see. At test time batch norm switches to running averages collected
# during training, so the model also behaves differently in training and in use. Layer
# normalisation has none of these problems: each token is normalised from its own features,
# identically in training and inference, for any batch size, length or padding, and it cannot
# carry anything from one position to another. These are good reasons to prefer it in a
# Transformer, but they are this chapter's argument, not the paper's: Vaswani et al. use layer
# normalisation without comparing it with anything, a year after Ba et al. had proposed it with
# recurrent networks in mind. The evidence against batch norm came later:
# [Shen et al. [2020]](../book/references.bib#shen2020) (Section 3) measured that in Transformers trained on language the batch
# statistics fluctuate strongly from one batch to the next during training, and that naive
# batch norm then trains worse than layer norm. The picture below marks the numbers each
# method averages over:

# %% mystnb={"image": {"alt": "A heatmap of the batch as 15 tokens (rows, labelled by sentence and position, the five padding rows marked pad and in the colour of 0) by 6 features (columns). A solid red box surrounds the single row of token s1 t1, the numbers layer norm averages over; a dashed orange box surrounds the whole column of feature 3, padding rows included, the numbers batch norm averages over. The columns differ visibly in level: feature 3 is bright in every real token."}}
tokens = x.reshape(15, 6)  # (B*T, D): every token of the batch, padding included
labels = [f"s{b} t{t}" + ("  pad" if not valid[b, t] else "") for b in range(3)
          for t in range(5)]
fig, ax = plt.subplots(figsize=(4.8, 5.0))
heatmap(tokens, ax=ax, xlabel="feature j", ylabel="token (sentence s, position t)",
        vmin=None, yticklabels=labels, title="Which numbers each norm averages over")
ax.add_patch(plt.Rectangle((-0.45, 5.55), 5.9, 0.9, fill=False, ec="red", lw=2.5,
                           label="layer norm: one token, all its features"))
ax.add_patch(plt.Rectangle((2.55, -0.45), 0.9, 14.9, fill=False, ec="orange", lw=2.5,
                           ls="--", label="batch norm: one feature, all tokens of the batch"))
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=9)
fig.tight_layout()

# %% [markdown]
# *A heatmap of the batch as 15 tokens (rows, labelled by sentence and position, with the
# five padding rows marked "pad" and shown in the colour of 0) by 6 features (columns). A
# solid red box surrounds one row: layer normalisation takes its mean and variance along that
# row, from one token alone. A dashed orange box surrounds one column: batch normalisation
# takes its statistics down that column, across every token of the batch, the padding rows
# included. A legend below the plot names the two boxes. The columns visibly differ in level
# (feature 3 is bright in every real token), which is what batch norm removes and layer norm
# keeps per token.*
#
# ## The position-wise feed-forward network
#
# Attention mixes information *between* positions, but each output is a weighted average of
# value vectors, and a weighted average is a fairly simple function of what it averages. So a
# Transformer layer alternates two kinds of sublayer: self-attention works across the whole
# sequence, and every block ends with a small fully connected network that
# processes each position on its own (after the one attention sublayer of an encoder block,
# after the two of a decoder block), the
# [position-wise feed-forward network](../book/glossary.md#term-position-wise-feed-forward-network-FFN)
#
# $$
# \mathrm{FFN}(x_t) = W_2\, \mathrm{ReLU}(W_1 x_t + b_1) + b_2,
# \qquad W_1 \in \mathbb{R}^{F \times D},\; W_2 \in \mathbb{R}^{D \times F},
# $$
#
# with the *same* weights at every position $t$, and a hidden width $F$ usually $4D$ (2048 for
# $D = 512$ in the original: [Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section 3.3, Eq. (2)). This is exactly the
# [multilayer perceptron](../book/glossary.md#term-multilayer-perceptron-MLP) of chapter 1, with one hidden
# layer: a [feedforward network](../book/glossary.md#term-feedforward-network) that sees one token vector at a time. Check it:
# apply chapter 1's `MLP` to every token in a loop, to the whole (B, T, D) tensor at once, and
# compare with `PositionWiseFFN` holding the same weights:

# %%
set_seed(0)
d_model, ffn_hidden = 8, 32
mlp = MLP(d_model, [ffn_hidden], d_model)  # chapter 1: Linear(8, 32), ReLU, Linear(32, 8)
x = torch.randn(2, 5, d_model)  # (B, T, D)
with torch.no_grad():
    token_by_token = torch.stack([torch.stack([mlp(x[b, t]) for t in range(5)])
                                  for b in range(2)])  # (B, T, D), one token at a time
    ffn = PositionWiseFFN(d_model, ffn_hidden)
    for ours, theirs in zip([ffn.linear1, ffn.linear2], mlp.linears):
        ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(mlp(x), token_by_token)
    torch.testing.assert_close(ffn(x), token_by_token)
check_shape(ffn(x), (2, 5, d_model))
print("MLP token by token = MLP on (B, T, D) = PositionWiseFFN with the same weights")

# %% [markdown]
# Since the FFN treats positions independently, changing one input token can change only that
# token's output. Self-attention is the opposite: every output looks at every input. Change
# token 2 of a sequence and see where the outputs move:

# %% mystnb={"image": {"alt": "Two heatmaps of the absolute change of each output entry, positions 0 to 4 down and 8 output features across, after only token 2's input is changed. Left, the position-wise FFN: only the row of position 2 is coloured, every other row is dark (zero). Right, self-attention: every row is coloured, rows 2 and 3 the most strongly, because every position attends to token 2."}}
set_seed(0)
attention = MultiHeadAttention(d_model, num_heads=2).eval()
x_changed = x.clone()
x_changed[0, 2] += torch.randn(d_model)  # change only token 2 of sequence 0
with torch.no_grad():
    ffn_change = (ffn(x_changed) - ffn(x))[0].abs()  # (T, D)
    attn_change = (attention(x_changed, x_changed, x_changed)[0]
                   - attention(x, x, x)[0])[0].abs()  # (T, D)
for name, change in [("position-wise FFN", ffn_change), ("self-attention", attn_change)]:
    print(f"{name:>17}: largest change at positions 0-4:",
          " ".join(f"{v:.4f}" for v in change.amax(dim=1)))
assert torch.equal(ffn_change.amax(dim=1) > 0, torch.tensor([False, False, True, False, False]))
fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.2))
for ax, change, title in [(axes[0], ffn_change, "position-wise FFN"),
                          (axes[1], attn_change, "self-attention")]:
    heatmap(change, ax=ax, xlabel="output feature", ylabel="position t",
            title=f"|change in output|: {title}")
fig.tight_layout()

# %% [markdown]
# *Two heatmaps of how much each output entry (position down, feature across) moves when
# only token 2's input changes. Left, the FFN: a single bright row at position 2 and zeros
# (dark) everywhere else. Right, self-attention: every row is coloured, because every
# position attends to token 2.*
#
# The two sublayers divide the work: attention moves information between positions, the FFN
# transforms it within each position. How many of the parameters sit in the FFN depends on
# its width $F$ and on the block. For the original sizes ($D = 512$, $F = 2048$, 8 heads: [Vaswani et al. [2017]](../book/references.bib#vaswani2017), Sections 3.2.2
# and 3.3):

# %%
ffn_params = sum(p.numel() for p in PositionWiseFFN(512, 2048).parameters())
attention_params = sum(p.numel() for p in MultiHeadAttention(512, 8).parameters())
print(f"position-wise FFN:    {ffn_params:>9,} parameters (2·D·F + F + D)")
print(f"multi-head attention: {attention_params:>9,} parameters (4·D² + 4·D)")
print(f"the FFN holds {ffn_params / (ffn_params + attention_params):.1%} of the two")
small_ffn = sum(p.numel() for p in PositionWiseFFN(64, 128).parameters())  # this chapter: F = 2D
small_attention = sum(p.numel() for p in MultiHeadAttention(64, 4).parameters())
print(f"this chapter's model (D = 64, F = 2D = 128): FFN {small_ffn:,}, "
      f"one attention sublayer {small_attention:,}")

# %% [markdown]
# At $F = 4D$ the FFN holds two thirds of an encoder block's parameters (the two layer
# norms add a little), but only about half of a decoder block's, which has a second attention
# sublayer (exercise 1 counts both). In this chapter's own model, with $F = 2D$, the FFN is
# about the size of one attention sublayer.

# %% [markdown]
# ## Add & Norm
#
# The original Transformer wraps every sublayer (attention or FFN) in the same three steps
# ([Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section 3.1 and Figure 1):
# run the sublayer, add its input back (the residual connection), and layer-normalise the sum.
# The paper draws this as a box labelled [Add & Norm](../book/glossary.md#term-Add-Norm):
#
# $$
# \mathrm{AddNorm}(x, o) = \mathrm{LN}\bigl(x + \mathrm{Dropout}(o)\bigr), \qquad o = \mathrm{Sublayer}(x) .
# $$
#
# The dropout on the sublayer's output, before it is added to the input, is the paper's
# "residual dropout" (Section 5.4); it is active only in training (the models here use none).
# `helpers.transformer.AddNorm` takes the input and the sublayer's output; in evaluation mode it
# is the layer norm of their sum:

# %%
set_seed(0)
add_norm = AddNorm(d_model, dropout=0.1).eval()  # eval: dropout is the identity
sublayer_out = ffn(x)  # (B, T, D): any sublayer's output
with torch.no_grad():
    torch.testing.assert_close(add_norm(x, sublayer_out),
                               F.layer_norm(x + sublayer_out, (d_model,)))
    out = add_norm(x, sublayer_out)
print(f"AddNorm(x, FFN(x)) = LN(x + FFN(x)); every token now has mean "
      f"{out.mean(-1).abs().max():.4f} and std {out.std(-1, unbiased=False).mean():.4f}")


# %% [markdown]
# ## The encoder block
#
# An encoder block is two sublayers, each wrapped in Add & Norm: self-attention, where every
# position looks at every (unmasked) position of the same sequence, then the FFN. Written out,
# in the original order, [post-LN](../book/glossary.md#term-post-LN) (normalise *after* adding):
#
# $$
# h = \mathrm{LN}_1\bigl(x + \mathrm{MHA}(x, x, x)\bigr), \qquad
# y = \mathrm{LN}_2\bigl(h + \mathrm{FFN}(h)\bigr).
# $$
#
# The other order, [pre-LN](../book/glossary.md#term-pre-LN), normalises the sublayer's *input* and leaves the residual sum alone,
#
# $$
# h = x + \mathrm{MHA}\bigl(\mathrm{LN}_1(x)\bigr), \qquad
# y = h + \mathrm{FFN}\bigl(\mathrm{LN}_2(h)\bigr),
# $$
#
# and puts one more layer norm after the last block of the stack. It is older than GPT-2: it
# was already in the authors' own tensor2tensor code in 2018, and
# [Wang et al. [2019]](../book/references.bib#wang2019) (Section 2) compare the two orders for deep translation models. GPT-2
# made it well known, moving the layer norm to the input of each sublayer and adding one
# after the last block ([Radford et al. [2019]](../book/references.bib#radford2019), Section 2.3), and most large models since
# normalise first. Many recent ones, LLaMA among them ([Touvron et al. [2023]](../book/references.bib#touvron2023), Section 2.2),
# also replace layer norm by RMSNorm, which divides by the root mean square of the features
# and subtracts no mean. The difference between the orders looks small;
# a later section shows that it changes how the model trains. Both orders by hand, from the
# parts of an `EncoderBlock`, against the block itself:

# %%
def encoder_block_by_hand(block, x, mask, norm_first):
    def attend(h):
        return block.self_attn(h, h, h, mask)[0]  # (B, T, D); queries = keys = values

    if norm_first:  # pre-LN: normalise the sublayer's input
        h = x + attend(block.norm1(x))
        return h + block.ffn(block.norm2(h))
    h = block.norm1(x + attend(x))  # post-LN: normalise the residual sum
    return block.norm2(h + block.ffn(h))


set_seed(0)
x = torch.randn(3, 6, 16)  # (B, T, D)
valid = valid_length_mask(torch.tensor([6, 4, 2]), 6)  # (B, T): True = real token
padding_mask = valid[:, None, None, :]  # (B, 1, 1, T): broadcasts over heads and queries
for norm_first in [False, True]:
    block = EncoderBlock(16, num_heads=4, ffn_hidden=64, norm_first=norm_first).eval()
    with torch.no_grad():
        out, weights = block(x, padding_mask)
        torch.testing.assert_close(out, encoder_block_by_hand(block, x, padding_mask,
                                                              norm_first))
    print(f"norm_first={norm_first!s:>5}: out {tuple(out.shape)}, weights "
          f"{tuple(weights.shape)}, weight on padding keys {weights[1, :, :, 4:].sum():.1f}")

# %% [markdown]
# PyTorch ships the same block as `nn.TransformerEncoderLayer`. `EncoderBlock.from_torch`
# copies a layer's weights into our block, so the two can be compared on the same input. Two
# details. PyTorch's padding mask reads True as *ignore this key*, the opposite of this book's
# convention, so it is converted with `to_key_padding_mask`. And in evaluation mode without
# gradients, the layer may dispatch to a fused C++ "fast path"; inside `nn.TransformerEncoder`
# that path packs padded batches into nested tensors and returns zeros at the padded
# positions. We switch it off with `torch.backends.mha.set_fastpath_enabled(False)` so that
# every position, padded ones included, is compared with PyTorch's reference computation.
# Both orders, with random weights, gains and biases:

# %%
fastpath_before = torch.backends.mha.get_fastpath_enabled()
torch.backends.mha.set_fastpath_enabled(False)
for norm_first in [False, True]:
    set_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 64, dropout=0.1, batch_first=True,
                                       norm_first=norm_first).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1 * torch.randn_like(p))  # LayerNorm gains and biases off 1 and 0 too
        block = EncoderBlock.from_torch(layer)
        expected = layer(x, src_key_padding_mask=to_key_padding_mask(valid))
        out, _ = block(x, valid[:, None, None, :])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    print(f"norm_first={norm_first!s:>5}: from_torch(layer) equals the torch layer to 1e-5, "
          "all positions")
torch.backends.mha.set_fastpath_enabled(fastpath_before)


# %% [markdown]
# What the two orders do to the residual stream shows up in a stack. Run a batch through 12
# freshly initialised blocks of each kind and follow the average norm of the token vectors:

# %% mystnb={"image": {"alt": "Line plot of the mean token norm after each of 12 encoder blocks. The post-LN line (circles) is flat at 8, the square root of D, because every block ends with a layer norm; the pre-LN line (squares) rises steadily from 8.22 after block 1 to 11.88 after block 12, because each block adds to a stream that is never normalised."}}
def stream_norms(norm_first, depth=12, seed=0):
    set_seed(seed)
    h, norms = torch.randn(8, 10, 64), []  # (B, T, D), entries of size 1
    for _ in range(depth):
        block = EncoderBlock(64, num_heads=4, ffn_hidden=256, norm_first=norm_first)
        with torch.no_grad():
            h, _ = block(h)
        norms.append(h.norm(dim=-1).mean())
    return torch.stack(norms)  # (depth,)


post_ln, pre_ln = stream_norms(False), stream_norms(True)
print("mean token norm after blocks 1, 6, 12:")
print("  post-LN:", " ".join(f"{post_ln[i]:.2f}" for i in [0, 5, 11]), f" (sqrt(D) = {8:.2f})")
print("  pre-LN: ", " ".join(f"{pre_ln[i]:.2f}" for i in [0, 5, 11]))
assert (post_ln - 8).abs().max() < 0.01 and torch.all(pre_ln.diff() > 0), f"got {(post_ln - 8).abs().max()=}"
fig, ax = plt.subplots(figsize=(4.8, 3.4))
ax.plot(range(1, 13), post_ln, "o-", label="post-LN: LN(x + sublayer(x))")
ax.plot(range(1, 13), pre_ln, "s-", label="pre-LN: x + sublayer(LN(x))")
ax.set(xlabel="encoder block", ylabel="mean token norm",
       title="The residual stream through 12 blocks")
ax.legend(fontsize=9)
fig.tight_layout()


# %% [markdown]
# *Mean token norm after each of 12 blocks. The post-LN curve (circles) is flat at
# $\sqrt{D} = 8$, because every block ends with a layer norm. The pre-LN curve (squares)
# rises steadily from about 8 to about 12, because each block adds its output to a stream that
# is never normalised.*
#
# In post-LN every block's output is renormalised, and the path from the input to the loss
# passes through a layer norm at every sublayer: the clean identity path of the section on
# residual connections is interrupted twice per block, $2 n_\text{layers}$ times in a stack
# of $n_\text{layers}$ blocks. In pre-LN the stream is a plain sum
# $x + F_1 + F_2 + \cdots$, so the identity path is intact from the first block to the last;
# the price is a stream whose scale grows with depth, which is why a pre-LN stack ends with a
# final layer norm.
#
# ## The decoder block
#
# Sequence tasks can be sorted by their outputs: one label per input vector (tagging), one
# label for the whole sequence (sentiment), or an output sequence whose length the model
# decides itself, as in machine translation or the toy task of this chapter. The Transformer
# handles the last kind with an [encoder–decoder architecture](../book/glossary.md#term-encoderdecoder-architecture). The [encoder](../book/glossary.md#term-encoder)
# reads the whole source sequence at once and turns it into vectors, the
# [memory](../book/glossary.md#term-memory-encoder-output) (B, S, D). The [decoder](../book/glossary.md#term-decoder) writes the output
# one token at a time; each of its blocks has three sublayers, each with Add & Norm:
#
# 1. **masked self-attention** over the target tokens written so far, under a
#    [causal mask](../book/glossary.md#term-causal-mask), so that position $t$ sees positions $\le t$ only;
# 2. **cross-attention** to the memory: the *queries* come from the decoder, the *keys and
#    values* from the encoder's output. This is how each output position looks up the source
#    tokens it needs, the seq2seq pattern of chapter 5;
# 3. the position-wise FFN.
#
# Drop the encoder and the cross-attention, and what remains (masked self-attention and an FFN
# in every block, trained to predict the next token) is a decoder-only model, the form of GPT
# ([Radford et al. [2018]](../book/references.bib#radford2018)) and of most large language models since.
#
# In post-LN form,
#
# $$
# h_1 = \mathrm{LN}_1\bigl(y + \mathrm{MHA}(y, y, y;\ \text{causal})\bigr), \quad
# h_2 = \mathrm{LN}_2\bigl(h_1 + \mathrm{MHA}(h_1, h_\text{enc}, h_\text{enc})\bigr), \quad
# o = \mathrm{LN}_3\bigl(h_2 + \mathrm{FFN}(h_2)\bigr),
# $$
#
# with $y$ the decoder's input (B, T, D) and $h_\text{enc}$ the memory (B, S, D). By hand, against
# `DecoderBlock`, with the shapes checked:

# %%
def decoder_block_by_hand(block, y, memory, self_mask):
    h1 = block.norm1(y + block.self_attn(y, y, y, self_mask)[0])  # 1) masked self-attention
    h2 = block.norm2(h1 + block.cross_attn(h1, memory, memory)[0])  # 2) Q: decoder; K, V: memory
    return block.norm3(h2 + block.ffn(h2))  # 3) position-wise FFN


set_seed(0)
decoder_block = DecoderBlock(16, num_heads=4, ffn_hidden=64).eval()
memory = torch.randn(2, 7, 16)  # (B, S, D): the encoder's output for 7 source tokens
y = torch.randn(2, 5, 16)  # (B, T, D): 5 target positions
self_mask = causal_mask(5)  # (T, T): True on and below the diagonal
with torch.no_grad():
    out, self_weights, cross_weights = decoder_block(y, memory, self_mask)
    torch.testing.assert_close(out, decoder_block_by_hand(decoder_block, y, memory, self_mask))
for name, tensor, shape in [("out", out, (2, 5, 16)), ("self_weights", self_weights, (2, 4, 5, 5)),
                            ("cross_weights", cross_weights, (2, 4, 5, 7))]:
    check_shape(tensor, shape)
    print(f"{name:>13}: {tuple(tensor.shape)}")
print(f"self-attention weight above the diagonal (the future): {self_weights.triu(1).sum():.1f}")

# %% [markdown]
# The self-attention weights are (B, H, T, T), a square over target positions; the
# cross-attention weights are (B, H, T, S): one row per target position (the queries), one
# column per source position (the keys). `DecoderBlock.from_torch` does for
# `nn.TransformerDecoderLayer` what `from_torch` did for the encoder; again the masks are
# negated at the boundary, since PyTorch reads True as *blocked*:

# %%
set_seed(1)
torch_decoder = nn.TransformerDecoderLayer(16, 4, 64, batch_first=True).eval()
with torch.no_grad():
    expected = torch_decoder(y, memory, tgt_mask=~self_mask)  # PyTorch: True = blocked
    ours, _, _ = DecoderBlock.from_torch(torch_decoder)(y, memory, self_mask)
torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)
print("DecoderBlock.from_torch(layer) equals nn.TransformerDecoderLayer to 1e-5")

# %% [markdown]
# The causal mask is what makes the decoder usable for generation: position $t$'s output must
# not depend on the tokens after $t$, which at generation time do not exist yet. Test it
# directly: change the decoder's input at position 3 and see which outputs move.

# %% mystnb={"image": {"alt": "Three panels for an untrained decoder block. Left: a 5 by 5 heatmap of the masked self-attention weights of head 0, lower-triangular and dark above the diagonal; row 0 puts all its weight on key 0 and the later rows spread theirs over the keys they may see. Middle: a 5 by 7 heatmap of the cross-attention weights of head 0, every cell coloured, source position 5 the brightest in most rows. Right: a bar chart of the largest output change per target position after the input at position 3 changes: no bars at positions 0 to 2, a tall red bar at position 3 and a much shorter red bar at position 4."}}
y_changed = y.clone()
y_changed[:, 3] = torch.randn(2, 16)  # a different token at position 3
with torch.no_grad():
    out_changed, _, _ = decoder_block(y_changed, memory, self_mask)
change = (out_changed - out).abs().amax(dim=(0, 2))  # (T,): largest change per position
print("largest output change at positions 0-4:", " ".join(f"{v:.4f}" for v in change))
assert change[:3].max() < 1e-6 and change[3:].min() > 0.1, f"got {change[:3].max()=}, {change[3:].min()=}"
fig, axes = plt.subplots(1, 3, figsize=(10, 3.6))
heatmap(self_weights[0, 0], ax=axes[0], xlabel="key: target position",
        ylabel="query: target position", title="masked self-attention (head 0)")
heatmap(cross_weights[0, 0], ax=axes[1], xlabel="key: source position (memory)",
        ylabel="query: target position", title="cross-attention (head 0)")
axes[2].bar(range(5), change, color=["C0"] * 3 + ["C3"] * 2)
axes[2].set(xlabel="target position", ylabel="largest |change| in output",
            title="after changing the input\nat position 3")
fig.tight_layout()


# %% [markdown]
# *Three panels for an untrained decoder block. Left: masked self-attention weights of head 0,
# a 5 × 5 lower-triangular pattern (everything above the diagonal is dark, weight 0; row 0
# puts all its weight on key 0). Middle: cross-attention weights of head 0, a full 5 × 7
# rectangle with every source position available to every target position. Right: bars of the
# output change per position after changing the input at position 3; positions 0–2 have no
# bar at all (change 0), position 3 has a tall red bar and position 4 a short one (it sees
# position 3 through attention).*
#
# ### One pass trains every position
#
# The causal mask matters for training, not just for generation.
# A language model learns by predicting each token from the ones before it. Done step by step,
# as at generation time, a target of $T$ tokens needs $T$ passes: feed `<bos>`, predict the
# first token; feed `<bos>` and the first token, predict the second; and so on. With the mask,
# the decoder can be fed the whole target at once, shifted right by one (`<bos>` first), and
# row $t$ of the output is exactly what the $t$-th step-by-step pass would have produced, since
# row $t$ cannot see anything after position $t$. (An RNN decoder cannot do this: its state
# at step $t$ is computed from its state at step $t - 1$, so even its training runs step by
# step.) Feeding the true previous tokens this way is [teacher forcing](../book/glossary.md#term-teacher-forcing) (chapter 4).
# The task of this chapter is to reverse a string of digits. For the source 3 1 4 1 5 9 2 6
# the decoder reads the input row and must predict the output row:

# %%
def text(tokens):
    names = {PAD_ID: "·", BOS_ID: "<bos>", EOS_ID: "<eos>"}
    return " ".join(names.get(t, str(t - FIRST_DIGIT)) for t in tokens.tolist())


src = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]]) + FIRST_DIGIT  # (1, S): digit d is token d + 3
tgt_in = torch.cat([torch.tensor([[BOS_ID]]), src.flip(1)], dim=1)  # (1, T): <bos>, reversed
tgt_out = torch.cat([src.flip(1), torch.tensor([[EOS_ID]])], dim=1)  # (1, T): reversed, <eos>
print(f"source:              {text(src[0])}")
print(f"decoder input:       {text(tgt_in[0])}")
print(f"decoder must output: {text(tgt_out[0])}\n")
print("row t of one masked pass = step t of step-by-step decoding:")
for t in range(tgt_in.shape[1]):
    seen = text(tgt_in[0, :t + 1]).split() + ["■"] * (tgt_in.shape[1] - t - 1)
    print(f"  row {t}: sees {' '.join(f'{s:>5}' for s in seen)}  ->  predicts "
          f"{text(tgt_out[0, t:t + 1])}")

# %% [markdown]
# The ■ marks what the mask hides from each row. Check the claim with a full (untrained)
# model: the logits at row $t$ of one pass over the whole target equal the logits of the last
# row of a pass over the first $t + 1$ tokens alone.

# %%
model = reversal_model(seed=0)  # untrained; the model itself is the next section
model.eval()
with torch.no_grad():
    one_pass, _ = model(src, tgt_in)  # (1, T, V): every row at once
    for t in range(tgt_in.shape[1]):
        prefix_pass, _ = model(src, tgt_in[:, :t + 1])  # (1, t + 1, V)
        torch.testing.assert_close(prefix_pass[:, -1], one_pass[:, t])
print(f"{tgt_in.shape[1]} prefix passes agree with one masked pass, row by row")


# %% [markdown]
# So training costs one pass per sequence, whatever its length, and every position contributes
# to the loss. Generation cannot use this trick, because the tokens to feed do not exist yet:
# it runs the decoder once per new token.
#
# ## The whole model
#
# The encoder–decoder Transformer puts the parts together. Token ids are embedded, multiplied
# by $\sqrt D$, and the sinusoidal positional encoding is added. The encoder
# blocks turn the source into the memory; the decoder blocks read the target prefix and the
# memory; a final linear layer gives a score for each vocabulary token at each target
# position. The paper multiplies the embeddings by $\sqrt D$ without giving a reason
# ([Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section 3.4). The same section shares one weight matrix
# between the two embedding layers and the pre-softmax linear layer (*weight tying*); a common
# reading is that the scaling goes with this sharing, since a matrix that also serves as the
# output layer has small entries, but the paper does not say so. The model here does not tie
# them: its two embeddings and its output layer are separate parameters (the summary below
# lists all three), and it uses neither of the paper's regularisers, dropout and label
# smoothing (Section 5.4). Here the embeddings are initialised with entries of
# size $1/\sqrt D$ (standard deviation $D^{-1/2}$, in `helpers.seq2seq`), so after the scaling
# their entries have a standard deviation of about 1, the same order as the encoding's entries,
# which lie between $-1$ and $1$. The data flow:
#
# ```text
# src    (B, S) ─ embed·√D + PE ─► [ encoder block ] × n_layers ───────► memory (B, S, D)
#                                                                               │ keys, values
# tgt_in (B, T) ─ embed·√D + PE ─► [ decoder block: masked self-attention,      ▼
#                                    cross-attention to memory, FFN ] × n_layers ─► Linear ─► logits (B, T, V)
# ```
#
# `helpers.seq2seq.Seq2SeqTransformer` implements this; `reversal_model` builds the small
# configuration of this chapter: $D = 64$, 4 heads, FFN width 128, 2 encoder and 2 decoder
# blocks, post-LN, a vocabulary of 13 tokens (`<pad>`, `<bos>`, `<eos>` and the digits
# 0–9). Its parts and their parameter counts:

# %%
def count(module):
    return sum(p.numel() for p in module.parameters())


def summary(model):
    print(f"{'module':<46}{'parameters':>11}")
    for name, child in model.named_children():
        if isinstance(child, nn.ModuleList):
            print(f"{f'{name}: {len(child)} x {type(child[0]).__name__}':<46}{count(child):>11,}")
            for part_name, part in child[0].named_children():
                print(f"{f'    each: {part_name} ({type(part).__name__})':<46}"
                      f"{count(part):>11,}")
        else:
            print(f"{f'{name} ({type(child).__name__})':<46}{count(child):>11,}")
    print(f"{'total':<46}{count(model):>11,}")


summary(model)

# %% tags=["remove-cell"]
fresh = reversal_model()  # untrained: the initial embeddings
scaled = fresh.src_embedding.weight.detach() * math.sqrt(64)  # (V, D): embedding·√D
assert 0.9 < scaled.std() < 1.1 and abs(fresh.src_embedding.weight.std() * 8 - scaled.std()) < 1e-6, f"got {scaled.std()=}, {abs(fresh.src_embedding.weight.std() * 8 - scaled.std())=}"
assert fresh.positional.encoding.abs().max() <= 1, f"got {fresh.positional.encoding.abs().max()=}"  # the encoding's entries lie in [-1, 1]
assert round(100 * count(model.decoder_layers) / count(model)) == 59, "decoder share not 59 %"

# %% [markdown]
# About 170 thousand parameters, 59 % of them (100,480) in the two decoder blocks, whose
# cross-attention gives each one an extra attention sublayer. The positional encoding has no
# parameters (it is a fixed table of `max_len` = 16 rows), and the embedding tables are tiny
# because the vocabulary is. The shapes along the way, checked:

# %%
src, tgt_in, tgt_out = reversal_batch(4, 8, torch.Generator().manual_seed(0))
with torch.no_grad():
    encoded, _, _ = model.encode(src)  # (B, S, D): the memory
    logits, attention = model(src, tgt_in)  # (B, T, V), dict of lists of weights
for name, tensor, shape in [("src", src, (4, 8)), ("tgt_in", tgt_in, (4, 9)),
                            ("memory", encoded, (4, 8, 64)), ("logits", logits, (4, 9, 13))]:
    check_shape(tensor, shape)
    print(f"{name:>23}: {tuple(tensor.shape)}")
for kind in ["encoder_self", "decoder_self", "cross"]:
    print(f"{kind + ' weights':>23}: {len(attention[kind])} layers x "
          f"{tuple(attention[kind][0].shape)}")

# %% [markdown]
# ## A tiny Transformer trained on a CPU
#
# The task is to reverse a string of 8 digits. It is easy to state, and a model can only
# solve it by *looking up* the right source position for each output position: output $i$ is
# source token $S - 1 - i$, for $S = 8$ digits. That makes it a clean test of cross-attention. Batches
# are generated from a seed, fresh at every step:

# %%
src, tgt_in, tgt_out = reversal_batch(3, 8, torch.Generator().manual_seed(1))
for b in range(3):
    print(f"source {text(src[b])}  decoder input {text(tgt_in[b])}  "
          f"target {text(tgt_out[b])}")

# %% [markdown]
# `train_seq2seq` trains with Adam on the cross-entropy of every target position (padding
# ignored), 64 fresh sequences a step. The learning rate, $2 \times 10^{-3}$, is reached
# through a linear warm-up over the first 30 steps, as in the original recipe (the last
# section measures what warm-up does at one high learning rate, in a smaller model; whether this model needs it at this moderate rate is
# not tested here). 150 steps
# take well under a minute on one CPU core. The cell after the training prints the loss at a few steps, and the token accuracy (the fraction of target tokens,
# digits and `<eos>`, that come out right) on 1000 held-out sequences, drawn from a seed the
# training never used, under [greedy decoding](../book/glossary.md#term-greedy-decoding): the model writes its own output, one
# token at a time, each time taking the most likely token and feeding it back in.

# %% tags=["nbval-ignore-output"]
model = reversal_model(seed=0)
history = train_seq2seq(model, steps=150, batch_size=64, lr=2e-3, warmup_steps=30, seed=0)

# %%
for step in [1, 10, 25, 40, 50]:  # later losses differ in the 3rd digit between CPUs
    print(f"step {step:3d}: loss {history['loss'][step - 1]:.2f}")
loss = torch.tensor(history["loss"])
print(f"steps 101-150: mean loss below 0.01: {bool(loss[-50:].mean() < 0.01)}")
print(f"log 13 = {math.log(13):.2f} (uniform guess over the 13 tokens), "
      f"log 10 = {math.log(10):.2f} (uniform guess over the 10 digits)")
print(f"8 log(10) / 9 = {8 * math.log(10) / 9:.2f} (the best average a model that ignores the source can do)")
accuracy = token_accuracy(model, num_sequences=1000, seed=10_000)
print(f"held-out token accuracy (greedy decoding, 1000 sequences) at least 0.99: {accuracy >= 0.99}")
assert accuracy >= 0.99, f"accuracy {accuracy:.4f} below 0.99"
assert history["loss"][0] > math.log(13) > math.log(10), f"first loss {history['loss'][0]:.4f}"
assert 1.5 < loss[24] < 8 * math.log(10) / 9 - 0.05, f"loss at step 25 {loss[24]:.4f}"
assert 50 < loss[39] / loss[89] < 200, f"loss ratio steps 40/90 {loss[39] / loss[89]:.1f}"
assert 0.01 < loss[89] < 0.02 and loss[-50:].mean() < 0.01, f"{loss[89]:.4f}, {loss[-50:].mean():.4f}"

# %% mystnb={"image": {"alt": "Line plot of the cross-entropy training loss on a log axis against training step, from 1 to 150. It starts at 2.67, a little above a dotted line at log 13 (a uniform guess over the 13 tokens), declines slowly to 1.9 at step 25, then falls steeply, by about two orders of magnitude between steps 40 and 90, and levels off with some noise, averaging under 0.01 over the last 50 steps."}}
fig, ax = plt.subplots(figsize=(4.8, 3.4))
ax.semilogy(range(1, len(history["loss"]) + 1), history["loss"])
ax.axhline(math.log(13), color="0.5", ls=":", label="log 13: uniform over the 13 tokens")
ax.set(xlabel="training step", ylabel="cross-entropy loss (log scale)",
       title="Training the reversal Transformer")
ax.legend(fontsize=9)
fig.tight_layout()

# %% [markdown]
# *The training loss on a log scale. It starts at 2.67, a little above the dotted line at
# $\log 13 \approx 2.56$ (the loss of a uniform guess over the 13 tokens: an untrained model
# is slightly worse than uniform), and is still 1.9 at step 25. Then it falls steeply, by
# about two orders of magnitude between steps 40 and 90 (from 1.31 to between 0.01 and 0.02),
# and levels off with some noise, averaging under 0.01 over the last 50 steps.*
#
# All of this is one run (seed 0), stopped at step 150. The chapter does not measure how
# other seeds end, nor how this run would end at another step, so read the 99 % as one run's
# result, not as something the recipe guarantees: with another seed the same 150 steps can
# end well short of 99 %.
#
# The loss is already below 2.05 by step 25. The digits of a target are drawn independently,
# so a model that ignores the source can do no better on average than $\log 10$ on each of the 8
# digits and 0 on `<eos>`, that is $8 \log(10) / 9 \approx 2.05$. By step 25 the model must
# therefore be reading the source, although only a little; which part of the model learns what,
# and when, this chapter does not measure. Greedy decoding on a few held-out sources,
# including one with repeated digits:

# %%
src, _, tgt_out = reversal_batch(4, 8, torch.Generator().manual_seed(2024))
src = torch.cat([src, torch.tensor([[7, 7, 7, 1, 1, 7, 7, 7]]) + FIRST_DIGIT])  # (5, S)
tgt_out = torch.cat([tgt_out, torch.cat([src[-1:].flip(1), torch.tensor([[EOS_ID]])], 1)])
prediction = greedy_decode(model, src, max_new_tokens=9, bos=BOS_ID, eos=EOS_ID)  # (B, N)
for b in range(5):
    print(f"source {text(src[b])}   target {text(tgt_out[b])}   "
          f"greedy {text(prediction[b])}")
assert torch.equal(prediction, tgt_out)

# %% [markdown]
# ### An explorer of the attention maps
#
# What has the model learned to look at? The model returns the attention weights of every
# layer: encoder self-attention (B, H, S, S), decoder self-attention (B, H, T, T) and
# cross-attention (B, H, T, S), one tensor per layer. Run it on held-out sources with the
# correct decoder input (teacher forcing, which is what greedy decoding sees when every
# prediction so far is right), and move the sliders over layers and heads. Rows are queries,
# columns keys; every row sums to 1.

# %%
examples, examples_in, examples_out = reversal_batch(6, 8, torch.Generator().manual_seed(99))
model.eval()
with torch.no_grad():
    _, attention = model(examples, examples_in)  # weights of every layer, for 6 examples
source_labels = text(examples[0]).split()
decoder_labels = text(examples_in[0]).split()
output_labels = text(examples_out[0]).split()
print("example 0: source", " ".join(source_labels), "  target", " ".join(output_labels))


def explorer(kind, **labels):
    return slider_heatmap_2d(lambda layer, head: attention[kind][layer - 1][0, head],
                             [1, 2], [0, 1, 2, 3], descriptions=("layer", "head"),
                             vmax=1.0, figsize=(4.6, 3.6), **labels)


# %%
explorer("encoder_self", xticklabels=source_labels, yticklabels=source_labels,
         xlabel="key: source token", ylabel="query: source token",
         title="encoder self-attention")

# %% [markdown]
# *Encoder self-attention of example 0, for each layer and head: an 8 × 8 map over the source
# digits. In layer 1, three of the four heads show vertical
# stripes: whatever the query, the weight leans towards the same one or two source positions.
# The other layer-1 head and all four layer-2 heads spread their weight more evenly, with
# largest column means between 0.15 and 0.25 against 0.125 for a uniform head (checked below). There is no clean
# structure to find here, and none is needed: the lookup this task requires happens
# in cross-attention, and each source vector keeps its own digit and position through the
# residual connections.*

# %%
explorer("decoder_self", xticklabels=decoder_labels, yticklabels=decoder_labels,
         xlabel="key: decoder input", ylabel="query: decoder input",
         title="decoder self-attention (masked)")

# %% [markdown]
# *Decoder self-attention of example 0: a 9 × 9 map over the decoder's input (`<bos>` then the
# reversed digits), lower-triangular in every frame because of the causal mask. In layer 1,
# head 0 keeps much of its weight on `<bos>`, most of all in the early rows, while the other
# three heads spread theirs over the prefix; in layer 2
# several heads look mainly at the current token. These describe one example of one trained
# model (seed 0); the cell after the sliders prints the same shares averaged over 500
# held-out sequences.*

# %%
explorer("cross", xticklabels=source_labels, yticklabels=output_labels,
         xlabel="key: source token", ylabel="query: labelled by the token it predicts",
         title="cross-attention")


# %% [markdown]
# *Cross-attention of example 0: 9 rows (the decoder positions, labelled by the token each one
# predicts, the last one `<eos>`) by 8 columns (the source digits). In layer 2 the bright cells
# run along the anti-diagonal, from the top-right corner to the bottom-left: the row that
# predicts a digit looks at the source position holding that digit, the last source position
# first. Layer 1 shows the same diagonal more faintly and spread over neighbours. (One
# trained model; the numbers below check this on 500 held-out sequences.)*
#
# The cross-attention over several examples, averaged over the four heads of the last decoder
# layer:

# %%
def render_cross(example):
    fig, ax = plt.subplots(figsize=(4.6, 3.6))
    heatmap(attention["cross"][-1][example].mean(0), ax=ax, vmax=1.0,
            xticklabels=text(examples[example]).split(),
            yticklabels=text(examples_out[example]).split(), xlabel="key: source token",
            ylabel="query: token it predicts", title=f"cross-attention, layer 2, mean of heads")
    fig.tight_layout()
    return fig


slider_figure(render_cross, list(range(6)), description="example")

# %% [markdown]
# *For each of six held-out examples, a 9 × 8 map of the head-averaged cross-attention of the
# last decoder layer. In every frame the brightest cell of each digit row lies on the
# anti-diagonal, and the tick labels show that row and column carry the same digit.*
#
# The numbers behind the sliders, rounded to one decimal because the trained weights differ
# slightly between CPUs. First, for example 0: the weight each cross-attention head puts on
# the mirror position $S - 1 - i$ (averaged over the 8 digit rows $i$); for each encoder head,
# whether its largest column average exceeds 0.25 (a uniform head gives $1/8 = 0.125$;
# stripes give more); for each example of the last slider, how many digit rows have their
# brightest cell on the mirror position; the largest weight any decoder self-attention head
# puts on the future (which must be zero); and, averaged over 500 held-out sequences, the
# decoder self-attention share each head puts on `<bos>` (layer 1) and on the current token
# (layer 2):

# %%
S = 8  # digits per source
mirror = torch.arange(S - 1, -1, -1)  # output i looks at source position S - 1 - i
for layer in range(2):
    cross = attention["cross"][layer][0, :, torch.arange(S), mirror]  # (H, S)
    print(f"layer {layer + 1}: cross, mean weight on the mirror, heads 0-3:",
          " ".join(f"{w:.1f}" for w in cross.mean(dim=1)))
for layer in range(2):
    column_share = attention["encoder_self"][layer][0].mean(dim=1)  # (H, S): mean over queries
    print(f"layer {layer + 1}: encoder, largest column mean above 0.25, heads 0-3:",
          " ".join(str(bool(w > 0.25)) for w in column_share.amax(dim=1)))
last_layer_mean = attention["cross"][-1][:, :, :S].mean(dim=1)  # (6, S, S): the slider's maps
on_mirror = (last_layer_mean.argmax(-1) == mirror).sum(dim=1)  # (6,)
print("example slider, digit rows (of 8) brightest on the mirror:", on_mirror.tolist())
future = max(w.triu(1).max() for w in attention["decoder_self"])
print(f"largest decoder self-attention weight on a future position: {future:.4f}")
held_out, held_out_in, _ = reversal_batch(500, S, torch.Generator().manual_seed(12_345))
with torch.no_grad():
    _, held_out_attention = model(held_out, held_out_in)
self_1, self_2 = held_out_attention["decoder_self"]  # (B, H, T, T) each
bos_share = self_1[..., 0].mean(dim=(0, 2))  # (H,): layer 1, weight on <bos>
current_share = self_2.diagonal(dim1=-2, dim2=-1).mean(dim=(0, 2))  # (H,): layer 2, on itself
print("500 sequences, layer 1 decoder self-attention on <bos>, heads 0-3:",
      " ".join(f"{w:.1f}" for w in bos_share))
print("500 sequences, layer 2 decoder self-attention on the current token, heads 0-3:",
      " ".join(f"{w:.1f}" for w in current_share))
even = [attention["encoder_self"][layer][0].mean(dim=1).amax(dim=1) for layer in range(2)]  # (H,) each
spread_out = torch.cat([even[0][even[0] <= 0.25], even[1]])  # heads without stripes
assert len(spread_out) == 5 and 0.15 < spread_out.min() and spread_out.max() < 0.25, f"{even}"
assert future == 0 and on_mirror.min() == S, f"future {future}, on mirror {on_mirror.tolist()}"
assert bos_share[0] > 0.5 > bos_share[1:].max(), f"<bos> shares {bos_share}"
assert (current_share > 0.5).sum() >= 2, f"current-token shares {current_share}"

# %% [markdown]
# Then the claim itself, measured on 500 held-out sequences: for each output digit $i$, does
# the largest cross-attention weight fall on source position $S - 1 - i$? The statement
# checked is for the **last decoder layer with the weights averaged over its four heads**;
# each head alone and the first layer are printed for comparison.

# %%
for layer, weights in enumerate(held_out_attention["cross"]):
    rows = weights[:, :, :S]  # (B, H, S, S): the rows that predict the S digits
    per_head = (rows.argmax(-1) == mirror).float().mean(dim=(0, 2))  # (H,)
    head_mean = (rows.mean(1).argmax(-1) == mirror).float().mean()
    print(f"layer {layer + 1}: argmax on the mirror for over 75 % of digits, heads 0-3: "
          + " ".join(str(bool(p > 0.75)) for p in per_head)
          + f"; mean of heads, at least 90 %: {bool(head_mean >= 0.9)}")
    if layer == 0:
        first_layer_mean = head_mean
assert head_mean >= 0.90, f"last layer, mean of heads: {head_mean:.3f}"
assert 0.6 < first_layer_mean < 0.85, f"first layer, mean of heads: {first_layer_mean:.3f}"
assert per_head.min() > 0.77, f"last layer, per head: {per_head}"

# %% [markdown]
# In this model (seed 0), in the last layer, the head-averaged cross-attention peaks on the
# mirror position for at least 90 % of the output digits; single heads are less reliable,
# though each is right for over 75 % of the digits, and the first layer's pattern is blurrier.
# These per-head and per-layer details belong to this one trained model; another seed can
# share the work out differently between heads and layers. Nobody told the model that reversal
# means "output $i$ reads input $S - 1 - i$"; it found the lookup because attention
# can express it directly, and the positional encoding lets it tell the positions apart.
#
# ## Post-LN, pre-LN and warm-up
#
# The original Transformer was trained with a
# [learning-rate warm-up](../book/glossary.md#term-learning-rate-warm-up): the learning rate starts near zero,
# rises over the first 4000 steps, then decays (section 5.3 of [Vaswani et al. [2017]](../book/references.bib#vaswani2017)):
# $\text{lr} = D^{-1/2} \min(\text{step}^{-1/2},\ \text{step} \cdot 4000^{-3/2})$, a linear rise up
# to step 4000 and then a fall with the inverse square root of the step.
# Practitioners found post-LN Transformers hard to train without it. Two papers give two
# different reasons, and they do not exclude each other.
#
# - **Where the layer norms sit.** [Xiong et al. [2020]](../book/references.bib#xiong2020) study the Transformer at
#   initialisation with mean-field theory (their section 3.3, Theorem 1): in a post-LN stack
#   the expected gradients of the parameters near the *output* layer are large, and do not
#   shrink with depth; in a pre-LN stack they are smaller by a factor
#   $\sqrt{n_\text{layers}}$ for $n_\text{layers}$ layers. A large learning rate on those large gradients makes training unstable; warm-up
#   keeps the first steps small. For pre-LN they report that the warm-up can be removed and
#   the models still reach comparable results, in less training time (their section 4).
# - **What Adam does early on.** [Liu et al. [2020]](../book/references.bib#liu2020radam) look at the optimiser instead (their
#   section 3): Adam divides each step by a running estimate of the gradient's size, and in
#   the first steps that estimate rests on a handful of gradients, so the adaptive learning
#   rate has a large variance and some steps come out far too big. Warm-up, in their reading,
#   is a way of reducing that variance; their rectified Adam, RAdam (section 4), corrects for
#   it directly. This reason has nothing to do with where the layer norms are, so it applies
#   to pre-LN models too.
#
# `stability_run` trains a small version of the reversal model (1 encoder and 1 decoder block,
# $D = 32$, $F = 64$) on 5-digit sources at a high learning rate, $3 \times 10^{-2}$, in
# batches of 64, in both orders: with Adam and no warm-up, with Adam and a 10-step warm-up,
# and, to test the optimiser-side explanation, with RAdam and no warm-up. A run counts as
# having *learned* once the mean loss of its last 5 steps falls below 0.1 (a uniform guess over
# the digits scores $\log 10 \approx 2.3$), and it stops there; a run that has not learned
# after 150 steps is stopped and counted as not learned. The measure is the number of steps to
# learn, for each setting from five seeds, summarised by the median. The study uses a single block on each side because
# thirty runs of a deeper model do not fit this chapter's time budget. With one block, Xiong et al.'s factor
# $\sqrt{n_\text{layers}}$ is 1, so the experiment does not test how the effect grows with
# depth.

# %% tags=["nbval-ignore-output"]
seeds, max_steps = range(5), 150
settings = {  # name -> (norm_first, warm-up steps, optimiser)
    "post-LN, no warm-up": (False, 0, "adam"), "post-LN, warm-up": (False, 10, "adam"),
    "pre-LN, no warm-up": (True, 0, "adam"), "pre-LN, warm-up": (True, 10, "adam"),
    "post-LN, RAdam": (False, 0, "radam"), "pre-LN, RAdam": (True, 0, "radam")}
steps_to_learn = {}  # name -> (seeds,): steps until the 5-step mean loss < 0.1; inf = never
for name, (norm_first, warmup, optimizer) in settings.items():
    counts = []
    for seed in seeds:
        losses = stability_run(norm_first, warmup_steps=warmup, lr=3e-2, steps=max_steps,
                               seed=seed, num_layers=1, d_model=32, batch_size=64, length=5,
                               stop_loss=0.1, optimizer=optimizer)
        learned = len(losses) >= 5 and sum(losses[-5:]) / 5 < 0.1
        counts.append(len(losses) if learned else math.inf)
    steps_to_learn[name] = torch.tensor(counts)
# At this learning rate a change in the last bit of a rounding moves a run by many steps, so the
# exact counts differ between CPUs and nbval does not compare this table; the next cell prints
# the comparisons that held on every CPU we tried.
print(f"steps to learn (inf: not within {max_steps})")
print(f"{'':>20} " + "".join(f"{f'seed {s}':>7}" for s in seeds) + f"{'median':>8}")
for name, counts in steps_to_learn.items():
    print(f"{name:>20}:" + "".join(f"{c:7.0f}" for c in counts) + f"{counts.median():8.0f}")

# %%
median = {name: counts.median().item() for name, counts in steps_to_learn.items()}
post_gain = steps_to_learn["post-LN, no warm-up"] - steps_to_learn["post-LN, warm-up"]  # (seeds,)
pre_gain = steps_to_learn["pre-LN, no warm-up"] - steps_to_learn["pre-LN, warm-up"]  # (seeds,)
not_learned = [name for name, counts in steps_to_learn.items() if torch.isinf(counts).any()]
print("slowest median:", max(median, key=median.get))
print(f"settings in which some seed had not learned after {max_steps} steps:",
      ", ".join(not_learned))
print("warm-up made post-LN learn faster in every seed:", bool(torch.all(post_gain > 0)))
print("warm-up made pre-LN faster in some seeds and slower in others:",
      bool(pre_gain.min() < 0 < pre_gain.max()))
radam_gain = steps_to_learn["post-LN, no warm-up"] - steps_to_learn["post-LN, RAdam"]  # (seeds,)
print("RAdam instead of Adam, no warm-up: post-LN learned faster in every seed:",
      bool(torch.all(radam_gain > 0)))
assert max(median, key=median.get) == "post-LN, no warm-up", f"medians {median}"
assert not_learned == ["post-LN, no warm-up"], f"not learned in: {not_learned}"
assert torch.all(post_gain > 0), f"post-LN steps saved by warm-up per seed: {post_gain}"
assert pre_gain.min() < 0 < pre_gain.max(), f"pre-LN steps saved by warm-up per seed: {pre_gain}"
close = abs(median["pre-LN, no warm-up"] - median["post-LN, warm-up"])
assert close < 25, f"pre-LN without and post-LN with warm-up: medians {close:.0f} steps apart"
assert torch.all(radam_gain > 0), f"post-LN steps saved by RAdam per seed: {radam_gain}"
radam_close = abs(median["post-LN, RAdam"] - median["post-LN, warm-up"])
assert radam_close < 20, f"post-LN with RAdam and with warm-up: medians {radam_close:.0f} apart"
others = [median[n] for n in median if n != "post-LN, no warm-up"]
assert max(others) < 100, f"medians of the other settings {others}"

# %% tags=["remove-cell"]
# PyTorch's RAdam against Adam on one weight with a constant gradient of 0.01: the step sizes
weights = {name: torch.zeros(1, requires_grad=True) for name in ["adam", "radam"]}
optimisers = {"adam": torch.optim.Adam([weights["adam"]], lr=3e-2),
              "radam": torch.optim.RAdam([weights["radam"]], lr=3e-2)}
step_ratio = []  # RAdam's step / Adam's step, steps 1 to 150
for _ in range(150):
    moved = {}
    for name, optimiser in optimisers.items():
        before = weights[name].detach().clone()
        weights[name].grad = torch.full((1,), 0.01)
        optimiser.step()
        moved[name] = (weights[name].detach() - before).abs().item()
    step_ratio.append(moved["radam"] / moved["adam"])
step_ratio = torch.tensor(step_ratio)
assert torch.allclose(step_ratio[:5], torch.full((5,), 0.01), rtol=1e-3), f"{step_ratio[:5]}"  # lr · gradient
assert 0 < step_ratio[5:].min() and step_ratio[5:].max() < 0.3, f"{step_ratio[5:].max()}"  # rectified
assert torch.all(step_ratio[6:] >= step_ratio[5:-1]), "the rectification factor does not grow"


# %% mystnb={"image": {"alt": "Strip plot of the steps each run needed until the mean loss of its last 5 steps fell below 0.1, one dot per seed (5 seeds per setting) and a black bar at the median, for six settings in rows, from the top: post-LN without warm-up, post-LN with warm-up, pre-LN without warm-up, pre-LN with warm-up, post-LN with RAdam and pre-LN with RAdam. The top row's median sits furthest right, with at least one cross beyond the dotted line at 150 steps for a seed that had not learned by then; the other five rows overlap."}}
fig, ax = plt.subplots(figsize=(5.4, 4.2))
for row, (name, counts) in enumerate(steps_to_learn.items()):
    learned = torch.isfinite(counts)
    offsets = torch.linspace(-0.2, 0.2, len(counts))  # spread the seeds vertically
    ax.plot(counts[learned], row + offsets[learned], "o", color=f"C{row}")
    ax.plot([max_steps + 8] * int((~learned).sum()), (row + offsets)[~learned], "x", ms=8,
            color=f"C{row}")
    ax.plot([counts.median().clamp(max=max_steps + 8)] * 2, [row - 0.3, row + 0.3], "k-", lw=2)
ax.axvline(max_steps, color="0.5", ls=":")
ax.set_yticks(range(len(steps_to_learn)), list(steps_to_learn))
ax.set(xlabel=f"steps until the 5-step mean loss is below 0.1 (x: not within {max_steps})",
       title="Steps to learn, 5 seeds per setting (bar: median)")
ax.invert_yaxis()
fig.tight_layout()

# %% [markdown]
# *Steps to learn for each of the six settings (rows), one dot per seed and a black bar at
# the median; a cross right of the dotted line at 150 steps marks a seed that had not learned
# by then. The post-LN runs without warm-up (top row) have the median furthest right, with at
# least one cross; the other five rows overlap.*
#
# Five comparisons held on every CPU configuration we tried, although the exact counts did
# not: post-LN with Adam and no warm-up had the slowest median and was the only setting in
# which some run had not learned after 150 steps; warm-up made post-LN learn faster in each of
# these five seeds; for pre-LN, warm-up helped in some seeds and cost steps in others; replacing Adam
# by RAdam, with no warm-up, also made post-LN learn faster in each of these seeds, about as fast as
# Adam with warm-up (medians less than 20 steps apart); and pre-LN without warm-up and post-LN
# with warm-up ended close, with medians less than 25 steps apart. So in this
# one-block experiment, at this learning rate, pre-LN did not need warm-up and post-LN did,
# unless its optimiser was changed: the remedy that the optimiser-side explanation proposes
# works here, as Liu et al. predict. It does not decide between the two explanations, though.
# PyTorch's RAdam makes its first five steps plain momentum steps (the learning rate times the
# averaged gradient, not divided by the gradient's size), and takes every later step as Adam's
# step times a rectification factor that grows slowly and is still below 0.3 at step 150 (a
# hidden cell checks both on a single weight). RAdam therefore brings a slow start of its own,
# and a slow start is also what Xiong et al.'s explanation calls for. Its scope is narrow: one small model
# (one block each side), one task, Adam at one high learning rate, one warm-up length, five
# seeds. Before generalising, rerun it with one factor changed (`lr`, or `num_layers=2` in
# `stability_run`): whether pre-LN still learns as fast without warm-up in a deeper stack is
# exactly what the depth argument is about, and this model cannot show it. The learning rate
# matters as much: at a lower rate the comparison can turn around, with warm-up and RAdam
# costing steps rather than saving them, and at a higher rate Adam can fail in both orders,
# with or without this short warm-up. The exact step counts move with the seed and even with the CPU, so read the
# medians as rough, and the per-seed comparisons as statements about these five seeds: another
# set of seeds can include a post-LN run that warm-up slows, or none in which warm-up slows
# pre-LN. At this learning rate, what separates the settings more reliably is the worst case, the runs that never
# learned. The ordering of the worst case matches what Xiong et al. report for full-size models
# (their section 4), and it is one reason most recent Transformers are pre-LN. (The chapter's
# own model uses a moderate learning rate with a short warm-up; whether it needs the warm-up at
# that rate is not tested here.)
#
# ## When the input is wrong
#
# The helpers check what they are given and name the argument in their error. A decoder input
# longer than the positional table, a memory whose width does not match the decoder's
# `d_model`, and an FFN with no hidden units:

# %%
too_long = torch.full((1, 17), BOS_ID)  # 17 positions; the table holds max_len = 16
bad_inputs = {
    "decoder input too long": lambda: model.decode(too_long, torch.zeros(1, 8, 64)),
    "memory of width 32 for d_model 64": lambda: DecoderBlock(64, 4, 128)(
        torch.zeros(2, 5, 64), torch.zeros(2, 7, 32)),
    "ffn_hidden = 0": lambda: PositionWiseFFN(64, 0),
    "ffn_hidden = -128 in a block": lambda: EncoderBlock(64, 4, -128),
}
for name, call in bad_inputs.items():
    try:
        call()
    except ValueError as error:
        print(f"{name}:\n  ValueError: {error}")

# %% [markdown]
# ## Summary
#
# - A **residual connection** $h + F(h)$ puts an identity term into every layer's Jacobian: in a
#   30-layer tanh stack of width 64, with this chapter's loss, the plain network's gradients spread over about seven orders of magnitude
#   under PyTorch's default initialisation and under one order under Xavier's with the tanh
#   gain, while the residual network's stayed within a factor of 20 under both. Depth alone
#   does not make gradients vanish; at that depth residual connections made them robust to the
#   initialisation. Not to depth: at 100 layers under Xavier's initialisation the residual
#   stack's spread reached about 500 (the plain stack's about 6000).
#   Residual connections force every sublayer to keep the width $D$.
# - **Layer normalisation** normalises each token over its own $D$ features, then applies a
#   learned gain and shift. **Batch normalisation** normalises each feature over the batch, so
#   a token's output depends on the other sequences, on the padding and, in a teacher-forced
#   decoder, on later tokens that the causal mask hides; Transformers use layer norm (or,
#   lately, RMSNorm).
# - The **position-wise FFN**, $W_2\,\mathrm{ReLU}(W_1 x_t + b_1) + b_2$, with $F$ usually
#   $4D$ (the original; this chapter's model uses $2D$), is chapter 1's MLP applied to every
#   position with shared weights. Attention mixes positions; the FFN transforms each one, and
#   at $F = 4D$ it holds about two thirds of an encoder block's parameters (half of a decoder
#   block's).
# - **Add & Norm** is $\mathrm{LN}(x + \mathrm{Sublayer}(x))$ (post-LN, the original); pre-LN
#   computes $x + \mathrm{Sublayer}(\mathrm{LN}(x))$ and ends the stack with a layer norm. Our
#   `EncoderBlock` equals `nn.TransformerEncoderLayer` in both orders.
# - A **decoder block** adds cross-attention between masked self-attention and the FFN: queries
#   from the decoder, keys and values from the encoder's memory. The causal mask makes each
#   output depend only on earlier positions, so one teacher-forced pass trains every position.
# - A 170 k-parameter encoder–decoder Transformer learned to reverse 8 digits in 150 steps on a
#   CPU (one run, seed 0); its last-layer cross-attention traces the anti-diagonal that the
#   task requires.
# - In a small model (one block each side) at one high learning rate (five seeds), **post-LN** without **warm-up** was
#   the slowest to learn and the only setting with runs that had not learned after 150 steps;
#   warm-up sped up post-LN in each of the five seeds, while for pre-LN its effect changed sign
#   with the seed. Those per-seed signs belong to these five seeds (another set can differ); the
#   runs that never learned are the clearer difference. Xiong et al. blame the post-LN gradients near the output at initialisation, Liu et
#   al. the variance of Adam's first steps; swapping Adam for RAdam, with no warm-up, also made
#   post-LN learn in every seed. That fits Liu et al.'s explanation, but PyTorch's RAdam also
#   starts with small steps, so it does not rule out Xiong et al.'s.
#
# ## Exercises
#
# **1. Counting parameters.** Give formulas for the number of parameters of an encoder block
# and a decoder block with width $D$, FFN width $F$ and biases everywhere, and evaluate them for
# the original Transformer ($D = 512$, $F = 2048$, 8 heads). Check against `EncoderBlock`,
# `DecoderBlock` and PyTorch's layers.
#
# <details>
# <summary>Solution</summary>
#
# Multi-head attention has four $D \times D$ projections with biases, $4D^2 + 4D$; the FFN has
# $2DF + F + D$; each layer norm has $2D$. An encoder block has one attention, one FFN and two
# norms: $4D^2 + 4D + 2DF + F + D + 4D$. A decoder block has a second attention and a third
# norm: add $4D^2 + 4D + 2D$. For $D = 512$, $F = 2048$ that is 3,152,384 and 4,204,032. The
# number of heads does not appear: the heads split $D$, they do not add parameters. The cell
# below checks the formulas against our blocks and PyTorch's.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 1.
D, F_width = 512, 2048
attention_formula = 4 * D * D + 4 * D
ffn_formula = 2 * D * F_width + F_width + D
encoder_formula = attention_formula + ffn_formula + 2 * (2 * D)
decoder_formula = 2 * attention_formula + ffn_formula + 3 * (2 * D)
for name, formula, ours, theirs in [
        ("encoder", encoder_formula, EncoderBlock(D, 8, F_width),
         nn.TransformerEncoderLayer(D, 8, F_width)),
        ("decoder", decoder_formula, DecoderBlock(D, 8, F_width),
         nn.TransformerDecoderLayer(D, 8, F_width))]:
    print(f"{name} block: formula {formula:,}, ours {count(ours):,}, PyTorch {count(theirs):,}")
    assert formula == count(ours) == count(theirs), f"got {formula=}, {count(ours)=}, {count(theirs)=}"
ffn_share = {"encoder": ffn_formula / encoder_formula, "decoder": ffn_formula / decoder_formula}
print(f"the FFN holds {ffn_share['encoder']:.1%} of an encoder block's parameters and "
      f"{ffn_share['decoder']:.1%} of a decoder block's")
assert 0.66 < ffn_share["encoder"] < 0.67 and 0.49 < ffn_share["decoder"] < 0.50, f"got {ffn_share['encoder']=}, {ffn_share['decoder']=}"

# %% [markdown]
# **2. A constant token.** What does layer normalisation (gain 1, shift 0) return for a token
# whose $D$ features are all equal, say all 5? What does batch normalisation return for a
# batch holding a single token? Predict, then check with `LayerNorm` and `batch_norm_tokens`.
#
# <details>
# <summary>Solution</summary>
#
# For the constant token, $x - \mu = 0$ in every feature and $\sigma^2 = 0$, so the result is
# $0 / \sqrt{\epsilon} = 0$: the all-zero vector (then $\mathbf b$, with a learned shift). The
# $\epsilon$ is what keeps this from being $0/0$. A batch of one token does the same to batch
# norm: each feature's mean over the batch is that token's own value and its variance is 0,
# so the token becomes the zero vector, whatever it was. (PyTorch's `F.batch_norm` refuses
# such a batch in training mode: "Expected more than 1 value per channel when training".)
# This is not what rules batch norm out of a decoder, though: at generation time batch norm
# would use its running averages, not the statistics of the one token. The real problem is
# in training, shown earlier in the chapter: statistics over all (B, T) positions of a
# teacher-forced batch carry information from later tokens into earlier positions, around
# the causal mask.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 2.
constant = torch.full((1, 1, 6), 5.0)  # (B, T, D): one token, all features equal
one_token = torch.randn(1, 1, 6, generator=torch.Generator().manual_seed(0))
for name, result in [("layer norm of a constant token", LayerNorm(6)(constant)),
                     ("batch norm of a batch of 1 token", batch_norm_tokens(one_token))]:
    print(f"{name:>32}:", " ".join(f"{v:.4f}" for v in result[0, 0]))
    assert result.abs().max() == 0, f"got {result.abs().max()=}"
try:
    F.batch_norm(one_token.reshape(1, 6), None, None, training=True)
except ValueError as error:
    print(f"F.batch_norm, training mode: ValueError: {error}")

# %% [markdown]
# **3. Causality through gradients.** The causal demonstration changed one input and watched
# the outputs. Show the same with autograd: for the decoder block of this chapter (`y`,
# `memory`, `self_mask`), compute the gradient of the output at position $t$ with respect to
# the input at every position $s$, and print the $5 \times 5$ table of gradient norms. Which
# entries are zero? Which would be zero without the mask?
#
# <details>
# <summary>Solution</summary>
#
# Every entry with $s > t$ (above the diagonal) is exactly zero: output $t$ does not depend on
# later inputs. The entries on and below the diagonal are non-zero. Without the mask every
# output attends to every input, and no entry is zero: the second table in the cell below.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 3.
probe = torch.randn(16, generator=torch.Generator().manual_seed(0))  # (D,)


def gradient_table(mask):
    y_grad = y[:1].clone().requires_grad_(True)  # (1, T, D)
    table = torch.zeros(5, 5)
    for t in range(5):
        # a random projection: the plain sum of a layer norm's output is constant (0)
        out_t = decoder_block(y_grad, memory[:1], mask)[0][0, t] @ probe
        (gradient,) = torch.autograd.grad(out_t, y_grad)  # (1, T, D)
        table[t] = gradient[0].norm(dim=-1)  # one norm per input position s
    return table


for name, mask in [("causal mask", self_mask), ("no mask", None)]:
    table = gradient_table(mask)
    print(f"{name}: rows = output position t, columns = input position s")
    for t in range(5):
        print(f"  t = {t}: " + " ".join(f"{v:.4f}" for v in table[t]))
causal_table, open_table = gradient_table(self_mask), gradient_table(None)
assert torch.all(causal_table.triu(1) == 0), "a gradient reaches an earlier output from a later input"
assert torch.all(open_table > 0), "without the mask some gradient is exactly zero"

# %% [markdown]
# **4. Shorter sources.** The chapter's model was trained on sources of exactly 8 digits. Give
# it a source of 5 digits, padded to 8 with `<pad>` and with its valid length passed as
# `src_valid_lens`, and decode greedily. Does it reverse the 5 digits and stop? Why, and how
# would you fix it?
#
# <details>
# <summary>Solution</summary>
#
# It does not. It writes 8 digits and `<eos>`, as it always did in training. The first three
# outputs would read source positions 7, 6 and 5, but those are padding that the mask hides,
# so their attention must fall on the real positions, and here the model writes the last real
# digit, 6, three times; then come the five digits, correctly reversed. The model never
# learned to find the end of the source, because every source it saw ended at position 7. A
# model learns the distribution it was trained on. The remedy to try is to train on varied
# lengths: `train_seq2seq(..., min_length=1)` draws lengths from 1 to 8 with padding, so the
# model sees sequences end at every position. This chapter does not run it (it needs a few
# hundred steps, more than the chapter's time budget); train such a model yourself, measure
# `token_accuracy(model, min_length=1)` and decode the source above again.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 4.
short = torch.tensor([[4, 2, 9, 0, 6]]) + FIRST_DIGIT  # five digits
padded = F.pad(short, (0, 3), value=PAD_ID)  # (1, 8)
prediction = greedy_decode(model, padded, max_new_tokens=9, bos=BOS_ID, eos=EOS_ID,
                           src_valid_lens=source_valid_lens(padded))
print(f"source {text(padded[0])}   wanted 6 0 9 2 4 <eos>   greedy {text(prediction[0])}")
