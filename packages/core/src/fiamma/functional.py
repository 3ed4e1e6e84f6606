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
