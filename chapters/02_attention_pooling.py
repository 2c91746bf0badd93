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
# # 2. Attention pooling: Nadaraya–Watson kernel regression
#
# In a neural network, attention is a rule for taking a weighted average. Something we are
# looking for, the *query*, is compared with a label attached to each thing we could look at,
# its *key*, and the comparison decides how much of that thing's content, its *value*, goes
# into the answer. This chapter builds the rule from one of its oldest instances: a
# regression method published independently by Nadaraya and by Watson in 1964
# ([Nadaraya [1964]](../book/references.bib#nadaraya1964), p. 141, in a two-page note; [Watson [1964]](../book/references.bib#watson1964)), which
# predicts $y$ at a new $x$ by averaging the training targets, each weighted by how close its
# input lies to $x$. Nothing in it is learned except, at the end, a single number, yet the core of every attention layer in later chapters is already
# present: a query, keys and values, a score, a softmax, a weighted average and a mask. Later
# chapters add learned projections and several heads.
#
# **What you will learn**
#
# - the vocabulary: [queries](../book/glossary.md#term-query), [keys](../book/glossary.md#term-key) and [values](../book/glossary.md#term-value), and
#   the [volitional](../book/glossary.md#term-volitional-cue) and [non-volitional](../book/glossary.md#term-non-volitional-cue) cues
#   they are named after;
# - [attention pooling](../book/glossary.md#term-attention-pooling) as a weighted average, starting from a soft dictionary lookup;
# - [Nadaraya–Watson kernel regression](../book/glossary.md#term-NadarayaWatson-kernel-regression) written as a softmax over the scores
#   $-\tfrac12(x - x_i)^2$, and why the softmax form is the one to compute;
# - what the kernel's [bandwidth](../book/glossary.md#term-bandwidth) does, measured: too narrow copies the noise, too wide
#   flattens the curve;
# - how to learn the bandwidth by gradient descent, and why each training point has to be left
#   out of its own keys.
#
# You need PyTorch tensors and the softmax function; every other idea is built here.

# %%
import math

import matplotlib.pyplot as plt
import torch

from helpers.checks import check_shape
from helpers.figures.plotting import heatmap
from helpers.figures.widgets import slider_heatmap
from helpers.kernels import NWKernelRegression, gaussian_kernel, nadaraya_watson
from helpers.seeding import set_seed
from helpers.tasks.regression import nadaraya_watson_data, nw_target, train_nw

torch.set_num_threads(1)  # tiny tensors: one thread is as fast, and steadier
set_seed(0)

# %% [markdown]
# ## Queries, keys and values
#
# Your eyes deliver far more than your brain can examine, so it rations: at any moment only a
# small part of what reaches you is looked at closely. Psychologists describe two forces that
# steer the choice.
#
# - A **[non-volitional cue](../book/glossary.md#term-non-volitional-cue)** comes from the scene. Something *salient* (a flashing
#   blue light in a street of grey cars, a sudden movement at the edge of vision) pulls your
#   eyes whether you meant to look or not. Your goals play no part; the object's own
#   properties make it stand out. This is attention from the bottom up.
# - A **[volitional cue](../book/glossary.md#term-volitional-cue)** comes from you. Scanning a crowded platform for a friend in a
#   green coat, you steer your gaze by that goal, and the green coats get looked at although
#   they are no brighter than anything else. This is attention from the top down.
#
# Neural networks had layers without the second kind long before attention. A max-pooling
# layer already selects by input: it passes on the largest activation, a hard choice that the
# data make. Average pooling mixes everything equally, and a fully connected layer mixes with
# learned weights that are fixed once training is over. What none of them has is a *query*: no
# *what am I looking for* that could change which input gets through. Attention adds the
# volitional cue, and names the parts:
#
# | in perception | in an attention layer | in this chapter |
# |---|---|---|
# | volitional cue: what you are looking for | **query** | a test input $x$ |
# | non-volitional cue: how each thing presents itself | **key** | a training input $x_i$ |
# | sensory input: what each thing contains | **value** | a training target $y_i$ |
#
# The analogy has limits. In the self-attention of later chapters the keys, like the queries,
# are computed by trained projections from the tokens themselves, so a key is no longer a
# property of the scene that the observer takes as given; the table is a way to remember the
# roles, not a model of perception.
#
# Keys and values come in pairs: every value carries a key that describes it.
# **[Attention pooling](../book/glossary.md#term-attention-pooling)** compares the query with every key, turns
# the comparisons into [attention weights](../book/glossary.md#term-attention-weight) (non-negative, summing
# to 1) and returns the weighted average of the values. Because the weights depend on the
# query, the same keys and values answer different queries differently; that dependence is
# exactly what a pooling layer lacks.

# %% [markdown]
# ## A warm-up: looking up a word that is not in the dictionary
#
# A Python dictionary is a lookup with a query, keys and values:
# `{"apple": 10, "banana": 5, "chair": 2}[query]` returns the value whose key *equals* the
# query. Ask it for `"fruit"` and it raises `KeyError`: no key is equal to the query, yet two
# of them are plainly relevant to it.
#
# A soft lookup scores every key against the query and returns a blend. Say that "fruit"
# matches "apple" well, "banana" a little less and "chair" not at all, with weights 0.6, 0.4
# and 0. The answer is $0.6 \cdot 10 + 0.4 \cdot 5 + 0 \cdot 2 = 8$.

# %%
keys = ["apple", "banana", "chair"]
values = torch.tensor([10.0, 5.0, 2.0])  # (K,)
weights = torch.tensor([0.6, 0.4, 0.0])  # (K,) how well "fruit" matches each key

for key, weight, value in zip(keys, weights, values):
    print(f"{key:>6}: weight {weight:.1f} x value {value:4.1f} = {weight * value:4.1f}")
soft_answer = weights @ values  # a weighted average of the values
hard_answer = values[weights.argmax()]  # keep only the best-matching key
print(f"soft lookup of 'fruit': {soft_answer:.1f}")
print(f"hard lookup of 'fruit': {hard_answer:.1f}  "
      f"(argmax picks '{keys[weights.argmax()]}')")
assert math.isclose(soft_answer.item(), 8.0, rel_tol=1e-6)
assert values[weights > 0].tolist() == [10.0, 5.0], f"got {values[weights > 0].tolist()=}"  # what sampling a key can return

# %% [markdown]
# That 8 can be read in two ways. As a weighted average, it is attention pooling over three
# key–value pairs. As a probability, the weights are a distribution over *which* key the
# query picks (apple with probability 0.6, banana with 0.4), and 8 is the expected value of
# the pick, $\mathbb{E}_{i \sim \alpha}[v_i] = \sum_i \alpha_i v_i$. Keeping only the best key, the argmax (sometimes called hardmax), answers 10 and throws
# away what banana knew. (The original [hard attention](../book/glossary.md#term-hard-attention) of [Xu et al. [2015]](../book/references.bib#xu2015), Section 4.1,
# instead samples one key from the distribution: 10 or 5 at random, 8 on average.) Averaging over the
# distribution, [soft attention](../book/glossary.md#term-soft-attention), keeps both, and its answer moves smoothly as the weights
# move, which is what lets gradient descent tune them later in the chapter.
#
# The example dodged one question: where do the weights come from? The rest of the chapter
# answers it for a case where "how well does this key match the query" has an obvious
# meaning: how close two numbers are.

# %% [markdown]
# ## A regression problem to attend over
#
# To give queries, keys and values real numbers, take a one-dimensional regression problem.
# The hidden function is $f(x) = 2\sin x + x^{0.8}$. We observe 50 training pairs
# $(x_i, y_i)$, with $x_i$ uniform on $[0, 5)$ and $y_i = f(x_i) + \epsilon_i$ where
# $\epsilon_i \sim \mathcal N(0, 0.5^2)$, and we want predictions at 50 evenly spaced test
# inputs. In attention terms, each test input is a query, the training inputs are the keys
# and the training targets are their values. `helpers.tasks.regression.nadaraya_watson_data` makes the
# data; it sorts the training inputs, so that heatmaps later on have a left-to-right order.

# %%
data = nadaraya_watson_data(num_train=50, num_test=50, seed=0)
x_train, y_train = data.x_train, data.y_train  # keys (K,), values (K,)
x_test, y_true = data.x_test, data.y_true  # queries (Q,), f at the queries (Q,)
for name, tensor in [("x_train", x_train), ("y_train", y_train), ("x_test", x_test)]:
    check_shape(tensor, (50,))

