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
# # Attention Mechanisms, an interactive textbook
#
# Attention is a weighted average in which **the data choose the weights**. A *query* is
# compared with every *key*; the scores go through a softmax, so the weights are positive
# and sum to one; the answer is the weighted average of the *values*:
#
# $$
# \operatorname{attention}(\mathbf{q}) = \sum_{i=1}^{K} \alpha_i\, \mathbf{v}_i,
# \qquad
# \alpha_i = \frac{\exp\big(a(\mathbf{q}, \mathbf{k}_i)/\tau\big)}{\sum_{j=1}^{K} \exp\big(a(\mathbf{q}, \mathbf{k}_j)/\tau\big)} .
# $$
#
# **Try it.** Below, three queries (*fruit*, *furniture*, *red*) attend over six keys. Each
# word is a small feature vector, the score $a(\mathbf{q}, \mathbf{k})$ is their dot product,
# and each key carries a value $v_i$, a number written under its name. The slider sets the
# softmax temperature $\tau$. Slide left and every query puts all its weight on its
# best-scoring key, or shares it equally among keys that tie (the hardmax); slide right and
# the weights spread out until every key counts the same (average pooling). The right panel
# shows what each query gets back: the weighted average $\sum_i \alpha_i v_i$. (The
# Transformer does not leave $\tau$ free: it sets $\tau = \sqrt d$, for reasons chapter 3
# explains.) This slider is live in the static page: no kernel, no
# network.

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import torch

from helpers.figures.plotting import heatmap
from helpers.figures.widgets import slider_figure

