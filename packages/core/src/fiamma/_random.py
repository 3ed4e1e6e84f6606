"""Random numbers: the Philox generator, the global default generator, sampling functions and
the in-place ``Tensor.<dist>_`` methods.

A generator is two Python ints: the seed (Philox key) and the offset (the next unused 128-bit
Philox block). Each call reserves the blocks it needs and hands (seed, offset) to a C kernel, so
element i of a result depends only on (seed, offset, i): never on threads or chunking, and the
state forks into worker processes as plain data. Values are always drawn for a contiguous result
in row-major order (a strided target gets them through a copy), so layout does not change them.
"""

import builtins
import contextlib
import math
import numbers
import operator
import os
import threading

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._limits import MAX_SIZE, check_shape
from fiamma._storage import _DEFAULT_DEVICE, CPU, device as _device
from fiamma._tensor import Tensor, _copy_into, _shape_arg, new_empty

__all__ = [
    "Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state",
    "set_rng_state", "rand", "rand_like", "randn", "randn_like", "randint", "randint_like",
    "randperm", "normal", "bernoulli", "multinomial",
]

_U64 = (1 << 64) - 1
_DEFAULT_SEED = 67280421310721  # PyTorch's default CPU seed
_STATE_MAGIC = b"fmPhilox"
_STATE_BYTES = 24  # magic, seed (uint64 LE), offset (uint64 LE)

# One lock for every generator's offset reservation (a few bytecodes), replaced in a forked child
# so that a fork taken while another thread held it cannot deadlock the child.
_lock = threading.Lock()


def _reset_lock():
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock)

_UNIFORM = K.RAND_UNIFORM
_NORMAL = K.RAND_NORMAL
_BERNOULLI = K.RAND_BERNOULLI
_EXPONENTIAL = K.RAND_EXPONENTIAL
_GEOMETRIC = K.RAND_GEOMETRIC
_LOGNORMAL = K.RAND_LOGNORMAL
_CAUCHY = K.RAND_CAUCHY
_BITS64 = K.RAND_BITS64
# (dist, dtype code) pairs drawn with one 32-bit word per value (4 per Philox block); all other
# draws take 64 bits (2 per block). Mirrors fm_rand_blocks in random.c.
_WORD32 = frozenset((d, c) for d in (_UNIFORM, _NORMAL)
                    for c in (D.float16.code, D.bfloat16.code, D.float32.code))


def _blocks(dist, code, n):
    if n <= 0:
        return 0
    return (n + 3) >> 2 if (dist, code) in _WORD32 else (n + 1) >> 1


def _seed_value(seed, op):
    """PyTorch's seed rule: int(seed) in [-2^63, 2^64); negatives wrap to 2^64 + seed."""
    try:
        s = operator.index(seed)
    except TypeError:
        try:
            s = builtins.int(seed)
        except (TypeError, ValueError):
            raise TypeError(f"{op}: seed must be an int, got {seed!r}") from None
    if not -(1 << 63) <= s <= _U64:
        raise ValueError(f"{op}: seed {s} is out of range [-2**63, 2**64)")
    return s & _U64


def _fresh_seed():
    return builtins.int.from_bytes(os.urandom(8), "little") >> 1


