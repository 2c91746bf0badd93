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
# # 5. Self-attention
#
# In chapter 2 the query and the keys came from two different places: a test input looked up
# training points. Now every element of a sequence asks every other element of the *same*
# sequence what is relevant to it, and is rewritten by the answer. Chapter 4 already ran such a
# layer to show what padding does to it; this chapter makes it the subject. Self-attention is
# the layer that the Transformer of *Attention Is All You Need* [[Vaswani et al., 2017]](../book/references.bib#vaswani2017) is built
# from. It takes a set of vectors of any size and returns one new vector per input, each
# computed from the whole set at once, with a number of parameters that does not depend on the
# length.
#
# **What you will learn**
#
# - how words, speech and molecules become *sets of vectors*, and the three kinds of output a
#   model can produce from such a set;
# - why a fully connected layer over a window of neighbours cannot take a whole sequence into
#   account, and how [self-attention](../book/glossary.md#term-self-attention) does, written out one position at a time and then
#   as one matrix product, $\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$;
# - that self-attention ignores the order of its inputs, proved and shown in code, and why
#   that makes positional information necessary;
# - what self-attention costs compared with recurrent and convolutional layers, counted on
#   paper and timed on this machine;
# - how masks adapt it to long speech (truncated attention), to images (where $k^2$ heads
#   whose weights depend only on position reproduce a $k \times k$ convolution, and one masked
#   head does not) and to graphs;
# - a first look at cross-attention, where queries and keys come from two different sequences.
#
# You need the attention recipe of chapters 2 and 3 (score, softmax, weighted average) and the
# boolean masks of chapter 4 (True = may attend).

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from helpers.attention import masked_softmax, scaled_dot_product_attention
from helpers.checks import check_shape
from helpers.figures.plotting import heatmap
from helpers.figures.widgets import slider_figure, slider_heatmap
from helpers.masks import adjacency_mask, band_mask, causal_mask, grid_mask, reachable
from helpers.measure import loglog_slope, time_call
from helpers.seeding import set_seed
from helpers.selfattention import SelfAttention, windowed_attention
from helpers.tasks.images import image_to_patches

torch.set_num_threads(1)  # small tensors: one thread is as fast, and timings are steadier
set_seed(0)

# %% [markdown]
# ## Inputs that are sets of vectors
#
# The simplest networks take one vector and return a number or a class. Many inputs are not
# one vector but a *set* of them, and a set whose size changes from one example to the next: a
# sentence is a list of words, a recording a list of short sound snippets, a molecule a
# collection of atoms. Each element becomes a vector, the example becomes a matrix with one row
# per element, and the number of rows varies.
#
# ### Words: one-hot vectors and embeddings
#
# The plainest way to turn a word into a vector is a [one-hot encoding](../book/glossary.md#term-one-hot-encoding): number the words
# of a vocabulary of size $n_\text{vocab}$ and represent word $i$ by the vector $e_i \in \mathbb{R}^{n_\text{vocab}}$, with a
# 1 in place $i$ and 0 everywhere else. It has two faults. The vectors are as long as the
# vocabulary (tens of thousands of numbers for one word), and any two different words are
# orthogonal, so *cat* is exactly as far from *dog* as from *truck*: the encoding carries no
# meaning. A [word embedding](../book/glossary.md#term-word-embedding) instead gives each word a short dense vector, a row of a table $W_\text{emb} \in \mathbb{R}^{n_\text{vocab} \times D}$ with $D$ in the hundreds, learned so that words used in
# similar ways get similar vectors. Below, a hand-made three-feature table (how much a word is
# about animals, about vehicles, about an action) stands in for a learned one.

# %%
vocab = ["cat", "dog", "car", "truck", "runs", "drives"]
word_ids = torch.arange(len(vocab))
one_hot = F.one_hot(word_ids).float()  # (V, V): one row per word
embedding_table = torch.tensor([  # (V, D) with D = 3 features: animal, vehicle, action
    [0.9, 0.1, 0.0], [0.8, 0.2, 0.1], [0.1, 0.9, 0.0],
    [0.0, 1.0, 0.1], [0.3, 0.0, 0.9], [0.0, 0.4, 0.9]])


def cosine(table, a, b):
    return F.cosine_similarity(table[vocab.index(a)], table[vocab.index(b)], dim=0).item()


print(f"{'pair':>14} {'one-hot':>8} {'embedding':>10}")
for a, b in [("cat", "dog"), ("cat", "truck"), ("car", "truck"), ("runs", "drives")]:
    print(f"{a + ' ~ ' + b:>14} {cosine(one_hot, a, b):8.4f} "
          f"{cosine(embedding_table, a, b):10.4f}")

embed = nn.Embedding.from_pretrained(embedding_table)  # a lookup table...
torch.testing.assert_close(embed(word_ids), one_hot @ embedding_table)  # ...= one-hot @ E
sentence = torch.tensor([vocab.index(w) for w in ["dog", "runs"]])
print("a 2-word sentence as a set of vectors:", tuple(embed(sentence).shape))

# %% [markdown]
# Every one-hot pair has similarity 0; the embedding puts *cat* next to *dog* and *car* next to
# *truck*. The last check shows what `nn.Embedding` is: multiplying a one-hot vector by the
# table picks out one row, so the embedding layer is a linear layer on one-hot inputs that
# skips the multiplication. A sentence of $T$ words becomes a $(T, D)$ matrix.
#
# ### Speech: frames
#
# A microphone delivers a waveform, typically 16,000 numbers per second. Speech systems cut it
# into overlapping windows of 25 ms (400 samples) taken every 10 ms (160 samples), and
# describe each window by one vector, a [frame](../book/glossary.md#term-speech-frame): the energy in each of a few dozen
# frequency bands (typically 40 to 80 log-mel energies, or 39 numbers: 13 mel-frequency cepstral coefficients, MFCCs, with their
# first and second differences over time). One second of audio
# becomes about 100 vectors. The cell below synthesises one second of a gliding tone with two
# harmonics, adds a burst of noise (a hiss, like an *s*), and computes 40 log band energies per
# frame.

# %%
set_seed(0)
sample_rate, frame_length, hop_length = 16_000, 400, 160  # 25 ms windows every 10 ms
time_axis = torch.arange(sample_rate) / sample_rate  # one second
phase = 2 * math.pi * torch.cumsum(300 + 900 * time_axis, dim=0) / sample_rate  # 300->1200 Hz
waveform = sum(torch.sin(h * phase) / h for h in (1, 2, 3))
waveform[6000:8000] += 0.5 * torch.randn(2000)  # 125 ms of hiss

frames = waveform.unfold(0, frame_length, hop_length)  # (T, 400): overlapping windows
power = torch.fft.rfft(frames * torch.hann_window(frame_length), dim=1).abs() ** 2
features = torch.log(power[:, :200].reshape(-1, 40, 5).mean(dim=2) + 1e-3)  # (T, 40)
assert 13 * 3 == 39  # MFCC features: 13 coefficients, their first and second differences
num_frames = 1 + (sample_rate - frame_length) // hop_length
check_shape(features, (num_frames, 40))
hiss_frames = [t for t in range(num_frames)  # windows that overlap samples 6000 to 7999
               if t * hop_length < 8000 and t * hop_length + frame_length > 6000]
high_bands = features[:, 30:].mean(dim=1)  # (T,): energy of the top quarter, 6 to 8 kHz
loud = (high_bands > high_bands.median() + 3).nonzero().flatten().tolist()
assert loud == hiss_frames == list(range(36, 50)), f"got {loud=}, {hiss_frames=}, {list(range(36, 50))=}"  # the hiss lights up exactly these
print(f"1 s of audio: {sample_rate} samples -> {num_frames} frames of 40 numbers")
print(f"1 min of audio: {1 + (60 * sample_rate - frame_length) // hop_length} frames")

# %% mystnb={"image": {"alt": "A heatmap of 40 frequency bands (rows) by 98 frames (columns). Three bright lines rise gently from left to right near the bottom (the tone and its harmonics), and a bright vertical block spanning all bands sits at frames 36 to 49 (the hiss)."}}
fig, ax = plt.subplots(figsize=(5.4, 3.0))
heatmap(features.T.flip(0), ax=ax, vmin=None, xlabel="frame (one every 10 ms)",
        ylabel="frequency band (high at top)", title="one second of sound: 98 vectors")
ax.set_yticks([0, 39], labels=["8 kHz", "0 Hz"])
fig.axes[-1].set_ylabel("log band energy")  # the colour bar
fig.tight_layout()

# %% [markdown]
# *Each column of the heatmap is one vector of the set.* The tone and its two harmonics are the
# three lines rising from left to right; the hiss fills every band in the 14 frames whose
# windows overlap its 125 ms (frames 36 to 49); the colour is the logarithm of each band's
# energy. A
# minute of speech is 5,998 frames, which will matter later: self-attention compares every
# frame with every other.
#
# ### Graphs: nodes as vectors
#
# A graph is a set of nodes joined by edges, and each node can carry a vector of features: a
# person in a social network (age, interests), an atom in a molecule. Take alanine, one of the
# amino acids, and keep its six heavy atoms (hydrogens are counted, not drawn): the amino
# nitrogen N, the central carbon Cα, the methyl carbon Cβ, the carboxyl carbon C and its two
# oxygens. Each atom becomes a vector of four features, one-hot element (C, N, O) plus the number
# of hydrogens attached. The set of six vectors says *what* the atoms are; the edges, kept
# separately, say *how they are joined*. We use both at the end of the chapter.

# %%
atoms = ["N", "Cα", "Cβ", "C", "O", "OH"]
hydrogens = torch.tensor([2.0, 1.0, 3.0, 0.0, 0.0, 1.0])
element = torch.tensor([1, 0, 0, 0, 2, 2])  # 0 = C, 1 = N, 2 = O
node_features = torch.cat([F.one_hot(element, 3).float(), hydrogens[:, None]], dim=1)
bonds = [(0, 1), (1, 2), (1, 3), (3, 4), (3, 5)]  # N-Cα, Cα-Cβ, Cα-C, C=O, C-OH

print(f"{'atom':>4}  C  N  O  H")
for name, row in zip(atoms, node_features.int().tolist()):
    print(f"{name:>4} " + " ".join(f"{v:2d}" for v in row))
print("bonds:", ", ".join(f"{atoms[i]}-{atoms[j]}" for i, j in bonds))

# %% [markdown]
# ### Three kinds of output
#
# Given a set of $T$ vectors, a model can be asked for three kinds of answer.
#
# 1. **One label per vector** ($T$ in, $T$ out): [sequence labelling](../book/glossary.md#term-sequence-labelling). In
#    [part-of-speech tagging](../book/glossary.md#term-part-of-speech-tagging) each word gets its grammatical role (*I saw a saw*: pronoun,
#    verb, determiner, noun); in speech, each frame can get the phoneme it belongs to; in a
#    social network, each person a predicted interest.
# 2. **One label for the whole set**: [sentiment analysis](../book/glossary.md#term-sentiment-analysis) reads a review and says
#    positive or negative; a speaker is identified from a recording; a molecule is predicted
#    to be toxic or not.
# 3. **A sequence whose length the model decides**:
#    [sequence-to-sequence](../book/glossary.md#term-sequence-to-sequence-seq2seq) tasks such as machine
#    translation or speech recognition, where 4 words in may be 5 words out.
#
# Self-attention, the subject of this chapter, produces the first kind: one new vector per
# input vector. The second is a pooling and a classifier on top of it; the third needs a decoder
# and cross-attention, previewed at the end of the chapter and built in chapter 8. Here are the
# shapes of the first two, with a random (B, T, D) tensor standing in for the vectors.

# %%
set_seed(0)
batch_size, num_positions, d_model, num_tags, num_classes = 2, 4, 8, 5, 2
vectors = torch.randn(batch_size, num_positions, d_model)  # (B, T, D)
tagger = nn.Linear(d_model, num_tags)  # applied to every position with the same weights
classifier = nn.Linear(d_model, num_classes)

