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
# # 1. MLP and activations
#
# Attention, the subject of this book, is a way for a network to decide *where to look*. Before
# we can appreciate what that adds, we need the network it was added to: the
# [multilayer perceptron (MLP)](../book/glossary.md#term-multilayer-perceptron-MLP), a stack of fully connected layers with a nonlinear
# function between them. It is one of the oldest designs in deep learning, and it is still
# inside every Transformer, where it does the per-token "thinking" after attention has done
# the looking.
#
# This chapter builds the MLP from matrix products, shows numerically why its nonlinearity is
# not optional, and measures what one hidden layer can and cannot do.
#
# **What you will learn**
#
# - the [input layer](../book/glossary.md#term-input-layer), [hidden layers](../book/glossary.md#term-hidden-layer) and [output layer](../book/glossary.md#term-output-layer),
#   written as matrix products, and what *fully connected* means, measured with a Jacobian;
# - why full connectivity is the default when nothing is known about the input's structure,
#   and what changes for images, sequences and graphs;
# - why stacked linear layers collapse into one linear map, shown by multiplying the weight
#   matrices out;
# - the activation functions ReLU, sigmoid, tanh and GELU with their derivatives, each checked
#   against PyTorch and autograd, and how saturation, too-small weights and biases make
#   gradients vanish, measured one factor at a time;
# - the [universal approximation theorem](../book/glossary.md#term-universal-approximation-theorem), built by hand and then watched in training as
#   the hidden layer widens;
# - how an MLP bends a [decision boundary](../book/glossary.md#term-decision-boundary) that a linear model must keep straight;
# - how the Transformer's [position-wise FFN](../book/glossary.md#term-position-wise-feed-forward-network-FFN)
#   is the same MLP applied to every token, and why that leaves a gap, mixing information between positions, which attention fills
#   in the Transformer.
#
# You need PyTorch tensors, matrix multiplication and the idea of a gradient; everything else
# is built here.

# %%
import copy
import math
import statistics

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from helpers.checks import check_shape
from helpers.figures.plotting import plot_decision_boundary, show_heatmaps
from helpers.figures.widgets import slider_figure
from helpers.mlp import ACTIVATIONS, MLP
from helpers.seeding import set_seed
from helpers.tasks.classification import accuracy, train_full_batch, two_moons
from helpers.tasks.regression import sample_function, wiggly_target

torch.set_num_threads(1)  # the models here are tiny: one thread is as fast, and steadier
set_seed(0)

# %% [markdown]
# ## Layers: input, hidden, output
#
# An MLP turns an input vector into an output vector in a few stages called layers. The
# [input layer](../book/glossary.md#term-input-layer) is the data itself: $D$ numbers describing one example, say the age,
# income and debt of a loan applicant. The [output layer](../book/glossary.md#term-output-layer) holds what we want to predict:
# one number for a regression, one score per class for a classification. Between them sit one
# or more [hidden layers](../book/glossary.md#term-hidden-layer), called hidden because the data never tells us
# what their values should be; the network chooses them during training.
#
# Each stage is a [fully connected layer](../book/glossary.md#term-fully-connected-layer): every output unit computes its own weighted
# sum of *all* the units of the layer before, plus a bias. For a minibatch of $N$ examples (the attention chapters write this batch size as $B$), stacked as the rows of $\mathbf X \in \mathbb{R}^{N \times D}$, a network with one hidden layer
# of width $h$ and $D_\text{out}$ outputs computes
#
# $$
# \mathbf H = \phi\!\left(\mathbf X \mathbf W^{(1)} + \mathbf b^{(1)}\right), \qquad
# \mathbf O = \mathbf H \mathbf W^{(2)} + \mathbf b^{(2)},
# $$
#
# with weights $\mathbf W^{(1)} \in \mathbb{R}^{D \times h}$, $\mathbf W^{(2)} \in \mathbb{R}^{h \times D_\text{out}}$ and biases $\mathbf b^{(1)} \in \mathbb{R}^{h}$,
# $\mathbf b^{(2)} \in \mathbb{R}^{D_\text{out}}$ (added to every row). The function $\phi$, applied to
# each entry separately, is the [activation function](../book/glossary.md#term-activation-function); for now take the ReLU,
# $\phi(z) = \max(0, z)$. Deeper networks repeat the first line once per hidden layer.
#
# Here is the formula in plain tensor code, for 4 examples with 3 features, 5 hidden units and
# 2 outputs.

# %%
set_seed(0)
num_examples, num_inputs, num_hidden, num_outputs = 4, 3, 5, 2
X = torch.randn(num_examples, num_inputs)                          # (N, D)
W1, b1 = torch.randn(num_inputs, num_hidden), torch.randn(num_hidden)
W2, b2 = torch.randn(num_hidden, num_outputs), torch.randn(num_outputs)

H = torch.relu(X @ W1 + b1)  # (N, h): the hidden layer
O = H @ W2 + b2              # (N, D_out): the output layer
check_shape(H, (num_examples, num_hidden))
check_shape(O, (num_examples, num_outputs))
print(O)

# %% [markdown]
# The book's helper `helpers.mlp.MLP(in_features, hidden_sizes, out_features, activation)`
# builds the same network from `nn.Linear` layers. One detail trips everyone once:
# `nn.Linear` stores its weight as (out, in), the transpose of $\mathbf W$ above, and computes
# `x @ weight.T + bias`. Copying our matrices in (transposed) must reproduce `O` exactly.

# %%
net = MLP(num_inputs, [num_hidden], num_outputs, activation="relu")
first, second = net.linears
with torch.no_grad():
    first.weight.copy_(W1.T)   # nn.Linear keeps (out, in)
    first.bias.copy_(b1)
    second.weight.copy_(W2.T)
    second.bias.copy_(b2)
torch.testing.assert_close(net(X), O)
print(net)
num_parameters = sum(p.numel() for p in net.parameters())
print(f"parameters: {num_parameters} = 3*5 + 5 (hidden layer) + 5*2 + 2 (output layer)")

# %% [markdown]
# ### What "fully connected" means, measured
#
# "Every output depends on every input" is a statement about derivatives: entry $(i, j)$ of the
# layer's Jacobian, $\partial y_i / \partial x_j$, is nonzero for every pair. For a linear
# layer the Jacobian *is* the weight matrix (in `nn.Linear`'s (out, in) layout), so all $D_\text{out} \times D_\text{in}$ entries
# are free parameters. Compare a 1-D convolution with a kernel of width 3, the layer of choice
# when the inputs are neighbouring samples of a signal: output $i$ looks only at inputs
# $i-1, i, i+1$, and every output uses the same three weights. Below, both layers map 8 numbers
# to 8 numbers, and autograd computes their Jacobians.

# %% mystnb={"image": {"alt": "Two 8 by 8 heatmaps of the size of the derivative of output i with respect to input j, output position down and input position across, on one colour scale. Left, fully connected: all 64 cells hold unrelated values, some dark but none blank. Right, convolution with kernel 3: only 22 cells are coloured, a band three entries wide along the diagonal with the same three values repeated down it; every other cell is blank with a grey cross, an exact zero."}}
set_seed(0)
length = 8
dense = nn.Linear(length, length)
conv = nn.Conv1d(1, 1, kernel_size=3, padding=1)  # 3 neighbours, weights shared along the signal
signal = torch.randn(length)

jacobian_dense = torch.autograd.functional.jacobian(dense, signal)                   # (8, 8)
jacobian_conv = torch.autograd.functional.jacobian(
    lambda s: conv(s.view(1, 1, length)).view(length), signal)                       # (8, 8)
jacobians = {"fully connected": (jacobian_dense, dense), "convolution": (jacobian_conv, conv)}
for name, (jacobian, layer) in jacobians.items():
    connections = int((jacobian != 0).sum())
    parameters = sum(p.numel() for p in layer.parameters())
    smallest = jacobian[jacobian != 0].abs().min()
    print(f"{name:16s} connections {connections:2d} of 64   parameters {parameters:2d}   "
          f"smallest nonzero |entry| {smallest:.4f}")
# exact zeros (no connection) become NaN, drawn blank and crossed; small entries stay dark
magnitudes = [j.abs().masked_fill(j == 0, float("nan")) for j, _ in jacobians.values()]
fig = show_heatmaps(magnitudes, titles=["fully connected", "convolution, kernel 3"],
                    xlabel="input position j", ylabel="output position i", figsize=(7.5, 3.2))
for ax, (jacobian, _) in zip(fig.axes, jacobians.values()):
    rows, cols = (jacobian == 0).nonzero(as_tuple=True)
    ax.plot(cols, rows, "x", color="0.45", ms=6, mew=1.2)

# %% [markdown]
# *The two heatmaps show $|\partial y_i / \partial x_j|$. A blank cell with a grey cross is an
# exact zero: output $i$ does not depend on input $j$ at all. A dark cell is a connection whose
# weight happens to be small, which is not the same thing. The fully connected layer's map is
# filled everywhere with unrelated values, some of them dark (its smallest entry, printed
# above, is small but not zero); the convolution's is a band three entries wide along the
# diagonal, with the same three values repeated down the band, and blank everywhere else.*
#
# The fully connected layer spends 72 parameters on 64 connections; the convolution spends 4
# on 22. That economy is only right if the structure it assumes is really there.
#
# ## Why fully connected?
#
# Whenever we know something about how the input is organised, we build that knowledge into
# the layers, and it pays: fewer parameters, less data needed, better generalisation. This
# built-in knowledge is called an [inductive bias](../book/glossary.md#term-inductive-bias).
#
# - **Images** have *locality* (a pixel is most related to its neighbours) and *translation
#   symmetry* (a cat is a cat anywhere in the frame): convolutions hard-wire both.
# - **Sequences** (text, audio) have an *order*: recurrent networks read it one step at a
#   time, and Transformers add positional encodings (a later chapter).
# - **Graphs** (molecules, social networks) have *edges*: graph networks pass messages only
#   along them.
#
# Now take a row of a spreadsheet, or a vector of features that another model computed. There
# is no "next to" between *age* and *income*; the column order is arbitrary. With no
# structure to exploit, the safest choice is to connect every input to every unit and let
# training find out which connections matter (a weight that is not needed can shrink towards zero).
# That is the fully connected layer: the default when we know nothing, giving the network the
# most freedom to move information around, at the price of the most parameters.
#
# Which raises the question of what the layers do with that freedom. A mnemonic (not a
# theorem): **linear layers move information, activations process it.** A linear layer does
# compute useful things, such as sums, differences, contrasts and projections, but every output is
# a weighted sum of inputs, so it cannot *change the shape* of a relationship: a straight line
# stays straight. The activation function is the only place where the signal is bent, and
# that is what adds expressive power. Stack ten linear layers without activations and the
# result is still one linear map, as the next section shows.
#
# ## Without activations, depth collapses
#
# Remove $\phi$ and stack two linear layers. Multiplying out,
#
# $$
# \left(\mathbf X \mathbf W^{(1)} + \mathbf b^{(1)}\right) \mathbf W^{(2)} + \mathbf b^{(2)}
# = \mathbf X \underbrace{\mathbf W^{(1)} \mathbf W^{(2)}}_{\mathbf W}
# + \underbrace{\mathbf b^{(1)} \mathbf W^{(2)} + \mathbf b^{(2)}}_{\mathbf b},
# $$
#
# which is again *one* linear layer. By induction, so is any stack: depth buys nothing. Let us
# check it on a network with three hidden layers of width 16 and `activation="identity"`, by
# multiplying its weight matrices out into a single $\mathbf W \in \mathbb{R}^{2 \times 1}$ and
# $\mathbf b \in \mathbb{R}^{1}$.

# %%
set_seed(0)
deep_linear = MLP(2, [16, 16, 16], 1, activation="identity")
W, b = torch.eye(2), torch.zeros(2)       # the identity map on 2 inputs
with torch.no_grad():
    for layer in deep_linear.linears:     # fold in one layer at a time: x -> x W + b
        W = W @ layer.weight.T            # (2, width)
        b = b @ layer.weight.T + layer.bias

