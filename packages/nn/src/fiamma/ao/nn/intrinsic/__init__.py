"""``fiamma.ao.nn.intrinsic`` (``torch.ao.nn.intrinsic``): fused module sequences.

Each class is an ``nn.Sequential`` of the modules it fuses (so its state-dict keys are
``0.weight``, ``1.running_mean``, ...) and computes exactly what they compute in a row.
``fuse_modules`` returns them: ``ConvReLU2d`` for conv+relu or (eval) conv+bn+relu with the
batch norm folded into the conv; ``ConvBn2d``/``ConvBnReLU2d`` for quantization-aware
training (``fuse_modules_qat``), where the batch norm stays a module.

    >>> from fiamma import nn
    >>> import fiamma.ao.nn.intrinsic as nni
    >>> m = nni.ConvReLU2d(nn.Conv2d(3, 8, 3), nn.ReLU())
    >>> sorted(m.state_dict())
    ['0.bias', '0.weight']
"""
from fiamma import nn
from fiamma.nn.utils.parametrize import type_before_parametrizations

__all__ = ["ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "ConvBn1d", "ConvBn2d", "ConvBn3d",
           "ConvBnReLU1d", "ConvBnReLU2d", "ConvBnReLU3d", "LinearReLU", "LinearBn1d",
           "BNReLU2d", "BNReLU3d", "_FusedModule"]


class _FusedModule(nn.Sequential):
    """Base of the fused sequences: checks the types of the modules it is given (a
    parametrized module counts as its original class)."""
    _types = ()

    def __init__(self, *mods):
        types = [type_before_parametrizations(m) for m in mods]
        if len(mods) != len(self._types) or not all(
                t is want for t, want in zip(types, self._types)):
            want = ", ".join(t.__name__ for t in self._types)
            got = ", ".join(t.__name__ for t in types)
            raise TypeError(f"{type(self).__name__}: expected modules ({want}), got ({got})")
        super().__init__(*mods)


def _fused(name, *types, doc):
    return type(name, (_FusedModule,), {"_types": types, "__doc__": doc,
                                        "__module__": __name__})


_N = {1: "1d", 2: "2d", 3: "3d"}
_CONV = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
_BN = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}

ConvReLU1d = _fused("ConvReLU1d", nn.Conv1d, nn.ReLU, doc="Conv1d followed by ReLU.")
ConvReLU2d = _fused("ConvReLU2d", nn.Conv2d, nn.ReLU, doc="Conv2d followed by ReLU.")
ConvReLU3d = _fused("ConvReLU3d", nn.Conv3d, nn.ReLU, doc="Conv3d followed by ReLU.")
ConvBn1d = _fused("ConvBn1d", nn.Conv1d, nn.BatchNorm1d, doc="Conv1d followed by BatchNorm1d.")
ConvBn2d = _fused("ConvBn2d", nn.Conv2d, nn.BatchNorm2d, doc="Conv2d followed by BatchNorm2d.")
ConvBn3d = _fused("ConvBn3d", nn.Conv3d, nn.BatchNorm3d, doc="Conv3d followed by BatchNorm3d.")
ConvBnReLU1d = _fused("ConvBnReLU1d", nn.Conv1d, nn.BatchNorm1d, nn.ReLU,
                      doc="Conv1d, BatchNorm1d and ReLU in a row.")
ConvBnReLU2d = _fused("ConvBnReLU2d", nn.Conv2d, nn.BatchNorm2d, nn.ReLU,
                      doc="Conv2d, BatchNorm2d and ReLU in a row.")
ConvBnReLU3d = _fused("ConvBnReLU3d", nn.Conv3d, nn.BatchNorm3d, nn.ReLU,
                      doc="Conv3d, BatchNorm3d and ReLU in a row.")
LinearReLU = _fused("LinearReLU", nn.Linear, nn.ReLU, doc="Linear followed by ReLU.")
LinearBn1d = _fused("LinearBn1d", nn.Linear, nn.BatchNorm1d,
                    doc="Linear followed by BatchNorm1d.")
BNReLU2d = _fused("BNReLU2d", nn.BatchNorm2d, nn.ReLU, doc="BatchNorm2d followed by ReLU.")
BNReLU3d = _fused("BNReLU3d", nn.BatchNorm3d, nn.ReLU, doc="BatchNorm3d followed by ReLU.")


def __getattr__(name):
    if name in ("quantized", "qat"):  # int8 / QAT fused modules (import on first use)
        import importlib
        return importlib.import_module(__name__ + "." + name)
    from fiamma.ao._absent import absent
    absent(__name__, name, __all__)
