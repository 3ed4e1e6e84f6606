"""fiamma on a GPU beside PyTorch on the same GPU, in one process: the figures of issue 21.

    python benchmarks/gpu/bench_cuda.py --out DIR             # on a machine with a GPU
    python benchmarks/gpu/bench_cuda.py --device xp --out DIR # plumbing check, no GPU

Workloads (each fiamma figure beside PyTorch's, and their ratio):
matmul 8192^3 bf16 and fp32 (TFLOP/s), a + b over 256M float32 (GB/s: 3 x 4 bytes per element
moved), an MLP training step 784-512-512-10 at batch 128 (SGD, cross-entropy; ms), a ResNet-18
training step at batch 64, 224^2 under bf16 autocast (ms), a GPT-style training step (6 layers,
6 heads, 384 wide, block 256, batch 32, AdamW; ms).

Timing: warm-up calls, then each call timed alone between two device synchronisations
(perf_counter), median reported; a workload stops early once it has used its time budget
(the count of timed calls is recorded). Each workload runs in try/except: a failure (an op not
yet on cuda) is recorded as its error and the others still run. The JSON and the markdown table
are rewritten after every workload, so a run cut short still leaves what it measured.

``--device xp`` runs fiamma on the NumPy reference device and PyTorch on the CPU with tiny
sizes: it checks this script's plumbing on any machine (its figures mean nothing).
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# (full size on cuda, tiny size on xp)
SIZES = {
    "matmul_n": (8192, 64),
    "add_n": (256 * 2 ** 20, 4096),
    "mlp_batch": (128, 16),
    "resnet_batch": (64, 2), "resnet_hw": (224, 64),
    "gpt": ((6, 6, 384, 256, 32), (2, 2, 32, 16, 2)),  # layers, heads, width, block, batch
}


class Ctx:
    """The two libraries' devices and synchronisation for one run."""

    def __init__(self, device):
        import torch

        import fiamma

        self.fiamma, self.torch = fiamma, torch
        self.gpu = device == "cuda"
        self.fdev = device
        self.tdev = "cuda" if self.gpu else "cpu"
        self.i = 0 if self.gpu else 1  # index into SIZES

    def size(self, name):
        return SIZES[name][self.i]

    def fsync(self):
        if self.gpu:
            self.fiamma.cuda.synchronize()

    def tsync(self):
        if self.gpu:
            self.torch.cuda.synchronize()


def timeit(fn, sync, warmup=2, iters=10, budget_s=20.0):
    """(median seconds per call, calls timed): ``warmup`` untimed calls, then up to ``iters``
    calls each timed between synchronisations, stopping once ``budget_s`` is spent."""
    t_start = time.perf_counter()
    for _ in range(warmup):
        fn()
        sync()
        if time.perf_counter() - t_start > budget_s:
            break
    times = []
    for _ in range(iters):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - t_start > budget_s:
            break
    return statistics.median(times), len(times)


# ---- workloads: each returns (fiamma figure, torch figure, unit, higher_is_better, notes) -----

def _f_from_np(ctx, a, dtype=None):
    t = ctx.fiamma.from_numpy(np.ascontiguousarray(a)).to(ctx.fdev)
    return t if dtype is None else t.to(dtype)


def _t_from_np(ctx, a, dtype=None):
    t = ctx.torch.from_numpy(np.ascontiguousarray(a)).to(ctx.tdev)
    return t if dtype is None else t.to(dtype)


