"""Per-op cost on a GPU, fiamma beside PyTorch in one process: for each op of the GPT and MLP
training steps (at the GPT step's shapes) and ResNet-18's bfloat16 autocast ops (batch norm,
ReLU, residual add, max pool at batch 64), the host time per call and the device time per call.

    python3 benchmarks/gpu/bench_ops.py --out DIR [--budget SECONDS]
    python3 benchmarks/gpu/bench_ops.py --device xp --out DIR   # plumbing check, no GPU

Host time: N calls queued back to back, divided by N (the device may still be busy).
Device time: a spin kernel holds the GPU for a while, the N calls are queued behind it, and CUDA
events before and after the N calls measure the device alone (no launch gaps), divided by N;
an op that waits for the device inside (a host read) shows up as "sync" (its queuing outlasted
the spin). One text file, ops.txt, and the same rows in ops.json.
"""

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SPIN_SRC = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


class Timer:
    def __init__(self, gpu):
        self.gpu = gpu
        if gpu:
            import cupy
            import torch

            self.cp, self.torch = cupy, torch
            self.spin = cupy.RawKernel(SPIN_SRC, "spin")
            # cycles per ms: measure once
            self.spin((1,), (1,), (np.int64(1000),))
            cupy.cuda.Device().synchronize()
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
            e0.record()
            self.spin((1,), (1,), (np.int64(50_000_000),))
            e1.record()
            e1.synchronize()
            self.cycles_per_ms = 50_000_000 / cupy.cuda.get_elapsed_time(e0, e1)

    def sync(self):
        if self.gpu:
            self.cp.cuda.Device().synchronize()
            self.torch.cuda.synchronize()

    def measure(self, fn, n):
        """(host us per call, device us per call or None, synced)"""
        for _ in range(2):
            fn()
        self.sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host = (time.perf_counter() - t0) / n
        self.sync()
        if not self.gpu:
            return host * 1e6, None, False
        spin_ms = min(200.0, max(5.0, host * n * 1e3 * 3 + 2))
        cp = self.cp
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        self.spin((1,), (1,), (np.int64(spin_ms * self.cycles_per_ms),))
        t0 = time.perf_counter()
        e0.record()
        for _ in range(n):
            fn()
        e1.record()
        queued = (time.perf_counter() - t0) * 1e3
        e1.synchronize()
        dev = cp.cuda.get_elapsed_time(e0, e1) / n * 1e3
        return host * 1e6, dev, queued > spin_ms


