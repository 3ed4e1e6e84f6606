"""fiamma.amp: automatic mixed precision with PyTorch's ``torch.amp`` API.

``autocast("cpu", dtype=fiamma.bfloat16)`` runs the ops on PyTorch's CPU autocast
lower-precision list (matmul, mm, bmm, addmm, baddbmm, addbmm, linear, the convolutions and
transposed convolutions, prelu, scaled_dot_product_attention) in bfloat16 (or float16), and
the ops on its float32 list (the losses) in float32, whatever dtype their inputs come in.
``GradScaler`` scales a loss, unscales gradients, skips steps whose gradients hold inf/NaN
and adapts the scale.

>>> import fiamma
>>> w = fiamma.randn(4, 3, requires_grad=True)
>>> with fiamma.autocast("cpu", dtype=fiamma.bfloat16):
...     y = fiamma.mm(fiamma.randn(2, 4), w)
>>> y.dtype, w.dtype
(fiamma.bfloat16, fiamma.float32)

Op implementers (sibling distributions) put their op on a list with :func:`cast_lower` /
:func:`float32_op`, checking the cheap flag that :func:`register_autocast_flag` keeps first.
"""

from fiamma._autocast import float32_op, listen as register_autocast_flag
from fiamma.amp.autocast_mode import (
    autocast,
    cast_lower,
    clear_autocast_cache,
    custom_bwd,
    custom_fwd,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from fiamma.amp.grad_scaler import GradScaler, OptState

__all__ = ["autocast", "GradScaler", "OptState", "custom_fwd", "custom_bwd",
           "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "set_autocast_enabled", "set_autocast_dtype", "clear_autocast_cache",
           "cast_lower", "float32_op", "register_autocast_flag"]
