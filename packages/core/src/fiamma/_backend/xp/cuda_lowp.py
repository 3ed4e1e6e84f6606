"""The cuda backend's kernels for bfloat16 and float16 data (``LowpKernelsMixin``), and the
max-pool backward's scatter without a device sync.

Without them a bfloat16 op widens each operand to float32 (one pass each), computes in float32
through the generic array code and rounds back (one more): three or more passes where PyTorch
makes one. Here each op below is one pass over the 16-bit data, computing in float and rounding
once to nearest even (a NaN becomes a quiet NaN: bfloat16 0x7FC0 with its sign, the generic
code's rule; float16 0x7E00 with its sign and payload's top bits), so the bits equal the
generic path's (and PyTorch's, which also computes in float and rounds once):

- ``fm_lp_bin``: + - * / and add-with-alpha of two contiguous same-layout tensors, or of a
  tensor and a number: PyTorch's rule (and fiamma's CPU's), the number of * and / a float32,
  that of + and - rounded to the tensor's dtype first (the generic cuda code keeps a float32
  for all four, and computes float16 in float16; fiamma divides ``x / s`` and ``s / x`` once,
  where PyTorch's CUDA kernels multiply by a float reciprocal); add-with-alpha is one fused
  multiply-add, as PyTorch's kernels compute ``a + alpha * b`` on both devices;
- ``fm_lp_relu``; ``fm_lp_cmp``: a comparison with a number into a bool tensor (ReLU's
  backward is ``where(y > 0, g, 0)``: this and the next);
- ``fm_lp_where``: a bool condition picking the bits of two tensors or rounded numbers;
- ``fm_lp_cast``: a conversion between bfloat16/float16 and float32, float64 (to 16 bits:
  rounded to float first, as the generic bfloat16 conversion; a double into float16, which the
  generic code rounds once, stays generic) or the other 16-bit type, of contiguous tensors of
  one shape: one pass where the generic code widened or rounded into a temporary and copied it
  (autocast's weight casts, the float32 gradients of bfloat16 weights, mixed-dtype operands);
- ``fm_bn_*_lp``: batch norm forward (batch statistics with float64 sums, the running
  statistics updated; or eval) and backward reading and writing 16-bit activations with
  float32 weights and statistics (as under autocast), the same arithmetic as the float32
  kernels of cuda_kernels.py on the widened input, so the results equal "widen, float32 batch
  norm, round" bit for bit;
- ``fm_maxpool_lp``: max pooling of 16-bit data (the chosen element's bits out);
- ``fm_pool_scatter_add`` (float32/float64; ``fm_pool_scatter_add_lp`` + ``fm_lp_round`` for
  16-bit gradients, through a float32 accumulator): the max-pool backward's scatter-add as one
  kernel of float atomics into the zeroed result, taken when the indices are known to be in
  range (the pool's own forward notes their range), so no device-syncing check runs. Windows that
  overlap (e.g. 3x3, stride 2) add up to four gradients into one element in the order the
  atomics land: the float32 sum may differ in its last bit from run to run. (cuda_step.py's
  ``fm_maxpool_bwd_s`` gather now serves the pool's own indices first: deterministic, one
  pass; this scatter serves what it declines.)

Each path is taken only for contiguous operands of the result's layout (others go to the
generic code); a kernel that fails to build or launch is recorded in ``fast_path_errors`` and
its op falls back (16-bit batch norm and pooling return ERR_DTYPE so the op layer widens, as
before).
"""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as K
from fiamma._backend.xp.base import _store_scalar
from fiamma._backend.xp.cuda_kernels import _BLOCK, _POOL_START, bn_source

__all__ = ["LowpKernelsMixin", "LP_CONV", "LP_SOURCE", "POOL_SCATTER"]

# ---- CUDA sources (LP_SOURCE is compiled once per 16-bit type: FM_H 0 bfloat16, 1 float16;
# T float) --------------------------------------------------------------------------------------

