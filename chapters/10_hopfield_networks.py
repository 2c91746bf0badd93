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
# # 10. Attention as memory: Hopfield networks
#
# A computer's memory is addressed by *location*: ask for cell 4096 and you get whatever
# happens to be stored there, with no regard for what it means. Your own memory works by
# *content*. The first bars of a song bring back the rest of it; a blurred photograph of a
# friend brings back the face; "the capital of France is ..." brings back "Paris". A memory
# that is read by giving it part of what it holds is called an [associative memory](../book/glossary.md#term-associative-memory).
# The [Hopfield network](../book/glossary.md#term-Hopfield-network) is the classic model of such a memory: a model of how
# memories are *stored* and *retrieved*.
#
# This chapter builds that model from scratch and then shows that the attention of the
# previous chapters is its modern form. A query is a cue; the keys are the stored memories;
# the softmax picks out the memory that best matches the cue; the values are what comes back.
#
# **What you will learn**
#
# - how a classical Hopfield network stores binary patterns in a symmetric weight matrix
#   with the [Hebbian rule](../book/glossary.md#term-Hebbian-rule), and recalls one from a corrupted cue by sliding down an
#   [energy function](../book/glossary.md#term-energy-function);
# - why updating one unit at a time never raises the energy, watched on 7 × 5 pixel digits;
# - what goes wrong with the Hebbian rule: [spurious states](../book/glossary.md#term-spurious-state), inverted patterns, and a
#   [storage capacity](../book/glossary.md#term-storage-capacity) of about $0.14\,N$ random patterns (far fewer correlated ones,
#   such as digits), measured;
# - how a better rule, the [projection rule](../book/glossary.md#term-projection-rule), stores all ten digits in the same network, and
#   why no fixed $N \times N$ weight matrix (with no unit joined to itself) can hold much
#   more than $N$ random patterns;
# - the [modern Hopfield network](../book/glossary.md#term-modern-Hopfield-network) [[Ramsauer et al., 2020]](../book/references.bib#ramsauer2020), whose
#   update *is* softmax attention with the state as query and the stored patterns as keys and
#   values, checked against `F.scaled_dot_product_attention`;
# - how it stores far more patterns than it has units (10,000 in 100 here; Ramsauer et al.
#   prove a capacity exponential in $N$, and we measure it growing that way for small $N$) and
#   retrieves them in one step, at the price of keeping every pattern;
# - how the [inverse temperature](../book/glossary.md#term-inverse-temperature) $\beta$ chooses between retrieving one memory and
#   averaging several, why a Transformer's $1/\sqrt d$ is one setting of $\beta$, and when an
#   attention head is exactly a Hopfield update.
#
# You need the softmax with a temperature and scaled dot-product attention (chapter 3);
# self-attention (chapter 5) helps for the last section.

# %%
import itertools
import math
import statistics

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from helpers.attention import scaled_dot_product_attention
from helpers.checks import check_shape
from helpers.figures.plotting import heatmap
from helpers.figures.widgets import slider_figure
from helpers.hopfield import (energy, hebbian_weights, hopfield_weights, modern_energy,
                              modern_hopfield_update, projection_weights, recall, retrieve)
from helpers.seeding import set_seed
from helpers.tasks.hopfield import capacity_curve, corrupt, digit_patterns

torch.set_num_threads(1)  # small tensors: one thread is as fast, and steadier
set_seed(0)


# %% [markdown]
# ## Memory by content
#
# An associative memory holds $P$ patterns $\mathbf x^1, \dots, \mathbf x^P$. Given a cue $\mathbf s$ (a noisy or
# partial copy of one of them), it should return the stored pattern the cue resembles most.
# That is two jobs:
#
# - **storage**: write the patterns into the network;
# - **retrieval**: from a cue, compute the matching pattern.
#
# A memory read this way is also called a [content-addressable memory](../book/glossary.md#term-content-addressable-memory): the content is
# the address. Attention (chapter 2) already does a soft version of the reading. It compares
# a query with every key and returns a weighted average of the values, with most weight where
# query and key agree. The difference is only in where the memories live. In the classical
# Hopfield network they are dissolved into one weight matrix, superimposed on each other. In
# the modern network they are kept as an explicit table that attention reads. A table of
# vectors read by attention is what memory-augmented networks (memory networks, the Neural
# Turing Machine) call an [external memory](../book/glossary.md#term-external-memory), which is why attention and external memory are so
# often discussed together.
#
# Our memories are the ten digits, drawn as 7 × 5 bitmaps in `helpers.tasks.hopfield.DIGITS` and
# flattened row by row into $N = 35$ units: $+1$ for ink, $-1$ for background.

# %% mystnb={"image": {"alt": "A row of ten small black-and-white bitmaps, the digits 0 to 9, each 7 pixels high and 5 wide, drawn as blocky black strokes on white. The 1, a thin vertical stroke with a base, has the fewest ink pixels, 10; the 0, an outline crossed by a diagonal stroke, has the most, 19."}}
def draw_state(ax, state, title=None):
    """Draw one state (35,) as a 7 x 5 image: -1 white, +1 black, values between grey."""
    ax.imshow(state.reshape(7, 5), cmap="gray_r", vmin=-1, vmax=1)
    ax.set_xticks([])
    ax.set_yticks([])
    if title is not None:
        ax.set_title(title, fontsize=9)


