"""GPU check of the array-module backend's random, special and spectral families under CuPy,
without importing fiamma's C extension (a GPU machine may have no cffi): the family modules are
loaded by themselves over stub packages, run on small fake tensors once with NumPy and once with
CuPy, and compared (random: bit for bit; special/stft: within float tolerance).

    python benchmarks/gpu/xp_families_check.py [--out DIR]

Writes DIR/xp_families.json (device name, per-check results) and exits non-zero on a failure.
"""

import argparse
import importlib
import json
import os
import sys
import time
import types

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "packages", "core",
                    "src", "fiamma")


def _load_modules():
    """fiamma._dtype, codes, philox and the random/special/spectral mixins, without
    fiamma/__init__.py (which loads the C library)."""
    for name, path in [("fiamma", ROOT), ("fiamma._backend", os.path.join(ROOT, "_backend")),
                       ("fiamma._backend.xp", os.path.join(ROOT, "_backend", "xp"))]:
        m = types.ModuleType(name)
        m.__path__ = [path]
        sys.modules[name] = m
    base = types.ModuleType("fiamma._backend.xp.base")
    base.BF16 = 7
    sys.modules["fiamma._backend.xp.base"] = base
    D = importlib.import_module("fiamma._dtype")
    C = importlib.import_module("fiamma._backend.codes")
    sys.modules["fiamma._backend"].codes = C
    R = importlib.import_module("fiamma._backend.xp.random")
    S = importlib.import_module("fiamma._backend.xp.special")
    F = importlib.import_module("fiamma._backend.xp.spectral")
    return D, C, R, S, F


D, C, R, S, F = _load_modules()

STORE = {d.code: (np.dtype(np.uint16) if d is D.bfloat16 else d._np) for d in D.ALL}


class T:
    """A contiguous fake tensor: dtype, shape, and its storage as an array."""

    def __init__(self, xp, dt, shape, values=None):
        self._dtype = dt
        self._shape = tuple(shape)
        self._numel = int(np.prod(shape)) if shape else 1
        self._stride = tuple(int(s) for s in np.cumprod((1,) + tuple(shape[::-1]))[:-1][::-1]) \
            if shape else ()
        self.arr = xp.zeros(self._shape, STORE[dt.code]) if values is None else \
            xp.asarray(values).astype(STORE[dt.code])


class Harness(R.RandomMixin, S.SpecialMixin, F.SpectralMixin):
    def __init__(self, xp, name):
        self.xp = xp
        self.name = name
        self.is_numpy = xp is np

    def raw(self, t, shape=None, strides=None, off=0):
        a = t.arr
        if shape is not None:
            isz = a.itemsize
            a = self.xp.lib.stride_tricks.as_strided(a.reshape(-1)[off:], tuple(shape),
                                                     tuple(s * isz for s in strides))
        return a

    def get(self, t, shape=None, strides=None, off=0):
        a = self.raw(t, shape, strides, off)
        return self.bf16_to_f32(a) if t._dtype is D.bfloat16 else a

    def put(self, t, values, shape=None, strides=None, off=0):
        r = self.raw(t, shape, strides, off)
        v = self.xp.asarray(values)
        if t._dtype is D.bfloat16:
            r[...] = self.f32_to_bf16(v.astype(np.float32))
        elif t._dtype is D.bool:
            r[...] = v if v.dtype == np.bool_ else (v != 0)
        else:
            r[...] = v

    def asarray(self, a):
        return self.xp.asarray(a)

    def bf16_to_f32(self, bits):
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)

    def f32_to_bf16(self, f):
        xp = self.xp
        f = xp.ascontiguousarray(f, dtype=np.float32)
        u = f.view(np.uint32)
        r = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
        r = xp.where(xp.isnan(f), np.uint32(0x7FC0) | ((u >> np.uint32(16)) & np.uint32(0x8000)),
                     r)
        return r.astype(np.uint16)

    def _special_fn(self, name):
        try:
            if self.is_numpy:
                import scipy.special as sp
            else:
                import cupyx.scipy.special as sp
        except Exception:
            return None
        return getattr(sp, name, None)


