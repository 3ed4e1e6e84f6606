"""fiamma.distributed.nn: PyTorch's ``torch.distributed.nn``, collectives that autograd
differentiates (:mod:`fiamma.distributed.nn.functional`)."""

from fiamma.distributed.nn import functional  # noqa: F401

__all__ = ["functional"]
