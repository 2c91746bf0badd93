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
# # 12. A decoder-only language model
#
# Chapter 8 built the Transformer of [Vaswani et al. [2017]](../book/references.bib#vaswani2017): an encoder that reads a
# source sentence and a decoder that writes the target while it looks back at the encoder.
# Most language models in use today keep only one of the two halves. A
# [decoder-only model](../book/glossary.md#term-decoder-only-model) such as GPT is a stack of decoder blocks without
# cross-attention, trained to predict the next token of ordinary text; an encoder-only model
# such as BERT keeps the encoder and fills in hidden words. This chapter builds a tiny
# decoder-only model, trains it on the prose of this book, one character at a time, and
# samples text from it.
#
# **What you will learn**
#
# - that a GPT-2 block is chapter 8's pre-LN encoder block run with a causal mask, and how
#   the [causal language model](../book/glossary.md#term-causal-language-model) objective trains every position of a text at once;
# - to train a 2-layer model on this book's own prose, character by character, and compare
#   its loss with a model that ignores context (the unigram baseline);
# - sampling with a [temperature](../book/glossary.md#term-temperature) and [top-k sampling](../book/glossary.md#term-top-k-sampling), derived in the open and
#   shown live on the trained model's next-character distribution;
# - [RMSNorm](../book/glossary.md#term-RMSNorm) beside layer normalisation: its formula, the operations it saves, and the
#   loss of a smaller model trained with each of the two, over five seeds;
# - encoder-only, decoder-only and encoder–decoder models side by side: what each position
#   attends to and which masks each uses.

# %%
import math

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.nn import functional as F

from helpers.figures.plotting import heatmap
from helpers.figures.widgets import slider_figure
from helpers.gpt import GPT, next_token_probs
from helpers.masks import causal_mask
from helpers.seeding import set_seed
from helpers.tasks.text import (CharTokenizer, book_prose, lm_batch, lm_loss, norm_comparison,
                                train_lm, unigram_loss)
from helpers.transformer import EncoderBlock, LayerNorm, RMSNorm

torch.set_num_threads(1)  # tiny tensors: one thread is as fast, and steadier on a busy CPU
set_seed(0)

# %% [markdown]
# ## The text: this book's own prose
#
# A language model needs text, and this book has some: the Markdown of chapters 1–8,
# released with the code under the MIT licence (the repository's `LICENSE`). The helper
# `book_prose` reads a frozen copy of it that ships with the helpers (links reduced to their
# text, characters outside printable ASCII dropped), so this chapter's numbers do not move
# when another chapter's wording changes. Each distinct character is one token.

# %%
text = book_prose()
tokenizer = CharTokenizer(text)
data = tokenizer.encode(text)  # (N,) token ids
split = int(0.9 * len(data))
train_data, val_data = data[:split], data[split:]  # the last 10 % is held out
print(f"{len(text):,} characters, vocabulary of V = {tokenizer.vocab_size} characters")
print(f"training {len(train_data):,}, validation {len(val_data):,}")
print(repr(text[:120]))

# %% [markdown]
# ## The causal language-model objective
#
# A causal language model gives the probability of a text $x_1, \dots, x_T$ as a product of
# next-token predictions, each conditioned only on what came before:
#
# $$
# p(x_1, \dots, x_T) = \prod_{t=1}^{T} p(x_t \mid x_1, \dots, x_{t-1}),
# \qquad
# \mathcal L = -\frac{1}{T} \sum_{t=1}^{T} \log p(x_t \mid x_{<t}).
# $$
#
# [Radford et al. [2018]](../book/references.bib#radford2018) (Section 3.1) pre-train GPT with this loss on unlabelled text, each prediction conditioned on a
# window of a fixed number of tokens before it. A
# training example is a window of $T$ characters as input and the same window shifted one
# character on as target, so every position is a prediction: with the causal mask of chapter 4,
# one pass computes all $T$ of them and none can peek at its own answer.

# %%
x, y = lm_batch(train_data, batch_size=2, block_size=24,
                generator=torch.Generator().manual_seed(0))  # (B, T) each
for row in range(2):
    print("input: ", repr(tokenizer.decode(x[row])))
    print("target:", repr(tokenizer.decode(y[row])))
assert torch.equal(x[:, 1:], y[:, :-1]), "the target is not the input shifted by one"

