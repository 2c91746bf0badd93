"""Input checks: the one place where the helpers decide what a bad argument is.

Every public callable of the library checks its arguments with these functions before it
computes anything, so a bad input fails at the call with a message that names the argument,
says what it got and what it needed, and never deep inside torch or numpy, and never
silently with a wrong answer. All of them raise ``ValueError`` (a wrong type is a wrong value
of the argument too), so a chapter can catch one exception type.

Shape letters, as everywhere in the book: B batch, Q queries, K keys, D features, H heads,
T positions.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import torch

__all__ = [
    "require",
    "check_shape",
    "check_int",
    "check_real",
    "check_probability",
    "check_bool",
    "check_tensor",
    "check_bool_mask",
    "check_head_mask",
    "check_mask",
    "check_features",
    "check_scoring_inputs",
    "as_real_tensor",
    "check_positive_scalar",
    "as_integer_tensor",
    "check_pm1",
    "check_square",
    "check_patterns_and_query",
    "check_even",
    "check_token_id",
    "check_lengths",
    "check_vocab",
    "as_real_array",
    "check_limits",
    "check_positions",
    "check_qkv",
    "check_axis",
    "check_leading_axes",
    "check_instance",
    "check_generator",
    "check_float_dtype",
    "check_device",
    "describe",
]

ANY_RANK_FROM_1 = range(1, 65)  # for check_tensor's ndim: a shape (…, K), at least one axis
ANY_RANK_FROM_2 = range(2, 65)  # a shape (…, Q, D), at least two axes


def require(condition: bool, message: str) -> None:
    """Raise ``ValueError(message)`` when ``condition`` is false (input checks, never ``assert``)."""
    if not condition:
        raise ValueError(message)


def describe(value) -> str:
    """A short description of ``value`` for an error message: a tensor's shape and dtype,
    an array's shape, otherwise its repr (or type name when the repr is long)."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 60 else type(value).__name__


def check_shape(t: torch.Tensor | np.ndarray, shape: Sequence[int | None]) -> None:
    """Raise ``ValueError`` unless ``t.shape`` equals ``shape``.

    ``None`` in ``shape`` matches any size on that axis, so ``check_shape(x, (None, 4))``
    accepts any (N, 4) tensor.

    Args:
        t: a tensor or array.
        shape: the expected shape, one entry per axis.
    """
    if not hasattr(t, "shape"):
        raise ValueError(f"expected a tensor or array, got {describe(t)}")
    got = tuple(t.shape)
    want = tuple(shape)
    if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
        shown = tuple("*" if w is None else w for w in want)
        raise ValueError(f"expected a tensor of shape {shown}, got shape {got}")


def check_int(value, name: str, minimum: int = 0) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) of at least ``minimum``.

    The message says "a positive integer" for ``minimum=1``, "a non-negative integer" for
    ``minimum=0`` and "an integer >= minimum" otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        wanted = {0: "a non-negative integer", 1: "a positive integer"}.get(
            minimum, f"an integer >= {minimum}"
        )
        raise ValueError(f"{name} must be {wanted}, got {describe(value)}")
    return int(value)


def check_real(
    value,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
) -> float:
    """``value`` as a ``float`` if it is a finite real number (not a bool) within the bounds.

    ``minimum``/``maximum`` are inclusive unless ``exclusive_minimum``/``exclusive_maximum``.
    NaN and ±inf are always rejected.
    """
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    if ok and minimum is not None:
        ok = value > minimum if exclusive_minimum else value >= minimum
    if ok and maximum is not None:
        ok = value < maximum if exclusive_maximum else value <= maximum
    if not ok:
        low = "" if minimum is None else ("(" if exclusive_minimum else "[") + f"{minimum}, "
        high = "" if maximum is None else f"{maximum}" + (")" if exclusive_maximum else "]")
        if minimum is not None and maximum is not None:
            wanted = f"a finite number in {low}{high}"
        elif minimum is not None:
            wanted = f"a finite number {'>' if exclusive_minimum else '>='} {minimum}"
        elif maximum is not None:
            wanted = f"a finite number {'<' if exclusive_maximum else '<='} {maximum}"
        else:
            wanted = "a finite real number"
        raise ValueError(f"{name} must be {wanted}, got {describe(value)}")
    return float(value)