noise_variance = torch.mean((y_train - nw_target(x_train)) ** 2).item()
print(f"keys:    {len(x_train)} training inputs in "
      f"[{x_train.min():.3f}, {x_train.max():.3f}]")
print(f"queries: {len(x_test)} test inputs from {x_test[0]:.1f} to {x_test[-1]:.1f} "
      "in steps of 0.1")
print(f"noise variance of the training targets: {noise_variance:.3f} (0.25 expected)")

# %% [markdown]
# A few small pieces serve the whole chapter: the mean squared error, a picture of a fit
# (the true curve, the training points and a fitted curve) and the axis labels of the
# weight heatmaps, whose ticks show the input values of every tenth query and key. Fitted
# curves are drawn on a fine grid of 400 inputs so that their shape is visible between the
# test inputs; errors are always measured at the 50 test inputs against the true curve.

# %%
x_fine = torch.linspace(0, 5, 400)  # for drawing curves only


def mse(pred, target):
    return torch.mean((pred.detach() - target) ** 2).item()


def sparse_labels(positions, every=10):
    # Tick labels for a heatmap axis: every 10th position, blank elsewhere.
    return [f"{p:.1f}" if i % every == 0 else "" for i, p in enumerate(positions)]


weight_axes = dict(xlabel="training input $x_i$ (keys)",
                   ylabel="test input $x$ (queries)",
                   xticklabels=sparse_labels(x_train),
                   yticklabels=sparse_labels(x_test))


def plot_fit(ax, pred_fine, label, color="C1"):
    # True curve, training points and a fit evaluated on x_fine.
    ax.plot(x_fine, nw_target(x_fine), color="black", lw=1.5, label="true $f(x)$")
    ax.plot(x_train, y_train, "o", ms=3.5, color="0.6",
            label="training pairs $(x_i, y_i)$")
    ax.plot(x_fine, pred_fine.detach(), color=color, lw=2, label=label)
    ax.set(xlabel="$x$", ylabel="$y$", xlim=(0, 5), ylim=(-0.5, 5.5))
    ax.legend(loc="upper right", fontsize=9)
    return ax


# %% [markdown]
# ## The baseline: average pooling
#
# The simplest estimator ignores the query altogether and predicts the mean of the targets,
#
# $$
# f(x) = \frac{1}{n} \sum_{i=1}^{n} y_i .
# $$
#
# Every weight is $1/n$, whatever $x$ is. This is [average pooling](../book/glossary.md#term-average-pooling): a pooling layer in
# the sense above, driven by the inputs alone.

# %% mystnb={"image": {"alt": "Line plot of y against x from 0 to 5. The true curve rises from 0 to about 3.6 near x = 2, falls to about 1.5 near x = 4.7 and turns up again; grey training points scatter around it. Average pooling is a flat orange line at about 2.4."}}
average = y_train.mean()
average_mse = mse(average.expand_as(y_true), y_true)
print(f"average pooling predicts {average:.3f} everywhere; test MSE {average_mse:.3f}")

fig, ax = plt.subplots(figsize=(4.8, 3.4))
plot_fit(ax, average.expand_as(x_fine), "average pooling")
ax.set_title("Average pooling ignores the query")
fig.tight_layout()


# %% [markdown]
# A flat line: the prediction cannot follow the curve because nothing in it depends on $x$.
# The fix is to let the query choose the weights.
#
# ## Nadaraya–Watson: weight each value by how close its key is
#
# Nadaraya ([Nadaraya [1964]](../book/references.bib#nadaraya1964), p. 141, the first page of a two-page note) and Watson
# ([Watson [1964]](../book/references.bib#watson1964), whose subject is this estimator) proposed weighting each target by a
# *kernel* $\kappa$ of the distance between its input and the query:
#
# $$
# f(x) = \sum_{i=1}^{n} \frac{\kappa(x - x_i)}{\sum_{j=1}^{n} \kappa(x - x_j)}\, y_i .
# $$
#
# This estimator is [Nadaraya–Watson kernel regression](../book/glossary.md#term-NadarayaWatson-kernel-regression). Read with attention words it
# is attention pooling,
#
# $$
# f(x) = \sum_{i=1}^{n} \alpha(x, x_i)\, y_i,
# \qquad
# \alpha(x, x_i) = \frac{\kappa(x - x_i)}{\sum_{j=1}^{n} \kappa(x - x_j)},
# $$
#
# with query $x$, key–value pairs $(x_i, y_i)$ and attention weight $\alpha(x, x_i)$. For a
# kernel that is positive, the weights of each query are non-negative and sum to 1: a
# probability distribution over the keys.
#
# Why this formula? The best prediction of $y$ at $x$ in squared error is the conditional mean
# $\mathbb{E}[y \mid x] = \int y\, p(x, y)\, dy \,/\, p(x)$. Estimate both densities by placing a
# kernel on every training pair (kernel density estimates):
# $\hat p(x) = \frac1n \sum_i \kappa(x - x_i)$ and $\hat p(x, y) = \frac1n \sum_i \kappa(x - x_i)\, \kappa(y - y_i)$.
# For a kernel that integrates to 1 with mean zero (a symmetric density, for one), $\int y\, \kappa(y - y_i)\, dy = y_i$, and the ratio of the two
# estimates is exactly the weighted average above.
#
# Take the [Gaussian kernel](../book/glossary.md#term-Gaussian-kernel), the standard normal density
# $\kappa(u) = \frac{1}{\sqrt{2\pi}} \exp\!\left(-\frac{u^2}{2}\right)$. The factor
# $1/\sqrt{2\pi}$ appears in the numerator and in every term of the denominator, so it
# cancels, and what is left is the definition of the softmax,
# $\operatorname{softmax}_i(a) = \exp(a_i) / \sum_j \exp(a_j)$:
#
# $$
# \alpha(x, x_i)
# = \frac{\exp\!\left(-\tfrac12 (x - x_i)^2\right)}{\sum_{j=1}^{n} \exp\!\left(-\tfrac12 (x - x_j)^2\right)}
# = \operatorname{softmax}_i\!\left(-\tfrac12 (x - x_i)^2\right).
# $$
#
# The closer a key $x_i$ is to the query $x$, the nearer its score $-\tfrac12 (x-x_i)^2$ is to
# its largest possible value 0, and the more weight its value $y_i$ receives. Nothing here is
# learned: the training set *is* the model. That makes this
# [non-parametric attention pooling](../book/glossary.md#term-non-parametric-attention-pooling).
#
# Below, the formula is written twice in the open, as a ratio of kernels and as a softmax,
# and both are checked against the helper `nadaraya_watson`.

# %%
def nw_kernel_ratio(queries, keys, values):
    kernel = gaussian_kernel(queries[:, None] - keys[None, :])  # (Q, K)
    attention_weights = kernel / kernel.sum(dim=1, keepdim=True)  # (Q, K)
    return attention_weights @ values, attention_weights  # (Q,), (Q, K)


def nw_softmax(queries, keys, values):
    scores = -0.5 * (queries[:, None] - keys[None, :]) ** 2  # (Q, K)
    attention_weights = torch.softmax(scores, dim=1)  # (Q, K)
    return attention_weights @ values, attention_weights  # (Q,), (Q, K)


pred_ratio, weights_ratio = nw_kernel_ratio(x_test, x_train, y_train)
pred_softmax, weights_softmax = nw_softmax(x_test, x_train, y_train)
pred_nw, weights_nw = nadaraya_watson(x_test, x_train, y_train, w=1.0)
check_shape(weights_nw, (50, 50))
check_shape(pred_nw, (50,))
torch.testing.assert_close(weights_ratio, weights_softmax)
torch.testing.assert_close(weights_softmax, weights_nw)
torch.testing.assert_close(pred_ratio, pred_nw)
torch.testing.assert_close(weights_nw.sum(dim=1), torch.ones(50))
assert (weights_nw >= 0).all()
print("kernel ratio, softmax and helpers.kernels.nadaraya_watson agree")
largest_difference = (weights_ratio - weights_nw).abs().max()
print(f"largest difference in the weights below 1e-6: {bool(largest_difference < 1e-6)}")

