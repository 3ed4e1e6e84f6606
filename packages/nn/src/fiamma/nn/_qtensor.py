"""Quantized tensors (PyTorch's ``torch.quint8``/``qint8``/``qint32`` tensors).

A :class:`QTensor` holds its integer representation (a fiamma ``uint8``/``int8``/``int32``
tensor) and its quantization parameters: one ``scale``/``zero_point`` (per tensor) or a
float64 ``scales`` and int64 ``zero_points`` tensor along ``axis`` (per channel). The value it
stands for is ``(int_repr - zero_point) * scale``. It lives in fiamma-nn (not core) because
only the quantized modules of ``fiamma.ao`` compute with it; core's ``fiamma.quint8``,
``fiamma.quantize_per_tensor``, ... resolve here on first use.

    >>> import fiamma
    >>> q = fiamma.quantize_per_tensor(fiamma.tensor([-1.0, 0.0, 0.5, 2.0]), 0.5, 2,
    ...                                fiamma.quint8)
    >>> q.int_repr()
    tensor([0, 2, 3, 6], dtype=fiamma.uint8)
    >>> q.dequantize()
    tensor([-1.0000,  0.0000,  0.5000,  2.0000])
"""
import numpy as np

import fiamma

__all__ = ["QDtype", "QScheme", "QTensor", "quint8", "qint8", "qint32", "quint4x2",
           "per_tensor_affine",
           "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
           "per_channel_affine_float_qparams", "quantize_per_tensor", "quantize_per_channel",
           "quantize_per_tensor_dynamic",
           "dequantize"]


class QDtype:
    """A quantized dtype: its integer storage dtype and range."""

    def __init__(self, name, storage, qmin, qmax):
        self.name, self._storage, self.qmin, self.qmax = name, storage, qmin, qmax
        self.is_floating_point = False
        self.is_complex = False
        self.is_signed = qmin < 0
        self.itemsize = storage.itemsize
        self.bits = 8 * storage.itemsize

    def __repr__(self):
        return "fiamma." + self.name

    @property
    def __fiamma_torch_global__(self):  # fiamma.save writes it as torch.<name>
        return self.name

    def __reduce__(self):
        return (_qdtype, (self.name,))


quint8 = QDtype("quint8", fiamma.uint8, 0, 255)
qint8 = QDtype("qint8", fiamma.int8, -128, 127)
qint32 = QDtype("qint32", fiamma.int32, -(2 ** 31), 2 ** 31 - 1)
# 4-bit unsigned (embedding weights); one value per uint8 here, PyTorch packs two per byte
# (fiamma.save packs them as PyTorch does, fiamma.load unpacks)
quint4x2 = QDtype("quint4x2", fiamma.uint8, 0, 15)
quint4x2.bits = 4
_QDTYPES = {"quint8": quint8, "qint8": qint8, "qint32": qint32, "quint4x2": quint4x2}


def _qdtype(name):
    return _QDTYPES[name]


class QScheme:
    """A quantization scheme (``fiamma.per_tensor_affine``, ...)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "fiamma." + self.name

    @property
    def __fiamma_torch_global__(self):
        return self.name

    def __reduce__(self):
        return (_qscheme, (self.name,))


per_tensor_affine = QScheme("per_tensor_affine")
per_channel_affine = QScheme("per_channel_affine")
per_tensor_symmetric = QScheme("per_tensor_symmetric")
per_channel_symmetric = QScheme("per_channel_symmetric")
per_channel_affine_float_qparams = QScheme("per_channel_affine_float_qparams")
_QSCHEMES = {s.name: s for s in (per_tensor_affine, per_channel_affine, per_tensor_symmetric,
                                 per_channel_symmetric, per_channel_affine_float_qparams)}


def _qscheme(name):
    return _QSCHEMES[name]


def _np(x):
    if isinstance(x, fiamma.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _check_qdtype(op, dtype):
    if not isinstance(dtype, QDtype):
        raise TypeError(f"{op}: expected a quantized dtype (fiamma.quint8, fiamma.qint8, "
                        f"fiamma.qint32, fiamma.quint4x2), got {dtype!r}")


_NP = {"quint8": np.uint8, "qint8": np.int8, "qint32": np.int32, "quint4x2": np.uint8}


def _quantize_np(x, scale, zero_point, dtype):
    """PyTorch's quantization: ``x * (1/scale)`` in float32, rounded half to even, plus the zero
    point, clamped to the dtype's range (``scale``/``zero_point`` broadcast against ``x``)."""
    x = np.asarray(x, dtype=np.float32)
    inv = (np.float32(1.0) / np.asarray(scale, dtype=np.float32)).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        v = x * inv
    v = np.nan_to_num(v, nan=0.0, posinf=2.0 ** 40, neginf=-(2.0 ** 40))
    q = np.rint(v).astype(np.int64) + np.asarray(zero_point, dtype=np.int64)
    return np.clip(q, dtype.qmin, dtype.qmax).astype(_NP[dtype.name])


