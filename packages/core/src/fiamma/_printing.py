"""PyTorch-like repr of tensors, and the print options (``fiamma.set_printoptions``).

Layout: every element of a tensor is formatted the same way (one mode and one width, chosen
from all the values shown), so columns line up across rows; each nesting level adds a bracket,
and rows of an n-d tensor are separated by n-1 newlines. Large tensors show only their edges.
"""

import contextlib
import math

import numpy as np

from fiamma import _dtype as D, _torch_function as _TF

__all__ = ["set_printoptions", "get_printoptions", "printoptions", "tensor_repr"]

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}

_opts = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print (as ``torch.set_printoptions``).

    precision: digits after the decimal point (default 4); threshold: element count above which
    a tensor is summarised with ``...`` (default 1000); edgeitems: items shown at each edge of a
    summarised dimension (default 3); linewidth: characters per line (default 80); profile:
    ``"default"``, ``"short"`` or ``"full"`` (applied first, then the other arguments);
    sci_mode: True/False forces scientific notation on/off, None (the default, also restored
    by every call that omits it) chooses automatically.

    >>> import fiamma
    >>> fiamma.set_printoptions(precision=2)
    >>> fiamma.tensor([1.2345, 2.0])
    tensor([1.23, 2.00])
    >>> fiamma.set_printoptions(profile="default")
    """
    new = dict(_opts)
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, "
                             f"got {profile!r}")
        new.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"set_printoptions: {name} must be a non-negative int, got "
                                 f"{value!r}")
            new[name] = value
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or \
                math.isnan(threshold):
            raise ValueError(f"set_printoptions: threshold must be a number, got {threshold!r}")
        new["threshold"] = threshold
    if sci_mode is not None and not isinstance(sci_mode, bool):
        raise ValueError(f"set_printoptions: sci_mode must be True, False or None, got "
                         f"{sci_mode!r}")
    new["sci_mode"] = sci_mode
    _opts.update(new)


def get_printoptions():
    """The current print options as a dict (keys as ``set_printoptions``'s arguments)."""
    return dict(_opts)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Context manager setting print options temporarily.

    >>> import fiamma
    >>> with fiamma.printoptions(precision=1):
    ...     print(fiamma.tensor([0.25, 1.5]))
    tensor([0.2, 1.5])
    """
    saved = dict(_opts)
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        _opts.update(saved)


# ---- values -------------------------------------------------------------------------------------

def _host_array(t):
    """The tensor's values as a NumPy array (a view when possible; bfloat16 read as int16)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t._dtype is D.bfloat16:
        return t.view(D.int16).numpy()
    return t.numpy()


def _bf16_bits_to_f32(bits):
    return (bits.astype(np.uint16).astype(np.uint32) << 16).view(np.float32)


def _edges(a, edgeitems):
    """The values that a summarised print shows: ``edgeitems`` at each end of each long dim."""
    idx = []
    for n in a.shape:
        if n > 2 * edgeitems:
            idx.append(np.r_[0:edgeitems, n - edgeitems:n])
        else:
            idx.append(np.arange(n))
    return a[np.ix_(*idx)] if idx else a


class _Formatter:
    """Formats every element of one tensor with a common mode and width."""

    def __init__(self, values, dt, precision, sci_mode):
        self.floating = dt._kind == 2
        self.precision = precision
        flat = values.ravel()
        if not self.floating:
            self.sci = self.int_mode = False
            strs = [str(v) for v in (flat.astype(bool) if dt._kind == 0 else flat).tolist()]
            self.width = max(map(len, strs), default=1)
            return
        flat = flat.astype(np.float64)
        nz = flat[np.isfinite(flat) & (flat != 0)]
        self.int_mode = True
        self.sci = False
        if nz.size:
            mag = np.abs(nz)
            hi, lo = float(mag.max()), float(mag.min())
            self.int_mode = bool(np.all(np.ceil(nz) == nz))
            wide = hi / lo > 1000.0 or hi > 1.0e8
            self.sci = wide if self.int_mode else wide or lo < 1.0e-4
            if sci_mode is not None:  # (a tensor of only zeros, nan and inf ignores it)
                self.sci = sci_mode
        # the width comes from the nonzero finite values (as PyTorch): nan, inf and zeros are
        # padded to it but do not widen it
        self.width = max((len(self._plain(v)) for v in nz.tolist()), default=1)

    def _plain(self, v):
        if not self.floating:
            return str(v)
        if self.sci:
            return f"{v:.{self.precision}e}"
        if self.int_mode:
            return f"{v:.0f}" if math.isinf(v) or math.isnan(v) else f"{v:.0f}."
        return f"{v:.{self.precision}f}"

    def __call__(self, v):
        return self._plain(v).rjust(self.width)


class _ComplexFormatter:
    """Complex elements as PyTorch prints them: ``1.5000+2.0000j``, the real and the imaginary
    parts each formatted as the floats of their own kind among the values shown."""

    def __init__(self, values, precision, sci_mode):
        self.re = _Formatter(values.real, D.float64, precision, sci_mode)
        self.im = _Formatter(values.imag, D.float64, precision, sci_mode)
        self.width = self.re.width + self.im.width + 2

    def __call__(self, v):
        v = complex(v)
        r = self.re(v.real)
        i = (self.im(v.imag) + "j").lstrip()
        return r + i if i[0] in "+-" else r + "+" + i


# ---- layout -------------------------------------------------------------------------------------

def _vector(values, full_len, indent, fmt, opts):
    e = opts["edgeitems"]
    items = [fmt(v) for v in values]
    if full_len > len(values):  # summarised
        items = items[:e] + [" ..." if e else "..."] + items[e:]
    per_line = max(1, (opts["linewidth"] - indent) // (fmt.width + 2))
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _render(a, shape, indent, fmt, opts):
    """``a``: the values shown (maybe summarised); ``shape``: the full shape they come from."""
    if a.ndim == 0:
        return fmt(a.item())
    if a.ndim == 1:
        return _vector(a.tolist(), shape[0], indent, fmt, opts)
    rows = [_render(a[i], shape[1:], indent + 1, fmt, opts) for i in range(a.shape[0])]
    if shape[0] > a.shape[0]:  # summarised
        e = opts["edgeitems"]
        rows = rows[:e] + ["..."] + rows[e:]
    sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(rows) + "]"


def _grad_fn_name(g):
    name = getattr(g, "name", None)
    return str(name()) if callable(name) else type(g).__name__


def _add_suffixes(text, suffixes, indent, linewidth):
    # a suffix goes on a new line when it would not fit (with its ", " and the closing ")")
    # after the last line; once one has wrapped, the following ones wrap too
    last = len(text) - text.rfind("\n") + 1
    wrapped = False
    for suf in suffixes:
        if wrapped or last + len(suf) + 2 > linewidth:
            text += ",\n" + " " * indent + suf
            last = indent + len(suf)
            wrapped = True
        else:
            text += ", " + suf
            last += len(suf) + 2
    return text + ")"


def tensor_repr(t, *, tensor_contents=None):
    """``repr(t)``: ``tensor([1., 2.], dtype=fiamma.float64, requires_grad=True)``.
    ``tensor_contents``: the text shown in place of the values (what a ``__torch_dispatch__``
    wrapper's ``__repr__`` passes: ``LoggingTensor(tensor([1., 2.]))``)."""
    opts = _opts
    # a subclass under the __torch_function__ protocol (or with __torch_dispatch__) shows its
    # class name, as PyTorch's
    cls = type(t)
    prefix = "tensor(" if cls is _TF._TENSOR[0] or (
        cls.__torch_function__ is _TF.disabled_torch_function_impl
        and cls not in _TF.TD_TYPES) else cls.__name__ + "("
    indent = len(prefix)
    suffixes = []
    dev = t.device
    if dev.type != "cpu":
        suffixes.append(f"device='{dev.type}:{dev.index or 0}'" if dev.type == "cuda"
                        else f"device='{dev}'")
    dt = t._dtype
    if tensor_contents is not None:
        body = str(tensor_contents)
    elif dev.type == "meta":  # no data: PyTorch's "tensor(..., device='meta', size=(2, 3))"
        body = "..."
        suffixes.append(f"size={tuple(t._shape)}")
        if dt is not D.get_default_dtype():
            suffixes.append(f"dtype={dt}")
    elif t._numel == 0:
        body = "[]"
        if len(t._shape) != 1:
            suffixes.append(f"size={tuple(t._shape)}")
        if dt is not D.get_default_dtype():  # no element tells the dtype (complex64 too)
            suffixes.append(f"dtype={dt}")
    else:
        a = _host_array(t)
        shown = _edges(a, opts["edgeitems"]) if t._numel > opts["threshold"] else a
        if dt is D.bfloat16:
            shown = _bf16_bits_to_f32(shown)
        fmt = _ComplexFormatter(shown, opts["precision"], opts["sci_mode"]) if dt._kind == 3 \
            else _Formatter(shown, dt, opts["precision"], opts["sci_mode"])
        if dt._kind == 0:
            shown = shown.astype(bool)
        body = _render(shown, a.shape, indent, fmt, opts)
        if not opts["edgeitems"]:  # "[...]" says nothing of the shape
            suffixes.append(f"size={tuple(t._shape)}")
        if dt not in (D.get_default_dtype(), D.int64, D.bool, D.default_complex_dtype()):
            suffixes.append(f"dtype={dt}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{_grad_fn_name(t.grad_fn)}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent, opts["linewidth"])


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {"__repr__": tensor_repr, "__str__": tensor_repr}