X = torch.randn(100, 2)
torch.testing.assert_close(deep_linear(X), X @ W + b)
num_parameters = sum(p.numel() for p in deep_linear.parameters())
print(f"{len(deep_linear.linears)} linear layers, {num_parameters} parameters")
print(f"= one linear map with {W.numel() + b.numel()} parameters: "
      f"W = [{W[0, 0]:.4f}, {W[1, 0]:.4f}], b = {b.item():.4f}")

# %% [markdown]
# The 609 parameters are an expensive way to write three numbers. The consequence is a hard
# limit on what such a network can learn, and the classic example is XOR: four points, label 1
# when exactly one coordinate is 1. No straight line puts $(0,1)$ and $(1,0)$ on one side and
# $(0,0)$ and $(1,1)$ on the other, so the data are not [linearly separable](../book/glossary.md#term-linearly-separable). Train the
# deep linear network and the same shape with ReLU between the layers, both with the
# binary cross-entropy loss, and look at the predicted probabilities.

# %%
xor_x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
xor_y = torch.tensor([0, 1, 1, 0])
for activation in ["identity", "relu"]:
    set_seed(0)
    model = MLP(2, [16, 16, 16], 1, activation=activation)
    losses = train_full_batch(model, xor_x, xor_y.float().unsqueeze(1),
                              nn.BCEWithLogitsLoss(), steps=300, lr=0.02)
    probabilities = torch.sigmoid(model(xor_x)).squeeze(1).detach()
    if activation == "identity":   # every probability is 0.5 up to rounding noise
        assert (probabilities - 0.5).abs().max() < 1e-3, f"got {probabilities.tolist()}"
        result = "all four within 0.001 of 0.5"
    else:
        result = f"accuracy {accuracy(model, xor_x, xor_y):.2f}"
    print(f"{activation:8s} P(label 1) = {[round(p, 3) for p in probabilities.tolist()]}  "
          f"loss {losses[-1]:.4f}  {result}")

# %% [markdown]
# The linear network ends where every linear model must: under this loss its best answer to
# XOR is probability 0.5 for every point (a loss of $\ln 2 \approx 0.6931$). Its accuracy
# is not printed: it is an accident of which side of 0.5 the tiny leftover differences fall
# on, and comes out 0.75 on one CPU and 0.50 on another. No straight line gets more than three
# of the four points right. With ReLU between the layers, the same
# network solves XOR outright.
#
# Regression tells the same story. On the wiggly curve we will use for universal approximation
# below, a deep linear network trained to convergence is no better than the least-squares
# straight line, computed in closed form with `torch.linalg.lstsq`.

# %%
curve_x, curve_y = sample_function(wiggly_target, num_points=200)  # (N, 1), (N, 1) on [-3, 3]
set_seed(0)
deep_linear = MLP(1, [32, 32, 32], 1, activation="identity")
losses = train_full_batch(deep_linear, curve_x, curve_y, nn.MSELoss(), steps=500, lr=0.01)

design = torch.cat([curve_x, torch.ones_like(curve_x)], dim=1)  # (N, 2): slope and intercept
line = torch.linalg.lstsq(design, curve_y).solution
line_mse = F.mse_loss(design @ line, curve_y).item()
print(f"deep linear network, 500 steps: MSE {losses[-1]:.4f}")
print(f"best straight line (lstsq):     MSE {line_mse:.4f}")
assert abs(losses[-1] - line_mse) < 1e-3, f"got {abs(losses[-1] - line_mse)=}"


# %% [markdown]
# ## Activation functions and their derivatives
#
# An activation function is applied entrywise after each hidden linear layer. It has to be
# nonlinear (or the network collapses as above), and because training uses gradients, its
# derivative matters as much as its shape: backpropagation multiplies by $\phi'$ at every
# layer it passes through. Four functions cover the classic networks and this book. Many recent
# large Transformers use a gated FFN instead, such as SwiGLU ([Shazeer [2020]](../book/references.bib#shazeer2020), Section 2),
# which multiplies one linear projection by SiLU, $x\,\sigma(x)$, of another.
#
# | name | $\phi(x)$ | $\phi'(x)$ |
# |---|---|---|
# | [ReLU](../book/glossary.md#term-ReLU) | $\max(0, x)$ | $1$ if $x > 0$, else $0$ |
# | [sigmoid](../book/glossary.md#term-sigmoid) | $\sigma(x) = \dfrac{1}{1 + e^{-x}}$ | $\sigma(x)\,(1 - \sigma(x))$ |
# | [tanh](../book/glossary.md#term-tanh) | $\dfrac{e^{x} - e^{-x}}{e^{x} + e^{-x}}$ | $1 - \tanh^2(x)$ |
# | [GELU](../book/glossary.md#term-GELU) | $x\,\Phi(x)$, with $\Phi(x) = \tfrac12\left(1 + \operatorname{erf}(x/\sqrt2)\right)$ | $\Phi(x) + x\,\Phi'(x)$, with $\Phi'(x) = \dfrac{e^{-x^2/2}}{\sqrt{2\pi}}$ |
#
# - **ReLU** (rectified linear unit) passes positive inputs unchanged and zeroes the rest. It
#   is cheap, and its slope is exactly 1 wherever it is active. Its derivative at 0 is
#   undefined; frameworks use 0. It was the activation of the original Transformer's FFN ([Vaswani et al. [2017]](../book/references.bib#vaswani2017),
#   Section 3.3, Eq. 2).
# - **Sigmoid** squashes any number into $(0, 1)$, which makes it the natural output for a
#   probability (logistic regression below is a linear layer followed by a sigmoid). It was
#   the classic hidden activation before ReLU.
# - **tanh** is a sigmoid rescaled to $(-1, 1)$ and centred at 0: $\tanh(x) = 2\sigma(2x) - 1$.
# - **GELU** (Gaussian error linear unit) weights $x$ by the probability $\Phi(x)$ that a
#   standard normal variable is below it: a smooth ReLU that dips slightly below zero for
#   negative inputs. It was proposed by [Hendrycks and Gimpel [2016]](../book/references.bib#hendrycks2016) (Section 2); GPT
#   ([Radford et al. [2018]](../book/references.bib#radford2018), Section 4.1) and BERT ([Devlin et al. [2019]](../book/references.bib#devlin2019), Appendix A.2) use it
#   in their FFNs.
#
# In code, each is a line or two. One needs care: the textbook formula for tanh computes
# $e^{x}$, which overflows float32 for $x$ above about 88.7 (the logarithm of float32's
# largest value, $3.4 \times 10^{38}$) and turns the ratio into $\infty / \infty$ =
# NaN. Dividing top and bottom by $e^{|x|}$ leaves only $e^{-2|x|} \le 1$, which never
# overflows. (The same idea, keeping every exponent at or below zero, is what makes softmax
# safe in the attention chapters.)

# %%
def relu(x):
    return x.clamp_min(0)

def relu_derivative(x):
    return (x > 0).to(x.dtype)

def sigmoid(x):
    return 1 / (1 + torch.exp(-x))  # exp(-x) = inf for x < -88.7 gives exactly 0, not NaN

def sigmoid_derivative(x):
    return sigmoid(x) * (1 - sigmoid(x))

def tanh(x):
    e = torch.exp(-2 * x.abs())  # in (0, 1]: cannot overflow
    return torch.sign(x) * (1 - e) / (1 + e)

def tanh_derivative(x):
    return 1 - tanh(x) ** 2

def normal_cdf(x):
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))

def gelu(x):
    return x * normal_cdf(x)

def gelu_derivative(x):
    return normal_cdf(x) + x * torch.exp(-x**2 / 2) / math.sqrt(2 * math.pi)


# %%
def tanh_naive(x):
    return (torch.exp(x) - torch.exp(-x)) / (torch.exp(x) + torch.exp(-x))

extreme = torch.tensor([-100.0, -1.0, 0.0, 1.0, 100.0])
print("tanh_naive:", tanh_naive(extreme).tolist())
print("tanh:      ", tanh(extreme).tolist())
assert torch.exp(torch.tensor(88.7)).isfinite() and torch.exp(torch.tensor(88.8)).isinf()

# %% [markdown]
# Now the checks. Each function must match PyTorch's own (`F.relu`, `torch.sigmoid`,
# `torch.tanh`, and `F.gelu`, whose default is this exact erf form rather than the tanh
# approximation), and each derivative must match what autograd computes by differentiating
# PyTorch's function. Finally the helper versions in `helpers.mlp.ACTIVATIONS`, a dict of
# `name -> (function, derivative)`, must agree with ours. The test grid runs from $-8$ to $8$
# and includes the extreme values above.

# %%
ours = {"relu": (relu, relu_derivative), "sigmoid": (sigmoid, sigmoid_derivative),
        "tanh": (tanh, tanh_derivative), "gelu": (gelu, gelu_derivative)}