def _pack_4bit(values):
    """A 1-D uint8 tensor of the 4-bit ``values`` (any shape, row-major) two a byte: the first
    in the low nibble (PyTorch's quint4x2 storage)."""
    v = np.ascontiguousarray(_np(values), dtype=np.uint8).reshape(-1)
    if v.size and int(v.max()) > 15:
        raise ValueError(f"quint4x2: values must be in [0, 15], got {int(v.max())}")
    if v.size % 2:
        v = np.concatenate([v, np.zeros(1, np.uint8)])
    return fiamma.from_numpy(np.ascontiguousarray(v[0::2] | (v[1::2] << 4)))


class QTensor:
    """A quantized tensor; build it with :func:`quantize_per_tensor` or
    :func:`quantize_per_channel` (or a quantized module), read it with :meth:`int_repr`,
    :meth:`dequantize` and the ``q_*`` accessors."""

    is_quantized = True
    requires_grad = False
    grad = None
    is_sparse = False
    is_nested = False

    def __init__(self, int_repr, dtype, scheme, scale, zero_point, axis=None):
        self._int = int_repr
        self._dtype = dtype
        self._scheme = scheme
        self._scale = scale          # float, or a float64 fiamma tensor (per channel)
        self._zero_point = zero_point  # int, or an int64 fiamma tensor (per channel)
        self._axis = axis

    @classmethod
    def _from_np(cls, q, dtype, scheme, scale, zero_point, axis=None):
        return cls(fiamma.from_numpy(np.ascontiguousarray(q)), dtype, scheme, scale, zero_point,
                   axis)

    def __fiamma_qtensor__(self):
        """What ``fiamma.save`` writes (PyTorch's ``_rebuild_qtensor`` layout): the integer
        tensor, its ``torch.Q*Storage`` name and the quantizer parameters."""
        storage = {"quint8": "QUInt8Storage", "qint8": "QInt8Storage",
                   "qint32": "QInt32Storage", "quint4x2": "QUInt4x2Storage"}[self._dtype.name]
        if self._axis is None:
            params = (self._scheme, float(self._scale), int(self._zero_point))
        else:
            # float qparams too are written as per_channel_affine (with float zero points)
            params = (per_channel_affine, self._scale, self._zero_point, self._axis)
        if self._dtype is quint4x2:
            # as PyTorch: the values in row-major order, two a byte (the first in the low
            # nibble), the tensor contiguous from the storage's start
            shape = tuple(self.shape)
            stride, step = [], 1
            for n in reversed(shape):
                stride.insert(0, step)
                step *= n
            packed = _pack_4bit(self._int)
            if self.device.type != "cpu":
                packed = packed.to(self.device)
            return packed, storage, params, (0, shape, tuple(stride))
        return self._int, storage, params

    # ---- metadata -----------------------------------------------------------------------------
    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        return self._int.shape

    @property
    def device(self):
        return self._int.device

    @property
    def ndim(self):
        return self._int.ndim

    @property
    def layout(self):
        return fiamma.strided

    def size(self, dim=None):
        return self._int.size() if dim is None else self._int.size(dim)

    def dim(self):
        return self._int.dim()

    def numel(self):
        return self._int.numel()

    def element_size(self):
        return self._dtype.itemsize

    def is_contiguous(self, memory_format=None):
        return self._int.is_contiguous()

    def qscheme(self):
        """The scheme: ``fiamma.per_tensor_affine`` or ``fiamma.per_channel_affine``."""
        return self._scheme

    def _per_tensor(self, op):
        if self._axis is not None:
            raise RuntimeError(f"{op}: expected a per-tensor quantized tensor, got one "
                               f"quantized per channel along axis {self._axis}")

    def _per_channel(self, op):
        if self._axis is None:
            raise RuntimeError(f"{op}: expected a per-channel quantized tensor, got a "
                               "per-tensor one")

    def q_scale(self):
        """The scale of a per-tensor quantized tensor (a Python float)."""
        self._per_tensor("q_scale")
        return float(self._scale)

    def q_zero_point(self):
        """The zero point of a per-tensor quantized tensor (a Python int)."""
        self._per_tensor("q_zero_point")
        return int(self._zero_point)

    def q_per_channel_scales(self):
        """The per-channel scales (float64; float32 for ``per_channel_affine_float_qparams``)."""
        self._per_channel("q_per_channel_scales")
        return self._scale.clone()

    def q_per_channel_zero_points(self):
        """The per-channel zero points (int64; float32 for
        ``per_channel_affine_float_qparams``)."""
        self._per_channel("q_per_channel_zero_points")
        return self._zero_point.clone()

    def q_per_channel_axis(self):
        """The channel axis of a per-channel quantized tensor."""
        self._per_channel("q_per_channel_axis")
        return self._axis

    def int_repr(self):
        """The integer values (``uint8`` for quint8, ``int8`` for qint8, ``int32`` for
        qint32), a copy."""
        return self._int.clone()

    def _bcast(self, v):
        """A per-channel parameter shaped to broadcast along ``axis``."""
        shape = [1] * self.ndim
        shape[self._axis] = -1
        return _np(v).reshape(shape)

    def _np_qparams(self):
        if self._axis is None:
            return np.float32(self._scale), np.int64(self._zero_point)
        return self._bcast(self._scale).astype(np.float32), self._bcast(self._zero_point)

    def dequantize(self):
        """The float32 tensor ``(int_repr - zero_point) * scale``."""
        scale, zp = self._np_qparams()
        v = (_np(self._int).astype(np.int64) - zp).astype(np.float32) * scale
        return fiamma.from_numpy(np.ascontiguousarray(v, dtype=np.float32))

    # ---- shape ops (the integers move, the parameters stay) --------------------------------
    def _same(self, int_repr, axis=None):
        return QTensor(int_repr, self._dtype, self._scheme, self._scale, self._zero_point,
                       self._axis if axis is None else axis)

    def _shape_op(self, op, fn):
        if self._axis is not None:
            raise RuntimeError(f"{op}: not supported on per-channel quantized tensors")
        return self._same(fn(self._int))

    def reshape(self, *shape):
        return self._shape_op("reshape", lambda t: t.reshape(*shape))

    def view(self, *shape):
        return self._shape_op("view", lambda t: t.view(*shape))

    def flatten(self, start_dim=0, end_dim=-1):
        return self._shape_op("flatten", lambda t: t.flatten(start_dim, end_dim))

    def contiguous(self, memory_format=None):
        return self._same(self._int.contiguous())

    def clone(self, memory_format=None):
        return self._same(self._int.clone())

    def detach(self):
        return self

    def cpu(self):
        return self

    def to(self, *args, **kwargs):
        """Only device moves to the CPU (quantized kernels run on the CPU)."""
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, (str, fiamma.device)) and fiamma.device(a).type == "cpu":
                continue
            raise RuntimeError(f"QTensor.to: a quantized tensor can only move to the CPU, got "
                               f"{a!r} (call dequantize() for a float tensor to convert)")
        return self

    def transpose(self, dim0, dim1):
        return self._shape_op("transpose", lambda t: t.transpose(dim0, dim1))

    def permute(self, *dims):
        return self._shape_op("permute", lambda t: t.permute(*dims))

    def chunk(self, chunks, dim=0):
        if self._axis is not None:
            raise RuntimeError("chunk: not supported on per-channel quantized tensors")
        return tuple(self._same(t) for t in self._int.chunk(chunks, dim))

    def mean(self, dim=None, keepdim=False):
        """ATen's quantized mean of a contiguous tensor: the float mean of the dequantized
        values, quantized with the input's scale and zero point."""
        self._per_tensor("mean")
        x = self.dequantize()
        m = x.mean() if dim is None else x.mean(dim, keepdim=keepdim)
        return quantize_per_tensor(m, float(self._scale), int(self._zero_point), self._dtype)

    def __getitem__(self, index):
        return self._shape_op("indexing", lambda t: t[index])

    def __len__(self):
        return len(self._int)

    def relu(self):
        """``max(q, zero_point)``: the same scale and zero point."""
        self._per_tensor("relu")
        zp = int(self._zero_point)
        return self._same(fiamma.from_numpy(np.maximum(_np(self._int), np.array(
            zp, dtype=_NP[self._dtype.name]))))

    def equal(self, other):
        return (isinstance(other, QTensor) and self._dtype is other._dtype
                and self._scheme is other._scheme and self.shape == other.shape
                and bool(np.array_equal(_np(self._scale), _np(other._scale)))
                and bool(np.array_equal(_np(self._zero_point), _np(other._zero_point)))
                and self._axis == other._axis
                and bool(np.array_equal(_np(self._int), _np(other._int))))

    def __repr__(self):
        body = repr(self.dequantize())[len("tensor("):-1]
        if self._axis is None:
            q = f"scale={float(self._scale)}, zero_point={int(self._zero_point)}"
        else:
            q = (f"scale={self._scale!r}, zero_point={self._zero_point!r}, "
                 f"axis={self._axis}")
        return (f"tensor({body}, size={tuple(self.shape)}, dtype={self._dtype!r},\n"
                f"       quantization_scheme={self._scheme!r}, {q})")