class Generator:
    """A Philox4x32-10 random number generator (counter based).

    Its whole state is the seed and a counter offset, so results are reproducible per seed
    whatever the tensor sizes or thread counts, and a generator can be saved with
    ``get_state()`` (a uint8 tensor) and restored with ``set_state``.

    >>> import fiamma
    >>> g = fiamma.Generator().manual_seed(0)
    >>> a = fiamma.rand(3, generator=g)
    >>> _ = g.manual_seed(0)
    >>> bool((fiamma.rand(3, generator=g) == a).all())
    True
    """

    __slots__ = ("_seed", "_offset", "_device", "__weakref__")

    def __init__(self, device="cpu"):
        self._device = _device(device)
        self._seed = _DEFAULT_SEED
        self._offset = 0

    @property
    def device(self):
        return self._device

    def manual_seed(self, seed):
        """Seed the generator (and restart its counter); returns the generator."""
        self._seed = _seed_value(seed, "manual_seed")
        self._offset = 0
        return self

    def seed(self):
        """Seed from the operating system's entropy; returns the seed used."""
        s = _fresh_seed()
        self._seed = s
        self._offset = 0
        return s

    def initial_seed(self):
        """The seed the generator was last seeded with."""
        return self._seed

    def get_offset(self):
        """The counter: how many 128-bit Philox blocks have been drawn since seeding."""
        return self._offset

    def set_offset(self, offset):
        offset = operator.index(offset)
        if not 0 <= offset <= _U64:
            raise ValueError(f"set_offset: offset must be in [0, 2**64), got {offset}")
        self._offset = offset
        return self

    def get_state(self):
        """The state as a uint8 tensor of 24 bytes (magic, seed, offset)."""
        raw = _STATE_MAGIC + self._seed.to_bytes(8, "little") + self._offset.to_bytes(8, "little")
        out = new_empty((_STATE_BYTES,), D.uint8)
        buf = np.frombuffer(raw, np.uint8)
        check(out._storage.backend.from_host(out, D.uint8, buf.ctypes.data), "get_state")
        return out

    def set_state(self, new_state):
        """Restore a state made by ``get_state``; returns the generator."""
        if not isinstance(new_state, Tensor) or new_state._dtype is not D.uint8:
            raise TypeError("set_state: the RNG state must be a uint8 tensor (from get_state), "
                            f"got {_describe(new_state)}")
        if new_state._numel != _STATE_BYTES:
            raise RuntimeError(f"set_state: expected a state of {_STATE_BYTES} bytes, got "
                               f"{new_state._numel}")
        raw = bytes(new_state.contiguous().cpu().numpy().reshape(-1))
        if raw[:8] != _STATE_MAGIC:
            raise RuntimeError("set_state: not a fiamma Philox generator state (bad header)")
        self._seed = builtins.int.from_bytes(raw[8:16], "little")
        self._offset = builtins.int.from_bytes(raw[16:24], "little")
        return self

    def _reserve(self, blocks):
        """Take ``blocks`` Philox blocks: returns (seed, first block)."""
        with _lock:
            off = self._offset
            self._offset = (off + blocks) & _U64
            return self._seed, off

    def __reduce__(self):
        return (_rebuild_generator, (str(self._device), self._seed, self._offset))

    def __repr__(self):
        return f"<fiamma.Generator device={self._device} seed={self._seed} offset={self._offset}>"


def _rebuild_generator(dev, seed, offset):
    g = Generator(dev)
    g._seed = seed
    g._offset = offset
    return g


def _describe(x):
    if isinstance(x, Tensor):
        return f"a {x._dtype} tensor"
    return type(x).__name__


default_generator = Generator()


def manual_seed(seed):
    """Seed the default generator; returns it.

    >>> import fiamma
    >>> _ = fiamma.manual_seed(0); a = fiamma.randn(2)
    >>> _ = fiamma.manual_seed(0); bool((fiamma.randn(2) == a).all())
    True
    """
    return default_generator.manual_seed(seed)


def seed():
    """Seed the default generator non-deterministically; returns the seed."""
    return default_generator.seed()


def initial_seed():
    """The seed of the default generator."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state (a uint8 tensor)."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator's state from ``get_rng_state()``."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True):
    """Restore the default generator's state on exit (``fiamma.random.fork_rng``)."""
    if not enabled:
        yield
        return
    state = default_generator.get_state()
    try:
        yield
    finally:
        default_generator.set_state(state)


# ---- drivers -------------------------------------------------------------------------------

def _gen(generator, op):
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"{op}: generator must be a fiamma.Generator, got "
                        f"{type(generator).__name__}")
    return generator