pytorch = {"relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "gelu": F.gelu}
x = torch.cat([torch.linspace(-8, 8, 1601), extreme])

for name, (function, derivative) in ours.items():
    x_autograd = x.clone().requires_grad_()
    slope, = torch.autograd.grad(pytorch[name](x_autograd).sum(), x_autograd)
    torch.testing.assert_close(function(x), pytorch[name](x))   # forward vs PyTorch
    torch.testing.assert_close(derivative(x), slope)            # derivative vs autograd
    helper_function, helper_derivative = ACTIVATIONS[name]
    torch.testing.assert_close(helper_function(x), function(x))
    torch.testing.assert_close(helper_derivative(x), derivative(x))
    print(f"{name:8s} matches PyTorch, autograd and helpers.mlp on {x.numel()} inputs")

# %% mystnb={"image": {"alt": "Two line plots against x from -5 to 5. Left, the activation functions: ReLU is a hinge at 0, GELU a smoothed hinge with a small dip below zero near x = -0.75, sigmoid an S from 0 to 1 and tanh an S from -1 to 1. Right, their derivatives: ReLU's is a step from 0 to 1; GELU's is slightly negative left of x = -0.75, then rises to a peak of about 1.13 near x = 1.41 and settles at 1; sigmoid's is a low bump of height 0.25 and tanh's a bump of height 1, both close to zero beyond |x| = 4."}}
grid = torch.linspace(-5, 5, 401)
fig, (ax_f, ax_d) = plt.subplots(1, 2, figsize=(9, 3.4))
for name, (function, derivative) in ours.items():
    ax_f.plot(grid, function(grid), lw=2, label=name)
    ax_d.plot(grid, derivative(grid), lw=2, label=name)
ax_f.set(xlabel="$x$", ylabel=r"$\phi(x)$", title="activation functions", ylim=(-1.5, 3))
ax_d.set(xlabel="$x$", ylabel=r"$\phi'(x)$", title="their derivatives", ylim=(-0.2, 1.25))
for ax in (ax_f, ax_d):
    ax.axhline(0, color="0.7", lw=0.8)
    ax.legend(fontsize=9)
fig.tight_layout()

# %% [markdown]
# *Left: ReLU is a hinge at 0, GELU a smoothed hinge with a small dip below zero near
# $x = -0.75$, sigmoid an S from 0 to 1, tanh an S from $-1$ to 1. Right: the derivatives. ReLU's
# is a step from 0 to 1; GELU's is slightly negative left of $x \approx -0.75$ (where GELU itself
# falls), then rises smoothly to a peak of about 1.13 (at $x \approx 1.41$) and settles at 1;
# sigmoid's is a bump of height only 0.25; tanh's a bump of height 1. Beyond $|x| = 4$ both
# S-shaped functions have less than a tenth of their peak slope left (asserted below; the
# table prints the slopes at $|x| = 5$).*
#
# That last observation is called [saturation](../book/glossary.md#term-saturation): far from zero, sigmoid and tanh are
# flat, so a small change of input makes no change of output, and the gradient through the
# unit is close to zero. The table puts numbers on it.

# %%
grid = torch.arange(-8000, 8001) / 1000   # -8 to 8 in steps of 0.001, with 0 exactly
at = torch.tensor([-5.0, 5.0])
for name, (function, derivative) in ours.items():
    slopes = derivative(grid)
    best = int(slopes.argmax())
    print(f"{name:8s} largest slope {slopes[best]:.4f} at x = {grid[best]:+.2f}   "
          f"slope at x = -5: {derivative(at)[0]:.5f}, at x = +5: {derivative(at)[1]:.5f}")
four = torch.tensor([-4.0, 4.0])
assert (sigmoid_derivative(four) < 0.25 / 10).all() and (tanh_derivative(four) < 1 / 10).all()
assert abs(gelu_derivative(grid).max() - 1.1289) < 1e-4 and (grid[gelu_derivative(grid).argmax()] - 1.41).abs() < 0.01, f"got {abs(gelu_derivative(grid).max() - 1.1289)=}, {(grid[gelu_derivative(grid).argmax()] - 1.41).abs()=}"


# %% [markdown]
# Backpropagation multiplies one such slope per layer (together with the weights). With
# sigmoid the slope is at most $0.25$, so after $n_\text{layers}$ layers the gradient reaching the first
# layer carries a factor of at most $0.25^{n_\text{layers}}$: below $10^{-6}$ for $n_\text{layers} = 10$, before the weights
# have had any say. This is the [vanishing gradient](../book/glossary.md#term-vanishing-gradient) problem: the layers nearest the
# input barely learn (with plain gradient descent; Adam is discussed below).
#
# The weights and the layers' inputs enter too. Write hidden layer $\ell$ of a deep network as
# $\mathbf z_{\ell} = \mathbf h_{\ell-1} \mathbf W_{\ell} + \mathbf b_{\ell}$ and
# $\mathbf h_{\ell} = \phi(\mathbf z_{\ell})$, with $\mathbf h_0 = \mathbf X$. The chain rule gives the
# backward error $\boldsymbol\delta_{\ell} = \partial \mathcal L / \partial \mathbf z_{\ell}$ and the
# weight gradient:
#
# $$
# \boldsymbol\delta_{\ell} = \left(\boldsymbol\delta_{\ell+1} \mathbf W_{\ell+1}^\top\right) \odot \phi'(\mathbf z_{\ell}),
# \qquad
# \nabla \mathbf W_{\ell} = \mathbf h_{\ell-1}^\top \boldsymbol\delta_{\ell} .
# $$
#
# (The second code cell below checks both formulas against autograd.) So
# $\boldsymbol\delta$ is multiplied once per layer by the weights and the slopes, but the
# weight gradient has a second factor, the layer's input $\mathbf h_{\ell-1}$. How large the
# weights should be follows from a variance count. For
# $z = \sum_{i=1}^{\text{fan-in}} h_i w_i$ with independent zero-mean weights of standard deviation $\sigma_w$, $\mathbb{E}[z^2] = \text{fan-in} \cdot \sigma_w^2 \cdot \mathbb{E}[h^2]$. Draw $\sigma_w = \text{gain}/\sqrt{\text{fan-in}}$ (what `nn.init.kaiming_normal_` does) and the next layer's
# $\mathbb{E}[z^2]$ is $\text{gain}^2\, \mathbb{E}[\phi(z)^2]$. A ReLU keeps exactly half of a
# symmetric input's second moment, $\mathbb{E}[\mathrm{relu}(z)^2] = \mathbb{E}[z^2]/2$, so
# gain $\sqrt 2$ keeps the signal the same size from layer to layer: the *size-keeping* scale
# ([He et al. [2015]](../book/references.bib#he2015), Section 2.2). PyTorch's
# `nn.init.calculate_gain` gives $\sqrt 2$ for ReLU, $5/3$ for tanh (approximately size-keeping)
# and 1 for sigmoid, and has no entry for GELU, for which we borrow ReLU's $\sqrt 2$.
# `nn.Linear`'s default draws the weights uniformly from $\pm 1/\sqrt{\text{fan-in}}$, a standard
# deviation of $1/\sqrt{3\,\text{fan-in}}$, which is $\sqrt 6 \approx 2.4$ times below ReLU's
# size-keeping scale (and $5/\sqrt 3 \approx 2.9$ times below tanh's); its biases are uniform
# on the same interval.
#
# Measure it in a 10-hidden-layer network of width 16 on 128 random inputs, with the mean
# squared output as the loss, changing **one factor at a time**: the weights (PyTorch's default,
# or standard deviation $\text{gain}/\sqrt{\text{fan-in}}$ at PyTorch's gain) and the biases
# (PyTorch's default, or zero). Each of the four settings is drawn with 5 seeds; the inputs stay
# the same. Besides $|\boldsymbol\delta_1| / |\boldsymbol\delta_{10}|$ and
# $|\nabla \mathbf W_1| / |\nabla \mathbf W_{10}|$ (Frobenius norms), the table gives the share of
# the energy of $\mathbf h_9$, the input of $\mathbf W_{10}$, that varies from example to
# example: 1 when the examples' activations differ about a common mean of zero, 0 when every
# example produces the same $\mathbf h_9$.

# %%
def pytorch_gain(name):
    return nn.init.calculate_gain("relu" if name == "gelu" else name)

def deep_network(name, weights, biases, seed, gain=None):
    # 10 hidden layers of width 16. weights: "default" or "gain" (std gain / sqrt(fan-in));
    # biases: "default" (PyTorch's uniform ones) or "zero"
    set_seed(seed)
    deep = MLP(16, [16] * 10, 1, activation=name)
    with torch.no_grad():
        for layer in deep.linears:
            if weights == "gain":
                scale = pytorch_gain(name) if gain is None else gain
                layer.weight.normal_(0, scale / math.sqrt(layer.in_features))
            if biases == "zero":
                layer.bias.zero_()
    return deep

def layer_gradients(deep, inputs):
    # Backpropagate the mean squared output; per hidden layer l = 1..10 return |delta_l|,
    # |grad W_l|, the layer's input h_{l-1} (N, 16) and its pre-activation z_l (N, 16).
    layer_inputs, pre_activations = [], []
    def keep(layer, args, z):
        z.retain_grad()
        layer_inputs.append(args[0]); pre_activations.append(z)
    hooks = [layer.register_forward_hook(keep) for layer in deep.linears[:10]]
    deep(inputs).pow(2).mean().backward()
    for hook in hooks:
        hook.remove()
    deltas = [z.grad.norm().item() for z in pre_activations]
    weight_grads = [layer.weight.grad.norm().item() for layer in deep.linears[:10]]
    return deltas, weight_grads, layer_inputs, pre_activations

def input_share(h):
    # the share of h's energy that varies with the example: sum of variances / mean square
    return (h.var(dim=0, unbiased=False).sum() / h.pow(2).mean(dim=0).sum()).item()

set_seed(0)
gradient_inputs = torch.randn(128, 16)   # (N, D), the same for every network
settings = [("default", "default"), ("default", "zero"), ("gain", "zero"), ("gain", "default")]
seeds = range(5)
runs = {}   # (activation, weights, biases) -> per seed: (deltas, weight_grads, share of h_9)
for name in ours:
    for weights, biases in settings:
        runs[name, weights, biases] = []
        for seed in seeds:
            deltas, weight_grads, layer_inputs, _ = layer_gradients(
                deep_network(name, weights, biases, seed), gradient_inputs)
            runs[name, weights, biases].append((deltas, weight_grads, input_share(layer_inputs[9])))

# %%
# The two formulas above, checked against autograd on one network (ReLU, default init, seed 0)
deep = deep_network("relu", "default", "default", seed=0)
_, _, layer_inputs, pre_activations = layer_gradients(deep, gradient_inputs)
for index in range(9):                       # hidden layers 1..9, from the layer above each
    W_above = deep.linears[index + 1].weight.T                   # (16, 16), in the x W layout
    delta_above = pre_activations[index + 1].grad                # (N, 16)
    delta = (delta_above @ W_above.T) * relu_derivative(pre_activations[index].detach())
    torch.testing.assert_close(delta, pre_activations[index].grad)
    grad_W = layer_inputs[index].detach().T @ pre_activations[index].grad   # (16, 16)
    torch.testing.assert_close(grad_W, deep.linears[index].weight.grad.T)
print("delta_l = (delta_(l+1) W_(l+1)^T) * phi'(z_l) and grad W_l = h_(l-1)^T delta_l: "
      "both match autograd")


# %%
def medians(name, weights, biases):
    # median over the seeds of |delta_1|/|delta_10|, |grad W_1|/|grad W_10|, share of h_9
    per_seed = [(d[0] / d[9], g[0] / g[9], share) for d, g, share in runs[name, weights, biases]]
    return [statistics.median(column) for column in zip(*per_seed)]

def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))} to {fmt(max(values))})"

print("median over 5 seeds (smallest to largest)")
print(f"{'':8s} {'weights':8s} {'biases':8s} {'|delta_1|/|delta_10|':>24s} "
      f"{'|grad W_1|/|grad W_10|':>24s} {'share of h_9':>14s}")
ratio_format, share_format = (lambda v: f"{v:.0e}"), (lambda v: f"{v:.2f}")
for name in ours:
    for weights, biases in settings:
        per_seed = runs[name, weights, biases]
        delta_ratios = [d[0] / d[9] for d, _, _ in per_seed]
        grad_ratios = [g[0] / g[9] for _, g, _ in per_seed]
        print(f"{name:8s} {weights:8s} {biases:8s} {spread(delta_ratios, ratio_format):>24s} "
              f"{spread(grad_ratios, ratio_format):>24s} "
              f"{statistics.median(s for _, _, s in per_seed):14.2f}")

# %% mystnb={"image": {"alt": "Eight line plots on log scales in two rows of four, one column per activation (ReLU, sigmoid, tanh, GELU), layer 1 to 10 across, one coloured line per initialisation (default or gain weights, default or zero biases), each size divided by its value at layer 10. Top row, the backward error: for ReLU, tanh and GELU the two default-weight lines (blue, orange) fall steeply towards layer 1 while the two gain lines (green, red) stay flat. Bottom row, the weight gradient: only blue (default weights and biases) falls steeply, while orange stays flat with green and red; sigmoid falls steeply in every setting in both rows."}}
fig, axes = plt.subplots(2, 4, figsize=(9, 5.6), sharex=True, sharey="row")
layers = range(1, 11)
for column, name in enumerate(ours):
    for color, (weights, biases) in enumerate(settings):
        deltas, weight_grads, _ = runs[name, weights, biases][0]   # seed 0
        label = f"{weights} $W$, {biases} $b$"  # weights W, biases b
        axes[0, column].semilogy(layers, [d / deltas[9] for d in deltas], "o-", ms=3,
                                 color=f"C{color}", label=label)
        axes[1, column].semilogy(layers, [g / weight_grads[9] for g in weight_grads], "o-",
                                 ms=3, color=f"C{color}", label=label)
    axes[0, column].set_title(name)
    axes[1, column].set_xlabel(r"layer $\ell$")
axes[0, 0].set_ylabel(r"$|\delta_\ell|\,/\,|\delta_{10}|$")
axes[1, 0].set_ylabel(r"$|\nabla W_\ell|\,/\,|\nabla W_{10}|$")
axes[0, 2].legend(fontsize=9, loc="lower center")  # in the empty lower half of a panel, not
# below them all: the columns can part on a phone
fig.tight_layout()

# %% tags=["remove-cell"]
# Checks for the prose above (medians over the 5 seeds).
for name in ["relu", "tanh", "gelu"]:
    for biases in ["default", "zero"]:
        delta_default, grad_default, _ = medians(name, "default", biases)
        delta_gain, grad_gain, _ = medians(name, "gain", biases)
        assert 1e-5 < delta_default < 1e-2, f"{name}, {biases} biases: delta ratio {delta_default:.1e}"
        assert 0.3 < delta_gain < 3, f"{name}, {biases} biases, gain: delta ratio {delta_gain:.2f}"
        assert 0.15 < grad_gain < 0.7, f"{name}, {biases} biases, gain: grad ratio {grad_gain:.2f}"
    _, grad_bias, share_bias = medians(name, "default", "default")
    _, grad_zero, share_zero = medians(name, "default", "zero")
    assert grad_bias < 3e-3 and share_bias < 0.005, f"{name}: {grad_bias:.1e}, {share_bias:.4f}"
    assert 0.15 < grad_zero < 0.4, f"{name}, default weights, zero biases: {grad_zero:.2f}"
    for biases, low, high in [("zero", 1e-5, 2e-2), ("default", 0.05, 0.5)]:   # |h_9| / |h_1|
        shrink = statistics.median(
            (inputs_[9].norm() / inputs_[1].norm()).item() for inputs_ in
            (layer_gradients(deep_network(name, "default", biases, seed), gradient_inputs)[2]
             for seed in seeds))
        assert low < shrink < high, f"{name}, default weights, {biases} biases: |h_9|/|h_1| {shrink:.1e}"