def quantize_per_tensor(input, scale, zero_point, dtype):
    """Quantize a float tensor with one ``scale`` and ``zero_point``:
    ``clamp(round(x / scale) + zero_point)`` (round half to even; computed as PyTorch does,
    ``x * (1/scale)`` in float32).

    >>> import fiamma
    >>> fiamma.quantize_per_tensor(fiamma.tensor([0.25, 0.75]), 0.5, 0, fiamma.qint8).int_repr()
    tensor([0, 2], dtype=fiamma.int8)
    """
    _check_qdtype("quantize_per_tensor", dtype)
    if isinstance(input, (list, tuple)):
        return [quantize_per_tensor(t, s, z, dtype) for t, s, z in
                zip(input, _np(scale).tolist(), _np(zero_point).tolist())]
    if not isinstance(input, fiamma.Tensor) or not input.dtype.is_floating_point:
        raise TypeError(f"quantize_per_tensor: expected a float tensor, got "
                        f"{getattr(input, 'dtype', type(input).__name__)}")
    scale = float(_np(scale).reshape(-1)[0]) if not isinstance(scale, (int, float)) else \
        float(scale)
    zero_point = int(_np(zero_point).reshape(-1)[0]) if not isinstance(zero_point, int) else \
        zero_point
    if not scale > 0 or not np.isfinite(scale):
        raise ValueError(f"quantize_per_tensor: scale must be a positive finite number, got "
                         f"{scale}")
    if not dtype.qmin <= zero_point <= dtype.qmax:
        raise ValueError(f"quantize_per_tensor: zero_point {zero_point} is out of the range "
                         f"[{dtype.qmin}, {dtype.qmax}] of {dtype!r}")
    q = _quantize_np(_np(input), scale, zero_point, dtype)
    return QTensor._from_np(q, dtype, per_tensor_affine, scale, zero_point)