def show_states(states, titles, ncols=None):
    """A grid of small images, one per state (M, 35); returns the figure."""
    ncols = ncols or len(states)
    nrows = math.ceil(len(states) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(0.95 * ncols, 1.35 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, state, title in zip(axes.flat, states, titles):
        ax.axis("on")
        draw_state(ax, state, title)
    fig.tight_layout()
    return fig


digits = digit_patterns()  # (10, N): digit d in row d, +1 = ink, -1 = background
check_shape(digits, (10, 35))
num_units = digits.shape[1]
print(f"N = {num_units} units per pattern; ink pixels per digit:",
      [int((d > 0).sum()) for d in digits])
fig = show_states(digits, [f"digit {d}" for d in range(10)])
ink = [int((d > 0).sum()) for d in digits]
assert min(ink) == 10 and max(ink) == 19, f"got {min(ink)=}, {max(ink)=}"


# %% [markdown]
# *The ten stored patterns, black ink on white: blocky digits 0 to 9, each 7 pixels high and
# 5 wide, with between 10 (the 1) and 19 (the 0) ink pixels.*
#
# ## The classical Hopfield network
#
# ### Units, weights and an energy
#
# A Hopfield network [[Hopfield, 1982]](../book/references.bib#hopfield1982), in the $\pm 1$ form used ever since (Hopfield's
# paper wrote the states as 0/1 firing rates, with the same symmetric, zero-diagonal weights),
# has $N$ binary units $s_i \in \{-1, +1\}$, every
# pair joined by a weight $W_{ij}$, with two conditions: the weights are **symmetric**,
# $W_{ij} = W_{ji}$, and no unit is joined to itself, $W_{ii} = 0$. Unit $i$ receives the
# input
#
# $$
# h_i = \sum_{j} W_{ij} s_j
# $$
#
# and the update rule sets it to the sign of that input, $s_i \leftarrow \operatorname{sign}(h_i)$
# (keeping its value if $h_i = 0$; in float32 arithmetic an exact 0 can come out as about
# $\pm 10^{-8}$, so the code counts an input within rounding of 0 as 0, and a tie is a tie on every CPU). Hopfield's units also had thresholds; a bias $b_i$ would add
# to the input, $h_i = \sum_j W_{ij} s_j + b_i$, and a term $-\sum_i b_i s_i$ to the energy below. We
# set every bias to zero, as is usual for memories of $\pm1$ patterns. That choice is what makes
# the energy symmetric under $\mathbf s \to -\mathbf s$, the source of the inverted patterns met
# later. Hopfield's insight was that this network has an
# [energy function](../book/glossary.md#term-energy-function), a number that the updates can only push down:
#
# $$
# E(\mathbf s) = -\tfrac12\, \mathbf s^\top \mathbf W \mathbf s = -\tfrac12 \sum_{i,j} W_{ij}\, s_i s_j .
# $$
#
# Why it can only go down: pick unit $i$ and collect the terms of $E$ that contain $s_i$. By
# symmetry the pair $(i, j)$ appears twice, as $W_{ij} s_i s_j$ and $W_{ji} s_j s_i$, which
# cancels the $\tfrac12$; with $W_{ii} = 0$ there is no $s_i^2$ term. So
# $E = -s_i h_i + (\text{terms without } s_i)$, and changing $s_i$ by $\Delta s_i$ changes the
# energy by
#
# $$
# \Delta E = -\Delta s_i\, h_i .
# $$
#
# If the unit flips, $\Delta s_i = 2\operatorname{sign}(h_i)$ and $\Delta E = -2|h_i| \le 0$;
# if it does not flip, $\Delta E = 0$. Updating one unit at a time in this way is an
# [asynchronous update](../book/glossary.md#term-asynchronous-update). Since there are only $2^N$ states and every flip strictly lowers
# $E$, the flips must stop: the network ends in a state where no unit wants to change, a
# *fixed point* and a local minimum of $E$. Such a state is an [attractor](../book/glossary.md#term-attractor), and the
# cues that roll down into it form its [basin of attraction](../book/glossary.md#term-basin-of-attraction). (Updating all units at
# once, a [synchronous update](../book/glossary.md#term-synchronous-update), enjoys no such guarantee: exercise 3.)
#
# Building a memory now means one thing: choose $\mathbf W$ so that the stored patterns are
# attractors with wide basins.
#
# ### Storing patterns: the Hebbian rule
#
# Start with one pattern $\mathbf x$. We want $\operatorname{sign}\big(\sum_j W_{ij}x_j\big) = x_i$
# for every $i$. Try $W_{ij} = x_i x_j / N$ for $i \ne j$. Then, because $x_j^2 = 1$,
#
# $$
# h_i = \frac1N \sum_{j \ne i} x_i x_j x_j = \frac{N-1}{N}\, x_i ,
# $$
#
# which has the sign of $x_i$: the pattern is a fixed point. The weight is positive when
# units $i$ and $j$ agree in the pattern and negative when they disagree, which is a symmetric, $\pm 1$ version of the
# rule Donald Hebb proposed in 1949 for synapses [[Hebb, 1949]](../book/references.bib#hebb1949) (a connection strengthens
# when the cells on both sides are active together), later summed up in the slogan "cells
# that fire together wire together". For $P$ patterns,
# add their contributions:
#
# $$
# \mathbf W = \frac1N \sum_{\mu=1}^{P} \mathbf x^\mu \big(\mathbf x^\mu\big)^\top, \qquad W_{ii} = 0 .
# $$
#
# Is each pattern still a fixed point? At $\mathbf s = \mathbf x^\nu$ the input splits into two parts,
#
# $$
# h_i = \underbrace{\frac{N-1}{N}\,x^\nu_i}_{\text{signal}}
# + \underbrace{\frac1N \sum_{\mu \ne \nu} x^\mu_i \sum_{j \ne i} x^\mu_j x^\nu_j}_{\text{crosstalk}} .
# $$
#
# The second part is the [crosstalk](../book/glossary.md#term-crosstalk) from the other memories: each one pushes unit $i$
# towards its own value $x^\mu_i$, with a strength set by its *overlap*
# $o^\mu(\mathbf s) = \frac1N\,\mathbf x^\mu \cdot \mathbf s \in [-1, 1]$ with the current state. While the crosstalk
# is smaller than the signal, every stored pattern is a fixed point. Here is the rule as a sum
# of outer products, checked against `helpers.hopfield.hebbian_weights`. We store the first
# three digits, 0, 1 and 2 (the capacity section explains why not more).

# %%
def hebbian_in_the_open(patterns):
    """W = (1/N) sum_mu x x^T with a zero diagonal, for patterns (P, N)."""
    num_units = patterns.shape[1]
    weights = torch.zeros(num_units, num_units)  # (N, N)
    for x in patterns:  # one outer product per stored pattern
        weights += torch.outer(x, x) / num_units
    weights.fill_diagonal_(0.0)  # no unit is connected to itself
    return weights


stored = digits[:3]  # (P, N): the digits 0, 1, 2
weights = hebbian_in_the_open(stored)
torch.testing.assert_close(weights, hebbian_weights(stored))
assert torch.equal(weights, weights.T) and bool((weights.diagonal() == 0).all())
print("W is", tuple(weights.shape), "symmetric, zero diagonal, equal to hebbian_weights")
inputs = stored @ weights  # (P, N): row nu is h at s = x^nu (W is symmetric)
signal = (num_units - 1) / num_units
for digit, x, h in zip(range(3), stored, inputs):
    crosstalk = h - signal * x  # what the other two patterns add
    print(f"digit {digit}: signal {signal:.4f}, largest |crosstalk| "
          f"{crosstalk.abs().max():.4f}, units whose input has the wrong sign: "
          f"{int((x * h < 0).sum())}")


# %% [markdown]
# For each stored digit the crosstalk stays below the signal on every unit, so no unit's input
# points the wrong way: all three digits are fixed points of the network.
#
# ### Recall: rolling down the energy
#
# Retrieval starts the network at the cue and lets it run. In each *sweep* every unit is
# updated once, in a random order, each seeing the values its neighbours have at that moment.
# Below, the update rule in the open, recording the energy after every single-unit update,
# and the check against `helpers.hopfield.recall` (which records it once per sweep, uses the
# same random orders from the same generator, and stops at a fixed point).

# %%
def energy_in_the_open(weights, state):
    return -0.5 * state @ weights @ state  # E(s) = -1/2 s^T W s


TIE = 1e-6  # an exact 0 comes out of float32 as about ±1e-8: count it as 0 (inputs are multiples of 1/35)


def recall_in_the_open(weights, state, sweeps, generator):
    """Asynchronous recall; returns the final state and the energy after every update."""
    state = state.clone()
    energies = [energy_in_the_open(weights, state)]
    for _ in range(sweeps):
        previous = state.clone()
        for i in torch.randperm(len(state), generator=generator).tolist():
            h_i = weights[i] @ state  # input to unit i from all the others
            if abs(h_i) > TIE:  # a tie keeps the unit's value
                state[i] = torch.sign(h_i)
            energies.append(energy_in_the_open(weights, state))
        if torch.equal(state, previous):  # a whole sweep changed nothing: a fixed point
            break
    return state, torch.stack(energies)


cue = corrupt(stored[2], 0.2, torch.Generator().manual_seed(0))  # 7 of 35 pixels flipped
final, energies = recall_in_the_open(weights, cue, 10, torch.Generator().manual_seed(1))
final_helper, energies_helper = recall(weights, cue, 10, generator=torch.Generator().manual_seed(1))
assert torch.equal(final, final_helper)
sweep_ends = energies[::num_units]  # the energy at the end of each sweep
torch.testing.assert_close(sweep_ends, energies_helper[:len(sweep_ends)])
assert bool((energies[1:] <= energies[:-1] + 1e-6).all())  # never rises
print(f"flipped pixels {int((cue != stored[2]).sum())}; energy {energies[0]:.4f} -> "
      f"{energies[-1]:.4f}; recalled digit 2 exactly: {torch.equal(final, stored[2])}")
torch.testing.assert_close(energy(weights, stored[2]), energies[-1])

# %% [markdown]
# Both versions end at the digit 2, every one of the 7 flipped pixels repaired, and the
# energy never rose on the way. Now all three stored digits, each with a fifth of its pixels
# flipped:

# %% mystnb={"image": {"alt": "A 3 by 3 grid of 7 by 5 bitmaps, one row per stored digit (0, 1, 2), with the columns original, corrupted and recalled. Each corrupted cue has 7 pixels flipped, scattered black and white specks that break up the shape, and in every row the recalled image is identical to the original."}}
cues, recalled, curves = [], [], []
for digit in range(3):
    cue = corrupt(stored[digit], 0.2, torch.Generator().manual_seed(10 + digit))
    final, energies = recall_in_the_open(weights, cue, 10, torch.Generator().manual_seed(digit))
    cues.append(cue), recalled.append(final), curves.append(energies)
    assert bool((energies[1:] <= energies[:-1] + 1e-6).all())
    print(f"digit {digit}: energy {energies[0]:8.4f} -> {energies[-1]:8.4f} after "
          f"{len(energies) - 1:3d} updates; recalled exactly: {torch.equal(final, stored[digit])}")
grid = torch.stack([x for triple in zip(stored, cues, recalled) for x in triple])  # (9, N)
fig = show_states(grid, ["original", "corrupted", "recalled"] * 3, ncols=3)

# %% [markdown]
# *Three rows, one per stored digit (0, 1, 2); in each row the original, the cue with 7 random
# pixels flipped (scattered black and white specks), and the recalled state, identical to the
# original.*
#
# The energy along the way, one point per single-unit update:

# %% mystnb={"image": {"alt": "Line plot of the energy E(s) against the single-unit update, from 0 to 70, one line each for the digits 0, 1 and 2. Each line is a descending staircase, flat where a unit already agreed with its input and stepping down where a wrong pixel is flipped back, from between -5.9 and -7.4 to between -16.5 and -17.1; all three reach their floor by update 35, the end of the first sweep, and stay flat through the second."}}
fig, ax = plt.subplots(figsize=(5.6, 3.4))
for digit, energies in enumerate(curves):
    ax.plot(energies, marker=".", ms=3, label=f"digit {digit}")
ax.set(xlabel="single-unit update", ylabel="energy E(s)",
       title="Asynchronous recall never raises the energy")
ax.legend()
fig.tight_layout()
assert all(bool((energies[num_units:] == energies[-1]).all()) for energies in curves)
starts, ends = [e[0].item() for e in curves], [e[-1].item() for e in curves]
assert -7.5 < min(starts) and max(starts) < -5.8 and -17.1 < min(ends) and max(ends) < -16.4, f"got {min(starts)=}, {max(starts)=}, {min(ends)=}, {max(ends)=}"

# %% [markdown]
# *Three staircases, one per digit, each falling from between −5.9 and −7.4 to between −16.5 and
# −17.1 within the first 35 updates (one sweep) and then flat: a step down wherever a wrong
# pixel is flipped back, flat wherever a unit already agreed with its input. The second sweep
# changes nothing, so recall stops.*
#
# ### A slider over the amount of corruption
#
# How much damage can the memory repair? The slider flips a growing fraction of the pixels of
# the digit 0 (the same random order of pixels throughout, so each frame flips the pixels of
# the previous one and a few more), runs asynchronous recall, and shows the cue, the result
# and the energy curve. The dashed line is the energy of the stored digit 0.

# %%
fractions = [0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5]
target = 0


def outcome(state):
    """Name the state: a stored digit, an inverted one, or 'spurious'."""
    for digit, x in enumerate(stored):
        if torch.equal(state, x):
            return f"digit {digit}"
        if torch.equal(state, -x):
            return f"inverted {digit}"
    return "spurious"


def corrupt_and_recall(fraction):
    cue = corrupt(stored[target], fraction, torch.Generator().manual_seed(3))
    final, energies = recall_in_the_open(weights, cue, 10, torch.Generator().manual_seed(3))
    return cue, final, energies


def render_corruption(fraction):
    cue, final, energies = corrupt_and_recall(fraction)
    fig, axes = plt.subplots(1, 3, figsize=(8.4, 3.0), gridspec_kw={"width_ratios": [1, 1, 2.6]})
    draw_state(axes[0], cue, f"cue: {int((cue != stored[target]).sum())} flipped")
    draw_state(axes[1], final, f"recalled:\n{outcome(final)}")
    axes[2].plot(energies, marker=".", ms=3)
    axes[2].axhline(energy(weights, stored[target]), color="0.4", ls="--", lw=1)
    axes[2].set(xlabel="single-unit update", ylabel="energy E(s)", ylim=(-18, 1))
    fig.tight_layout()
    return fig


slider_figure(render_corruption, fractions, description="fraction flipped", initial=0.2)

# %% [markdown]
# *Each frame shows the cue (left), the state recall ends in (middle, named in its title) and
# the energy staircase (right). Up to 30% flipped, the staircase descends to the dashed line
# and the digit 0 comes back; at 40% it stops above the line in a state that is no stored
# digit; at 50% it ends at the inverted digit 2, white on black.*
#
# One cue per frame is an anecdote. The table adds, for each fraction, what happens to 200
# different random corruptions of the digit 0.

# %%
lines = [f"{'flipped':>8} {'pixels':>6}  {'this frame':>11} {'overlap':>8}  |  over 200 cues: "
         f"{'recalled':>8} {'other':>6} {'inverted':>8} {'spurious':>8}"]
rates, frame_outcomes = {}, {}
for fraction in fractions:
    _, final, _ = corrupt_and_recall(fraction)
    frame_outcomes[fraction] = outcome(final)
    cues = corrupt(stored[target].expand(200, -1), fraction, torch.Generator().manual_seed(4))
    finals, _ = recall(weights, cues, 10, generator=torch.Generator().manual_seed(5))
    hits = finals @ stored.T  # (200, P): N times the overlaps; +-N means equal to +-x
    recalled_rate = (hits[:, target] == num_units).float().mean().item()
    other_rate = (hits == num_units).any(-1).float().mean().item() - recalled_rate
    inverted_rate = (hits == -num_units).any(-1).float().mean().item()
    spurious_rate = 1 - recalled_rate - other_rate - inverted_rate
    rates[fraction] = recalled_rate
    overlap = (final @ stored[target]).item() / num_units
    lines.append(f"{fraction:8.2f} {round(fraction * num_units):6d}  "
                 f"{frame_outcomes[fraction]:>11} {overlap:8.4f}  |  {'':14}{recalled_rate:8.3f} "
                 f"{other_rate:6.3f} {inverted_rate:8.3f} {spurious_rate:8.3f}")
print("\n".join(lines))  # one print: the table stays in one block
assert all(frame_outcomes[f] == "digit 0" for f in fractions[:6])
assert frame_outcomes[0.4] != "digit 0" and frame_outcomes[0.5] != "digit 0", f"got {frame_outcomes[0.4]=}, {frame_outcomes[0.5]=}"
assert all(rates[f] >= 0.95 for f in fractions[:5]) and rates[0.5] < 0.1, f"got {rates[0.5]=}"
in_order = list(rates.values())
assert all(later <= earlier + 0.02 for earlier, later in zip(in_order, in_order[1:]))

# %% tags=["remove-cell"]
# Check: where the 200 cues of the 50% row end (the same cues and seeds as the table).
cues_half = corrupt(stored[target].expand(200, -1), 0.5, torch.Generator().manual_seed(4))
assert ((cues_half @ stored[target]) == -1).all()  # 18 of 35 flipped: overlap -1/35
finals_half, _ = recall(weights, cues_half, 10, generator=torch.Generator().manual_seed(5))
ends = [outcome(state) for state in finals_half]
shares = {name: ends.count(name) / 200 for name in set(ends)}
assert shares == {"inverted 0": 0.065, "digit 1": 0.28, "digit 2": 0.215, "inverted 1": 0.205,
                  "inverted 2": 0.185, "spurious": 0.035, "digit 0": 0.015}, f"got {shares=}"


# %% [markdown]
# Up to a fifth of the pixels flipped, every one of the 200 cues (or nearly every one) is
# repaired: the cue lies inside the basin of attraction of the digit 0. Beyond that the
# success rate falls fast, and at half the pixels flipped (18 of 35) the cue has overlap $-1/35$, almost 0, with the
# digit and it is almost never recalled. The failures are not random noise either. The network
# always stops at *some* attractor: another stored digit, the photographic negative of one, or a
# state that was never stored at all. The last two deserve a closer look.
#
# ### Spurious states and the inverted pattern
#
# The energy is quadratic in $\mathbf s$, so $E(-\mathbf s) = E(\mathbf s)$, and the input flips with the state,
# $h(-\mathbf s) = -h(\mathbf s)$. Whenever $\mathbf x$ is a fixed point, so is $-\mathbf x$, at the same energy: the
# Hebbian rule stores every pattern together with its negative. A cue much closer to $-\mathbf x$ than
# to $\mathbf x$, like the cue with 80% of its pixels flipped below, falls into the negative. Near
# halfway, though, recall can end at any attractor: in the 50% row of the table every cue has
# 18 of 35 pixels flipped, so it is slightly closer to $-\mathbf x^0$ than to $\mathbf x^0$, yet only 6.5%
# of the 200 cues end at $-\mathbf x^0$, while 28% end at the digit 1, 21.5% at the digit 2,
# 20.5% at $-\mathbf x^1$ and 18.5% at $-\mathbf x^2$.
#
# The network also has attractors nobody stored. The best known is the *mixture state*
# $\operatorname{sign}(\mathbf x^1 + \mathbf x^2 + \mathbf x^3)$, the majority vote of three patterns: it agrees
# with each of them on most units (for random patterns its overlap with each is 0.5), so all
# three pull it the same way and it can be a fixed point. Flipping the sign of a pattern in
# the vote, $\operatorname{sign}(\mathbf x^1 - \mathbf x^2 - \mathbf x^3)$ for instance, gives a *signed*
# mixture, which is the majority vote of $\mathbf x^1$, $-\mathbf x^2$ and $-\mathbf x^3$; since every negative
# is stored too, these can be fixed points for the same reason. States like this (negatives,
# mixtures and, when the memory is overloaded, many more with no resemblance to any pattern)
# are called [spurious states](../book/glossary.md#term-spurious-state). They are local minima of the energy,
# usually shallower than the stored patterns.

# %% mystnb={"image": {"alt": "Six 7 by 5 bitmaps in a row. The first three are the negatives of the digits 0, 1 and 2, white strokes on black. The fourth is the mixture state, the majority vote of 0, 1 and 2: black bars at the top and bottom, a short vertical stroke in the middle and a few single pixels, resembling none of the three. The fifth is a cue with 80% of the digit 0 flipped, a speckled shape closer to the negative of 0 than to the 0, and the sixth, what it recalls, is exactly the negative of 0."}}
def is_fixed_point(state):
    h = weights @ state
    return bool(((h.abs() <= TIE) | (torch.sign(h) == state)).all())  # a tie keeps the unit


mixture = torch.sign(stored.sum(0))  # majority vote of digits 0, 1, 2 (P = 3 is odd: no ties)
far_cue = corrupt(stored[target], 0.8, torch.Generator().manual_seed(0))  # 28 of 35 flipped
from_far, _ = recall(weights, far_cue, 10, generator=torch.Generator().manual_seed(0))
print(f"{'state':>22} {'fixed point':>11} {'energy':>9}")
named = [(f"digit {d}", stored[d]) for d in range(3)]
named += [(f"inverted {d}", -stored[d]) for d in range(3)] + [("mixture of 0, 1, 2", mixture)]
for name, state in named:
    print(f"{name:>22} {str(is_fixed_point(state)):>11} {energy(weights, state):9.4f}")
    assert is_fixed_point(state), f"{name} is not a fixed point"
print("overlaps of the mixture with digits 0, 1, 2:",
      " ".join(f"{m:.4f}" for m in (stored @ mixture / num_units).tolist()))
print(f"cue with 80% of digit 0 flipped is recalled as: {outcome(from_far)}")
assert outcome(from_far) == "inverted 0", f"80% cue ended at {outcome(from_far)}"
fig = show_states(torch.stack([-stored[0], -stored[1], -stored[2], mixture, far_cue, from_far]),
                  ["−0", "−1", "−2", "mixture", "80% flipped", "recalled"])
_, from_40, _ = corrupt_and_recall(0.4)  # the 40% frame of the slider
signed_mixture = torch.sign(stored[0] - stored[1] - stored[2])
assert torch.equal(from_40, signed_mixture) and is_fixed_point(signed_mixture)
assert not torch.equal(from_40, mixture)
print("the 40% frame ends at sign(x0 - x1 - x2), overlaps with digits 0, 1, 2:",
      " ".join(f"{m:.4f}" for m in (stored @ from_40 / num_units).tolist()))


# %% [markdown]
# *Six small images: the three negatives (white digits on black), the mixture state (a
# shape that borrows strokes from 0, 1 and 2 but is none of them), a cue with 80% of the
# digit 0 flipped, and what it recalls: the negative of 0.*
#
# Every negative has exactly the energy of its digit, and the mixture is a genuine fixed
# point, at a higher energy (−14.8 against −16.5 to −17.1 for the digits): a shallower valley,
# but a valley. A cue that starts near it stays there. The 40% frame of the slider ends in a
# spurious state too, but not in this one: it stops at the signed mixture
# $\operatorname{sign}(\mathbf x^0 - \mathbf x^1 - \mathbf x^2)$, a fixed point whose overlaps with the digits 0,
# 1 and 2 are $0.37$, $-0.71$ and $-0.49$ (last line above): closer to the negatives of the 1
# and the 2 than to the 0 it started from.

# %% [markdown]
# ## Capacity: how many patterns fit?
#
# ### Signal against crosstalk
#
# The crosstalk grows with every pattern added, so at some load the memory must break. For
# *random* patterns (each unit $\pm1$ with probability ½, independently) the size of the
# crosstalk can be estimated. At a stored pattern, the crosstalk on unit $i$ is a sum of
# $(P-1)(N-1)$ terms $\pm 1/N$ with random signs, so it is roughly Gaussian with mean 0 and
# variance $(P-1)(N-1)/N^2 \approx P/N$. The unit is unstable when the crosstalk beats the
# signal $(N-1)/N \approx 1$ in the opposite direction, which happens with probability about
#
# $$
# \Pr(\text{unit unstable}) \approx \Phi\!\left(-\sqrt{\frac{N-1}{P-1}}\right) \approx \Phi\!\left(-\sqrt{N/P}\right),
# $$
#
# with $\Phi$ the standard normal distribution function. The error rate depends on the ratio
# $P/N$ alone, the *load*. Measured at $N = 100$:

# %%
def normal_cdf(z):
    return 0.5 * math.erfc(-z / math.sqrt(2))


generator = torch.Generator().manual_seed(0)
lines = [f"{'P':>3} {'P/N':>5}  {'unstable units, measured':>24}  {'predicted':>9}"]
for count in [5, 10, 14, 20, 30, 40]:
    unstable = []
    for _ in range(20):  # 20 random sets of patterns
        patterns = torch.randint(0, 2, (count, 100), generator=generator) * 2.0 - 1.0
        inputs = patterns @ hebbian_weights(patterns)  # (P, N): h at each stored pattern
        unstable.append((patterns * inputs < 0).float().mean())
    measured = torch.stack(unstable).mean().item()
    predicted = normal_cdf(-math.sqrt(99 / (count - 1)))
    lines.append(f"{count:3d} {count / 100:5.2f}  {measured:24.4f}  {predicted:9.4f}")
print("\n".join(lines))
error_free = {n: n / (2 * math.log(n)) for n in [35, 100]}
print("N / (2 ln N): " + ", ".join(f"N = {n}: {p:.1f}" for n, p in error_free.items()))
assert round(error_free[100]) == 11 and round(error_free[35]) == 5, f"got {round(error_free[100])=}, {round(error_free[35])=}"

# %% [markdown]
# The Gaussian estimate matches the measurement. At a load of 0.14 fewer than 1% of the
# units start out wrong, which sounds harmless. But every wrong unit changes the state, so
# the overlaps with the other patterns change, the crosstalk on the other units grows, and
# more units go wrong. [Amit et al. [1985]](../book/references.bib#amit1985) worked out where this avalanche
# takes over for large $N$: below a critical load of about $0.138$ (0.14 in their abstract), recall from a stored
# pattern ends near it, with a fraction of wrong units that grows with the load and reaches
# about 1.6% at the critical load itself (in the body of the same letter, there the retrieval state's overlap with the pattern
# is about 0.967, and $(1 - 0.967)/2 \approx 1.6\%$); above it, the retrieval states disappear
# and recall wanders far away. (The same abstract adds that the retrieval states are the
# states of lowest energy only for loads below about 0.05; between 0.05 and 0.138 they are
# local minima, with lower spurious states elsewhere.) That number is the classical [storage capacity](../book/glossary.md#term-storage-capacity), for
# recall with a small fraction of errors allowed:
#
# $$
# P_{\max} \approx 0.138\,N .
# $$
#
# Asking for *error-free* recall is much stricter. Then every one of the $N$ units of a
# pattern must be stable, and the Gaussian estimate above must be small even after it is
# multiplied by $N$. [McEliece et al. [1987]](../book/references.bib#mceliece1987) showed (their main result, stated in the
# abstract) that a given stored pattern is a fixed point with probability tending to 1 as
# long as
#
# $$
# P \le \frac{N}{2 \ln N} ,
# $$
#
# and that all $P$ patterns are fixed points at once for $P \le N / (4 \ln N)$. Both
# loads tend to 0 as $N$ grows: $N / (2 \ln N)$ is about 11 patterns for $N = 100$ and 5 for
# $N = 35$, and $N / (4 \ln N)$ half that.
#
# ### Measuring the capacity
#
# `helpers.tasks.hopfield.capacity_curve` runs the experiment: store $P$ random patterns of
# $N$ units, start recall (asynchronous, up to 5 sweeps) at each stored pattern, and count the
# pattern as kept if at most 2% of its units end up wrong (the tolerance of the 0.138
# criterion, not error-free recall); average over several random sets.
# For $N = 100$ and $P$ from 2 to 40:

# %%
pattern_counts = list(range(2, 42, 2))
kept = capacity_curve(100, pattern_counts, trials=8, generator=torch.Generator().manual_seed(0))
print(" P   P/N   fraction kept")
for count, fraction in zip(pattern_counts, kept.tolist()):
    print(f"{count:2d}  {count / 100:.2f}  {fraction:.3f}")
loads = torch.tensor(pattern_counts) / 100
assert bool((kept[loads <= 0.1] >= 0.9).all()) and bool((kept[loads >= 0.3] <= 0.3).all())

# %% mystnb={"image": {"alt": "Line plot with markers of the fraction of patterns kept against the load P / N from 0.02 to 0.40 at N = 100, with a dashed red vertical line at P / N = 0.138. The fraction is 1 up to a load of 0.1, starts to fall near the dashed line, crosses one half near 0.21, drops below 0.1 at 0.3 and is almost 0 at 0.4."}}
fig, ax = plt.subplots(figsize=(5.6, 3.4))
ax.plot(loads, kept, marker="o", ms=4, label="N = 100, measured")
ax.axvline(0.138, color="C3", ls="--", label="P/N = 0.138")
ax.set(xlabel="load P / N", ylabel="fraction of patterns kept", ylim=(-0.03, 1.03),
       title="Capacity of a classical Hopfield network")
ax.legend()
fig.tight_layout()

# %% [markdown]
# *The fraction of stored patterns that survive recall, against the load $P/N$: 1 up to a
# load of 0.1, starting to fall around the dashed line at 0.138, crossing one half near 0.21, and
# down to below 0.1 at a load of 0.3 and almost 0 at 0.4.*
#
# At $N = 100$ the fall is a slope rather than a cliff, and it lies a little to the right of
# 0.138: with only 100 units, some patterns survive past the limit by luck. The 0.138 is a
# large-$N$ result, and the curve sharpens towards a step there as $N$ grows (measured next). About 14 random patterns in 100 units, each of 100 bits, stored in a matrix of
# 10,000 weights: with the Hebbian rule, a memory that uses its weights poorly.
#
# ### The curve against network size
#
# One curve at one size says nothing about how the capacity changes with size. Repeat the measurement for $N = 50$, 100 and 200 at loads
# from 0.04 to 0.36, five random draws per size (each draw a new set of patterns per load and
# a new unit order), and report for each draw the first load at which fewer than half of the
# patterns are kept:

# %% mystnb={"image": {"alt": "Line plot of the fraction of patterns kept against the load P / N from 0.04 to 0.36 for N = 50, 100 and 200, each line the median of five draws inside a shaded band for their range, with a dashed vertical line at 0.138. All three keep every pattern at the lowest loads; the N = 200 curve falls first and most steeply, to almost 0 at a load of 0.28, where the N = 50 curve still keeps 0.43. The band is widest for N = 50."}}
loads_n = [round(0.04 * i, 2) for i in range(1, 10)]  # 0.04, 0.08, ..., 0.36
kept_by_size = {}  # N -> (5 draws, loads): the fraction of patterns kept
for num in [50, 100, 200]:
    counts_n = [round(load * num) for load in loads_n]
    kept_by_size[num] = torch.stack([
        capacity_curve(num, counts_n, trials=1, generator=torch.Generator().manual_seed(10 * num + draw))
        for draw in range(5)])
crossing = {num: [next((load for load, f in zip(loads_n, row.tolist()) if f < 0.5), math.inf)
                  for row in kept] for num, kept in kept_by_size.items()}
print("fraction kept, median of 5 draws, at the loads P/N = " + " ".join(f"{x:.2f}" for x in loads_n))
for num, kept in kept_by_size.items():
    print(f"N = {num:3d}:" + "".join(f"{f:5.2f}" for f in kept.median(0).values.tolist())
          + f"   first load below 1/2: median {statistics.median(crossing[num]):.2f} "
          f"[{min(crossing[num]):.2f}, {max(crossing[num]):.2f}]")

fig, ax = plt.subplots(figsize=(4.8, 3.4))
for i, (num, kept) in enumerate(kept_by_size.items()):
    ax.plot(loads_n, kept.median(0).values, "o-", ms=3, color=f"C{i}", label=f"N = {num}")
    ax.fill_between(loads_n, kept.min(0).values, kept.max(0).values, color=f"C{i}", alpha=0.2)
ax.axvline(0.138, color="C3", ls="--", label="P/N = 0.138")
ax.set(xlabel="load P / N", ylabel="fraction of patterns kept", ylim=(-0.03, 1.03),
       title="Hebbian capacity at three sizes (median, range of 5)")
ax.legend(fontsize=9)
fig.tight_layout()

# %% tags=["remove-cell"]
# Check what the text says: the fall sharpens and moves left towards 0.138 as N grows.
medians_cross = {num: statistics.median(c) for num, c in crossing.items()}
assert medians_cross[50] >= medians_cross[100] >= medians_cross[200] >= 0.16, medians_cross
assert medians_cross[50] > medians_cross[200], medians_cross
assert all(bool((kept[:, 0] == 1).all()) for kept in kept_by_size.values()), kept_by_size
assert float(kept_by_size[200][:, loads_n.index(0.28)].max()) < 0.1, kept_by_size[200]
assert float(kept_by_size[50][:, loads_n.index(0.28)].median()) > 0.3, kept_by_size[50]

# %% [markdown]
# *The fraction of patterns kept against the load for N = 50, 100 and 200, the line the median
# and the band the range of five draws: all three keep everything at low loads; the larger
# the network, the steeper and earlier the fall.*
#
# The larger the network, the earlier and steeper the fall: the first load at which fewer than
# half survive moves down from $N = 50$ to $N = 200$ (the medians printed; on this coarse grid of loads $N = 50$ and 100 share
# a median here, and another set of draws can give all three the same one, while the median curves still fall earlier the larger the network), towards the
# large-$N$ 0.138 from above, and in this run, at a load of 0.28, the 200-unit network has lost nearly all of
# its patterns while the 50-unit one still keeps a good share (another set of draws can leave it
# much less). The bands are wide at $N = 50$
# and narrow at $N = 200$: the smaller the network, the more one draw differs from the next.
# All of it is bounded to what was run: random patterns, recall started from the
# stored pattern itself, at most 5 sweeps, 2% of wrong units tolerated. The projection rule
# needs no such curve for storage: below $P = N$ every stored pattern is a fixed point (shown
# below), so what shrinks with the load is its basins, measured below at $N = 35$.
#
# ### With the Hebbian rule, correlated patterns store far fewer
#
# Real memories are not random. The digits share a lot: a mostly white background, vertical
# strokes on the left and right, a bar at the top or bottom. Their overlaps
# $o^{\mu\nu} = \frac1N\,\mathbf x^\mu\cdot\mathbf x^\nu$ show it:

# %% mystnb={"image": {"alt": "A 10 by 10 heatmap of the overlaps between the digits 0 to 9, with each value written in its cell, on a colour scale from -1 to 1. The diagonal is 1 and most off-diagonal overlaps are positive; the largest, 0.66, are those of the 8 with 0, 3, 6 and 9, while the row and column of the 4 hold mostly small negative values."}}
overlaps = digits @ digits.T / num_units  # (10, 10)
fig, ax = plt.subplots(figsize=(4.4, 4.0))
heatmap(overlaps, ax=ax, xlabel="digit ν", ylabel="digit μ", vmin=-1, vmax=1, annotate=True,
        xticklabels=range(10), yticklabels=range(10), title=r"overlaps $o^{\mu\nu} = \mathbf{x}^\mu \cdot \mathbf{x}^\nu / N$")
for text in ax.texts:
    text.set_fontsize(8)
fig.tight_layout()
off_diagonal = overlaps[~torch.eye(10, dtype=torch.bool)]
print(f"off-diagonal overlaps: mean {off_diagonal.mean():.4f}, largest {off_diagonal.max():.4f}; "
      f"random patterns of N = 35 would give mean 0, spread 1/sqrt(N) = {35 ** -0.5:.4f}")


# %% [markdown]
# *A 10 × 10 heatmap of the overlaps between digits, 1 on the diagonal. Most off-diagonal
# entries are positive; the 8 overlaps 0.66 with 0, 3, 6 and 9, and 3 and 9 overlap 0.54.*
#
# The crosstalk from a pattern is proportional to its overlap, and these overlaps are neither
# small nor of random sign: most of them are positive and push the same way, towards the shared strokes. Store the
# digits $0, 1, \dots, k-1$ for growing $k$, and count how many of them are still fixed points
# and how often a cue with 10% of its pixels flipped (rounded to a whole number of pixels, here a
# little more than 10%) is recalled. For comparison, the same
# for $k$ random patterns of the same size $N = 35$:

# %%
def digits_kept(patterns, generator):
    """Stable patterns, and the recall rate from 10% corruption (20 cues per pattern)."""
    weights_k = hebbian_weights(patterns)
    finals, _ = recall(weights_k, patterns, 5, generator=generator)
    stable = int((finals == patterns).all(-1).sum())
    cues = corrupt(patterns.repeat(20, 1), 0.1, generator)  # (20 P, N)
    finals, _ = recall(weights_k, cues, 10, generator=generator)
    return stable, (finals == patterns.repeat(20, 1)).all(-1).float().mean().item()


generator = torch.Generator().manual_seed(0)
lines = [f"{'k':>2}  {'digits 0..k-1: stable':>21} {'recalled':>9}  |  "
         f"{'random patterns: stable':>23} {'recalled':>9}"]
table = {}
for k in range(1, 11):
    stable, rate = digits_kept(digits[:k], generator)
    random_sets = [torch.randint(0, 2, (k, 35), generator=generator) * 2.0 - 1 for _ in range(10)]
    random_runs = [digits_kept(random_set, generator) for random_set in random_sets]
    random_stable = sum(r[0] for r in random_runs) / 10
    random_rate = sum(r[1] for r in random_runs) / 10
    table[k] = (stable, rate, random_stable, random_rate)
    lines.append(f"{k:2d}  {stable:16d} of {k:2d} {rate:9.3f}  |  {random_stable:18.1f} of {k:2d} "
                 f"{random_rate:9.3f}")
print("\n".join(lines))
assert table[3][:2] == (3, 1.0) and table[4][0] < 4 and table[10][0] == 0, f"digits: {table}"
assert table[4][2] == 4.0 and table[4][3] > 0.99, f"random k = 4: {table[4]}"


# %% [markdown]
# Three digits fit: 0, 1 and 2 are all stable and every cue is repaired. At the fourth
# digit, the 3 (which overlaps 0.49 with the 2), the memory starts to lose patterns, and with
# all ten stored not a single digit is a fixed point. That is a load of $3/35 \approx 0.09$, for the digits taken in this order (some other
# choices of digits keep more of them fixed at once, so read it as where this order breaks, not as
# a capacity). Do not
# set it against 0.138: this table asks for *exact* fixed points and exact recall, while the
# 0.138 is a large-$N$ limit that tolerates wrong units. The fair comparison is the random
# patterns of the same size, held to the same exact standard, in the same table: at $k = 4$
# all four stay fixed points and 99% of the cues are repaired in this run (another draw of
# the random sets can lose a pattern now and then), and from there they degrade
# more gently than the digits. With the Hebbian rule, correlated patterns are stored far worse
# than random ones. Is that a limit of the classical network, or of the Hebbian rule?
#
# ### A better rule: the projection rule
#
# The Hebbian rule adds the patterns' outer products regardless of how much the patterns
# overlap, so the shared strokes pile up into crosstalk. Ask instead directly for what a
# memory needs, $\mathbf W \mathbf x^\mu = \mathbf x^\mu$ for every stored pattern: $\mathbf W$
# must act as the identity on the span of the patterns. The orthogonal projection onto that
# span does, and it gives the [projection rule](../book/glossary.md#term-projection-rule) (also called the pseudo-inverse rule)
# [[Personnaz et al., 1985]](../book/references.bib#personnaz1985) ([Kanter and Sompolinsky [1987]](../book/references.bib#kanter1987) analysed its recall):
#
# $$
# \mathbf W = \mathbf X \big(\mathbf X^\top \mathbf X\big)^{-1} \mathbf X^\top, \qquad W_{ii} = 0 ,
# $$
#
# with the stored patterns as the columns of $\mathbf X$, of shape $(N, P)$. The inverse exists when
# the patterns are linearly independent, which needs $P \le N$. The weights are still
# symmetric with a zero diagonal, so the energy argument and the dynamics are unchanged. At a
# stored pattern the full projection returns the pattern itself, and removing the diagonal
# only takes away the fraction $\big(\mathbf X(\mathbf X^\top\mathbf X)^{-1}\mathbf X^\top\big)_{ii}$ of each unit's
# own value, a diagonal entry of the projection, between 0 and 1. So while every such entry is
# below 1, every stored pattern stays a fixed point however much the patterns overlap. (An
# entry reaches 1 only when the $i$-th unit vector lies in the span of the patterns, always
# the case at $P = N$;
# the input to unit $i$ is then zero, so the unit keeps whatever value it has: the pattern is
# fixed only in the empty sense that nothing moves it.) For
# mutually orthogonal patterns $\mathbf X^\top\mathbf X = N\mathbf I$ and the rule *is* the Hebbian rule: the
# factor $(\mathbf X^\top\mathbf X)^{-1}$ is exactly what undoes the overlaps. In the open, checked
# against `helpers.hopfield.projection_weights`, on all ten digits in the same 35-unit network,
# and then on random patterns of the same size as $P$ approaches $N$ (five random sets per
# $P$, 20 cues per pattern with 10% of the units flipped):

# %%
def projection_in_the_open(patterns):
    """W = X (X^T X)^-1 X^T with a zero diagonal, for patterns (P, N), X = patterns.T (N, P)."""
    x = patterns.T.double()  # (N, P): the patterns as columns (float64 for the inverse)
    weights = x @ torch.linalg.inv(x.T @ x) @ x.T  # (N, N): the projection onto their span
    weights.fill_diagonal_(0.0)
    return weights.to(patterns.dtype)


projection_ten = projection_in_the_open(digits)  # (N, N): all ten digits
torch.testing.assert_close(projection_ten, projection_weights(digits))
print(f"rank of the ten digits: {torch.linalg.matrix_rank(digits).item()}")
for name, rule in [("Hebbian", hebbian_weights), ("projection", projection_weights)]:
    finals, _ = recall(rule(digits), digits, 5, generator=torch.Generator().manual_seed(0))
    print(f"{name:>10} rule: {int((finals == digits).all(-1).sum()):2d} of 10 digits are fixed points")
orthogonal = torch.tensor([[1.0, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1]])  # (3, 4), orthogonal
torch.testing.assert_close(projection_weights(orthogonal), hebbian_weights(orthogonal))
print("orthogonal patterns: projection rule == Hebbian rule")

lines = [f"{'P':>2} {'P/N':>5}  {'fixed points':>12}  {'10% cues repaired: median [range], 5 sets':>42}"]
projection_table = {}
for count in [5, 10, 15, 20, 25, 30]:
    fixed, repaired = [], []
    for trial in range(5):
        generator = torch.Generator().manual_seed(100 + trial)
        random_set = torch.randint(0, 2, (count, 35), generator=generator) * 2.0 - 1  # (P, N)
        weights_p = projection_weights(random_set)
        finals, _ = recall(weights_p, random_set, 5, generator=generator)
        fixed.append(int((finals == random_set).all(-1).sum()))
        cues_p = corrupt(random_set.repeat(20, 1), 0.1, generator)  # (20 P, N), 4 units flipped
        finals, _ = recall(weights_p, cues_p, 10, generator=generator)
        repaired.append((finals == random_set.repeat(20, 1)).all(-1).float().mean().item())
    repaired = torch.tensor(repaired)
    projection_table[count] = (min(fixed), repaired.median().item(), repaired.min().item(),
                               repaired.max().item())
    lines.append(f"{count:2d} {count / 35:5.2f}  {min(fixed):5d} of {count:2d}  {repaired.median():29.2f} "
                 f"[{repaired.min():.2f}, {repaired.max():.2f}]")
print("\n".join(lines))

# %% tags=["remove-cell"]
# Check the numbers the text quotes (all stable, basins shrinking towards P = N).
assert all(row[0] == count for count, row in projection_table.items()), projection_table
assert projection_table[5][2] > 0.95 and projection_table[10][1] > 0.9, projection_table
assert 0.15 < projection_table[20][1] < 0.45, f"P = 20: {projection_table[20]}"
assert projection_table[30][3] < 0.05, f"P = 30: {projection_table[30]}"

# %% [markdown]
# All ten digits are now fixed points, in the same 35-unit network with the same dynamics,
# against none with the Hebbian rule. The crosstalk that sank the digits came from the
# Hebbian rule, not from the classical network. (How many corrupted digits the projection
# rule repairs is measured next to the modern network below.)
#
# What the projection rule cannot do is go past $N$. $P$ linearly independent patterns need
# $P \le N$, and at $P = N$ the projection is the identity, whose zeroed diagonal leaves
# $\mathbf W = 0$: no connections at all, a network that repairs nothing. Well before that the basins shrink: in the random sets above every stored
# pattern is a fixed point at every load, yet the share of cues repaired falls from nearly all
# at $P = 5$ to about a quarter at $P = 20$ and to almost none at $P = 30$. No other rule
# escapes this for long: for random patterns, no choice of $N \times N$ weights with a zero
# diagonal makes a set of more than about $2N$ of them fixed points held by their inputs, every unit's input of the unit's own sign
# ([Gardner [1988]](../book/references.bib#gardner1988), abstract; $\mathbf W = 0$ leaves every state in place, but only in the empty sense above). (The zero diagonal matters: with
# self-connections, $\mathbf W = \mathbf I$ makes every state a fixed point and repairs nothing,
# the extreme of exercise 2.) (Gardner's bound is about random patterns with both signs equally likely. Correlated ones can exceed it, for instance in a degenerate way: if the units come in pairs that agree in every pattern, joining each unit to its twin alone makes every pattern with that pairing a fixed point, exponentially many of them, wanted or not: fixed points, but hardly a memory.) A memory
# that must hold many more random patterns than it has units cannot be a fixed $N \times N$ matrix of weights. It
# has to grow with the patterns, and that is what the modern network does.

# %% [markdown]
# ## Modern Hopfield networks
#
# ### From a quadratic to an exponential energy
#
# Write the classical energy in terms of the overlaps. Since $\mathbf s^\top \mathbf x^\mu (\mathbf x^\mu)^\top \mathbf s = (\mathbf x^\mu \cdot \mathbf s)^2$, and the zeroed diagonal only removes a constant ($P/2$ for $\pm1$
# states),
#
# $$
# E(\mathbf s) = -\frac{1}{2N} \sum_{\mu=1}^{P} \big(\mathbf x^\mu \cdot \mathbf s\big)^2 + \frac P2 .
# $$
#
# Each memory rewards the state by a *quadratic* function of its overlap. A quadratic is a
# gentle reward: a pattern that matches the state only half as well still pulls with half the
# force, and all these partial matches together are the crosstalk. A steeper reward lets the
# best match dominate. [Krotov and Hopfield [2016]](../book/references.bib#krotov2016) replaced the square by higher powers,
# $(\mathbf x^\mu \cdot \mathbf s)^n$, and the capacity grew to about $N^{n-1}$ (their Section 2); [Demircigil et al. [2017]](../book/references.bib#demircigil2017)
# used the exponential and reached a capacity exponential in $N$ (their abstract). Ramsauer and colleagues, in
# "Hopfield Networks is All You Need" [[Ramsauer et al., 2020]](../book/references.bib#ramsauer2020), made the state continuous, $\boldsymbol\xi \in \mathbb{R}^N$, and took the logarithm of the sum of exponentials. With the $P$ stored
# patterns as the columns of $\mathbf X = (\mathbf x^1, \dots, \mathbf x^P) \in \mathbb{R}^{N \times P}$, their energy
# (their Section 2) is
#
# $$
# E(\boldsymbol\xi) = -\frac1\beta \log \sum_{\mu=1}^{P} \exp\!\big(\beta\, (\mathbf x^\mu)^\top \boldsymbol\xi\big)
# + \frac12\, \boldsymbol\xi^\top \boldsymbol\xi + \frac1\beta \log P + \frac12 \rho^2 ,
# $$
#
# with $\rho = \max_\mu \lVert \mathbf x^\mu \rVert$, the largest pattern norm (their M; the last two terms are constants that make
# $E \ge 0$). The first term is a *smooth maximum* of the overlaps $(\mathbf x^\mu)^\top \boldsymbol\xi$: as
# $\beta \to \infty$ it tends to $-\max_\mu (\mathbf x^\mu)^\top \boldsymbol\xi$, so the energy only cares about the
# best-matching memory, and the others no longer add crosstalk. The second term keeps the
# state from running off to infinity.
#
# The update rule follows from the gradient. The gradient of
# $\frac1\beta\log\sum_\mu \exp(\beta (\mathbf x^\mu)^\top \boldsymbol\xi)$ is $\mathbf X \operatorname{softmax}(\beta \mathbf X^\top \boldsymbol\xi)$,
# so $\nabla E(\boldsymbol\xi) = \boldsymbol\xi - \mathbf X \operatorname{softmax}(\beta \mathbf X^\top \boldsymbol\xi)$. The update
#
# $$
# \boldsymbol\xi^{\text{new}} = \mathbf X \operatorname{softmax}\!\big(\beta \mathbf X^\top \boldsymbol\xi\big)
# $$
#
# is therefore a gradient step $\boldsymbol\xi - \nabla E(\boldsymbol\xi)$ with step size 1. It is also what the
# concave-convex procedure gives for an energy that is a convex part ($\tfrac12\boldsymbol\xi^\top\boldsymbol\xi$)
# plus a concave part ($-\mathrm{lse}$), and that procedure guarantees
# $E(\boldsymbol\xi^{\text{new}}) \le E(\boldsymbol\xi)$. In code, next to `helpers.hopfield`, with the gradient
# checked by autograd, on the digit 8 with a fifth of its pixels flipped:

# %%
patterns = digits.T  # X: (N, P), the ten digits as columns


def modern_update_in_the_open(patterns, xi, beta):
    scores = beta * (patterns.T @ xi)  # (P,): one score per stored pattern
    return patterns @ torch.softmax(scores, dim=0)  # (N,): weighted sum of the patterns


def modern_energy_in_the_open(patterns, xi, beta):
    smooth_max = torch.logsumexp(beta * (patterns.T @ xi), dim=0) / beta
    constant = math.log(patterns.shape[1]) / beta + 0.5 * patterns.norm(dim=0).max() ** 2
    return -smooth_max + 0.5 * xi @ xi + constant


beta = 0.25
cue_8 = corrupt(digits[8], 0.2, torch.Generator().manual_seed(3))  # 7 of 35 pixels flipped
torch.testing.assert_close(modern_update_in_the_open(patterns, cue_8, beta),
                           modern_hopfield_update(patterns, cue_8, beta))
xi = cue_8.clone().requires_grad_(True)
modern_energy_in_the_open(patterns, xi, beta).backward()
torch.testing.assert_close(cue_8 - xi.grad, modern_hopfield_update(patterns, cue_8, beta))
print("update = helpers' modern_hopfield_update = one gradient step xi - grad E (autograd)")
xi, energies = cue_8, []
for step in range(5):
    energies.append(modern_energy_in_the_open(patterns, xi, beta))
    offset = energies[-1] - modern_energy(patterns, xi, beta)  # helper drops the constants
    xi = modern_update_in_the_open(patterns, xi, beta)
print("energy over 5 updates:", " ".join(f"{e:.4f}" for e in energies))
print(f"helpers' modern_energy differs by the constant {offset:.4f}")
assert all(later <= earlier + 1e-5 for earlier, later in zip(energies, energies[1:]))

# %% [markdown]
# The energy drops sharply at the first update and then keeps falling, slowly. At this
# $\beta = 0.25$ one step does *not* land next to a fixed point near the 8: the iteration is
# heading for a metastable state that mixes the 8 with its look-alikes (four digits share 90%
# of its weight, as the section on metastable states shows), and the first update stops 0.82
# away from it (the cue started 5.2 away). Ramsauer et al. prove one-step retrieval (their
# Theorem 4) only for a pattern well separated from the others, and only for a cue close to
# it: their bound on the distance left after one update falls like
# $\exp\!\big(-\beta(\Delta - 2\rho\lVert\boldsymbol\xi - \mathbf x\rVert)\big)$, with $\Delta$ the
# pattern's separation (its dot product with itself minus its largest dot product with
# another pattern), $\rho$ the largest pattern norm and $\boldsymbol\xi$ the cue (slightly simplified).
# For the 8, $\Delta = 12$ (exercise 4), $\rho = \sqrt{35}$, and the cue lies $2\sqrt 7 \approx 5.3$
# away, so $\Delta - 2\rho\lVert\boldsymbol\xi - \mathbf x\rVert$ is negative (last line below) and the
# theorem promises nothing for this cue. What happens is measured instead: at $\beta = 2$ one
# update lands within 0.002 of the fixed point, which is the 8 itself:

# %%
print(f"{'beta':>5} {'|cue - fixed|':>14} {'|one step - fixed|':>19} {'|fixed - x_8|':>14}")
one_step_gap = {}
for beta_check in [0.25, 2.0]:
    fixed = retrieve(patterns, cue_8, beta_check, steps=50)
    one_step = modern_hopfield_update(patterns, cue_8, beta_check)
    one_step_gap[beta_check] = (one_step - fixed).norm().item()
    print(f"{beta_check:5.2f} {(cue_8 - fixed).norm():14.4f} {one_step_gap[beta_check]:19.4f} "
          f"{(fixed - digits[8]).norm():14.4f}")
assert 0.8 < one_step_gap[0.25] < 0.85 and one_step_gap[2.0] < 0.002, f"got {one_step_gap[0.25]=}, {one_step_gap[2.0]=}"
separation_8 = (digits[8] @ digits[8] - (digits @ digits[8])[torch.arange(10) != 8].max()).item()
exponent_8 = separation_8 - 2 * patterns.norm(dim=0).max() * (cue_8 - digits[8]).norm()
print(f"separation of the 8: {separation_8:.0f}; Delta - 2 M |cue - x_8| = {exponent_8:.1f}")
assert separation_8 == 12 and exponent_8 < 0, (separation_8, exponent_8)

# %% [markdown]
# ### The update is attention
#
# Read the update again, $\boldsymbol\xi^{\text{new}} = \mathbf X \operatorname{softmax}(\beta \mathbf X^\top \boldsymbol\xi)$, with
# the stored patterns as the rows of $K = V = \mathbf X^\top \in \mathbb{R}^{P \times N}$:
#
# | modern Hopfield network | attention |
# |---|---|
# | state $\boldsymbol\xi$ (the cue) | [query](../book/glossary.md#term-query) $q$ |
# | stored patterns $\mathbf x^\mu$ | [keys](../book/glossary.md#term-key) $k_\mu$, and also the [values](../book/glossary.md#term-value) $v_\mu$ |
# | overlaps $\mathbf X^\top \boldsymbol\xi$ | scores $K q$ |
# | $\beta$ | the scale ($1/\sqrt d$ in scaled dot-product attention) |
# | $\operatorname{softmax}(\beta \mathbf X^\top \boldsymbol\xi)$ | the [attention weights](../book/glossary.md#term-attention-weight) |
# | $\boldsymbol\xi^{\text{new}} = \mathbf X \operatorname{softmax}(\cdot)$ | the output $V^\top \operatorname{softmax}(\cdot)$ |
#
# One update of the modern Hopfield network *is* one [scaled dot-product attention](../book/glossary.md#term-scaled-dot-product-attention),
# with scale $\beta$ instead of $1/\sqrt d$. PyTorch's `F.scaled_dot_product_attention` takes
# the scale as an argument; the book's helper always divides by $\sqrt N$, so its query is
# multiplied by $\beta\sqrt N$ to compensate. Many cues at once are simply many queries:

# %%
cues = corrupt(digits, 0.2, torch.Generator().manual_seed(1))  # (Q, N): one cue per digit
hopfield_out = modern_hopfield_update(patterns, cues, beta)  # (Q, N)
keys = values = digits  # (K, N): the stored patterns, K = P = 10
torch_out = F.scaled_dot_product_attention(cues[None], keys[None], values[None], scale=beta)[0]
helper_out, helper_weights = scaled_dot_product_attention(cues * beta * math.sqrt(num_units),
                                                          keys, values)
check_shape(helper_weights, (10, 10))  # (Q, K): one row of weights per cue
torch.testing.assert_close(torch_out, hopfield_out)
torch.testing.assert_close(helper_out, hopfield_out)
torch.testing.assert_close(helper_weights, hopfield_weights(patterns, cues, beta))
print("Hopfield update == F.scaled_dot_product_attention(scale=beta) == helpers' attention")

# %% [markdown]
# ### The classical update is linear attention
#
# The classical network fits the same table, with a different similarity. With the
# patterns as keys and values, its input is
#
# $$
# h = \mathbf W \mathbf s = \frac1N \sum_{\mu} \mathbf x^\mu \big((\mathbf x^\mu)^\top \mathbf s\big) - \frac PN\, \mathbf s
# = \frac1N \mathbf X \mathbf X^\top \mathbf s - \frac PN\, \mathbf s ,
# $$
#
# the second term being the zeroed diagonal. Apart from that term, the synchronous update
# $\mathbf s \leftarrow \operatorname{sign}(\mathbf X \mathbf X^\top \mathbf s)$ is attention with the plain dot product
# $(\mathbf x^\mu)^\top \mathbf s$ as similarity, no softmax and no normalisation: the
# [linear attention](../book/glossary.md#term-linear-attention) of chapter 9 with the identity as feature map, un-normalised,
# followed by a sign. The Hebbian matrix $\frac1N \mathbf X \mathbf X^\top$ is the $(N, N)$ state
# $\sum_\mu \phi(k_\mu) v_\mu^\top$ of linear attention, with $k_\mu = v_\mu = \mathbf x^\mu$: a
# fixed size whatever the number of patterns, which is why the classical network compresses
# its memories while the modern one, like a KV cache, keeps every pattern. And the flat weights that chapter 9
# measured for linear attention with elu + 1, whose similarities grow only linearly, are the
# crosstalk of this chapter in another form: with the identity as feature map, every
# pattern pulls in proportion to its overlap. Going from the classical to the modern network
# is going from linear to softmax attention. It is not the only way out of crosstalk, though.
# The projection rule keeps the fixed $(N, N)$ state and changes how it is *written*: written
# one pattern at a time, the error-correcting write
# $\mathbf W \leftarrow \mathbf W + \eta\,(\mathbf x^\mu - \mathbf W\mathbf x^\mu)(\mathbf x^\mu)^\top$ is the delta
# rule of Widrow and Hoff, and repeated over the patterns from $\mathbf W = 0$ with a small enough
# step it converges to the projection (checked below with $\eta = 0.02$). "Small enough" is a
# real condition: one write multiplies the error on $\mathbf x^\mu$ by $1 - \eta N$ (as
# $\lVert\mathbf x^\mu\rVert^2 = N$), so it needs $\eta < 2/N$, and a larger step makes the
# weights grow without bound. The same delta-rule write is the state update of DeltaNet, a
# linear attention with less crosstalk than the plain sum [[Schlag et al., 2021]](../book/references.bib#schlag2021) (their Section 4).
# What no write can do is fit much more than $N$ random patterns into $N^2$ numbers. The identities
# above, checked on the ten digits:

# %%
classical_ten = hebbian_weights(digits)  # (N, N): all ten digits, zero diagonal
num_patterns = digits.shape[0]
linear_scores = cues @ digits.T / num_units  # (Q, P): dot products, no softmax, no division
unnormalised = linear_scores @ digits  # (Q, N): un-normalised linear attention, V = the digits
torch.testing.assert_close(cues @ classical_ten, unnormalised - num_patterns / num_units * cues)
hebbian_state = digits.T @ digits / num_units  # (N, N): linear attention's state, k = v = x
torch.testing.assert_close(classical_ten, hebbian_state - torch.eye(num_units) * num_patterns / num_units)
h_sync = cues @ classical_ten
sync_step, _ = recall(classical_ten, cues, 1, mode="sync")
torch.testing.assert_close(sync_step, torch.where(h_sync == 0, cues, torch.sign(h_sync)))
print("classical input W s = un-normalised linear attention (identity features) - (P/N) s")
delta_state = torch.zeros(num_units, num_units)  # (N, N): written one pattern at a time
for sweep in range(200):
    for x in digits:  # delta rule: W <- W + eta (x - W x) x^T, eta = 0.02
        delta_state += 0.02 * torch.outer(x - delta_state @ x, x)
full_projection = projection_ten + torch.diag(torch.linalg.pinv(digits) @ digits).diag()
print("delta rule after 200 sweeps equals the projection (with its diagonal) within 1e-4:",
      bool(((delta_state - full_projection).abs() < 1e-4).all()))

# %% [markdown]
# ### Ten digits, one step
#
# The Hebbian network could hold three digits, the projection rule all ten as fixed points. Store
# all ten in the modern one, flip a fifth
# of the pixels of each, and apply a single update with a large $\beta = 2$:

# %% mystnb={"image": {"alt": "Two rows of ten 7 by 5 bitmaps. Top row, labelled cue 0 to cue 9: each digit with 7 random pixels flipped, speckled and partly broken. Bottom row, labelled with an arrow and the digit: the state after one update, a clean copy of each digit (the 2 keeps a barely visible light-grey patch)."}}
retrieved = retrieve(patterns, cues, beta=2.0, steps=1)  # (Q, N): one step for every cue
correct = (torch.sign(retrieved) == digits).all(-1)
print("retrieved exactly (sign of the result):", correct.int().tolist())
assert bool(correct.all())
fig = show_states(torch.cat([cues, retrieved]), [f"cue {d}" for d in range(10)]
                  + [f"→ {d}" for d in range(10)], ncols=10)

# %% [markdown]
# *Two rows of ten images: the top row holds the ten digits with 7 random pixels each
# flipped; the bottom row the states after one update, each with its digit's sign at every
# pixel (the faint grey patch in the 2: values not yet at -1 or 1).*
#
# Is that luck? For many cues per corruption level, compare three things: how often the
# modern network retrieves the right digit, how often the right digit is the *unique* nearest
# stored pattern (no memory can do better than that: a cue closer to another digit *looks*
# like that digit), and the classical network with the same ten digits stored by either rule
# (the same cues and recall as before):

# %%
classical_weights = hebbian_weights(digits)  # all ten digits in a classical network
projection_digits = projection_weights(digits)  # the same ten digits, projection rule
labels = torch.arange(10).repeat(100)  # 100 cues per digit
lines = [f"{'flipped':>7}  {'modern, 1 step':>14}  {'unique nearest':>14}  {'tied nearest':>12}  "
         f"{'Hebbian':>7}  {'projection':>10}"]
projection_rates = {}
for fraction in [0.1, 0.2, 0.3]:
    many_cues = corrupt(digits[labels], fraction, torch.Generator().manual_seed(8))  # (1000, N)
    modern_ok = (torch.sign(retrieve(patterns, many_cues, 2.0)) == digits[labels]).all(-1)
    scores = many_cues @ patterns  # (1000, P): overlaps with every digit
    own_score = scores.gather(1, labels[:, None])[:, 0]
    best_other = scores.scatter(1, labels[:, None], -math.inf).max(-1).values
    unique, tied = own_score > best_other, own_score == best_other
    finals, _ = recall(classical_weights, many_cues, 10, generator=torch.Generator().manual_seed(9))
    classical_ok = (finals == digits[labels]).all(-1)
    finals, _ = recall(projection_digits, many_cues, 10, generator=torch.Generator().manual_seed(9))
    projection_rates[fraction] = (finals == digits[labels]).all(-1).float().mean().item()
    lines.append(f"{fraction:7.1f}  {modern_ok.float().mean():14.3f}  "
                 f"{unique.float().mean():14.3f}  {tied.float().mean():12.3f}  "
                 f"{classical_ok.float().mean():7.3f}  {projection_rates[fraction]:10.2f}")
    assert bool((modern_ok | ~unique).all()) and bool((unique | tied | ~modern_ok).all()), fraction
    assert classical_ok.float().mean() < 0.05, f"Hebbian recall {classical_ok.float().mean():.3f}"
    assert projection_rates[fraction] < modern_ok.float().mean(), f"projection {projection_rates}"
print("\n".join(lines))
assert projection_rates[0.1] > 0.85 and 0.4 < projection_rates[0.2] < 0.75, projection_rates

# %% [markdown]
# The modern network retrieves the right digit every time it is the unique nearest one, and
# otherwise only sometimes when it is tied with another (the tie is then broken by the small
# weights of the remaining digits): it is as good as a content-addressable memory can be. The
# Hebbian network with the same ten digits never does. The projection rule, in the same
# classical network, repairs most cues with 10% of the pixels flipped but fewer and fewer as
# the corruption grows: its digits are all fixed points, but their basins are smaller than the
# regions in which each digit is the nearest one, which the modern network fills. (At 30%
# flipped, many cues simply look more like another digit, and no memory could fix them.) On
# the digits, then, the modern network's advantage is wider basins, not storage. Its real
# advantage shows past $N$ patterns.
#
# ### Far more memories than units
#
# The digits are only ten. To see how far the modern network goes, store $P = 10{,}000$
# random patterns of $N = 100$ units, a load of 100, where the Hebbian network stopped at 0.14
# and no zero-diagonal $N \times N$ weight matrix could go much past 2, and retrieve 200 of them from cues with 20%
# of their units flipped, in one step. Five random sets of patterns, the first shown in detail:

# %%
lines, rates_random = [], {0.1: [], 0.5: []}
for trial in range(5):  # five random sets of P = 10,000 patterns
    generator = torch.Generator().manual_seed(trial)
    many_patterns = torch.randint(0, 2, (10_000, 100), generator=generator) * 2.0 - 1  # (P, N)
    chosen = torch.randint(0, 10_000, (200,), generator=generator)
    random_cues = corrupt(many_patterns[chosen], 0.2, generator)  # (200, N)
    scores = random_cues @ many_patterns.T  # (200, P)
    own = scores.gather(1, chosen[:, None])[:, 0]
    closest_other = scores.scatter(1, chosen[:, None], -1e9).max(-1).values  # (200,)
    if trial == 0:
        lines.append(f"set 0: dot product of each cue with its own pattern: {own.mean():.1f} (of 100); "
                     f"with the closest other pattern: {closest_other.mean():.1f} on average, "
                     f"{closest_other.max():.0f} at most")
        scores_0, chosen_0, own_0, closest_0 = scores, chosen, own, closest_other  # exercise 4
    for beta_random in [0.1, 0.5]:
        out = retrieve(many_patterns.T, random_cues, beta_random)  # (200, N)
        rates_random[beta_random].append(
            (torch.sign(out) == many_patterns[chosen]).all(-1).float().mean().item())
for beta_random, rates in rates_random.items():
    lines.append(f"beta = {beta_random}: share of the 200 retrieved exactly in one step, "
                 f"over 5 sets: min {min(rates):.3f}, max {max(rates):.3f}")
print("\n".join(lines))
assert min(rates_random[0.5]) == 1.0 and max(rates_random[0.1]) < 0.05, rates_random

# %% [markdown]
# With $\beta = 0.5$ all 200 come back exactly, in each of the five sets, with a hundred times
# more patterns than units.
# The geometry explains it: a cue keeps a dot product of 60 (an overlap of 0.6) with its own pattern, while in 100
# dimensions the closest of the other 9,999 random patterns stays well below it on average, and
# in this set below it even for the worst cue (the printed average and maximum); a sharp enough softmax sees nothing but the winner. Ramsauer et al.
# prove that the number of random patterns that can be stored and retrieved this way grows
# *exponentially* in $N$ (their Theorem 3, in Section 2, for patterns drawn at random on a sphere; the $\pm1$
# patterns here lie on a sphere too, but are drawn from the corners of a cube, not from the whole sphere; the claim is also stated in
# their abstract). This experiment alone does not show the exponential: it is one load at one
# size, and a polynomial energy such as Krotov and Hopfield's with $n = 3$ (capacity about $N^2$)
# could in principle reach as many at $N = 100$ too. What it does show is a memory far past
# the $N$ or $2N$ random patterns that any fixed zero-diagonal $N \times N$ weight matrix can hold. With $\beta = 0.1$,
# though, the 9,999 losers together outweigh the winner and the result is a blur: $\beta$ must
# grow with $\log P$ (exercise 4 derives a $\beta$ that is enough, and it grows with $\log P$;
# it is a sufficient value, not the least one).
#
# To see how the capacity grows, vary $N$. For $N = 16, 24, \dots, 48$ store $P = 2, 4, 8, \dots$
# random patterns and retrieve 200 of them from cues with 20% of their units flipped (rounded to a
# whole number of units: a little under 20% at $N = 16$ and 32, a little over at 24 and 48, which can
# make the steps between neighbouring sizes uneven), in one
# step at a fixed $\beta = 1$; count a cue as retrieved when the sign of the result is exactly
# its pattern. Five random draws of the patterns and cues per point. For each draw, the
# capacity is the largest power of two $P$ at which at least half of the cues are retrieved:
#

# %%
retrieved = {}  # N -> {k: share retrieved at P = 2^k, one per draw}
for num in [16, 24, 32, 40, 48]:
    retrieved[num] = {}
    for k in range(1, 20):  # P = 2, 4, 8, ... until no draw retrieves half
        shares_k = []
        for draw in range(5):
            generator = torch.Generator().manual_seed(1000 * num + k + 100_000 * draw)
            stored_n = torch.randint(0, 2, (2 ** k, num), generator=generator) * 2.0 - 1  # (P, N)
            chosen_n = torch.randint(0, 2 ** k, (200,), generator=generator)
            cues_n = corrupt(stored_n[chosen_n], 0.2, generator)  # (200, N)
            out_n = retrieve(stored_n.T, cues_n, 1.0)  # one step, beta = 1
            shares_k.append((torch.sign(out_n) == stored_n[chosen_n]).all(-1).float().mean().item())
        retrieved[num][k] = shares_k
        if max(shares_k) < 0.5:
            break
largest_power = {}  # N -> per draw, the largest k with at least half retrieved at P = 2^k
for num, shares in retrieved.items():
    largest_power[num] = [max((k for k in shares if all(shares[j][draw] >= 0.5 for j in range(1, k + 1))),
                              default=0) for draw in range(5)]
sizes = torch.tensor(list(largest_power), dtype=torch.float64)
powers = torch.tensor([statistics.median(ks) for ks in largest_power.values()], dtype=torch.float64)
slope = ((sizes - sizes.mean()) * (powers - powers.mean())).sum() / ((sizes - sizes.mean()) ** 2).sum()
print("  N   largest P with ≥ half retrieved, 5 draws: median [range] median P / N    2N")
for num, ks in largest_power.items():
    median_p = 2 ** statistics.median(ks)
    print(f"{num:3d}   {median_p:>8.0f} [{2 ** min(ks)}, {2 ** max(ks)}]".ljust(62)
          + f"{median_p / num:12.0f}  {2 * num:4d}")
print(f"log2 P (median) grows by about {slope:.2f} per unit: P doubles about every "
      f"{1 / slope:.1f} units")

# %% mystnb={"image": {"alt": "Two panels. Left: the share of 200 cues retrieved against the number of stored patterns P on a log scale, one line (the median) with a shaded band (the range of five draws) for each of N = 16, 24, 32, 40 and 48, and a dotted line at one half; each curve stays near 1 and then falls steeply, and the fall moves right by several doublings from N = 16 to N = 48. Right, log scale: the largest P with at least half retrieved against N climbs along a roughly straight line from 32 at N = 16 to 16384 at N = 48, with range bars only at N = 16 and 24; it starts on the dashed 2N line at N = 16 and lies far above it from N = 32 on, while the dotted 0.138 N line runs near the bottom."}}
fig, (ax_share, ax_size) = plt.subplots(1, 2, figsize=(9, 3.6))
for i, (num, shares) in enumerate(retrieved.items()):
    counts_n = [2 ** k for k in shares]
    rows = torch.tensor(list(shares.values()))  # (ks, 5 draws)
    ax_share.semilogx(counts_n, rows.median(1).values, "o-", ms=3, color=f"C{i}", label=f"N = {num}",
                      base=2)
    ax_share.fill_between(counts_n, rows.min(1).values, rows.max(1).values, color=f"C{i}", alpha=0.2)
ax_share.axhline(0.5, color="0.5", lw=1, ls=":")
ax_share.set(xlabel="patterns stored P (log scale)", ylabel="share of 200 cues retrieved",
             title="Modern network, β = 1, about 20% flipped")
ax_share.legend(fontsize=9)
medians = [2 ** statistics.median(ks) for ks in largest_power.values()]
lows = [m - 2 ** min(ks) for m, ks in zip(medians, largest_power.values())]
highs = [2 ** max(ks) - m for m, ks in zip(medians, largest_power.values())]
ax_size.errorbar(sizes, medians, yerr=[lows, highs], fmt="o-", capsize=3,
                 label="modern, β = 1 (median, range)")
ax_size.semilogy(sizes, 2 * sizes, "--", label="2N: limit for N × N weights, zero diagonal")
ax_size.semilogy(sizes, 0.138 * sizes, ":", label="0.138 N: Hebbian")
ax_size.set(xlabel="N (units)", ylabel="largest P, ≥ half retrieved (log)", title="Capacity against size")
ax_size.legend(fontsize=9)
fig.tight_layout()

# %% tags=["remove-cell"]
# Check what the text says: growth by doublings, far above 2N from N = 32 on, tight ranges.
assert 0.2 < slope < 0.4, f"slope {slope:.3f} outside (0.2, 0.4)"
assert all(2 ** min(ks) > 10 * 2 * num for num, ks in largest_power.items() if num >= 32), largest_power
assert all(max(ks) - min(ks) <= 1 for ks in largest_power.values()), largest_power
assert (2 ** statistics.median(largest_power[16]), 2 ** statistics.median(largest_power[48])) == (32, 16384), largest_power
assert 2 ** min(largest_power[48]) > 48 ** 2 == 2304, largest_power
assert f"{1 / slope:.1f}" == "3.5", f"doubling every {1 / slope:.2f} units"

# %% [markdown]
# *Left: the share of cues retrieved against the number of stored patterns (log scale), one
# colour per size, the line the median and the band the range of five draws; each curve stays
# near 1 and then falls, and the fall moves right by several doublings from N = 16 to N = 48.
# Right: the largest P with at least half retrieved, median and range, on a log scale, from 32
# patterns at N = 16 to 16,384 at N = 48; the lines for 2N and 0.138 N stay near the bottom.*
#
# The five draws agree to within one doubling at every size, and on a log scale the median
# capacity climbs along a roughly straight line: each unit added multiplies the number of
# patterns by about the same factor, which is what exponential growth looks like. That is
# what the curves show, and no more: random patterns, $N$ from 16 to 48, $\beta = 1$, about 20% of
# the units flipped, one step, "at least half retrieved" as the criterion. Five sizes cannot prove a
# growth law (Ramsauer et al.'s Theorem 3 is the general statement, with its own conditions on
# $\beta$ and the separation of the patterns); but a polynomial $N^2$ would bend over on this
# plot, and by $N = 48$ even the smallest of the five draws is well above $48^2 = 2304$. For
# random patterns, a fixed $N \times N$ memory with a zero diagonal stays near or below the
# $2N$ line.
#
# There is a price, and it is the point. The classical network keeps $N^2$ weights whatever
# $P$ is; the modern one keeps every pattern, $P \times N$ numbers, and reads them all at each
# update. For the ten digits that is *less* (350 numbers against 1,225 weights); for the
# 10,000 random patterns it is a million numbers against 10,000 weights. A memory that holds
# far more than $N$ random patterns must grow with them, and the modern network does: it is a lookup
# table read by attention, an external memory.
#
# ## Inverse temperature: one memory or an average
#
# In chapter 3, a [temperature](../book/glossary.md#term-temperature) $\tau$ divided the scores before the softmax: large
# $\tau$ spread the weights evenly, small $\tau$ concentrated them on the largest score (the
# [hardmax](../book/glossary.md#term-hardmax)). Here $\beta$ *multiplies* the scores, so $\beta = 1/\tau$ is the
# *inverse temperature*, the name it has in statistical physics. Large $\beta$ retrieves the
# single best-matching memory. Small $\beta$ gives every memory about the same weight and the
# update returns their average. In between, the weights spread over a group of similar
# memories, and the result is an average of that group.
#
# The slider moves $\beta$ over powers of two, from $1/64$ to $2$, for the corrupted 8 of the
# energy example. Left: the cue. Middle: the weights $\operatorname{softmax}(\beta \mathbf X^\top\boldsymbol\xi)$
# over the ten stored digits. Right: the state after one update, in grey levels from $-1$
# (white) to $+1$ (black).

# %%
betas = [2.0 ** k for k in range(-6, 2)]  # 1/64 ... 2


def render_beta(beta):
    weights_8 = hopfield_weights(patterns, cue_8, beta)  # (P,)
    out = modern_hopfield_update(patterns, cue_8, beta)  # (N,)
    fig, axes = plt.subplots(1, 3, figsize=(8.4, 3.0), gridspec_kw={"width_ratios": [1, 2.6, 1.2]})
    draw_state(axes[0], cue_8, "cue: corrupted 8")
    axes[1].bar(range(10), weights_8, color="C0")
    beta_label = f"1/{round(1 / beta)}" if beta < 1 else f"{beta:g}"
    axes[1].set(xticks=range(10), ylim=(0, 1.02), xlabel="stored digit μ",
                ylabel="weight", title=f"softmax(β Xᵀξ), β = {beta_label}")
    image = axes[2].imshow(out.reshape(7, 5), cmap="gray_r", vmin=-1, vmax=1)
    axes[2].set(xticks=[], yticks=[], title="after one update")
    fig.colorbar(image, ax=axes[2], fraction=0.08)
    fig.tight_layout()
    return fig


slider_figure(render_beta, betas, description="inverse temperature β", fmt="{:.4g}", initial=0.25)

# %% [markdown]
# *At $\beta = 1/64$ the ten bars are nearly equal (about 0.1 each) and the output is a
# faint grey smudge, the average of all ten digits. As $\beta$ grows, the bar of the 8 (already the tallest, if barely, at $\beta = 1/64$) pulls
# further ahead of those of its look-alikes 3, 6, 0 and 9, and the output sharpens into an 8; from
# $\beta = 1$ on, the 8 holds almost all the weight and the output is the clean black-and-white
# digit.*
#
# The numbers behind the frames (entropy in nats; the maximum, for ten equal weights, is
# $\ln 10 = 2.3026$):

# %%
mean_pattern = digits.mean(0)  # (N,): the average of all stored digits
print(f"{'beta':>7} {'tau':>6}  {'max weight':>10} {'entropy':>8}  {'top 3 digits':>12}  "
      f"{'cos(out, 8)':>11} {'cos(out, mean)':>14}")
table = {}
for beta in betas:
    weights_8 = hopfield_weights(patterns, cue_8, beta)
    out = modern_hopfield_update(patterns, cue_8, beta)
    entropy = -(weights_8 * weights_8.log()).sum().item()
    table[beta] = (weights_8.max().item(), entropy, weights_8.argmax().item(),
                   F.cosine_similarity(out, digits[8], dim=0).item(),
                   F.cosine_similarity(out, mean_pattern, dim=0).item())
    print(f"{beta:7.4f} {1 / beta:6.2f}  {table[beta][0]:10.4f} {entropy:8.4f}  "
          f"{str(weights_8.topk(3).indices.tolist()):>12}  {table[beta][3]:11.4f} "
          f"{table[beta][4]:14.4f}")
rows = list(table.values())
assert all(b[0] > a[0] and b[1] < a[1] for a, b in zip(rows, rows[1:]))  # sharper as beta grows
assert rows[0][1] > 0.98 * math.log(10) and rows[0][4] > 0.99, f"got {rows[0][1]=}, {0.98 * math.log(10)=}, {rows[0][4]=}"  # tiny beta: the mean of all
assert rows[-1][2] == 8 and rows[-1][3] > 0.999, f"got {rows[-1][2]=}, {rows[-1][3]=}"  # large beta: the digit 8 itself


# %% [markdown]
# As $\beta$ grows the top weight rises and the entropy falls at every step; the top digit is
# the 8 throughout (the cue's best match), but the output only *becomes* the 8 once the top
# weight dominates. At $\beta = 1/64$ the output is, to a cosine of 0.998, the mean of all
# ten digits.
#
# ### Metastable states
#
# One update is a snapshot. Iterate the update until it stops moving. Ramsauer et al.
# describe three kinds of fixed point (their abstract):
#
# - small $\beta$: a **global fixed point** near the mean of all patterns, whatever the cue;
# - large $\beta$: a fixed point at (almost exactly) a single stored pattern, which is
#   retrieval;
# - in between: a [metastable state](../book/glossary.md#term-metastable-state), a fixed point that averages a *subset* of similar
#   patterns, such as the 8 and its look-alikes.
#
# Whether all three show up depends on the patterns. A handy measure is the number of
# patterns that together hold 90% of the weight at the fixed point. (Ramsauer et al. report in their abstract that heads in the first layers mostly average over
# all tokens and heads in higher layers over subsets, in metastable states.) Iterated to the fixed point from the corrupted 8, for each $\beta$, and, to test
# "whatever the cue", the number of different fixed points reached from 110 starting states
# (100 random $\pm1$ states and the ten corrupted digits of the attention check above):

# %% mystnb={"image": {"alt": "Four 7 by 5 grey-level images in a row, the fixed points reached from the corrupted 8 at beta = 1/64, 1/8, 1/4 and 1. At 1/64 a patchwork of light and mid greys with no clear shape (the global average); at 1/8 a soft, blurred 8; at 1/4 a clearer 8 with some grey blur left; at 1 a crisp black-and-white 8."}}
def patterns_for_90_percent(weights_row):
    return int((weights_row.sort(descending=True).values.cumsum(0) < 0.9).sum()) + 1


def distinct_fixed_points(patterns, starts, beta):
    """How many different fixed points the update reaches from the rows of starts (M, N)."""
    ends = retrieve(patterns, starts, beta, steps=200)  # (M, N)
    torch.testing.assert_close(modern_hopfield_update(patterns, ends, beta), ends, atol=1e-4, rtol=0)
    found = []
    for end in ends:
        if not any((end - other).norm() < 1e-2 for other in found):
            found.append(end)
    return len(found)


random_starts = torch.randint(0, 2, (100, num_units), generator=torch.Generator().manual_seed(2)) * 2.0 - 1
starts = torch.cat([random_starts, cues])  # (110, N)
print(f"{'beta':>7}  {'patterns for 90%':>16}  {'fixed-point weights (0-9)':<52}  {'fixed points from 110 starts':>28}")
fixed_points, counts, distinct = {}, {}, {}
for beta in betas:
    fixed = retrieve(patterns, cue_8, beta, steps=50)
    torch.testing.assert_close(modern_hopfield_update(patterns, fixed, beta), fixed,
                               atol=1e-4, rtol=0)  # it no longer moves
    weights_fixed = hopfield_weights(patterns, fixed, beta)
    fixed_points[beta], counts[beta] = fixed, patterns_for_90_percent(weights_fixed)
    distinct[beta] = distinct_fixed_points(patterns, starts, beta)
    print(f"{beta:7.4f}  {counts[beta]:16d}  " + " ".join(f"{w:.2f}" for w in weights_fixed)
          + f"  {distinct[beta]:28d}")
assert counts[betas[0]] >= 8 and 3 <= counts[0.125] <= 7 and counts[2.0] == 1, f"got {counts[betas[0]]=}, {counts[0.125]=}, {counts[2.0]=}"
assert all(distinct[b] == 1 for b in betas if b <= 1 / 8) and distinct[0.25] == 10, distinct
to_mean = F.cosine_similarity(digits, digits.mean(0)[None])  # (10,): each digit against the average
print(f"the digit closest to the average of all ten: {to_mean.argmax().item()} "
      f"(cosine {to_mean.max():.2f})")
assert to_mean.argmax().item() == 8, to_mean
fig = show_states(torch.stack([fixed_points[b] for b in [1 / 64, 1 / 8, 1 / 4, 1.0]]),
                  ["β = 1/64", "β = 1/8", "β = 1/4", "β = 1"])

# %% [markdown]
# *Four fixed points, left to right: at $\beta = 1/64$ an almost uniform grey (the global
# average); at $\beta = 1/8$ a soft, blurred 8 mixed with strokes of 3, 9, 0 and 6 (still
# the global fixed point, see below); at $\beta = 1/4$ a clearer 8 with some blur left (a
# metastable state); at $\beta = 1$ a crisp 8.*
#
# The count alone would mislead here. Along the 8's path it falls 9, 9, 9, 7, 4, 1, and the
# blurred 8 at $\beta = 1/8$ looks like an average of the 8's family. But the last column says
# otherwise: up to $\beta = 1/8$ all 110 starting states, random ones and every corrupted digit,
# end at one and the same point. That is the global fixed point, whatever the cue; it looks
# like an 8 because the average of the ten digits is closest to the 8 (last line above). At $\beta = 1/4$ there are 10 different fixed points, and the one the
# 8 reaches still mixes the 8 with its look-alikes (4 patterns for 90%): a metastable state. On
# the digits the three kinds blur into each other, because the digits are only a loose family
# (the 8's look-alikes overlap it by 0.66, the others less, with no clear gap). They are
# clearer with patterns that *do* form groups. Store
# ten patterns in two families, five variants of the digit 1 and five of the digit 8, each the
# digit with 2 of its 35 pixels flipped at random, and iterate to the fixed point from a
# corrupted member of each family, with $\beta$ growing in steps of $\sqrt 2$:

# %%
generator = torch.Generator().manual_seed(11)
families = torch.cat([corrupt(digits[1].expand(5, -1), 0.06, generator),  # (P, N): five 1s
                      corrupt(digits[8].expand(5, -1), 0.06, generator)])  # and five 8s
family_patterns = families.T  # X: (N, P)
off_diagonal_5 = ~torch.eye(5, dtype=torch.bool)
within = (families[5:] @ families[5:].T / num_units)[off_diagonal_5].mean().item()
across = (families[:5] @ families[5:].T / num_units).mean().item()
assert 0.7 < within < 0.85 and abs(across) < 0.1, (within, across)
print(f"mean overlap inside the 8-family {within:.2f}, between the families {across:.2f}")
cue_eight = corrupt(families[5], 0.06, generator)  # a member of the 8-family, 2 pixels flipped
cue_one = corrupt(families[0], 0.06, generator)  # a member of the 1-family
for cue, own in [(cue_eight, 5), (cue_one, 0)]:  # each cue is uniquely nearest its own member
    family_scores = families @ cue
    margin = family_scores[own] - family_scores[torch.arange(10) != own].max()
    assert margin >= 4, f"cue of pattern {own} is only {margin:.0f} ahead of another pattern"
print(f"{'beta':>6}  {'patterns for 90%: from the 8, from the 1':>40}  {'weight on 8-family':>18}  "
      f"{'same fixed point':>16}")
regimes = {}
for k in range(-10, 3):
    beta_f = 2.0 ** (k / 2)
    ends = [retrieve(family_patterns, cue, beta_f, steps=100) for cue in (cue_eight, cue_one)]
    for end in ends:
        torch.testing.assert_close(modern_hopfield_update(family_patterns, end, beta_f), end,
                                   atol=1e-4, rtol=0)  # a fixed point
    end_weights = [hopfield_weights(family_patterns, end, beta_f) for end in ends]
    regimes[beta_f] = ([patterns_for_90_percent(w) for w in end_weights],
                       end_weights[0][5:].sum().item(), bool((ends[0] - ends[1]).norm() < 1e-3))
    print(f"{beta_f:6.3f}  {regimes[beta_f][0][0]:30d} {regimes[beta_f][0][1]:9d}  "
          f"{regimes[beta_f][1]:18.2f}  {str(regimes[beta_f][2]):>16}")

# %% tags=["remove-cell"]
# Check the three regimes the text describes.
for beta_f, (counts_f, on_family, same) in regimes.items():
    if beta_f <= 1 / 16 + 1e-9:
        assert same and min(counts_f) >= 8, f"beta {beta_f:.3f}: {counts_f}, same {same}"
    elif 1 / 8 - 1e-9 <= beta_f <= 0.36:
        assert counts_f == [5, 5] and on_family > 0.95 and not same, f"beta {beta_f:.3f}: {counts_f}"
    elif beta_f >= 0.7:
        assert counts_f == [1, 1] and not same, f"beta {beta_f:.3f}: {counts_f}"
    if beta_f <= 1 / 16 + 1e-9:  # and so do 100 random starting states
        assert distinct_fixed_points(family_patterns, random_starts, beta_f) == 1, beta_f

# %% [markdown]
# Now the three kinds are plain. Up to $\beta = 1/16$ both cues end at one and the same point
# (and so do the 100 random starting states of the digit test),
# with 9 of the 10 patterns needed for 90% of the weight: the global fixed point, whatever the
# cue. From $\beta = 1/8$ to about $1/3$ each cue ends at the average of its own family, with
# the 5 patterns of the family holding 90% of the weight (and at least 95% of the weight on
# the 8-family, from the 8's cue): a metastable state. From $\beta \approx 0.7$ on each cue ends at
# a single stored pattern. The middle regime is wide here, we claim, because the
# families lie far apart (overlap about 0.07 between them) and each family's members close
# together (overlap about 0.78 inside it); the ten digits have no such gap. To test that, change only the tightness of the
# families: the same draw with 4 or 6 pixels flipped per variant instead of 2 (the same random
# order of pixels, so each set adds flips to the previous one; the cues add the same 2 flips):

# %%
print(f"{'flipped per variant':>19}  {'overlap inside 8-family':>23}  {'between':>7}  "
      "betas where both cues end at their family's average (5 for 90%)")
middle = {}
for flips in [2, 4, 6]:
    generator = torch.Generator().manual_seed(11)
    families_f = torch.cat([corrupt(digits[1].expand(5, -1), flips / num_units, generator),
                            corrupt(digits[8].expand(5, -1), flips / num_units, generator)])
    cues_f = [corrupt(families_f[5], 0.06, generator), corrupt(families_f[0], 0.06, generator)]
    within_f = (families_f[5:] @ families_f[5:].T / num_units)[off_diagonal_5].mean().item()
    across_f = (families_f[:5] @ families_f[5:].T / num_units).mean().item()
    middle[flips] = []
    for k in range(-10, 3):
        beta_f = 2.0 ** (k / 2)
        ends = [retrieve(families_f.T, cue, beta_f, steps=100) for cue in cues_f]
        if all(patterns_for_90_percent(hopfield_weights(families_f.T, end, beta_f)) == 5 for end in ends):
            middle[flips].append(beta_f)
    print(f"{flips:19d}  {within_f:23.2f}  {across_f:7.2f}  "
          + (", ".join(f"{b:.3f}" for b in middle[flips]) or "none"))
    if flips == 2:  # the draw of the table above
        assert torch.equal(families_f, families) and torch.equal(cues_f[0], cue_eight)
assert middle[2] == [b for b, r in regimes.items() if r[0] == [5, 5]], middle
assert [len(middle[f]) for f in (2, 4, 6)] == [4, 1, 0], middle

# %% [markdown]
# With the families loosened, and nothing else changed (the overlap between the families stays
# near 0), the middle regime narrows from four
# values of $\beta$ to one and then to none. In this draw, then, the tighter the families against the gap between
# them, the wider the range of $\beta$ in which the network answers with a family (another draw of the
# variants can narrow it less evenly, or leave two tightnesses with the same range).
#
# So $\beta$ does not just sharpen a picture: it decides *what kind of memory* the network is.
# At small $\beta$ it answers "what do my memories look like on average", in between "which
# family of memories is this" (when the memories come in families), and at large $\beta$
# "which memory is this".
#
# ## Back to the Transformer
#
# Scaled dot-product attention uses $\beta = 1/\sqrt d$, with $d$ the size of the keys.
# Applied directly to our cue and digits (no projections), the book's attention helper performs
# one Hopfield update at $\beta = 1/\sqrt{35} \approx 0.169$:

# %%
out, weights_sqrt_d = scaled_dot_product_attention(cue_8[None], digits, digits)  # (1, N), (1, P)
torch.testing.assert_close(out[0], modern_hopfield_update(patterns, cue_8, 1 / math.sqrt(35)))
print(f"beta = 1/sqrt(35) = {1 / math.sqrt(35):.4f}: max weight {weights_sqrt_d.max():.4f}, "
      f"on digit {weights_sqrt_d.argmax().item()}")
for scale in [1, 2, 4, 8]:  # a longer query (as W_q can learn) raises the effective beta
    _, w = scaled_dot_product_attention(scale * cue_8[None], digits, digits)
    print(f"query scaled by {scale}: effective beta {scale / math.sqrt(35):.4f}, "
          f"max weight {w.max():.4f}")

# %% [markdown]
# At $1/\sqrt{35}$ the attention sits between averaging and retrieval: the 8 takes less than
# half of the weight. In a trained Transformer, however, the queries and keys are not the raw
# patterns but learned projections $W_q\boldsymbol\xi$ and $W_k \mathbf x^\mu$, and their lengths set the
# *effective* $\beta$: doubling the length of a query doubles $\beta$, as the last lines show.
# The $1/\sqrt d$ (chapter 3) keeps the starting point sensible as $d$ changes; training can then
# choose, head by head, whether a head averages or retrieves.
#
# Ramsauer et al. make the correspondence precise (their abstract: the new update rule "is
# equivalent to the attention mechanism used in transformers", and it can be built into
# networks as layers). A *Hopfield layer* (their Section 2, paragraph "Hopfield update rule is
# attention of the transformer"; the layers themselves are defined in their Section 3) with
# state patterns $\Xi$
# (the cues, one per row), stored patterns $Y$ and learned maps $W_Q, W_K, W_V$ performs one
# update,
#
# $$
# G = \operatorname{softmax}\!\big(\beta\, \Xi W_Q (Y W_K)^\top\big)\, Y W_K W_V ,
# $$
#
# the new state patterns, one per row (Ramsauer et al. use the letter Z, which this book
# keeps for chapter 9's scores), and with $\beta = 1/\sqrt{d_k}$ this has the form of the attention of the Transformer
# [[Vaswani et al., 2017]](../book/references.bib#vaswani2017). With the head's own keys as the stored patterns, the identity runs one way only. In a Hopfield layer the values
# $Y W_K W_V$ are a linear map of the keys $Y W_K$; a Transformer head has its own value
# projection $W_V'$ of shape $(D, d_v)$, and $Y W_V'$ is a linear map of the keys for every
# $Y$ only when every column of $W_V'$ lies in the span of the $d_k$ columns of $W_K$. With $d_k < D$, as in
# every head of a multi-head layer that splits the $D$ features among its heads (chapter 9's does), a generic $W_V'$ does not (checked below on random matrices); a single head with $d_k = D$ and an invertible $W_K$ meets the condition for any $W_V'$. And the
# energy argument, which makes repeated updates settle, needs more: the output must live in
# the space of the state, with the values equal to the keys, as in the modern network above.
# So every scaled dot-product head (with no bias, such as chapter 7's ALiBi, added to its scores)
# has the *form* of one Hopfield update, and, with its own keys as the stored patterns, it *is* one exactly when
# its values are a linear map of its keys. (In a larger space every head is one: stack each key with its
# value into one longer stored pattern and pad the query with zeros; the scores do not change, and the
# value half of the updated state is the head's output. But those patterns are no longer the head's keys,
# and a second update would score the values too.) In [self-attention](../book/glossary.md#term-self-attention) (chapter 5) $\Xi = Y$: every
# token is both a cue and a stored memory, and under that condition each head performs one
# step of associative retrieval in which every token looks up the tokens that resemble what
# it is searching for.
#

# %%
generator = torch.Generator().manual_seed(0)
d_model, d_k = 35, 8  # D and the head size, d_k < D as in a multi-head layer that splits D among its heads
w_key, w_value = torch.randn(2, d_model, d_k, generator=generator)  # W_K and W_V', (D, d_k) each
rank_keys = torch.linalg.matrix_rank(w_key).item()
rank_both = torch.linalg.matrix_rank(torch.cat([w_key, w_value], dim=1)).item()
print(f"rank of W_K: {rank_keys}; rank of [W_K | W_V']: {rank_both}; "
      f"W_V' = W_K A solvable for some (d_k, d_k) matrix A: {rank_both == rank_keys}")
assert (rank_keys, rank_both) == (8, 16), (rank_keys, rank_both)

# %% [markdown]
# ### When is an attention layer one step of retrieval?
#
# Put together, one scaled dot-product attention $\operatorname{softmax}(\mathbf q \mathbf K^\top / \sqrt{d_k})\,\mathbf V$
# performs exactly one update $\boldsymbol\xi \leftarrow \mathbf X\operatorname{softmax}(\beta\mathbf X^\top\boldsymbol\xi)$ of the
# modern Hopfield network when:
#
# 1. **the state is the query**, $\mathbf q = \boldsymbol\xi$;
# 2. **the stored patterns are both the keys and the values**, $\mathbf K = \mathbf V = \mathbf X^\top$, one pattern a row;
# 3. **$\beta = 1/\sqrt{d_k}$**, with $d_k$ the pattern size. This is a choice of $\beta$, not a
#    restriction: doubling the length of the query doubles $\beta$ (the lines printed above).
#
# With **no projections** these three are all. With **learned projections**, Ramsauer et al.'s
# Hopfield layer (Section 2, paragraph "Hopfield update rule is attention of the transformer",
# and their Section 3) maps the state and the stored patterns into a common space,
# $\boldsymbol\xi \to \boldsymbol\xi W_Q$ and $\mathbf X^\top \to Y W_K$; conditions 1 to 3 then hold *in that space*, and the
# layer's $W_V$ is applied after the update. So a head is one retrieval step in its key space
# exactly when its values are $Y W_K$ followed by a linear map, which a head with its own
# $W_V'$ satisfies for every set of stored patterns only when the columns of $W_V'$ lie in the span of those of $W_K$ (above). For one given set it can hold without that: with at most $d_k$ stored patterns whose keys are linearly independent, any values are a linear map of the keys. And a single layer is a single step:
# *iterated* retrieval, which the energy argument is about, also needs the output fed back as
# the next query in the same space. Checked here on the digits, with random projections:

# %%
generator = torch.Generator().manual_seed(1)
w_q, w_k = torch.randn(2, 35, 8, generator=generator) / math.sqrt(35)  # W_Q, W_K: (N, d_k)
w_v = torch.randn(8, 5, generator=generator)  # W_V: (d_k, d_v)
state, stored = cue_8[None] @ w_q, digits @ w_k  # (1, d_k) and (P, d_k): the common space
layer, _ = scaled_dot_product_attention(state, stored, stored @ w_v)  # values Y W_K W_V
step = modern_hopfield_update(stored.T, state[0], 1 / math.sqrt(8))  # one update, beta = 1/sqrt(d_k)
torch.testing.assert_close(layer[0], step @ w_v)
print("attention(xi W_Q, Y W_K, Y W_K W_V) == (one Hopfield update of xi W_Q, patterns Y W_K, "
      "beta = 1/sqrt(d_k)) W_V")

# %% [markdown]
# ## Summary
#
# - An associative (content-addressable) memory returns the stored pattern that best
#   matches a cue. The Hopfield network is the classic model of it: storage writes
#   patterns into the network, retrieval runs dynamics from the cue.
# - A classical Hopfield network has $\pm1$ units, symmetric weights with zero diagonal and
#   energy $E(\mathbf s) = -\tfrac12 \mathbf s^\top \mathbf W \mathbf s$. Asynchronous updates $s_i \leftarrow \operatorname{sign}(h_i)$
#   change it by $-2|h_i|$ per flip, so recall always ends at a fixed point, a local minimum
#   of $E$.
# - The Hebbian rule $\mathbf W = \frac1N\sum_\mu \mathbf x^\mu (\mathbf x^\mu)^\top$, $W_{ii} = 0$, makes each
#   pattern a fixed point while the signal beats the crosstalk. Cues of the digit 0 with up to 20% of their
#   pixels flipped were repaired (all 200 at 20%; at 30%, 87% of the cues); past that, recall ended at another digit, an inverted one
#   ($E(-\mathbf s) = E(\mathbf s)$) or a spurious mixture state.
# - With the Hebbian rule the capacity is about $0.138\,N$ random patterns when a small
#   fraction of wrong units is allowed (1.6% at that load; at $N = 100$ the measured curve starts to fall near there, and it sharpens with $N$); error-free recall allows only about
#   $N / (2 \ln N)$. Correlated patterns store far fewer (of the digits stored in the order 0, 1, 2, …, the first 3
#   fit in 35 units and the 3 breaks the memory, against
#   4 of 4 random patterns of that size in this run, held to the same exact standard; other
#   draws occasionally lose one).
# - The fault is the rule's, not the network's. The projection rule
#   $\mathbf W = \mathbf X(\mathbf X^\top\mathbf X)^{-1}\mathbf X^\top$, $W_{ii} = 0$, makes linearly independent
#   patterns fixed points, correlated or not, while no diagonal entry of the projection reaches
#   1 (so $P < N$): all ten digits in the same network,
#   with most 10% cues repaired. Its basins shrink as $P$ nears $N$, and no fixed $N \times N$
#   matrix with a zero diagonal makes more than about $2N$ random patterns fixed points held by their inputs (not in the empty sense of $\mathbf W = 0$). The delta rule, the write of DeltaNet's linear attention,
#   applied one pattern at a time from zero weights and repeated over the patterns with a small enough step, converges to it
#   (to the projection before its diagonal is zeroed).
# - The modern Hopfield network has energy $-\beta^{-1}\log\sum_\mu e^{\beta (\mathbf x^\mu)^\top\boldsymbol\xi} + \tfrac12\boldsymbol\xi^\top\boldsymbol\xi$ and update $\boldsymbol\xi \leftarrow \mathbf X\operatorname{softmax}(\beta \mathbf X^\top\boldsymbol\xi)$:
#   attention with the state as query and the stored patterns as keys and values, equal to
#   `F.scaled_dot_product_attention` with `scale=β`. It stores far more patterns than units
#   (10,000 in 100, retrieved in one step in each of five random sets). Ramsauer et al. prove
#   the capacity exponential in $N$ for patterns drawn at random on a sphere; measured for $N = 16$ to 48 at $\beta = 1$ with about 20% of the
#   units flipped, the largest $P$ (median of five draws, which agree within one doubling) doubles about every 3.5 units in this run (another set of draws gives a somewhat slower rate). The price is
#   keeping them all: $P \times N$ numbers, which grow with $P$, where the classical network
#   keeps $N^2$.
# - $\beta = 1/\tau$ is an inverse temperature: small $\beta$ averages all memories (a global
#   fixed point, the same from any cue), medium $\beta$ averages a family of similar ones (a
#   metastable state, a distinct regime when the patterns form tight, separated families, and
#   narrower the looser they are, in the one draw tested; on the digits the kinds blur into each other), large
#   $\beta$ retrieves one. A Transformer's $1/\sqrt d$
#   is one such setting, and its learned projections tune the effective $\beta$ per head.
#   Every scaled dot-product head (with no bias added to its scores) has the form of one Hopfield update; with its own keys as the stored patterns, it is one exactly when its
#   values are a linear map of its keys.
#
# ## Exercises
#
# **1. Where the fall lies.** In the curves against network size, the first load at which
# fewer than half of the patterns are kept lies above 0.138 at every size tried, and, in the medians printed, moves
# down from $N = 50$ to $N = 200$ without ever rising ($N = 50$ and 100 share a median on this grid of loads in this run; other sets of draws can separate them, or give all three sizes the same one). Give reasons why a measured crossing lies above 0.138, and say what you
# expect for $N = 10{,}000$.
#
# <details>
# <summary>Solution</summary>
#
# First, size: a small network keeps some patterns past the limit by luck, and that luck
# shrinks as $N$ grows, which is the downward move the medians show. Second, the criterion:
# 0.138 is the load at which the retrieval states disappear, and up to it a pattern is
# recalled with a small fraction of wrong units (1.6% at the critical load); "half of the
# patterns kept within 2%" is a different, later point of the fall. Third, the procedure
# could lean towards keeping, if an avalanche of errors were still under way when the 5 sweeps
# stop; at these sizes that hardly matters (rerun `capacity_curve` with `steps=50`: the curves
# change no more than they do with another set of draws), so it is not the main reason. In a network of 200 units, about $0.138 \times 200 \approx 28$ random patterns can be
# stored with a small fraction of wrong units, but only about $200 / (2 \ln 200) \approx 19$
# with none. For $N = 10{,}000$ expect a crossing closer to 0.138 and a steeper fall, not a
# clean step; how close is for the experiment to say, with enough sweeps for every avalanche to finish.
#
# </details>

# %% [markdown]
# **2. Why a zero diagonal?** The Hebbian sum $\frac1N\sum_\mu \mathbf x^\mu(\mathbf x^\mu)^\top$ has
# diagonal $P/N$. What would keeping it do to the energy of the $\pm1$ states, and what to
# the dynamics? Count the fixed points among all $2^{16}$ states of a 16-unit network with a
# few random patterns stored, with and without the diagonal.
#
# <details>
# <summary>Solution</summary>
#
# On $\pm1$ states the diagonal adds $-\tfrac12\sum_i W_{ii} s_i^2 = -P/2$ to every energy,
# the same constant for all states, so it does not change which states are minima. But it
# changes the update: unit $i$ now receives $h_i + (P/N)s_i$, a vote of strength $P/N$ for
# staying as it is. A unit flips only when the rest of the network opposes it by more than
# $P/N$, so many states that are *not* local minima of the energy (a flip would lower it)
# become fixed points. The network freezes wherever it starts, and spurious attractors
# multiply; for $P \gg N$ the self-vote outweighs the typical input $\approx\sqrt{P/N}$ and
# almost every state is fixed, so the memory recalls nothing. The count below, for one draw, shows it: with
# the diagonal there are hundreds to thousands of fixed points, against 6 to 14 without it.
# Those few are not always the patterns, though. The cell draws one random set of patterns per
# $P$, and the details below belong to that draw (another seed gives other counts). At $P = 3$ the 8 fixed points are the three
# patterns, their negatives and one signed mixture, $\operatorname{sign}(\mathbf x^1 - \mathbf x^2 - \mathbf x^3)$,
# with its negative; at $P = 6$ and $P = 16$ (loads
# 0.375 and 1, far past the capacity) *none* of the stored patterns is a fixed point, and the
# 6 and 14 fixed points, fewer than the $2P$ patterns and negatives, are all spurious. The derivation of
# $\Delta E = -\Delta s_i h_i$ also used $W_{ii} = 0$.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 2.
all_states = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=16)))  # (65536, 16)
generator = torch.Generator().manual_seed(0)
lines = [" P   fixed points, W_ii = 0   fixed points, W_ii = P/N   stored patterns fixed"]
results_ex = {}
for count in [3, 6, 16]:
    stored_16 = torch.randint(0, 2, (count, 16), generator=generator) * 2.0 - 1
    zero_diagonal = hebbian_weights(stored_16)
    with_diagonal = zero_diagonal + torch.eye(16) * count / 16
    counts_ex = []
    for w in [zero_diagonal, with_diagonal]:
        h = all_states @ w  # (65536, 16)
        counts_ex.append(int(((h == 0) | (torch.sign(h) == all_states)).all(-1).sum()))
    h_stored = stored_16 @ zero_diagonal  # (P, 16): inputs at the stored patterns
    stored_fixed = int(((h_stored == 0) | (torch.sign(h_stored) == stored_16)).all(-1).sum())
    lines.append(f"{count:2d}   {counts_ex[0]:22d}   {counts_ex[1]:24d}   "
                 f"{stored_fixed:2d} of {count:2d}")
    results_ex[count] = (counts_ex[0], counts_ex[1], stored_fixed)
    if count == 3:  # which states are the 8 fixed points?
        h = all_states @ zero_diagonal
        fixed_3 = all_states[((h == 0) | (torch.sign(h) == all_states)).all(-1)]
        mixture_3 = torch.sign(stored_16[0] - stored_16[1] - stored_16[2])
        expected_3 = torch.cat([stored_16, -stored_16, mixture_3[None], -mixture_3[None]])
        assert sorted(map(tuple, fixed_3.tolist())) == sorted(map(tuple, expected_3.tolist())), f"got {sorted(map(tuple, fixed_3.tolist()))=}, {sorted(map(tuple, expected_3.tolist()))=}"