def cases(f, t, fdev, tdev, gpu, sizes=None):
    """(name, fiamma fn, torch fn, calls) at the GPT step's shapes (tiny on xp; ``sizes``:
    (B, T, C, heads, vocab) instead)."""
    B, T, C, H, V = sizes or ((32, 256, 384, 6, 65) if gpu else (2, 16, 32, 2, 65))
    rng = np.random.default_rng(0)

    def pair(shape, grad=False, dtype=np.float32):
        a = rng.standard_normal(shape).astype(dtype)
        x = f.from_numpy(a).to(fdev).requires_grad_(grad)
        y = t.from_numpy(a).to(tdev).requires_grad_(grad)
        return x, y

    x2f, x2t = pair((B * T, C))
    y2f, y2t = pair((B * T, C))
    h4f, h4t = pair((B * T, 4 * C))
    wf, wt = pair((C,))
    bf, bt = pair((C,))
    out = []

    def add(name, ff, tf, n=50):
        out.append((name, ff, tf, n))

    add("add (BT,C)", lambda: x2f + y2f, lambda: x2t + y2t)
    add("mul scalar (BT,C)", lambda: x2f * 0.5, lambda: x2t * 0.5)
    add("sum(0) (BT,4C)", lambda: h4f.sum(0), lambda: h4t.sum(0))
    add("clone (BT,C)", lambda: x2f.clone(), lambda: x2t.clone())
    x3f, x3t = x2f.view(B, T, C), x2t.view(B, T, C)
    add("transpose(0,1).contiguous (B,T,C)", lambda: x3f.transpose(0, 1).contiguous(),
        lambda: x3t.transpose(0, 1).contiguous())
    add("gelu (BT,4C)", lambda: f.nn.functional.gelu(h4f), lambda: t.nn.functional.gelu(h4t))
    add("layer_norm (BT,C)", lambda: f.nn.functional.layer_norm(x2f, (C,), wf, bf),
        lambda: t.nn.functional.layer_norm(x2t, (C,), wt, bt))
    w1f, w1t = pair((4 * C, C))
    add("linear (BT,C)->(4C)", lambda: f.nn.functional.linear(x2f, w1f),
        lambda: t.nn.functional.linear(x2t, w1t))

    # forward + backward of one op, gradients of the inputs
    def fb(lib, make):
        def go():
            y, inputs = make()
            y.backward(lib.ones_like(y))
            for i in inputs:
                i.grad = None
        return go

    gxf, gxt = pair((B * T, C), True)
    ghf, ght = pair((B * T, 4 * C), True)
    gwf, gwt = pair((C,), True)
    gbf, gbt = pair((C,), True)
    add("layer_norm fwd+bwd", fb(f, lambda: (f.nn.functional.layer_norm(gxf, (C,), gwf, gbf),
                                             (gxf, gwf, gbf))),
        fb(t, lambda: (t.nn.functional.layer_norm(gxt, (C,), gwt, gbt), (gxt, gwt, gbt))), 20)
    add("gelu fwd+bwd", fb(f, lambda: (f.nn.functional.gelu(ghf), (ghf,))),
        fb(t, lambda: (t.nn.functional.gelu(ght), (ght,))), 20)
    gw1f, gw1t = pair((4 * C, C), True)
    gb1f, gb1t = pair((4 * C,), True)
    add("linear+bias fwd+bwd", fb(f, lambda: (f.nn.functional.linear(gxf, gw1f, gb1f),
                                              (gxf, gw1f, gb1f))),
        fb(t, lambda: (t.nn.functional.linear(gxt, gw1t, gb1t), (gxt, gw1t, gb1t))), 20)
    qf, qt = pair((B, H, T, C // H), True)
    kf, kt = pair((B, H, T, C // H), True)
    vf, vt = pair((B, H, T, C // H), True)
    add("sdpa causal fwd", lambda: f.nn.functional.scaled_dot_product_attention(
        qf.detach(), kf.detach(), vf.detach(), is_causal=True),
        lambda: t.nn.functional.scaled_dot_product_attention(
        qt.detach(), kt.detach(), vt.detach(), is_causal=True), 20)
    add("sdpa causal fwd+bwd", fb(f, lambda: (f.nn.functional.scaled_dot_product_attention(
        qf, kf, vf, is_causal=True), (qf, kf, vf))),
        fb(t, lambda: (t.nn.functional.scaled_dot_product_attention(
            qt, kt, vt, is_causal=True), (qt, kt, vt))), 10)
    add("sdpa fwd (no mask)", lambda: f.nn.functional.scaled_dot_product_attention(
        qf.detach(), kf.detach(), vf.detach()),
        lambda: t.nn.functional.scaled_dot_product_attention(
        qt.detach(), kt.detach(), vt.detach()), 20)

    # the GPT block's layout: q, k, v strided views of one (B, T, 3C) projection
    def heads(qkv):
        q, k, v = qkv.split(C, dim=2)
        return [a.view(B, T, H, C // H).transpose(1, 2) for a in (q, k, v)]

    pf, pt = pair((B, T, 3 * C), True)
    add("sdpa causal fwd+bwd (qkv views)", fb(f, lambda: (
        f.nn.functional.scaled_dot_product_attention(*heads(pf), is_causal=True), (pf,))),
        fb(t, lambda: (t.nn.functional.scaled_dot_product_attention(
            *heads(pt), is_causal=True), (pt,))), 10)
    lf, lt = pair((B * T, V), True)
    tg = rng.integers(0, V, (B * T,)).astype(np.int64)
    tgf, tgt = f.from_numpy(tg).to(fdev), t.from_numpy(tg).to(tdev)
    add("cross_entropy fwd+bwd", fb(f, lambda: (f.nn.functional.cross_entropy(lf, tgf), (lf,))),
        fb(t, lambda: (t.nn.functional.cross_entropy(lt, tgt), (lt,))), 20)
    ef, et = pair((V, C), True)
    idx = rng.integers(0, V, (B, T)).astype(np.int64)
    idf, idt = f.from_numpy(idx).to(fdev), t.from_numpy(idx).to(tdev)
    add("embedding fwd+bwd", fb(f, lambda: (f.nn.functional.embedding(idf, ef), (ef,))),
        fb(t, lambda: (t.nn.functional.embedding(idt, et), (et,))), 20)

    # AdamW over the GPT's parameter shapes (grads set once)
    from bench_cuda import _load_same_weights, build_gpt

    t.manual_seed(0)
    tm = build_gpt(t, 6, H, C, T) if gpu else build_gpt(t, 2, H, C, T)
    fm = build_gpt(f, 6, H, C, T) if gpu else build_gpt(f, 2, H, C, T)
    _load_same_weights(fm, tm)
    tm, fm = tm.to(tdev), fm.to(fdev)
    for p, q in zip(fm.parameters(), tm.parameters()):
        g = rng.standard_normal(tuple(p.shape)).astype(np.float32) * 1e-3
        p.grad = f.from_numpy(g).to(fdev)
        q.grad = t.from_numpy(g).to(tdev)
    fo = f.optim.AdamW(fm.parameters(), lr=1e-4)
    to = t.optim.AdamW(tm.parameters(), lr=1e-4)
    add("AdamW step (GPT params)", fo.step, to.step, 5)
    fz = f.optim.AdamW(fm.parameters(), lr=1e-4)
    add("zero_grad (GPT params)", lambda: fz.zero_grad(set_to_none=False),
        lambda: to.zero_grad(set_to_none=False), 5)
    return out


def resnet_cases(f, t, fdev, tdev, gpu, sizes=None):
    """(name, fiamma fn, torch fn, calls) of ResNet-18's bfloat16 activations under autocast
    (issue 21: cuda_lowp.py's kernels): layer1's (N, 64, 56, 56) at batch 64 on a GPU (tiny on
    xp; ``sizes``: (N, C, H) instead); batch norm with float32 weights and running statistics,
    ReLU, the residual add, the stem's 3x3 stride-2 max pool on (N, 64, 2H, 2H)."""
    N, C, H = sizes or ((64, 64, 56) if gpu else (2, 8, 8))
    rng = np.random.default_rng(1)
    bf = (f.bfloat16, t.bfloat16)

    def pair(shape, grad=False, low=True):
        a = rng.standard_normal(shape).astype(np.float32)
        x = f.from_numpy(a).to(fdev)
        y = t.from_numpy(a).to(tdev)
        if low:
            x, y = x.to(bf[0]), y.to(bf[1])
        return x.requires_grad_(grad), y.requires_grad_(grad)

    out = []

    def add(name, ff, tf, n=50):
        out.append((name, ff, tf, n))

    def fb(lib, make):
        def go():
            y, inputs = make()
            y.backward(lib.ones_like(y))
            for i in inputs:
                i.grad = None
        return go

    shape = (N, C, H, H)
    xf, xt = pair(shape)
    yf, yt = pair(shape)
    # this session's kernels first (cudak: fm_lp_cast, fm_avgpool_glob_s, fm_loss_*,
    # fm_int_s64): autocast's weight cast (layer4's 512x512x3x3) and a gradient's cast back
    wf32, wt32 = pair((512, 512, 3, 3), low=False)
    add("cast f32->bf16 (conv weight 512^2x3x3)", lambda: wf32.to(bf[0]),
        lambda: wt32.to(bf[1]))
    add("cast bf16->f32 (N,64,56,56)", lambda: xf.float(), lambda: xt.float())
    F, TF = f.nn.functional, t.nn.functional
    add("adaptive_avg_pool2d(1) bf16 (N,64,56,56)", lambda: F.adaptive_avg_pool2d(xf, 1),
        lambda: TF.adaptive_avg_pool2d(xt, 1))
    lf, lt = pair((N, 1000), True, False)
    tf_, tt_ = pair((N, 1000), False, False)
    add("mse_loss fwd+bwd (N,1000)", fb(f, lambda: (F.mse_loss(lf, tf_), (lf,))),
        fb(t, lambda: (TF.mse_loss(lt, tt_), (lt,))), 20)
    sf, st_ = tf_.sigmoid(), tt_.sigmoid()  # targets in [0, 1], made once
    add("bce_with_logits fwd+bwd (N,1000)",
        fb(f, lambda: (F.binary_cross_entropy_with_logits(lf, sf), (lf,))),
        fb(t, lambda: (TF.binary_cross_entropy_with_logits(lt, st_), (lt,))), 20)
    nf, nt = f.zeros((), dtype=f.int64, device=fdev), t.zeros((), dtype=t.int64, device=tdev)
    add("int64 += 1 (num_batches_tracked)", lambda: nf.add_(1), lambda: nt.add_(1))
    add("bf16 relu (N,64,56,56)", lambda: f.relu(xf), lambda: t.relu(xt))
    add("bf16 add (residual)", lambda: xf + yf, lambda: xt + yt)
    add("bf16 mul scalar", lambda: xf * 0.5, lambda: xt * 0.5)
    add("bf16 add alpha", lambda: f.add(xf, yf, alpha=0.5), lambda: t.add(xt, yt, alpha=0.5))
    mf, mt = xf > 0, xt > 0
    add("bf16 where(mask, g, 0)", lambda: f.where(mf, yf, 0.0), lambda: t.where(mt, yt, 0.0))
    gxf, gxt = pair(shape, True)
    add("bf16 relu fwd+bwd", fb(f, lambda: (f.relu(gxf), (gxf,))),
        fb(t, lambda: (t.relu(gxt), (gxt,))), 20)
    wf, wt = pair((C,), True, False)
    bf_, bt = pair((C,), True, False)
    rmf, rmt = pair((C,), False, False)
    rvf, rvt = f.ones(C, device=fdev), t.ones(C, device=tdev)
    add("bf16 batch_norm train fwd", lambda: F.batch_norm(xf, rmf, rvf, wf.detach(),
                                                          bf_.detach(), True),
        lambda: TF.batch_norm(xt, rmt, rvt, wt.detach(), bt.detach(), True))
    add("bf16 batch_norm fwd+bwd", fb(f, lambda: (F.batch_norm(gxf, rmf, rvf, wf, bf_, True),
                                                  (gxf, wf, bf_))),
        fb(t, lambda: (TF.batch_norm(gxt, rmt, rvt, wt, bt, True), (gxt, wt, bt))), 20)
    pf, pt = pair((N, C, 2 * H, 2 * H), True)
    add("bf16 max_pool2d 3x3/2 fwd+bwd", fb(f, lambda: (F.max_pool2d(pf, 3, 2, 1), (pf,))),
        fb(t, lambda: (TF.max_pool2d(pt, 3, 2, 1), (pt,))), 20)
    return out


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="gpu-results")
    p.add_argument("--device", default="cuda")
    p.add_argument("--budget", type=float, default=60.0)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    import torch

    import fiamma as f

    gpu = args.device == "cuda"
    timer = Timer(gpu)
    t_start = time.perf_counter()
    rows = []
    lines = [f"fiamma on {args.device} beside PyTorch {torch.__version__}"
             + (f" on {torch.cuda.get_device_name()}" if gpu else ""),
             "", "| op | fiamma host us | fiamma device us | torch host us | torch device us "
             "| device ratio |", "|---|---|---|---|---|---|"]
    try:
        # ResNet-18's bfloat16 ops first: the newest kernels (cuda_lowp.py), within the budget
        todo = (resnet_cases(f, torch, args.device, "cuda" if gpu else "cpu", gpu) +
                cases(f, torch, args.device, "cuda" if gpu else "cpu", gpu))
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        todo = []
    for name, ff, tf, n in todo:
        if time.perf_counter() - t_start > args.budget:
            lines.append(f"| {name} | (out of time) | | | | |")
            continue
        row = {"op": name}
        try:
            fh, fd, fs = timer.measure(ff, n)
            th, td, ts = timer.measure(tf, n)
            row.update(fiamma_host_us=fh, fiamma_device_us=fd, fiamma_sync=fs, torch_host_us=th,
                       torch_device_us=td, torch_sync=ts)

            def dev(d, s):
                return "-" if d is None else f"{d:.1f}" + (" (sync)" if s else "")
            ratio = f"{fd / td:.2f}" if fd and td else "-"
            lines.append(f"| {name} | {fh:.1f} | {dev(fd, fs)} | {th:.1f} | {dev(td, ts)} | "
                         f"{ratio} |")
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"
            lines.append(f"| {name} | error: {row['error'][:150]} | | | | |")
            traceback.print_exc()
        rows.append(row)
        print(lines[-1], flush=True)
        with open(os.path.join(args.out, "ops.txt"), "w") as fh_:
            fh_.write("\n".join(lines) + "\n")
        with open(os.path.join(args.out, "ops.json"), "w") as fh_:
            json.dump(rows, fh_, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
