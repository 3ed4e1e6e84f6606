"""``fiamma.cuda.amp``: PyTorch's deprecated ``torch.cuda.amp.autocast`` and ``GradScaler``
spellings, which are ``fiamma.amp.autocast("cuda", ...)`` and ``fiamma.amp.GradScaler("cuda",
...)`` and warn as PyTorch's (a ``FutureWarning`` naming the new spelling): without CUDA both
also warn once and disable themselves (the program runs in full precision, unscaled), as
PyTorch's do on a machine without a GPU.
"""

import warnings

from fiamma.amp import GradScaler as _GradScaler, autocast as _autocast

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(_autocast):
    """``fiamma.amp.autocast("cuda", ...)``."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        import fiamma

        # PyTorch's deprecation warning for this spelling
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", dtype=fiamma.float16 if dtype is None else dtype,
                         enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``fiamma.amp.GradScaler("cuda", ...)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    from fiamma.amp import custom_fwd as f

    return f(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    from fiamma.amp import custom_bwd as f

    return f(bwd, device_type="cuda")