tag_scores = tagger(vectors)  # (B, T, num_tags): one label per vector
sentence_scores = classifier(vectors.mean(dim=1))  # pool over T, then (B, num_classes)
check_shape(tag_scores, (batch_size, num_positions, num_tags))
check_shape(sentence_scores, (batch_size, num_classes))
print(f"one label per vector:   {tuple(vectors.shape)} -> {tuple(tag_scores.shape)}")
print(f"one label per sequence: {tuple(vectors.shape)} -> {tuple(sentence_scores.shape)}")

# %% [markdown]
# ## Why a fully connected layer is not enough
#
# Take sequence labelling: tag every word of *I saw a saw*. The obvious model applies one
# [fully connected layer](../book/glossary.md#term-fully-connected-layer) to each word vector separately, with the same weights at every
# position. It fails on this very sentence: the two *saw*s are the same word, so they have the
# same vector, get the same scores and the same tag, although the first is a verb and the second
# a noun.

# %%
set_seed(1)
words = ["I", "saw", "a", "saw"]
word_index = {"I": 0, "saw": 1, "a": 2}
d_word = 8
word_embedding = nn.Embedding(len(word_index), d_word)
x_saw = word_embedding(torch.tensor([word_index[w] for w in words])).detach()  # (T, D)
per_word_tagger = nn.Linear(d_word, 4)  # scores for pronoun, verb, determiner, noun

scores_alone = per_word_tagger(x_saw)  # (T, 4): each word on its own
gap = (scores_alone[1] - scores_alone[3]).abs().max().item()
print(f"largest difference between the scores of the two 'saw's: {gap:.4f}")
assert gap == 0.0, f"got {gap=}"


# %% [markdown]
# The remedy of the pre-attention era was a window: feed the layer each word *with its
# neighbours*, the concatenation $[x_{t-c}; \dots; x_t; \dots; x_{t+c}]$ of $2c + 1$ vectors
# (zero vectors beyond the ends). With $c = 1$ the first *saw* sees *I saw a* and the second
# *a saw* plus padding, and their scores part.

# %%
def windows_of(x, context):
    # Row t: x[t - context], ..., x[t + context] concatenated (zeros beyond the ends).
    padded = F.pad(x, (0, 0, context, context))  # (T + 2c, D)
    return padded.unfold(0, 2 * context + 1, 1).transpose(1, 2).flatten(1)  # (T, (2c+1) D)


set_seed(1)
window_tagger = nn.Linear(3 * d_word, 4)  # a window of c = 1 on each side
scores_window = window_tagger(windows_of(x_saw, context=1))  # (T, 4)
check_shape(windows_of(x_saw, context=1), (4, 3 * d_word))
gap = (scores_window[1] - scores_window[3]).abs().max().item()
print(f"with a window of 3 words, the two 'saw's differ by up to {gap:.4f}")
assert gap > 0.1, f"got {gap=}"

# %% [markdown]
# A window helps, but only within its reach. Whether *saw* is a verb can depend on a word far
# away, and a window that lets *every* position see the *whole* sequence must stretch $T - 1$
# words either side: the layer has $(2T - 1)\,D$ inputs, and $T$ must be fixed in advance at the
# longest sequence the model will ever meet. The table counts the weights of such a layer with
# $D = 512$ inputs per vector and 512 outputs, against a self-attention layer (built in the next
# section) with the same sizes, whose three $D \times D$ projection matrices serve every length.

# %%
d = 512
self_attention_params = sum(p.numel() for p in SelfAttention(d).parameters())
print(f"{'T':>6} {'window inputs':>14} {'window weights':>16} {'self-attention':>15}")
for length in [10, 100, 1_000, 6_000]:
    window_inputs = (2 * length - 1) * d
    print(f"{length:6d} {window_inputs:14,d} {window_inputs * d:16,d} "
          f"{self_attention_params:15,d}")
assert self_attention_params == 3 * d * d, f"got {self_attention_params=}, {3 * d * d=}"

# %% [markdown]
# For a minute of speech (6,000 frames) the window layer would need more than three billion
# weights, each tied to one relative position; most of them belong to offsets so large that
# only the rare sequences that long ever train them.
# We want a layer that looks at the whole sequence, with a fixed and small number of parameters
# shared by all positions, that works for any length. Attention pooling (chapter 2) already has
# the right shape: it turns any number of key–value pairs into one weighted average. Let every
# position pose a query to all the positions of its own sequence.
#
# ## Self-attention, one output at a time
#
# In [self-attention](../book/glossary.md#term-self-attention) the queries, the keys and the values all come from the same vectors.
# Stack the $T$ input vectors as the rows of $X \in \mathbb{R}^{T \times D}$. Three learned
# matrices $W_q, W_k \in \mathbb{R}^{D \times d_k}$ and $W_v \in \mathbb{R}^{D \times d_v}$ give
# every position $i$ three roles:
#
# $$
# q_i = x_i W_q, \qquad k_i = x_i W_k, \qquad v_i = x_i W_v ,
# $$
#
# a query (what position $i$ is looking for), a key (how it presents itself to the others) and
# a value (what it passes on when attended to). To compute the output of position 1, score its
# query against every key, including its own, with the
# [scaled dot product](../book/glossary.md#term-scaled-dot-product-attention) of chapter 3,
#
# $$
# a_{1,i} = \frac{q_1 \cdot k_i}{\sqrt{d_k}}, \qquad i = 1, \dots, T,
# $$
#
# turn the scores into [attention weights](../book/glossary.md#term-attention-weight) with a softmax over $i$,
#
# $$
# \alpha_{1,i} = \frac{\exp a_{1,i}}{\sum_{j=1}^{T} \exp a_{1,j}},
# $$
#
# and return the weighted average of the values,
#
# $$
# o_1 = \sum_{i=1}^{T} \alpha_{1,i}\, v_i .
# $$
#
# The dot product is one choice of scoring function; the
# [additive score](../book/glossary.md#term-additive-attention) $\mathbf w_v^\top \tanh(\mathbf W_q \mathbf q + \mathbf W_k \mathbf k)$ of chapter 3 works too. The Transformer uses the scaled dot product because all the pairs are scored by one
# matrix product, which is faster and more space-efficient
# than the additive score, and dividing by $\sqrt{d_k}$ stops the scores' spread from growing
# with $d_k$ ([Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section 3.2.1 and its footnote 4; chapter 3). Here is the
# recipe for the first word of a five-word sentence, one step at a time (the math counts
# positions from 1, the code from 0).

# %%
set_seed(2)
tokens = ["attention", "is", "all", "you", "need"]
num_tokens, d_in, d_k, d_v = len(tokens), 6, 4, 4
x = torch.randn(num_tokens, d_in)  # (T, D): stand-ins for the five word embeddings
w_q, w_k, w_v = (torch.randn(d_in, size) / math.sqrt(d_in) for size in (d_k, d_k, d_v))

q_1 = x[0] @ w_q  # (d_k,): the query of the first word
scores_1 = torch.stack([q_1 @ (x[i] @ w_k) / math.sqrt(d_k) for i in range(num_tokens)])
weights_1 = torch.exp(scores_1) / torch.exp(scores_1).sum()  # softmax over the T keys
b_1 = sum(weights_1[i] * (x[i] @ w_v) for i in range(num_tokens))  # (d_v,)

print(f"query 'attention' against each key:")
for token, score, weight in zip(tokens, scores_1, weights_1):
    print(f"  {token:>9}: score {score:+.4f} -> weight {weight:.4f}")
print(f"weights sum to {weights_1.sum():.4f}")
print("b_1 =", [round(v, 4) for v in b_1.tolist()])

# %% [markdown]
# ## All positions at once: the matrix form
#
# Nothing in the computation of $o_1$ depends on any other output, so all $T$ outputs can be
# computed at the same time. Stacking the queries, keys and values as rows,
# $Q = XW_q$, $K = XW_k$, $V = XW_v$, every score is an entry of one matrix product, every
# softmax is taken along a row, and every weighted average is a row of a second product:
#
# $$
# A = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) \in \mathbb{R}^{T \times T},
# \qquad
# O = A V \in \mathbb{R}^{T \times d_v}.
# $$
#
# Row $i$ of $A$ holds the weights $\alpha_{i,1}, \dots, \alpha_{i,T}$ of query $i$, and row
# $i$ of $O$ is $o_i$. This is the scaled dot-product attention of chapter 3 called with one
# argument three times: in code, self-attention is `attention(x, x, x)` with the projections
# inside. Below, the matrix form is checked against the step-by-step output, against a
# position-by-position loop, against the book's helper and PyTorch's fused kernel, and
# against the module `helpers.selfattention.SelfAttention`, whose three `nn.Linear` maps hold
# the same matrices.

# %%
queries, keys, values = x @ w_q, x @ w_k, x @ w_v  # (T, d_k), (T, d_k), (T, d_v)
attention_weights = torch.softmax(queries @ keys.T / math.sqrt(d_k), dim=-1)  # (T, T)
outputs = attention_weights @ values  # (T, d_v)
torch.testing.assert_close(attention_weights[0], weights_1)
torch.testing.assert_close(outputs[0], b_1)


def one_output(i):
    weights_i = torch.softmax(queries[i] @ keys.T / math.sqrt(d_k), dim=0)  # (T,)
    return weights_i @ values  # (d_v,)


torch.testing.assert_close(torch.stack([one_output(i) for i in range(num_tokens)]), outputs)
helper_out, helper_weights = scaled_dot_product_attention(queries, keys, values)
torch.testing.assert_close(helper_out, outputs)
torch.testing.assert_close(helper_weights, attention_weights)
torch.testing.assert_close(F.scaled_dot_product_attention(queries, keys, values), outputs)

layer = SelfAttention(d_in, d_k=d_k, d_v=d_v)
with torch.no_grad():  # nn.Linear stores W transposed: y = x @ weight.T
    for linear, matrix in [(layer.w_q, w_q), (layer.w_k, w_k), (layer.w_v, w_v)]:
        linear.weight.copy_(matrix.T)
torch.testing.assert_close(layer(x)[0], outputs)
print("step by step, row by row, matrix form, helper, torch and module agree")

# %% mystnb={"image": {"alt": "A 5 by 5 heatmap of attention weights with the five words on both axes and each weight written in its cell. Every row sums to 1 and spreads over all five keys; the largest weights, about 0.5, are those of 'attention' and 'need' on 'all' and of 'all' on 'attention'."}}
fig, ax = plt.subplots(figsize=(4.8, 3.8))
heatmap(attention_weights, ax=ax, annotate=True, xticklabels=tokens, yticklabels=tokens,
        xlabel="keys (attended to)", ylabel="queries (attending)",
        title="self-attention weights (random $W$)")
ax.tick_params(axis="x", labelrotation=30)
fig.tight_layout()

# %% [markdown]
# *Each row is one word's attention over the sentence; the first row is the table printed
# above.* The matrices here are random, so the pattern means nothing yet; training shapes
# $W_q$, $W_k$, $W_v$ so that, for instance, a pronoun's query matches the key of the noun it
# refers to. In a visualisation of a trained Transformer ([Vaswani et al. [2017]](../book/references.bib#vaswani2017), Figure 4: two heads of
# layer 5 of 6), the word *its* in *The Law will never
# be perfect, but its application should be just* attends mostly to *Law*, far back in the
# sentence, and to *application*, right after it: the long-range link takes a single step.
# (Such a map shows where the weight goes, not what the prediction depends on. For recurrent
# encoders with attention on text classification, question answering and inference,
# [Jain and Wallace [2019]](../book/references.bib#jain2019) found the weights frequently uncorrelated with
# gradient-based measures of importance, and could construct very different weights that gave
# the same prediction: their abstract and §4.)
#
# ### The same layer for any length
#
# The three matrices are the only parameters, and nothing in them mentions $T$. The same layer
# takes a sequence of 3, 7 or 50 vectors; what grows with the length is the weight matrix $A$,
# $T \times T$ numbers computed afresh from the content of each input. However long the input,
# each output is one vector of size $d_v$: a weighted average of $T$ values is still one value.