def _fill(t, dist, a, b, generator, op):
    """Fill tensor ``t`` in place with ``dist(a, b)`` drawn from ``generator``."""
    if t.requires_grad:
        G.check_inplace(t, op)
    n = t._numel
    if not n or t._storage.device.type == "meta":  # meta: no values, no draws (as PyTorch)
        return t
    g = default_generator if generator is None else _gen(generator, op)
    code = t._dtype.code
    blocks = (n + 3) >> 2 if (dist, code) in _WORD32 else (n + 1) >> 1
    with _lock:
        seed_ = g._seed
        off = g._offset
        g._offset = (off + blocks) & _U64
    dst = t if t._contig else new_empty(t._shape, t._dtype, t._storage.device)
    check(dst._storage.backend.rand_fill(dist, dst, seed_, off, a, b), op)
    if dst is not t:
        _copy_into(t, dst)
    return t


def _fill_int(t, low, rng, generator, op):
    """Fill ``t`` with integers low + [0, rng) (rng == 2**64 for the full 64-bit range)."""
    if t.requires_grad:
        G.check_inplace(t, op)
    n = t._numel
    if not n or t._storage.device.type == "meta":
        return t
    g = default_generator if generator is None else _gen(generator, op)
    dst = t if t._contig else new_empty(t._shape, t._dtype, t._storage.device)
    seed_, off = g._reserve((n + 1) >> 1)
    check(dst._storage.backend.rand_int(dst, seed_, off, low, rng & _U64), op)
    if dst is not t:
        _copy_into(t, dst)
    return t


def _check_float(dt, op):
    if dt._kind != 2:
        raise TypeError(f"{op}: expected a floating point dtype, got {dt}")


def _size_args(size, kw_size, op):
    if kw_size is not None:
        if size:
            raise TypeError(f"{op}: size given both positionally and as a keyword")
        size = (kw_size,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:  # fast path: plain ints in [0, 2**63)
        if type(s) is not builtins.int or s < 0 or s > MAX_SIZE:
            break
    else:
        return tuple(size)
    try:
        shape = _shape_arg(size)
    except TypeError:
        raise TypeError(f"{op}: size must be a sequence of ints, got {size!r}") from None
    check_shape(shape, op)
    return shape


def _result(shape, dt, device, out, op):
    """The tensor a sampling function writes: ``out`` (checked) or a new one on ``device``
    (the values are the same on every device: the draws depend only on seed and offset)."""
    if out is not None:
        from fiamma._ops._common import check_out

        check_out(out, shape, dt, op)
        return out
    dev = (_DEFAULT_DEVICE.dev or CPU) if device is None else _device(device)
    return new_empty(shape, dt, dev)


def _done(t, out, requires_grad):
    if out is not None:
        out._bump()
    if requires_grad:
        t.requires_grad_(True)
    return t


def _like(input, dtype, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    return input._dtype if dtype is None else D.to_dtype(dtype, op)


# ---- sampling functions -------------------------------------------------------------------

def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False, **kw):
    """Uniform samples in [0, 1) of the given shape (floating dtypes only).

    float32 values use the top 24 bits of a Philox word (float64: 53 bits of two), so every
    value is exact and below 1.

    >>> import fiamma
    >>> x = fiamma.rand(2, 3, generator=fiamma.Generator().manual_seed(1))
    >>> x.shape, bool(((x >= 0) & (x < 1)).all())
    (fiamma.Size([2, 3]), True)
    """
    op = "rand"
    shape = _size_args(size, kw.pop("size", None) if kw else None, op)
    if kw:
        _no_extra(kw, op)
    dt = _default_float(dtype, op, True)
    t = new_empty(shape, dt) if (out is None and device is None
                                 and _DEFAULT_DEVICE.dev is None) else \
        _result(shape, dt, device, out, op)
    if dt._kind == 3:  # real and imaginary parts each uniform in [0, 1), as PyTorch
        _fill_pairs(t, _UNIFORM, 1.0, generator, op)
    else:
        _fill(t, _UNIFORM, 0.0, 1.0, generator, op)
    return t if out is None and not requires_grad else _done(t, out, requires_grad)


def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False, **kw):
    """Standard normal samples of the given shape (Box-Muller on Philox output).

    >>> import fiamma
    >>> fiamma.randn(4, generator=fiamma.Generator().manual_seed(0)).shape
    fiamma.Size([4])
    """
    op = "randn"
    shape = _size_args(size, kw.pop("size", None) if kw else None, op)
    if kw:
        _no_extra(kw, op)
    dt = _default_float(dtype, op, True)
    t = new_empty(shape, dt) if (out is None and device is None
                                 and _DEFAULT_DEVICE.dev is None) else \
        _result(shape, dt, device, out, op)
    if dt._kind == 3:  # a standard complex normal: each part N(0, 1/2), as PyTorch
        _fill_pairs(t, _NORMAL, math.sqrt(0.5), generator, op)
    else:
        _fill(t, _NORMAL, 0.0, 1.0, generator, op)
    return t if out is None and not requires_grad else _done(t, out, requires_grad)