def quantize_per_tensor_dynamic(input, dtype, reduce_range):
    """Quantize with the scale and zero point of ``input``'s own range (widened to include 0),
    chosen as PyTorch's ``choose_qparams`` does (``reduce_range`` halves the integer range);
    ``dtype`` is ``fiamma.quint8`` or ``fiamma.qint8``.

    >>> import fiamma
    >>> q = fiamma.quantize_per_tensor_dynamic(fiamma.tensor([-1.0, 3.0]), fiamma.quint8, False)
    >>> q.int_repr(), q.q_zero_point()
    (tensor([  0, 255], dtype=fiamma.uint8), 64)
    """
    from fiamma.ao.nn.quantized.dynamic._ops import choose_qparams
    if dtype not in (quint8, qint8):
        raise ValueError(f"quantize_per_tensor_dynamic: dtype must be fiamma.quint8 or "
                         f"fiamma.qint8, got {dtype!r}")
    if not isinstance(input, fiamma.Tensor) or not input.dtype.is_floating_point:
        raise TypeError(f"quantize_per_tensor_dynamic: expected a float tensor, got "
                        f"{getattr(input, 'dtype', type(input).__name__)}")
    a = np.asarray(_np(input), dtype=np.float32)
    lo, hi = (a.min(), a.max()) if a.size else (0.0, 0.0)
    scale, zero_point = choose_qparams(lo, hi, dtype.qmin, dtype.qmax, bool(reduce_range),
                                       _double=True)
    # the scale stays a double (as PyTorch's); its reciprocal is rounded once to float32
    inv = np.float32(1.0 / scale)
    with np.errstate(invalid="ignore", over="ignore"):
        v = a * inv
    v = np.nan_to_num(v, nan=0.0, posinf=2.0 ** 40, neginf=-(2.0 ** 40))
    q = np.clip(np.rint(v).astype(np.int64) + zero_point, dtype.qmin, dtype.qmax)
    return QTensor._from_np(q.astype(_NP[dtype.name]), dtype, per_tensor_affine, scale,
                            zero_point)