# %%
set_seed(3)
layer = SelfAttention(d_in, d_k=d_k, d_v=d_v)
num_params = sum(p.numel() for p in layer.parameters())
print(f"{'T':>3} {'output':>9} {'weights':>9} {'parameters':>11}")
for length in [3, 7, 50]:
    out, weights = layer(torch.randn(length, d_in))
    check_shape(out, (length, d_v))
    check_shape(weights, (length, length))
    print(f"{length:3d} {str(tuple(out.shape)):>9} {str(tuple(weights.shape)):>9} "
          f"{num_params:11d}")

# %% [markdown]
# ### Stacking: attention between, fully connected within
#
# Self-attention mixes information *across* positions, but what it hands each position is a
# convex combination of the value vectors $v_j = x_j W_v$: the weights are non-negative and sum
# to 1, so every output lies in the convex hull of the values. The weights depend on the input
# in a strongly nonlinear way, through the softmax of the scores (doubling the input does not
# double the output, as the cell below shows), but once they are computed the layer can only
# mix values: within a position it applies nothing but the linear map $W_v$, shared by all
# positions, and no nonlinearity. A Transformer therefore
# alternates it with a
# [position-wise feed-forward network](../book/glossary.md#term-position-wise-feed-forward-network-FFN), an MLP
# applied to every position separately with shared weights, which processes *within* a
# position what attention has gathered. The pattern is self-attention, then a fully connected
# network, then self-attention again, and so on, with a final layer giving one label per
# position. (The real Transformer block adds residual connections and layer normalisation;
# chapter 8 builds it.)

# %%
x_hull = torch.randn(6, d_in)  # (T, D), with the layer of the cell above
with torch.no_grad():
    out_hull, _ = layer(x_hull)  # (T, d_v)
    values_hull = layer.w_v(x_hull)  # (T, d_v): the values being mixed
    doubled_gap = (layer(2 * x_hull)[0] - 2 * out_hull).abs().max().item()
inside = ((out_hull >= values_hull.amin(dim=0) - 1e-6)
          & (out_hull <= values_hull.amax(dim=0) + 1e-6))  # (T, d_v)
print(f"every output coordinate lies between the values' smallest and largest: "
      f"{inside.all().item()}")
print(f"SA(2X) = 2 SA(X), as for a linear map: {doubled_gap < 1e-6}")
assert inside.all() and doubled_gap > 0.05, f"doubling gap {doubled_gap:.4f}"


# %%
class TinyTagger(nn.Module):
    def __init__(self, d_model, hidden, num_tags, num_layers=2):
        super().__init__()
        self.attentions = nn.ModuleList(SelfAttention(d_model) for _ in range(num_layers))
        self.ffns = nn.ModuleList(
            nn.Sequential(nn.Linear(d_model, hidden), nn.ReLU(), nn.Linear(hidden, d_model))
            for _ in range(num_layers))
        self.head = nn.Linear(d_model, num_tags)

    def forward(self, x):  # x: (B, T, D)
        for attention, ffn in zip(self.attentions, self.ffns):
            x, _ = attention(x)  # mix across positions: (B, T, D)
            x = ffn(x)  # process each position on its own: (B, T, D)
        return self.head(x)  # (B, T, num_tags)


set_seed(3)
tagger = TinyTagger(d_model=8, hidden=16, num_tags=4)
print("tags for a batch of 2 sequences of 9:", tuple(tagger(torch.randn(2, 9, 8)).shape))

# %% [markdown]
# ## Self-attention ignores order
#
# Go back to *I saw a saw*. The window tagger told the two *saw*s apart because it knew which
# neighbour sat on which side. Does self-attention, which sees the whole sentence, do better?
# Look at the formulas: position $i$ enters only through its vector $x_i$. Nothing says which
# row of $X$ is first.
#
# Make that precise. Reorder the input rows with a permutation matrix $\Pi$ (each row and column
# holds a single 1, and $\Pi^\top \Pi = I$). The queries, keys and values are reordered the same
# way, $(\Pi X)W_q = \Pi Q$, and so on. The scores become $\Pi Q(\Pi K)^\top = \Pi\,QK^\top \Pi^\top$: the same
# numbers with rows and columns reordered. A softmax along each row does not care in which order
# the entries of the row come, nor in which order the rows are taken, so
# $\operatorname{softmax}(\Pi Z \Pi^\top) = \Pi \operatorname{softmax}(Z) \Pi^\top$. Therefore
#
# $$
# \operatorname{SA}(\Pi X)
# = \Pi A \Pi^\top \, \Pi V
# = \Pi A V
# = \Pi \operatorname{SA}(X).
# $$
#
# Shuffling the inputs shuffles the outputs in the same way and changes nothing else. A layer
# with this property is [permutation-equivariant](../book/glossary.md#term-permutation-equivariance).
# It is often called permutation-*invariant* instead, in lecture notes and blog posts among
# others. For its per-position outputs that is wrong: an invariant layer would return the same
# outputs after the shuffle, and these move with their inputs. Only a summary that forgets the
# positions, such as the mean of the outputs, is invariant; the cell checks both.

# %%
set_seed(4)
layer = SelfAttention(d_model=6)
x_set = torch.randn(7, 6)  # (T, D)
perm = torch.randperm(7)
out, weights = layer(x_set)
out_shuffled, weights_shuffled = layer(x_set[perm])  # x[perm] is P X
torch.testing.assert_close(out_shuffled, out[perm])  # SA(PX) = P SA(X)
torch.testing.assert_close(weights_shuffled, weights[perm][:, perm])  # A -> P A P^T
print("permutation:", perm.tolist())
print("SA(PX) = P SA(X) and the weights are P A P^T")
invariant = torch.allclose(out_shuffled, out)  # invariance would need SA(PX) = SA(X)
torch.testing.assert_close(out_shuffled.mean(dim=0), out.mean(dim=0))  # pooled: invariant
print(f"SA(PX) = SA(X), invariance: {invariant}; mean over positions unchanged: True")
assert not invariant

# %% [markdown]
# Equivariance is exactly right for a set, such as the atoms of a molecule, which have no
# order. For a sentence it is a blind spot. *Dog bites man* and *man bites dog* contain the same
# three words, so they are permutations of each other, and self-attention gives each word the
# same output in both; pool the outputs into one sentence vector and the two sentences are
# indistinguishable. And the two *saw*s of *I saw a saw* are the same vector at two positions,
# so they are still given the same output.

# %%
set_seed(5)
news_vocab = {"dog": 0, "bites": 1, "man": 2}
news_embedding = nn.Embedding(3, 6)
layer = SelfAttention(d_model=6)
first = layer(news_embedding(torch.tensor([0, 1, 2])))[0]  # dog bites man
second = layer(news_embedding(torch.tensor([2, 1, 0])))[0]  # man bites dog
for word, i, j in [("dog", 0, 2), ("bites", 1, 1), ("man", 2, 0)]:
    print(f"output of '{word}': largest difference between the sentences "
          f"{(first[i] - second[j]).abs().max():.4f}")
torch.testing.assert_close(first.mean(dim=0), second.mean(dim=0))  # pooled: identical

set_seed(1)
saw_layer = SelfAttention(d_word)
saw_out, _ = saw_layer(x_saw)
print(f"'I saw a saw': the two 'saw' outputs differ by "
      f"{(saw_out[1] - saw_out[3]).abs().max():.4f}")

# %% [markdown]
# The fix is to put the position into the vector. Add to each $x_t$ a vector $p_t$ that depends
# only on the position $t$, and identical words at different positions are no longer identical
# inputs. Chapter 7 designs these [positional encodings](../book/glossary.md#term-positional-encoding) (sinusoids,
# or a learned table); here any fixed table of random vectors shows the effect.

# %%
set_seed(6)
position_table = 0.5 * torch.randn(4, d_word)  # p_t for t = 0..3: a stand-in for chapter 7
saw_out_positions, _ = saw_layer(x_saw + position_table)
gap = (saw_out_positions[1] - saw_out_positions[3]).abs().max().item()
print(f"with positions added, the two 'saw' outputs differ by up to {gap:.4f}")
assert gap > 0.05, f"got {gap=}"

# %% [markdown]
# A recurrent network, met in the next section, needs no such table. It reads the inputs one
# after another, and its state $h_t$ is built on $h_{t-1}$, so the same vector read at a
# different step meets a different state and gives a different output: an RNN carries the
# order of its inputs implicitly, in the way it computes. Self-attention computes every
# position the same way, from the whole set at once, and has to be *told* the order. The cell
# runs an untrained `nn.RNN` on the two examples that defeated self-attention, with no
# positions added.

# %%
set_seed(7)
saw_rnn, news_rnn = nn.RNN(d_word, d_word), nn.RNN(6, 6)  # h_t = tanh(x_t W_x + h_{t-1} W_h + b)
with torch.no_grad():
    saw_states, _ = saw_rnn(x_saw)  # (T, D): x_saw, no positions added
    pooled = [news_rnn(news_embedding(torch.tensor(ids)))[0].mean(dim=0)
              for ids in ([0, 1, 2], [2, 1, 0])]  # dog bites man, man bites dog
saw_gap = (saw_states[1] - saw_states[3]).abs().max().item()
news_gap = (pooled[0] - pooled[1]).abs().max().item()
print(f"RNN: the two 'saw' outputs differ by up to {saw_gap:.4f}")
print(f"RNN: pooled 'dog bites man' and 'man bites dog' differ by up to {news_gap:.4f}")
assert saw_gap > 0.05 and news_gap > 0.01, f"got {saw_gap=}, {news_gap=}"


# %% [markdown]
# ## Self-attention, recurrent and convolutional layers
#
# Before self-attention, two layers turned a sequence of vectors into another: the recurrent
# and the convolutional layer.
#
# A [recurrent neural network (RNN)](../book/glossary.md#term-recurrent-neural-network-RNN) reads the sequence
# in order, carrying a memory: $h_t = \tanh(x_t W_x + h_{t-1} W_h + b)$, and the output at
# position $t$ is computed from $h_t$. It has two weaknesses. Information from $x_1$ reaches
# $h_T$ only through $T - 1$ applications of the update, and is diluted or lost on the way (the
# gradient has to travel back the same path, and tends to vanish: a
# [vanishing gradient](../book/glossary.md#term-vanishing-gradient));
# and $h_t$ cannot be computed before $h_{t-1}$, so the $T$ steps run one after another however
# much parallel hardware is available. (What the sequential reading buys is the order: as the
# previous section showed, an RNN knows which input came first without being told. A
# bidirectional RNN also reads the sequence backwards,
# so every output depends on the whole sequence, but the paths are just as long.) A
# convolution of kernel size $k$ reads $k$ neighbouring vectors; it runs all positions in
# parallel, but one layer sees only $k$ positions, and a stack of $n_\text{layers}$ layers sees
# $n_\text{layers}(k - 1) + 1$: connecting the two ends of a long sequence takes many layers. Self-attention
# connects every pair of positions in one layer, and computes every position at once.
#
# *After [Vaswani et al. [2017]](../book/references.bib#vaswani2017), Table 1, with one addition: Table 1 gives the convolution's
# path length only as $\mathcal{O}(\log_k T)$, the dilated case; the $\mathcal{O}(T/k)$ of contiguous kernels is
# from the text of the paper's §4. Per layer, for $T$ positions of $D$ features (the paper's n and d), kernel size
# $k$, window $r$. "Sequential operations" counts the steps that must wait for each other;
# "maximum path length" the number of layers (or steps) a signal crosses between the two most
# distant positions.*
#
# | layer type | operations per layer | sequential operations | maximum path length |
# |---|---|---|---|
# | self-attention | $\mathcal{O}(T^2 \cdot D)$ | $\mathcal{O}(1)$ | $\mathcal{O}(1)$ |
# | recurrent | $\mathcal{O}(T \cdot D^2)$ | $\mathcal{O}(T)$ | $\mathcal{O}(T)$ |
# | convolutional | $\mathcal{O}(k \cdot T \cdot D^2)$ | $\mathcal{O}(1)$ | $\mathcal{O}(T/k)$, or $\mathcal{O}(\log_k T)$ dilated |
# | self-attention, window $r$ | $\mathcal{O}(r \cdot T \cdot D)$ | $\mathcal{O}(1)$ | $\mathcal{O}(T/r)$ |
#
# The last column is the [maximum path length](../book/glossary.md#term-maximum-path-length), and it can be measured rather than
# quoted. Describe one layer by a boolean matrix whose entry $(i, j)$ says whether output $i$
# reads input $j$; follow a signal from the first input upwards, layer after layer, and count
# the layers until it reaches the last output. For an RNN a "layer" is one time step, which
# reads the previous state and the current input; a dilated convolution of kernel 3 doubles
# the spacing of its three taps from one layer to the next, $1, 2, 4, \dots$ positions apart.

