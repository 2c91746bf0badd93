"""Tests for helpers.tasks.images: images as sequences of patches."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from helpers.tasks.images import image_to_patches, patches_to_image


def test_image_to_patches_order_and_roundtrip():
    image = torch.arange(2 * 4 * 6, dtype=torch.float32).reshape(2, 4, 6)  # (C, H, W)
    patches = image_to_patches(image, 2)
    assert patches.shape == (6, 8)
    # patch 4 is row 1, column 1: pixels (2..3, 2..3), channel values of a pixel together
    expected = torch.stack([image[:, r, c] for r in (2, 3) for c in (2, 3)]).reshape(-1)
    torch.testing.assert_close(patches[4], expected)
    torch.testing.assert_close(patches_to_image(patches, 2, 4, 6), image)


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
def test_image_to_patches_matches_unfold(channels, patch, rows, cols):
    torch.manual_seed(0)
    images = torch.randn(2, channels, rows * patch, cols * patch)
    patches = image_to_patches(images, patch)  # (B, N, P*P*C)
    unfolded = F.unfold(images, patch, stride=patch).transpose(1, 2)  # (B, N, C*P*P)
    reordered = unfolded.reshape(2, rows * cols, channels, patch * patch).transpose(2, 3)
    torch.testing.assert_close(patches, reordered.reshape(2, rows * cols, -1))
    torch.testing.assert_close(patches_to_image(patches, patch, rows * patch, cols * patch), images)


def test_patches_keep_any_dtype():
    image = torch.arange(16).reshape(1, 4, 4) > 7  # a bool picture
    patches = image_to_patches(image, 2)
    assert patches.dtype == torch.bool and patches.shape == (4, 4)
    assert torch.equal(patches_to_image(patches, 2, 4, 4), image)


def test_an_empty_batch_round_trips():
    """Regression: patches_to_image reshaped an empty batch with -1 and could not infer it."""
    images = torch.zeros(0, 3, 4, 4)
    patches = image_to_patches(images, 2)
    assert patches.shape == (0, 4, 12)
    assert patches_to_image(patches, 2, 4, 4).shape == (0, 3, 4, 4)


def test_patches_reject_bad_sizes():
    with pytest.raises(ValueError, match="multiples of patch_size=4, got H=6, W=8"):
        image_to_patches(torch.randn(3, 6, 8), 4)
    with pytest.raises(ValueError, match=r"image must have shape \(C, H, W\)"):
        image_to_patches(torch.randn(6, 8), 2)
    with pytest.raises(ValueError, match="N=4"):
        patches_to_image(torch.randn(5, 12), 2, 4, 4)


@pytest.mark.parametrize(
    "call, pattern",
    [
        (
            lambda: image_to_patches(torch.zeros(1, 4, 4), 0),
            "patch_size must be a positive integer",
        ),
        (
            lambda: image_to_patches(torch.zeros(1, 4, 4), 2.0),
            "patch_size must be a positive integer",
        ),
        (
            lambda: image_to_patches(torch.zeros(1, 4, 4), True),
            "patch_size must be a positive integer",
        ),
        (
            lambda: image_to_patches([[[0.0]]], 1),
            r"image must be a torch.Tensor of shape \(C, H, W\)",
        ),
        (lambda: patches_to_image(torch.zeros(4, 4), 2, 0, 4), "height must be a positive integer"),
        (lambda: patches_to_image(torch.zeros(4, 4), 2, 4, -4), "width must be a positive integer"),
        (lambda: patches_to_image(torch.zeros(4, 4), 3, 4, 4), "multiples of patch_size=3"),
        (lambda: patches_to_image(torch.zeros(4, 6), 2, 4, 4), r"patches must have shape"),
        (lambda: patches_to_image(torch.zeros(4, 0), 2, 4, 4), r"C >= 1, got \(4, 0\)"),
        (
            lambda: patches_to_image([[0.0] * 4] * 4, 2, 4, 4),
            r"patches must have shape .* got list",
        ),
    ],
)
def test_patches_reject_bad_arguments(call, pattern):
    """Regression: zero channels failed in reshape with a RuntimeError."""
    with pytest.raises(ValueError, match=pattern):
        call()