def check_bool(value, name: str) -> bool:
    """``value`` as a ``bool`` if it is one (Python's or NumPy's): never a truthy stand-in
    such as ``"False"``, ``0`` or ``None``, which would read as the wrong flag."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {describe(value)}")
    return bool(value)


def check_probability(value, name: str = "dropout") -> float:
    """``value`` as a float if it is a probability in [0, 1) (a dropout rate)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a probability in [0, 1), got {describe(value)}")
    return float(value)


def check_tensor(
    value,
    name: str,
    shape: str,
    *,
    ndim: int | Sequence[int] | None = None,
    floating: bool = False,
    dtype: torch.dtype | None = None,
    size: dict[int, int] | None = None,
) -> torch.Tensor:
    """``value`` if it is a ``torch.Tensor`` with the rank, dtype and sizes asked for.

    Args:
        value: the argument.
        name: its name in the messages.
        shape: how the shape reads in the book, e.g. ``"(B, Q, D)"`` or ``"(…, K, D)"``.
        ndim: the rank it must have: an int, or the allowed ranks; for a shape with ``…``
            give the smallest allowed rank as ``range(n, 65)``.
        floating: require a floating-point dtype.
        dtype: require exactly this dtype (e.g. a module's parameter dtype).
        size: axis -> required size, e.g. ``{-1: d_model}``.
    """
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {shape}, got {describe(value)}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if value.dim() not in allowed:
            raise ValueError(f"{name} must have shape {shape}, got shape {tuple(value.shape)}")
    if floating and not value.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    if dtype is not None and value.dtype != dtype:
        raise ValueError(
            f"{name} must have the parameters' dtype {dtype}, got dtype "
            f"{value.dtype}; convert the module (e.g. .double()) or the input"
        )
    for axis, want in (size or {}).items():
        if value.shape[axis] != want:
            raise ValueError(
                f"{name} must have shape {shape} with {want} on axis {axis}, "
                f"got shape {tuple(value.shape)}"
            )
    return value


def check_bool_mask(
    mask, name: str = "mask", *, shape: str | None = None, ndim: int | None = None
) -> torch.Tensor:
    """``mask`` if it is a boolean tensor (True = may attend), of rank ``ndim`` if given."""
    if not isinstance(mask, torch.Tensor):
        raise ValueError(
            f"{name} must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool:
        raise ValueError(
            f"{name} must have dtype torch.bool (True = may attend), got dtype "
            f"{mask.dtype}; build one with helpers.masks or compare, e.g. x > 0"
        )
    if ndim is not None and mask.dim() != ndim:
        raise ValueError(
            f"{name} must be {ndim}-D {shape or ''}".rstrip() + f", got shape {tuple(mask.shape)}"
        )
    return mask


def check_head_mask(mask, name: str, shape: Sequence[int]) -> torch.Tensor:
    """``mask`` as a bool mask of the rank of multi-head weights ``shape`` = (B, H, Q, K).

    The rule of :class:`helpers.multihead.MultiHeadAttention`: a 2-D mask is read as
    (Q, K), a 3-D one as (B, Q|1, K) per example, shared by the heads (never as (H, Q, K),
    even when B == H), a 4-D one as (B|1, H|1, Q|1, K|1); it must broadcast to ``shape``.
    A 2-D mask of shape (B, K) with B == Q > 1 and Q != K (cross-attention, or queries that
    are not the keys) could be either reading, so it is refused by name: write ``mask[None]``
    for (Q, K) or ``mask[:, None, None, :]`` for a padding mask. In self-attention (Q == K)
    a square 2-D mask is (Q, K), a causal mask, even when B == T: refusing it there would
    break causal masks at the sizes where the batch happens to equal the length.
    Returns the mask with a head axis inserted if it was 3-D (a view, nothing expanded).
    """
    check_bool_mask(mask, name)
    batch, _, queries, keys = shape
    if mask.dim() == 2 and batch == queries == mask.shape[0] > 1 and queries != keys:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} is ambiguous with B = Q = {batch}: it reads "
            f"as (Q, K) or as a (B, K) padding mask; pass {name}[None] for (Q, K) or "
            f"{name}[:, None, None, :] for (B, K)"
        )
    heads = mask[:, None] if mask.dim() == 3 else mask  # (B, 1, Q|1, K): the heads share it
    shape = torch.Size(shape)
    try:
        fits = heads.dim() <= 4 and torch.broadcast_shapes(heads.shape, shape) == shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} must broadcast to the weights' "
            f"shape (B, H, Q, K) = {tuple(shape)}; e.g. (Q, K), (B, 1, K) or "
            f"(B, 1, 1, K) (a (B, K) padding mask as mask[:, None, None, :]), "
            f"(B, Q, K) or (B, 1, Q, K)"
        )
    return heads