# %%
def layers_to_connect(layer_mask, length):
    # Follow input 0 upwards until it reaches output T - 1; return the number of layers.
    reached = F.one_hot(torch.tensor(0), length).bool()  # (T,)
    for depth in range(1, 10 * length):
        reached = (layer_mask(depth, length).double() @ reached.double()) > 0
        if reached[-1]:
            return depth


def dilated(depth, length):  # kernel 3, taps 2^(depth - 1) apart
    offset = (torch.arange(length)[:, None] - torch.arange(length)[None, :]).abs()
    return (offset == 0) | (offset == 2 ** (depth - 1))


layer_kinds = {
    "self-attention": lambda depth, length: torch.ones(length, length, dtype=torch.bool),
    "RNN (per step)": lambda depth, length: band_mask(length, 1) & causal_mask(length),
    "conv k=3": lambda depth, length: band_mask(length, 1),
    "conv k=9": lambda depth, length: band_mask(length, 4),
    "dilated k=3": dilated,
}
print(f"{'T':>5} " + " ".join(f"{name:>15}" for name in layer_kinds))
for length in [16, 64, 256]:
    hops = {name: layers_to_connect(mask, length) for name, mask in layer_kinds.items()}
    print(f"{length:5d} " + " ".join(f"{hops[name]:15d}" for name in layer_kinds))
    assert hops["self-attention"] == 1 and hops["RNN (per step)"] == length - 1, f"got {hops['self-attention']=}, {hops['RNN (per step)']=}, {length - 1=}"
    assert hops["conv k=3"] == length - 1 and hops["conv k=9"] == math.ceil((length - 1) / 4), f"got {hops['conv k=3']=}, {length - 1=}, {hops['conv k=9']=}, {math.ceil((length - 1) / 4)=}"
    assert hops["dilated k=3"] == math.ceil(math.log2(length)), f"got {hops['dilated k=3']=}, {math.ceil(math.log2(length))=}"

# %% [markdown]
# One layer of self-attention against $T - 1$ steps of an RNN, $\lceil (T - 1)/((k - 1)/2) \rceil$ layers
# of a convolution and $\lceil \log_2 T \rceil$ layers of the dilated one (logarithmic, as
# Table 1 says; the base is 2 rather than $k$ because these taps double their spacing each
# layer, as in WaveNet and ByteNet; spacings that grow by a factor $k$ would give $\log_k$). However far apart two words are, in
# self-attention the dependency between them is one step long, and the gradient that teaches
# it crosses one layer, not hundreds of time steps.
#
# Those two columns, parallel steps and short paths, are what self-attention wins; the first
# column is its price. Count the multiply–adds of one layer, with $D = 512$ as in
# the base Transformer ([Vaswani et al. [2017]](../book/references.bib#vaswani2017), §3). A self-attention layer has two parts: the
# three projections $XW_q$, $XW_k$, $XW_v$, $3TD^2$, and the *attention step* proper,
# $T^2 D$ for the scores $QK^\top$ and $T^2 D$ for the weighted sum $AV$. The plain RNN above
# costs $TD^2$ for $x_t W_x$ and $TD^2$ for $h_{t-1} W_h$, the convolution $kTD^2$. Table 1's
# $\mathcal{O}(T^2 D)$ and $\mathcal{O}(TD^2)$ are the attention step and the recurrence. The last column is the
# memory of one head's $T \times T$ score matrix in float32.

# %%
d, kernel = 512, 3
print(f"{'n':>6} {'attention step':>15} {'projections':>12} {'RNN':>10} {'conv k=3':>10} "
      f"{'step / RNN':>10} {'layer / RNN':>11} {'scores, MiB':>12}")
for n in [64, 256, 512, 1_024, 6_000, 50_176]:
    step_ops, projection_ops = 2 * n * n * d, 3 * n * d * d  # QK^T and AV; XW_q, XW_k, XW_v
    rnn_ops, conv_ops = 2 * n * d * d, kernel * n * d * d  # x_t W_x and h_{t-1} W_h; conv
    layer_ops = step_ops + projection_ops
    print(f"{n:6d} {step_ops / 1e6:13.1f} M {projection_ops / 1e6:10.1f} M "
          f"{rnn_ops / 1e6:8.1f} M {conv_ops / 1e6:8.1f} M {step_ops / rnn_ops:10.3f} "
          f"{layer_ops / rnn_ops:11.3f} {4 * n * n / 2**20:12.2f}")
    assert (step_ops < rnn_ops) == (n < d), f"got {step_ops < rnn_ops=}, {n < d=}"  # the attention step is cheaper exactly when n < d
    assert layer_ops / rnn_ops == 1.5 + n / d, f"got {layer_ops / rnn_ops=}, {1.5 + n / d=}"  # the whole layer: never cheaper by this count

# %% tags=["remove-cell"]
# Check the operation counts of gated RNNs and the crossovers stated above.
gru_512, lstm_512 = nn.GRU(d, d), nn.LSTM(d, d)
assert gru_512.weight_ih_l0.shape == gru_512.weight_hh_l0.shape == (3 * d, d), f"got {gru_512.weight_ih_l0.shape=}, {gru_512.weight_hh_l0.shape=}, {(3 * d, d)=}"  # 3 x (x W, h W)
assert lstm_512.weight_ih_l0.shape == lstm_512.weight_hh_l0.shape == (4 * d, d), f"got {lstm_512.weight_ih_l0.shape=}, {lstm_512.weight_hh_l0.shape=}, {(4 * d, d)=}"  # 4 x (x W, h W)
for width in (64, 512):
    for n in range(1, 4 * width):
        layer_ops = 3 * n * width**2 + 2 * n * n * width
        assert (layer_ops < 6 * n * width**2) == (n < 1.5 * width), f"got {layer_ops < 6 * n * width ** 2=}, {n < 1.5 * width=}"  # cheaper than a GRU
        assert (layer_ops < 8 * n * width**2) == (n < 2.5 * width), f"got {layer_ops < 8 * n * width ** 2=}, {n < 2.5 * width=}"  # cheaper than an LSTM
        assert layer_ops > 2 * n * width**2, f"got {layer_ops=}, {2 * n * width ** 2=}"  # never cheaper than the plain RNN
assert (1.5 * 512, 2.5 * 512, 1.5 * 64) == (768, 1_280, 96)
layer_128 = 3 * 128 * 64**2 + 2 * 128**2 * 64
assert layer_128 > 6 * 128 * 64**2, f"got {layer_128=}"  # at n = 128, d = 64 the count favours the GRU
for n in range(1, 8 * d):  # a block: + W^O (n d^2) and an FFN of width 4d (8 n d^2)
    assert (2 * n * n * d > (3 + 1 + 8) * n * d**2) == (n > 6 * d), f"block crossover at n = {n}"
assert 6 * 512 == 3_072

# %% [markdown]
# The attention step against the recurrence is $2T^2 D / (2T D^2) = T / D$: the attention
# step is the cheaper of the two while the sequence is shorter than the vector size, the usual
# case for sentences ($T$ in the tens, $D$ in the hundreds). That is the comparison of the
# paper's §4, which concludes that, in terms of computational complexity, self-attention layers
# are faster than recurrent ones when $T < D$. With
# the projections counted, though, a whole self-attention layer costs
# $3TD^2 + 2T^2 D = (1.5 + T/D) \cdot 2TD^2$, more than this plain tanh RNN at every length: the
# projections alone cost 1.5 times its recurrence. Gated RNNs do more work per step. A GRU
# computes the two products $x_t W$ and $h_{t-1} W$ three times (reset gate, update gate,
# candidate state), $6TD^2$; an LSTM four times (input, forget and output gates, candidate),
# $8TD^2$. Against them the whole self-attention layer is the cheaper while
# $2T^2 D < 3TD^2$, that is $T < 1.5D$ (GRU), and while $2T^2 D < 5TD^2$, $T < 2.5D$ (LSTM):
# up to 768 and 1,280 positions at $D = 512$. These counts compare one attention layer with one
# recurrent layer, and nothing else. In a Transformer block the attention layer also has its
# output projection $W^O$ ($TD^2$) and is followed by the feed-forward network ($8TD^2$ at the
# usual hidden width $F = 4D$); the block costs $12TD^2 + 2T^2 D$, and the attention step is its
# larger part only beyond $T = 6D$, 3,072 positions at $D = 512$. An RNN model has layers
# besides its recurrence too. So the count does not say that attention wastes arithmetic at
# short lengths: there the linear maps, which both kinds of model have, dominate. What
# self-attention wins in every case is the other two columns of Table 1, parallel steps and
# short paths. For a minute of speech ($T = 6000$) the
# scores of one head of one layer take 137 MiB; for the $224 \times 224 = 50{,}176$ pixels of an
# image, 9.4 GiB. That is why the speech and image sections below cut the set down.
#
# The counts are a model of the cost; here is the real thing. The cell below times one layer of
# each kind on this machine's CPU ($D = 64$, one thread, the fastest of a few runs) for
# sequences of 128 to 4,096 positions and plots the times on log–log axes, where a power law
# $\text{time} \propto T^p$ is a straight line of slope $p$. Timings vary from run to run, so the cell
# prints no numbers; it only checks, with a wide margin (and says so in a note, never an error,
# when other work on the machine blurs the timings), that over the four longest lengths
# the fitted slope is above 1.4 for self-attention (the count predicts 2) and below 1.5 for the
# convolution and the GRU (the count predicts 1 for both; on a busy machine the fastest
# convolutions, about a millisecond, are the noisiest), and, separately,
# that self-attention's fitted slope is the largest of the three. It also checks one ordering: at $D = 64$ the count
# puts the GRU level at $T = 96$ and ahead beyond it, yet at $T = 128$ self-attention is the faster of the two,
# because the GRU's 128 small steps run one after another, each paying a fixed cost. The count
# is a model of the time, not the time.

# %% mystnb={"image": {"alt": "Log-log plot of seconds per layer against sequence length from 128 to 4096. The self-attention line is steep, parallel to a dotted n-squared guide line over the longest sequences; the convolution and GRU lines rise with slope about 1, the GRU well above the convolution."}} tags=["nbval-ignore-output"]
sizes = [128, 256, 512, 1_024, 2_048, 4_096]
set_seed(7)
w_q64, w_k64, w_v64 = (torch.randn(64, 64) / 8 for _ in range(3))
conv1d = nn.Conv1d(64, 64, kernel_size=3, padding=1)
gru = nn.GRU(64, 64, batch_first=True)
timed_layers = {
    "self-attention": lambda x: scaled_dot_product_attention(x @ w_q64, x @ w_k64, x @ w_v64),
    "convolution, k = 3": lambda x: conv1d(x.T[None]),
    "GRU": lambda x: gru(x[None]),
}
seconds = {name: [] for name in timed_layers}
for n in sizes:
    x_long = torch.randn(n, 64)
    for name, run in timed_layers.items():
        repeats = 25 if name.startswith("conv") else (3 if n > 1_024 else 5)  # conv is fast
        seconds[name].append(time_call(lambda: run(x_long), repeats=repeats))
slopes = {name: loglog_slope(sizes[2:], times[2:]) for name, times in seconds.items()}
fitted = ", ".join(f"{name} {slope:.2f}" for name, slope in slopes.items())
expected = (slopes["self-attention"] > 1.4 and slopes["convolution, k = 3"] < 1.5
            and slopes["GRU"] < 1.5 and max(slopes, key=slopes.get) == "self-attention"
            and seconds["self-attention"][0] < seconds["GRU"][0])  # n = 128: the GRU is serial