def _default_float(dtype, op, complex_ok=False):
    if dtype is None:
        return D._default[0]
    dt = dtype if type(dtype) is D.dtype else D.to_dtype(dtype, op)
    if dt._kind != 2 and not (complex_ok and dt._kind == 3):
        raise TypeError(f"{op}: expected a floating point dtype, got {dt}")
    return dt


def _fill_pairs(t, dist, scale, generator, op):
    """rand/randn of a complex tensor: its (real, imag) pairs filled as real values."""
    from fiamma._ops.complex_ops import view_as_real

    r = view_as_real(t)
    _fill(r, dist, 0.0, 1.0, generator, op)
    if scale != 1.0:
        r.mul_(scale)


def _no_extra(kw, op):
    if kw:
        raise TypeError(f"{op}: unexpected keyword arguments {sorted(kw)}")


def rand_like(input, *, generator=None, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None):
    """``rand`` with the shape (and by default the dtype) of ``input``."""
    dt = _like(input, dtype, "rand_like")
    return rand(input._shape, generator=generator, dtype=dt,
                device=input.device if device is None else device, requires_grad=requires_grad)


def randn_like(input, *, generator=None, dtype=None, layout=None, device=None,
               requires_grad=False, memory_format=None):
    """``randn`` with the shape (and by default the dtype) of ``input``."""
    dt = _like(input, dtype, "randn_like")
    return randn(input._shape, generator=generator, dtype=dt,
                 device=input.device if device is None else device, requires_grad=requires_grad)


def _int_bound(x, op, name):
    if type(x) is builtins.int:
        return x
    if isinstance(x, Tensor):
        x = x.item()
    if isinstance(x, builtins.float):
        if not x.is_integer():
            raise TypeError(f"{op}: {name} must be an integer, got {x}")
        return builtins.int(x)
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {type(x).__name__}") from None


_DIGITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53, D.complex64: 24,
           D.complex128: 53}


def _limits(dt):
    if dt is D.bool:
        return 0, 1
    if dt._kind == 1:
        info = np.iinfo(dt._np)
        return builtins.int(info.min), builtins.int(info.max)
    return -(1 << _DIGITS[dt]), 1 << _DIGITS[dt]


_LIMITS = {dt: _limits(dt) for dt in D.ALL}
_FMAX = {dt: D.finfo(dt).max for dt in D.ALL if dt._kind == 2}


def _int_range_limits(dt):
    """The inclusive [min, max] of integers a dtype holds exactly."""
    return _LIMITS[dt]