# %% [markdown]
# ## The model: a decoder block without cross-attention
#
# GPT-2's block ([Radford et al. [2019]](../book/references.bib#radford2019), Section 2.3) is the pre-LN block of chapter 8:
# $x \leftarrow x + \mathrm{Attn}(\mathrm{LN}(x))$, then $x \leftarrow x + \mathrm{FFN}(\mathrm{LN}(x))$,
# with one more layer norm after the last block. Take chapter 8's decoder block, drop its
# cross-attention (there is no encoder to attend to), and what is left is chapter 8's
# `EncoderBlock` called with a causal mask. `helpers.gpt.GPT` stacks such blocks between a
# token embedding plus a learned position embedding and a linear head onto the $n_\text{vocab}$
# characters. The head's weight is the token embedding's own $n_\text{vocab} \times D$ matrix
# ([weight tying](../book/glossary.md#term-weight-tying); GPT's output layer is the transposed
# token-embedding matrix, Radford et al. 2018, Section 3.1), so the model reads and
# writes characters in the same space.
#
# The model below is written in the open, in nanoGPT's order, and checked against the helper:

# %%
set_seed(0)
V, D, H, T_max = tokenizer.vocab_size, 48, 4, 32
model = GPT(V, d_model=D, num_heads=H, ffn_hidden=4 * D, num_layers=2, max_len=T_max)


def gpt_forward(model, idx):
    """The decoder-only forward pass, step by step."""
    B, T = idx.shape
    x = model.token_embedding(idx) + model.position_embedding(torch.arange(T))  # (B, T, D)
    mask = causal_mask(T)  # (T, T): position t sees 0..t
    for block in model.blocks:  # each an EncoderBlock(norm_first=True) with a causal mask
        x = x + block.self_attn(block.norm1(x), block.norm1(x), block.norm1(x), mask)[0]
        x = x + block.ffn(block.norm2(x))  # (B, T, D)
    return model.head(model.final_norm(x))  # (B, T, V)


idx = x[:, :T_max]  # (B, T) from the batch above
torch.testing.assert_close(gpt_forward(model, idx), model(idx)[0])
assert model.head.weight is model.token_embedding.weight, "the head is not tied"
count = lambda m: sum(p.numel() for p in m.parameters())  # tied weights counted once
print(f"parameters: {count(model):,} (the tied V x D matrix once: {V * D:,})")
print("matches the helper GPT: yes")

# %% [markdown]
# The mask is the only thing that makes the block a decoder. If it works, changing the last
# character of a window changes the logits at the last position and nowhere else:

# %%
changed = idx.clone()
changed[:, -1] = (changed[:, -1] + 1) % V
with torch.no_grad():
    delta = (model(changed)[0] - model(idx)[0]).abs().amax(dim=(0, 2))  # (T,)
print(f"largest change at positions 0..{T_max - 2}: {delta[:-1].max():.1f}; "
      f"at the last position: {'non-zero' if delta[-1] > 0 else 'zero'}")
assert delta[:-1].max() == 0 and delta[-1] > 0, f"got {delta=}"

# %% [markdown]
# ## Training on the book
#
# What should the loss be compared with? A model that ignores context can do no better than
# predict each character with its frequency, the **unigram** model; its cross-entropy on the
# held-out text is the baseline a model that uses context must beat. A **bigram** model,
# which predicts each character from the one before it (counted on the training text), is a
# second, harder baseline: a model that beats it is likely to use more than one character
# of context (the bigram table is one estimate of a one-character predictor, not the best
# one possible on the held-out text). The model
# trains for 300 steps of 32 windows of 32 characters with AdamW (learning rate $10^{-2}$,
# decaying along a cosine); the trained numbers are printed to two significant digits, since
# the last digits differ between CPUs.

# %%
set_seed(0)
model = GPT(V, d_model=D, num_heads=H, ffn_hidden=4 * D, num_layers=2, max_len=T_max)
losses = train_lm(model, train_data, steps=300, batch_size=32, block_size=T_max, lr=1e-2,
                  generator=torch.Generator().manual_seed(0))
val_loss = lm_loss(model, val_data, block_size=T_max)
unigram = unigram_loss(train_data, val_data, V)
pairs = torch.ones(V, V).index_put_((train_data[:-1], train_data[1:]), torch.ones(split - 1),
                                    accumulate=True)  # (V, V) counts of (previous, next), +1
bigram = -(pairs / pairs.sum(1, keepdim=True)).log()[val_data[:-1], val_data[1:]].mean().item()
print(f"validation loss (nats per character): uniform {math.log(V):.2g}, unigram {unigram:.2g}, "
      f"bigram {bigram:.2g}, trained model {val_loss:.2g}")
