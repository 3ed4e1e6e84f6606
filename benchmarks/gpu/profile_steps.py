"""Where the time of bench_cuda.py's training steps goes on a GPU: host time per step with and
without waiting for the device, fiamma.profiler's per-op CPU and CUDA time, a cProfile of the
MLP step, and a + b through CuPy's ufunc beside a vectorised RawKernel. Writes one text file.

    python3 benchmarks/gpu/profile_steps.py --out DIR [--budget SECONDS]
"""

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_cuda as B  # noqa: E402

T0 = time.perf_counter()
OUTF = None


def say(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    OUTF.write(s + "\n")
    OUTF.flush()


def host_vs_device(ctx, name, step, n=10):
    """ms per step: queued without waiting (host rate) and with a synchronisation after each."""
    for _ in range(2):
        step()
    ctx.fsync()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    t_host = (time.perf_counter() - t0) / n
    ctx.fsync()
    t_all = (time.perf_counter() - t0) / n
    say(f"{name}: host {t_host * 1e3:.2f} ms/step queued, {t_all * 1e3:.2f} ms/step with the "
        f"final wait")


def op_table(ctx, name, step, rows=30):
    from fiamma.profiler import ProfilerActivity, profile

    step()
    ctx.fsync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            step()
        ctx.fsync()
    ka = prof.key_averages()
    say(f"--- {name}: by self CPU time")
    say(ka.table(sort_by="self_cpu_time_total", row_limit=rows))
    say(f"--- {name}: by CUDA time")
    say(ka.table(sort_by="cuda_time_total", row_limit=rows))


def cprof(ctx, name, step, n=10, rows=45):
    step()
    ctx.fsync()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        step()
    ctx.fsync()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(rows)
    say(f"--- cProfile {name}, {n} steps, by tottime")
    say(s.getvalue())


ADD4 = r"""
extern "C" __global__ void add4(const float4* __restrict__ a, const float4* __restrict__ b,
                                float4* __restrict__ c, long long n4) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) {
        float4 x = a[i], y = b[i];
        c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}
"""


def add_paths(ctx):
    import cupy as cp

    n = 256 * 2 ** 20
    a = cp.full((n,), 1.5, cp.float32)
    b = cp.full((n,), 2.0, cp.float32)
    c = cp.empty_like(a)
    moved = 12 * n

    def t(fn, k=20):
        fn()
        cp.cuda.Device().synchronize()
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        for _ in range(k):
            fn()
        e.record()
        e.synchronize()
        return cp.cuda.get_elapsed_time(s, e) / k / 1e3

    say(f"cp.add(out=) {moved / t(lambda: cp.add(a, b, out=c)) / 1e9:.0f} GB/s")
    say(f"a + b (new) {moved / t(lambda: a + b) / 1e9:.0f} GB/s")
    k = cp.RawKernel(ADD4, "add4")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    for blocks, threads in ((sms * 8, 256), (sms * 16, 256), ((n // 4 + 255) // 256, 256)):
        g = lambda: k((blocks,), (threads,), (a, b, c, cp.int64(n // 4)))  # noqa: E731
        say(f"RawKernel float4 grid {blocks}x{threads}: {moved / t(g) / 1e9:.0f} GB/s, "
            f"ok {bool(c[-1] == 3.5)}")
    f = ctx.fiamma
    fa = f.full((n,), 1.5, device="cuda")
    fb = f.full((n,), 2.0, device="cuda")
    say(f"fiamma a + b {moved / t(lambda: fa + fb) / 1e9:.0f} GB/s")


def micro(ctx):
    """Host cost per call of the CuPy calls fiamma's generic code is made of (us, small
    arrays, the device idle)."""
    import cupy as cp

    a = cp.ones((128, 512), cp.float32)
    b = cp.ones((128, 512), cp.float32)
    o = cp.empty_like(a)
    mem = cp.cuda.alloc(a.nbytes)
    k = cp.ElementwiseKernel("T x, T y", "T z", "z = x + y", "fm_probe_add")
    f = ctx.fiamma
    fa = f.ones(128, 512, device="cuda")
    fb = f.ones(128, 512, device="cuda")
    cases = [
        ("cp.add(a, b, out=o)", lambda: cp.add(a, b, out=o)),
        ("a + b", lambda: a + b),
        ("a + np.float32(1)", lambda: a + np.float32(1)),
        ("a + cp.asarray(1.0, float32)", lambda: a + cp.asarray(1.0, dtype=cp.float32)),
        ("ElementwiseKernel(a, b, o)", lambda: k(a, b, o)),
        ("cp.ndarray view on memptr", lambda: cp.ndarray((128, 512), cp.float32, memptr=mem)),
        ("cp.cuda.alloc(256 KiB)", lambda: cp.cuda.alloc(262144)),
        ("a.sum(axis=0, dtype=float64)", lambda: a.sum(axis=0, dtype=cp.float64)),
        ("a.sum(axis=0)", lambda: a.sum(axis=0)),
        ("a.max(axis=1, keepdims)", lambda: a.max(axis=1, keepdims=True)),
        ("cp.where(a > 0, a, 0)", lambda: cp.where(a > 0, a, np.float32(0))),
        ("o[...] = a", lambda: o.__setitem__(Ellipsis, a)),
        ("a.astype(float64)", lambda: a.astype(cp.float64)),
        ("cp.matmul 128x512x512", lambda: cp.matmul(a, b.T)),
        ("bool(cp.any(a < 0)) (sync)", lambda: bool(cp.any(a < 0))),
        ("fiamma fa + fb", lambda: fa + fb),
        ("fiamma fa * 2.0", lambda: fa * 2.0),
        ("fiamma fa.relu()", lambda: fa.relu()),
        ("fiamma fa.sum(0)", lambda: fa.sum(0)),
        ("fiamma fa @ fb.t()", lambda: fa @ fb.t()),
        ("fiamma fa.t()", lambda: fa.t()),
    ]
    for name, fn in cases:
        for _ in range(20):
            fn()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        t1 = time.perf_counter()
        cp.cuda.Device().synchronize()
        say(f"{name:34s} {(t1 - t0) / 200 * 1e6:8.1f} us/call host")


def cudnn_probe():
    for mod in ("cupy.cuda.cudnn", "cupyx.cudnn", "cupy_backends.cuda.libs.cudnn"):
        try:
            m = __import__(mod, fromlist=["x"])
            v = getattr(m, "getVersion", lambda: "?")()
            say(f"{mod}: importable, version {v}")
        except Exception as e:
            say(f"{mod}: {type(e).__name__}: {e}")
    import glob
    import site

    hits = []
    for d in site.getsitepackages() + ["/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64"]:
        hits += glob.glob(os.path.join(d, "**", "libcudnn*.so*"), recursive=True)[:8]
    say("libcudnn files:", hits[:12])
    try:
        import cupy

        say("cupy config:", cupy.cuda.get_cuda_path(), cupy.cuda.runtime.runtimeGetVersion())
    except Exception as e:
        say("cupy config:", e)


def main():
    global OUTF
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-results"))
    p.add_argument("--budget", type=float, default=120.0)
    p.add_argument("--only", default="", help="comma-separated job names (default: all)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    OUTF = open(os.path.join(args.out, "profile.txt"), "w")
    ctx = B.Ctx("cuda")
    f = ctx.fiamma
    jobs = []

    def mlp():
        bs = 128
        rng = np.random.default_rng(0)
        x = B._f_from_np(ctx, rng.standard_normal((bs, 784), dtype=np.float32))
        y = B._f_from_np(ctx, rng.integers(0, 10, bs).astype(np.int64))
        m = B._mlp(f, "cuda")
        return B._train_step(f, m, f.optim.SGD(m.parameters(), lr=0.01),
                             f.nn.CrossEntropyLoss(), x, y)

    def gpt():
        layers, heads, width, block, bs = B.SIZES["gpt"][0]
        rng = np.random.default_rng(0)
        x = B._f_from_np(ctx, rng.integers(0, 65, (bs, block)).astype(np.int64))
        y = B._f_from_np(ctx, rng.integers(0, 65, (bs, block)).astype(np.int64))
        m = B.build_gpt(f, layers, heads, width, block).to("cuda")
        lf = lambda lg, t: f.nn.functional.cross_entropy(lg.view(-1, lg.size(-1)),  # noqa
                                                         t.view(-1))
        return B._train_step(f, m, f.optim.AdamW(m.parameters(), lr=3e-4), lf, x, y)

    def resnet():
        import fiamma.vision.models as fvm

        rng = np.random.default_rng(0)
        x = B._f_from_np(ctx, rng.standard_normal((64, 3, 224, 224), dtype=np.float32))
        y = B._f_from_np(ctx, rng.integers(0, 1000, 64).astype(np.int64))
        m = fvm.resnet18().to("cuda")
        return B._train_step(f, m, f.optim.SGD(m.parameters(), lr=0.01, momentum=0.9),
                             f.nn.CrossEntropyLoss(), x, y, autocast_dtype=f.bfloat16)

    jobs = [("micro", lambda: micro(ctx)),
            ("cudnn", lambda: cudnn_probe()),
            ("a+b", lambda: add_paths(ctx)),
            ("free", lambda: __import__("cupy").get_default_memory_pool().free_all_blocks())]
    for name, build in (("MLP", mlp), ("GPT", gpt), ("ResNet-18", resnet)):
        def job(name=name, build=build):
            step = build()
            host_vs_device(ctx, name, step, n=20 if name == "MLP" else 5)
            op_table(ctx, name, step)
            cprof(ctx, name, step, n=10 if name == "MLP" else 3)
        jobs.append((name, job))
    only = [x for x in args.only.split(",") if x]
    for name, job in jobs:
        if only and name not in only:
            continue
        left = args.budget - (time.perf_counter() - T0)
        if left < 10:
            say(f"== {name}: skipped, {left:.0f} s left")
            continue
        say(f"== {name} ({left:.0f} s left)")
        try:
            job()
        except Exception:
            say(traceback.format_exc())
    say(f"== done in {time.perf_counter() - T0:.0f} s")


if __name__ == "__main__":
    main()