# the 16-bit loads and stores (widen exactly; round to nearest even), shared with cuda_step.py
LP_CONV = r"""
typedef unsigned short X;
__device__ __forceinline__ float fm_lp_ld(X v) {
#if FM_H
    const unsigned int s = ((unsigned int)v & 0x8000u) << 16, e = (v >> 10) & 0x1fu,
                       m = v & 0x3ffu;
    if (e == 31u) return __uint_as_float(s | 0x7f800000u | (m << 13));
    if (e == 0u) { const float f = (float)m * 5.9604644775390625e-8f; return s ? -f : f; }
    return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
#else
    return __uint_as_float(((unsigned int)v) << 16);
#endif
}
__device__ __forceinline__ X fm_lp_st(float f) {
    const unsigned int u = __float_as_uint(f);
#if FM_H
    const unsigned int sg = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (X)(sg | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x47800000u) return (X)(sg | 0x7c00u);
    if (a < 0x38800000u) {  // a float16 subnormal: adding 0.5 rounds to a multiple of 2^-24
        const float t = __uint_as_float(a) + 0.5f;
        return (X)(sg | (__float_as_uint(t) - 0x3f000000u));
    }
    return (X)(sg | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));
#else
    return ((u & 0x7fffffffu) > 0x7f800000u) ? (X)(0x7fc0u | ((u >> 16) & 0x8000u))
                                             : (X)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
"""

