"""The MPI side: mpi4py imported on first use, fiamma dtypes as MPI datatypes, tensors as
zero-copy MPI buffers, and fiamma's reduce ops as MPI ops."""

from __future__ import annotations

import enum

import numpy as np

import fiamma

_MPI = None


def mpi():
    """mpi4py's MPI module (imported, and MPI initialised, on first use)."""
    global _MPI
    if _MPI is None:
        try:
            import mpi4py

            mpi4py.rc.thread_level = "multiple"  # the collectives run on a worker thread
            from mpi4py import MPI
        except Exception as e:  # ImportError, or mpi4py's RuntimeError when no libmpi is found
            raise RuntimeError(
                "fiamma.distributed: the 'mpi' backend needs mpi4py and an MPI library "
                "(`pip install mpi4py mpich`, or a system MPICH/Open MPI); importing mpi4py.MPI "
                f"failed: {type(e).__name__}: {e}") from e
        _MPI = MPI
    return _MPI


class ReduceOp(enum.Enum):
    """The reductions of ``all_reduce``, ``reduce`` and ``reduce_scatter_tensor``.

    >>> from fiamma.distributed import ReduceOp
    >>> ReduceOp.SUM
    <ReduceOp.SUM: 'sum'>
    """

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self):
        return f"<ReduceOp.{self.name}: {self.value!r}>"


# PyTorch nests the members' type as ``ReduceOp.RedOpType`` (``ReduceOp.SUM`` is an instance
# of it); here the members' type is ReduceOp itself.
ReduceOp.RedOpType = ReduceOp


# fiamma dtype -> (the NumPy dtype its bytes travel as, an int code for the metadata check)
_DTYPES = [fiamma.float32, fiamma.float64, fiamma.float16, fiamma.bfloat16, fiamma.int8,
           fiamma.int16, fiamma.int32, fiamma.int64, fiamma.uint8, fiamma.bool]
DTYPE_CODE = {d: i for i, d in enumerate(_DTYPES)}
DTYPE_OF_CODE = dict(enumerate(_DTYPES))
_WIRE = {fiamma.float32: np.float32, fiamma.float64: np.float64, fiamma.float16: np.uint16,
         fiamma.bfloat16: np.uint16, fiamma.int8: np.int8, fiamma.int16: np.int16,
         fiamma.int32: np.int32, fiamma.int64: np.int64, fiamma.uint8: np.uint8,
         fiamma.bool: np.uint8}


def buffer(t, op):
    """The memory of CPU tensor ``t`` as a flat NumPy array (no copy)."""
    if not isinstance(t, fiamma.Tensor):
        raise TypeError(f"{op}: expected a fiamma.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{op}: the 'mpi' backend works on CPU tensors; got a tensor on "
                         f"{t.device} (GPU tensors need the 'nccl' backend)")
    if not t.is_contiguous():
        raise ValueError(f"{op}: tensors must be contiguous (got shape {tuple(t.shape)} with "
                         f"strides {t.stride()}); call .contiguous() first")
    if t.dtype not in _WIRE:
        raise TypeError(f"{op}: dtype {t.dtype} is not supported")
    wire = _WIRE[t.dtype]
    t = t.detach()
    if t.dtype in (fiamma.float16, fiamma.bfloat16):
        t = t.view(fiamma.int16)
    a = t.numpy().reshape(-1)
    return a.view(wire) if a.dtype != wire else a


_DATATYPES = {}
_OPS = {}


def datatype(dtype):
    t = _DATATYPES.get(dtype)
    if t is None:
        t = _DATATYPES[dtype] = _datatype(dtype)
    return t


def _datatype(dtype):
    MPI = mpi()
    return {fiamma.float32: MPI.FLOAT, fiamma.float64: MPI.DOUBLE, fiamma.float16: MPI.UINT16_T,
            fiamma.bfloat16: MPI.UINT16_T, fiamma.int8: MPI.INT8_T, fiamma.int16: MPI.INT16_T,
            fiamma.int32: MPI.INT32_T, fiamma.int64: MPI.INT64_T, fiamma.uint8: MPI.UINT8_T,
            fiamma.bool: MPI.UINT8_T}[dtype]


_HALF_OPS = {}


def to_float32(bits, dtype):
    """float16/bfloat16 stored as uint16 -> float32 (NumPy only: this runs on the worker
    thread, beside fiamma ops on the main thread)."""
    if dtype is fiamma.float16:
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def from_float32(x, dtype, out):
    """float32 -> float16/bfloat16 bits written into ``out`` (round to nearest even)."""
    if dtype is fiamma.float16:
        out.view(np.float16)[...] = x
        return
    u = x.view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    out[...] = np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def _half_op(dtype, op):
    """A user-defined MPI op reducing float16/bfloat16 (MPI has no datatype for them): the
    operands widen to float32, the result is rounded back."""
    key = (dtype, op)
    if key not in _HALF_OPS:
        fn = {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply,
              ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum}[op]

        def reduce(inbuf, inoutbuf, _datatype):
            a = np.frombuffer(inbuf, np.uint16)
            out = np.frombuffer(inoutbuf, np.uint16)
            from_float32(fn(to_float32(a, dtype), to_float32(out, dtype)), dtype, out)

        _HALF_OPS[key] = mpi().Op.Create(reduce, commute=True)
    return _HALF_OPS[key]


def mpi_op(op, dtype, name):
    """The MPI op for ReduceOp ``op`` on tensors of ``dtype`` (error naming ``name``)."""
    try:
        found = _OPS.get((op, dtype))
    except TypeError:  # an unhashable op: _mpi_op names it
        found = None
    if found is None:
        found = _mpi_op(op, dtype, name)
        _OPS[(op, dtype)] = found
    return found


def _mpi_op(op, dtype, name):
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{name}: op must be a fiamma.distributed.ReduceOp, got {op!r}")
    MPI = mpi()
    floating = dtype.is_floating_point
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and floating:
        raise TypeError(f"{name}: {op.name} needs an integer or bool tensor, got {dtype}")
    if op is ReduceOp.AVG and not floating:
        raise TypeError(f"{name}: ReduceOp.AVG needs a floating point tensor, got {dtype} "
                        "(use SUM and divide)")
    if dtype is fiamma.bool:  # PyTorch: SUM on bool is a logical or, PRODUCT a logical and
        op = {ReduceOp.SUM: ReduceOp.MAX, ReduceOp.PRODUCT: ReduceOp.MIN}.get(op, op)
    if dtype in (fiamma.float16, fiamma.bfloat16):
        return _half_op(dtype, op)
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
            ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
            ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[op]


def numpy_op(op, dtype):
    """The NumPy ufunc that reduces like ``mpi_op(op, dtype)`` (validated by it first)."""
    if dtype is fiamma.bool:
        op = {ReduceOp.SUM: ReduceOp.MAX, ReduceOp.PRODUCT: ReduceOp.MIN}.get(op, op)
    return {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply,
            ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum, ReduceOp.BAND: np.bitwise_and,
            ReduceOp.BOR: np.bitwise_or, ReduceOp.BXOR: np.bitwise_xor}[op]