def bench_matmul(ctx, dtname):
    n = ctx.size("matmul_n")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    f, t = ctx.fiamma, ctx.torch
    fa, fb = _f_from_np(ctx, a, getattr(f, dtname)), _f_from_np(ctx, b, getattr(f, dtname))
    ta, tb = _t_from_np(ctx, a, getattr(t, dtname)), _t_from_np(ctx, b, getattr(t, dtname))
    del a, b
    flop = 2.0 * n ** 3
    fs, fn_ = timeit(lambda: fa @ fb, ctx.fsync, iters=10)
    ts, tn_ = timeit(lambda: ta @ tb, ctx.tsync, iters=10)
    # the two results agree (cuBLAS on both sides: the same products up to summation order)
    err = float((fa @ fb).float().cpu().numpy()[:64, :64].astype(np.float64).sum()
                - (ta @ tb).float().cpu().numpy()[:64, :64].astype(np.float64).sum())
    notes = f"n={n}; timed calls fiamma {fn_}, torch {tn_}; |sum diff 64x64 corner| {abs(err):.3g}"
    be = _cuda_backend(ctx)
    if be is not None and be.fast_path_errors:
        notes += f"; cuBLAS fast path fell back: {be.fast_path_errors}"
    return flop / fs / 1e12, flop / ts / 1e12, "TFLOP/s", True, notes


def _cuda_backend(ctx):
    if not ctx.gpu:
        return None
    from fiamma._backend.xp import cuda

    return cuda.backend()


def bench_add(ctx):
    n = ctx.size("add_n")
    f, t = ctx.fiamma, ctx.torch
    fa = f.full((n,), 1.5, device=ctx.fdev)
    fb = f.full((n,), 2.0, device=ctx.fdev)
    ta = t.full((n,), 1.5, device=ctx.tdev)
    tb = t.full((n,), 2.0, device=ctx.tdev)
    moved = 3 * 4 * n
    fs, fn_ = timeit(lambda: fa + fb, ctx.fsync, iters=20)
    ts, tn_ = timeit(lambda: ta + tb, ctx.tsync, iters=20)
    ok = float((fa + fb)[-1].item()) == 3.5
    return (moved / fs / 1e9, moved / ts / 1e9, "GB/s", True,
            f"n={n}; timed calls fiamma {fn_}, torch {tn_}; result checked: {ok}")


def _mlp(lib, dev):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10)).to(dev)


def _train_step(lib, model, opt, loss_fn, x, y, autocast_dtype=None, dev_type="cuda"):
    def step():
        opt.zero_grad()
        if autocast_dtype is None:
            loss = loss_fn(model(x), y)
        else:
            with lib.autocast(dev_type, dtype=autocast_dtype):
                loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _load_same_weights(fmodel, tmodel):
    """fiamma's model takes PyTorch's initial weights (same names and shapes)."""
    f = sys.modules["fiamma"]
    state = {k: f.from_numpy(v.detach().cpu().float().numpy().copy())
             for k, v in tmodel.state_dict().items() if v.dtype.is_floating_point}
    fmodel.load_state_dict(state, strict=False)