LP_SOURCE = LP_CONV + r"""
__device__ __forceinline__ float fm_lp_op(int op, float a, float b, float alpha) {
    if (op == 0) return a + b;
    if (op == 1) return a - b;
    if (op == 2) return a * b;
    if (op == 3) return a / b;
    return fmaf(alpha, b, a);  // PyTorch's a + alpha * b, which nvcc contracts to one FMA
}
// mode 0: a op b; 1: a op s; 2: s op a
extern "C" __global__ void fm_lp_bin(const X* __restrict__ a, const X* __restrict__ b,
        X* __restrict__ o, long long n, int op, float alpha, float s, int mode) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float x = fm_lp_ld(a[i]);
        float r;
        if (mode == 0) r = fm_lp_op(op, x, fm_lp_ld(b[i]), alpha);
        else if (mode == 1) r = fm_lp_op(op, x, s, alpha);
        else r = fm_lp_op(op, s, x, alpha);
        o[i] = fm_lp_st(r);
    }
}
extern "C" __global__ void fm_lp_relu(const X* __restrict__ x, X* __restrict__ o, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const X v = x[i];
        const float f = fm_lp_ld(v);
        o[i] = f != f ? fm_lp_st(f) : (f < 0.0f ? (X)0 : v);
    }
}
// op: 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >= of (x, s), or of (s, x) with left
extern "C" __global__ void fm_lp_cmp(const X* __restrict__ x, float s,
        unsigned char* __restrict__ o, long long n, int op, int left) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float a = fm_lp_ld(x[i]), b = s;
        if (left) { b = a; a = s; }
        bool r;
        if (op == 0) r = a == b;
        else if (op == 1) r = a != b;
        else if (op == 2) r = a < b;
        else if (op == 3) r = a <= b;
        else if (op == 4) r = a > b;
        else r = a >= b;
        o[i] = r ? 1 : 0;
    }
}
// where(cond, b, c): a null b or c takes the bits bs or cs (a number rounded on the host)
extern "C" __global__ void fm_lp_where(const unsigned char* __restrict__ cond,
        const X* __restrict__ b, const X* __restrict__ c, unsigned int bs, unsigned int cs,
        X* __restrict__ o, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        o[i] = cond[i] ? (b ? b[i] : (X)bs) : (c ? c[i] : (X)cs);
}

// max pooling with fixed windows: cuda_kernels.py's fm_maxpool on widened values; the output
// is the chosen element's bits
""" + _POOL_START + r"""
extern "C" __global__ void fm_maxpool_lp(const X* __restrict__ x, X* __restrict__ out,
        long long* __restrict__ idx, long long total, int D, int H, int W, int oD, int oH,
        int oW, int k0, int k1, int k2, int s0, int s1, int s2, int p0, int p1, int p2, int d0,
        int d1, int d2) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += stride) {
        long long t = i;
        const long long ow = t % oW; t /= oW;
        const long long oh = t % oH; t /= oH;
        const long long od = t % oD; t /= oD;
        const X* xp = x + t * (long long)D * H * W;
        long long bi = (fm_pool_start(od, s0, p0, d0, D) * H +
                        fm_pool_start(oh, s1, p1, d1, H)) * W +
                       fm_pool_start(ow, s2, p2, d2, W);
        float best = -__uint_as_float(0x7f800000u);
        X bits = (X)(FM_H ? 0xfc00u : 0xff80u);  // -inf: an empty window's value
        for (int a = 0; a < k0; ++a) {
            const long long iz = od * s0 - p0 + (long long)a * d0;
            for (int b = 0; b < k1; ++b) {
                const long long iy = oh * s1 - p1 + (long long)b * d1;
                for (int c = 0; c < k2; ++c) {
                    const long long ix = ow * s2 - p2 + (long long)c * d2;
                    if (iz < 0 || iz >= D || iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                    const long long f = (iz * H + iy) * W + ix;
                    const X u = xp[f];
                    const float v = fm_lp_ld(u);
                    if (v > best || v != v) { best = v; bits = u; bi = f; }
                }
            }
        }
        out[i] = best != best ? fm_lp_st(best) : bits;
        if (idx) idx[i] = bi;
    }
}
// the max-pool backward of 16-bit gradients: float atomics into acc (zeroed), then rounded
extern "C" __global__ void fm_pool_scatter_add_lp(const X* __restrict__ src,
        const long long* __restrict__ idx, float* __restrict__ acc, long long ssize,
        long long dsize, long long total) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += stride)
        atomicAdd(acc + (i / ssize) * dsize + idx[i], fm_lp_ld(src[i]));
}
// dtype conversions in one pass: kinds 0 this 16-bit type (X), 1 the other one, 2 float,
// 3 double; through float (exact from 16 bits; a double rounds to float first, as the generic
// code and PyTorch's 16-bit constructors do), then rounded once to the destination
__device__ __forceinline__ float fm_lp_ld_other(X v) {
#if FM_H
    return __uint_as_float(((unsigned int)v) << 16);  // (this is float16: the other, bfloat16)
#else
    const unsigned int s = ((unsigned int)v & 0x8000u) << 16, e = (v >> 10) & 0x1fu,
                       m = v & 0x3ffu;
    if (e == 31u) return __uint_as_float(s | 0x7f800000u | (m << 13));
    if (e == 0u) { const float f = (float)m * 5.9604644775390625e-8f; return s ? -f : f; }
    return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
#endif
}
extern "C" __global__ void fm_lp_cast(const void* __restrict__ src, void* __restrict__ dst,
        long long n, int sk, int dk) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v;
        if (sk == 0) v = fm_lp_ld(((const X*)src)[i]);
        else if (sk == 1) v = fm_lp_ld_other(((const X*)src)[i]);
        else if (sk == 2) v = ((const float*)src)[i];
        else v = (float)((const double*)src)[i];
        if (dk == 0) ((X*)dst)[i] = fm_lp_st(v);
        else if (dk == 2) ((float*)dst)[i] = v;
        else ((double*)dst)[i] = (double)v;
    }
}
extern "C" __global__ void fm_lp_round(const float* __restrict__ a, X* __restrict__ o,
        long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        o[i] = fm_lp_st(a[i]);
}

""" + bn_source("_lp", "X", "fm_lp_ld", "fm_lp_st")

# the max-pool backward: dst (zeroed; nplanes x dsize) += src at idx, indices known in range
POOL_SCATTER = r"""
extern "C" __global__ void fm_pool_scatter_add(const T* __restrict__ src,
        const long long* __restrict__ idx, T* __restrict__ dst, long long ssize,
        long long dsize, long long total) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += stride)
        atomicAdd(dst + (i / ssize) * dsize + idx[i], src[i]);
}
"""

_LP_H = {D.bfloat16.code: 0, D.float16.code: 1}
_CMP = {K.BIN_EQ: 0, K.BIN_NE: 1, K.BIN_LT: 2, K.BIN_LE: 3, K.BIN_GT: 4, K.BIN_GE: 5}
_ARITH = {K.BIN_ADD: 0, K.BIN_SUB: 1, K.BIN_MUL: 2, K.BIN_DIV: 3, K.BIN_ADD_ALPHA: 4}
_F32_MAX = float(np.finfo(np.float32).max)
_B256 = (256,)