def check_mask(mask, shape: Sequence[int], name: str = "mask") -> torch.Tensor:
    """``mask`` if it is a bool tensor that broadcasts to the scores' ``shape`` (…, Q, K)."""
    check_bool_mask(mask, name)
    shape = torch.Size(shape)
    try:
        fits = torch.broadcast_shapes(mask.shape, shape) == shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} must broadcast to the scores' "
            f"shape {tuple(shape)} (…, Q, K)"
        )
    return mask


def check_qkv(q, k, v, names: Sequence[str] = ("q", "k", "v")) -> torch.Size:
    """Check queries (…, Q, D), keys (…, K, D) and values (…, K, Dv): floating, one dtype,
    one D for queries and keys, one K for keys and values, leading axes that broadcast.
    Returns the broadcast leading axes (…)."""
    nq, nk, nv = names
    for name, t, letter in ((nq, q, "Q"), (nk, k, "K"), (nv, v, "K")):
        check_tensor(t, name, f"(…, {letter}, D)", ndim=ANY_RANK_FROM_2, floating=True)
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(
            f"{nq}, {nk} and {nv} must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"{nq} and {nk} must have the same feature size D, got {nq} of shape "
            f"{tuple(q.shape)} and {nk} of shape {tuple(k.shape)}; for queries "
            f"and keys of different sizes use additive or bilinear scoring"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"{nk} and {nv} must hold the same number of keys K, got {nk} of shape "
            f"{tuple(k.shape)} and {nv} of shape {tuple(v.shape)}"
        )
    return check_leading_axes({nq: q, nk: k, nv: v})


def check_leading_axes(tensors: dict[str, torch.Tensor]) -> torch.Size:
    """The broadcast of the leading (batch, head) axes, all but the last two, of the named
    tensors, if they broadcast."""
    try:
        return torch.broadcast_shapes(*(t.shape[:-2] for t in tensors.values()))
    except RuntimeError:
        shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
        raise ValueError(f"the leading (batch, head) axes of {shapes} must broadcast") from None


def check_axis(dim, tensor: torch.Tensor, tensor_name: str, name: str = "dim") -> int:
    """``dim`` if it is an axis of ``tensor`` (negative counts from the end; a 0-D tensor
    has the axes 0 and -1, as in ``torch.softmax``)."""
    rank = max(tensor.dim(), 1)
    if isinstance(dim, bool) or not isinstance(dim, int) or not -rank <= dim < rank:
        raise ValueError(
            f"{name} must be an axis of {tensor_name} (shape {tuple(tensor.shape)}), got {dim!r}"
        )
    return dim