# %% [markdown]
# The three agree to float32 precision, so why prefer the softmax form? Move a query far from
# every key. Already at distance 40 the Gaussian kernel is about $e^{-800}$, below the
# smallest positive float64 (about $e^{-745}$; float32 gives up near $e^{-103}$), so every
# kernel in the ratio underflows to 0 and the ratio is $0/0$. The softmax subtracts the largest score in the row before exponentiating
# (`torch.softmax` does so inside), so the nearest key always keeps a finite share, and a
# query far to the right of the data (here at $x = 1000$ and $x = 10\,000$) simply gets the
# value of the rightmost key.

# %%
far_queries = torch.tensor([1e3, 1e4])
print("kernel ratio:", nw_kernel_ratio(far_queries, x_train, y_train)[0])
far_pred, far_weights = nadaraya_watson(far_queries, x_train, y_train)
print("softmax form:", far_pred)
print(f"value of the rightmost key: {y_train[-1]:.4f}")
assert torch.isfinite(far_weights).all()
torch.testing.assert_close(far_pred, y_train[-1].expand(2))

# %% tags=["remove-cell"]
# Checks for the prose above: where the Gaussian kernel underflows.
assert -0.5 * 40**2 == -800
assert abs(math.log(torch.finfo(torch.float64).smallest_normal * 2.0**-52) + 745) < 1, f"got {abs(math.log(torch.finfo(torch.float64).smallest_normal * 2.0 ** (-52)) + 745)=}"
assert abs(math.log(torch.finfo(torch.float32).smallest_normal * 2.0**-23) + 103) < 1, f"got {abs(math.log(torch.finfo(torch.float32).smallest_normal * 2.0 ** (-23)) + 103)=}"
assert gaussian_kernel(torch.tensor([40.0], dtype=torch.float64)).item() == 0.0, f"got {gaussian_kernel(torch.tensor([40.0], dtype=torch.float64)).item()=}"

# %% [markdown]
# Now the picture. On the left, the Nadaraya–Watson prediction; on the right, its attention
# weights as a heatmap: one row per test query (increasing $x$ downwards), one column per
# training key (sorted by $x_i$, increasing to the right), colour for the weight.

# %% mystnb={"image": {"alt": "Left: the Nadaraya-Watson curve follows the rise and fall of the true curve but is flatter, undershooting the peak near x = 2 and overshooting the dip near x = 4.7. Right: a heatmap of test queries against sorted training keys, with a broad diagonal band of weights below 0.1."}}
pred_fine_1, _ = nadaraya_watson(x_fine, x_train, y_train, w=1.0)
print(f"test MSE: average pooling {average_mse:.3f}, "
      f"Nadaraya-Watson (w = 1) {mse(pred_nw, y_true):.3f}")

fig, (ax_fit, ax_map) = plt.subplots(1, 2, figsize=(9.5, 3.6))
plot_fit(ax_fit, pred_fine_1, "Nadaraya–Watson, $\\sigma = 1$")
heatmap(weights_nw, ax=ax_map, title="attention weights, $\\sigma = 1$", **weight_axes)
fig.tight_layout()

# %% tags=["remove-cell"]
# Checks for the prose below: the width of the σ = 1 window.
distance = (x_test[:, None] - x_train[None, :]).abs()  # (Q, K)
weight_within_2 = (weights_nw * (distance <= 2)).sum(dim=1).mean().item()
assert abs(weight_within_2 - 0.97) < 0.005, f"got {abs(weight_within_2 - 0.97)=}"  # "97% of a query's weight"
assert abs(4 / (2 * math.pi) - 2 / 3) < 0.04, f"got {abs(4 / (2 * math.pi) - 2 / 3)=}"  # "about two thirds of the period"

# %%
edge_query = torch.tensor([0.0])
edge_fit, _ = nadaraya_watson(edge_query, x_train, y_train, w=1.0)
print(f"at x = 0: f = {nw_target(edge_query).item():.2f}, Nadaraya-Watson (sigma = 1) "
      f"{edge_fit.item():.2f}; nearest key at x = {x_train.min():.2f}")
assert abs(edge_fit.item() - 2.2) < 0.05 and (x_train > 0).all(), edge_fit

# %% [markdown]
# The curve now follows the data, though it cuts the top off the peak and fills in the
# dip. The heatmap explains both: there is a band along the diagonal, since each query
# attends most to the keys near it, but the band is wide. Each prediction averages targets
# from about two units either side (97% of a query's weight, on average, lies on keys
# within distance 2 of it): a window four units wide, about two thirds of the sine's period
# $2\pi \approx 6.3$, so peaks and troughs are blurred together. How wide the kernel is
# should be a choice.
#
# One error is not the blur of peaks but a bias at the edge of the data. At $x = 0$ the fit is
# about 2.2 (printed above), where $f(0) = 0$: every key lies to the right of that query, so
# its weighted average can only draw on targets from the right, where $f$ is larger. This
# [boundary bias](../book/glossary.md#term-boundary-bias) affects Nadaraya–Watson wherever the keys lie on one side of the query (the
# far queries above, which got the rightmost key's value, are the extreme case); local linear
# regression, which fits a weighted line instead of a weighted mean, removes its first-order
# part ([Hastie et al. [2009]](../book/references.bib#hastie2009), Section 6.1.1).
#
# ## The bandwidth
#
# Scale the distance inside the kernel: $\kappa\!\left(\frac{x - x_i}{\sigma}\right)$. The
# [bandwidth](../book/glossary.md#term-bandwidth) $\sigma$ sets how far a query looks. Writing $w = 1/\sigma$ for the
# inverse bandwidth (the form used from here on),
#
# $$
# \alpha(x, x_i) = \operatorname{softmax}_i\!\left(-\tfrac12 \big((x - x_i)\, w\big)^2\right).
# $$
#
# As $\sigma \to 0$ ($w \to \infty$) the nearest key gets all the weight and the prediction
# is the target of the nearest training point, noise and all. As $\sigma \to \infty$
# ($w \to 0$) every score tends to 0, every weight to $1/n$, and we are back at average
# pooling. `nadaraya_watson` takes either `w=` or `bandwidth=` ($\sigma$). Below, nine
# bandwidths are evaluated; the slider moves the heatmap and the fitted curve together, and
# each frame's title gives its test error. All frames share one colour scale, capped at 0.25
# so that the wide kernels stay visible (the narrowest kernel's largest weights, up to 0.79,
# are drawn in the top colour); a wide kernel's weights, spread thin over many keys, show as
# a dim, wide band.

# %%
bandwidths = [0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0]
fits = {sigma: nadaraya_watson(x_test, x_train, y_train, bandwidth=sigma)
        for sigma in bandwidths}
fine_fits = {sigma: nadaraya_watson(x_fine, x_train, y_train, bandwidth=sigma)[0]
             for sigma in bandwidths}
test_mse = {sigma: mse(pred, y_true) for sigma, (pred, _) in fits.items()}


def draw_fit(ax, sigma):
    plot_fit(ax, fine_fits[sigma], f"Nadaraya–Watson, $\\sigma = {sigma:g}$")
    ax.set_title(f"fit: test MSE {test_mse[sigma]:.3f}")


slider_heatmap(lambda sigma: fits[sigma][1], bandwidths, description="bandwidth σ",
               initial=1.0, second_panel=draw_fit, figsize=(8.5, 3.4), vmax=0.25,
               title="attention weights", **weight_axes)


# %% [markdown]
# The slider shows the trade-off; the table measures it. Besides the test error, it gives
# two summaries of how concentrated the weights are, averaged over the 50 queries: the
# largest weight in a row, and the row's entropy
# $-\sum_i \alpha_i \log \alpha_i$ (in nats: 0 when one key takes all the weight,
# $\log 50 = 3.91$ when the weights are uniform, as in average pooling).

# %%
def mean_entropy(attention_weights):
    # Mean over queries of -sum_i a_i log a_i, with 0 log 0 = 0.
    terms = torch.special.xlogy(attention_weights, attention_weights)  # (Q, K)
    return -terms.sum(dim=1).mean().item()


entropy = {sigma: mean_entropy(weights) for sigma, (_, weights) in fits.items()}
peak = {sigma: weights.max(dim=1).values.mean().item()
        for sigma, (_, weights) in fits.items()}
