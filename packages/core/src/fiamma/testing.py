"""``fiamma.testing``: PyTorch's ``torch.testing.assert_close`` (and the older
``assert_allclose``) for tests of code written against fiamma.

>>> import fiamma
>>> fiamma.testing.assert_close(fiamma.tensor([1.0, 2.0]), fiamma.tensor([1.0, 2.0000001]))
"""

import builtins
import math
from collections.abc import Mapping, Sequence

import numpy as np

from fiamma import _dtype as D
from fiamma._tensor import Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor", "devices_to_test", "cuda_skip_reason"]

# PyTorch's default (rtol, atol) by dtype; integers and bool compare exactly
_TOL = {D.float16: (1e-3, 1e-5), D.bfloat16: (1.6e-2, 1e-5), D.float32: (1.3e-6, 1e-5),
        D.float64: (1e-7, 1e-7), D.complex64: (1.3e-6, 1e-5), D.complex128: (1e-7, 1e-7)}


def _tol(dt, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but "
                         f"got no {'rtol' if rtol is None else 'atol'}.")
    if rtol is not None:
        return rtol, atol
    return _TOL.get(dt, (0.0, 0.0))


def _fail(msg, path, user_msg):
    if path:
        msg += "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in path)
    raise AssertionError(user_msg if isinstance(user_msg, str) else
                         user_msg(msg) if callable(user_msg) else msg)


def _compare_tensors(a, b, rtol, atol, equal_nan, check_dtype, check_device, check_stride,
                     path, msg):
    for attr, ok in (("shape", a.shape == b.shape),
                     ("device", not check_device or a.device == b.device),
                     ("dtype", not check_dtype or a.dtype is b.dtype),
                     ("stride()", not check_stride or a.stride() == b.stride())):
        if not ok:
            va = getattr(a, attr.rstrip("()"))
            vb = getattr(b, attr.rstrip("()"))
            va, vb = (va(), vb()) if callable(va) else (va, vb)
            _fail(f"The values for attribute '{attr}' do not match: {va} != {vb}.", path, msg)
    dt = D.promote_types(a.dtype, b.dtype)
    rtol, atol = _tol(dt, rtol, atol)
    # complex values compare as complex numbers: |a - b| <= atol + rtol * |b| (as PyTorch)
    # (uint64 stays uint64: as int64 its upper half would read negative)
    conv = D.complex128 if dt.is_complex else \
        D.float64 if dt.is_floating_point or dt is D.bfloat16 else \
        D.uint64 if dt is D.uint64 else D.int64
    x = a.detach().to(conv).numpy()
    y = b.detach().to(conv).numpy()
    if a.numel() == 0:
        return
    if conv._kind == 1 and rtol == 0 and atol == 0:
        bad = x != y
        diff = (np.maximum(x, y) - np.minimum(x, y)).astype(np.float64)
    else:
        wide = np.complex128 if conv is D.complex128 else np.float64
        x, y = x.astype(wide), y.astype(wide)
        with np.errstate(invalid="ignore"):
            diff = np.abs(x - y)
            bad = ~(diff <= atol + rtol * np.abs(y))
        both_nan = np.isnan(x) & np.isnan(y)
        same_inf = np.isinf(x) & (x == y)
        bad &= ~same_inf
        bad = np.where(both_nan, not equal_nan, bad)
    if not bad.any():
        return
    n_bad, n = int(bad.sum()), bad.size
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = diff / np.abs(y)
    ia = np.unravel_index(int(np.nanargmax(np.where(np.isnan(diff), -1, diff))), bad.shape)
    ir = np.unravel_index(int(np.nanargmax(np.where(np.isnan(rel), -1, rel))), bad.shape)
    if a.ndim == 0:
        text = (f"Scalars are not close!\n\nExpected {y.item()} but got {x.item()}.\n"
                f"Absolute difference: {diff.item()} (up to {atol} allowed)\n"
                f"Relative difference: {rel.item()} (up to {rtol} allowed)")
    else:
        text = (f"Tensor-likes are not close!\n\nMismatched elements: {n_bad} / {n} "
                f"({100.0 * n_bad / n:.1f}%)\n"
                f"Greatest absolute difference: {diff[ia]} at index {tuple(map(int, ia))} "
                f"(up to {atol} allowed)\n"
                f"Greatest relative difference: {rel[ir]} at index {tuple(map(int, ir))} "
                f"(up to {rtol} allowed)")
    _fail(text, path, msg)