def check_instance(value, kind: type | tuple[type, ...], name: str, *, optional: bool = False):
    """``value`` if it is an instance of ``kind`` (or None when ``optional``)."""
    if optional and value is None:
        return value
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join(_class_name(k) for k in kinds) + (" or None" if optional else "")
        raise ValueError(f"{name} must be a {wanted}, got {describe(value)}")
    return value


def _class_name(kind: type) -> str:
    """A class as a reader knows it: MultiHeadAttention, torch.Generator, matplotlib Axes."""
    top = kind.__module__.split(".")[0]
    if top == "helpers":
        return kind.__qualname__
    return f"torch.{kind.__qualname__}" if top == "torch" else f"{top} {kind.__qualname__}"


def check_generator(generator, name: str = "generator") -> torch.Generator | None:
    """``generator`` if it is a ``torch.Generator`` or None (then the global stream is used)."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"{name} must be a torch.Generator or None, got {describe(generator)}")
    return generator


def check_float_dtype(dtype, name: str = "dtype") -> torch.dtype:
    """``dtype`` if it is a floating ``torch.dtype`` (float16, bfloat16, float32, float64)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating torch.dtype, got {dtype!r}")
    return dtype


def check_device(device, name: str = "device") -> torch.device | None:
    """``device`` as a ``torch.device`` (or None): a device or a string such as ``"cpu"``."""
    if device is None:
        return None
    try:
        return torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"{name} must be a torch.device or a device string such as 'cpu', got {device!r}"
        ) from None


def check_features(
    x,
    name: str,
    d_model: int,
    shape: str = "(B, T, D)",
    ndim: int | Sequence[int] = 3,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``x`` if it is a floating tensor of rank ``ndim`` with ``d_model`` features last (and
    of the parameters' ``dtype``, if given): the input of a layer of width ``d_model``."""
    check_tensor(x, name, shape, ndim=ndim, floating=True)
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} must have d_model={d_model} features in the last axis, got "
            f"shape {tuple(x.shape)}"
        )
    return check_tensor(x, name, shape, dtype=dtype)


_NO_VALUES = object()  # check_scoring_inputs without values (None is a bad value)


def check_scoring_inputs(
    owner: str,
    queries,
    keys,
    values=_NO_VALUES,
    *,
    query_dim: int | None = None,
    key_dim: int | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Size:
    """The inputs of a scoring attention module (``owner`` is its class name): queries
    (…, Q, Dq), keys (…, K, Dk) and values (…, K, Dv) if given, floating 2-D to 4-D tensors
    of one dtype (``dtype``, the parameters', if given) with one K and broadcastable leading
    axes. Dq and Dk must be ``query_dim`` and ``key_dim``, or equal when those are None (a
    dot product). Returns the broadcast leading axes."""
    named = {"queries": queries, "keys": keys}
    if values is not _NO_VALUES:
        named["values"] = values
    for name, tensor in named.items():
        letter = "Q" if name == "queries" else "K"
        check_tensor(
            tensor,
            name,
            f"({letter}, D), (B, {letter}, D) or (B, H, {letter}, D)",
            ndim=(2, 3, 4),
            floating=True,
        )
        want = queries.dtype if dtype is None else dtype
        if tensor.dtype != want:
            which = "queries'" if dtype is None else "the parameters'"
            raise ValueError(
                f"{name} must have {which} dtype {want}, got dtype {tensor.dtype}"
                + ("" if dtype is None else "; convert the module (e.g. .double()) or the input")
            )
    if query_dim is None and queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same feature size D for {owner}, got queries of "
            f"shape {tuple(queries.shape)} and keys of shape {tuple(keys.shape)}; for "
            f"different sizes use AdditiveAttention or BilinearAttention"
        )
    for name, tensor, size_name, size in (
        ("queries", queries, "query_dim", query_dim),
        ("keys", keys, "key_dim", key_dim),
    ):
        if size is not None and tensor.shape[-1] != size:
            raise ValueError(
                f"{name} must have {size_name}={size} features in the last axis "
                f"for this {owner}, got shape {tuple(tensor.shape)}"
            )
    if values is not _NO_VALUES and keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"keys and values must hold the same number of keys K, got keys of "
            f"shape {tuple(keys.shape)} and values of shape {tuple(values.shape)}"
        )
    return check_leading_axes(named)