def _check_from_to(low, high, dt, op):
    """PyTorch's random_ bounds: low < high; low and high-1 must fit dt (for floats: within the
    finite range, with a warning past 2**digits where not every integer is exact)."""
    if low >= high:
        raise RuntimeError(f"{op}: expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    if dt._kind == 2:
        fmax = _FMAX[dt]
        for name, v in (("from", low), ("to - 1", high - 1)):
            if not -fmax <= v <= fmax:
                raise RuntimeError(f"{op}: {name}={v} is out of bounds for {dt}")
            if abs(v) > 1 << _DIGITS[dt]:
                import warnings

                warnings.warn(f"{op}: {name}={v} is out of bounds [-(2^{_DIGITS[dt]}), "
                              f"2^{_DIGITS[dt]}]; {dt} cannot represent every integer there",
                              UserWarning, stacklevel=3)
        return
    lo, hi = _int_range_limits(dt)
    if not lo <= low <= hi:
        raise RuntimeError(f"{op}: from={low} is out of bounds for {dt} (allowed [{lo}, {hi}])")
    if not lo <= high - 1 <= hi:
        raise RuntimeError(f"{op}: to - 1 = {high - 1} is out of bounds for {dt} (allowed "
                           f"[{lo}, {hi}])")


def randint(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False, low=None, high=None):
    """Integers uniform in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``
    (int64 unless ``dtype`` says otherwise). Each value uses a 64-bit draw mapped by
    multiply-shift, so the bias is at most (high-low) / 2**64.

    >>> import fiamma
    >>> x = fiamma.randint(3, 10, (5,), generator=fiamma.Generator().manual_seed(0))
    >>> x.dtype, bool(((x >= 3) & (x < 10)).all())
    (fiamma.int64, True)
    """
    op = "randint"
    args = list(args)
    if size is None:
        if not args:
            raise TypeError(f"{op}: missing the size argument")
        size = args.pop()
    if high is None:
        if not args:
            raise TypeError(f"{op}: missing the high argument")
        high = args.pop()
    if args:
        if low is not None or len(args) > 1:
            raise TypeError(f"{op}: too many positional arguments")
        low = args.pop()
    low = 0 if low is None else _int_bound(low, op, "low")
    high = _int_bound(high, op, "high")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{op}: size must be a tuple of ints, got {size!r}")
    shape = _size_args(size, None, op)
    dt = D.int64 if dtype is None else D.to_dtype(dtype, op)
    _check_from_to(low, high, dt, op)
    t = new_empty(shape, dt) if (out is None and device is None
                                 and _DEFAULT_DEVICE.dev is None) else \
        _result(shape, dt, device, out, op)
    _fill_int(t, low, high - low, generator, op)
    return t if out is None and not requires_grad else _done(t, out, requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None,
                 device=None, requires_grad=False, memory_format=None):
    """``randint`` with the shape (and by default the dtype) of ``input``:
    ``randint_like(x, high)`` or ``randint_like(x, low, high)``."""
    op = "randint_like"
    dt = _like(input, dtype, op)
    if high is None:
        low, high = 0, low
    return randint(_int_bound(low, op, "low"), _int_bound(high, op, "high"), input._shape,
                   generator=generator, dtype=dt,
                   device=input.device if device is None else device,
                   requires_grad=requires_grad)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """A random permutation of 0..n-1 (int64 by default), by Fisher-Yates in C.

    >>> import fiamma
    >>> sorted(fiamma.randperm(5).tolist())
    [0, 1, 2, 3, 4]
    """
    op = "randperm"
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{op}: n must be an int, got {type(n).__name__}") from None
    if n < 0:
        raise RuntimeError(f"{op}: n must be non-negative, got {n}")
    dt = D.int64 if dtype is None else D.to_dtype(dtype, op)
    if n - 1 > _int_range_limits(dt)[1]:
        raise RuntimeError(f"{op}: n={n} is too large for result tensor type {dt}")
    t = _result((n,), dt, device, out, op)
    if n:
        g = _gen(generator, op)
        perm = t if (dt is D.int64 and t._contig) else new_empty((n,), D.int64,
                                                                 t._storage.device)
        seed_, off = g._reserve(_blocks(_BITS64, 0, n - 1))
        check(perm._storage.backend.randperm(perm, seed_, off), op)
        if perm is not t:
            _copy_into(t, perm)
    return _done(t, out, requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None,
           device=None, requires_grad=False, pin_memory=False):
    """Normal samples with the given mean and standard deviation.

    Forms: ``normal(mean_tensor, std_tensor)`` (broadcast), ``normal(mean_tensor, std=1.0)``,
    ``normal(mean, std_tensor)`` and ``normal(mean, std, size)``. Gradients flow to tensor
    ``mean``/``std`` (the draw is ``mean + std * z``).

    >>> import fiamma
    >>> fiamma.normal(2.0, 3.0, (4,)).shape
    fiamma.Size([4])
    """
    op = "normal"
    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not (tm or ts):
        if size is None:
            raise TypeError(f"{op}: normal(mean, std) with number arguments needs a size")
        m, s = _float_arg(mean, op, "mean"), _float_arg(std, op, "std")
        if not s >= 0.0:
            raise RuntimeError(f"{op}: expects std >= 0.0, but found std {s}")
        shape = _size_args((size,), None, op)
        dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, op)
        _check_float(dt, op)
        t = _result(shape, dt, device, out, op)
        _fill(t, _NORMAL, m, s, generator, op)
        return _done(t, out, requires_grad)
    if size is not None:
        raise TypeError(f"{op}: size is only accepted when mean and std are numbers")
    from fiamma._ops._common import broadcast_shapes, same_device
    from fiamma._ops.elementwise import add, mul

    if ts:
        if std._numel and builtins.bool((std.detach() < 0).any()):
            raise RuntimeError(f"{op}: expects all elements of std >= 0.0")
    else:
        s = _float_arg(std, op, "std")
        if not s >= 0.0:
            raise RuntimeError(f"{op}: expects std >= 0.0, but found std {s}")
    if tm and ts:
        shape = broadcast_shapes(mean._shape, std._shape, op=op)
        dt = D.promote_types(mean._dtype, std._dtype)
    else:
        shape = (mean if tm else std)._shape
        dt = (mean if tm else std)._dtype
    _check_float(dt, op)
    z = new_empty(shape, dt, same_device(op, mean, std))
    _fill(z, _NORMAL, 0.0, 1.0, generator, op)
    res = add(mul(z, std), mean)
    if out is not None:
        from fiamma._ops._common import check_out

        check_out(out, shape, dt, op)
        out.copy_(res)
        return out
    return res