sigmoid_ratios = {s: medians("sigmoid", *s)[1] for s in settings}
assert all(1e-9 < r < 1e-6 for r in sigmoid_ratios.values()), sigmoid_ratios
for weights in ["default", "gain"]:
    pair = sigmoid_ratios[weights, "default"], sigmoid_ratios[weights, "zero"]
    assert max(pair) < 2 * min(pair), f"sigmoid, {weights} weights: {pair}"
weights = torch.cat([layer.weight.flatten()
                     for layer in deep_network("relu", "default", "default", 0).linears[:-1]])
assert abs(weights.std() / (1 / math.sqrt(3 * 16)) - 1) < 0.05, f"std {weights.std():.4f}"
assert 0.25 ** 10 < 1e-6  # the bound quoted above, for L = 10


# %% tags=["remove-cell"]
# Checks for the prose above: the same table at width 64 (10 layers) and at 20 layers (width 16).
def other_size(name, weights, biases, seed, width, depth):
    set_seed(seed)
    net = MLP(16, [width] * depth, 1, activation=name)
    with torch.no_grad():
        for layer in net.linears:
            if weights == "gain":
                layer.weight.normal_(0, pytorch_gain(name) / math.sqrt(layer.in_features))
            if biases == "zero":
                layer.bias.zero_()
    inputs, pre = [], []
    def keep(layer, args, z):
        z.retain_grad(); inputs.append(args[0]); pre.append(z)
    hooks = [layer.register_forward_hook(keep) for layer in net.linears[:depth]]
    net(gradient_inputs).pow(2).mean().backward()
    for hook in hooks:
        hook.remove()
    grads = [layer.weight.grad.norm().item() for layer in net.linears[:depth]]
    deltas = [z.grad.norm().item() for z in pre]
    return deltas[0] / deltas[-1], grads[0] / max(grads[-1], 1e-45), input_share(inputs[-1])

for width, depth in [(64, 10), (16, 20)]:
    for name in ours:
        med = {s: [statistics.median(c) for c in zip(*(other_size(name, *s, seed, width, depth)
                                                        for seed in seeds))] for s in settings}
        delta_by_bias = med["default", "default"][0], med["default", "zero"][0]
        if name != "gelu" or depth == 10:
            assert max(delta_by_bias) < 3 * min(delta_by_bias), (width, depth, name, delta_by_bias)
        assert med["default", "default"][2] < 0.005 and med["default", "default"][1] < 3e-3, (width, depth, name, med)
        if name in ("relu", "tanh"):
            assert all(0.1 < med["gain", b][0] < 10 for b in ("zero", "default")), (width, depth, name, med)
    if depth == 20:
        relu_ratio = statistics.median(other_size("relu", "default", "zero", s, 16, 20)[0] for s in seeds)
        gelu_zero = [other_size("gelu", "default", "zero", s, 16, 20) for s in seeds]
        assert relu_ratio < 1e-6 and all(d == 0 for d, _, _ in gelu_zero), (relu_ratio, gelu_zero)
        assert any(g == 0 for _, g, _ in gelu_zero), gelu_zero
    else:
        relu_gain = [statistics.median(other_size("relu", "gain", b, s, 64, 10)[1] for s in seeds)
                     for b in ("zero", "default")]
        assert all(0.07 < r < 0.14 for r in relu_gain), relu_gain

# %% [markdown]
# *Per-layer sizes in the seed-0 network, each divided by its value at layer 10, on a log
# scale: the backward error $|\boldsymbol\delta_{\ell}|$ (top) and the weight gradient
# $|\nabla \mathbf W_{\ell}|$ (bottom), one panel per activation, one colour per initialisation.
# In the top row the two settings with default weights (blue, orange) fall steeply towards
# layer 1 for ReLU, tanh and GELU and the two at PyTorch's gain (green, red) stay flat. In the
# bottom row only blue falls steeply: with zero biases (orange) the weight gradient keeps its
# size although $\boldsymbol\delta$ has vanished. Sigmoid falls steeply in every setting.*
#
# Read the table one factor at a time.
#
# - **The backward error depends on the weights, not on the biases.** With the default weights,
#   $|\boldsymbol\delta_1| / |\boldsymbol\delta_{10}|$ lies between $10^{-5}$ and $10^{-2}$
#   for ReLU, tanh and GELU with either bias (medians over the seeds); at PyTorch's gain it stays of order one. This is the
#   shrinkage applied once per layer by weights that are too small.
# - **The weight gradient depends on the layer's input as well.** With the default weights and
#   zero biases, the activations shrink layer after layer just as $\boldsymbol\delta$ does
#   ($|\mathbf h_9| / |\mathbf h_1|$ is between $10^{-5}$ and $10^{-2}$, against 0.1 to 0.4
#   with PyTorch's biases, medians over the seeds), so
#   $\nabla \mathbf W_{10} = \mathbf h_9^\top \boldsymbol\delta_{10}$ is small too, and the ratio
#   $|\nabla \mathbf W_1| / |\nabla \mathbf W_{10}|$ is about 0.2 to 0.3 (medians; single seeds
#   from 0.08 to 0.7): no vanishing on this measure, although $\boldsymbol\delta$ has vanished. PyTorch's default biases do not
#   shrink, so in the deep layers they take over: the share of $\mathbf h_9$ that varies with
#   the example is 0.00: every example produces practically the same $\mathbf h_9$. The deep layers
#   have forgotten the input, and the weight-gradient ratio collapses with $\boldsymbol\delta$.
#   So at the default initialisation this network has two failures, both caused by the small
#   weights: the error signal vanishes on its way back, and the input signal vanishes on its
#   way forward, its place taken by the biases. Which of the two a given measure shows depends
#   on the biases.
# - **At PyTorch's gains** both signals keep their size with either bias, and the first layer
#   keeps about 0.2 to 0.6 of the tenth layer's weight gradient (medians over the seeds; single
#   seeds range more widely, since a width of 16 gives noisy layers).
# - **Sigmoid** loses six to nine orders of magnitude in every setting. Its slope, at most 1/4,
#   multiplies in at every layer whatever the weights, and the biases change the ratio by less
#   than a factor of two. Its $\mathbf h_9$ hardly varies between examples in any setting
#   (share 0.00): since $|\sigma(a) - \sigma(b)| \le |a - b|/4$, each layer at most quarters the
#   differences between examples before the weights act, on the way forward too.
#
# All of this is for this network: ten layers of width 16, random inputs, these initialisations.
# A hidden cell repeats the table at width 64 (10 layers) and at 20 layers (width 16), five
# seeds each; $n_\text{layers}$ is the number of hidden layers. The pattern holds in both: the biases leave
# $\boldsymbol\delta$ alone (except for GELU at 20 layers, below), default biases drive the
# share of $\mathbf h_{n_\text{layers}-1}$ that varies with the example to 0.00 and collapse the
# weight-gradient ratio, and at PyTorch's gains ReLU's and tanh's
# $|\boldsymbol\delta_1| / |\boldsymbol\delta_{n_\text{layers}}|$ stays between 0.1 and 10. The sizes do not
# hold. At width 64 ReLU's first layer keeps only about 0.1 of the last layer's weight gradient
# at PyTorch's gain, below the 0.2 to 0.6 above. At 20 layers the default weights lose far more
# orders of magnitude than at 10 (ReLU's $\boldsymbol\delta$ ratio falls below $10^{-6}$), and
# with GELU and zero biases $\boldsymbol\delta_1$ underflows float32 to exactly zero, so there
# even the zero-bias weight gradient of the first layer is 0 in some seeds.

# %% [markdown]
# Can larger weights rescue sigmoid? Gain 4 cancels the bound of 1/4 on paper. The cell below
# draws the zero-bias network at gains 1, 2, 4 and 6 (5 seeds each) and measures, besides the
# gradient ratio, the mean slope $\sigma'(z)$ over the units of layers 1 to 9 and the share of
# units that are saturated, with less than a tenth of the peak slope ($\sigma' < 0.025$).

# %%
sigmoid_gains = {}
print("sigmoid, zero biases; medians over 5 seeds")
print(f"{'gain':>4} {'|grad W_1|/|grad W_10|':>24} {'mean slope':>11} {'saturated':>10}")
for gain in (1, 2, 4, 6):
    per_seed = []
    for seed in seeds:
        _, weight_grads, _, pre_activations = layer_gradients(
            deep_network("sigmoid", "gain", "zero", seed, gain=gain), gradient_inputs)
        slopes = torch.cat([sigmoid_derivative(z.detach()) for z in pre_activations[:9]])
        per_seed.append((weight_grads[0] / weight_grads[9], slopes.mean().item(),
                         (slopes < 0.025).float().mean().item()))
    sigmoid_gains[gain] = [statistics.median(column) for column in zip(*per_seed)]
    ratio, slope, saturated = sigmoid_gains[gain]
    print(f"{gain:4d} {ratio:24.0e} {slope:11.2f} {saturated:10.2f}")

# %% tags=["remove-cell"]
# Checks for the prose below.
ratio_by_gain = [sigmoid_gains[g][0] for g in (1, 2, 4, 6)]
slope_by_gain = [sigmoid_gains[g][1] for g in (1, 2, 4, 6)]
assert all(a < b for a, b in zip(ratio_by_gain, ratio_by_gain[1:])), ratio_by_gain
assert all(a > b for a, b in zip(slope_by_gain, slope_by_gain[1:])), slope_by_gain
assert 1e-3 < sigmoid_gains[4][0] < 1e-2, f"gain 4: {sigmoid_gains[4][0]:.1e}"
assert 1e-2 < sigmoid_gains[6][0] < 1e-1, f"gain 6: {sigmoid_gains[6][0]:.1e}"
assert sigmoid_gains[1][2] < 0.01 and 0.1 < sigmoid_gains[4][2] < sigmoid_gains[6][2] < 0.6, \
    f"saturated shares {[sigmoid_gains[g][2] for g in (1, 4, 6)]}"
assert 0.2 < slope_by_gain[0] < 0.25 and 0.08 < slope_by_gain[2] < 0.16, slope_by_gain
assert all(0.4 < g * sigmoid_gains[g][1] < 0.65 for g in (4, 6)), \
    f"gain x mean slope {[g * sigmoid_gains[g][1] for g in (4, 6)]}"

# %% tags=["remove-cell"]
# Check for the prose below: gains 4 and 6 redrawn with seeds 5 to 9.
other_seeds = {}
for gain in (4, 6):
    ratios = []
    for seed in range(5, 10):
        _, weight_grads, _, _ = layer_gradients(
            deep_network("sigmoid", "gain", "zero", seed, gain=gain), gradient_inputs)
        ratios.append(weight_grads[0] / weight_grads[9])
    other_seeds[gain] = statistics.median(ratios)
assert 3e-4 < other_seeds[4] < 1.5e-3 and other_seeds[4] < other_seeds[6] < 0.05, other_seeds

