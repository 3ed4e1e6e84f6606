"""A quick check of the cuda backend's newest kernels on a GPU (focus.sh runs every
benchmarks/gpu/*_check.py): each path once at ResNet-18/GPU sizes, its result against the CPU,
whether its kernel served it (``fast_path_calls``) and the errors (``fast_path_errors``).

    python3 benchmarks/gpu/kernels_check.py [--device cuda] [--json PATH]

Paths: bfloat16 casts both ways (``lp_cast``), the bfloat16 max-pool backward as a gather
(``maxpool_bwd``), a global average pool of 56x56 planes (``avgpool_glob``), the fused mse and
bce_with_logits losses forward and backward (``loss_fwd``, ``loss_bwd``), an int64 counter
``+= 1`` (``int_scalar``). With ``--device xp`` under the CPU emulation (tools/cuda_emu, at a
smaller size) it checks the script's plumbing only.
"""

import argparse
import json
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import fiamma as f
    from fiamma import _backend

    dev = a.device
    if dev == "cuda" and not f.cuda.is_available():
        print("kernels_check: CUDA is not available")
        return 0
    be = _backend.backend_for(f.device(dev))
    if not hasattr(be, "fast_path_calls"):
        print(f"kernels_check: the {dev} backend has no kernels of its own")
        return 0
    big = dev == "cuda"
    N, C, H = (64, 64, 56) if big else (2, 8, 16)
    rng = np.random.default_rng(0)
    F = f.nn.functional
    rows = []

    def check(name, path, fn):
        before = dict(be.fast_path_calls)
        try:
            err = fn()
            ok = err is None or err <= 0
            note = "" if err is None else f"error / tolerance {err + 1:.3g}"
        except Exception as e:  # noqa: BLE001
            ok, note = False, f"{type(e).__name__}: {e}"[:200]
        served = {k: v - before.get(k, 0) for k, v in be.fast_path_calls.items()
                  if v != before.get(k, 0)}
        want = path in served
        rows.append({"case": name, "ok": ok, "served": want, "calls": served, "note": note})
        print(f"{'OK ' if ok and want else 'BAD'} {name}: {path} "
              f"{'served' if want else 'NOT served'} {served} {note}", flush=True)

    def diff(got, ref, tol):
        g = got.detach().cpu().double().numpy()
        r = ref.detach().cpu().double().numpy()
        e = float(np.max(np.abs(g - r) / (tol * (1 + np.abs(r))))) if g.size else 0.0
        return e - 1.0  # <= 0: within tol

    w = rng.standard_normal((512, 512, 3, 3)).astype(np.float32)
    wc = f.from_numpy(w)
    wd = wc.to(dev)
    check("cast f32->bf16 (512x512x3x3)", "lp_cast",
          lambda: diff(wd.to(f.bfloat16).float(), wc.to(f.bfloat16).float(), 1e-30))
    x = f.from_numpy(rng.standard_normal((N, C, H, H)).astype(np.float32)).to(f.bfloat16)
    xd = x.to(dev)
    check("cast bf16->f32", "lp_cast", lambda: diff(xd.float(), x.float(), 1e-30))

    def pool_bwd():
        xx = f.from_numpy(rng.standard_normal((N, C, 2 * H, 2 * H)).astype(np.float32))
        xx = xx.to(f.bfloat16)
        a, b = xx.to(dev).requires_grad_(), xx.clone().requires_grad_()
        ya, yb = F.max_pool2d(a, 3, 2, 1), F.max_pool2d(b, 3, 2, 1)
        g = f.from_numpy(rng.standard_normal(tuple(yb.shape)).astype(np.float32))
        g = g.to(f.bfloat16)
        ya.backward(g.to(dev))
        yb.backward(g)
        return diff(a.grad, b.grad, 1e-30)  # bit for bit the CPU's

    check("max_pool2d 3x3/2 bf16 backward", "maxpool_bwd", pool_bwd)
    check("adaptive_avg_pool2d(1) bf16 56x56", "avgpool_glob",
          lambda: diff(F.adaptive_avg_pool2d(xd, 1), x.float().mean((2, 3), keepdim=True),
                       2.0 ** -7))

    def loss(fn):
        a = f.from_numpy(rng.standard_normal((N, 1000)))
        t = f.from_numpy(rng.random((N, 1000)))
        ad, tdv = a.to(dev).requires_grad_(), t.to(dev)
        ac = a.clone().requires_grad_()
        la, lb = fn(ad, tdv), fn(ac, t)
        la.backward()
        lb.backward()
        return max(diff(la, lb, 1e-10), diff(ad.grad, ac.grad, 1e-10))

    check("mse_loss fwd+bwd float64", "loss_bwd", lambda: loss(F.mse_loss))
    check("bce_with_logits fwd+bwd float64", "loss_fwd",
          lambda: loss(F.binary_cross_entropy_with_logits))
    n = f.zeros((), dtype=f.int64, device=dev)

    def counter():
        for _ in range(3):
            n.add_(1)
        return None if n.item() == 3 else 1.0

    check("int64 += 1", "int_scalar", counter)
    errs = dict(be.fast_path_errors)
    print("fast_path_errors:", errs or "none")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"rows": rows, "fast_path_errors": errs}, fh, indent=1)
    return 0 if all(r["ok"] and r["served"] for r in rows) and not errs else 1


if __name__ == "__main__":
    sys.exit(main())