def _float_arg(x, op, name):
    if isinstance(x, Tensor):
        if x._numel != 1:
            raise RuntimeError(f"{op}: {name} must be a number")
        return builtins.float(x.item())
    if isinstance(x, numbers.Real):
        return builtins.float(x)
    raise TypeError(f"{op}: {name} must be a number, got {type(x).__name__}")


def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 samples: element i is 1 with probability ``input[i]`` (or ``p`` when given), in the
    dtype of ``input``.

    >>> import fiamma
    >>> fiamma.bernoulli(fiamma.tensor([0.0, 1.0])).tolist()
    [0.0, 1.0]
    """
    op = "bernoulli"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    dev = input._storage.device
    if p is None:
        _check_float(input._dtype, op)
        res = new_empty(input._shape, input._dtype, dev)
        _bernoulli_tensor(res, input, generator, op)
    else:
        res = new_empty(input._shape, input._dtype, dev)
        _bernoulli_(res, p, generator, op)
    if input.requires_grad and out is None:
        # as PyTorch: the draws require grad, with a zero gradient w.r.t. the probabilities
        G.record(ops.bernoulli, res, (input,), {})
    if out is not None:
        from fiamma._ops._common import check_out

        check_out(out, res._shape, res._dtype, op)
        out.copy_(res)
        return out
    return res


def _bernoulli_tensor(t, p, generator, op):
    """t <- bernoulli(p), p a tensor broadcastable to t."""
    n = t._numel
    dev = t._storage.device
    if p._storage.device != dev:
        if p._shape != ():
            from fiamma._ops._common import same_device

            same_device(op, t, p)  # raises, naming both devices
        p = p.to(dev)
    if p._shape != t._shape:
        p = p.expand(t._shape)
    pd = new_empty(t._shape, D.float64, dev)
    if n:
        _copy_into(pd, p)
    if not n:
        return t
    g = _gen(generator, op)
    dst = t if t._contig else new_empty(t._shape, t._dtype, dev)
    seed_, off = g._reserve(_blocks(_BITS64, 0, n))
    bad = [0]
    rc = dst._storage.backend.rand_bernoulli_p(dst, pd, seed_, off, bad)
    if rc == K.ERR_VALUE:
        v = pd._storage.backend.read_float(pd, bad[0])
        raise RuntimeError(f"{op}: expects all probabilities p in [0, 1], but got p={v} at "
                           f"flat index {bad[0]}")
    check(rc, op)
    if dst is not t:
        _copy_into(t, dst)
    return t


def _bernoulli_(t, p, generator, op):
    if t.requires_grad:
        G.check_inplace(t, op)
    if isinstance(p, Tensor):
        return _bernoulli_tensor(t, p, generator, op)
    pv = _float_arg(p, op, "p")
    if not 0.0 <= pv <= 1.0:
        raise RuntimeError(f"{op}: expects p to be in [0, 1], but got p={pv}")
    return _fill(t, _BERNOULLI, pv, 0.0, generator, op)


_MN_REASONS = {
    1: "probability tensor contains either `inf`, `nan` or element < 0",
    2: "invalid multinomial distribution (sum of probabilities <= 0)",
    3: "invalid multinomial distribution (with replacement=False, not enough non-negative "
       "category to sample)",
}


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Category indices sampled from the (unnormalised) probabilities in each row of ``input``
    (1-d or 2-d, floating). Without replacement an index never repeats within a row.

    >>> import fiamma
    >>> fiamma.multinomial(fiamma.tensor([0.0, 1.0, 0.0]), 1).tolist()
    [1]
    """
    op = "multinomial"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if input._dtype._kind != 2:
        raise RuntimeError(f"{op}: only supports floating-point dtypes for input, got "
                           f"{input._dtype}")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{op}: prob_dist must be 1 or 2 dim, got {input.ndim} dims "
                           f"(shape {list(input._shape)})")
    try:
        k = operator.index(num_samples)
    except TypeError:
        raise TypeError(f"{op}: num_samples must be an int, got "
                        f"{type(num_samples).__name__}") from None
    if k <= 0:
        raise RuntimeError(f"{op}: cannot sample n_sample <= 0 samples (got {k})")
    rows = input._shape[0] if input.ndim == 2 else 1
    ncat = input._shape[-1]
    if ncat == 0:
        raise RuntimeError(f"{op}: the probability distribution has no categories "
                           f"(shape {list(input._shape)})")
    if not replacement and k > ncat:
        raise RuntimeError(f"{op}: cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement (n_sample={k}, categories={ncat})")
    shape = (rows, k) if input.ndim == 2 else (k,)
    dev = input._storage.device
    res = new_empty(shape, D.int64, dev)
    if rows:
        probs = new_empty((rows, ncat), D.float64, dev)
        _copy_into(probs, input.reshape(rows, ncat))
        g = _gen(generator, op)
        draws = rows * (k if replacement else ncat)
        seed_, off = g._reserve(_blocks(_BITS64, 0, draws))
        info = [0, 0]
        rc = res._storage.backend.multinomial(probs, k, builtins.bool(replacement), res, seed_,
                                              off, info)
        if rc == K.ERR_VALUE:
            where = f" (row {info[0]})" if input.ndim == 2 else ""
            raise RuntimeError(f"{op}: {_MN_REASONS.get(info[1], 'invalid input')}{where}")
        check(rc, op)
    if out is not None:
        from fiamma._ops._common import check_out

        check_out(out, shape, D.int64, op)
        out.copy_(res)
        return out
    return res


