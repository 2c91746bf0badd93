"""Tests for helpers.checks: the one home of the input checks.

Every check raises ValueError (never TypeError, never an assert) with a message that names
the argument, says what it got and what it needed.
"""

import math

import numpy as np
import pytest
import torch

from helpers.checks import (
    check_bool_mask,
    check_int,
    check_probability,
    check_real,
    check_shape,
    check_tensor,
    describe,
    require,
)


# ---------------------------------------------------------------------- require
def test_require():
    require(True, "never raised")
    with pytest.raises(ValueError, match="the message"):
        require(False, "the message")


# ---------------------------------------------------------------------- describe
def test_describe_tensors_arrays_and_values():
    assert describe(torch.zeros(2, 3)) == "a tensor of shape (2, 3) and dtype torch.float32"
    assert describe(np.zeros((4,), dtype=np.int32)) == "an array of shape (4,) and dtype int32"
    assert describe(3) == "3" and describe("x") == "'x'" and describe(None) == "None"
    assert describe(list(range(100))) == "list"  # a long repr gives the type name


# ---------------------------------------------------------------------- check_shape
@pytest.mark.parametrize("shape", [(2, 3, 4), (None, 3, 4), (2, None, None), (None, None, None)])
def test_check_shape_accepts_matching_shapes(shape):
    check_shape(torch.zeros(2, 3, 4), shape)
    check_shape(np.zeros((2, 3, 4)), shape)


@pytest.mark.parametrize(
    "shape, shown",
    [
        ((2, 3, 5), r"\(2, 3, 5\)"),
        ((None, 4, 4), r"\('\*', 4, 4\)"),
        ((2, 3), r"\(2, 3\)"),
        ((2, 3, 4, 1), r"\(2, 3, 4, 1\)"),
        ((None, None), r"\('\*', '\*'\)"),
    ],
)
def test_check_shape_rejects_mismatches(shape, shown):
    with pytest.raises(
        ValueError,
        match=rf"expected a tensor of shape {shown}, "
        rf"got shape \(2, 3, 4\)",
    ):
        check_shape(torch.zeros(2, 3, 4), shape)


@pytest.mark.parametrize("value", [[1, 2], 3.0, None, "ab"])
def test_check_shape_rejects_what_has_no_shape(value):
    with pytest.raises(ValueError, match="expected a tensor or array, got"):
        check_shape(value, (2,))


# ---------------------------------------------------------------------- check_int
@pytest.mark.parametrize("value, minimum", [(0, 0), (5, 1), (np.int64(3), 0), (-2, -2)])
def test_check_int_accepts_integers_at_or_above_the_minimum(value, minimum):
    result = check_int(value, "n", minimum)
    assert result == value and type(result) is int


@pytest.mark.parametrize(
    "value, minimum, wanted",
    [
        (-1, 0, "a non-negative integer"),
        (0, 1, "a positive integer"),
        (2, 3, r"an integer >= 3"),
        (True, 0, "a non-negative integer"),  # a bool is not a number of things
        (False, 0, "a non-negative integer"),
        (2.0, 0, "a non-negative integer"),  # a float, even a whole one
        (float("nan"), 0, "a non-negative integer"),
        (float("inf"), 0, "a non-negative integer"),
        ("3", 0, "a non-negative integer"),
        (None, 0, "a non-negative integer"),
        (torch.tensor(3), 0, "a non-negative integer"),
    ],
)
def test_check_int_rejects_with_the_argument_named(value, minimum, wanted):
    with pytest.raises(ValueError, match=rf"^num_things must be {wanted}, got "):
        check_int(value, "num_things", minimum)


# ---------------------------------------------------------------------- check_real
@pytest.mark.parametrize("value", [0, 1.5, -3, np.float32(0.25), np.int64(2)])
def test_check_real_accepts_finite_numbers(value):
    result = check_real(value, "x")
    assert result == float(value) and type(result) is float


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        float("nan"),
        float("inf"),
        -float("inf"),
        "1.0",
        None,
        1j,
        torch.tensor(1.0),
        [1.0],
    ],
)
def test_check_real_rejects_bools_non_numbers_and_non_finite(value):
    with pytest.raises(ValueError, match=r"^lr must be a finite real number, got "):
        check_real(value, "lr")


@pytest.mark.parametrize(
    "value, bounds, wanted",
    [
        (0.0, dict(minimum=0, exclusive_minimum=True), r"a finite number > 0"),
        (-0.1, dict(minimum=0), r"a finite number >= 0"),
        (1.0, dict(maximum=1, exclusive_maximum=True), r"a finite number < 1"),
        (1.5, dict(maximum=1), r"a finite number <= 1"),
        (
            1.0,
            dict(minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True),
            r"a finite number in \(0, 1\)",
        ),
        (2.0, dict(minimum=0, maximum=1), r"a finite number in \[0, 1\]"),
        (float("nan"), dict(minimum=0), r"a finite number >= 0"),
        (float("inf"), dict(minimum=0), r"a finite number >= 0"),
        (True, dict(minimum=0), r"a finite number >= 0"),
    ],
)
def test_check_real_rejects_out_of_range(value, bounds, wanted):
    with pytest.raises(ValueError, match=rf"^scale must be {wanted}, got "):
        check_real(value, "scale", **bounds)


def test_check_real_bounds_are_inclusive_unless_exclusive():
    assert check_real(0, "x", minimum=0) == 0.0
    assert check_real(1, "x", maximum=1) == 1.0
    assert (
        check_real(0.5, "x", minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True)
        == 0.5
    )


# ---------------------------------------------------------------------- check_probability
@pytest.mark.parametrize("value", [0, 0.0, 0.5, 0.999, np.float64(0.1)])
def test_check_probability_accepts_dropout_rates(value):
    assert check_probability(value) == float(value)


