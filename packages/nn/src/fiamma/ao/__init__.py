"""``fiamma.ao`` (PyTorch's ``torch.ao``): the float-side pieces of eager-mode quantization.

fiamma has no quantized (int8) tensors or kernels, so what exists here is what a model needs
to be *written* for quantization and to run in float: ``QuantStub``/``DeQuantStub`` markers,
``nn.quantized.FloatFunctional``, the fused ``nn.intrinsic`` modules and ``fuse_modules``.
Observers, ``prepare``/``convert`` and the int8 modules are absent and fail by name.

    >>> import fiamma.ao.quantization as tq
    >>> tq.QuantStub()
    QuantStub()
"""
from fiamma.ao import nn, quantization  # noqa: F401

__all__ = ["nn", "quantization"]
