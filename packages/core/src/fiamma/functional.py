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
    split,
    stft,
    tensordot,
    unique,
    unique_consecutive,
    unravel_index,
)

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu", "norm",
           "meshgrid", "split", "stft", "tensordot", "unique", "unique_consecutive",
           "unravel_index"]

# PyTorch's module also holds these; fiamma has no randomized low-rank SVD/PCA
# (docs/porting_absent.toml, group linalg-old)
_ABSENT = ("pca_lowrank", "svd_lowrank")


def __getattr__(name):
    if name in _ABSENT:
        raise AttributeError(f"fiamma.functional.{name} (torch.functional.{name}) is not "
                             "available: fiamma has no randomized low-rank SVD/PCA; "
                             "fiamma.linalg.svd computes the exact decomposition")
    raise AttributeError(f"module 'fiamma.functional' has no attribute {name!r}")