if not expected:  # timings, not counts: other work on the machine can blur them (never an error)
    print(f"Note: this run's timings do not show the pattern the text describes (slopes: {fitted}; "
          f"n = 128: self-attention {seconds['self-attention'][0]:.1e} s, GRU "
          f"{seconds['GRU'][0]:.1e} s). Other work on the machine blurs timings: rerun the cell "
          "when the machine is quiet.")

fig, ax = plt.subplots(figsize=(4.8, 3.8))
for name, times in seconds.items():
    ax.loglog(sizes, times, "o-", label=f"{name} (slope {slopes[name]:.2f})")
ax.loglog(sizes, [seconds["self-attention"][-1] * (n / sizes[-1]) ** 2 for n in sizes],
          "k:", lw=1, label="$\\propto n^2$ (guide)")
ax.set(xlabel="sequence length $n$", ylabel="seconds per layer (CPU)",
       title="time for one layer, $d = 64$")
ax.set_xticks(sizes, labels=[str(n) for n in sizes], minor=False)
ax.xaxis.set_minor_locator(plt.NullLocator())
ax.legend(fontsize=9)
fig.tight_layout()


# %% [markdown]
# *Time per layer against sequence length, log–log; the legend gives the slope fitted over the
# four longest lengths.* Self-attention's line is the steepest at the long end, with a slope
# above 1.4 where its operation count predicts 2 (the dotted $T^2$ guide; the figure labels the length n and the width d, Table 1's letters); the convolution and
# the GRU grow about linearly or slower (a slope below 1 means that fixed costs per call still
# weigh at these lengths). The GRU is linear but sequential: its steps cannot be spread over
# cores, so on parallel hardware it should fall further behind than on this one thread (an
# expectation, not measured here). The exact slopes,
# and which layer is fastest at the longer lengths, depend on the machine.
#
# ## Truncated self-attention for long inputs
#
# Speech shows the quadratic cost at its worst: thousands of frames per utterance, and most of
# what a frame needs to be recognised (which phoneme it belongs to) lies within a few hundred
# milliseconds of it. [Truncated self-attention](../book/glossary.md#term-truncated-self-attention) lets each
# frame attend only to frames within $w$ steps:
#
# $$
# m_{ij} = \big[\, |i - j| \le w \,\big],
# $$
#
# a [band mask](../book/glossary.md#term-band-mask), applied exactly as the masks of chapter 4 (True = may attend). Each
# query sees at most $2w + 1$ keys, so the layer needs at most $T(2w + 1)$ scores instead of
# $T^2$. Build the mask in the open, check it against `helpers.masks.band_mask`, and
# apply it to 32 frames of the sound from the start of the chapter.

# %%
def band_by_hand(length, window):
    positions = torch.arange(length)
    return (positions[:, None] - positions[None, :]).abs() <= window  # (T, T)


for window in [0, 1, 3, 40]:
    assert torch.equal(band_by_hand(32, window), band_mask(32, window))
print("band mask, T = 8, w = 2 (1 = may attend):")
for row in band_mask(8, 2).int().tolist():
    print("  " + " ".join(str(v) for v in row))

# %% [markdown]
# Now the live figure. Frames 24 to 55 of the sound (from 0.24 s to 0.575 s, with the
# hiss, frames 36 to 49, in the middle), each standardised band by band, go through one self-attention layer under the band
# mask. So that the weights mean something without training, the layer's three matrices are
# the identity: each frame's query, key and value is the frame itself, and a frame attends to
# the frames whose spectra resemble its own. The slider sets the window $w$ from 0 (each
# frame sees only itself) to 31 (every frame sees all: ordinary self-attention). The colour
# scale is capped at 0.5 so that the wide windows stay visible; at $w = 0$ every weight on the
# diagonal is 1.

# %%
first_frame, seq_len = 24, 32
standardised = (features - features.mean(dim=0)) / features.std(dim=0)  # (98, 40)
x_frames = standardised[first_frame : first_frame + seq_len]  # (T, D) = (32, 40)
d_seq = x_frames.shape[1]
frame_layer = SelfAttention(d_seq)
with torch.no_grad():  # identity projections: query = key = value = the frame
    for linear in (frame_layer.w_q, frame_layer.w_k, frame_layer.w_v):
        linear.weight.copy_(torch.eye(d_seq))
window_values = [0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 31]
with torch.no_grad():
    full_out, full_weights = frame_layer(x_frames)
    truncated = {w: frame_layer(x_frames, band_mask(seq_len, w)) for w in window_values}

slider_heatmap(lambda w: truncated[w][1], window_values, description="window w",
               initial=4, vmax=0.5, xlabel="keys (frames 24 to 55)",
               ylabel="queries (frames 24 to 55)",
               title="truncated self-attention weights", figsize=(4.8, 3.8))

# %% [markdown]
# The band narrows as $w$ falls: each row spreads its weight over at most $2w + 1$ neighbours,
# fewer near the two ends, and the weight a frame would have given to distant frames is shared
# among the near ones. The table gives, for each window $w$ of the slider, how many keys each query
# sees, what fraction of the $T^2 = 1024$ scores is needed, and how far the outputs are from
# those of full attention.

# %%
print(f"{'w':>3} {'keys per query (min/mean/max)':>30} {'scores needed':>14} "
      f"{'output change':>14}")
fractions, changes = [], []
for w in window_values:
    out_w, weights_w = truncated[w]
    keys_seen = band_mask(seq_len, w).sum(dim=1).float()  # (T,)
    fractions.append(keys_seen.sum().item() / seq_len**2)
    changes.append((out_w - full_out).abs().mean().item())
    print(f"{w:3d} {keys_seen.min():10.0f} {keys_seen.mean():9.2f} {keys_seen.max():9.0f} "
          f"{fractions[-1]:14.4f} {changes[-1]:14.4f}")
    assert keys_seen.max() == min(2 * w + 1, seq_len), f"got {keys_seen.max()=}, {min(2 * w + 1, seq_len)=}"
    assert ((weights_w > 0) == band_mask(seq_len, w)).all()  # weight only inside the band
assert all(a < b for a, b in zip(fractions, fractions[1:]))
assert changes[0] > changes[4] > changes[7] and changes[-1] == 0.0, f"got {changes[0]=}, {changes[4]=}, {changes[7]=}, {changes[-1]=}"
offsets = (torch.arange(seq_len)[:, None] - torch.arange(seq_len)[None, :]).abs()  # |i - j|
near_share = full_weights[offsets <= 8].sum().item() / seq_len  # mean over the queries
hiss = torch.tensor(hiss_frames) - first_frame  # rows of the 14 hiss frames
hiss_share = full_weights[hiss][:, hiss].sum(dim=1).min().item()
print(f"full attention: {near_share:.1%} of the weight within 8 frames; each hiss frame "
      f"puts a share of at least {hiss_share:.4f} on hiss frames")
assert 0.85 < near_share < 0.95 and hiss_share > 0.99, f"got {near_share=}, {hiss_share=}"

# %% [markdown]
# The fraction of scores is exactly $\big(T(2w+1) - w(w+1)\big)/T^2$: about $(2w+1)/T$ while $w$
# is small next to $T$, falling below it as the window reaches the ends of the sequence, and
# equal to 1 at $w = T - 1$, where the outputs are exactly those of full attention. The change in the outputs shrinks as the window
# grows, fast at first, because full attention already put most of a frame's weight near it:
# the tone glides, so the frames with the most similar spectra are the neighbours (about 90 %
# of the weight lies within 8 frames), and the hiss frames attend almost only to one another. For a trained speech model the right $w$ is a design choice, weighed against accuracy.
#
# A mask alone saves nothing, though: the masked product still computes all $T^2$ scores and
# then throws most away. `helpers.selfattention.windowed_attention` computes only the band,
# scoring each query against its $2w + 1$ neighbours (a $(T, 2w + 1)$ array), and gives the same
# outputs. That is what makes a minute of speech, 6,000 frames, affordable: with $w = 50$
# (half a second each side) it needs 1.7 % of the scores; the cell times nothing, so random
# stand-ins for the minute's frames do.

# %%
q_f, k_f, v_f = (x_frames @ linear.weight.T for linear in
                 (frame_layer.w_q, frame_layer.w_k, frame_layer.w_v))
for w in [0, 3, 12, 31]:
    banded_out, band_weights = windowed_attention(q_f, k_f, v_f, w)
    torch.testing.assert_close(banded_out, truncated[w][0])
    check_shape(band_weights, (seq_len, 2 * w + 1))

set_seed(9)
minute = torch.randn(5_998, 16)  # a minute of 16-dim frames
minute_out, minute_weights = windowed_attention(minute, minute, minute, window=50)
print(f"banded weights: {tuple(minute_weights.shape)}, {minute_weights.numel():,} numbers "
      f"instead of {5_998**2:,} ({minute_weights.numel() / 5_998**2:.2%})")

# %% [markdown]
# What does a frame lose? One truncated layer cannot relate frames more than $w$ apart. Stack
# layers, though, and the window of the second layer covers outputs of the first that each
# covered $w$ frames: after $n_\text{layers}$ layers every output depends on the frames within $n_\text{layers} w$ of it,
# the same growth as a stack of convolutions. Models for long documents use the same idea
# (Longformer, for instance, combines sliding windows with a few positions that attend
# globally: [Beltagy et al. [2020]](../book/references.bib#beltagy2020), §3.1).

# %%
for num_layers in [1, 2, 4, 8]:
    field = reachable([band_mask(seq_len, 3)] * num_layers)  # (T, T)
    assert torch.equal(field, band_mask(seq_len, 3 * num_layers))
    print(f"{num_layers} layer{'s' if num_layers > 1 else ' '} of w = 3: frame 16 depends on frames "
          f"{field[16].nonzero().min().item()} to {field[16].nonzero().max().item()}")

# %% [markdown]
# ## Self-attention for images
#
# An image is a set of vectors too. Read literally, an RGB image of $n_\text{rows} \times n_\text{cols}$ pixels is a set of $n_\text{rows} n_\text{cols}$ vectors of 3 numbers each, its pixels' colours. That set is large: a
# $224 \times 224$ photograph has 50,176 pixels, and we just saw what $T^2$ means for that many.
# The [Vision Transformer (ViT)](../book/glossary.md#term-Vision-Transformer-ViT) of [Dosovitskiy et al. [2021]](../book/references.bib#dosovitskiy2021),
# titled *An Image is Worth 16x16 Words*, cuts the image into non-overlapping
# $P \times P$ squares, [patches](../book/glossary.md#term-image-patch), and flattens each into one vector of
# $P^2 C$ numbers (§3.1 of the paper and its Eq. 1); with $P = 16$ the photograph is a sequence of 196 vectors of 768 numbers. The
# cell below draws a small $24 \times 24$ image in code (a sky-to-grass gradient, a red square, a
# blue disc, a yellow bar) and cuts it into $6 \times 6$ patches, once with loops and once with
# `helpers.tasks.images.image_to_patches`.

# %%
size, patch = 24, 6
rows, cols = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
image = torch.stack([0.3 + 0.0 * rows, 0.5 + 0.4 * rows / size, 0.9 - 0.6 * rows / size])
image[:, 3:11, 3:11] = torch.tensor([0.9, 0.1, 0.1])[:, None, None]  # a red square
disc = (rows - 15) ** 2 + (cols - 16) ** 2 <= 25
image[:, disc] = torch.tensor([0.1, 0.2, 0.9])[:, None]  # a blue disc
image[:, 19:22, 2:20] = torch.tensor([1.0, 0.85, 0.1])[:, None, None]  # a yellow bar

grid_side = size // patch  # 4 patches per side
patches_by_hand = torch.stack([
    image[:, r * patch:(r + 1) * patch, c * patch:(c + 1) * patch].permute(1, 2, 0).flatten()
    for r in range(grid_side) for c in range(grid_side)])  # (N, P*P*C)