def quantize_per_channel(input, scales, zero_points, axis, dtype):
    """Quantize a float tensor with one scale and zero point per index of ``axis``. Float
    ``zero_points`` give PyTorch's ``per_channel_affine_float_qparams`` (embedding weights):
    ``clamp(round(x * (1/scale) + zero_point))`` in float32.

    >>> import fiamma
    >>> w = fiamma.tensor([[1.0, -1.0], [0.5, 0.25]])
    >>> q = fiamma.quantize_per_channel(w, fiamma.tensor([0.5, 0.25]), fiamma.tensor([0, 0]),
    ...                                 0, fiamma.qint8)
    >>> q.int_repr()
    tensor([[ 2, -2],
            [ 2,  1]], dtype=fiamma.int8)
    """
    _check_qdtype("quantize_per_channel", dtype)
    if not isinstance(input, fiamma.Tensor) or not input.dtype.is_floating_point:
        raise TypeError(f"quantize_per_channel: expected a float tensor, got "
                        f"{getattr(input, 'dtype', type(input).__name__)}")
    ndim = input.ndim
    if not -ndim <= axis < ndim:
        raise IndexError(f"quantize_per_channel: axis {axis} is out of range for a "
                         f"{ndim}-d tensor")
    axis %= ndim
    float_zp = np.issubdtype(_np(zero_points).dtype, np.floating)
    s = _np(scales).astype(np.float32 if float_zp else np.float64).reshape(-1)
    z = _np(zero_points).astype(np.float32 if float_zp else np.int64).reshape(-1)
    n = input.shape[axis]
    if s.shape[0] != n or z.shape[0] != n:
        raise ValueError(f"quantize_per_channel: expected {n} scales and zero points (the "
                         f"size of axis {axis}), got {s.shape[0]} and {z.shape[0]}")
    if not (s > 0).all():
        raise ValueError("quantize_per_channel: scales must be positive")
    shape = [1] * ndim
    shape[axis] = -1
    if float_zp:
        return _quantize_float_qparams(input, s, z, shape, axis, dtype)
    q = _quantize_np(_np(input), s.reshape(shape), z.reshape(shape), dtype)
    return QTensor._from_np(q, dtype, per_channel_affine, fiamma.from_numpy(s.copy()),
                            fiamma.from_numpy(z.copy()), axis)


def _quantize_float_qparams(input, s, z, shape, axis, dtype):
    x = np.asarray(_np(input), dtype=np.float32)
    inv = (np.float32(1.0) / s).astype(np.float32).reshape(shape)
    with np.errstate(invalid="ignore", over="ignore"):
        v = (x * inv + z.reshape(shape)).astype(np.float32)
    v = np.nan_to_num(v, nan=0.0, posinf=2.0 ** 40, neginf=-(2.0 ** 40))
    q = np.clip(np.rint(v), dtype.qmin, dtype.qmax).astype(_NP[dtype.name])
    return QTensor._from_np(q, dtype, per_channel_affine_float_qparams,
                            fiamma.from_numpy(s.copy()), fiamma.from_numpy(z.copy()), axis)


def dequantize(input):
    """``input.dequantize()`` for a quantized tensor (a list of them: each); any other tensor
    in float32 (itself when it is float32), as PyTorch's."""
    if isinstance(input, (list, tuple)):
        return [dequantize(t) for t in input]
    if isinstance(input, QTensor):
        return input.dequantize()
    if isinstance(input, fiamma.Tensor) and input.dtype is not fiamma.float32:
        return input.to(fiamma.float32)
    return input
