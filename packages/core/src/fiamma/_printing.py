"""PyTorch-like repr of tensors."""

import numpy as np

from fiamma import _dtype as D


def tensor_repr(t):
    src = t.detach()
    if src._dtype is D.bfloat16:
        src = src.float()
    a = src.numpy() if src.device.type == "cpu" else src.cpu().numpy()
    body = np.array2string(a, separator=", ", prefix="tensor(")
    extra = ""
    if t._dtype not in (D.get_default_dtype(), D.int64, D.bool) or t._numel == 0:
        extra += f", dtype={t._dtype}"
    if t.requires_grad:
        extra += ", requires_grad=True"
    return f"tensor({body}{extra})"