patches = image_to_patches(image, patch)
torch.testing.assert_close(patches, patches_by_hand)
print(f"image {tuple(image.shape)} -> {patches.shape[0]} patches of {patches.shape[1]} numbers")
for side, p in [(224, 16), (224, 14), (224, 1)]:
    n = (side // p) ** 2
    print(f"{side}x{side} image, P = {p:2d}: {n:6,d} vectors of {3 * p * p:4d}, "
          f"{n * n:14,d} scores per head")

# %% mystnb={"image": {"alt": "Left: a small synthetic picture, a gradient from blue sky to green, with a red square top left, a blue disc lower right and a yellow bar along the bottom, divided by white lines into a 4 by 4 grid of numbered patches. Right: a heatmap with 16 rows and 108 columns, one row per patch, showing its pixel values."}}
fig, (ax_image, ax_patches) = plt.subplots(1, 2, figsize=(8.0, 3.6),
                                           gridspec_kw={"width_ratios": [1, 1.6]})
ax_image.imshow(image.permute(1, 2, 0).clamp(0, 1))
for k in range(1, grid_side):
    ax_image.axhline(k * patch - 0.5, color="white", lw=1)
    ax_image.axvline(k * patch - 0.5, color="white", lw=1)
for index in range(grid_side**2):
    r, c = divmod(index, grid_side)
    ax_image.text(c * patch + 0.5, r * patch + 1.5, str(index), color="white", fontsize=9)
ax_image.set(title="24 x 24 image, 6 x 6-pixel patches", xticks=[], yticks=[])
heatmap(patches, ax=ax_patches, vmin=0, vmax=1, xlabel="pixel value within the patch "
        "(6 x 6 pixels x 3 channels)", ylabel="patch (a vector)", title="the set of 16 vectors")
fig.tight_layout()

# %% [markdown]
# *Left, the image and its patch grid, numbered row by row; right, the same image as a set of 16
# vectors, one row per patch.* Each row repeats with period 3, the three colour values of one
# pixel after another. A patch of plain background (2 or 3, say) repeats nearly the same triple
# all along its row, and so does patch 10, which lies wholly inside the disc; a patch that a
# shape cuts through (5 and the red square, 11 and the disc, 13 and the bar) changes its
# pattern part-way.
#
# Self-attention takes this set as it is. As with the frames, give the layer identity
# matrices, so that each patch's query, key and value is its own 108 numbers. The score of
# two patches is then the dot product of their pixel values divided by $\sqrt{108}$, which
# rewards likeness and brightness alike. Leaving aside each patch's own key, the two plain-sky
# patches 2 and 3 attend most to each other (they are identical, so each weighs the other
# exactly as much as itself), while patches 4 and 5, which hold most of the red square (patches 0 and 1 hold the
# rest and attend most to patches 2 and 0), attend most to patch 13, the brightest patch (the largest
# vector): a third of the yellow bar, 18 of its 54 pixels (as many as patch 14, which also holds
# part of the dark disc), on the bright grass.

# %%
patch_layer = SelfAttention(patches.shape[1])  # 108 numbers per patch
with torch.no_grad():  # identity projections: query = key = value = the patch
    for linear in (patch_layer.w_q, patch_layer.w_k, patch_layer.w_v):
        linear.weight.copy_(torch.eye(patches.shape[1]))
    patch_out, patch_weights = patch_layer(patches)  # (16, 108), (16, 16)
others = patch_weights - torch.diag(patch_weights.diagonal())  # ignore a patch's own key
print("most-attended other patch, for patches 0 to 15:", others.argmax(dim=1).tolist())
assert others[2].argmax() == 3 and others[3].argmax() == 2, f"got {others[2].argmax()=}, {others[3].argmax()=}"  # the two plain-sky patches
bar = torch.zeros(size, size)
bar[19:22, 2:20] = 1  # the yellow bar's pixels
bar_pixels = image_to_patches(bar[None], patch).sum(dim=1)  # (16,): bar pixels per patch
assert bar_pixels.sum() == 54 and bar_pixels[12:].tolist() == [12, 18, 18, 6], f"got {bar_pixels.sum()=}, {bar_pixels[12:].tolist()=}"
disc_pixels = image_to_patches(disc[None].float(), patch).sum(dim=1)
assert disc_pixels[13] == 0 and disc_pixels[14] > 0, f"got {disc_pixels[13]=}, {disc_pixels[14]=}"
assert others[4].argmax() == others[5].argmax() == patches.norm(dim=1).argmax() == 13, f"got {others[4].argmax()=}, {others[5].argmax()=}, {patches.norm(dim=1).argmax()=}"


# %% [markdown]
# ### Convolution and self-attention: a window is not enough
#
# A convolutional layer with a $3 \times 3$ kernel computes each output from the $3 \times 3$
# neighbourhood of its position: its [receptive field](../book/glossary.md#term-receptive-field). Written as a mask on the grid of
# positions (pixels here, or patches), position $i$ may "attend" to position $j$ only if their
# rows and their columns each differ by at most 1. `helpers.masks.grid_mask` builds it, and the layer above, run under it, gives
# each patch weight only inside its neighbourhood. Is the masked layer then a convolution?

# %% mystnb={"image": {"alt": "Left: a 16 by 16 boolean heatmap, the 3 by 3 neighbourhood mask on the 4 by 4 patch grid, made of three bright diagonal bands in block form. Right: a 4 by 4 grid in which the 3 by 3 block of patches around patch 5 (rows 0 to 2, columns 0 to 2, patch 5 marked by a star) is bright and the rest dark."}}
def grid_mask_by_hand(height, width):
    row, col = torch.arange(height * width) // width, torch.arange(height * width) % width
    return ((row[:, None] - row[None, :]).abs() <= 1) & ((col[:, None] - col[None, :]).abs() <= 1)


conv_field = grid_mask(grid_side, grid_side)  # (16, 16) on the 4 x 4 patch grid
assert torch.equal(conv_field, grid_mask_by_hand(grid_side, grid_side))
with torch.no_grad():
    _, local_weights = patch_layer(patches, conv_field)  # the patches, 3 x 3 field only
assert torch.equal(local_weights > 0, conv_field)  # weight exactly inside the field
print("keys per query patch (3 x 3 neighbourhood, fewer at the border):")
for r in range(grid_side):
    print("  " + " ".join(f"{conv_field[r * grid_side + c].sum().item():2d}"
                          for c in range(grid_side)))

fig, (ax_mask, ax_field) = plt.subplots(1, 2, figsize=(8.4, 3.5))
heatmap(conv_field.float(), ax=ax_mask, title="3 x 3 receptive field as a mask",
        xlabel="key patch", ylabel="query patch")
heatmap(conv_field[5].float().reshape(grid_side, grid_side), ax=ax_field, colorbar=False,
        title="what patch 5 may attend to", xlabel="patch column", ylabel="patch row",
        xticklabels=[str(c) for c in range(grid_side)],
        yticklabels=[str(r) for r in range(grid_side)])
ax_field.plot(1, 1, "r*", ms=12)
fig.tight_layout()

# %% [markdown]
# *Left, the mask over all pairs of patches; right, one row of it (query patch 5, second row,
# second column) laid back on the grid: its $3 \times 3$ receptive field.* The mask gives the head the receptive field of a
# convolution, but not the convolution. Two things differ. A convolution's weights do not depend
# on the content, only on where the neighbour sits; and it applies a different matrix to each
# neighbour. A $3 \times 3$ convolution can be written *exactly* as self-attention, but with
# nine heads whose weights depend on position only. Head $(\delta_r, \delta_c)$ has a mask that
# allows a single key, the position at offset $(\delta_r, \delta_c)$, so its softmax puts weight 1
# there (and, where that position lies off the image, the masked softmax of chapter 4 gives an
# all-zero row: the convolution's zero padding). Its value projection is the kernel's
# $C_{\text{out}} \times C_{\text{in}}$ slice at that offset, transposed (a
# $C_{\text{in}} \times C_{\text{out}}$ matrix, since values are $x W_v$), and the nine heads
# are summed.

# %%
set_seed(10)
channels_in, channels_out, height, width = 3, 4, 5, 5
pixels = torch.randn(channels_in, height, width)
kernel = torch.randn(channels_out, channels_in, 3, 3)
pixel_set = pixels.flatten(1).T  # (N, C_in): the pixels as a set of vectors
row, col = torch.arange(height * width) // width, torch.arange(height * width) % width
no_scores = torch.zeros(height * width, height * width)  # the content plays no part
summed = torch.zeros(height * width, channels_out)
for dr in (-1, 0, 1):
    for dc in (-1, 0, 1):
        one_key = (row[None, :] == row[:, None] + dr) & (col[None, :] == col[:, None] + dc)
        head_weights = masked_softmax(no_scores, one_key)  # (N, N): one-hot or all-zero rows
        summed += head_weights @ pixel_set @ kernel[:, :, dr + 1, dc + 1].T  # (N, C_out)
convolved = F.conv2d(pixels[None], kernel, padding=1)[0]  # (C_out, H, W)
torch.testing.assert_close(summed, convolved.flatten(1).T)
print("nine one-key attention heads, summed = F.conv2d with a 3 x 3 kernel, padding 1")

# %% [markdown]
# Why nine heads, and why weights that ignore the content? One head cannot do it, masked or
# not. A convolution is linear in its input; the masked head of the figure computes its weights
# from the content, so doubling the input changes the weights and the output is not doubled.
# And even a head whose weights $\alpha_\delta$ depended on the offset $\delta$ alone would apply
# the same value map $W_v$ to every neighbour: its kernel slices would all be multiples
# $\alpha_\delta W_v^\top$ of one matrix, with $\alpha_\delta \ge 0$ summing to 1 (for each pair of
# channels a blur, never an edge detector, which needs spatial weights of both signs). The cell measures both: the head of the
# figure against linearity, and the random kernel above against the best such one-matrix
# kernel (the best rank-1 approximation of its nine slices, from their singular values).

# %%
with torch.no_grad():  # the masked head of the figure, on the patches and on twice them
    head_out, _ = patch_layer(patches, conv_field)  # (16, 108)
    head_out_doubled, _ = patch_layer(2 * patches, conv_field)
torch.testing.assert_close(F.conv2d(2 * pixels[None], kernel, padding=1),
                           2 * F.conv2d(pixels[None], kernel, padding=1))  # conv: linear
head_gap = ((head_out_doubled - 2 * head_out).norm() / (2 * head_out).norm()).item()
print(f"masked head: |f(2x) - 2 f(x)| / |2 f(x)| = {head_gap:.2f} (a convolution: 0)")
slices = kernel.permute(2, 3, 0, 1).reshape(9, -1)  # (k^2, C_out C_in): a row per offset
singular_values = torch.linalg.svdvals(slices)  # rank 1 keeps only the largest
rank_one_miss = (1 - singular_values[0] ** 2 / (singular_values**2).sum()).sqrt().item()
print(f"the kernel's 9 slices have rank {torch.linalg.matrix_rank(slices).item()}; any one-head "
      f"kernel is at least {rank_one_miss:.0%} of its norm away from it")
assert head_gap > 0.1 and 0.5 < rank_one_miss < 1, f"gap {head_gap:.3f}, miss {rank_one_miss:.3f}"

# %% [markdown]
# The nine-head construction is a hard-mask version of the reduction in
# [Cordonnier et al. [2020]](../book/references.bib#cordonnier2020) (their §3, Lemma 1): $k^2$ heads, each
# putting all its weight on one fixed offset, with value maps taken from the kernel, make a
# $k \times k$ convolution. Their Theorem 1 states the result: a multi-head self-attention layer
# with $k^2$ heads of dimension $d_h$ and a relative positional encoding can express any
# $k \times k$ convolution with $\min(d_h, D_\text{out})$ output channels. They obtain the one-offset
# heads not from a mask but from scores computed from the relative position alone, the
# *quadratic encoding* of their Lemma 2: the head aimed at offset $\Delta$ scores the key at offset
# $\delta$ from the query by $-\beta \lVert \delta - \Delta \rVert^2$ plus a constant (the paper calls the
# sharpness $\alpha$; here $\beta$, since $\alpha$ is an attention weight). The softmax of such scores is
# one-hot only as $\beta$ grows without bound. The cell builds these nine heads without any mask
# and compares them with the convolution on the nine interior pixels. (At the border the target
# pixel may not exist, and the softmax then gives its weight to the pixels that do: not the
# convolution's zero padding, which is what the masked version gets right.)

# %%
offset_r = row[None, :] - row[:, None]  # (N, N): key row minus query row
offset_c = col[None, :] - col[:, None]  # (N, N): key column minus query column
interior = (row > 0) & (row < height - 1) & (col > 0) & (col < width - 1)  # (N,)
target = convolved.flatten(1).T  # (N, C_out)
print(f"{'beta':>5} {'weight on the target pixel':>27} {'largest error, interior':>24}")
errors = {}
for beta in [1.0, 4.0, 16.0]:
    positional = torch.zeros(height * width, channels_out)
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):  # one head per offset; scores from the position alone
            head_scores = -beta * ((offset_r - dr) ** 2 + (offset_c - dc) ** 2).float()
            head_weights = torch.softmax(head_scores, dim=-1)  # (N, N), no mask
            positional += head_weights @ pixel_set @ kernel[:, :, dr + 1, dc + 1].T
    errors[beta] = (positional - target)[interior].abs().max().item()
    border_error = (positional - target)[~interior].abs().max().item()
    on_target = head_weights[12, 18].item()  # centre pixel, head (1, 1): key 1 down, 1 right
    shown = f"{errors[beta]:.2f}" if errors[beta] > 0.01 else "below 0.01"
    print(f"{beta:5.0f} {on_target:27.4f} {shown:>24}")