print(f"training loss at the first step {losses[0]:.1f}; characters seen in training: "
      f"{300 * 32 * T_max:,}")

# %% tags=["remove-cell"]
assert val_loss < unigram - 0.6, f"model {val_loss:.3f} not well below unigram {unigram:.3f}"
assert 3.2 < unigram < 3.35, f"unigram {unigram:.3f}"
assert val_loss < bigram, f"model {val_loss:.3f} not below bigram {bigram:.3f}"
assert 62_000 < count(model) < 64_000, f"{count(model)} parameters, not about 63 k"
assert losses[0] > math.log(V), f"first loss {losses[0]:.2f} not above ln V"

# %% mystnb={"image": {"alt": "Line plot of the cross-entropy in nats per character against training step over 300 steps: the loss of each step as a thin grey line, its running mean of 20 steps in blue, a dashed red line for the unigram baseline (3.3) and a dotted green line for the trained model's validation loss (2.4). The loss starts at about 5, drops steeply in the first steps, falls below the unigram line within the first hundred steps and keeps falling slowly, ending near the green line."}}
smooth = torch.tensor(losses).unfold(0, 20, 1).mean(1)  # running mean over 20 steps
fig, ax = plt.subplots(figsize=(4.8, 3.2))
ax.plot(losses, color="0.75", lw=0.8, label="training loss, each step")
ax.plot(range(19, len(losses)), smooth, color="C0", label="running mean of 20 steps")
ax.axhline(unigram, color="C3", ls="--", label="unigram baseline (validation)")
ax.axhline(val_loss, color="C2", ls=":", label="trained model (validation)")
ax.set(xlabel="training step", ylabel="cross-entropy (nats / character)", ylim=(1.5, 5.4))
ax.legend(fontsize=9)
fig.tight_layout()

# %% tags=["remove-cell"]
first_below = 19 + int((smooth < unigram).nonzero()[0])  # the last step of the first window
assert first_below < 100, f"the running mean first falls below unigram at step {first_below}"

# %% [markdown]
# *Training loss over 300 steps. It starts at about 5, above $\ln n_\text{vocab} \approx 4.6$ (the loss of
# a uniform guess over the 96 characters, which the untrained model's unequal logits do
# not make), falls below the unigram baseline (red dashes) within the first hundred steps
# and keeps falling; the green dotted line is the trained model's loss on the
# held-out tenth of the text.*
#
# The model is below both baselines, which suggests that it uses more than the previous
# character, but it is far from fluent: it has seen about 300,000 characters in all, and its loss is not far below
# the bigram model's. (One run, seed 0.) The interesting part is what sampling does with the
# distribution it has learned.
#
# ## Sampling: temperature and top-k
#
# At each step the model gives logits $z \in \mathbb{R}^{n_\text{vocab}}$ for the next character. Sampling
# draws from a distribution made from them in three steps:
#
# 1. divide by a **temperature** $\tau > 0$: $z / \tau$ (below 1 sharpens, above 1 flattens);
# 2. **top-k**: keep the $k$ largest of them and set the others to $-\infty$;
# 3. softmax, and draw a token with a seeded random generator:
#
# $$
# p_i = \frac{\exp(z_i / \tau)}{\sum_{j \in \mathrm{top}_k} \exp(z_j / \tau)}
# \quad \text{for } i \in \mathrm{top}_k(z), \qquad p_i = 0 \text{ otherwise.}
# $$
#
# As $\tau \to 0$ all the mass goes to the largest logit (greedy decoding); at $\tau = 1$ it
# is the model's own distribution; as $\tau \to \infty$ it becomes uniform over the kept
# tokens. Top-k cuts off the long tail of unlikely characters that, one draw in many, derail
# a sample. The three steps in the open, after the prompt "The attention", checked against
# the helper `next_token_probs` and against the first token that `GPT.generate` draws:

# %%
prompt = tokenizer.encode("The attention")[None]  # (1, T)
with torch.no_grad():
    logits = model(prompt)[0][0, -1]  # (V,): the logits of the next character
temperature, k = 0.8, 5
scaled = logits / temperature  # 1) temperature
kth_largest = scaled.topk(k).values[-1]
scaled = scaled.masked_fill(scaled < kth_largest, float("-inf"))  # 2) keep the top k
probs = torch.softmax(scaled, dim=-1)  # 3) softmax ...
draw = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(0))  # ... and draw
torch.testing.assert_close(probs, next_token_probs(logits, temperature, k))
generated = model.generate(prompt, 1, temperature, k, generator=torch.Generator().manual_seed(0))
assert generated[0, -1] == draw, f"generate drew {generated[0, -1]}, the derivation {draw}"
print("top 5 next characters:",
      "  ".join(f"{tokenizer.decode([i])!r} {p:.2f}" for p, i in zip(*probs.topk(5))))