# %% [markdown]
# Larger weights help sigmoid but do not cure it. The gradient ratio rises with the gain, yet
# gain 4 still loses two to three orders of magnitude and gain 6 about two, because larger
# weights also push more units out onto sigmoid's flat tails: the mean slope falls from 0.23
# at gain 1 to 0.13 at gain 4 and 0.09 at gain 6, and the share of saturated units rises from
# none to about a sixth and a third. The gain times the mean slope, roughly what each layer
# multiplies the backward error by, is still only about 0.5 at gains 4 and 6. The trend, not
# the exact orders of magnitude, is what to take away: the medians move with the five seeds
# drawn (a hidden cell redraws gains 4 and 6 with seeds 5 to 9 and finds a loss of about three
# orders at gain 4), but in both sets of seeds the median ratio rises with the gain and stays far below 1.
#
# GELU needs the same second-moment count as ReLU. For a Gaussian $z$, the ratio
# $\mathbb{E}[\mathrm{GELU}(z)^2] / \mathbb{E}[z^2]$ is below ReLU's $1/2$ at every scale: near 0
# GELU behaves like $x/2$, where the ratio tends to $1/4$, and for large inputs like a ReLU,
# where it tends to $1/2$. So at ReLU's gain $\sqrt 2$ the per-layer factor
# $2\,\mathbb{E}[\mathrm{GELU}(z)^2] / \mathbb{E}[z^2]$ is about 0.85 at unit variance and falls
# towards 0.5 as the signal shrinks: at this gain GELU's signal shrinks from layer to layer, and
# the smaller it gets, the faster. The cell computes the factor by numerical integration.

# %%
grid_z = torch.linspace(-12, 12, 24001, dtype=torch.float64)        # quadrature grid
density = torch.exp(-grid_z**2 / 2) / math.sqrt(2 * math.pi)       # standard normal

def layer_factor(function, variance, gain=math.sqrt(2)):
    # gain^2 E[function(z)^2] / E[z^2] for z ~ N(0, variance), by the trapezoid rule
    values = function(math.sqrt(variance) * grid_z) ** 2 * density
    return gain**2 * torch.trapezoid(values, grid_z).item() / variance

variances = [0.01, 0.1, 1.0, 10.0, 100.0]
gelu_factors = [layer_factor(F.gelu, v) for v in variances]
relu_factors = [layer_factor(F.relu, v) for v in variances]
print(f"{'E[z^2] =':18s}" + "".join(f"{v:>8g}" for v in variances))
for name, factors in [("ReLU, gain sqrt 2", relu_factors), ("GELU, gain sqrt 2", gelu_factors)]:
    print(f"{name:18s}" + "".join(f"{f:8.3f}" for f in factors))
assert all(abs(f - 1) < 1e-3 for f in relu_factors), relu_factors
assert all(a < b < 1 for a, b in zip(gelu_factors, gelu_factors[1:])), gelu_factors
assert abs(gelu_factors[2] - 0.85) < 0.005 and abs(gelu_factors[0] - 0.5) < 0.02, gelu_factors

# %% [markdown]
# What a small gradient ratio costs depends on the optimiser. With plain gradient descent
# (SGD) a first layer whose gradient is $10^{-4}$ of the tenth's takes steps $10^{-4}$ as
# large, and learns that much more slowly. Every training run in this chapter uses Adam, which
# divides each parameter's step by a running estimate of that parameter's gradient size
# ([Kingma and Ba [2015]](../book/references.bib#kingma2015), Section 2.1), so a scale shared
# by a whole layer largely cancels, as long as the gradients stay well above Adam's small
# constant `eps` ($10^{-8}$ by default). One step of each from the default-initialised ReLU network (seed 0),
# with the same learning rate:

# %%
for optimiser_name, optimiser_class in [("SGD", torch.optim.SGD), ("Adam", torch.optim.Adam)]:
    deep = deep_network("relu", "default", "default", seed=0)
    before = [layer.weight.detach().clone() for layer in deep.linears]
    optimiser = optimiser_class(deep.parameters(), lr=1e-3)
    deep(gradient_inputs).pow(2).mean().backward()
    optimiser.step()
    moves = [(layer.weight.detach() - old).norm().item() for layer, old in zip(deep.linears, before)]
    moved = (deep.linears[0].weight.detach() != before[0]).float().mean().item()
    print(f"{optimiser_name:4s}: |step of W_1| / |step of W_10| = {moves[0] / moves[9]:.2g}   "
          f"share of W_1's entries that changed at all: {moved:.2f}")
    if optimiser_name == "SGD":
        sgd_move_ratio, sgd_moved = moves[0] / moves[9], moved
        first_grad = deep.linears[0].weight.grad
        gradient_ratio = (first_grad.norm() / deep.linears[9].weight.grad.norm()).item()
    else:
        adam_move_ratio, adam_moved = moves[0] / moves[9], moved
print(f"gradient ratio |grad W_1| / |grad W_10| = {gradient_ratio:.2g}")
assert 3e-5 < sgd_move_ratio < gradient_ratio / 2 and 2e-4 < gradient_ratio < 1e-3, (sgd_move_ratio, gradient_ratio)
assert sgd_moved < 0.2 and adam_moved > 0.99 and 0.5 < adam_move_ratio < 5, (sgd_moved, adam_moved, adam_move_ratio)
assert first_grad.norm() > 100 * 1e-8, f"|grad W_1| {first_grad.norm():.1e} is near Adam's eps"


# %% [markdown]
# In exact arithmetic SGD's step ratio would equal the gradient ratio, printed last. In float32
# it comes out lower: at this learning rate most of $\mathbf W_1$'s SGD updates are smaller than
# the spacing between float32 numbers near its weights, so they round away and most of its
# entries do not change at all (the share is printed above). A gradient that small is not just
# slow with SGD; part of it is lost. Adam's steps change every entry.
#
# Adam rescales the steps; it does not change the forward pass, in which the deep layers of
# the default-initialised network still see the same $\mathbf h_9$ for every example. Careful
# initialisation, residual connections and normalisation (chapter 8) are the tools deep
# Transformers rely on to stay trainable. ReLU's slope of exactly 1 wherever it is active is one
# reason it became the default hidden activation, with GELU as its smooth successor.
# Sigmoid survives where its $(0, 1)$ range is the point: output probabilities, and gates.
#
# ## Universal approximation
#
# If the activation is what lets a network bend, how much bending can one hidden layer do?
# The answer is the [universal approximation theorem](../book/glossary.md#term-universal-approximation-theorem): [Cybenko [1989]](../book/references.bib#cybenko1989) (Theorem 2)
# proved it for continuous sigmoid-shaped activations, [Hornik [1991]](../book/references.bib#hornik1991) (Theorem 2) for
# any continuous, bounded and nonconstant one, and [Leshno et al. [1993]](../book/references.bib#leshno1993) (Theorem 1) for any
# continuous activation that is not a polynomial, ReLU included. For every continuous
# function $f$ on a closed, bounded set $\mathcal K \subset \mathbb{R}^D$ and every tolerance $\varepsilon > 0$ there is a width $h$ and
# parameters such that
#
# $$
# \sup_{\mathbf x \in \mathcal K} \left| f(\mathbf x) - \sum_{j=1}^{h} v_j\,
# \phi\!\left(\mathbf w_j^\top \mathbf x + b_j\right) - c \right| < \varepsilon .
# $$
#
# That is the theoretical support for the fully connected design: with a nonlinear activation
# and enough width, nothing continuous is out of reach. It is also all the theorem says. It
# does not say how wide "enough" is, whether gradient descent will find the weights, or how
# well the network will do on inputs it was not trained on.
#
# ### Building the approximation by hand
#
# For one input and ReLU units the theorem can be seen directly. The unit
# $\mathrm{relu}(x - k)$ is zero left of $k$ and a ramp of slope 1 right of it: it adds a *kink*
# at $k$. A sum $c + \sum_j v_j\,\mathrm{relu}(x - k_j)$ is therefore a broken line that can
# change slope at each $k_j$. Choose knots $k_0 < k_1 < \dots < k_h$ and let the line pass
# through $f(k_0), \dots, f(k_h)$: the first unit sets the first slope, and each later unit adds
# the *change* of slope at its knot. That is a one-hidden-layer MLP whose weights we can write
# down.

# %%
def relu_interpolant(fn, low, high, width):
    # A width-`width` ReLU MLP drawing the broken line through fn at width + 1 knots.
    knots = torch.linspace(low, high, width + 1)
    values = fn(knots)
    slopes = values.diff() / knots.diff()                       # (width,) slope per piece
    net = MLP(1, [width], 1, activation="relu")
    hidden, output = net.linears
    with torch.no_grad():
        hidden.weight.fill_(1.0)                                # unit j: relu(x - k_j)
        hidden.bias.copy_(-knots[:-1])
        output.weight.copy_(torch.cat([slopes[:1], slopes.diff()]).unsqueeze(0))
        output.bias.fill_(values[0])
    return net

dense_x = torch.linspace(-3, 3, 2001).unsqueeze(1)   # (2001, 1) for measuring the error
print("width   max |f - net|")
hand_errors = []
hand_widths = [1, 2, 4, 8, 16, 32, 64, 128, 256]
for width in hand_widths:
    hand_net = relu_interpolant(wiggly_target, -3.0, 3.0, width)
    with torch.no_grad():
        hand_errors.append((hand_net(dense_x) - wiggly_target(dense_x)).abs().max().item())
    print(f"{width:5d}   {hand_errors[-1]:.4f}")
assert all(later < earlier for earlier, later in zip(hand_errors[3:], hand_errors[4:]))
assert hand_errors[-1] < hand_errors[0] / 100, f"got {hand_errors[-1]=}, {hand_errors[0] / 100=}"
assert 3.5 < hand_errors[-2] / hand_errors[-1] < 4.5, f"got {hand_errors[-2] / hand_errors[-1]=}"  # halving the spacing: about 4x

# %% [markdown]
# With only a few knots the broken line can jump over a bump entirely, so at first the error
# does not even fall. Once the knots are dense enough to follow the bumps (from width 8 on),
# every doubling of the width cuts the worst error, and the ratio approaches four, as expected
# for a broken line whose pieces halve in length: the error of linear interpolation shrinks
# with the square of the spacing.
#
# Nothing here was trained: the argument is constructive, and it works for any continuous
# function, which is the one-dimensional case of the theorem.

# %% mystnb={"image": {"alt": "Two line plots of y against x from -3 to 3: the wiggly target curve in black and the hand-built ReLU network in orange, with its knots as orange dots. Left, 4 ReLU units: the broken line has 4 straight pieces and cuts straight through the bumps. Right, 16 ReLU units: the broken line follows the curve, changing direction at each knot and cutting the tips off the sharpest peaks and troughs."}}
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
for ax, width in zip(axes, [4, 16]):
    hand_net = relu_interpolant(wiggly_target, -3.0, 3.0, width)
    knots = torch.linspace(-3, 3, width + 1)
    ax.plot(dense_x, wiggly_target(dense_x), color="black", lw=1.5, label="target $f$")
    ax.plot(dense_x, hand_net(dense_x).detach(), color="C1", lw=2, label="hand-built MLP")
    ax.plot(knots, wiggly_target(knots), "o", color="C1", ms=4, label="knots")
    ax.set(xlabel="$x$", title=f"{width} ReLU units")
axes[0].set_ylabel("$y$")
axes[0].legend(fontsize=9)
fig.tight_layout()

# %% [markdown]
# *The target curve (black) and the hand-built network (orange). With 4 units the broken line
# has 4 pieces and cuts straight through the bumps; with 16 it follows the curve, cutting the
# tips off the sharpest peaks and troughs, and changes direction at each of its knots (dots).*
#
# ### Watching a trained network widen
#
# Training has to find weights like these by itself. Below, networks with one hidden layer of
# width 1, 2, 4, …, 64 are each trained on 200 points of the same curve, with 1,500 full-batch
# Adam steps. They use tanh units, each a smooth step (two make a bump); the theorem covers
# them as well. Move the slider to see the fit improve with width; the right panel shows each
# network's training loss, the selected width in colour.

# %%
widths = [1, 2, 4, 8, 16, 32, 64]
fits, loss_curves = {}, {}
for width in widths:
    set_seed(0)
    fits[width] = MLP(1, [width], 1, activation="tanh")
    loss_curves[width] = train_full_batch(fits[width], curve_x, curve_y, nn.MSELoss(),
                                          steps=1500, lr=0.03)
final_mse = {}
with torch.no_grad():
    for width in widths:
        final_mse[width] = F.mse_loss(fits[width](curve_x), curve_y).item()