def _compare(a, b, path, kw):
    if isinstance(a, Tensor) or isinstance(b, Tensor) or isinstance(a, np.ndarray):
        if not isinstance(b, type(a)) and not (isinstance(a, Tensor) and isinstance(b, Tensor)):
            _fail(f"No comparison pair was able to handle inputs of type {type(a)} and "
                  f"{type(b)}.", path, kw["msg"])
        if isinstance(a, np.ndarray):
            from fiamma import from_numpy

            a, b = from_numpy(np.ascontiguousarray(a)), from_numpy(np.ascontiguousarray(b))
        _compare_tensors(a, b, kw["rtol"], kw["atol"], kw["equal_nan"], kw["check_dtype"],
                         kw["check_device"], kw["check_stride"], path, kw["msg"])
        return
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            _fail(f"The keys of the mappings do not match:\n{sorted(map(str, a))} != "
                  f"{sorted(map(str, b))}", path, kw["msg"])
        for k in a:
            _compare(a[k], b[k], path + [k], kw)
        return
    if isinstance(a, Sequence) and not isinstance(a, str) and isinstance(b, Sequence) and \
            not isinstance(b, str):
        if len(a) != len(b):
            _fail(f"The length of the sequences mismatch: {len(a)} != {len(b)}", path,
                  kw["msg"])
        for i, (x, y) in enumerate(zip(a, b)):
            _compare(x, y, path + [i], kw)
        return
    if isinstance(a, (builtins.bool, int, float)) and isinstance(b, (builtins.bool, int, float)):
        if kw["check_dtype"] and type(a) is not type(b):
            _fail(f"The values for attribute 'dtype' do not match: {type(a)} != {type(b)}.",
                  path, kw["msg"])
        dt = D.float64 if isinstance(a, float) or isinstance(b, float) else D.int64
        rtol, atol = _tol(dt, kw["rtol"], kw["atol"])
        if dt is D.float64 and math.isnan(a) and math.isnan(b) and kw["equal_nan"]:
            return
        if a == b or (dt is D.float64 and abs(a - b) <= atol + rtol * abs(b)):
            return
        diff = abs(a - b)
        rel = diff / abs(b) if b else math.inf
        _fail(f"Scalars are not close!\n\nExpected {b} but got {a}.\n"
              f"Absolute difference: {diff} (up to {atol} allowed)\n"
              f"Relative difference: {rel} (up to {rtol} allowed)", path, kw["msg"])
        return
    if a != b:
        _fail(f"Objects are not equal: {a!r} != {b!r}", path, kw["msg"])


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Raise AssertionError unless ``actual`` and ``expected`` are close:
    ``|actual - expected| <= atol + rtol * |expected|`` elementwise, with PyTorch's default
    tolerances by dtype (float32: rtol 1.3e-6, atol 1e-5; float64: 1e-7, 1e-7; float16:
    1e-3, 1e-5; bfloat16: 1.6e-2, 1e-5; integers and bool: exact). Tensors must also agree
    in shape, device and dtype (``check_dtype=False`` compares in the promoted dtype);
    sequences and mappings are compared item by item; numbers by value.

    >>> import fiamma
    >>> try:
    ...     fiamma.testing.assert_close(fiamma.tensor([1.0, 2.0]), fiamma.tensor([1.0, 2.5]))
    ... except AssertionError as e:
    ...     print(str(e).splitlines()[0])
    Tensor-likes are not close!
    """
    _compare(actual, expected, [], {"rtol": rtol, "atol": atol, "equal_nan": equal_nan,
                                    "check_device": check_device, "check_dtype": check_dtype,
                                    "check_stride": check_stride, "msg": msg})


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """PyTorch's deprecated ``assert_allclose``: ``assert_close`` without the dtype check,
    nans equal by default."""
    if not isinstance(actual, Tensor):
        from fiamma import tensor

        actual = tensor(actual)
    if not isinstance(expected, Tensor):
        from fiamma import tensor

        expected = tensor(expected, dtype=actual.dtype)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_dtype=False, msg=msg or None)


def devices_to_test():
    """The devices besides the CPU that device-parametrised tests run on, as (name, reason)
    pairs, reason None when the device can run here: ``xp`` (the NumPy reference device of the
    array-module backend) always, ``cuda`` with the reason it can't run (no CuPy, no GPU).
    The environment variable FIAMMA_TEST_DEVICES (comma-separated, default "xp,cuda") picks
    which."""
    import os

    wanted = os.environ.get("FIAMMA_TEST_DEVICES", "xp,cuda").split(",")
    out = []
    if "xp" in wanted:
        out.append(("xp", None))
    if "cuda" in wanted:
        out.append(("cuda", cuda_skip_reason()))
    return out


def cuda_skip_reason():
    """Why CUDA tests can't run here (no CuPy, no GPU), or None when they can. CuPy is probed
    directly, so fiamma.cuda's state stays untouched."""
    try:
        import cupy

        return None if cupy.cuda.runtime.getDeviceCount() > 0 else "no CUDA GPU"
    except Exception as e:  # no CuPy, or no driver
        return f"CuPy unavailable ({type(e).__name__})"


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` (ints or one sequence) and ``dtype`` filled with random values in
    ``[low, high)`` (PyTorch's ``torch.testing.make_tensor``): floating and complex dtypes
    default to [-9, 9] (each of the real and imaginary parts for complex), signed integers to
    [-9, 10), unsigned to [0, 10), bool to {False, True}. ``exclude_zero`` replaces zeros with
    the dtype's smallest positive step (1 for integers, ``eps`` for floats);
    ``noncontiguous`` returns a strided view over a buffer twice the size; ``memory_format``
    lays the values out as ``fiamma.channels_last`` & co. The values come from fiamma's
    default generator (``fiamma.manual_seed`` makes them repeat).

    >>> import fiamma
    >>> t = make_tensor(2, 3, dtype=fiamma.int64, low=0, high=4)
    >>> t.shape, bool(((t >= 0) & (t < 4)).all())
    (fiamma.Size([2, 3]), True)
    """
    import fiamma

    if len(shape) == 1 and isinstance(shape[0], (list, tuple, fiamma.Size)):
        shape = tuple(shape[0])
    for s in shape:
        if type(s) is not int or s < 0:
            raise TypeError(f"make_tensor: shape must be non-negative ints, got {shape!r}")
    if not isinstance(dtype, fiamma.dtype):
        raise TypeError(f"make_tensor: dtype must be a fiamma.dtype, got {type(dtype).__name__}")
    for v, name in ((low, "low"), (high, "high")):
        if isinstance(v, float) and math.isnan(v):
            raise ValueError(f"make_tensor: {name} cannot be nan, but got {name}={v}")
    if requires_grad and not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"make_tensor: requires_grad=True is not supported for {dtype}")
    rng = np.random.default_rng(int(fiamma.randint(0, 2**62, ()).item()))
    n = 1
    for s in shape:
        n *= s
    if dtype is D.bool:
        vals = rng.random(n) < 0.5
    else:
        integral = not (dtype.is_floating_point or dtype.is_complex)
        if integral:
            info = fiamma.iinfo(dtype)
            lo_d, hi_d = (-9 if dtype.is_signed else 0), 10
            lo = lo_d if low is None else math.ceil(low)
            hi = hi_d if high is None else math.ceil(high)
            lo, hi = max(lo, info.min), min(hi, info.max + 1)
        else:
            lo = -9.0 if low is None else float(low)
            hi = 9.0 if high is None else float(high)
        if lo > hi:
            raise ValueError(f"make_tensor: low must be less than or equal to high, but got "
                             f"low={lo} and high={hi}")
        if integral:
            vals = rng.integers(lo, max(hi, lo + 1), n)
        else:
            vals = rng.uniform(lo, hi, n)
            if dtype.is_complex:
                vals = vals + 1j * rng.uniform(lo, hi, n)
        if exclude_zero:
            step = 1 if integral else float(fiamma.finfo(dtype).eps)
            vals = np.where(vals == 0, step, vals)
    t = fiamma.tensor(vals, device=device).to(dtype).reshape(shape)
    if noncontiguous and n > 1:
        buf = fiamma.empty(2 * n, dtype=dtype, device=t.device)
        buf[::2] = t.reshape(-1)
        strides, acc = [], 2
        for s in reversed(shape):
            strides.append(acc)
            acc *= max(s, 1)
        t = buf.as_strided(shape, tuple(reversed(strides)))
    elif memory_format is not None:
        t = t.contiguous(memory_format=memory_format)
    if requires_grad:
        t.requires_grad_(True)
    return t