print("\n".join(lines))
assert results_ex[3] == (8, 302, 3) and results_ex[6][2] == results_ex[16][2] == 0, f"got {results_ex[3]=}, {results_ex[6][2]=}, {results_ex[16][2]=}"
assert all(r[0] < 2 * p for p, r in results_ex.items() if p > 3) and all(r[1] >= 284 for r in results_ex.values())

# %% [markdown]
# **3. Synchronous updates can oscillate.** Store the single pattern $(1, 1)$ in a two-unit
# network and start from $(1, -1)$. Update both units at once, a few times; then update them
# one at a time. What happens, and why does the energy argument not apply? How often does
# synchronous recall end in a cycle in the three-digit network of this chapter, from random
# starting states?
#
# <details>
# <summary>Solution</summary>
#
# $W_{12} = W_{21} = \tfrac12$. Synchronously, each unit copies the *old* value of the other:
# $(1,-1) \to (-1, 1) \to (1, -1) \to \dots$, a 2-cycle at constant energy $+\tfrac12$.
# One at a time, the first unit to update copies the other and the network stops at $(1,1)$
# or $(-1,-1)$. The proof of $\Delta E = -\Delta s_i h_i \le 0$ assumed that only one unit
# changes; when two coupled units flip together, the exact change has an extra cross term
# $-W_{12}\Delta s_1\Delta s_2 = +2$, which here cancels the gain of $-2$ from the two
# single-unit terms. (For synchronous updates with symmetric weights the
# network always ends in a fixed point or a 2-cycle, never a longer cycle
# [[Goles et al., 1985]](../book/references.bib#goles1985).) In the three-digit
# network, in this run none of the 1,000 random starts is still moving after 50 steps, under
# either update; the two-unit network shows that synchronous cycles exist all the same. (An input
# that is 0 up to rounding counts as a tie, which keeps the unit's value, so this count is the
# same on every CPU.)
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 3.
two_unit = hebbian_weights(torch.tensor([[1.0, 1.0]]))  # W_12 = W_21 = 1/2
state = torch.tensor([1.0, -1.0])
for step in range(4):
    new_state, energies_ex = recall(two_unit, state, 1, mode="sync")
    print(f"sync step {step}: {state.int().tolist()} -> {new_state.int().tolist()}, "
          f"energy {energies_ex[1]:+.2f}")
    state = new_state