# %%
def render_fit(width):
    fig, (ax_fit, ax_loss) = plt.subplots(1, 2, figsize=(8.5, 3.4))
    ax_fit.plot(dense_x, wiggly_target(dense_x), color="black", lw=1.5, label="target $f$")
    ax_fit.plot(curve_x[::4], curve_y[::4], "o", ms=2.5, color="0.6", label="training points")
    with torch.no_grad():
        ax_fit.plot(dense_x, fits[width](dense_x), color="C1", lw=2, label="trained MLP")
    ax_fit.set(xlabel="$x$", ylabel="$y$", ylim=(-2.5, 2.5),
               title=f"width {width}: MSE {final_mse[width]:.4f}")
    ax_fit.legend(loc="lower right", fontsize="small")
    for other in widths:
        ax_loss.semilogy(loss_curves[other], color="C1" if other == width else "0.85",
                         lw=2 if other == width else 1, zorder=3 if other == width else 1)
    ax_loss.set(xlabel="training step", ylabel="training MSE (log scale)",
                title="loss of every width")
    fig.tight_layout()
    return fig

slider_figure(render_fit, widths, description="hidden width", initial=4)

# %% [markdown]
# *Each frame shows the target, the training points and the trained network's curve for one
# width (left), and the training loss of every width on a log scale with the selected one
# highlighted (right). One tanh unit can draw only a single S-shaped curve, and the one Adam
# found here in 1,500 steps is stretched into an almost straight line (its error is even
# slightly above the best straight line's, which a tanh unit can approach with a tiny input
# weight); two units make two steps; by width 8
# every bump is matched. The spikes in the loss curves are Adam overshooting and recovering.*
#
# The table below prints what the slider shows: the final training error for each width.

# %%
print("width   final training MSE (one run, one significant digit)")
for width in widths:
    print(f"{width:5d}   {final_mse[width]:.1g}")
assert final_mse[widths[-1]] < final_mse[widths[0]] / 100, f"got {final_mse[widths[-1]]=}, {final_mse[widths[0]] / 100=}"
assert all(final_mse[a] > final_mse[b] for a, b in zip(widths, widths[1:])), f"got {final_mse}"
assert line_mse < final_mse[1] < line_mse + 0.01, f"width 1: {final_mse[1]:.4f}, line {line_mse:.4f}"

# %% [markdown]
# In this run the error falls by more than two orders of magnitude from width 1 to width 64,
# and it falls at every doubling (only one significant digit is printed: the later digits
# depend on the CPU's rounding). That is not guaranteed: training is not the hand construction, and
# a wider network is not promised a better optimum in a fixed number of steps (try other seeds
# or fewer steps). The trend is consistent with the theorem, but it is not the theorem at
# work: the theorem promises only that good weights exist at some width; that Adam finds them
# here, on the training points, is an observation about these runs.
#
# ## Nonlinear decision boundaries
#
# Classification makes the same point in pictures. A classifier's [decision boundary](../book/glossary.md#term-decision-boundary)
# is the set of inputs where it is undecided between the classes; for a binary classifier
# that outputs a logit $s(\mathbf x)$ and the probability $\sigma(s(\mathbf x))$, it is
# $\{\mathbf x : s(\mathbf x) = 0\}$. [logistic regression](../book/glossary.md#term-logistic-regression), the linear baseline, uses
# $s(\mathbf x) = \mathbf w^\top \mathbf x + b$, so its boundary is a straight line (a
# hyperplane in higher dimensions), wherever training puts it. In the helpers it is just
# `MLP(2, [], 1)`: no hidden layer. An MLP's logit is a nonlinear function of
# $\mathbf x$, so its boundary can curve.
#
# The data are two interleaving half moons, 200 points, labels 0 and 1
# (`helpers.tasks.classification.two_moons`). Both models are trained for 300 full-batch Adam steps with the
# binary cross-entropy loss, and we keep a copy of each at several points during training.

# %%
moons_x, moons_y = two_moons(num_points=200, noise=0.1, seed=0)   # (N, 2), (N,)
targets = moons_y.float().unsqueeze(1)                            # (N, 1) for BCE
snapshot_steps = [0, 10, 25, 50, 100, 150, 200, 300]
snapshots = {}
for name, hidden_sizes in [("logistic regression", []), ("MLP, 2 hidden layers of 16", [16, 16])]:
    set_seed(0)
    model = MLP(2, hidden_sizes, 1, activation="relu")
    snapshots[name] = {0: copy.deepcopy(model)}
    def keep(step, model, name=name):
        if step in snapshot_steps:
            snapshots[name][step] = copy.deepcopy(model)
    train_full_batch(model, moons_x, targets, nn.BCEWithLogitsLoss(), steps=300, lr=0.03,
                     callback=keep)


# %%
def render_boundaries(step):
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.6))
    for ax, (name, frames) in zip(axes, snapshots.items()):
        model = frames[step]
        plot_decision_boundary(model, moons_x, moons_y, ax=ax, colorbar=ax is axes[1],
                               title=f"{name}\naccuracy {accuracy(model, moons_x, moons_y):.3f}")
    fig.tight_layout()
    return fig

slider_figure(render_boundaries, snapshot_steps, description="training step",
              initial=snapshot_steps[-1], pixel_ratio=1)  # shaded planes: 1x keeps the page light

# %% [markdown]
# *Each frame shades the plane by the predicted probability of class 1 (dark: class 0, bright:
# class 1), draws the 0.5 boundary in white, and plots the points (white circles class 0,
# black triangles class 1), for logistic regression (left) and the MLP (right) after the
# selected number of training steps. The logistic regression boundary turns and slides but
# stays straight, cutting off the tips of both moons. The MLP's boundary bends into a zigzag
# that threads between the moons; it is made of straight pieces, because a ReLU
# network's logit is piecewise linear: each first-layer unit adds a straight crease, and each
# second-layer unit a crease that is itself a broken line.*
#
# The accuracy of every frame:

# %%
names = list(snapshots)
print(f"{'step':>4}   {names[0]:>20}   {names[1]:>26}")
final_accuracy = {}
for step in snapshot_steps:
    row = [accuracy(snapshots[name][step], moons_x, moons_y) for name in names]
    final_accuracy = dict(zip(names, row))
    print(f"{step:4d}   {row[0]:20.3f}   {row[1]:26.3f}")
assert final_accuracy[names[1]] >= 0.95 and final_accuracy[names[0]] <= 0.9, f"got {final_accuracy[names[1]]=}, {final_accuracy[names[0]]=}"

# %% [markdown]
# The MLP separates the two classes perfectly within 100 steps. Would logistic regression
# catch up with more training? Train it ten times longer, then compare with the best any
# straight line can do, found exactly. A line classifies by where each point falls along the
# line's normal, so only the *order* of the points along that direction matters, and the
# order changes only at a direction perpendicular to the segment between two points. Trying
# one direction inside each interval between those $n(n-1)/2$ critical directions (for $n$ points), and every
# threshold between neighbouring points, tries every way a line can split the data.

# %%
set_seed(0)
longer = MLP(2, [], 1)
train_full_batch(longer, moons_x, targets, nn.BCEWithLogitsLoss(), steps=3000, lr=0.03)
print(f"logistic regression after 3000 steps: accuracy {accuracy(longer, moons_x, moons_y):.3f}")


def best_line_accuracy(points, labels):
    """The best accuracy of any straight line on (N, 2) points with 0/1 labels (N,)."""
    first, second = torch.triu_indices(len(points), len(points), 1)
    gaps = (points[first] - points[second]).double()                    # (N(N-1)/2, 2)
    critical = torch.remainder(gaps[:, 1].atan2(gaps[:, 0]) + math.pi / 2, math.pi).unique()
    angles = torch.cat([(critical[:-1] + critical[1:]) / 2,              # one per interval,
                        (critical[-1:] + critical[:1] + math.pi) / 2])   # and the wrap-around
    normals = torch.stack([angles.cos(), angles.sin()], dim=1)           # (A, 2)
    ordered = labels[(normals @ points.double().T).argsort(dim=1)].double()   # (A, N)
    ones_below = F.pad(ordered.cumsum(dim=1), (1, 0))                    # (A, N + 1)
    below = torch.arange(len(points) + 1)                                # points below cut
    correct = (below - ones_below) + (ordered.sum(1, keepdim=True) - ones_below)
    accuracy_ = correct / len(points)                                    # class 1 above
    return torch.maximum(accuracy_, 1 - accuracy_).max().item()          # or below


best_line = best_line_accuracy(moons_x, moons_y)
print(f"best accuracy of any straight line:   {best_line:.3f}")
assert accuracy(longer, moons_x, moons_y) <= best_line <= 0.9, f"got {accuracy(longer, moons_x, moons_y)=}, {best_line=}"
assert best_line_accuracy(xor_x, xor_y) == 0.75, f"got {best_line_accuracy(xor_x, xor_y)=}"  # XOR: three of four points, as said above

# %% [markdown]
# About 0.9 is the ceiling for a line on this data, and logistic regression, which minimises
# the cross-entropy rather than the error count, stops a little below it. A hidden layer is
# what lifts the ceiling, and the MLP above has two. Is the second needed? The universal
# approximation theorem says no: applied to the logit, it promises that one hidden layer of
# enough width can approximate any continuous logit, and so draw any boundary that such a logit
# can. Train an MLP with a single hidden layer of 16 ReLU units
# in the same way:

# %%
set_seed(0)
one_layer = MLP(2, [16], 1, activation="relu")
train_full_batch(one_layer, moons_x, targets, nn.BCEWithLogitsLoss(), steps=300, lr=0.03)
one_layer_accuracy = accuracy(one_layer, moons_x, moons_y)
print(f"MLP, 1 hidden layer of 16, 300 steps: accuracy {one_layer_accuracy:.3f}")
assert one_layer_accuracy == 1.0, f"got {one_layer_accuracy=}"

# %% [markdown]
# One hidden layer is enough here too. Each of its ReLU units adds one straight crease to the
# logit, and the output layer adds the creases up into a bent boundary; a second hidden layer
# combines creases further, but on this data it is not what lifts the ceiling.
#
# Every accuracy so far is on the training points. To see whether the bent boundary is more
# than a memory of them, draw 200 fresh points from the same two moons
# (`two_moons(seed=1)`) and train each model again with 5 seeds; the table gives the median
# and the range over the seeds.

# %%
test_x, test_y = two_moons(num_points=200, noise=0.1, seed=1)     # held out: never trained on
held_out = {}
print(f"{'300 steps, 5 seeds':28s} {'training accuracy':>24s} {'held-out accuracy':>24s}")
for name, hidden_sizes in [("logistic regression", []), ("MLP, 2 hidden layers of 16", [16, 16]),
                           ("MLP, 1 hidden layer of 16", [16])]:
    train_accuracies, test_accuracies = [], []
    for seed in range(5):
        set_seed(seed)
        model = MLP(2, hidden_sizes, 1, activation="relu")
        train_full_batch(model, moons_x, targets, nn.BCEWithLogitsLoss(), steps=300, lr=0.03)
        train_accuracies.append(accuracy(model, moons_x, moons_y))
        test_accuracies.append(accuracy(model, test_x, test_y))
    held_out[name] = statistics.median(train_accuracies), statistics.median(test_accuracies)
    print(f"{name:28s} " + " ".join(
        f"{statistics.median(a):10.3f} ({min(a):.3f}-{max(a):.3f})"
        for a in (train_accuracies, test_accuracies)))

# %% tags=["remove-cell"]
# Checks for the prose below.
assert held_out["logistic regression"][1] < 0.92, held_out
for name in ["MLP, 2 hidden layers of 16", "MLP, 1 hidden layer of 16"]:
    assert held_out[name][0] == 1.0 and held_out[name][1] >= 0.98, held_out

# %% [markdown]
# On points it has never seen, each MLP still classifies about 99% correctly, against about
# 0.9 for logistic regression. On this data the bent boundary generalises; that is a property
# of this data set (little noise, two smooth classes, a small network), not a guarantee.

