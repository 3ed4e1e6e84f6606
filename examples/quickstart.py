"""A first look at fiamma: tensors, broadcasting, reductions and matmul, beside NumPy.

    python examples/quickstart.py        (or: nox -s demo)

fiamma has PyTorch's API; the NumPy lines next to each step compute the same thing. Ops that
this version of fiamma-core does not have yet are reported and skipped.
"""

import time

import numpy as np

import fiamma


def best_ms(fn, repeat=7):
    """Best wall time of ``fn()`` in milliseconds (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def race(title, fiamma_fn, numpy_fn):
    """Time the same computation in both libraries and check that they agree."""
    try:
        got = fiamma_fn()
    except (AttributeError, NotImplementedError) as e:
        print(f"  {title:<34} (not in this fiamma-core yet: {e})")
        return
    want = numpy_fn()
    same = np.allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    tf, tn = best_ms(fiamma_fn), best_ms(numpy_fn)
    print(f"  {title:<34} fiamma {tf:8.2f} ms   numpy {tn:8.2f} ms   "
          f"{'same result' if same else 'RESULTS DIFFER'}")


def main():
    print(f"fiamma {fiamma.__version__}, numpy {np.__version__}\n")

    # -- tensors: PyTorch's constructors, dtypes and views
    x = fiamma.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    print("x =", x)
    print("x.shape", tuple(x.shape), "x.dtype", x.dtype, "x.stride()", x.stride())
    xt = x.t()  # a view: no copy, strides swapped
    print("x.t() strides", xt.stride(), "contiguous:", xt.is_contiguous())
    i = fiamma.tensor([1, 2, 3])
    print("int64 + float32 ->", (i + x).dtype, " (PyTorch's type promotion)")

    # -- zero-copy exchange with NumPy
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = fiamma.from_numpy(a)  # shares a's memory
    a[0, 0] = 42.0
    print("from_numpy shares memory:", t.numpy()[0, 0] == 42.0)

    # -- broadcasting
    col = fiamma.tensor([[10.0], [20.0]])  # (2, 1)
    row = fiamma.tensor([1.0, 2.0, 3.0])   # (3,)
    print("(2,1) + (3,) ->", tuple((col + row).shape), (col + row).tolist())
    print("relu(x - 3) =", fiamma.relu(x - 3).tolist())

    # -- the same work in both libraries, timed
    rng = np.random.default_rng(0)
    n = 4_000_000
    an = rng.standard_normal(n, dtype=np.float32)
    bn = rng.standard_normal(n, dtype=np.float32)
    af, bf = fiamma.from_numpy(an), fiamma.from_numpy(bn)
    print(f"\nelementwise on {n:,} float32 values:")
    race("a + b", lambda: af + bf, lambda: an + bn)
    race("a * b + a", lambda: af * bf + af, lambda: an * bn + an)
    race("exp(a)", lambda: fiamma.exp(af), lambda: np.exp(an))
    race("relu(a)", lambda: fiamma.relu(af), lambda: np.maximum(an, 0))

    m = rng.standard_normal((2048, 1024), dtype=np.float32)
    mf = fiamma.from_numpy(m)
    print("\nreductions on a (2048, 1024) float32 matrix:")
    race("sum()", lambda: mf.sum(), lambda: m.sum())
    race("sum(dim=-1)", lambda: mf.sum(dim=-1), lambda: m.sum(axis=-1))
    race("argmax(dim=-1)", lambda: mf.argmax(dim=-1), lambda: m.argmax(axis=-1))

    p = rng.standard_normal((512, 512), dtype=np.float32)
    q = rng.standard_normal((512, 512), dtype=np.float32)
    pf, qf = fiamma.from_numpy(p), fiamma.from_numpy(q)
    print("\nmatrix product (512 x 512) @ (512 x 512):")
    race("fiamma.matmul(p, q)", lambda: fiamma.matmul(pf, qf), lambda: p @ q)


if __name__ == "__main__":
    main()