assert errors[1.0] > errors[4.0] > 0.1 and errors[16.0] < 1e-3, f"errors {errors}"
assert border_error > 1, f"border error {border_error:.3f}"  # no zero padding without a mask

# %% [markdown]
# Generality has a price. A convolution builds in two assumptions, that nearby pixels matter
# most and that the same pattern means the same thing anywhere in the image; this
# [inductive bias](../book/glossary.md#term-inductive-bias) is knowledge the network does not have to learn. Self-attention
# assumes neither and must learn both from examples. The ViT paper measured the trade-off
# ([Dosovitskiy et al. [2021]](../book/references.bib#dosovitskiy2021), §1 and §4.3 with its Figure 3):
# trained on ImageNet alone (1.3 million images) "without strong regularization", in the words
# of their §1, ViT fell a few points behind ResNets (strong CNNs) of comparable size; pre-trained
# on the 303 million images of JFT-300M, it overtook them. How large the gap is on the smaller data set
# depends on the training recipe as well: [Touvron et al. [2021]](../book/references.bib#touvron2021) (DeiT)
# trained a ViT of 86 million parameters on ImageNet alone, with strong data augmentation and
# regularisation, to 83.1 % top-1 accuracy, and up to 85.2 % by distilling from a convolutional
# teacher (their abstract), competitive with CNNs. With little data and a plain recipe the CNN's
# built-in field wins; a lot more data, or augmentation, regularisation and distillation that
# make up for it, let the learned field catch up.
#
# Depth widens a CNN's field: a stack of $n_\text{layers}$ layers of $3 \times 3$ convolutions sees a
# $(2n_\text{layers} + 1) \times (2n_\text{layers} + 1)$ block, which the slider below shows on an $8 \times 8$ grid for a
# query patch in row 2, column 2, counting from 0 (the third row and third column, patch
# 18; `reachable` composes the layer masks). One self-attention
# layer sees the whole grid.

# %%
side, query_patch = 8, 2 * 8 + 2  # an 8 x 8 grid; the patch in row 2, column 2
depths = list(range(1, 7))
fields = {depth: reachable([grid_mask(side, side)] * depth)[query_patch].reshape(side, side)
          for depth in depths}


def draw_field(depth):
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    ax.imshow(fields[depth].float(), cmap="viridis", vmin=0, vmax=1)
    ax.plot(2, 2, "r*", ms=12)
    ax.set(xlabel="patch column", ylabel="patch row",
           title=f"{depth} conv layer{'s' if depth > 1 else ''}: "
                 f"{int(fields[depth].sum())} of {side * side} patches")
    fig.tight_layout()
    return fig


slider_figure(draw_field, depths, description="3 x 3 conv layers")

# %%
print(f"{'layers':>6} {'patches seen':>13}")
for depth in depths:
    print(f"{depth:6d} {int(fields[depth].sum()):13d}")
    expected_side = min(2 + depth, side - 1) - max(2 - depth, 0) + 1  # rows (= cols) reached
    assert int(fields[depth].sum()) == expected_side**2, f"got {int(fields[depth].sum())=}, {expected_side ** 2=}"
assert int(fields[4].sum()) < side * side == int(fields[5].sum()), f"got {int(fields[4].sum())=}, {side * side=}, {int(fields[5].sum())=}"  # five layers to cover it all

# %% [markdown]
# *The star marks the query patch; yellow patches can influence it.* One layer sees 9 patches
# and two see 25; from then on the block is cut off by the top and left borders, and it takes
# five layers to reach the far corner, which one self-attention layer reaches directly.
#
# ## Self-attention on graphs
#
# In a sentence every word may be relevant to every other; in a graph, the edges already say
# which nodes are related. A self-attention layer can use that knowledge through its mask: node
# $i$ attends only to its neighbours (and to itself), and non-neighbours get weight 0. The
# mask is the graph's [adjacency matrix](../book/glossary.md#term-adjacency-matrix) with ones added on the diagonal. This is the
# idea of the [graph attention network (GAT)](../book/glossary.md#term-graph-attention-network-GAT) of
# [Veličković et al. [2018]](../book/references.bib#velickovic2018), which scores neighbours with an additive function (their §2.1,
# equation 3); with the scaled
# dot product the masking is the same. Here it is on the alanine graph from the start of the
# chapter.

# %%
adjacency_by_hand = torch.eye(len(atoms), dtype=torch.bool)  # every atom sees itself
for i, j in bonds:
    adjacency_by_hand[i, j] = adjacency_by_hand[j, i] = True  # bonds go both ways
graph_mask = adjacency_mask(bonds, num_nodes=len(atoms))
assert torch.equal(graph_mask, adjacency_by_hand)

set_seed(11)
graph_layer = SelfAttention(d_model=4)
with torch.no_grad():
    graph_out, graph_weights = graph_layer(node_features, graph_mask)  # (N, D), (N, N)
    for i in range(len(atoms)):  # the same, summing over the neighbours only
        neighbours = graph_mask[i].nonzero().flatten()
        q_i = graph_layer.w_q(node_features[i])  # (D,)
        k_near = graph_layer.w_k(node_features[neighbours])  # (deg + 1, D)
        v_near = graph_layer.w_v(node_features[neighbours])  # (deg + 1, D)
        weights_i = torch.softmax(k_near @ q_i / math.sqrt(4), dim=0)
        torch.testing.assert_close(weights_i @ v_near, graph_out[i])
        print(f"{atoms[i]:>2} attends to " + ", ".join(
            f"{atoms[j]} {w:.3f}" for j, w in zip(neighbours.tolist(), weights_i)))
assert (graph_weights[~graph_mask] == 0).all()

# %% mystnb={"image": {"alt": "Left: the six heavy atoms of alanine drawn as coloured circles, N bonded to C-alpha, which is bonded to C-beta and to C, which is bonded to O and OH. Right: a 6 by 6 heatmap of attention weights with atom names on both axes; only bonded pairs and the diagonal are non-zero, every other cell is 0."}}
positions = torch.tensor([[0.0, 0.0], [1.0, 0.5], [1.0, 1.6], [2.0, 0.0], [3.0, 0.5],
                          [2.0, -1.1]])  # where to draw each atom
fig, (ax_graph, ax_map) = plt.subplots(1, 2, figsize=(8.4, 3.6))
for i, j in bonds:
    ax_graph.plot(*positions[[i, j]].T, color="0.5", lw=2, zorder=1)
ax_graph.scatter(*positions.T, s=700, c=[f"C{e}" for e in element.tolist()], zorder=2)
for name, (px, py) in zip(atoms, positions.tolist()):
    ax_graph.text(px, py, name, ha="center", va="center", color="white", fontsize=10)
ax_graph.set(title="alanine, heavy atoms", xlim=(-0.5, 3.5), ylim=(-1.6, 2.1))
ax_graph.axis("off")
heatmap(graph_weights, ax=ax_map, annotate=True, xticklabels=atoms, yticklabels=atoms,
        xlabel="keys (atoms attended to)", ylabel="queries (atoms)",
        title="self-attention masked by the bonds")
fig.tight_layout()

# %% [markdown]
# *Left, the molecule; right, the attention weights under the bond mask.* Each row is non-zero
# only on the atom itself and the atoms bonded to it: Cα, bonded to three heavy atoms, spreads
# its weight over four, while the oxygens, with one bond each, choose between themselves and the
# carboxyl carbon. The loop in the cell before the figure computed each atom's output with a
# softmax over its neighbours alone and matched the masked layer: masking the full attention is
# the same as attending only over the neighbourhood. One layer moves information one bond; a
# stack of $n_\text{layers}$ layers lets an atom hear from atoms $n_\text{layers}$ bonds away (exercise 3), which is the
# *message passing* of graph neural networks.
#
# ## A preview: cross-attention
#
# In self-attention the queries, keys and values come from one sequence. Translation needs
# two: the sentence being translated and the translation written so far. An encoder–decoder
# model encodes the source sentence into $K$ vectors; while writing the translation, the decoder
# turns each of its $Q$ target positions into a query and attends over the *encoder's*
# vectors, which supply the keys and the values. That is [cross-attention](../book/glossary.md#term-cross-attention): the same
# function, called with queries from one sequence and keys and values from another, so the
# weights form a $Q \times K$ rectangle, not a square, and the output has one row per query.

# %%
set_seed(12)
source_words = ["I", "saw", "a", "saw"]
target_words = ["<bos>", "Ich", "sah", "eine", "Säge"]
d_model = 8
encoder_states = torch.randn(1, len(source_words), d_model)  # (B, K, D): from the encoder
decoder_states = torch.randn(1, len(target_words), d_model)  # (B, Q, D): from the decoder
w_q8, w_k8, w_v8 = (torch.randn(d_model, d_model) / math.sqrt(d_model) for _ in range(3))

cross_q = decoder_states @ w_q8  # queries from the target side
cross_k, cross_v = encoder_states @ w_k8, encoder_states @ w_v8  # keys, values: source side
cross_out, cross_weights = scaled_dot_product_attention(cross_q, cross_k, cross_v)
check_shape(cross_out, (1, len(target_words), d_model))  # (B, Q, D): one row per query
check_shape(cross_weights, (1, len(target_words), len(source_words)))  # (B, Q, K)
torch.testing.assert_close(cross_out, F.scaled_dot_product_attention(cross_q, cross_k, cross_v))
print(f"queries {tuple(cross_q.shape)}, keys {tuple(cross_k.shape)} "
      f"-> weights {tuple(cross_weights.shape)}, output {tuple(cross_out.shape)}")

# %% mystnb={"image": {"alt": "A 5 by 4 heatmap: five German target words as rows, four English source words as columns, each row of weights summing to 1, spread without a clear pattern because the weights are random."}}
fig, ax = plt.subplots(figsize=(4.8, 3.6))
heatmap(cross_weights[0], ax=ax, annotate=True, xticklabels=source_words,
        yticklabels=target_words, xlabel="keys: source words (encoder)",
        ylabel="queries: target words (decoder)", title="cross-attention (untrained)")
fig.tight_layout()

