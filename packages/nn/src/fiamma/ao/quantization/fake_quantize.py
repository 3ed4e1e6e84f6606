"""``FakeQuantize`` (``torch.ao.quantization.fake_quantize``): observe, then round the float
values to the quantization grid and back (``(clamp(round(x/s) + z) - z) * s``) with a
straight-through gradient, so a model can be trained for quantization (QAT).

    >>> import fiamma
    >>> from fiamma.ao.quantization import FakeQuantize
    >>> fq = FakeQuantize()
    >>> fq(fiamma.tensor([0.0, 0.1, 1.0])).shape
    fiamma.Size([3])
"""

import fiamma
from fiamma import nn
from fiamma.ao.quantization.observer import (
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    _with_args,
)
from fiamma.nn import _qtensor as Q

__all__ = ["FakeQuantizeBase", "FakeQuantize", "default_fake_quant",
           "default_weight_fake_quant", "default_per_channel_weight_fake_quant",
           "disable_fake_quant", "enable_fake_quant", "disable_observer", "enable_observer"]


class FakeQuantizeBase(nn.Module):
    """Base of the fake-quantize modules: the observer / fake-quant switches."""

    with_args = classmethod(_with_args)

    def __init__(self):
        super().__init__()
        self.register_buffer("fake_quant_enabled", fiamma.tensor([1], dtype=fiamma.uint8))
        self.register_buffer("observer_enabled", fiamma.tensor([1], dtype=fiamma.uint8))

    def enable_fake_quant(self, enabled=True):
        self.fake_quant_enabled.fill_(1 if enabled else 0)

    def disable_fake_quant(self):
        self.enable_fake_quant(False)

    def enable_observer(self, enabled=True):
        self.observer_enabled.fill_(1 if enabled else 0)

    def disable_observer(self):
        self.enable_observer(False)


class FakeQuantize(FakeQuantizeBase):
    """Observes with ``observer(**observer_kwargs)`` and fake-quantizes with its qparams."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=None, quant_max=None,
                 is_dynamic=False, **observer_kwargs):
        super().__init__()
        if quant_min is not None and quant_max is not None:
            observer_kwargs.update(quant_min=quant_min, quant_max=quant_max)
        self.activation_post_process = observer(**observer_kwargs)
        self.quant_min = self.activation_post_process.quant_min
        self.quant_max = self.activation_post_process.quant_max
        self.dtype = self.activation_post_process.dtype
        self.qscheme = self.activation_post_process.qscheme
        self.ch_axis = getattr(self.activation_post_process, "ch_axis", -1)
        self.is_dynamic = is_dynamic
        self.register_buffer("scale", fiamma.tensor([1.0]))
        self.register_buffer("zero_point", fiamma.tensor([0], dtype=fiamma.int32))

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def forward(self, X):
        if int(self.observer_enabled[0]):
            self.activation_post_process(X.detach())
            scale, zp = self.calculate_qparams()
            self.scale, self.zero_point = scale, zp.to(fiamma.int32)
        if int(self.fake_quant_enabled[0]):
            s = self.scale.to(X.dtype)
            z = self.zero_point.to(X.dtype)
            if self.ch_axis >= 0 and s.numel() > 1:
                shape = [1] * X.ndim
                shape[self.ch_axis] = -1
                s, z = s.reshape(shape), z.reshape(shape)
            q = fiamma.clamp(fiamma.round(X.detach() / s) + z, self.quant_min, self.quant_max)
            fq = (q - z) * s
            X = X + (fq - X).detach()  # straight-through: d fq / d X = 1
        return X

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled="
                f"{self.observer_enabled}, quant_min={self.quant_min}, "
                f"quant_max={self.quant_max}, dtype={self.dtype}, qscheme={self.qscheme}, "
                f"ch_axis={self.ch_axis}, scale={self.scale}, zero_point={self.zero_point}")


default_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0,
                                            quant_max=255, dtype=Q.quint8,
                                            qscheme=Q.per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver,
                                                   quant_min=-128, quant_max=127,
                                                   dtype=Q.qint8,
                                                   qscheme=Q.per_tensor_symmetric,
                                                   reduce_range=False)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127,
    dtype=Q.qint8, qscheme=Q.per_channel_symmetric, reduce_range=False, ch_axis=0)


def _apply(method):
    def fn(mod):
        if isinstance(mod, FakeQuantizeBase):
            getattr(mod, method)()
    fn.__name__ = method
    fn.__doc__ = f"``model.apply({method})``: calls ``{method}()`` on fake-quantize modules."
    return fn


disable_fake_quant = _apply("disable_fake_quant")
enable_fake_quant = _apply("enable_fake_quant")
disable_observer = _apply("disable_observer")
enable_observer = _apply("enable_observer")
