"""``torch.backends.quantized``: the quantized engine whose numerics the int8 modules of
``fiamma.ao`` follow (``'x86'``/``'fbgemm'``: activations may use 7 bits, ``reduce_range``;
``'qnnpack'``: full 8-bit activations). fiamma's int8 kernels are its own (NumPy, integer
accumulation), so the engine only selects the default qconfig and what PyTorch reports.

>>> import fiamma
>>> fiamma.backends.quantized.engine
'x86'
>>> fiamma.backends.quantized.engine = "qnnpack"
>>> fiamma.backends.quantized.engine = "x86"
"""
import sys
import types

supported_engines = ["qnnpack", "x86", "fbgemm", "none"]


class _QuantizedModule(types.ModuleType):
    _engine = "x86"

    @property
    def engine(self):
        return self._engine

    @engine.setter
    def engine(self, value):
        if value not in supported_engines:
            raise RuntimeError(f"quantized engine {value!r} is not supported: expected one of "
                               f"{supported_engines}")
        type(self)._engine = value


sys.modules[__name__].__class__ = _QuantizedModule