print("next_token_probs and generate agree with the derivation")

# %% [markdown]
# The live figure below moves the temperature. The left panel shows the probabilities of
# the 12 most likely next characters after "The attention" (␣ is the space), at full vocabulary (light bars)
# and with top-5 (dark bars); the right panel shows 90 characters the model writes after
# the prompt at that temperature (full vocabulary), drawn with the same seeded generator in
# every frame.

# %%
temperatures = [0.1, 0.2, 0.35, 0.5, 0.7, 0.85, 1.0, 1.25, 1.5, 2.0, 3.0]
order = logits.argsort(descending=True)[:12]  # the 12 characters most likely at τ = 1
labels = [repr(tokenizer.decode([i]))[1:-1] or " " for i in order.tolist()]
labels = ["␣" if label == " " else label for label in labels]  # ␣: the space


def entropy_bits(p):
    p = p[p > 0]
    return float(-(p * p.log2()).sum())


samples = {}  # temperature -> text: each sample is drawn once, for the frame and the printout


def sample(temperature, length=90):
    if temperature not in samples:
        out = model.generate(prompt, length, temperature, generator=torch.Generator().manual_seed(0))
        samples[temperature] = tokenizer.decode(out[0])
    return samples[temperature]


def render(temperature):
    full, top5 = next_token_probs(logits, temperature), next_token_probs(logits, temperature, 5)
    fig, (bars, words) = plt.subplots(1, 2, figsize=(8.4, 3.2), width_ratios=(1, 1.2))
    positions = torch.arange(12)
    bars.bar(positions, full[order], color="C0", alpha=0.35, label="all V")
    bars.bar(positions, top5[order], color="C0", width=0.45, label="top-5")
    bars.set_xticks(positions, labels, fontsize=9)
    bars.set(ylim=(0, 1), ylabel="probability", xlabel='next character after "The attention"')
    bars.set_title(f"τ = {temperature:g}: entropy {entropy_bits(full):.1f} bits "
                   f"(top-5: {entropy_bits(top5):.1f})", fontsize=10)
    bars.legend(fontsize=9)
    shown = sample(temperature).replace("$", r"\$").replace("\n", " ¶ ")
    lines = [shown[i:i + 34] for i in range(0, len(shown), 34)]
    words.text(0.0, 1.0, "\n".join(lines), va="top", family="monospace", fontsize=9.5)
    words.set_title("a sample (seed 0)", fontsize=10)
    words.axis("off")
    fig.tight_layout()
    return fig


slider_figure(render, temperatures, description="temperature", initial=1.0)

# %% [markdown]
# *Left, at each temperature: the probability of each of the 12 characters most likely at
# $\tau = 1$ (light, the full distribution; dark, after top-5). At $\tau = 0.1$ one bar is
# near 1; as the temperature grows the bars flatten and the full distribution's entropy
# climbs towards $\log_2 96 \approx 6.6$ bits, while top-5 caps it (without ties) at $\log_2 5 \approx 2.3$
# bits. Right: a 90-character sample drawn with the same generator. At low temperature it
# repeats the most common words and spaces; near 1 it mixes word-like pieces with
# punctuation and LaTeX from the book; in these
# samples (generator seed 0), at 2 and 3 between a third and a half of the characters are
# neither letters nor spaces; another seed draws another sample, with another share.*
#
# What the slider shows, frame by frame: the entropy of the next-character distribution
# (bits, one decimal), full and after top-5, and the share of characters in each sample that
# are letters or spaces:

# %%
entropies, plain_shares = [], {}
for temperature in temperatures:
    full_h = entropy_bits(next_token_probs(logits, temperature))
    top5_h = entropy_bits(next_token_probs(logits, temperature, 5))
    text_out = sample(temperature)[len("The attention"):]
    plain = sum(c.isalpha() or c == " " for c in text_out) / len(text_out)
    entropies.append((full_h, top5_h))
    plain_shares[temperature] = plain
    print(f"τ = {temperature:<4g}: entropy {full_h:.1f} bits (top-5 {top5_h:.1f}); "
          f"letters or spaces in the sample {plain:.0%}")
print("sample at τ = 0.5:", repr(sample(0.5)))
print("sample at τ = 1.0:", repr(sample(1.0)))

