"""Tensor layouts (``torch.layout``): ``fiamma.strided`` (dense), ``fiamma.sparse_coo``, the
compressed ``sparse_csr``/``sparse_csc``/``sparse_bsr``/``sparse_bsc`` and ``jagged``."""

from fiamma import _dtype as D

__all__ = ["layout", "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr",
           "sparse_bsc", "jagged"]


class NamedConstant:
    """A constant of the ``fiamma`` namespace known by its name (a layout, a memory format):
    printed as ``fiamma.<name>`` and pickled by that name, so it stays one object."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return D.NAMESPACE + self.name

    def __reduce__(self):
        return self.name  # pickled as the module-level name fiamma.<name>


class layout(NamedConstant):
    """How a tensor's elements are stored (PyTorch's ``torch.layout``): ``fiamma.strided`` for
    dense tensors, ``fiamma.sparse_coo`` for sparse COO tensors. One object per layout, so
    compare with ``is`` or ``==``.

    >>> import fiamma
    >>> fiamma.ones(2).layout is fiamma.strided
    True
    """

    __slots__ = ()


layout.__module__ = "fiamma"
strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")  # the compressed layouts (fiamma._sparse_compressed)
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
jagged = layout("jagged")  # nested tensors with one ragged dim (fiamma.nested)