def as_real_tensor(x, name: str) -> torch.Tensor:
    """``x`` (a tensor, number, array or list of real numbers) as a floating tensor; an
    integer one gets the default dtype. Bool and complex inputs are refused."""
    try:
        tensor = torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(
            f"{name} must be a real tensor (or number, array or list), got {describe(x)}"
        ) from None
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise ValueError(f"{name} must hold real numbers, got dtype {tensor.dtype}")
    return tensor if tensor.is_floating_point() else tensor.to(torch.get_default_dtype())


def check_positive_scalar(value, name: str):
    """``value`` if it is a finite number > 0, or a real 0-d tensor holding one (kept as
    the tensor, so that a learnable parameter keeps its gradient)."""
    number = value
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise ValueError(
                f"{name} must be a float or a 0-d tensor, got a tensor of shape "
                f"{tuple(value.shape)}"
            )
        if value.dtype == torch.bool or value.is_complex():
            raise ValueError(
                f"{name} must be a real number, got a 0-d tensor of dtype {value.dtype}"
            )
        number = float(value.detach())
    check_real(number, name, minimum=0, exclusive_minimum=True)
    return value


def as_integer_tensor(value, name: str, shape: str) -> torch.Tensor:
    """``value`` (a tensor, array or nested list) as a tensor of an integer dtype.

    An empty list becomes an empty int64 tensor (``torch.as_tensor([])`` would be float)."""
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(
                f"{name} must be an integer tensor (or list) of shape {shape}, "
                f"got {describe(value)}"
            ) from None
        if value.numel() == 0 and value.is_floating_point():
            value = value.long()
    if value.dtype == torch.bool or value.is_floating_point() or value.is_complex():
        raise ValueError(f"{name} must have an integer dtype, got dtype {value.dtype}")
    return value


def check_pm1(x, name: str, shape: str) -> torch.Tensor:
    """``x`` if it is a non-empty tensor of a signed dtype (not bool) whose entries are all
    −1 or +1 (an unsigned dtype cannot hold −1: flipping a unit would wrap around)."""
    check_tensor(x, name, shape, ndim=ANY_RANK_FROM_1)
    if (
        x.dtype == torch.bool
        or not x.dtype.is_signed
        or x.numel() == 0
        or not bool(((x == 1) | (x == -1)).all())
    ):
        raise ValueError(
            f"{name} must be a non-empty tensor of -1 and +1 entries (a signed dtype), "
            f"got {describe(x)}"
        )
    return x


def check_square(matrix, name: str, shape: str = "(N, N)") -> int:
    """The size N of ``matrix`` if it is a floating (N, N) tensor whose entries are all
    finite (NaN or ±inf weights would give NaN energies)."""
    check_tensor(matrix, name, shape, ndim=2, floating=True)
    require(
        matrix.shape[0] == matrix.shape[1],
        f"{name} must have shape {shape}, got shape {tuple(matrix.shape)}",
    )
    require(bool(torch.isfinite(matrix).all()), f"{name} must be finite, got NaN or ±inf")
    return matrix.shape[0]


def check_patterns_and_query(patterns, xi, beta) -> float:
    """Patterns X (N, P) and queries ξ (…, N) of one floating dtype, and β > 0 (the modern
    Hopfield network's inputs); returns β as a float."""
    check_tensor(patterns, "patterns", "(N, P)", ndim=2, floating=True)
    check_tensor(xi, "xi", "(…, N)", ndim=ANY_RANK_FROM_1, floating=True)
    if xi.shape[-1] != patterns.shape[0]:
        raise ValueError(
            f"patterns must be (N, P) and xi (…, N), got patterns "
            f"{tuple(patterns.shape)} and xi {tuple(xi.shape)}"
        )
    require(
        xi.dtype == patterns.dtype,
        f"xi must have the dtype of patterns, {patterns.dtype}, got {xi.dtype}",
    )
    return check_real(beta, "beta", minimum=0, exclusive_minimum=True)