print(f"{'σ':>5} {'w = 1/σ':>8} {'test MSE':>9} {'entropy':>8} {'peak weight':>12}")
for sigma in bandwidths:
    print(f"{sigma:5.2f} {1 / sigma:8.2f} {test_mse[sigma]:9.3f} "
          f"{entropy[sigma]:8.3f} {peak[sigma]:12.3f}")
print(f"{'avg pooling':>14} {average_mse:9.3f} {math.log(50):8.3f} {1 / 50:12.3f}")

errors = [test_mse[sigma] for sigma in bandwidths]
best = bandwidths[errors.index(min(errors))]
i = bandwidths.index(best)
assert 0 < i < len(bandwidths) - 1, "the best bandwidth should be neither extreme"
assert all(a > b for a, b in zip(errors[:i], errors[1:i + 1])), "falls to the best σ"
assert all(a < b for a, b in zip(errors[i:], errors[i + 1:])), "and rises after it"
assert all(a < b for a, b in zip(entropy.values(), list(entropy.values())[1:]))
assert all(a > b for a, b in zip(peak.values(), list(peak.values())[1:]))
assert abs(test_mse[3.0] - average_mse) < 0.05, f"got {abs(test_mse[3.0] - average_mse)=}"  # wide kernel: nearly average pooling
print(f"best bandwidth on this grid: σ = {best:g}")

# %% tags=["remove-cell"]
# Check for the prose above: the narrowest kernel's largest weight.
assert abs(fits[0.1][1].max().item() - 0.79) < 0.005, f"got {abs(fits[0.1][1].max().item() - 0.79)=}"

# %% [markdown]
# The test error is U-shaped in the bandwidth, and the two ends fail in opposite ways.
#
# - **Too narrow** ($\sigma = 0.1$): the largest weight in a row averages 0.4 and the
#   entropy is 1.4 nats, about what a uniform spread over four keys gives, so each
#   prediction rests on a handful of noisy targets. The curve is jagged: it copies the noise
#   of individual training points (it *overfits*).
# - **Too wide** ($\sigma \geq 1$): the entropy approaches the uniform $\log 50$, the curve
#   is oversmoothed, and at $\sigma = 3$ the error is nearly that of average pooling.
# - **In between** ($\sigma = 0.3$ here) each prediction averages enough targets to cancel
#   much of their noise, over a window narrow enough that $f$ barely changes inside it.
#
# Statisticians call this the [bias–variance trade-off](../book/glossary.md#term-biasvariance-trade-off) ([Hastie et al. [2009]](../book/references.bib#hastie2009), Section 6.2): a narrow window
# averages a few targets close to the query, so its prediction has little bias (blur) but a
# large variance (noise); a wide one averages many, with the opposite result.
#
# Every weight row is a probability distribution throughout; what the bandwidth changes is
# how sharply it is peaked. Here the best $\sigma$ was found by looking at the test error,
# which in real problems we do not have. The next section learns it from the training data
# alone.
#
# ## Parametric attention pooling: learning $w$
#
# Make the inverse bandwidth a parameter:
#
# $$
# f(x) = \sum_{i=1}^{n} \operatorname{softmax}_i\!\left(-\tfrac12 \big((x - x_i)\, w\big)^2\right) y_i ,
# $$
#
# with $w$ learned by gradient descent. This is [parametric attention pooling](../book/glossary.md#term-parametric-attention-pooling), the
# smallest possible attention layer with something to learn. The training below is an old
# idea in new clothes: choosing a kernel's bandwidth by minimising the leave-one-out
# cross-validation error is a classical bandwidth selector of nonparametric statistics
# ([Hastie et al. [2009]](../book/references.bib#hastie2009), Section 6.2), usually run over a grid; here gradient descent does the search. `NWKernelRegression` holds the
# single parameter `w` and returns `(pred, weights)` from its `forward`.
#
# What should it be trained on? The only targets we have are the training pairs, so each
# training input becomes a query, predicted from the *other* training pairs: its own key is
# left out of its keys. This is [leave-one-out training](../book/glossary.md#term-leave-one-out-training), and it uses a mask (a
# boolean matrix, True = may attend) whose diagonal is False. The subsection *What goes wrong when a
# query can see its own key*, below, shows what happens without it. Here is the mask for four points, and the weights it gives:

# %%
x_small = torch.tensor([0.0, 0.5, 1.0, 3.0])
leave_one_out_small = ~torch.eye(4, dtype=torch.bool)  # (K, K), True = may attend
_, small_weights = nadaraya_watson(x_small, x_small, torch.zeros(4),
                                   mask=leave_one_out_small)
print("mask (1 = may attend):")
print(leave_one_out_small.int())
print("weights:")
for row in small_weights:
    print("  " + "  ".join(f"{weight:.3f}" for weight in row))
assert torch.all(small_weights.diagonal() == 0)
assert round(small_weights[3, 2].item(), 2) == 0.71 and round(small_weights[3, 1].item(), 2) == 0.23, f"got {round(small_weights[3, 2].item(), 2)=}, {round(small_weights[3, 1].item(), 2)=}"

# %% [markdown]
# Each row still sums to 1 over the other three keys; the point at $x = 3$, far from the
# rest, gives most of its weight (0.71) to its nearest neighbour at $x = 1$, and most of the rest
# (0.23) to the point at $x = 0.5$.
#
# `train_nw` runs this training: full-batch gradient descent (plain SGD, no momentum, no
# randomness) on the mean squared error between each training point's leave-one-out
# prediction and its target. Start from $w = 1$, the kernel of the heatmap above.

# %% mystnb={"image": {"alt": "Loss curve: the leave-one-out training loss falls from 0.78 to about 0.42 in the first step, levels off at 0.36 within about 20 epochs and stays there, just above a dashed line at the noise variance, 0.315."}}
model = NWKernelRegression(w=1.0)
losses = train_nw(model, x_train, y_train, epochs=100, lr=2.0)
learned_w = model.w.item()
print(f"learned w = {learned_w:.3f}, so the bandwidth is σ = 1/w = {model.bandwidth:.3f}")
print(f"leave-one-out training loss: {losses[0]:.4f} at w = 1, "
      f"{losses[-1]:.4f} at the end")
assert all(b <= a for a, b in zip(losses, losses[1:])), "the loss fell at every step"

fig, ax = plt.subplots(figsize=(4.8, 3.2))
ax.plot(range(1, len(losses) + 1), losses, color="C0",
        label="leave-one-out training loss")
ax.axhline(noise_variance, color="0.5", ls="--", label="noise variance of the targets")
ax.set(xlabel="epoch", ylabel="mean squared error", ylim=(0, 0.85),
       title="Learning $w$ (leave-one-out)")
ax.legend(fontsize=9)
fig.tight_layout()

# %% mystnb={"image": {"alt": "Left: the learned curve follows the true curve closely, including the peak near x = 2 and the dip near x = 4.7, with small wiggles where training points are sparse. Right: the heatmap has a narrow, bright diagonal band."}}
learned_pred, learned_weights = model(x_test, x_train, y_train)  # (Q,), (Q, K)
learned_pred_fine, _ = model(x_fine, x_train, y_train)
learned_mse = mse(learned_pred, y_true)
print(f"{'':>18} {'test MSE':>9} {'entropy':>8} {'peak weight':>12}")
for name, pred, row_weights in [("w = 1 (σ = 1)", pred_nw, weights_nw),
                                (f"learned w = {learned_w:.2f}", learned_pred,
                                 learned_weights.detach())]:
    print(f"{name:>18} {mse(pred, y_true):9.3f} {mean_entropy(row_weights):8.3f} "
          f"{row_weights.max(dim=1).values.mean():12.3f}")
print(f"leave-one-out loss {losses[-1]:.3f} ≈ test MSE {learned_mse:.3f} "
      f"+ noise variance {noise_variance:.3f} = {learned_mse + noise_variance:.3f}")
assert learned_w > 1 and learned_mse < mse(pred_nw, y_true), f"got {learned_w=}, {learned_mse=}, {mse(pred_nw, y_true)=}"

fig, (ax_fit, ax_map) = plt.subplots(1, 2, figsize=(9.5, 3.6))
plot_fit(ax_fit, learned_pred_fine, f"learned, $w = {learned_w:.2f}$", color="C2")
heatmap(learned_weights, ax=ax_map,
        title=f"attention weights, learned $w = {learned_w:.2f}$", **weight_axes)