# ---- in-place Tensor methods ----------------------------------------------------------------

def _inplace_done(self, op, kwargs):
    self._bump()
    if self.requires_grad:
        G.record_inplace(op, self, (self,), kwargs)
    return self


def _uniform_(self, from_=0.0, to=1.0, *, generator=None, **kw):
    op = ops.uniform_
    from_ = kw.pop("from", from_)
    _no_extra(kw, op)
    _check_float(self._dtype, op)
    a, b = _float_arg(from_, op, "from"), _float_arg(to, op, "to")
    if not (math.isfinite(a) and math.isfinite(b)):
        raise RuntimeError(f"{op}: from and to must be finite, got from={a}, to={b}")
    if a > b:
        raise RuntimeError(f"{op}: expects to return a [from, to) range, but found from={a} > "
                           f"to={b}")
    fmax = _FMAX[self._dtype]
    if b - a > fmax or -fmax > a or b > fmax:
        raise RuntimeError(f"{op}: from={a} and to={b} (to-from={b - a}) exceed the range of "
                           f"{self._dtype}")
    _fill(self, _UNIFORM, a, b, generator, op)
    return _inplace_done(self, op, {"from": a, "to": b})


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    op = ops.normal_
    _check_float(self._dtype, op)
    m, s = _float_arg(mean, op, "mean"), _float_arg(std, op, "std")
    if not s >= 0.0:
        raise RuntimeError(f"{op}: expects std >= 0.0, but found std {s}")
    _fill(self, _NORMAL, m, s, generator, op)
    return _inplace_done(self, op, {"mean": m, "std": s})


