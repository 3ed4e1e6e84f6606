"""``torch.functional``: the module PyTorch defines some of its top-level functions in
(``torch.functional.einsum`` is ``torch.einsum``). Scripts import it, often as ``F`` in place
of ``torch.nn.functional``; here each name is fiamma's top-level function of that name."""

from fiamma import (  # noqa: F401
    atleast_1d,
    atleast_2d,
    atleast_3d,
    block_diag,
    broadcast_shapes,
    broadcast_tensors,
    cartesian_prod,
    cdist,
    chain_matmul,
    einsum,
    istft,
    lu,
    meshgrid,
    norm,
    pca_lowrank,
    split,
    stft,
    svd_lowrank,
    tensordot,
    unique,
    unique_consecutive,
    unravel_index,
)

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu", "norm",
           "meshgrid", "pca_lowrank", "split", "stft", "svd_lowrank", "tensordot", "unique",
           "unique_consecutive", "unravel_index"]


def __getattr__(name):
    # PyTorch's torch/functional.py imports torch.nn.functional as F at module level, so
    # ``from torch.functional import F`` works there (the transfer-learning tutorial uses it).
    # fiamma.nn is another package: it is looked up on first use, not imported by core.
    if name == "F":
        try:
            import fiamma.nn.functional as nn_functional
        except ImportError as e:
            raise AttributeError(f"fiamma.functional.F is fiamma.nn.functional, which is not "
                                 f"installed ({e})") from e
        return nn_functional
    raise AttributeError(f"module 'fiamma.functional' has no attribute {name!r}")
