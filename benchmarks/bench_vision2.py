"""ConvNeXt-Tiny forward (batch 8, 224x224, eval) and nms on 10k boxes: fiamma.vision beside
torchvision, each library in its own process (2 threads each), medians compared
(ratio < 1: fiamma faster). Without torch/torchvision only fiamma's times are printed.

    PYTHONPATH=<the packages' src dirs> python benchmarks/bench_vision2.py [--rounds 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

THREADS = 2


def _boxes(n=10_000, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 1000, (n, 2))
    wh = rng.uniform(10, 100, (n, 2))
    b = np.concatenate([xy, xy + wh], 1).astype(np.float32)
    return b, rng.uniform(0, 1, n).astype(np.float32)


def _time(fn, rounds):
    fn()
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def worker(lib, rounds, batch):
    import numpy as np
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype(np.float32)
    b, s = _boxes()
    out = {}
    if lib == "fiamma":
        import fiamma
        from fiamma.vision import models, ops
        m = models.convnext_tiny().eval()
        xf = fiamma.from_numpy(x)

        def fwd():
            with fiamma.no_grad():
                return m(xf)
        bf, sf = fiamma.from_numpy(b), fiamma.from_numpy(s)
        out["nms"] = _time(lambda: ops.nms(bf, sf, 0.5), rounds * 4)
        out["kept"] = len(ops.nms(bf, sf, 0.5))
    else:
        import torch
        import torchvision
        torch.set_num_threads(THREADS)
        m = torchvision.models.convnext_tiny().eval()
        xt = torch.from_numpy(x)

        def fwd():
            with torch.no_grad():
                return m(xt)
        bt, st = torch.from_numpy(b), torch.from_numpy(s)
        out["nms"] = _time(lambda: torchvision.ops.nms(bt, st, 0.5), rounds * 4)
        out["kept"] = len(torchvision.ops.nms(bt, st, 0.5))
    out["convnext"] = _time(fwd, rounds)
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--worker", choices=["fiamma", "torch"])
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.rounds, args.batch)
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS), OPENBLAS_NUM_THREADS=str(THREADS))
    res = {}
    for lib in ("fiamma", "torch"):
        p = subprocess.run([sys.executable, __file__, "--worker", lib, "--rounds",
                            str(args.rounds), "--batch", str(args.batch)], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{lib}: not run ({p.stderr.strip().splitlines()[-1:]})")
            continue
        res[lib] = json.loads(p.stdout.strip().splitlines()[-1])
    f = res.get("fiamma")
    t = res.get("torch")
    for key, label in (("convnext", f"ConvNeXt-Tiny fwd batch {args.batch} 224x224"),
                       ("nms", "nms 10k boxes (IoU 0.5)")):
        line = f"{label}: fiamma {f[key] * 1e3:.2f} ms" if f else label + ":"
        if t:
            line += f", torchvision {t[key] * 1e3:.2f} ms"
        if f and t:
            line += f", ratio {f[key] / t[key]:.2f}"
        print(line)
    if f and t and f["kept"] != t["kept"]:
        print(f"WARNING: nms kept {f['kept']} boxes, torchvision {t['kept']}")


if __name__ == "__main__":
    main()