# %% tags=["remove-cell"]
full_hs, top5_hs = zip(*entropies)
assert all(a < b for a, b in zip(full_hs, full_hs[1:])), f"entropy not increasing: {full_hs}"
assert full_hs[0] < 0.5 and full_hs[-1] > 4.5, f"entropy ends {full_hs[0]:.2f}, {full_hs[-1]:.2f}"
assert all(h <= math.log2(5) + 1e-6 for h in top5_hs), f"top-5 entropy above log2 5: {top5_hs}"
assert all(0.3 < 1 - plain_shares[t] < 0.55 for t in (2.0, 3.0)), f"got {plain_shares}"
assert "$" in sample(1.0), "no LaTeX at τ = 1"
# one decimal is safe only away from a rounding boundary (CPUs differ in the 6th digit)
assert all(abs(h * 10 % 1 - 0.5) > 0.01 for h in full_hs + top5_hs), f"near a boundary: {entropies}"

# %% [markdown]
# The entropy rises with the temperature from frame to frame, from near 0 bits (almost greedy)
# to several bits. Top-5 leaves probability on five characters only (more if some logits tie
# with the fifth largest: the helper keeps ties), so without ties its entropy is at most
# $\log_2 5 \approx 2.3$ bits, however high the temperature; in every frame here it stays
# within that bound. These are the numbers of one trained model (seed 0) after one prompt.
#
# ## RMSNorm beside layer normalisation
#
# Layer normalisation (chapter 8) centres each token's $D$ features and divides by their
# standard deviation; it then applies a gain $\gamma$ and a shift $b$. RMSNorm
# ([Zhang and Sennrich [2019]](../book/references.bib#zhang2019rmsnorm), Section 4) drops the centring and the shift, and divides by
# the root mean square instead:
#
# $$
# \mathrm{LN}(x) = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} \odot \gamma + b,
# \qquad
# \mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\frac1D \sum_{i=1}^D x_i^2 + \epsilon}} \odot \gamma .
# $$
#
# Layer norm is invariant to re-centring and to re-scaling its inputs; Zhang and Sennrich
# hypothesise (Section 4) that re-scaling invariance is the one behind its success, and keep
# only it. When the features already have mean 0, with the same gain and no shift, the two
# formulas agree.
# In the open, against the helper and PyTorch's `nn.RMSNorm`:

# %%
set_seed(0)
features = torch.randn(2, 5, D) * 3 + 1  # (B, T, D), mean 1, std 3
gain = torch.rand(D) + 0.5  # (D,)
rms = features.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt()  # (B, T, 1)
ours = features / rms * gain  # (B, T, D)
helper, reference = RMSNorm(D), nn.RMSNorm(D, eps=1e-5)
with torch.no_grad():
    helper.weight.copy_(gain)
    reference.weight.copy_(gain)
torch.testing.assert_close(ours, helper(features))
torch.testing.assert_close(ours, reference(features))
centred = features - features.mean(-1, keepdim=True)
layer_norm = LayerNorm(D)
with torch.no_grad():
    layer_norm.weight.copy_(gain)
torch.testing.assert_close(helper(centred), layer_norm(features), atol=1e-4, rtol=1e-4)
print("RMSNorm in the open = helpers RMSNorm = torch.nn.RMSNorm")
print("RMSNorm of the centred token = LayerNorm with the same gain and no shift")

# %% [markdown]
# **What it saves, counted.** Per token of $D$ features, layer norm computes the mean ($D$
# additions), subtracts it ($D$), squares and sums for the variance ($2D$), multiplies by the
# reciprocal square root ($D$), by the gain ($D$) and adds the shift ($D$): about $7D$
# operations and $2D$ parameters. RMSNorm squares and sums ($2D$), multiplies by the
# reciprocal root ($D$) and by the gain ($D$): about $4D$ operations and $D$ parameters, and
# one pass over the features for its statistics instead of the two of the layer-norm recipe
# counted here (an implementation can also gather layer norm's sum and sum of squares in one
# pass). (A handful of scalar
# operations per token, the division by $D$, the $\epsilon$ and the root, are the same in
# both.)

# %%
def norm_ops(d):
    layer = {"mean": d, "subtract mean": d, "square + sum": 2 * d, "scale": d, "gain": d,
             "shift": d}
    rms = {"square + sum": 2 * d, "scale": d, "gain": d}
    return layer, rms


layer_ops, rms_ops = norm_ops(D)
print(f"per token at D = {D}: LayerNorm {sum(layer_ops.values())} operations, "
      f"{2 * D} parameters; RMSNorm {sum(rms_ops.values())} operations, {D} parameters")
