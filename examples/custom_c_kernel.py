"""A differentiable C kernel: row-wise log-sum-exp, forward and backward in C, as an autograd op.

    python examples/custom_c_kernel.py
    python examples/custom_c_kernel.py --rows 4096 --cols 512

``logsumexp(x)[i] = log(sum_j exp(x[i, j]))`` (stable: the row's maximum is subtracted first)
and its gradient ``grad_x[i, j] = grad[i] * exp(x[i, j] - out[i])`` (the softmax of the row)
are two C functions compiled with ``fiamma.utils.cext.load`` (cffi; cached after the first run).
``cext.kernel`` wraps each one: it checks dtype, contiguity and the named dimensions
``n``/``m`` of every tensor, allocates the outputs and passes pointers and sizes. A
``fiamma.autograd.Function`` ties them together: forward calls the forward kernel and saves its
input and output, backward calls the backward kernel. ``gradcheck`` then compares the C
gradient with finite differences in float64. (``cext.kernel`` can also take the backward
directly through its ``@kernel.backward`` decorator; the explicit Function shows the pieces.)

Needs a C compiler (gcc or clang).
"""

import argparse
import time

import fiamma
from fiamma.autograd import Function, gradcheck
from fiamma.utils import cext

CDEF = """
void lse_fwd_f32(const float *x, float *out, int64_t n, int64_t m);
void lse_bwd_f32(const float *x, const float *out, const float *g, float *gx, int64_t n,
                 int64_t m);
void lse_fwd_f64(const double *x, double *out, int64_t n, int64_t m);
void lse_bwd_f64(const double *x, const double *out, const double *g, double *gx, int64_t n,
                 int64_t m);
"""

SOURCE = r"""
#include <math.h>
#include <stdint.h>

/* one pass for the max, one for the sum: x is read twice, nothing is written but out */
#define LSE(SUFFIX, T, EXP, LOG)                                                       \
    void lse_fwd_##SUFFIX(const T *restrict x, T *restrict out, int64_t n, int64_t m) {  \
        for (int64_t i = 0; i < n; i++) {                                              \
            const T *row = x + i * m;                                                  \
            T mx = -INFINITY, s = 0;                                                   \
            for (int64_t j = 0; j < m; j++) mx = row[j] > mx ? row[j] : mx;            \
            if (isinf(mx)) { out[i] = mx; continue; }  /* empty row or all -inf */     \
            for (int64_t j = 0; j < m; j++) s += EXP(row[j] - mx);                     \
            out[i] = mx + LOG(s);                                                      \
        }                                                                              \
    }                                                                                  \
    void lse_bwd_##SUFFIX(const T *restrict x, const T *restrict out, const T *restrict g, \
                          T *restrict gx, int64_t n, int64_t m) {                      \
        for (int64_t i = 0; i < n; i++)                                                \
            for (int64_t j = 0; j < m; j++)                                            \
                gx[i * m + j] = g[i] * EXP(x[i * m + j] - out[i]);                     \
    }

LSE(f32, float, expf, logf)
LSE(f64, double, exp, log)
"""

_KERNELS = {}


def kernels():
    """{dtype: (forward kernel, backward kernel)}, compiled on first use."""
    if not _KERNELS:
        lib = cext.load("rowwise_logsumexp", CDEF, SOURCE, extra_compile_args=["-O3"],
                        libraries=["m"])
        for dt, sfx in ((fiamma.float32, "f32"), (fiamma.float64, "f64")):
            fwd = cext.kernel(getattr(lib, f"lse_fwd_{sfx}"),
                              [cext.In("x", dt, shape=("n", "m")),
                               cext.Out("out", dtype=dt, shape=("n",)),
                               cext.Dim("n"), cext.Dim("m")], name="logsumexp")
            bwd = cext.kernel(getattr(lib, f"lse_bwd_{sfx}"),
                              [cext.In("x", dt, shape=("n", "m")),
                               cext.In("out", dt, shape=("n",)),
                               cext.In("g", dt, shape=("n",)),
                               cext.Out("gx", like="x"),
                               cext.Dim("n"), cext.Dim("m")], name="logsumexp_backward")
            _KERNELS[dt] = fwd, bwd
    return _KERNELS


class LogSumExp(Function):
    """Row-wise log-sum-exp over the last dimension, computed by the C kernels."""

    @staticmethod
    def forward(ctx, x):
        ks = kernels()
        if x.dtype not in ks:
            raise TypeError(f"logsumexp: expected float32 or float64, got {x.dtype}")
        if x.dim() == 0:
            raise ValueError("logsumexp: expected at least 1 dimension, got a 0-d tensor")
        lead, m = tuple(x.shape[:-1]), x.shape[-1]
        x2 = x.contiguous().reshape(-1, m)          # kernels take contiguous (n, m)
        out = ks[x.dtype][0](x2)
        ctx.save_for_backward(x2, out)
        ctx.lead = lead
        return out.reshape(lead)

    @staticmethod
    def backward(ctx, grad):
        x2, out = ctx.saved_tensors
        gx = kernels()[x2.dtype][1](x2, out, grad.contiguous().reshape(-1))
        return gx.reshape(*ctx.lead, x2.shape[-1])


def logsumexp(x):
    """log(sum(exp(x), dim=-1)) through the C kernels; differentiable.

    >>> logsumexp(fiamma.zeros(2, 4)).tolist()     # log(4)
    [1.3862943649291992, 1.3862943649291992]
    """
    return LogSumExp.apply(x)


def best_ms(fn, repeat=5):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2048)
    p.add_argument("--cols", type=int, default=256)
    args = p.parse_args(argv)

    gen = fiamma.Generator().manual_seed(0)
    # gradients against finite differences, float64, with a leading batch dimension
    x = fiamma.randn(2, 3, 5, dtype=fiamma.float64, generator=gen, requires_grad=True)
    assert gradcheck(logsumexp, (x,))
    print("gradcheck passes: the C backward matches finite differences (float64)")

    # the same values and gradients as fiamma's own logsumexp, in float32
    y = (fiamma.randn(args.rows, args.cols, generator=gen) * 10).requires_grad_()
    ours = logsumexp(y)
    ref = fiamma.logsumexp(y, dim=-1)
    g = fiamma.randn(args.rows, generator=gen)
    (gy,) = fiamma.autograd.grad(ours, y, g)
    (gr,) = fiamma.autograd.grad(ref, y, g)
    assert fiamma.allclose(ours, ref, rtol=1e-5, atol=1e-4), "forward differs"
    assert fiamma.allclose(gy, gr, rtol=1e-4, atol=1e-6), "backward differs"
    print(f"matches fiamma.logsumexp on {tuple(y.shape)} float32, values and gradients")

    yd = y.detach()
    print(f"  C kernel forward      {best_ms(lambda: logsumexp(yd)):7.3f} ms")
    print(f"  fiamma.logsumexp      {best_ms(lambda: fiamma.logsumexp(yd, dim=-1)):7.3f} ms")
    print(f"  forward + backward    "
          f"{best_ms(lambda: logsumexp(y).sum().backward()):7.3f} ms (C kernels)")

    try:
        logsumexp(fiamma.arange(6).reshape(2, 3))
    except TypeError as e:
        print("wrong dtype ->", e)
    return True


if __name__ == "__main__":
    main()