def _cast_kind(h, dt):
    """fm_lp_cast's kind of dtype dt in the namespace of 16-bit type h (None: not taken)."""
    c = _LP_H.get(dt.code)
    if c is not None:
        return 0 if c == h else 1
    return 2 if dt is D.float32 else 3 if dt is D.float64 else None


def _grid(n):
    return (min((n + 255) // 256, 1 << 20),)


def _u64(t):
    return np.uint64(0 if t is None else t._ptr)


def _same_contig(shape, out, *pairs):
    """Whether out is contiguous of ``shape`` and every (tensor, strides) operand reads it
    contiguously in that layout (no broadcast)."""
    if out._shape != shape or not out._contig:
        return False
    for t, st in pairs:
        if not t._contig or t._shape != shape or \
                (st is not None and tuple(st) != tuple(t._stride)):
            return False
    return True


def _widen_bits(h, bits):
    """The float32 value of 16-bit pattern ``bits`` (h: 0 bfloat16, 1 float16)."""
    if h:
        return np.array(bits, np.uint16).view(np.float16).astype(np.float32)[()]
    return (np.array(bits, np.uint32) << np.uint32(16)).view(np.float32)[()]


def _f32(v):
    """A Python number as the float32 the generic code casts it to."""
    v = float(v)
    if -_F32_MAX <= v <= _F32_MAX or v != v:
        return np.float32(v)
    with np.errstate(over="ignore"):
        return np.float32(v)


class LowpKernelsMixin:
    """bfloat16/float16 fast paths in front of BinaryEntryMixin / CudaKernelsMixin (see the
    module docstring): each method takes its kernel where the layout allows and otherwise
    defers to the next class in the MRO."""

    def _lp_kernel(self, h, name):
        return self._raw_kernel(f"lowp{h}", f"#define FM_H {h}\n" + _BLOCK + LP_SOURCE, name,
                                "float")

    def _overlap_other(self, out, *ins):
        st = out._storage
        return any(t is not None and t._storage is st and t._ptr != out._ptr for t in ins)

    # ---- elementwise ---------------------------------------------------------------------------
    def unary(self, op, out, x, p0, p1, p2):
        h = _LP_H.get(x._dtype.code)
        if op == K.UN_RELU and h is not None and out._dtype is x._dtype and \
                _same_contig(x._shape, out, (x, None)) and not self._overlap_other(out, x):
            n = x._numel

            def go():
                self._lp_kernel(h, "fm_lp_relu")(_grid(n), _B256,
                                                 (_u64(x), _u64(out), np.int64(n)))

            if n == 0 or self._served("lp_relu", go):
                return 0
        return super().unary(op, out, x, p0, p1, p2)

    def binary(self, op, shape, out, a, sa, b, sb, params=None):
        h = _LP_H.get(out._dtype.code)
        ta, tb = type(a), type(b)
        num = ta is float or ta is int or tb is float or tb is int
        if num:
            t = b if (ta is float or ta is int) else a
            h = _LP_H.get(t._dtype.code)
        if h is not None and (op in _ARITH or (num and op in _CMP)) and \
                self._lp_binary(h, op, tuple(shape), out, a, sa, b, sb, params):
            return 0
        return super().binary(op, shape, out, a, sa, b, sb, params)

    def _lp_binary(self, h, op, shape, out, a, sa, b, sb, params):
        ta = type(a)
        left = ta is float or ta is int
        tb = type(b)
        num = left or tb is float or tb is int
        alpha = np.float32(0.0)
        if op == K.BIN_ADD_ALPHA:
            if not params or num:
                return False
            alpha = _f32(params[0])
        elif params is not None:
            return False
        if num:
            t, st, sv = (b, sb, a) if left else (a, sa, b)
            if out._dtype is (D.bool if op in _CMP else t._dtype) and \
                    _same_contig(shape, out, (t, st)) and not self._overlap_other(out, t):
                n = out._numel
                s = _f32(sv)
                if op == K.BIN_ADD or op == K.BIN_SUB:
                    # PyTorch (both devices) and fiamma's CPU round the number of + and - to the
                    # tensor's dtype first (* and / keep it a float32)
                    s = _widen_bits(h, self._lp_bits(t._dtype, sv))
                if op in _CMP:
                    def go():
                        self._lp_kernel(h, "fm_lp_cmp")(
                            _grid(n), _B256, (_u64(t), s, _u64(out), np.int64(n),
                                              np.int32(_CMP[op]), np.int32(left)))
                    name = "lp_cmp"
                else:
                    def go():
                        self._lp_kernel(h, "fm_lp_bin")(
                            _grid(n), _B256, (_u64(t), np.uint64(0), _u64(out), np.int64(n),
                                              np.int32(_ARITH[op]), alpha, s,
                                              np.int32(2 if left else 1)))
                    name = "lp_bin"
                return n == 0 or self._served(name, go)
            return False
        if a._dtype is not out._dtype or b._dtype is not out._dtype or \
                not _same_contig(shape, out, (a, sa), (b, sb)) or \
                self._overlap_other(out, a, b):
            return False
        n = out._numel

        def go():
            self._lp_kernel(h, "fm_lp_bin")(
                _grid(n), _B256, (_u64(a), _u64(b), _u64(out), np.int64(n),
                                  np.int32(_ARITH[op]), alpha, np.float32(0.0), np.int32(0)))

        return n == 0 or self._served("lp_bin", go)

    def ternary(self, op, dtype, shape, out, a, sa, b, sb, c, sc, bf, bi, cf, ci, p0):
        h = _LP_H.get(dtype.code)
        if op == K.TER_WHERE and h is not None and out._dtype is dtype and \
                a._dtype is D.bool and (b is None or b._dtype is dtype) and \
                (c is None or c._dtype is dtype):
            shape = tuple(shape)
            ops_ = [(a, sa)] + [(t, s) for t, s in ((b, sb), (c, sc)) if t is not None]
            if _same_contig(shape, out, *ops_) and not self._overlap_other(out, a, b, c):
                n = out._numel
                bs = 0 if b is not None else self._lp_bits(dtype, bf)
                cs = 0 if c is not None else self._lp_bits(dtype, cf)

                def go():
                    self._lp_kernel(h, "fm_lp_where")(
                        _grid(n), _B256, (_u64(a), _u64(b), _u64(c), np.uint32(bs),
                                          np.uint32(cs), _u64(out), np.int64(n)))

                if n == 0 or self._served("lp_where", go):
                    return 0
        return super().ternary(op, dtype, shape, out, a, sa, b, sb, c, sc, bf, bi, cf, ci, p0)

    # ---- casts --------------------------------------------------------------------------------
    def copy(self, dst, src):
        """A dtype conversion to or from bfloat16/float16 between contiguous tensors of one shape
        is one ``fm_lp_cast`` pass (the generic code widens or rounds into a temporary, then
        copies it: two passes, a temporary and two array views); others go on."""
        sd, dd = src._dtype, dst._dtype
        if sd is not dd and (sd.code in _LP_H or dd.code in _LP_H) and dst._contig and \
                src._contig and dst._shape == src._shape and \
                dst._storage is not src._storage and \
                dst._storage.device is src._storage.device:
            h = _LP_H.get(dd.code)
            if h is None:
                h = _LP_H[sd.code]
            sk, dk = _cast_kind(h, sd), _cast_kind(h, dd)
            # a double rounds to float first (as the generic bfloat16 conversion does); the
            # generic float16 conversion of a double rounds once, so that one is left to it
            if sk is not None and dk is not None and dk != 1 and not (sk == 3 and h == 1):
                n = dst._numel

                def go():
                    self._lp_kernel(h, "fm_lp_cast")(_grid(n), _B256, (
                        _u64(src), _u64(dst), np.int64(n), np.int32(sk), np.int32(dk)))

                if n == 0 or self._served("lp_cast", go):
                    return 0
        return super().copy(dst, src)

    @staticmethod
    def _lp_bits(dtype, v):
        """The 16 bits a number becomes in dtype (the generic code's cast: through float32)."""
        if dtype is D.bfloat16:
            return int(_store_scalar(dtype, _f32(v)))
        return int(np.float16(_f32(v)).view(np.uint16))

    # ---- batch norm on 16-bit activations ------------------------------------------------------
    def bn_native(self, dtype):
        """Whether batch_norm_fwd/bwd take ``dtype`` (bfloat16/float16) activations as they are,
        with float32 weights and statistics (else the op layer widens them to float32)."""
        return (dtype.code in _LP_H and self._kernels_ok and
                "batch_norm_lp" not in self.fast_path_errors)

    def batch_norm_fwd(self, N, C, S, x, xs, y, w, b, mean, invstd, rmean, srm, rvar, srv,
                       training, momentum, eps):
        h = _LP_H.get(x._dtype.code)
        if h is None:
            return super().batch_norm_fwd(N, C, S, x, xs, y, w, b, mean, invstd, rmean, srm,
                                          rvar, srv, training, momentum, eps)
        if y._dtype is not x._dtype or not y._contig or \
                any(t is not None and t._dtype is not D.float32
                    for t in (w, b, mean, invstd, rmean, rvar)) or \
                (not training and (rmean is None or rvar is None)) or N < 0 or C < 0 or S < 0:
            return K.ERR_DTYPE
        if C == 0:
            return 0
        if N * S == 0:  # no elements: the generic statistics' NaN / untouched conventions
            return K.ERR_DTYPE
        total = N * C * S
        ab = self.xp.empty(2 * C, np.float32)
        st = [np.int64(v) for v in xs]

        def go():
            k1 = self._lp_kernel(h, "fm_bn_stats_lp")
            k2 = self._lp_kernel(h, "fm_bn_apply_lp")
            k1((C,), (512,), (_u64(x), np.int64(N), np.int64(S), *st, _u64(w), _u64(b),
                              _u64(mean), _u64(invstd), _u64(rmean), np.int64(srm),
                              _u64(rvar), np.int64(srv), ab, np.int64(C),
                              np.int32(bool(training)), np.float64(momentum),
                              np.float64(eps)))
            k2(_grid(total), _B256, (_u64(x), np.int64(C), np.int64(S), *st, ab, _u64(y),
                                     np.int64(total)))

        return 0 if self._served("batch_norm_lp", go) else K.ERR_DTYPE

    def batch_norm_bwd(self, N, C, S, g, gs, x, xs, w, mean, invstd, training, gx, gw, gb):
        h = _LP_H.get(x._dtype.code)
        if h is None:
            return super().batch_norm_bwd(N, C, S, g, gs, x, xs, w, mean, invstd, training, gx,
                                          gw, gb)
        if g._dtype is not x._dtype or (gx is not None and
                                        (gx._dtype is not x._dtype or not gx._contig)) or \
                any(t is not None and t._dtype is not D.float32
                    for t in (w, mean, invstd, gw, gb)) or N < 1 or C < 1 or S < 1:
            return K.ERR_DTYPE
        total = N * C * S
        coef = self.xp.empty(3 * C, np.float32)
        sx = [np.int64(v) for v in xs]
        sg = [np.int64(v) for v in gs]

        def go():
            k1 = self._lp_kernel(h, "fm_bn_grad_stats_lp")
            k2 = self._lp_kernel(h, "fm_bn_grad_apply_lp") if gx is not None else None
            k1((C,), (512,), (_u64(g), *sg, _u64(x), *sx, np.int64(N), np.int64(S), _u64(w),
                              _u64(mean), _u64(invstd), _u64(gw), _u64(gb), coef,
                              np.int64(C), np.int32(bool(training))))
            if k2 is not None:
                k2(_grid(total), _B256, (_u64(g), *sg, _u64(x), *sx, np.int64(C), np.int64(S),
                                         _u64(mean), coef, _u64(gx), np.int64(total)))

        return 0 if self._served("batch_norm_lp", go) else K.ERR_DTYPE

    # ---- max pooling: 16-bit data as it is; indices noted in range, so the backward's scatter
    # needs no check ----------------------------------------------------------------------------
    def pool_native(self, dtype):
        """Whether pool_max / pool_scatter take ``dtype`` (bfloat16/float16) as it is (else the
        op layer widens it to float32 around them)."""
        return (dtype.code in _LP_H and self._kernels_ok and
                "pool_lp" not in self.fast_path_errors)

    def pool_max(self, adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx):
        h = _LP_H.get(x._dtype.code)
        if h is not None:
            rc = self._pool_max_lp(h, adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx)
        else:
            rc = super().pool_max(adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx)
        if rc == 0 and idx is not None:
            n_in = int(isz[0]) * int(isz[1]) * int(isz[2])
            self.note_range(idx, 0, max(n_in - 1, 0))  # every index is a position in a plane
        return rc

    def _pool_max_lp(self, h, adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx):
        """The 16-bit max pool (fixed windows, contiguous planes), or ERR_DTYPE (the op layer
        then widens)."""
        ok = (not adaptive and d is not None and nplanes > 0 and out._dtype is x._dtype and
              x._contig and out._contig and
              len(isz) == len(osz) == len(k) == len(s) == len(p) == len(d) == 3 and
              all(v > 0 for v in tuple(isz) + tuple(osz) + tuple(k) + tuple(s) + tuple(d)) and
              all(v >= 0 for v in p) and (idx is None or (idx._dtype is D.int64 and
                                                          idx._contig)))
        if not ok:
            return K.ERR_DTYPE
        total = nplanes * osz[0] * osz[1] * osz[2]
        args = [np.int32(v) for v in tuple(isz) + tuple(osz) + tuple(k) + tuple(s) + tuple(p) +
                tuple(d)]

        def go():
            self._lp_kernel(h, "fm_maxpool_lp")(_grid(total), _B256, (
                _u64(x), _u64(out), _u64(idx), np.int64(total), *args))

        return 0 if self._served("pool_lp", go) else K.ERR_DTYPE

    def pool_scatter(self, accumulate, nplanes, ssize, dsize, src, idx, dst, bad):
        dt = src._dtype
        h = _LP_H.get(dt.code)
        if h is not None:  # 16-bit: float atomics and one rounding pass, or ERR_DTYPE (widen)
            if not (accumulate and dst._dtype is dt and idx._dtype is D.int64 and
                    src._contig and idx._contig and dst._contig and nplanes > 0 and
                    ssize > 0 and dsize > 0 and src._numel == nplanes * ssize and
                    dst._numel == nplanes * dsize and self.known_in(idx, 0, dsize)):
                return K.ERR_DTYPE
            total, n = nplanes * ssize, nplanes * dsize
            acc = self.xp.zeros(n, np.float32)

            def go():
                k1 = self._lp_kernel(h, "fm_pool_scatter_add_lp")
                k2 = self._lp_kernel(h, "fm_lp_round")
                k1(_grid(total), _B256, (_u64(src), _u64(idx), acc, np.int64(ssize),
                                         np.int64(dsize), np.int64(total)))
                k2(_grid(n), _B256, (acc, _u64(dst), np.int64(n)))

            return 0 if self._served("pool_lp", go) else K.ERR_DTYPE
        if accumulate and (dt is D.float32 or dt is D.float64) and dst._dtype is dt and \
                idx._dtype is D.int64 and src._contig and idx._contig and dst._contig and \
                nplanes > 0 and ssize > 0 and dsize > 0 and \
                src._numel == nplanes * ssize and dst._numel == nplanes * dsize and \
                self.known_in(idx, 0, dsize):
            total = nplanes * ssize
            ct = "float" if dt is D.float32 else "double"

            def go():
                kern = self._raw_kernel("pool_scatter", POOL_SCATTER, "fm_pool_scatter_add",
                                        ct)
                self.fill(dst, 0.0, 0, False)
                kern(_grid(total), _B256, (_u64(src), _u64(idx), _u64(dst), np.int64(ssize),
                                           np.int64(dsize), np.int64(total)))

            if self._served("pool_scatter", go):
                return 0
        return super().pool_scatter(accumulate, nplanes, ssize, dsize, src, idx, dst, bad)