print(f"saved: {', '.join(sorted(layer_ops.keys() - rms_ops.keys()))} "
      f"({1 - sum(rms_ops.values()) / sum(layer_ops.values()):.0%} of the operations)")
per_model = 2 * 2 + 1  # two norms per block, two blocks, one final norm
print(f"in the model above ({per_model} norms): {per_model * D} fewer parameters "
      f"out of {count(model):,}")

# %% [markdown]
# The operations saved are a small part of a whole block: the projections and the FFN cost on
# the order of $D^2$ operations per token (the attention scores and weighting $T D$), the norms
# on the order of $D$. Zhang and Sennrich
# report 7 % to 64 % less running time on their models and hardware (abstract); this chapter counts
# operations and does not time them.
#
# **Does the model learn as well?** One factor changed: the same model, the same data in the
# same order and the same initial weights for the other parameters, with `norm="layer"` or
# `norm="rms"` in every block and the final norm. To fit ten training runs into this
# chapter's time budget, the comparison uses a smaller model than the one above (one block,
# $D = 32$, 150 steps of 64 windows of 32 characters, learning rate $2 \cdot 10^{-2}$); five
# seeds per norm:

# %%
seeds = range(5)
results = norm_comparison(train_data, val_data, V, seeds, steps=150)
printed = []  # every value printed below, to two decimals
for norm, name in [("layer", "LayerNorm"), ("rms", "RMSNorm")]:
    values = torch.tensor(results[norm])
    printed += [values.median(), values.min(), values.max()]
    print(f"{name:>9}: validation loss median {values.median():.2f}, "
          f"range {values.min():.2f} to {values.max():.2f} (5 seeds)")
difference = torch.tensor(results["rms"]) - torch.tensor(results["layer"])
printed += [difference.median(), difference.min(), difference.max()]
print(f"RMSNorm minus LayerNorm, per seed: median {difference.median():+.2f}, "
      f"range {difference.min():+.2f} to {difference.max():+.2f}")
print(f"unigram baseline {unigram:.2f}")

# %% tags=["remove-cell"]
for norm in ("layer", "rms"):
    assert max(results[norm]) < unigram - 0.4, f"{norm} runs not well below unigram: {results[norm]}"
# two decimals are safe only away from a rounding boundary (CPUs differ in the 6th digit)
assert all(abs(abs(float(v)) * 100 % 1 - 0.5) > 0.05 for v in printed), f"near a boundary: {printed}"
medians = {norm: torch.tensor(results[norm]).median() for norm in results}
assert abs(medians["rms"] - medians["layer"]) < 0.005, f"medians {medians}"
assert difference.abs().max() < 0.2, f"norms differ by {difference.abs().max():.3f}"
assert difference.min() < 0 < difference.max(), f"the difference keeps its sign: {difference}"
layer_range, rms_range = (min(results["layer"]), max(results["layer"])), (min(results["rms"]), max(results["rms"]))
assert max(layer_range[0], rms_range[0]) < min(layer_range[1], rms_range[1]), f"ranges do not overlap: {results}"

# %% [markdown]
# Both norms took the small model well below the unigram baseline. (These numbers are
# printed to two decimals, not two significant digits, because at two digits the two
# medians, which agree to two decimals, would round to different values; a hidden check
# makes sure that no printed value lies near a rounding boundary.) The two medians agree to
# two decimals, the two ranges overlap, and the difference changes sign from seed to seed:
# five seeds give no evidence that either norm learns better here. What they do show is
# that in this small model, on this text, with this budget of steps, dropping the centring
# and the shift did not make the model measurably worse. That is in line with what Zhang and
# Sennrich hypothesise (Section 4) and report on their larger models and tasks (abstract:
# performance comparable to layer norm);
# it does not show what happens at other scales.
#
# ## Three families: encoder-only, decoder-only, encoder–decoder
#
# The three designs differ in what each position may attend to, which is set by their masks:
#
# | | encoder-only (BERT) | decoder-only (GPT) | encoder–decoder (original Transformer) |
# |---|---|---|---|
# | blocks | encoder blocks | decoder blocks without cross-attention | encoder blocks, then decoder blocks |
# | self-attention | bidirectional: every token sees every token | causal: token $t$ sees $1..t$ | encoder: bidirectional; decoder: causal |
# | cross-attention | none | none | every decoder position sees every source position |
# | trained to | fill in masked tokens | predict the next token | predict the next target token given the source |
# | used for | representations of a whole text (classification, retrieval) | generating text | translating one sequence into another |
#
# For an [encoder-only model](../book/glossary.md#term-encoder-only-model), [Devlin et al. [2019]](../book/references.bib#devlin2019) (Section 3.1) train BERT's bidirectional encoder by hiding 15 % of the
# input tokens and predicting them, since with full attention a token could otherwise see
# itself. GPT ([Radford et al. [2018]](../book/references.bib#radford2018), Section 3.1) is a "multi-layer Transformer decoder"
# trained on next-token prediction, and GPT-2 ([Radford et al. [2019]](../book/references.bib#radford2019), Section 2.3) keeps that
# design with pre-LN blocks. The encoder–decoder is chapter 8's, from
# [Vaswani et al. [2017]](../book/references.bib#vaswani2017) (Section 3.1 and Figure 1). The masks, for a text of 6 tokens
# (and a source of 5 for the encoder–decoder), True = may attend:

# %% mystnb={"image": {"alt": "Four boolean masks in a 2 by 2 grid, query positions down and key positions across, yellow where attention is allowed and dark where it is blocked. Top left, encoder-only (BERT) bidirectional self-attention: all 36 cells of the 6 by 6 grid are yellow. Top right, decoder-only (GPT) causal self-attention, and bottom left, the encoder-decoder's decoder self-attention: the same lower-triangular staircase, yellow on and below the diagonal, 21 of 36 pairs. Bottom right, the decoder's cross-attention to the source: a full 6 by 5 yellow block, 30 of 30 pairs."}}
T_demo, S_demo = 6, 5
masks = {
    "encoder-only (BERT):\nbidirectional self-attention": torch.ones(T_demo, T_demo, dtype=torch.bool),
    "decoder-only (GPT):\ncausal self-attention": causal_mask(T_demo),
    "encoder–decoder, decoder:\ncausal self-attention": causal_mask(T_demo),
    "encoder–decoder, decoder:\ncross-attention to the source": torch.ones(T_demo, S_demo, dtype=torch.bool),
}
fig, axes = plt.subplots(2, 2, figsize=(6.8, 6.6))
for ax, (title, mask) in zip(axes.flat, masks.items()):
    source = "cross" in title
    heatmap(mask.float(), ax=ax, vmax=1.0, colorbar=False, title=title,
            xlabel="key: source position" if source else "key: position",
            ylabel="query: position")
fig.tight_layout()
for title, mask in masks.items():
    print(f"{title.replace(chr(10), ' ')}: {int(mask.sum())} of {mask.numel()} pairs allowed")

# %% [markdown]
# *Four masks, yellow where a query position may attend to a key position. Encoder-only: all
# 36 pairs. Decoder-only: the lower triangle with the diagonal, 21 of 36 pairs. The
# encoder–decoder's decoder has the same causal triangle for its self-attention, plus a full
# 6 × 5 block for cross-attention: every target position may read every source position,
# because the whole source is known before decoding starts.*
#
# A decoder-only model can still do what an encoder–decoder does by writing the source into
# its prompt: the source's tokens then sit before the target's and the causal mask lets every
# target token see them. What changes is that the source, too, is read only left to right.
#
# ## Summary
#
# - A **decoder-only** (GPT-2-style) model is a stack of pre-LN blocks with causal
#   self-attention and no cross-attention, that is, chapter 8's `EncoderBlock` with a causal
#   mask, between token and position embeddings and a head onto the vocabulary (tied to the
#   token embedding here, as in GPT).
# - A **causal language model** is trained to predict every next token of a window at once;
#   the mask keeps each prediction from seeing its answer (changing the last input changed
#   the last position's logits only).
# - On this book's prose, a 2-layer, 63 k-parameter character model trained in 300 steps
#   reached a validation loss well below the unigram baseline and below the bigram baseline
#   (one run, printed above); it is not fluent.
# - **Sampling** divides the logits by a temperature $\tau$, keeps the top $k$, and draws from
#   the softmax. On the trained model the next-character entropy rose with $\tau$ in every
#   frame, and top-5 capped it at $\log_2 5$ bits.
# - **RMSNorm** divides each token by its root mean square and applies a gain: layer norm
#   without the mean and the shift, about $4D$ instead of $7D$ operations and $D$ instead of
#   $2D$ parameters per norm. In a small model over five seeds the validation losses with the
#   two norms overlapped, and their difference changed sign between seeds.
# - **Encoder-only** models (BERT) attend both ways and fill in masked tokens; **decoder-only**
#   models (GPT) attend causally and predict the next token; **encoder–decoder** models
#   combine a bidirectional encoder with a causal decoder that cross-attends to it.
#
# ## Exercises
#
# **1. Greedy as a limit.** Show that `next_token_probs(logits, temperature, top_k=1)` puts
# all its mass on the argmax, whatever the temperature (when the largest logit is unique), and that a very low temperature
# ($\tau = 0.01$) comes close to it on the trained model's logits after "The attention".
#
# <details>
# <summary>Solution</summary>
#
# With $k = 1$ only the largest logit survives step 2 (if it is unique; the helper keeps
# ties), and the softmax of a single finite
# number is 1. As $\tau \to 0$, $p_i \propto \exp((z_i - z_{\max})/\tau)$ sends every term
# with $z_i < z_{\max}$ to 0, so the distribution tends to the same one-hot vector (when the
# largest logit is unique). The cell below checks both.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 1.
greedy = F.one_hot(logits.argmax(), V).float()
for temperature in (0.5, 1.0, 3.0):
    torch.testing.assert_close(next_token_probs(logits, temperature, 1), greedy)