def bench_mlp(ctx):
    f, t = ctx.fiamma, ctx.torch
    bs = ctx.size("mlp_batch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((bs, 784), dtype=np.float32)
    y = rng.integers(0, 10, bs).astype(np.int64)
    t.manual_seed(0)
    tm = _mlp(t, ctx.tdev)
    fm = _mlp(f, "cpu")
    _load_same_weights(fm, tm.cpu())
    tm = tm.to(ctx.tdev)
    fm = fm.to(ctx.fdev)
    fstep = _train_step(f, fm, f.optim.SGD(fm.parameters(), lr=0.01), f.nn.CrossEntropyLoss(),
                        _f_from_np(ctx, x), _f_from_np(ctx, y))
    tstep = _train_step(t, tm, t.optim.SGD(tm.parameters(), lr=0.01), t.nn.CrossEntropyLoss(),
                        _t_from_np(ctx, x), _t_from_np(ctx, y))
    l0f, l0t = float(fstep().item()), float(tstep().item())
    fs, fn_ = timeit(fstep, ctx.fsync, warmup=5, iters=50, budget_s=12)
    ts, tn_ = timeit(tstep, ctx.tsync, warmup=5, iters=50, budget_s=8)
    return (fs * 1e3, ts * 1e3, "ms/step", False,
            f"batch {bs}; first loss fiamma {l0f:.5f} torch {l0t:.5f}; timed steps {fn_}/{tn_}")


def bench_resnet(ctx):
    f, t = ctx.fiamma, ctx.torch
    import fiamma.vision.models as fvm  # fiamma-vision (packages/vision)

    bs, hw = ctx.size("resnet_batch"), ctx.size("resnet_hw")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((bs, 3, hw, hw), dtype=np.float32)
    y = rng.integers(0, 1000, bs).astype(np.int64)
    try:
        import torchvision

        tm = torchvision.models.resnet18().to(ctx.tdev)
        tnote = "torchvision resnet18"
    except Exception as e:  # torchvision missing: time fiamma alone
        tm, tnote = None, f"no torchvision ({type(e).__name__})"
    fm = fvm.resnet18().to(ctx.fdev)
    dt_f = f.bfloat16
    fstep = _train_step(f, fm, f.optim.SGD(fm.parameters(), lr=0.01, momentum=0.9),
                        f.nn.CrossEntropyLoss(), _f_from_np(ctx, x), _f_from_np(ctx, y),
                        autocast_dtype=dt_f, dev_type=ctx.fdev if ctx.gpu else "cpu")
    fs, fn_ = timeit(fstep, ctx.fsync, warmup=2, iters=10, budget_s=35)
    ts, tn_ = float("nan"), 0
    if tm is not None:
        tstep = _train_step(t, tm, t.optim.SGD(tm.parameters(), lr=0.01, momentum=0.9),
                            t.nn.CrossEntropyLoss(), _t_from_np(ctx, x), _t_from_np(ctx, y),
                            autocast_dtype=t.bfloat16, dev_type=ctx.tdev)
        ts, tn_ = timeit(tstep, ctx.tsync, warmup=3, iters=10, budget_s=12)
    return (fs * 1e3, ts * 1e3, "ms/step", False,
            f"batch {bs}, {hw}^2, bf16 autocast; {tnote}; timed steps {fn_}/{tn_}")


def build_gpt(lib, layers, heads, width, block, vocab=65):
    """The GPT of benchmarks/bench_gpt.py, sized by the arguments and device-aware."""
    nn, F = lib.nn, lib.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(width, 3 * width)
            self.c_proj = nn.Linear(width, width)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(width, dim=2)
            q = q.view(B, T, heads, C // heads).transpose(1, 2)
            k = k.view(B, T, heads, C // heads).transpose(1, 2)
            v = v.view(B, T, heads, C // heads).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.attn = Attention()
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                     nn.Linear(4 * width, width))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(block, width)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, vocab, bias=False)

        def forward(self, idx):
            pos = lib.arange(idx.size(1), dtype=lib.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.h:
                x = b(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def bench_gpt(ctx):
    f, t = ctx.fiamma, ctx.torch
    layers, heads, width, block, bs = ctx.size("gpt")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 65, (bs, block)).astype(np.int64)
    y = rng.integers(0, 65, (bs, block)).astype(np.int64)
    t.manual_seed(0)
    tm = build_gpt(t, layers, heads, width, block)
    fm = build_gpt(f, layers, heads, width, block)
    _load_same_weights(fm, tm)
    tm, fm = tm.to(ctx.tdev), fm.to(ctx.fdev)

    def loss_fn(lib):
        return lambda logits, tgt: lib.nn.functional.cross_entropy(
            logits.view(-1, logits.size(-1)), tgt.view(-1))

    fstep = _train_step(f, fm, f.optim.AdamW(fm.parameters(), lr=3e-4), loss_fn(f),
                        _f_from_np(ctx, x), _f_from_np(ctx, y))
    tstep = _train_step(t, tm, t.optim.AdamW(tm.parameters(), lr=3e-4), loss_fn(t),
                        _t_from_np(ctx, x), _t_from_np(ctx, y))
    l0f, l0t = float(fstep().item()), float(tstep().item())
    fs, fn_ = timeit(fstep, ctx.fsync, warmup=2, iters=10, budget_s=30)
    ts, tn_ = timeit(tstep, ctx.tsync, warmup=3, iters=10, budget_s=10)
    return (fs * 1e3, ts * 1e3, "ms/step", False,
            f"{layers}L {heads}H {width}w block {block} batch {bs}, fp32, AdamW; first loss "
            f"fiamma {l0f:.5f} torch {l0t:.5f}; timed steps {fn_}/{tn_}")


# target: fiamma / torch must be >= (higher is better) or <= (lower is better) this
WORKLOADS = [
    ("matmul 8192^3 bf16", lambda c: bench_matmul(c, "bfloat16"), 0.9),
    ("matmul 8192^3 fp32", lambda c: bench_matmul(c, "float32"), 0.9),
    ("a+b 256M float32", bench_add, 0.9),
    ("MLP step 784-512-512-10 b128", bench_mlp, 1.2),
    ("ResNet-18 step b64 224^2 bf16 autocast", bench_resnet, 1.5),
    ("GPT step 6L 6H 384w block 256 b32", bench_gpt, 1.3),
]


def environment(ctx):
    f, t = ctx.fiamma, ctx.torch
    env = {"python": platform.python_version(), "numpy": np.__version__,
           "fiamma": getattr(f, "__version__", "?"), "torch": t.__version__,
           "device": ctx.fdev}
    if ctx.gpu:
        try:
            import cupy

            env["cupy"] = cupy.__version__
            env["torch_gpu"] = t.cuda.get_device_name()
            env["gpu"] = f.cuda.get_device_name()
        except Exception as e:  # recorded; the workloads then fail with the same reason
            env["error"] = f"{type(e).__name__}: {e}"
    return env


def write(out_dir, env, rows):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "bench_cuda.json"), "w") as fh:
        json.dump({"environment": env, "results": rows}, fh, indent=1)
    lines = [f"fiamma on {env.get('gpu', env['device'])} beside PyTorch {env['torch']} "
             f"(CuPy {env.get('cupy', '-')}, Python {env['python']})", "",
             "| workload | fiamma | PyTorch | unit | ratio | target | notes |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['name']} | error | | | | | {r['error'][:300]} |")
            continue
        hib = r["higher_is_better"]
        target = (">= " if hib else "<= ") + f"{r['target']}x"
        lines.append(f"| {r['name']} | {r['fiamma']:.4g} | {r['torch']:.4g} | {r['unit']} | "
                     f"{r['ratio']:.3f} | {target} | {r['notes']} |")
    errs = {k: v for r in rows for k, v in r.get("fast_path_errors", {}).items()}
    if errs:
        lines += ["", "Fast paths that failed (their ops ran the generic code): " +
                  "; ".join(f"{k}: {v[:200]}" for k, v in errs.items())]
    with open(os.path.join(out_dir, "bench_cuda.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cuda", "xp"], default="cuda")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-results"))
    p.add_argument("--only", default="", help="comma-separated substrings of workload names")
    args = p.parse_args(argv)
    ctx = Ctx(args.device)
    env = environment(ctx)
    rows = []
    for name, fn, target in WORKLOADS:
        if args.only and not any(s in name for s in args.only.split(",")):
            continue
        t0 = time.perf_counter()
        row = {"name": name, "target": target}
        try:
            fv, tv, unit, hib, notes = fn(ctx)
            row.update(fiamma=fv, torch=tv, unit=unit, higher_is_better=hib, notes=notes,
                       ratio=fv / tv if tv else float("nan"))
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
            row["traceback"] = traceback.format_exc()[-3000:]
        row["seconds"] = round(time.perf_counter() - t0, 2)
        be = _cuda_backend(ctx)
        if be is not None:  # which of the backend's own kernels served, and any that failed
            row["fast_path_calls"] = dict(getattr(be, "fast_path_calls", {}))
            row["fast_path_errors"] = dict(be.fast_path_errors)
        rows.append(row)
        print(f"[bench] {name}: {row.get('error') or row['ratio']} ({row['seconds']} s)",
              flush=True)
        write(args.out, env, rows)
        if ctx.gpu:  # give the memory back between workloads
            import gc

            gc.collect()
            ctx.fiamma.cuda.empty_cache()
            ctx.torch.cuda.empty_cache()
    print(write(args.out, env, rows))


if __name__ == "__main__":
    main()