features = ["edible", "sweet", "red", "yellow", "furniture", "wooden"]
vectors = {  # one row of features per word: (D,) each, D = 6
    "apple":  [1.0, 0.8, 0.9, 0.1, 0.0, 0.0],
    "banana": [1.0, 0.9, 0.0, 1.0, 0.0, 0.0],
    "cherry": [1.0, 0.7, 1.0, 0.0, 0.0, 0.0],
    "chair":  [0.0, 0.0, 0.1, 0.0, 1.0, 0.9],
    "table":  [0.0, 0.0, 0.0, 0.1, 1.0, 1.0],
    "fire truck": [0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
    "fruit":  [1.0, 0.6, 0.3, 0.3, 0.0, 0.0],
    "furniture": [0.0, 0.0, 0.0, 0.0, 1.0, 0.6],
    "red":    [0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
}
key_words = ["apple", "banana", "cherry", "chair", "table", "fire truck"]
query_words = ["fruit", "furniture", "red"]
keys = torch.tensor([vectors[w] for w in key_words])        # (K, D)
queries = torch.tensor([vectors[w] for w in query_words])   # (Q, D)
scores = queries @ keys.T                                   # (Q, K) dot-product scores
values = torch.tensor([10.0, 5.0, 2.0, 20.0, 30.0, 40.0])  # (K,) one number per key


def weights_at(temperature):
    return torch.softmax(scores / temperature, dim=-1)      # (Q, K), rows sum to 1


def draw_outputs(ax, temperature):
    outputs = weights_at(temperature) @ values              # (Q,) weighted averages
    bars = ax.barh(query_words, outputs, color="C1")
    ax.bar_label(bars, fmt="%.1f", padding=2)
    ax.axvline(values.mean(), color="0.5", ls="--", lw=1)   # the average-pooling limit
    ax.set(xlim=(0, 48), xlabel="weighted average of the values\n(dashed: their mean)",
           title="pooled output")
    ax.invert_yaxis()                                       # same row order as the heatmap


def draw(temperature):  # 8 in: 640 px, the frame fits a desktop's column; on a phone the
    # panels stack, the heatmap 356 px wide, so its labels stay at 9 px in a 354 px column
    fig, (ax, ax_out) = plt.subplots(1, 2, figsize=(8.0, 3.6), width_ratios=(1.3, 1))
    heatmap(weights_at(temperature), ax=ax, annotate=True, vmax=1.0,
            xticklabels=[f"{w}\nv = {v:g}" for w, v in zip(key_words, values.tolist())],
            yticklabels=query_words, xlabel="keys", ylabel="queries",
            title="attention weights")
    draw_outputs(ax_out, temperature)
    fig.tight_layout()
    return fig


temperatures = [0.01, 0.03, 0.1, 0.2, 0.35, 0.5, 1.0, 2.0, 5.0, 50.0]
live = slider_figure(draw, temperatures, description="temperature τ", fmt="{:g}",
                     initial=0.35)
live

# %% [markdown]
# *The heatmap: one row per query, one column per key, colour and number giving the
# attention weight; each row sums to one.* At the smallest $\tau$ *fruit* puts nearly all its
# weight on its best-scoring key, while *red* splits its weight between the cherry and the
# fire truck, two equally red keys; at large $\tau$ every row tends to $1/6$. The outputs
# follow: at the smallest $\tau$ *fruit* gets the banana's value 5 and *red* the mean of the
# cherry's and the fire truck's, 21; at the largest every query gets close to the mean of all
# six values, 17.8.
#
# *Fruit*'s best key is the banana, not the apple. A dot product adds up every feature the two
# vectors share, weighted by both: *fruit*'s small "yellow" entry (0.3) meets the banana's 1.0
# and adds 0.30 to its score, against 0.03 for the apple, and the banana is also the sweetest
# key. So the banana scores 1.84, the apple 1.78 and the cherry 1.72. The scores measure
# feature overlap, not which fruit a reader thinks of first. What the slider shows is also
# checked in code:

# %% tags=["hide-input"]
print(f"{'τ':>6} | " + " | ".join(f"{w:^22}" for w in query_words))
for t in temperatures:
    w = weights_at(t)
    best = [f"{key_words[i]} {w[q, i]:.2f}" for q, i in enumerate(w.argmax(dim=-1).tolist())]
    print(f"{t:>6g} | " + " | ".join(f"{b:^22}" for b in best))
print("fruit's scores: " + ", ".join(f"{w} {s:.2f}" for w, s in zip(key_words, scores[0])))
print(f"{'τ':>6} | pooled output " + " | ".join(f"{w:>9}" for w in query_words))
for t in temperatures:
    print(f"{t:>6g} | {'':14s}" + " | ".join(f"{o:9.1f}" for o in (weights_at(t) @ values).tolist()))
assert scores[0].argmax() == key_words.index("banana"), f"got {scores[0].argmax()=}, {key_words.index('banana')=}"
assert torch.allclose(scores[0, :3], torch.tensor([1.78, 1.84, 1.72]))
assert torch.allclose(weights_at(50.0), torch.full((3, 6), 1 / 6), atol=0.01)  # uniform
assert weights_at(0.01)[0].max() > 0.99, f"got {weights_at(0.01)[0].max()=}"  # one best key: the hardmax
assert torch.allclose(weights_at(0.01)[2, [2, 5]], torch.tensor([0.5, 0.5]), atol=0.01)  # a tie
outputs_cold, outputs_hot = weights_at(0.01) @ values, weights_at(50.0) @ values
assert abs(outputs_cold[0] - 5) < 0.05 and abs(outputs_cold[2] - 21) < 0.05, outputs_cold
assert (outputs_hot - 17.8).abs().max() < 0.5 and abs(values.mean() - 17.83) < 0.01, outputs_hot

# %% [markdown]
# ## What this book does
#
# It builds that one idea up from the multilayer perceptron to the Transformer, one
# executable chapter at a time, and then goes beyond it: attention at the scale of long
# inputs, and attention as an associative memory. Every figure is computed by the code on
# its page and every number is re-checked by CI. Where PyTorch implements a formula itself
# (the activation functions, softmax, scaled dot-product and multi-head attention, layer
# normalisation, the Transformer's encoder and decoder layers), the book's version is tested
# against PyTorch's. Where it has no counterpart (Nadaraya–Watson kernel regression, a ReLU
# network built by hand), the code is checked by asserts on what the page claims about it:
# an equivalent form of the same formula, its limiting cases, how its error falls.
#
# - **In the browser.** Read the pages and drag the sliders; they need no kernel and no
#   network.
# - **In Jupyter or Colab.** Each chapter is a notebook (download it from the top of a page,
#   or use the launch button). Its first cell installs the book's small `helpers` package
#   when it is missing, and it runs top to bottom on a laptop CPU in a minute or two.
# - **As a maintainer.** CI re-executes every notebook and compares the outputs (nbval),
#   builds the book with zero warnings, and opens every page in a browser with the network
#   refused.
#
# ## Chapters
#
# <!-- tableofcontents -->
# <!-- The book shows its table of contents here; this list is written from _toc.yml by book/tools/myst_links.py. -->
#
# **Front matter**
#
# - [Notation](notation.md)
# - [Glossary 术语表](glossary.md)
# - [Bibliography](bibliography.md)
#
# **From MLPs to attention**
#
# - [1. MLP and activations](../chapters/01_mlp_and_activations.ipynb)
# - [2. Attention pooling: Nadaraya–Watson kernel regression](../chapters/02_attention_pooling.ipynb)
#
# **Scoring and masking**
#
# - [3. Attention scoring functions](../chapters/03_attention_scoring.ipynb)
# - [4. Masking](../chapters/04_masking.ipynb)
#
# **Attention in the Transformer**
#
# - [5. Self-attention](../chapters/05_self_attention.ipynb)
# - [6. Multi-head attention](../chapters/06_multi_head_attention.ipynb)
# - [7. Positional encoding](../chapters/07_positional_encoding.ipynb)
# - [8. The Transformer's other parts](../chapters/08_transformer.ipynb)
#
# **Beyond the Transformer**
#
# - [9. Attention at scale](../chapters/09_attention_at_scale.ipynb)
# - [10. Attention as memory: Hopfield networks](../chapters/10_hopfield_networks.ipynb)
# - [11. Memory networks: reading an external memory](../chapters/11_memory_networks.ipynb)
# - [12. A decoder-only language model](../chapters/12_decoder_only.ipynb)
#
# <!-- /tableofcontents -->
#
# ## Conventions
#
# Shapes are written with fixed letters (B batch, Q queries, K keys, D features, H heads,
# T positions); see [Notation](notation.md). Masks are boolean with **True = may attend**
# everywhere. Technical terms are linked to the [Glossary 术语表](glossary.md), which gives each one in
# English and in Chinese. Papers are listed in the [Bibliography](bibliography.md).