fig.tight_layout()

# %% [markdown]
# Training moved $w$ from 1 to about 3.95, a bandwidth of about 0.25: a kernel four times
# narrower. The heatmap shows it, with a thin bright diagonal where the $\sigma = 1$ map had a
# wide dim band. Each query now listens to its nearest few keys (the mean peak weight rose
# from 0.05 to 0.17).
#
# Why did training sharpen the kernel? The loss compares predictions with the *noisy training
# targets*, and a larger $w$ is a narrower kernel that lets each prediction follow the
# targets near it. At $w = 1$ the predictions are blurred across a window about two thirds
# of a period of the sine wide and miss the targets on every peak and trough, so the gradient pushes $w$ up. The learned
# curve therefore tracks the training points more closely, and is less smooth, than the
# $\sigma = 1$ curve. What stops $w$ from growing for ever is the held-out target: with a
# very narrow kernel a training point is predicted from one or two neighbours, whose noise it
# then copies, and the leave-one-out loss rises again. The optimum sits where the two errors
# balance, close to the best bandwidth in the table ($\sigma = 0.3$). How close is a matter of
# luck: on five other draws of the data (seeds 1 to 5, each trained for 400 epochs in a hidden
# cell) the learned $\sigma$ and the one with the lowest test error differed by up to about a
# factor of two. On one of them (seed 1) the leave-one-out loss is so flat over a wide range of
# $w$ that gradient descent was still creeping downhill after 400 epochs, short of the loss's
# lowest point.
#
# That the learned bandwidth lands near the best one at all is no coincidence. A held-out target is the true curve plus fresh noise that the
# prediction has not seen, so the leave-one-out loss estimates the error against the true
# curve *plus the noise variance*, the last line of the printout above. The noise variance is
# a floor: on average, no honest predictor gets below it on targets it has not seen (on a
# finite sample one can land below it by chance). A training loss
# below it is a sign of fitting the noise, which is exactly what happens next.
#
# ### What goes wrong when a query can see its own key
#
# Drop the mask, so that training point $i$ is among the keys of its own query. Its own key is
# at distance 0, so its score is $-\tfrac12 (0 \cdot w)^2 = 0$, the largest a score can be;
# every other score $-\tfrac12 \big((x_i - x_j)\, w\big)^2$ is negative and heads to
# $-\infty$ as $w$ grows. So as $w \to \infty$ the softmax puts all of the query's weight on
# the point itself, the prediction becomes $y_i$ exactly, and the training loss goes to 0,
# whatever the noise, as long as no two training inputs coincide (true here, where the $x_i$
# are drawn from a continuous distribution). The loss has no minimum at any finite $w$. The
# plot and table evaluate the training loss along a grid of $w$ both ways.

# %% mystnb={"image": {"alt": "Training loss against w on a log axis from 0.1 to 1000. With the own key left out the loss has a minimum of about 0.36 near w = 4, marked by a dotted line, and rises towards 0.71 for large w. With the own key included the loss falls steadily, crosses below the noise-variance line near w = 3 and reaches 0 by w = 300."}}
leave_one_out = ~torch.eye(len(x_train), dtype=torch.bool)  # (K, K)


def training_loss(w, mask):
    pred, _ = nadaraya_watson(x_train, x_train, y_train, w, mask=mask)
    return mse(pred, y_train)


w_grid = torch.logspace(-1, 3, 81).tolist()
loss_left_out = [training_loss(w, leave_one_out) for w in w_grid]
loss_self_in = [training_loss(w, None) for w in w_grid]

print(f"{'w':>6} {'loss, own key':>14} {'loss, own key':>14} {'weight on':>10}")
print(f"{'':>6} {'left out':>14} {'included':>14} {'own key':>10}")
for w in [1, 4, 16, 64, 256, 1024]:
    _, self_weights = nadaraya_watson(x_train, x_train, y_train, w)
    print(f"{w:6d} {training_loss(w, leave_one_out):14.4f} "
          f"{training_loss(w, None):14.4f} {self_weights.diagonal().mean():10.4f}")

w_best_left_out = w_grid[loss_left_out.index(min(loss_left_out))]
# plain SGD found the grid's minimum (to within one grid step)
assert abs(math.log10(w_best_left_out) - math.log10(learned_w)) < 0.05, f"got {abs(math.log10(w_best_left_out) - math.log10(learned_w))=}"
assert all(b <= a for a, b in zip(loss_self_in, loss_self_in[1:]))  # only ever falls
assert loss_self_in[-1] < 1e-4, f"got {loss_self_in[-1]=}"

fig, ax = plt.subplots(figsize=(4.8, 3.4))
ax.semilogx(w_grid, loss_left_out, color="C2", label="own key left out")
ax.semilogx(w_grid, loss_self_in, color="C3", label="own key included")
ax.axvline(learned_w, color="C2", ls=":", label=f"learned $w = {learned_w:.2f}$")
ax.axhline(noise_variance, color="0.5", ls="--", label="noise variance")
ax.set(xlabel="$w$ (log scale)", ylabel="training MSE",
       title="Training loss as a function of $w$")
ax.legend(fontsize=9)
fig.tight_layout()

# %% [markdown]
# With its own key included, a training point takes almost all of its own weight once $w$
# is in the hundreds, and the loss reaches 0. Gradient descent cannot stop anywhere, so it keeps
# increasing $w$. To see it, train two models from $w = 1$ with the same optimiser, learning
# rate and number of steps; the only difference is the mask. Plain SGD keeps no state, so
# training in chunks of 50 epochs is the same as training in one go, and lets us record the
# progress.

# %%
model_left_out = NWKernelRegression(w=1.0)
model_self_in = NWKernelRegression(w=1.0)
history = []
print(f"{'':>6} | {'own key left out':^20} | {'own key included':^20}")
columns = f"{'w':>6} {'train':>6} {'test':>6}"
print(f"{'epochs':>6} | {columns} | {columns}")
for chunk in range(8):
    row = []
    for nw_model, leave_out in [(model_left_out, True), (model_self_in, False)]:
        chunk_losses = train_nw(nw_model, x_train, y_train, epochs=50, lr=2.0,
                                leave_one_out=leave_out)
        test_error = mse(nw_model(x_test, x_train, y_train)[0], y_true)
        row.append((nw_model.w.item(), chunk_losses[-1], test_error))
    history.append(row)
    (w_a, train_a, test_a), (w_b, train_b, test_b) = row
    print(f"{50 * (chunk + 1):6d} | {w_a:6.3f} {train_a:6.3f} {test_a:6.3f} "
          f"| {w_b:6.3f} {train_b:6.3f} {test_b:6.3f}")

(w_left_out, _, last_test_a), (w_self_in, last_train_b, last_test_b) = history[-1]
assert all(b[1][0] > a[1][0] for a, b in zip(history, history[1:])), "w keeps growing"
assert abs(w_left_out - learned_w) < 0.02, "the leave-one-out w stays put"
assert last_train_b < noise_variance, "below the noise floor: fitting the noise"
assert last_test_b > 1.5 * last_test_a, "and the test error is far larger"

# %% tags=["remove-cell"]
# Checks for the prose below: the self-including model's w grows at a steady pace.
w_path = [row[1][0] for row in history]
train_path = [row[1][1] for row in history]
assert all(0.9 < b - a < 1.1 for a, b in zip(w_path, w_path[1:]))
assert all(-0.012 < (lb - la) / (wb - wa) < -0.008  # a straight line: constant slope
           for wa, wb, la, lb in zip(w_path, w_path[1:], train_path, train_path[1:]))


# %% tags=["remove-cell"]
# Checks for the prose above and below: the same training on five other draws of the data.
def loo_loss_slope(w, draw, mask):
    probe = NWKernelRegression(w=w)
    pred, _ = probe(draw.x_train, draw.x_train, draw.y_train, mask=mask)
    (slope,) = torch.autograd.grad(torch.mean((pred - draw.y_train) ** 2), probe.w)
    return slope.item()