def host(a):
    return a if isinstance(a, np.ndarray) else a.get()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    import cupy as cp

    hn, hc = Harness(np, "xp"), Harness(cp, "cuda")
    results, failures = [], 0

    def record(name, ok, detail=""):
        nonlocal failures
        failures += not ok
        results.append({"check": name, "ok": bool(ok), "detail": detail})
        print(("ok   " if ok else "FAIL ") + name + (f"  {detail}" if detail else ""), flush=True)

    seed, off = 0x123456789ABCDEF0, 2 ** 64 - 7
    t0 = time.time()
    for dist, a, b, dts in [
            (C.RAND_UNIFORM, 0.0, 1.0, D.ALL[6:]), (C.RAND_UNIFORM, -3.0, 7.5, D.ALL[6:]),
            (C.RAND_NORMAL, 0.5, 2.0, D.ALL[6:]), (C.RAND_BERNOULLI, 0.3, 0.0, D.ALL),
            (C.RAND_EXPONENTIAL, 1.5, 0.0, D.ALL[6:]), (C.RAND_GEOMETRIC, 0.2, 0.0, D.ALL),
            (C.RAND_LOGNORMAL, 0.1, 0.5, D.ALL[6:]), (C.RAND_CAUCHY, 1.0, 2.0, D.ALL[6:])]:
        for dt in dts:
            n = 100003
            tn, tc = T(np, dt, (n,)), T(cp, dt, (n,))
            rn = hn.rand_fill(dist, tn, seed, off, a, b)
            rc = hc.rand_fill(dist, tc, seed, off, a, b)
            g, w = host(tc.arr), tn.arr
            exact = bool(np.array_equal(g, w, equal_nan=dt._kind == 2))
            if exact or dist not in (C.RAND_LOGNORMAL, C.RAND_CAUCHY):
                record(f"rand_fill dist={dist} {dt.name}", rn == rc == 0 and exact)
            else:  # exp/tan of CuPy vs NumPy: within an ulp
                gg, ww = g.astype(np.float64), w.astype(np.float64)
                rel = float(np.max(np.abs(gg - ww) / np.maximum(np.abs(ww), 1e-300)))
                record(f"rand_fill dist={dist} {dt.name} (~ulp)", rel < 1e-6, f"max rel {rel:.2e}")
    for dt in [D.int64, D.int32, D.uint8, D.float32, D.float16, D.bfloat16, D.bool]:
        for low, rng in [(0, 10), (-5, 2 ** 64 - 7), (3, 0)]:
            tn, tc = T(np, dt, (5001,)), T(cp, dt, (5001,))
            hn.rand_int(tn, seed, 5, low, rng)
            hc.rand_int(tc, seed, 5, low, rng)
            record(f"rand_int {dt.name} low={low} rng={rng}",
                   np.array_equal(host(tc.arr), tn.arr, equal_nan=True))
    p = np.random.default_rng(0).random(4097)
    tn, tc = T(np, D.float32, (4097,)), T(cp, D.float32, (4097,))
    hn.rand_bernoulli_p(tn, T(np, D.float64, p.shape, p), seed, 3, None)
    hc.rand_bernoulli_p(tc, T(cp, D.float64, p.shape, p), seed, 3, None)
    record("rand_bernoulli_p", np.array_equal(host(tc.arr), tn.arr))
    bad = [0]
    pb = p.copy()
    pb[77] = 1.5
    rc = hc.rand_bernoulli_p(tc, T(cp, D.float64, p.shape, pb), seed, 3, bad)
    record("rand_bernoulli_p bad p", rc == C.ERR_VALUE and bad == [77])
    for n in [1, 2, 17, 1000, 1000003]:
        tn, tc = T(np, D.int64, (n,)), T(cp, D.int64, (n,))
        s0 = time.time()
        hc.randperm(tc, seed, 11)
        cp.cuda.Device().synchronize()
        dtc = time.time() - s0
        hn.randperm(tn, seed, 11)
        record(f"randperm n={n}", np.array_equal(host(tc.arr), tn.arr), f"cuda {dtc:.3f}s")
    rng = np.random.default_rng(1)
    for rows, ncat, k, rep in [(3, 5, 4, True), (3, 5, 4, False), (64, 5000, 100, True),
                               (64, 5000, 100, False)]:
        pr = rng.random((rows, ncat))
        pr[pr < 0.3] = 0
        tn, tc = T(np, D.int64, (rows, k)), T(cp, D.int64, (rows, k))
        i1, i2 = [0, 0], [0, 0]
        r1 = hn.multinomial(T(np, D.float64, pr.shape, pr), k, rep, tn, seed, 9, i1)
        r2 = hc.multinomial(T(cp, D.float64, pr.shape, pr), k, rep, tc, seed, 9, i2)
        same = host(tc.arr) == tn.arr
        # with replacement CuPy's parallel cumsum may round a cdf entry differently: a draw
        # within an ulp of a boundary may then pick the neighbour (expected ~never)
        record(f"multinomial rows={rows} ncat={ncat} k={k} repl={rep}",
               r1 == r2 and i1 == i2 and (same.all() or (rep and same.mean() > 0.9999)),
               f"status {r1} {r2}, {int((~same).sum())} differ")
    record("random family time", True, f"{time.time() - t0:.1f}s")

    # ---- special ---------------------------------------------------------------------------
    vals = np.concatenate([[0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.5, 0.5,
                            1e-300, 0.25, 0.75, 30.5, 700.0, -26.0, 5e7],
                           np.random.default_rng(2).uniform(-10, 10, 400),
                           np.random.default_rng(3).uniform(0, 1, 100)])
    for op in range(C.SP_NUNARY):
        p0 = {C.SP_POLYGAMMA: 2.0, C.SP_MULTIGAMMALN: 3.0, C.SP_LOGIT: 1e-3}.get(op, 0.0)
        tn, tc = T(np, D.float64, vals.shape), T(cp, D.float64, vals.shape)
        try:
            hn.special_unary(op, tn, T(np, D.float64, vals.shape, vals), p0)
            hc.special_unary(op, tc, T(cp, D.float64, vals.shape, vals), p0)
            ok = np.allclose(host(tc.arr), tn.arr, rtol=1e-9, atol=1e-14, equal_nan=True)
            bad = np.where(~np.isclose(host(tc.arr), tn.arr, rtol=1e-9, atol=1e-14,
                                       equal_nan=True))[0][:4]
            record(f"special_unary op={op}", ok,
                   str([(vals[i], tn.arr[i], host(tc.arr)[i]) for i in bad]))
        except Exception as e:
            record(f"special_unary op={op}", False, f"{type(e).__name__}: {e}")
    aa, bb = np.meshgrid(vals[:60], np.abs(vals[5:65]))
    aa, bb = aa.ravel(), bb.ravel()
    for op in range(C.SP_NBINARY):
        tn, tc = T(np, D.float64, aa.shape), T(cp, D.float64, aa.shape)
        try:
            hn.special_binary(op, aa.shape, tn, T(np, D.float64, aa.shape, aa), (1,),
                              T(np, D.float64, aa.shape, bb), (1,))
            hc.special_binary(op, aa.shape, tc, T(cp, D.float64, aa.shape, aa), (1,),
                              T(cp, D.float64, aa.shape, bb), (1,))
            close = np.isclose(host(tc.arr), tn.arr, rtol=1e-8, atol=1e-13, equal_nan=True)
            bad = np.where(~close)[0][:4]
            record(f"special_binary op={op}", close.all(),
                   str([(aa[i], bb[i], tn.arr[i], host(tc.arr)[i]) for i in bad]))
        except Exception as e:
            record(f"special_binary op={op}", False, f"{type(e).__name__}: {e}")

    # ---- stft ------------------------------------------------------------------------------
    sig = np.random.default_rng(4).standard_normal((2, 1000))
    for mode in range(4):
        for nf, power in [(64, 0), (101, 1)]:
            frames = 1 + (1000 + 2 * (nf // 2) - nf) // 16
            shp = (2, nf // 2 + 1, frames) + (() if power else (2,))
            tn, tc = T(np, D.float64, shp), T(cp, D.float64, shp)
            w = np.hanning(nf)
            r1 = hn.stft(power, T(np, D.float64, sig.shape, sig), nf, 16, frames, nf // 2, mode,
                         w, 1, 1.0, tn)
            r2 = hc.stft(power, T(cp, D.float64, sig.shape, sig), nf, 16, frames, nf // 2, mode,
                         w, 1, 1.0, tc)
            record(f"stft mode={mode} n_fft={nf} power={power}",
                   r1 == r2 == 0 and np.allclose(host(tc.arr), tn.arr, rtol=1e-9, atol=1e-9))

    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "xp_families.json"), "w") as f:
        json.dump({"device": name, "cupy": cp.__version__, "numpy": np.__version__,
                   "failures": failures, "results": results}, f, indent=1)
    print(f"{name}: {failures} failures of {len(results)} checks")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