def check_even(value, name: str = "d_model") -> int:
    """``value`` if it is a positive even integer (features that come in pairs)."""
    value = check_int(value, name, minimum=1)
    if value % 2:
        raise ValueError(
            f"{name} must be even (features come in (sin, cos) / rotation "
            f"pairs), got {name}={value}"
        )
    return value


def check_token_id(value, name: str, vocab_size: int) -> int:
    """``value`` as an int if it is a token id in [0, vocab_size)."""
    value = check_int(value, name)
    require(
        value < vocab_size,
        f"{name} must be a token id in [0, vocab_size={vocab_size}), got {value}",
    )
    return value


def check_lengths(length, min_length) -> tuple[int, int]:
    """``(length, lowest length)`` if ``length`` >= 1 and 1 <= min_length <= length (a
    None ``min_length`` means every sequence has ``length``)."""
    length = check_int(length, "length", minimum=1)
    lowest = length if min_length is None else check_int(min_length, "min_length", minimum=1)
    require(lowest <= length, f"min_length={lowest} must be <= length={length}")
    return length, lowest


def check_vocab(vocab) -> dict:
    """``vocab`` if it is a dict of string tokens -> integer ids."""
    if not isinstance(vocab, dict) or not all(
        isinstance(t, str) and isinstance(i, int) and not isinstance(i, bool)
        for t, i in vocab.items()
    ):
        raise ValueError(
            f"vocab must be a dict of string tokens -> integer ids (as "
            f"build_vocab returns), got {type(vocab).__name__}"
        )
    return vocab


def as_real_array(matrix, name: str = "matrix", shape: str = "(Q, K)") -> np.ndarray:
    """``matrix`` (tensor, array or nested list of real numbers) as a float64 NumPy array."""
    if isinstance(matrix, torch.Tensor):
        check_tensor(matrix, name, shape)
        if matrix.is_complex():
            raise ValueError(f"{name} must hold real numbers, got dtype {matrix.dtype}")
        return matrix.detach().cpu().to(torch.float64).numpy()
    try:
        data = np.asarray(matrix)
        if data.dtype.kind not in "biuf":  # bool, integers, floats: no strings, objects
            raise TypeError(f"dtype {data.dtype}")
        return data.astype(np.float64)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"{name} must be a 2-D tensor, array or nested list of real "
            f"numbers {shape}, got {type(matrix).__name__} ({error})"
        ) from None


def check_limits(vmin, vmax) -> tuple[float | None, float | None]:
    """Colour limits, each None or a finite number (or 0-d real tensor), vmin <= vmax when
    both are given; returned as floats (or None)."""
    limits = []
    for name, value in (("vmin", vmin), ("vmax", vmax)):
        if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_complex():
            value = value.item()
        limits.append(None if value is None else check_real(value, name))
    low, high = limits
    if low is not None and high is not None:
        require(low <= high, f"vmin must not exceed vmax, got vmin={low!r}, vmax={high!r}")
    return low, high


def check_positions(module, x) -> int:
    """The number of positions T of ``x`` (…, T, D), floating with ``module.d_model``
    features, if T is at most ``module.max_len`` (a positional encoding's table size)."""
    check_features(x, "x", module.d_model, "(…, T, D)", ANY_RANK_FROM_2)
    num_positions = x.shape[-2]
    if num_positions > module.max_len:
        raise ValueError(
            f"{type(module).__name__} holds max_len={module.max_len} positions, got "
            f"T={num_positions} (x of shape {tuple(x.shape)}); build it with a "
            f"larger max_len"
        )
    return num_positions