other_draws = {}
for seed in range(1, 6):
    draw = nadaraya_watson_data(num_train=50, num_test=50, seed=seed)
    draw_noise = torch.mean((draw.y_train - nw_target(draw.x_train)) ** 2).item()
    left_out, self_in, w_path = NWKernelRegression(w=1.0), NWKernelRegression(w=1.0), []
    for chunk in range(8):
        train_nw(left_out, draw.x_train, draw.y_train, epochs=50, lr=2.0)
        chunk_losses = train_nw(self_in, draw.x_train, draw.y_train, epochs=50, lr=2.0,
                                leave_one_out=False)
        w_path.append(self_in.w.item())
    gains = [b - a for a, b in zip(w_path, w_path[1:])]
    test_errors = [mse(m(draw.x_test, draw.x_train, draw.y_train)[0], draw.y_true)
                   for m in (left_out, self_in)]
    fine_sigmas = torch.logspace(-1.3, 0.5, 60).tolist()
    test_by_sigma = [mse(nadaraya_watson(draw.x_test, draw.x_train, draw.y_train, bandwidth=s)[0],
                         draw.y_true) for s in fine_sigmas]
    mask = ~torch.eye(50, dtype=torch.bool)
    loo_by_sigma = [mse(nadaraya_watson(draw.x_train, draw.x_train, draw.y_train, bandwidth=s,
                                        mask=mask)[0], draw.y_train) for s in fine_sigmas]
    learned_sigma = left_out.bandwidth
    learned_loo = mse(left_out(draw.x_train, draw.x_train, draw.y_train, mask=mask)[0], draw.y_train)
    other_draws[seed] = dict(
        below_noise=chunk_losses[-1] < draw_noise, climbing=all(g > 0 for g in gains),
        slowdown=gains[-1] / gains[0], test_ratio=test_errors[1] / test_errors[0],
        sigma_ratio=max(learned_sigma, fine_sigmas[test_by_sigma.index(min(test_by_sigma))])
        / min(learned_sigma, fine_sigmas[test_by_sigma.index(min(test_by_sigma))]),
        lower_loo_elsewhere=min(loo_by_sigma) < learned_loo - 1e-3,
        downhill=loo_loss_slope(left_out.w.item(), draw, mask) < 0)
assert all(d["below_noise"] and d["climbing"] for d in other_draws.values()), other_draws
assert all(0.4 < d["slowdown"] < 0.8 for d in other_draws.values()), other_draws
ratios = [d["test_ratio"] for d in other_draws.values()]
assert min(ratios) < 1 and 1.9 < max(ratios) < 2.2, ratios
sigma_ratios = [d["sigma_ratio"] for d in other_draws.values()]
assert 1.8 < max(sigma_ratios) < 2.2, sigma_ratios
assert [s for s, d in other_draws.items() if d["lower_loo_elsewhere"]] == [1], other_draws
assert other_draws[1]["downhill"], other_draws[1]   # not a local minimum: still descending


# %% [markdown]
# The leave-one-out model has settled by epoch 150 and stays put. The other model's $w$
# climbs in every chunk and its training loss falls below the noise variance (it is now
# reproducing noise), while its test error rises to twice that of the leave-one-out model:
# the signature of overfitting. On this data its $w$ does not slow down either: after the first chunk it
# gains about one unit every 50 epochs (between 0.9 and 1.1 in each later chunk),
# because over this range its training loss falls almost in a straight line with $w$, so
# the gradient and each fixed step stay about the same. Nothing in the loss will stop it; where it is heading is the
# $w = \infty$ lookup table of the loss plot.
# How far it has got after 400 epochs depends on the data. On the five other draws of the
# hidden cell its training loss also fell below the noise variance and its $w$ kept climbing,
# but more slowly as it went (its last chunk gained between 0.4 and 0.8 of what its first one
# did), and its test error after 400 epochs ranged from below the leave-one-out model's to
# about twice it: the copying is certain, the size of the damage at a given epoch is not.
# Here are the two curves, and the self-including model's weights:

# %% mystnb={"image": {"alt": "Left: the curve trained with its own key included is jagged, bending towards each training target in turn, while the leave-one-out curve stays smooth. Right: its heatmap is a thin diagonal line, with single bright cells in places."}}
def total_variation(curve):
    # How far a curve travels up and down: the sum of |steps| along the fine grid.
    return (curve[1:] - curve[:-1]).abs().sum().item()


self_in_fine, _ = model_self_in(x_fine, x_train, y_train)
_, self_in_weights = model_self_in(x_test, x_train, y_train)
variation = {"true curve": total_variation(nw_target(x_fine)),
             "σ = 1": total_variation(pred_fine_1),
             "own key left out": total_variation(learned_pred_fine.detach()),
             "own key included": total_variation(self_in_fine.detach())}
for name, value in variation.items():
    print(f"total variation, {name:>16}: {value:5.2f}")
assert (variation["σ = 1"] < variation["own key left out"]
        < variation["own key included"]), f"got {variation['σ = 1']=}, {variation['own key left out']=}, {variation['own key included']=}"
assert variation["own key included"] > 1.5 * variation["true curve"], f"got {variation['own key included']=}, {1.5 * variation['true curve']=}"

fig, (ax_fit, ax_map) = plt.subplots(1, 2, figsize=(9.5, 3.6))
plot_fit(ax_fit, self_in_fine, f"own key included, $w = {w_self_in:.1f}$", color="C3")
ax_fit.plot(x_fine, learned_pred_fine.detach(), color="C2", lw=1.2,
            label=f"own key left out, $w = {learned_w:.2f}$")
ax_fit.legend(loc="upper right", fontsize=9)
heatmap(self_in_weights, ax=ax_map, title=f"attention weights, $w = {w_self_in:.1f}$",
        **weight_axes)
fig.tight_layout()

# %% tags=["remove-cell"]
# Checks for the prose below: how wide the self-including model's weights are.
row_peaks = self_in_weights.max(dim=1).values  # (Q,)
sorted_weights = self_in_weights.sort(dim=1, descending=True).values  # (Q, K)
keys_for_90 = ((sorted_weights.cumsum(dim=1) < 0.9).sum(dim=1) + 1).float().mean().item()
assert abs(keys_for_90 - 3.4) < 0.05 and (row_peaks > 0.5).sum().item() == 16, f"got {abs(keys_for_90 - 3.4)=}, {(row_peaks > 0.5).sum().item()=}"


# %% [markdown]
# The self-including model's curve is jagged: it bends towards each training target in
# turn, on its way to the staircase of a nearest-neighbour lookup, and it travels up and down
# almost twice as far as the leave-one-out curve (total variation 10.7 against 5.6; the true
# curve's is 6.1). Its heatmap has narrowed to a line a few keys wide
# (on average 3.4 keys hold 90% of a row's weight), and in 16 of the 50 rows a single key
# takes more than half of the weight.
#
# Hence leave-one-out. When the answer a query must predict is stored among its own keys and
# values, attention will find it and copy it, and the loss rewards the copying. Holding the
# query's own pair out (or, with more data, holding out a whole validation set) makes the
# loss measure prediction instead of recall. The same hazard returns with language models
# trained to predict the next token, but it is closed differently there. The target of
# position $t$ is the token at position $t + 1$, and the *causal mask* of a later chapter
# lets position $t$ attend to positions $1, \ldots, t$, its own position included: that mask
# keeps the diagonal. What hides the answer is the one-step shift between inputs and
# targets, which puts the token to be predicted outside the keys the query may see. Here
# the target of query $i$ is the value of key $i$ itself, so it is the diagonal that has to
# go.
#
# ## What comes next: scoring functions
#
# Take the Gaussian out of this chapter and a recipe remains:
#
# 1. score every key against the query, $a(q, k_i)$;
# 2. turn the scores into weights with a softmax over the keys;
# 3. return the weighted average of the values,
#    $f(q) = \sum_i \operatorname{softmax}_i\big(a(q, k_i)\big)\, v_i$.
#
# The Gaussian kernel's exponent $a(q, k) = -\tfrac12 \big((q - k)\, w\big)^2$ is one
# *attention scoring function*: it says "close means relevant" (for vectors, $-\tfrac12 \lVert (\mathbf q - \mathbf k)\, w \rVert^2$). The code below writes the recipe once with the score as an argument and
# checks that the Gaussian score gives back the trained model.

# %%
def attention_pooling(score, queries, keys, values):
    scores = score(queries[:, None], keys[None, :])  # (Q, K)
    attention_weights = torch.softmax(scores, dim=1)  # (Q, K)
    return attention_weights @ values, attention_weights  # (Q,), (Q, K)


def gaussian_score(query, key):
    return -0.5 * ((query - key) * learned_w) ** 2