# %% [markdown]
# *Cross-attention weights: one row per target word, one column per source word.* With random
# weights there is no pattern yet; a trained translation model learns to put the weight of
# *sah* on *saw* and that of *Säge* on the second *saw*, an alignment between the two languages
# found by attention. The decoder also runs masked self-attention over its own words, with the
# causal mask of chapter 4 so that no position sees the words after it. Chapter 8 assembles
# encoder, decoder and both kinds of attention into the Transformer; chapter 6 first splits each
# attention into several heads.
#
# ## Summary
#
# - Many inputs are **sets of vectors** of varying size: words (embeddings rather than one-hot
#   vectors, which are long and carry no similarity), speech (a vector per 25 ms frame, every
#   10 ms), the nodes of a graph, the patches of an image. A model may output one label per
#   vector, one per set, or a new sequence of its own length.
# - A fully connected layer sees one vector, or a fixed window of them; covering a whole
#   sequence that way takes a window reaching $T - 1$ positions either side ($2T - 1$
#   vectors, with $T$ fixed at the longest sequence) and a parameter count that grows with it.
# - **Self-attention** gives each position a query, a key and a value, $Q = XW_q$,
#   $K = XW_k$, $V = XW_v$, and outputs $\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$: each
#   output is a weighted average of all the values. Its parameters do not depend on the
#   length, and all positions are computed at once. It equals the helper
#   `scaled_dot_product_attention` and PyTorch's `F.scaled_dot_product_attention` applied to
#   `(x W_q, x W_k, x W_v)`.
# - Self-attention is **permutation-equivariant**, $\operatorname{SA}(\Pi X) = \Pi\,\operatorname{SA}(X)$:
#   it cannot tell *dog bites man* from *man bites dog*, or two copies of a word apart. It is
#   not permutation-*invariant*, as it is often called: only a pooled output, such as the mean
#   over positions, is.
#   Positional encodings (chapter 7) put the order back.
# - Against an RNN and a CNN, self-attention has the shortest path between positions ($\mathcal{O}(1)$
#   layers against $\mathcal{O}(T)$ and $\mathcal{O}(T/k)$) and no sequential steps, but $\mathcal{O}(T^2 D)$ work and
#   $\mathcal{O}(T^2)$ memory per layer. Its attention step, $2T^2 D$, is cheaper than the RNN's
#   recurrence, $2TD^2$, only while $T < D$; with its $3TD^2$ projections the whole layer costs
#   more than a plain RNN at every length, but less than a GRU ($6TD^2$) while $T < 1.5D$ and
#   an LSTM ($8TD^2$) while $T < 2.5D$. These count one layer alone: in a Transformer block
#   the projections, $W^O$ and the feed-forward network, $12TD^2$, outweigh the attention step
#   until $T = 6D$. An RNN carries the order of its inputs implicitly;
#   self-attention does not. Timed on this machine's CPU, its time grows faster with $T$ than the
#   convolution's and the GRU's: its fitted log–log slope is the largest of the three (checked:
#   above 1.4; the others below 1.5).
# - **Truncated self-attention** (a band mask, $|i - j| \le w$) brings the cost down to
#   $\mathcal{O}(Tw)$ for long inputs such as speech; computing only the band is what saves the time.
# - On images, ViT treats $P \times P$ patches as tokens. A $k \times k$ convolution is
#   multi-head self-attention with $k^2$ heads whose weights depend on the relative position only,
#   one offset each, with their own value maps (nine one-key heads make a $3 \times 3$ convolution;
#   Cordonnier et al. reach the one-key weights with quadratic positional scores as their
#   sharpness grows). One head masked to the same window cannot express a general convolution:
#   with content-based scores it is not even linear in its input, and even with scores that
#   ignore the content all its neighbours share one value map, so its kernel slices are
#   non-negative multiples of one matrix (a blur). Self-attention with content-based weights
#   learns where to look; trained on ImageNet alone it fell a few points behind CNNs without
#   strong regularisation (ViT), and became competitive with them with strong augmentation and
#   regularisation (DeiT).
# - On graphs, masking with the adjacency matrix (plus self-loops) makes each node attend only
#   to its neighbours, as in GAT; masking is the same as summing over neighbours only.
# - In **cross-attention** the queries come from one sequence and the keys and values from
#   another, giving (B, Q, K) weights; it connects a decoder to an encoder (chapter 8).
#
# ## Exercises

# %% [markdown]
# **1. Masks and order.** Is self-attention under a band mask still permutation-equivariant?
# Check numerically with a random sequence, a random permutation and $w = 2$. Then show that it
# becomes equivariant again if the mask is permuted along with the input:
# $\operatorname{SA}(\Pi X; \Pi M\Pi^\top) = \Pi\,\operatorname{SA}(X; M)$.
#
# <details>
# <summary>Solution</summary>
#
# No. The band mask is defined by positions, $|i - j| \le w$, so after shuffling the rows a
# vector meets a different set of neighbours, and its output changes (by more than 0.1, in the cell below).
# Permuting the mask as well, row $i$ and column $j$ of $M$ moved to wherever $\Pi$ sends
# positions $i$ and $j$ (in code `mask[perm][:, perm]`), restores the original neighbourhoods
# and the proof of the chapter goes through: masked scores are $-\infty$ entries of $Z$, and
# $\Pi Z\Pi^\top$ moves them together with everything else. A mask is one way position
# information enters a layer; the causal mask of chapter 4 is another such case.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 1.
set_seed(13)
ex_layer, ex_x, ex_perm = SelfAttention(6), torch.randn(10, 6), torch.randperm(10)
ex_mask = band_mask(10, 2)
with torch.no_grad():
    out_masked, _ = ex_layer(ex_x, ex_mask)
    out_shuffled_same_mask, _ = ex_layer(ex_x[ex_perm], ex_mask)
    out_shuffled_mask_too, _ = ex_layer(ex_x[ex_perm], ex_mask[ex_perm][:, ex_perm])
gap = (out_shuffled_same_mask - out_masked[ex_perm]).abs().max().item()
print(f"same band mask after shuffling: largest change {gap:.4f}")
torch.testing.assert_close(out_shuffled_mask_too, out_masked[ex_perm])
print("with the mask shuffled too: SA(PX; P M P^T) = P SA(X; M)")
assert gap > 0.1, f"got {gap=}"

# %% [markdown]
# **2. A minute of speech.** An utterance of one minute has $T = 5998$ frames. With truncated
# self-attention of window $w = 50$ (half a second either side), what fraction of the $T^2$
# scores is computed, exactly? How many stacked truncated layers does it take before the first
# frame can influence the output at the last frame?
#
# <details>
# <summary>Solution</summary>
#
# Query $i$ sees the keys from $\max(0, i - w)$ to $\min(T - 1, i + w)$: $2w + 1 = 101$ of them,
# except within $w$ frames of either end. The sum is $101\,T - w(w + 1) = 603{,}248$ scores, a
# fraction $0.0168$ of $T^2 \approx 3.6 \times 10^7$, roughly $(2w + 1)/T$. Each layer
# carries information at most $w$ frames, so covering the $T - 1 = 5997$ frames between the ends
# takes $\lceil 5997 / 50 \rceil = 120$ layers. The cell checks both numbers by counting; for
# the second it follows the first frame's influence upwards, and one band-masked layer acting
# on a 0/1 "reached" vector is a max-pool of width $2w + 1$.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 2.
frames_minute, w = 5_998, 50
starts = (torch.arange(frames_minute) - w).clamp(min=0)
ends = (torch.arange(frames_minute) + w).clamp(max=frames_minute - 1)
num_scores = int((ends - starts + 1).sum())
assert num_scores == (2 * w + 1) * frames_minute - w * (w + 1), f"got {num_scores=}, {(2 * w + 1) * frames_minute - w * (w + 1)=}"
reached = F.one_hot(torch.tensor(0), frames_minute).float()  # the first frame, (T,)
layers = 0
while reached[-1] == 0:  # one truncated layer spreads influence w frames: a max-pool
    reached = F.max_pool1d(reached[None], 2 * w + 1, stride=1, padding=w)[0]
    layers += 1
assert layers == math.ceil((frames_minute - 1) / w), f"got {layers=}, {math.ceil((frames_minute - 1) / w)=}"
print(f"scores computed: {num_scores:,} of {frames_minute**2:,} "
      f"({num_scores / frames_minute**2:.4f}); layers to connect the ends: {layers}")

# %% [markdown]
# **3. Messages along bonds.** Stack $n_\text{layers}$ self-attention layers masked by the alanine graph.
# Which atoms can influence the output of the nitrogen N after 1, 2 and 3 layers? Answer with
# `reachable`, then confirm the two-layer case with autograd: the gradient of N's output with
# respect to each atom's input features should be non-zero exactly for the reachable atoms.
#
# <details>
# <summary>Solution</summary>
#
# One layer reaches N's bonded neighbour Cα (and N itself); two layers add Cα's neighbours, Cβ
# and C; three layers add the two oxygens, three bonds from N, and cover the molecule. In
# general, $n_\text{layers}$ masked layers reach the nodes at most $n_\text{layers}$ edges away: the entries of
# $(M_\text{bond} + I)^{n_\text{layers}}$ that are non-zero, with $M_\text{bond}$ the 0/1 matrix of the bonds. The gradient confirms it. After two layers the oxygens'
# features do not reach N's output at all (their gradient is exactly zero), while every atom
# within two bonds has a non-zero gradient.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 3.
for depth in [1, 2, 3]:
    seen = reachable([graph_mask] * depth)[0]  # row of N
    print(f"{depth} layer(s): N hears from " + ", ".join(a for a, s in zip(atoms, seen) if s))

set_seed(14)
first_layer, second_layer = SelfAttention(4), SelfAttention(4)
features = node_features.clone().requires_grad_(True)
hidden, _ = first_layer(features, graph_mask)
two_layer_out, _ = second_layer(hidden, graph_mask)
two_layer_out[0].sum().backward()  # N's output
influence = features.grad.abs().sum(dim=1) > 0  # (N,)
assert torch.equal(influence, reachable([graph_mask] * 2)[0])
print("gradient non-zero for:", ", ".join(a for a, s in zip(atoms, influence) if s))

# %% [markdown]
# **4. Choosing the patch size.** For a $224 \times 224$ RGB image, tabulate, for patch sizes
# $P = 8, 14, 16, 32$, the number of patches $N$, the length of each patch vector and the number
# of scores per head, $N^2$. What does a smaller patch buy, and what does it cost?
#
# <details>
# <summary>Solution</summary>
#
# $N = (224 / P)^2$ and each vector has $3P^2$ numbers, so halving $P$ quadruples $N$ and
# multiplies the score count by sixteen: from 49 patches and 2,401 scores at $P = 32$ to 784
# patches and 614,656 scores at $P = 8$. Smaller patches keep finer detail in the token
# sequence and let attention relate smaller parts of the image, at a quadratic price;
# $P = 16$ (196 patches) is the patch size of the ViT paper's ViT-L/16 ([Dosovitskiy et al. [2021]](../book/references.bib#dosovitskiy2021),
# §4.1, which names each model by its variant and patch size), and $P = 8$, 16 times its scores, is still affordable
# for global attention. It is at much smaller patches, $P = 4$ with 3,136 patches and about 9.8
# million scores per head (256 times those of $P = 16$), that the quadratic price starts to weigh heavily and something like this chapter's
# windowed attention becomes attractive (global attention at that length is still possible, only costly).
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 4.
set_seed(15)
photo = torch.rand(3, 224, 224)
print(f"{'P':>3} {'patches N':>10} {'vector length':>14} {'scores N^2':>12}")
for p in [4, 8, 14, 16, 32]:
    tokens_p = image_to_patches(photo, p)
    n = tokens_p.shape[0]
    assert n == (224 // p) ** 2 and tokens_p.shape[1] == 3 * p * p, f"got {n=}, {(224 // p) ** 2=}, {tokens_p.shape[1]=}, {3 * p * p=}"
    print(f"{p:3d} {n:10,d} {tokens_p.shape[1]:14,d} {n * n:12,d}")
assert (224 // 4) ** 2 == 3_136 and round(3_136**2 / 1e6, 1) == 9.8, f"got {round(3136 ** 2 / 1000000.0, 1)=}"  # P = 4
assert 784**2 == 16 * 196**2 and 3_136**2 == 256 * 196**2  # against P = 16