# %% [markdown]
# ## Feedforward networks and the MLP
#
# The words get used loosely, so it helps to fix them. A [feedforward network](../book/glossary.md#term-feedforward-network) is any
# network whose computation runs one way, from input to output, with no loops: no output is
# fed back in as an input, so every input is processed in a single pass. (A recurrent network
# is the counterexample: it feeds its state back in at every time step. A Transformer that
# generates text does feed each output token back in as the next input, but that loop runs
# outside the network: each forward pass is loop-free.) Feedforward is a
# family:
#
# - **feedforward networks** (FNN): any loop-free network;
#   - **multilayer perceptrons**: fully connected layers and activations, the most typical
#     and most basic member; this is usually what "a basic neural network" means in a
#     textbook;
#   - convolutional networks, and the Transformer itself: loop-free as well, but built from
#     other layers besides fully connected ones.
#
# The Transformer calls the MLP inside each block its "feed-forward network" (FFN;
# [Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section 3.3). That is
# not a new kind of network: it is an MLP with one hidden layer, used in one particular way.
#
# ## Preview: the position-wise FFN
#
# A Transformer works on sequences. Its activations are a tensor of shape $(B, T, D)$: $B$
# sequences, $T$ positions (tokens) each, $D$ features per token. The FFN is an MLP
# $\mathbb{R}^{D} \to \mathbb{R}^{D}$ (hidden width often $4D$: 2048 for $D = 512$ in
# [Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section 3.3) applied to *every position
# separately*, with the same weights at every position:
#
# $$
# \mathrm{FFN}(\mathbf x_t) = \phi\!\left(\mathbf x_t \mathbf W^{(1)} + \mathbf b^{(1)}\right)
# \mathbf W^{(2)} + \mathbf b^{(2)}, \qquad t = 1, \dots, T .
# $$
#
# Because `nn.Linear` acts on the last axis, our `MLP` already does this when given a
# $(B, T, D)$ tensor. Check it against a loop over the tokens, and against flattening the
# batch and positions into one axis of $B \cdot T$ independent examples.

# %%
set_seed(0)
batch_size, num_positions, d_model = 2, 5, 8
ffn = MLP(d_model, [4 * d_model], d_model, activation="gelu")
tokens = torch.randn(batch_size, num_positions, d_model)          # (B, T, D)

out = ffn(tokens)                                                  # (B, T, D)
check_shape(out, (batch_size, num_positions, d_model))
token_by_token = torch.stack([ffn(tokens[:, t]) for t in range(num_positions)], dim=1)
flattened = ffn(tokens.reshape(-1, d_model)).reshape(batch_size, num_positions, d_model)
torch.testing.assert_close(out, token_by_token)
torch.testing.assert_close(out, flattened)
print(f"MLP on (B, T, D) = the same MLP on each of the {batch_size * num_positions} tokens")

# %% [markdown]
# "Position-wise" has a sharp consequence: the FFN never lets one token see another. Change
# the input at position 2 and only the output at position 2 moves.

# %%
edited = tokens.clone()
edited[:, 2] += 1.0                                    # change token 2 of every sequence
changed = (ffn(edited) - out).abs().amax(dim=-1) > 0   # (B, T): did output t change?
print("output changed at positions:\n", changed)
assert changed[:, 2].all() and not changed[:, [0, 1, 3, 4]].any()

# %% [markdown]
# This is the FFN inside every Transformer block (chapter 8). It processes each token richly,
# but in isolation. Something else in the block has to move information *between* positions.
#
# ## Bridge to attention
#
# A fully connected layer mixes *features*, and it mixes them with *fixed* weights: once
# training is over, $\mathbf W$ is the same matrix for every input. Whatever the sentence, the
# layer combines the features the same way. And applied position-wise, it does not mix
# positions at all.
#
# Attention mixes *positions*, with weights *computed from the input itself*. In its simplest
# form, each token $t$ outputs a weighted average of all tokens' vectors, with weights
# $\alpha_{ts}$ given by a softmax over how similar token $t$ is to each token $s$:
#
# $$
# \mathbf y_t = \sum_{s=1}^{T} \alpha_{ts}(\mathbf X)\, \mathbf x_s, \qquad
# \alpha_{ts}(\mathbf X) = \frac{\exp(\mathbf x_t^\top \mathbf x_s / \sqrt D)}
# {\sum_{s'} \exp(\mathbf x_t^\top \mathbf x_{s'} / \sqrt D)} .
# $$
#
# Feed in two different sequences and you get two different mixing matrices, where a linear
# layer would have used one.

# %% mystnb={"image": {"alt": "Two 5 by 5 heatmaps of attention weights, output token t down and source token s across, one per random input sequence, on one colour scale. In both, every row sums to 1 and has its largest weight on the diagonal, on the token itself; the off-diagonal pattern differs between the two, and the two matrices differ by up to 0.403 in a cell."}}
set_seed(1)
sequences = torch.randn(2, 5, d_model)                                    # (B, T, D)
scores = sequences @ sequences.transpose(1, 2) / math.sqrt(d_model)       # (B, T, T)
mixing = torch.softmax(scores, dim=-1)                                    # rows sum to 1
torch.testing.assert_close(mixing.sum(-1), torch.ones(2, 5))
assert (mixing.argmax(dim=-1) == torch.arange(5)).all()  # each token's largest weight: itself
print(f"largest difference between the two mixing matrices: "
      f"{(mixing[0] - mixing[1]).abs().max():.3f}")
fig = show_heatmaps(mixing, titles=["sequence 1", "sequence 2"], xlabel="source token s",
                    ylabel="output token t", figsize=(7.5, 3.2))


# %% [markdown]
# *Two heatmaps of the $5 \times 5$ weights $\alpha_{ts}$, one per input sequence: each row sums
# to 1, most weight sits on the diagonal (for these two sequences each token's dot product with itself,
# its squared length, is the largest in its row: typical for random vectors, not guaranteed,
# since a longer vector pointing the same way scores higher), and the off-diagonal
# pattern differs between the two sequences.*
#
# Chapter 2 starts from this idea, a weighted average whose weights depend on what we are
# looking for, and derives it properly from kernel regression: queries, keys, values and
# attention pooling.
#
# ## Summary
#
# - An MLP maps the input layer through one or more hidden layers to the output layer; each
#   layer is fully connected (an affine map, every output a weighted sum of every input)
#   followed by an activation. `nn.Linear` stores its weight as (out, in).
# - Full connectivity is the default when nothing is known about the input's structure. With
#   structure (the locality of images, the order of sequences, the edges of graphs) we build it
#   in as an inductive bias, and convolutions spend far fewer parameters than a dense layer.
# - A mnemonic: linear layers move information, activations process (bend) it. Without
#   activations any stack of linear layers multiplies out to a single linear map and cannot
#   solve even XOR.
# - ReLU, sigmoid, tanh and GELU each come with a simple derivative. Sigmoid and tanh saturate
#   (their slope vanishes away from 0; sigmoid's is at most 0.25); ReLU's slope is 1 where
#   active. In a 10-layer network of width 16 at PyTorch's default initialisation, weights
#   that are too small shrink the backward error $\boldsymbol\delta$ by two to five orders of
#   magnitude (ReLU, tanh, GELU) and the input's signal on the way forward, so that the deep
#   layers' activations are made of the biases alone; the first layer's weight gradient
#   collapses relative to the tenth's only when both happen. At PyTorch's gains (size-keeping
#   for ReLU and tanh; ReLU's $\sqrt 2$ borrowed for GELU, whose signal still shrinks) both
#   signals keep their size, while sigmoid loses six or more orders in every setting. With
#   SGD a small gradient ratio slows the first layer by that factor; Adam largely cancels a
#   scale shared by a layer.
# - With a nonlinear activation, one hidden layer of enough width approximates any continuous
#   function (universal approximation). For ReLU in 1-D the weights can be written down; in
#   one training run, the training error fell more than a hundredfold from width 1 to width 64.
# - Logistic regression's decision boundary is a straight line: 0.860 on the two moons, and
#   no line can pass 0.9 on the training points. An MLP bends its boundary and reaches 1.000
#   on the training points, with one hidden layer as with two, and about 0.99 on 200 held-out
#   points (medians over 5 seeds).
# - The MLP is the most typical feedforward network. The Transformer's position-wise FFN is an
#   MLP applied to every token separately; it never mixes positions. Attention does, with
#   weights computed from the input.
#
# ## Exercises
#
# 1. **Counting parameters.** Give a formula for the number of parameters of
#    `MLP(D_in, [h_1, ..., h_L], D_out)`. How many does the FFN of the original Transformer
#    ($D = 512$, hidden width 2048) have?
#
# <details>
# <summary>Solution</summary>
#
# Layer $\ell$ maps $n_{\ell-1}$ units to $n_{\ell}$ with an $n_{\ell-1} \times n_{\ell}$ weight and
# $n_{\ell}$ biases, so with $n_0 = D_\text{in}$ inputs and $D_\text{out}$ outputs from the last layer, number $n_\text{layers} + 1$, the total is
# $\sum_{\ell=1}^{n_\text{layers}+1} (n_{\ell-1} + 1)\, n_{\ell}$. For the Transformer's FFN this is
# $(512 + 1) \cdot 2048 + (2048 + 1) \cdot 512 = 2{,}099{,}712$, about two thirds of an
# encoder block's parameters in PyTorch's layers: attention's four $512 \times 512$ projections
# and their biases hold $4 \cdot 513 \cdot 512 = 1{,}050{,}624$ and the two layer norms $2{,}048$.
# (The paper's multi-head attention, [Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section 3.2.2, has no projection
# biases, so there the FFN's share is slightly higher.) (A decoder
# block has a second attention layer, so there the FFN holds about half.) The cell below
# checks the formula, and the shares against PyTorch's own Transformer layers.
#
# </details>

# %% tags=["hide-cell"]
def count_parameters(sizes):
    return sum((fan_in + 1) * fan_out for fan_in, fan_out in zip(sizes[:-1], sizes[1:]))

for sizes in [[3, 5, 2], [2, 16, 16, 1], [512, 2048, 512]]:
    model = MLP(sizes[0], sizes[1:-1], sizes[-1])
    counted = sum(p.numel() for p in model.parameters())
    assert counted == count_parameters(sizes), f"got {counted=}, {count_parameters(sizes)=}"
    print(f"MLP{tuple(sizes)}: {counted:,} parameters")

ffn_parameters = count_parameters([512, 2048, 512])
attention_parameters = sum(p.numel() for p in nn.MultiheadAttention(512, 8).parameters())
assert attention_parameters == 4 * 513 * 512 == 1_050_624, f"got {attention_parameters=}"
for name, block in [("encoder", nn.TransformerEncoderLayer(512, 8, 2048)),
                    ("decoder", nn.TransformerDecoderLayer(512, 8, 2048))]:
    total = sum(p.numel() for p in block.parameters())
    print(f"{name} block: {total:,} parameters, FFN share {ffn_parameters / total:.3f}")
    assert name == "decoder" or total == ffn_parameters + attention_parameters + 2 * 2 * 512, f"got {name=}, {total=}, {ffn_parameters + attention_parameters + 2 * 2 * 512=}"

# %% [markdown]
# 2. **A polynomial activation is not enough.** The theorem requires the activation not to be
#    a polynomial. Show that a network with one hidden layer and $\phi(z) = z^2$ computes a
#    polynomial of degree at most 2 in a scalar input $x$, however wide it is. What is the best
#    MSE it can reach on the wiggly curve?
#
# <details>
# <summary>Solution</summary>
#
# Each unit computes $(w_j x + b_j)^2 = w_j^2 x^2 + 2 w_j b_j x + b_j^2$, and the output layer
# adds these up with weights $v_j$ plus a bias: the result is $a x^2 + b x + c$ for some
# $a, b, c$. Width only changes which quadratic you get. So the best such network is the
# least-squares quadratic, whose MSE on the curve is computed below; it does not improve with
# width, and it is no better than the straight line's, to four decimals. The reason is
# symmetry: $\sin 3x$ and $0.3x$ are odd, and the curve's only even part,
# $0.5 \cos(7x)\, e^{-x^2/2}$, oscillates so fast that it has almost no $x^2$ or constant
# component on $[-3, 3]$. The best quadratic's $x^2$ coefficient is below $10^{-3}$.
# The cell also builds a random width-64 network with square activations and recovers its
# three coefficients with a least-squares fit, to rounding error.
#
# </details>