recipe_pred, _ = attention_pooling(gaussian_score, x_test, x_train, y_train)
torch.testing.assert_close(recipe_pred, learned_pred.detach())
print("score -> softmax -> weighted average reproduces the trained model")

# %% [markdown]
# For vector queries and keys (words, image patches) chapter 3, on attention scoring
# functions, swaps in other scores: the dot product $q^\top k$ (large when two vectors point
# the same way), its scaled version $q^\top k / \sqrt d$, and a small additive network. Steps 2
# and 3 stay as they are here, and masking stays as it was used here: a False in the mask
# means a key may not be attended to.
#
# ## Summary
#
# - Attention pooling returns a weighted average of **values**; the weights come from
#   comparing a **query** (the volitional cue: what is being looked for) with each **key**
#   (the non-volitional cue: how each value presents itself). Pooling layers have no query;
#   attention has one.
# - The weights of each query are a probability distribution over the keys. Averaging over it
#   (soft attention) is differentiable; taking the argmax (hardmax) gives gradient descent
#   nothing to follow; sampling one key (the hard attention of Xu et al., Section 4.1) has no
#   ordinary gradient either and is trained with a sampled, REINFORCE-style estimate.
# - Nadaraya–Watson kernel regression with a Gaussian kernel is attention pooling with weights
#   $\operatorname{softmax}_i\!\left(-\tfrac12 ((x - x_i) w)^2\right)$. Compute it as a
#   softmax, not as a ratio of kernels: the ratio becomes $0/0$ far from the data.
# - The bandwidth $\sigma = 1/w$ trades noise against blur (variance against bias): too narrow copies the noise of
#   single points, too wide tends to average pooling. On this data the test error is U-shaped
#   with its minimum near $\sigma = 0.3$.
# - Learning $w$ by gradient descent with each training point left out of its own keys gives
#   $w \approx 3.95$ ($\sigma \approx 0.25$) on this data, sharper than $\sigma = 1$ and close
#   to the best bandwidth (on other draws, within about a factor of two of it). Without leave-one-out, $w \to \infty$ drives the training loss to 0: the
#   model memorises the training set, and on this data its test error rose to twice the
#   leave-one-out model's within 400 epochs.
# - Score, softmax, weighted average: the general recipe. The Gaussian score is the first of
#   the scoring functions of chapter 3.
#
# ## Exercises
#
# **1. The two limits.** Show numerically that `nadaraya_watson` with a very small $w$
# reproduces average pooling, and with a very large $w$ returns the target of the nearest
# training point.
#
# <details>
# <summary>Solution</summary>
#
# As $w \to 0$ every score $-\tfrac12 \big((x - x_i)\, w\big)^2$ tends to 0, so every
# weight tends to $1/n$: average pooling. As $w \to \infty$ the nearest key's score exceeds
# any other key's by $\tfrac12 w^2 \big((x - x_j)^2 - (x - x_{\text{nearest}})^2\big)$,
# which grows without bound, so the nearest key's weight tends to 1 (two keys exactly as
# near would share it). The cell below checks both limits with $w = 10^{-3}$ and
# $w = 10^{3}$.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 1.
pred_wide, _ = nadaraya_watson(x_test, x_train, y_train, w=1e-3)
torch.testing.assert_close(pred_wide, y_train.mean().expand(50))
pred_narrow, _ = nadaraya_watson(x_test, x_train, y_train, w=1e3)
nearest = (x_test[:, None] - x_train[None, :]).abs().argmin(dim=1)  # (Q,)
torch.testing.assert_close(pred_narrow, y_train[nearest])
print("w = 1e-3 gives average pooling; w = 1e3 gives the nearest training target")


# %% [markdown]
# **2. Other kernels.** The box kernel is $\kappa(u) = 1$ for $|u| < 1$ and 0 otherwise. Write
# Nadaraya–Watson with it as a softmax of some score. What happens to a query with no
# training input within distance 1, and how should such a query be handled?
#
# <details>
# <summary>Solution</summary>
#
# Any non-negative kernel can be written $\kappa(u) = \exp(\log \kappa(u))$, with $\log 0 = -\infty$,
# so the weights are
# $\operatorname{softmax}_i(\log \kappa(x - x_i))$: for the box kernel the score is 0 inside the
# window and $-\infty$ outside, which is a *mask* (keys within distance 1 may be attended)
# over all-equal scores. Each prediction is then the plain average of the targets inside the
# window. A query with no training input in its window has every score at $-\infty$, and
# `torch.softmax` returns NaN for such a row (the ratio form is $0/0$).
#
# How to handle it depends on what the output is for. The attention layers of this book give
# a query with nothing to attend to all-zero weights, never NaN, which is what
# `nadaraya_watson(..., mask=...)` does: inside a network a zero vector is a harmless output
# for, say, a padding position whose result is never used, while one NaN would spread through
# every later layer and the loss. As a *regression*, though, all-zero weights predict 0,
# a silent, arbitrary answer: at $x = 8$ it says 0.0 where $f(8) \approx 7.26$, a value outside
# the range of every training target. Principled choices are:
#
# - **abstain**: return NaN or a flag saying "no data near this query", and let the caller
#   decide;
# - **widen the window** until it holds some keys, for example to the $k$ nearest training
#   inputs, as $k$-nearest-neighbour regression does;
# - **fall back to the global mean**, that is average pooling, the $w \to 0$ limit.
#
# None of them can recover $f(8)$: the query lies outside the data, and any weighted average of
# the targets stays within their range, so a kernel smoother cannot extrapolate. The cell below
# prints each answer.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 2.
def box_scores(queries, keys):
    inside = (queries[:, None] - keys[None, :]).abs() < 1  # (Q, K)
    return torch.zeros(inside.shape).masked_fill(~inside, float("-inf")), inside


queries = torch.tensor([2.0, 8.0])  # 8.0 is more than 1 from every training input
scores, inside = box_scores(queries, x_train)
print("plain softmax:", torch.softmax(scores, dim=1) @ y_train)
box_pred, box_weights = nadaraya_watson(queries, x_train, y_train, w=1e-6, mask=inside)
print("masked, tiny w (flat kernel):", box_pred)
print(f"mean of the targets with |x_i - 2| < 1: {y_train[inside[0]].mean():.4f}")
assert box_weights[1].sum() == 0, f"got {box_weights[1].sum()=}"

# The query at 8 as a regression: the masked answer and three principled ones.
nearest_five = (queries[1] - x_train).abs().topk(5, largest=False).indices   # (5,)
answers = {"all-zero weights (the layer convention)": box_pred[1].item(),
           "abstain": float("nan"),
           "widen to the 5 nearest keys": y_train[nearest_five].mean().item(),
           "global mean (average pooling)": y_train.mean().item()}
print(f"f(8) = {nw_target(queries[1:]).item():.2f}; training targets from "
      f"{y_train.min():.2f} to {y_train.max():.2f}")
for name, answer in answers.items():
    print(f"  {name:40s} {answer:.2f}")
assert abs(nw_target(queries[1:]).item() - 7.26) < 0.01 and y_train.max() < 7.26, f"got {abs(nw_target(queries[1:]).item() - 7.26)=}, {y_train.max()=}"


# %% [markdown]
# **3. Where training starts.** Train `NWKernelRegression` with leave-one-out from
# $w = 0.2$, $0.5$, $10$ and $20$ (200 epochs, learning rate 2). Which starts reach the
# $w \approx 3.96$ minimum? Explain what you see using the loss plot of this chapter.
#
# <details>
# <summary>Solution</summary>
#
# From 0.2 and 0.5 training reaches the same minimum, $w \approx 3.96$. From 10 it is still
# near 7 after 200 epochs, and from 20 it has only reached about 18. The softmax is not
# saturated there: the mean largest leave-one-out weight of a row is 0.43 at $w = 10$ and
# 0.69 at $w = 20$, far from the 1 of a one-hot row. What is small is the slope of the loss
# in $w$. Past its minimum the leave-one-out loss rises only slowly, from 0.39 at $w = 7$ to
# 0.48 at $w = 20$ (the log axis of the loss plot hides how long that side is), so the
# gradient there is below 0.01, and plain SGD with a fixed learning rate of 2 moves $w$ by
# less than 0.02 a step: a few units in 200 epochs. Below the minimum the loss falls steeply
# (0.78 at $w = 1$, 0.36 at $w = 4$) and the gradient is about 0.65 in size at $w = 0.5$ and
# at $w = 1$, so from a wide kernel training is within 0.05 of the minimum after about 65
# epochs. On this data, starting with a wide kernel and letting training narrow it is the safer
# choice; it is not a guarantee on every draw: where the leave-one-out loss is nearly flat over
# a wide range of $w$, as on one of the other draws of the main text, a narrow start can end
# as low as a wide one.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 3.
def loo_loss_slope_peak(w):
    # Leave-one-out loss, its gradient dL/dw and the mean largest weight of a row, at w.
    probe = NWKernelRegression(w=w)
    pred, probe_weights = probe(x_train, x_train, y_train, mask=leave_one_out)
    loss = torch.mean((pred - y_train) ** 2)
    (slope,) = torch.autograd.grad(loss, probe.w)
    return loss.item(), slope.item(), probe_weights.max(dim=1).values.mean().item()


