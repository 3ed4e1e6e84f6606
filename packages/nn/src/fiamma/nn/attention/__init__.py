"""``fiamma.nn.attention``: the choice of kernels behind ``F.scaled_dot_product_attention``
(PyTorch's ``torch.nn.attention``).

``sdpa_kernel(backends)`` enables only the named :class:`SDPBackend` values inside a ``with``
block, through the switches of ``fiamma.backends.cuda`` (``flash_sdp_enabled()`` and the
others read them), and restores the previous switches on leaving. fiamma's CPU attention is
one kernel that stands for PyTorch's CPU kernels, the math one and the CPU flash one: it runs
while either is enabled, and ``scaled_dot_product_attention`` raises, as PyTorch's does on the
CPU, when neither is (for example inside ``sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)``).
With the flash kernel alone it takes what PyTorch's CPU flash kernel takes (4-d inputs, one head
size, non-empty sequences) and raises PyTorch's "No available kernel" otherwise.

>>> import fiamma
>>> import fiamma.nn.functional as F
>>> from fiamma.nn.attention import SDPBackend, sdpa_kernel
>>> q = fiamma.randn(1, 2, 4, 8)
>>> with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
...     F.scaled_dot_product_attention(q, q, q).shape
fiamma.Size([1, 2, 4, 8])
"""

import contextlib
import enum

import fiamma.backends.cuda as _cuda_flags

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS",
           "list_flash_attention_impls", "current_flash_attention_impl"]

# PyTorch warns about why a fused kernel was not chosen when this is set; fiamma has no
# choice between kernels to explain, so the flag is kept for programs that set it.
WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.Enum):
    """The kernels of scaled dot-product attention, with PyTorch's values."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __repr__(self):
        return f"<SDPBackend.{self.name}: {self.value}>"

    def __int__(self):
        return self.value

    __index__ = __int__


# the fiamma.backends.cuda switch behind each backend (ERROR and OVERRIDEABLE have none)
_SWITCH = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
           SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
           SDPBackend.CUDNN_ATTENTION: "cudnn"}


def _backends_list(backends):
    if isinstance(backends, SDPBackend):
        return [backends]
    if isinstance(backends, (list, tuple, set, frozenset)):
        out = list(backends)
        for b in out:
            if not isinstance(b, SDPBackend):
                raise TypeError("sdpa_kernel: backends must be SDPBackend values or a list of "
                                f"them, got an element {b!r} ({type(b).__name__})")
        return out
    raise TypeError("sdpa_kernel: backends must be an SDPBackend or a list of SDPBackend, got "
                    f"{type(backends).__name__}")


def _cur_sdpa_kernel_backends():
    """The backends whose switch is on now."""
    return [b for b, s in _SWITCH.items() if _cuda_flags._sdp[s]]


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Enable only ``backends`` (an :class:`SDPBackend` or a list of them) for
    ``scaled_dot_product_attention`` inside the ``with`` block; the switches are restored
    when it ends, also on an exception. ``set_priority`` (the order of the list as the order
    in which kernels are tried) is accepted: fiamma has one kernel to try."""
    wanted = _backends_list(backends)
    saved = dict(_cuda_flags._sdp)
    for b, s in _SWITCH.items():
        _cuda_flags._sdp[s] = b in wanted
    try:
        yield
    finally:
        _cuda_flags._sdp.update(saved)


def list_flash_attention_impls():
    """The names of the registered alternative flash-attention implementations: none in
    fiamma (PyTorch registers CUDA ones such as FlashAttention-3)."""
    return []


def current_flash_attention_impl():
    """The active alternative flash-attention implementation: ``None`` (the built-in one)."""
    return None


def __getattr__(name):
    # the submodules load on first use (``torch.nn.attention.bias.causal_lower_right`` works
    # in PyTorch without importing ``bias`` first)
    if name in ("bias", "flex_attention"):
        import importlib

        return importlib.import_module(f"fiamma.nn.attention.{name}")
    raise AttributeError(f"module 'fiamma.nn.attention' has no attribute {name!r}")