@pytest.mark.parametrize(
    "value", [1.0, -0.1, float("nan"), float("inf"), True, False, "0.1", None, torch.tensor(0.1)]
)
def test_check_probability_rejects(value):
    with pytest.raises(ValueError, match=r"^dropout must be a probability in \[0, 1\), got "):
        check_probability(value)
    with pytest.raises(ValueError, match=r"^p must be a probability"):
        check_probability(value, "p")


# ---------------------------------------------------------------------- check_tensor
def test_check_tensor_returns_the_tensor_when_it_fits():
    x = torch.zeros(2, 3, 4)
    assert (
        check_tensor(
            x, "x", "(B, Q, D)", ndim=3, floating=True, dtype=torch.float32, size={-1: 4, 0: 2}
        )
        is x
    )
    assert check_tensor(x, "x", "(…, D)", ndim=range(1, 65)) is x
    assert check_tensor(torch.zeros(0, 4), "x", "(N, D)", ndim=(2, 3)) is not None


@pytest.mark.parametrize("value", [[1.0, 2.0], np.zeros(3), 1.0, None, True])
def test_check_tensor_rejects_non_tensors(value):
    with pytest.raises(ValueError, match=r"^x must be a torch.Tensor of shape \(B, D\), got "):
        check_tensor(value, "x", "(B, D)")


def test_check_tensor_rejects_wrong_rank():
    with pytest.raises(ValueError, match=r"^q must have shape \(B, Q, D\), got shape \(3, 4\)$"):
        check_tensor(torch.zeros(3, 4), "q", "(B, Q, D)", ndim=3)
    with pytest.raises(ValueError, match=r"^q must have shape \(…, Q, D\), got shape \(4,\)$"):
        check_tensor(torch.zeros(4), "q", "(…, Q, D)", ndim=range(2, 65))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.uint8])
def test_check_tensor_rejects_non_floating_when_float_is_needed(dtype):
    with pytest.raises(
        ValueError,
        match=rf"^x must be a floating-point tensor, got dtype "
        rf"{dtype}$",
    ):
        check_tensor(torch.zeros(2, dtype=dtype), "x", "(N,)", floating=True)


def test_check_tensor_rejects_another_dtype_than_the_parameters():
    with pytest.raises(
        ValueError,
        match=r"^x must have the parameters' dtype torch.float32, "
        r"got dtype torch.float64",
    ):
        check_tensor(torch.zeros(2, dtype=torch.float64), "x", "(N,)", dtype=torch.float32)


def test_check_tensor_rejects_a_wrong_size():
    with pytest.raises(
        ValueError,
        match=r"^x must have shape \(B, T, 8\) with 8 on axis -1, "
        r"got shape \(2, 3, 4\)$",
    ):
        check_tensor(torch.zeros(2, 3, 4), "x", "(B, T, 8)", size={-1: 8})


def test_check_tensor_accepts_nan_values_inside_a_tensor():
    """Data are not parameters: a NaN inside a tensor is the caller's result to see."""
    x = torch.tensor([float("nan"), 1.0])
    assert check_tensor(x, "x", "(N,)", ndim=1, floating=True) is x


# ---------------------------------------------------------------------- check_bool_mask
def test_check_bool_mask_returns_the_mask():
    mask = torch.ones(2, 3, dtype=torch.bool)
    assert check_bool_mask(mask) is mask
    assert check_bool_mask(mask, "key_padding_mask", shape="(B, K)", ndim=2) is mask


@pytest.mark.parametrize(
    "value, got",
    [
        ([[True, False]], "list"),
        (None, "NoneType"),
        (True, "bool"),
        (np.ones(2, dtype=bool), "ndarray"),
    ],
)
def test_check_bool_mask_rejects_non_tensors(value, got):
    with pytest.raises(
        ValueError,
        match=rf"^mask must be a torch.Tensor of dtype torch.bool, "
        rf"got {got}$",
    ):
        check_bool_mask(value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_check_bool_mask_rejects_other_dtypes_with_the_printed_text(dtype):
    expected = (
        f"mask must have dtype torch.bool (True = may attend), got dtype {dtype}; "
        f"build one with helpers.masks or compare, e.g. x > 0"
    )
    with pytest.raises(ValueError) as info:
        check_bool_mask(torch.ones(2, 3, dtype=dtype))
    assert str(info.value) == expected


def test_check_bool_mask_rejects_wrong_rank():
    with pytest.raises(
        ValueError,
        match=r"^key_padding_mask must be 2-D \(B, K\), got shape "
        r"\(2, 3, 3\)$",
    ):
        check_bool_mask(
            torch.ones(2, 3, 3, dtype=torch.bool), "key_padding_mask", shape="(B, K)", ndim=2
        )
    with pytest.raises(ValueError, match=r"^m must be 2-D, got shape \(3,\)$"):
        check_bool_mask(torch.ones(3, dtype=torch.bool), "m", ndim=2)


def test_all_checks_raise_value_error_only():
    """A chapter catches one exception type: every bad call above is a ValueError."""
    calls = [
        lambda: check_int(math.nan, "n"),
        lambda: check_real(object(), "x"),
        lambda: check_probability([0.1]),
        lambda: check_tensor({}, "x", "(N,)"),
        lambda: check_bool_mask(object()),
        lambda: check_shape(object(), (1,)),
    ]
    for call in calls:
        with pytest.raises(ValueError):
            call()


def test_check_bool_takes_python_and_numpy_bools_only():
    from helpers.checks import check_bool

    assert check_bool(True, "flag") is True
    assert check_bool(np.bool_(False), "flag") is False
    for bad in ("False", 0, 1, None, 1.0):
        with pytest.raises(ValueError, match="flag must be True or False"):
            check_bool(bad, "flag")