print(f"{'w':>5} {'loss':>7} {'dL/dw':>8} {'peak weight':>12}")
at = {w: loo_loss_slope_peak(w) for w in [0.2, 0.5, 1.0, 4.0, 7.0, 10.0, 20.0]}
for w, (loss, slope, peak_weight) in at.items():
    print(f"{w:5.1f} {loss:7.4f} {slope:8.4f} {peak_weight:12.3f}")

print(f"{'start w':>7} {'w at epoch 60':>14} {'70':>7} {'200':>7} {'loss at 200':>12}")
for w_start in [0.2, 0.5, 10.0, 20.0]:
    start_model, path = NWKernelRegression(w=w_start), []
    for epochs in [60, 10, 130]:  # record w after 60, 70 and 200 epochs
        start_losses = train_nw(start_model, x_train, y_train, epochs=epochs, lr=2.0)
        path.append(start_model.w.item())
    print(f"{w_start:7.1f} {path[0]:14.3f} {path[1]:7.3f} {path[2]:7.3f} "
          f"{start_losses[-1]:12.4f}")
    if w_start < 1:  # within 0.05 of the minimum after 60 to 70 epochs
        assert abs(path[0] - 3.964) > 0.05 and abs(path[1] - 3.964) < 0.05, f"got {abs(path[0] - 3.964)=}, {abs(path[1] - 3.964)=}"
        assert abs(path[2] - 3.964) < 0.001, f"got {abs(path[2] - 3.964)=}"
    else:  # a few units in 200 epochs
        assert w_start - 3.5 < path[2] < w_start - 2, f"got {w_start - 3.5=}, {path[2]=}, {w_start - 2=}"

assert abs(at[10.0][2] - 0.43) < 0.005 and abs(at[20.0][2] - 0.69) < 0.005, f"got {abs(at[10.0][2] - 0.43)=}, {abs(at[20.0][2] - 0.69)=}"  # not one-hot
assert abs(at[7.0][0] - 0.39) < 0.005 and abs(at[20.0][0] - 0.48) < 0.005, f"got {abs(at[7.0][0] - 0.39)=}, {abs(at[20.0][0] - 0.48)=}"
assert all(0 < loo_loss_slope_peak(w)[1] < 0.01 for w in torch.linspace(7, 20, 27).tolist())
assert all(abs(abs(at[w][1]) - 0.65) < 0.02 for w in [0.5, 1.0])

# %% [markdown]
# **4. More data.** With 500 training points instead of 50 (same noise, `seed=0`), is the
# best bandwidth larger or smaller? Check with the leave-one-out loss and with the test
# error, on a grid of bandwidths.
#
# <details>
# <summary>Solution</summary>
#
# Smaller, on this draw. With ten times as many points, a window of a given width holds ten times as many
# noisy targets, so the noise averages out inside a narrower window, and a narrower window
# blurs the curve less. On the grid below the leave-one-out loss is lowest at
# $\sigma = 0.125$ and the test error at $\sigma = 0.15$ (both were 0.25–0.3 with 50
# points), and the best test error is between five and six times smaller than with 50 points. (For one
# parameter a grid is the simplest check.)
#
# The classical analysis predicts both changes. For a smooth $f$ and a window of width
# $\sigma$, the squared bias grows like $\sigma^4$ and the variance like $1/(n\sigma)$; their
# sum is smallest at $\sigma \propto n^{-1/5}$, where the error is $\propto n^{-4/5}$. Ten times
# the data should therefore shrink the best $\sigma$ by $10^{-1/5} \approx 0.63$ and the error
# by $10^{4/5} \approx 6.3$; the measured factors, about 0.5 and between 5 and 6, are close. One draw cannot pin the
# exponent down, though: the best bandwidth for 50 points is itself noisy. On four other draws
# (seeds 1 to 4, printed by the cell on a finer grid) the test-best $\sigma$ always shrank, but
# by factors from about a quarter to three quarters, and on two of them the leave-one-out
# choice for 500 points came out *larger* than for 50.
#
# </details>

# %% tags=["hide-cell"]
# Solution to exercise 4.
big = nadaraya_watson_data(num_train=500, num_test=50, seed=0)
big_mask = ~torch.eye(500, dtype=torch.bool)  # leave-one-out
loo_grid, test_grid = {}, {}  # σ -> leave-one-out loss, σ -> test MSE
print(f"{'σ':>6} {'leave-one-out loss':>19} {'test MSE':>9}")
for sigma in [0.05, 0.1, 0.125, 0.15, 0.2, 0.3]:
    loo_pred, _ = nadaraya_watson(big.x_train, big.x_train, big.y_train,
                                  bandwidth=sigma, mask=big_mask)
    big_pred, _ = nadaraya_watson(big.x_test, big.x_train, big.y_train, bandwidth=sigma)
    loo_grid[sigma], test_grid[sigma] = mse(loo_pred, big.y_train), mse(big_pred, big.y_true)
    print(f"{sigma:6.3f} {loo_grid[sigma]:19.4f} {test_grid[sigma]:9.4f}")

assert min(loo_grid, key=loo_grid.get) == 0.125 and min(test_grid, key=test_grid.get) == 0.15, f"got {min(loo_grid, key=loo_grid.get)=}, {min(test_grid, key=test_grid.get)=}"
best_with_50 = min(min(test_mse.values()), learned_mse)  # 50 points: grid and learned w
assert 5 < best_with_50 / min(test_grid.values()) < 6, f"got {best_with_50 / min(test_grid.values())=}"  # "five times smaller"
fine_sigmas = torch.logspace(-1.5, 0, 40).tolist()


def best_sigmas(n, seed):
    # On a finer grid: the σ with the lowest leave-one-out loss and with the lowest test MSE.
    draw = nadaraya_watson_data(num_train=n, num_test=50, seed=seed)
    mask = ~torch.eye(n, dtype=torch.bool)
    loo = [mse(nadaraya_watson(draw.x_train, draw.x_train, draw.y_train, bandwidth=s,
                               mask=mask)[0], draw.y_train) for s in fine_sigmas]
    test = [mse(nadaraya_watson(draw.x_test, draw.x_train, draw.y_train, bandwidth=s)[0],
                draw.y_true) for s in fine_sigmas]
    return fine_sigmas[loo.index(min(loo))], fine_sigmas[test.index(min(test))]


print("other draws: best σ for 500 points / best σ for 50 points")
print(f"{'seed':>4} {'leave-one-out':>14} {'test MSE':>9}")
shrink = {}
for seed in range(1, 5):
    (loo_50, test_50), (loo_500, test_500) = best_sigmas(50, seed), best_sigmas(500, seed)
    shrink[seed] = loo_500 / loo_50, test_500 / test_50
    print(f"{seed:4d} {shrink[seed][0]:14.2f} {shrink[seed][1]:9.2f}")
test_shrink = [t for _, t in shrink.values()]
assert all(t < 1 for t in test_shrink) and min(test_shrink) < 0.3 and 0.7 < max(test_shrink) < 0.8, shrink
assert sum(loo > 1 for loo, _ in shrink.values()) == 2, shrink
assert abs(10 ** (-1 / 5) - 0.63) < 0.005 and abs(10 ** (4 / 5) - 6.3) < 0.05, f"got {abs(10 ** (-1 / 5) - 0.63)=}, {abs(10 ** (4 / 5) - 6.3)=}"