_MISSING = object()


def _random_(self, from_=None, to=_MISSING, *, generator=None, **kw):
    """random_() / random_(to) / random_(from, to) / random_(from, None): integers in
    [from, to); a missing bound is the dtype's: [0, max] (floats: [0, 2**mantissa_digits])."""
    op = ops.random_
    if "from" in kw:
        from_ = kw.pop("from")
        if to is _MISSING:
            to = None
    _no_extra(kw, op)
    dt = self._dtype
    top = _int_range_limits(dt)[1] + 1
    if to is _MISSING:  # random_() or random_(to)
        low, high = 0, top if from_ is None else _int_bound(from_, op, "to")
    else:
        low = 0 if from_ is None else _int_bound(from_, op, "from")
        high = top if to is None else _int_bound(to, op, "to")
    _check_from_to(low, high, dt, op)
    _fill_int(self, low, high - low, generator, op)
    return _inplace_done(self, op, {})


def _bernoulli_method_(self, p=0.5, *, generator=None):
    op = ops.bernoulli_
    _bernoulli_(self, p, generator, op)
    if isinstance(p, Tensor) and p.requires_grad:
        # probabilities requiring grad: the result does too (zero gradients), as in PyTorch
        self._bump()
        G.record_inplace(op, self, (self, p), {})
        return self
    return _inplace_done(self, op, {})


def _exponential_(self, lambd=1.0, *, generator=None):
    op = ops.exponential_
    _check_float(self._dtype, op)
    lam = _float_arg(lambd, op, "lambd")
    if not lam > 0.0:
        raise RuntimeError(f"{op}: expects lambda > 0.0, but found lambda={lam}")
    _fill(self, _EXPONENTIAL, lam, 0.0, generator, op)
    return _inplace_done(self, op, {})


def _geometric_(self, p, *, generator=None):
    op = ops.geometric_
    pv = _float_arg(p, op, "p")
    if not 0.0 < pv < 1.0:
        raise RuntimeError(f"{op}: expects p to be in (0, 1), but got p={pv}")
    _fill(self, _GEOMETRIC, pv, 0.0, generator, op)
    return _inplace_done(self, op, {})


def _log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    op = ops.log_normal_
    _check_float(self._dtype, op)
    m, s = _float_arg(mean, op, "mean"), _float_arg(std, op, "std")
    if not s > 0.0:
        raise RuntimeError(f"{op}: expects std > 0.0, but found std={s}")
    _fill(self, _LOGNORMAL, m, s, generator, op)
    return _inplace_done(self, op, {})


def _cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    op = ops.cauchy_
    _check_float(self._dtype, op)
    m, s = _float_arg(median, op, "median"), _float_arg(sigma, op, "sigma")
    if not s > 0.0:
        raise RuntimeError(f"{op}: expects sigma > 0.0, but found sigma={s}")
    _fill(self, _CAUCHY, m, s, generator, op)
    return _inplace_done(self, op, {})


def _bernoulli_method(self, p=None, *, generator=None):
    return bernoulli(self, p, generator=generator)


def _multinomial_method(self, num_samples, replacement=False, *, generator=None):
    return multinomial(self, num_samples, replacement, generator=generator)


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "uniform_": _uniform_, "normal_": _normal_, "random_": _random_,
    "bernoulli_": _bernoulli_method_, "exponential_": _exponential_,
    "geometric_": _geometric_, "log_normal_": _log_normal_, "cauchy_": _cauchy_,
    "bernoulli": _bernoulli_method, "multinomial": _multinomial_method,
}

from fiamma import random  # noqa: F401,E402  (the fiamma.random namespace)