final_async, _ = recall(two_unit, torch.tensor([1.0, -1.0]), 3,
                        generator=torch.Generator().manual_seed(0))
print("async from (1, -1) ends at", final_async.int().tolist())
starts = torch.randint(0, 2, (1000, 35), generator=torch.Generator().manual_seed(0)) * 2.0 - 1
for mode in ["sync", "async"]:
    ends, _ = recall(weights, starts, 50, mode=mode, generator=torch.Generator().manual_seed(0))
    one_more, _ = recall(weights, ends, 1, mode=mode, generator=torch.Generator().manual_seed(1))
    print(f"{mode:>5}: {(one_more != ends).any(-1).float().mean():.3f} of 1000 random starts "
          "still moving after 50 steps (a cycle)")

# %% [markdown]
# **4. Choosing $\beta$.** Suppose the cue's score for the right pattern exceeds its score for
# every other pattern by at least $\Delta$: $(\mathbf x^\mu)^\top\boldsymbol\xi - (\mathbf x^\nu)^\top\boldsymbol\xi \ge \Delta$ for all
# $\nu \ne \mu$. How large must $\beta$ be for the right pattern to get weight at least
# $1 - \varepsilon_\text{tol}$ among $P$ patterns? Evaluate it for the uncorrupted digit 8 among the ten
# digits with $\varepsilon_\text{tol} = 0.01$, and check numerically. What does the bound say about the
# 10,000-pattern memory, retrieved at $\beta = 0.5$?
#
# <details>
# <summary>Solution</summary>
#
# The weight of the right pattern is
# $1 / \big(1 + \sum_{\nu\ne\mu} e^{-\beta((\mathbf x^\mu)^\top\boldsymbol\xi - (\mathbf x^\nu)^\top\boldsymbol\xi)}\big) \ge 1/\big(1 + (P-1)e^{-\beta\Delta}\big)$,
# which is at least $1 - \varepsilon_\text{tol}$ once $(P-1)e^{-\beta\Delta} \le \varepsilon_\text{tol}/(1-\varepsilon_\text{tol})$, that is
#
# $$
# \beta \ge \frac1\Delta \ln\frac{(P-1)(1-\varepsilon_\text{tol})}{\varepsilon_\text{tol}} .
# $$
#
# The required $\beta$ shrinks with the separation $\Delta$ and grows only with $\log P$. For the digit 8,
# $(\mathbf x^8)^\top \mathbf x^8 = 35$ and its closest rivals (0, 3, 6, 9) score 23, so $\Delta = 12$ and
# $\beta \ge \ln(891)/12 \approx 0.566$. The bound is safe, since not all rivals are that
# close: the cell finds a weight above 0.99 at that $\beta$, and below it at half of it.
#
# For the 10,000-pattern memory the bound is far from tight. The closest rival of some cue
# is only $\Delta = 8$ behind (the cell prints it), so the bound asks for $\beta \ge 1.73$ with
# $\varepsilon_\text{tol} = 0.01$, yet $\beta = 0.5$ retrieved every cue. Two things make the bound
# pessimistic. It treats all 9,999 rivals as if each were as close as the closest one, while
# almost all score far lower (the printed average of the closest is already about 38, against 60
# for the right pattern); the cell finds the right pattern's weight at least 0.98 for every cue
# at $\beta = 0.5$. And exact retrieval needs only the *sign* of every unit of the output to be
# right, which a weight above $\tfrac12$ on the right pattern already guarantees (the other
# patterns together contribute at most the remaining weight to each unit). Even that criterion,
# $\varepsilon_\text{tol} = \tfrac12$, gives $\beta \ge \ln(9999)/8 \approx 1.15$ from the bound:
# the bound is sufficient, not necessary.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 4.
scores_8 = digits @ digits[8]  # (P,): x_nu . x_8
gap = (scores_8[8] - scores_8[torch.arange(10) != 8].max()).item()
epsilon = 0.01  # the tolerance epsilon_tol
beta_needed = math.log(9 * (1 - epsilon) / epsilon) / gap
print(f"separation Delta = {gap:.0f}, beta needed = {beta_needed:.4f}")
for beta_ex in [beta_needed / 2, beta_needed]:
    weight_8 = hopfield_weights(patterns, digits[8], beta_ex)[8]
    print(f"beta = {beta_ex:.4f}: weight on the 8 = {weight_8:.4f}")
