"""Your own C kernel on fiamma tensors: a fused ``y = relu(a*x + b)``, compiled with cffi.

    python examples/c_extension.py

``fiamma.utils.cext.load`` compiles the C source once (cached under ~/.cache/fiamma/cext,
keyed by a hash of the source; later runs just load it), ``cext.kernel`` checks the tensors
(dtype, contiguity, device, shapes) and passes raw pointers. Needs a C compiler (gcc/clang).
"""

import time

import numpy as np

import fiamma
from fiamma.utils import cext

CDEF = """
void axpb_relu_f32(const float *x, float *y, int64_t n, float a, float b);
void axpb_relu_f64(const double *x, double *y, int64_t n, double a, double b);
"""

SOURCE = r"""
#include <stdint.h>

/* one pass over memory instead of three (mul, add, relu) */
#define AXPB_RELU(NAME, T)                                              \
    void NAME(const T *restrict x, T *restrict y, int64_t n, T a, T b) { \
        for (int64_t i = 0; i < n; i++) {                               \
            T v = a * x[i] + b;                                         \
            y[i] = v > 0 ? v : 0;                                       \
        }                                                               \
    }

AXPB_RELU(axpb_relu_f32, float)
AXPB_RELU(axpb_relu_f64, double)
"""


def build():
    lib = cext.load("axpb_relu", CDEF, SOURCE, extra_compile_args=["-O3", "-march=native"])
    kernels = {
        dt: cext.kernel(getattr(lib, f"axpb_relu_{suffix}"),
                        [cext.In("x", dt), cext.Out("y", like="x"), cext.Numel("x"),
                         cext.Scalar("a"), cext.Scalar("b")], name="axpb_relu")
        for dt, suffix in ((fiamma.float32, "f32"), (fiamma.float64, "f64"))
    }

    def axpb_relu(x, a, b):
        """relu(a * x + b) for a float32 or float64 tensor (made contiguous if needed)."""
        if x.dtype not in kernels:
            raise TypeError(f"axpb_relu: expected float32 or float64, got {x.dtype}")
        return kernels[x.dtype](x.contiguous(), a, b)

    return axpb_relu


def best_ms(fn, repeat=7):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main():
    axpb_relu = build()
    x = fiamma.randn(1000, 1000)
    y = axpb_relu(x, 2.0, -0.5)
    ref = np.maximum(2.0 * x.numpy() - 0.5, 0)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-6)
    print("axpb_relu matches NumPy on", tuple(x.shape), x.dtype)
    print(f"  fused C kernel    {best_ms(lambda: axpb_relu(x, 2.0, -0.5)):7.3f} ms")
    print(f"  fiamma, 3 ops     {best_ms(lambda: (x * 2.0 - 0.5).relu()):7.3f} ms")
    xn = x.numpy()
    print(f"  NumPy, 3 ops      {best_ms(lambda: np.maximum(xn * 2.0 - 0.5, 0)):7.3f} ms")
    try:
        axpb_relu(fiamma.arange(3), 1.0, 0.0)
    except TypeError as e:
        print("wrong dtype ->", e)
    try:
        cext.kernel(lambda *a: None, [cext.In("x", fiamma.float32)], name="demo")(x.t()[:, :3])
    except ValueError as e:
        print("non-contiguous ->", e)


if __name__ == "__main__":
    main()