cold = next_token_probs(logits, 0.01)
print(f"top_k = 1 gives the one-hot argmax at every temperature; at τ = 0.01 the argmax "
      f"gets {'more than 0.99' if cold.max() > 0.99 else 'at most 0.99'} of the mass")
assert cold.max() > 0.99, f"argmax mass {cold.max():.4f}"

# %% [markdown]
# **2. What tying saves.** How many parameters does the chapter's model have with and without
# weight tying (`tie_weights=False`)? What share of the model is the $n_\text{vocab} \times D$ matrix?
#
# <details>
# <summary>Solution</summary>
#
# Untying adds a second $n_\text{vocab} \times D$ matrix, $96 \times 48 = 4{,}608$ parameters, 7 % of
# the untied model; the larger the vocabulary, the more tying saves. The cell below counts.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 2.
untied = GPT(V, d_model=D, num_heads=H, ffn_hidden=4 * D, num_layers=2, max_len=T_max,
             tie_weights=False)
print(f"tied {count(model):,}, untied {count(untied):,}: "
      f"{count(untied) - count(model):,} more, the V x D matrix is "
      f"{V * D / count(untied):.0%} of the untied model")
assert count(untied) - count(model) == V * D, f"got {count(untied) - count(model)}"

# %% [markdown]
# **3. Mean zero, no difference.** Show numerically that for a token whose features have mean
# 0, RMSNorm and LayerNorm (same gain, no shift) give the same output, and that they differ
# for a token whose features all equal 5. What does each return for that constant token?
#
# <details>
# <summary>Solution</summary>
#
# For a mean-zero token, $\sigma^2 = \frac1D\sum x_i^2$ is the mean square, so the two
# formulas coincide. For the constant token, layer norm subtracts the mean and returns the
# zero vector (chapter 8, exercise 2); RMSNorm divides 5 by its root mean square, 5, and
# returns a vector of ones (times the gain): it keeps the direction of the token, which
# layer norm removes along the all-ones direction.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 3.
zero_mean = torch.randn(1, D, generator=torch.Generator().manual_seed(0))
zero_mean = zero_mean - zero_mean.mean()
torch.testing.assert_close(RMSNorm(D)(zero_mean), LayerNorm(D)(zero_mean), atol=1e-4, rtol=1e-4)
constant = torch.full((1, D), 5.0)
print("mean-zero token: RMSNorm = LayerNorm")
print(f"constant token: LayerNorm gives {LayerNorm(D)(constant).abs().max():.1f} everywhere, "
      f"RMSNorm gives {RMSNorm(D)(constant).mean():.2f} everywhere")

# %% [markdown]
# **4. A longer memory?** The model reads at most 32 characters. Would a window of 64 lower
# the loss? Predict, then train the chapter's model with `max_len=64` and `block_size=64`
# (same steps, same batch of windows) and compare its validation loss per character with the
# chapter's model's, each measured on windows of its own length, over five seeds.
#
# <details>
# <summary>Solution</summary>
#
# Probably little or not at all at this scale (it may even rise at the same number of steps): a model that has learned mostly letter pairs and
# short words uses a few characters of context, and 300 steps are too few to learn
# dependencies 50 characters long. Each step also costs more. This is a
# prediction, not a result: the chapter does not run it (ten runs of the larger model do not
# fit its time budget). Run it, and report the median and range over seeds.
#
# </details>