gap_random = (own_0 - closest_0).min().item()  # set 0 of the 10,000-pattern memory
print(f"10,000 patterns: smallest gap {gap_random:.0f}; bound for weight 0.99: beta >= "
      f"{math.log(9999 * 0.99 / 0.01) / gap_random:.2f}; for weight 1/2: beta >= "
      f"{math.log(9999) / gap_random:.2f}")
winner_weight = torch.softmax(0.5 * scores_0, dim=-1).gather(1, chosen_0[:, None])  # (200, 1)
print(f"at beta = 0.5 the right pattern's smallest weight over the 200 cues: {winner_weight.min():.2f}")
assert gap_random == 8 and winner_weight.min() > 0.97, (gap_random, winner_weight.min())

# %% [markdown]
# **5. No negatives in the modern network.** In the classical network every stored pattern
# came with its negative. Is $-\mathbf x^8$ a fixed point of the modern update at $\beta = 2$? Where
# does one update from $-\mathbf x^8$ take the state, and why can no negative of a digit ever be
# reached?
#
# <details>
# <summary>Solution</summary>
#
# No. The update returns $\mathbf X\operatorname{softmax}(\cdot)$, a weighted average of the stored
# patterns with positive weights summing to 1, so every state after an update lies in the
# convex hull of the stored patterns. A corner of the cube $\{-1, +1\}^N$ lies in the hull of
# other corners only if it is one of them, and $-\mathbf x^8$ is not a stored digit, so it cannot be a
# fixed point. From $-\mathbf x^8$ the softmax favours the digit whose overlap with $-\mathbf x^8$ is largest,
# that is the digit *least* like the 8, which is the 4 (overlap $-0.2$ with the 8); one update
# lands on the 4. The energy is not symmetric under $\boldsymbol\xi \to -\boldsymbol\xi$: the log-sum-exp rewards
# agreement with a pattern, not disagreement.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 5.
after = modern_hopfield_update(patterns, -digits[8], 2.0)
print(f"one update from -x_8 moves {(after + digits[8]).norm():.4f} away from -x_8; "
      f"the result equals digit {F.cosine_similarity(after[None], digits).argmax().item()} "
      f"(cosine {F.cosine_similarity(after[None], digits).max():.4f})")
assert round((digits[4] @ digits[8]).item() / 35, 4) == -0.2, f"got {round((digits[4] @ digits[8]).item() / 35, 4)=}"
