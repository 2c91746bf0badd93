"""Images as sequences of patches, as a Vision Transformer reads them (chapter 5).

:func:`image_to_patches` cuts an image into non-overlapping P × P patches, numbered row by
row, and flattens each into one vector: the tokens of self-attention over an image.
:func:`patches_to_image` puts them back. Shape letters: B batch, C channels, H height,
W width, P patch size, N patches.
"""

from __future__ import annotations

import torch

from helpers.checks import check_int, check_tensor, describe

__all__ = ["image_to_patches", "patches_to_image"]


def image_to_patches(image: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut an image into non-overlapping P × P patches and flatten each into a vector.

    Patches are numbered row by row, as a Vision Transformer reads them; each vector lists
    the patch's pixels row by row, the C channel values of a pixel together, i.e. a
    (P, P, C) block flattened. Any dtype works (the pixels are only rearranged).

    Args:
        image: (C, H, W) or (B, C, H, W), with H and W multiples of P.
        patch_size: P, a positive integer.

    Returns:
        (N, P·P·C) or (B, N, P·P·C) with N = (H / P) · (W / P).
    """
    patch_size = check_int(patch_size, "patch_size", 1)
    check_tensor(image, "image", "(C, H, W) or (B, C, H, W)", ndim=(3, 4))
    batched = image if image.dim() == 4 else image[None]
    num_batch, channels, height, width = batched.shape
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"image height and width must be multiples of patch_size="
            f"{patch_size}, got H={height}, W={width}"
        )
    rows, cols = height // patch_size, width // patch_size
    blocks = batched.reshape(num_batch, channels, rows, patch_size, cols, patch_size)
    blocks = blocks.permute(0, 2, 4, 3, 5, 1)  # (B, rows, cols, P, P, C)
    patches = blocks.reshape(num_batch, rows * cols, patch_size * patch_size * channels)
    return patches if image.dim() == 4 else patches[0]


def patches_to_image(
    patches: torch.Tensor, patch_size: int, height: int, width: int
) -> torch.Tensor:
    """The inverse of :func:`image_to_patches`: (N, P·P·C) or (B, N, P·P·C) back to
    (C, H, W) or (B, C, H, W).

    Args:
        patches: (N, P·P·C) or (B, N, P·P·C) with N = (H / P) · (W / P) and C >= 1.
        patch_size: P, a positive integer.
        height, width: H and W of the image, positive multiples of P.

    Returns:
        (C, H, W) or (B, C, H, W).
    """
    patch_size = check_int(patch_size, "patch_size", 1)
    height, width = check_int(height, "height", 1), check_int(width, "width", 1)
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"height and width must be multiples of patch_size={patch_size}, "
            f"got height={height}, width={width}"
        )
    rows, cols = height // patch_size, width // patch_size
    if (
        not isinstance(patches, torch.Tensor)
        or patches.dim() not in (2, 3)
        or patches.shape[-2] != rows * cols
        or patches.shape[-1] % (patch_size**2)
        or patches.shape[-1] == 0
    ):
        got = tuple(patches.shape) if isinstance(patches, torch.Tensor) else describe(patches)
        raise ValueError(
            f"patches must have shape (N, P·P·C) or (B, N, P·P·C) with "
            f"N={rows * cols}, P={patch_size} and C >= 1, got {got}"
        )
    batched = patches if patches.dim() == 3 else patches[None]
    channels = batched.shape[-1] // patch_size**2
    blocks = batched.reshape(batched.shape[0], rows, cols, patch_size, patch_size, channels)
    image = blocks.permute(0, 5, 1, 3, 2, 4).reshape(
        batched.shape[0], channels, rows * patch_size, cols * patch_size
    )
    return image if patches.dim() == 3 else image[0]