# %% tags=["hide-cell"]
set_seed(0)
hidden_layer, output_layer = nn.Linear(1, 64).double(), nn.Linear(64, 1).double()
xs = torch.linspace(-3, 3, 50, dtype=torch.float64).unsqueeze(1)
with torch.no_grad():
    outputs = output_layer(hidden_layer(xs) ** 2)                          # phi(z) = z^2
powers = torch.cat([xs**2, xs, torch.ones_like(xs)], dim=1)                # (N, 3)
fit = torch.linalg.lstsq(powers, outputs).solution
residual = (powers @ fit - outputs).abs().max().item()
assert residual < 1e-10, f"got {residual=}"
print("a random width-64 network with square activations is a quadratic: a x^2 + b x + c")

quadratic = torch.cat([curve_x**2, curve_x, torch.ones_like(curve_x)], dim=1)
coefficients = torch.linalg.lstsq(quadratic, curve_y).solution                # (3, 1): a, b, c
best = F.mse_loss(quadratic @ coefficients, curve_y).item()
print(f"best quadratic on the wiggly curve: MSE {best:.4f}   (best line: {line_mse:.4f})")
assert abs(coefficients[0].item()) < 1e-3 and line_mse - best < 1e-5, f"got {abs(coefficients[0].item())=}, {line_mse - best=}"

# %% [markdown]
# 3. **Features instead of depth.** On `helpers.tasks.classification.two_circles` (one class inside the other)
#    logistic regression stays near chance, although the best straight line gets about two
#    thirds of the points right. Why? Add one extra input feature,
#    $x_1^2 + x_2^2$, and train logistic regression again. What accuracy do you get, and what
#    does the result say about what a hidden layer learns?
#
# <details>
# <summary>Solution</summary>
#
# The best a line can do is cut off a cap of the outer ring: one side then holds only outer
# points, the other all the inner ones and the rest of the ring, which gives about 0.69 here.
# Logistic regression does not find that line, because it minimises the cross-entropy, not
# the error count. The two classes share a centre, so rotating the data leaves it about the
# same, and with it the loss of every rotated line; the loss is convex, so its minimum sits
# near the rotation-invariant answer $\mathbf w = \mathbf 0$: the same probability for every
# point, and an accuracy near chance. (The trained $|(w_1, w_2)|$, printed below, is 0.24, so
# over points at distance at most about 1.1 from the centre the logit moves by less than 0.3.
# On a finite sample the symmetry holds only approximately: on three other draws of the data,
# also printed below, the trained weights are about twice as large and the accuracy 0.56 to
# 0.58, still far below the best line's 0.70 to 0.73.) In the feature $r^2 = x_1^2 + x_2^2$ the classes are separated by
# a threshold (inner circle $r \approx 0.5$, outer $r \approx 1$), so with it as an input
# logistic regression becomes perfect on this data: its boundary $w_1 x_1 + w_2 x_2 + w_3 r^2 + b = 0$ is a circle in the original plane. Here we supplied the right feature by hand; the hidden
# layer of an MLP learns such features from data, which is why it works when nobody knows
# what the right feature is.
#
# </details>

# %% tags=["hide-cell"]
from helpers.tasks.classification import two_circles

circles_x, circles_y = two_circles(num_points=200, noise=0.05, seed=0)
with_radius = torch.cat([circles_x, circles_x.pow(2).sum(1, keepdim=True)], dim=1)  # (N, 3)
for name, inputs in [("x1, x2", circles_x), ("x1, x2, x1^2 + x2^2", with_radius)]:
    set_seed(0)
    logistic = MLP(inputs.shape[1], [], 1)
    train_full_batch(logistic, inputs, circles_y.float().unsqueeze(1), nn.BCEWithLogitsLoss(),
                     steps=300, lr=0.05)
    weight_norm = logistic.linears[0].weight[0, :2].norm()
    print(f"logistic regression on {name:20s} accuracy {accuracy(logistic, inputs, circles_y):.3f}"
          f"   |(w1, w2)| {weight_norm:.3f}")
    if inputs is circles_x:
        assert weight_norm < 0.25 and circles_x.norm(dim=1).max() < 1.15, f"got {weight_norm=}, {circles_x.norm(dim=1).max()=}"
best_circle_line = best_line_accuracy(circles_x, circles_y)
print(f"best accuracy of any straight line on x1, x2: {best_circle_line:.3f}")
assert 0.65 < best_circle_line < 0.7, f"got {best_circle_line=}"
for seed in (1, 2, 3):   # other draws of the data
    other_x, other_y = two_circles(num_points=200, noise=0.05, seed=seed)
    set_seed(0)
    logistic = MLP(2, [], 1)
    train_full_batch(logistic, other_x, other_y.float().unsqueeze(1), nn.BCEWithLogitsLoss(),
                     steps=300, lr=0.05)
    other_accuracy, other_norm = accuracy(logistic, other_x, other_y), logistic.linears[0].weight[0].norm()
    other_line = best_line_accuracy(other_x, other_y)
    print(f"data seed {seed}: logistic regression {other_accuracy:.3f}   |(w1, w2)| {other_norm:.3f}"
          f"   best line {other_line:.3f}")
    assert 0.555 < other_accuracy < 0.585 and 0.45 < other_norm < 0.6 and 0.695 < other_line < 0.735, \
        (seed, other_accuracy, other_norm, other_line)

# %% [markdown]
# 4. **The FFN is a 1×1 convolution.** Treat the $D$ features as channels and the $T$
#    positions as the length of a 1-D signal. Show that the position-wise FFN above equals two
#    `nn.Conv1d` layers with `kernel_size=1` (and a GELU between them), with the weights
#    copied over.
#
# <details>
# <summary>Solution</summary>
#
# A convolution with kernel size 1 applies the same channel-mixing matrix at every position
# and looks at no neighbours: exactly a linear layer applied position-wise. `nn.Conv1d`
# expects (B, channels, T), so transpose in and out, and reshape each (out, in) linear weight
# to (out, in, 1). This is how the original Transformer paper also describes its FFN ("two
# convolutions with kernel size 1", [Vaswani et al. [2017]](../book/references.bib#vaswani2017), Section 3.3), and it is the inductive bias of the earlier section turned to the
# extreme: locality of width one.
#
# </details>

# %% tags=["hide-cell"]
linear_1, linear_2 = ffn.linears
conv_1 = nn.Conv1d(d_model, 4 * d_model, kernel_size=1)
conv_2 = nn.Conv1d(4 * d_model, d_model, kernel_size=1)
with torch.no_grad():
    for conv_layer, linear_layer in [(conv_1, linear_1), (conv_2, linear_2)]:
        conv_layer.weight.copy_(linear_layer.weight.unsqueeze(-1))   # (out, in, 1)
        conv_layer.bias.copy_(linear_layer.bias)
    as_convolution = conv_2(F.gelu(conv_1(tokens.transpose(1, 2)))).transpose(1, 2)  # (B, T, D)
torch.testing.assert_close(as_convolution, ffn(tokens))
print("position-wise FFN == two 1x1 convolutions")

# %% [markdown]
# 5. **How deep before sigmoid stops learning?** Using the bound $\sigma' \le 1/4$, after how
#    many sigmoid layers is the activation's contribution to the first layer's gradient below
#    $10^{-8}$ of the last layer's? Why is the bound not the whole story for tanh and ReLU?
#
# <details>
# <summary>Solution</summary>
#
# For $L$ layers (the letter the output below prints) we need $0.25^{L} < 10^{-8}$, that is $L > 8 / \log_{10} 4 \approx 13.3$: from 14 layers on.
# The measurement above (sigmoid at PyTorch's gain of 1 with zero biases, seed 0) lost more: a ratio of
# $2.1 \times 10^{-7}$ over the nine sigmoid layers between $\mathbf W_1$ and
# $\mathbf W_{10}$, where $0.25^9$ alone would be $3.8 \times 10^{-6}$. The slopes explain only a small part of this
# extra loss: the cell below measures each layer's mean slope at 0.21 to 0.24, close to the
# peak of 0.25, and the nine multiply to $1.8 \times 10^{-6}$, only about twice below $0.25^9$. The error signal reaching the first
# layer, $\boldsymbol\delta_{\ell} = \partial\,\text{loss} / \partial \mathbf z_{\ell}$ (the
# gradient with respect to layer $\ell$'s pre-activations), is in line with that:
# $\lVert\boldsymbol\delta_1\rVert / \lVert\boldsymbol\delta_{10}\rVert \approx 1.3 \times 10^{-6}$.
# The remaining factor of about 6 comes from the weight gradient's other factor, the layer's
# input: $\nabla \mathbf W_{\ell} = \mathbf h_{\ell-1}^\top \boldsymbol\delta_{\ell}$ (its transpose in `nn.Linear`'s
# (out, in) layout), summed over the examples. $\mathbf W_{10}$ sees sigmoid outputs, all positive (between 0.3 and 0.75), so the
# examples' contributions add up; $\mathbf W_1$ sees the zero-mean inputs, whose contributions
# largely cancel.
# For tanh and ReLU the activation's own factor can be 1 (tanh near 0, ReLU when active), so
# the bound alone does not force the gradient to vanish; whether $\boldsymbol\delta$ does then
# depends on the weights, and whether the weight gradient does depends on the layers' inputs as
# well (the biases, in the measurement above), which is why initialisation scales and
# normalisation matter for deep networks. ReLU
# has its own failure, the other way round: a unit whose input is negative for every example
# has slope 0 everywhere and stops learning for good (a "dead" ReLU).
#
# </details>

# %% tags=["hide-cell"]
layers = math.ceil(8 / math.log10(4) + 1e-12)
assert 0.25 ** layers < 1e-8 <= 0.25 ** (layers - 1), f"got {0.25 ** layers=}, {0.25 ** (layers - 1)=}"
_, sigmoid_grads, _ = runs["sigmoid", "gain", "zero"][0]            # gain 1, zero biases, seed 0
measured = sigmoid_grads[0] / sigmoid_grads[9]
print(f"0.25^L < 1e-8 from L = {layers} (8 / log10(4) = {8 / math.log10(4):.2f}); "
      f"0.25^9 = {0.25 ** 9:.1e}, measured at gain 1: {measured:.1e}")
assert measured < 0.25 ** 9, f"got {measured=}"

# rerun, keeping each layer's input and z
_, _, layer_inputs, pre_activations = layer_gradients(
    deep_network("sigmoid", "gain", "zero", seed=0), gradient_inputs)
mean_slopes = [sigmoid_derivative(z).mean().item() for z in pre_activations]   # layers 1..10
slope_product = math.prod(mean_slopes[:9])
delta_ratio = pre_activations[0].grad.norm().item() / pre_activations[9].grad.norm().item()
input_factor = measured / delta_ratio
print("mean slope per layer: " + " ".join(f"{s:.2f}" for s in mean_slopes))
print(f"product of the nine (layers 1-9): {slope_product:.1e};  |delta_1| / |delta_10|: "
      f"{delta_ratio:.1e};  left to the inputs: 1/{1 / input_factor:.1f}")
print(f"input of W_10: from {layer_inputs[9].min():.2f} to {layer_inputs[9].max():.2f};  "
      f"mean input of W_1: {layer_inputs[0].mean():+.3f}")
assert all(0.205 <= s < 0.245 for s in mean_slopes)  # "0.21 to 0.24"
assert 1.7e-6 < slope_product < 1.9e-6 and 1.2e-6 < delta_ratio < 1.4e-6, f"got {slope_product=}, {delta_ratio=}"
assert 5 < 1 / input_factor < 7, f"got {1 / input_factor=}"   # "about 6"
assert 0.3 < layer_inputs[9].min() and layer_inputs[9].max() < 0.75, f"got {layer_inputs[9].min()=}, {layer_inputs[9].max()=}"
