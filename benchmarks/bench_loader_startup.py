"""DataLoader start-up by start method: how long a loader with 2 workers takes from ``iter()`` to
its first batch, in the first epoch of a fresh process (a forkserver must start its server
first) and in a later epoch (workers are started again each epoch without persistent_workers),
beside PyTorch's default (fork on Linux). Each figure is the median over fresh processes.

    python benchmarks/bench_loader_startup.py [--repeats 5]
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent

_CHILD = """
import sys, time, json
sys.path.insert(0, {here!r})
from bench_datasets import images, FiammaDigits, TorchDigits
lib, ctx = sys.argv[1], sys.argv[2]
x, y = images(4096)
if lib == "fiamma":
    import fiamma
    from fiamma.data import DataLoader
    ds = FiammaDigits(x, y)
    fiamma.randn(256, 256) @ fiamma.randn(256, 256)  # threads ran in the parent first
else:
    import torch
    from torch.utils.data import DataLoader
    ds = TorchDigits(x, y)
kw = {{}} if ctx == "default" else {{"multiprocessing_context": ctx}}
dl = DataLoader(ds, batch_size=128, shuffle=True, num_workers=2, **kw)
out = {{}}
for epoch in ("first", "later"):
    t0 = time.perf_counter()
    it = iter(dl)
    next(it)
    out[epoch + "_batch_ms"] = (time.perf_counter() - t0) * 1e3
    for _ in it:
        pass
    out[epoch + "_epoch_ms"] = (time.perf_counter() - t0) * 1e3
print(json.dumps(out))
"""


def run(lib, ctx, repeats):
    rows = []
    for _ in range(repeats):
        p = subprocess.run([sys.executable, "-c", _CHILD.format(here=str(HERE)), lib, ctx],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            return {"error": p.stderr.strip().splitlines()[-1] if p.stderr else "failed"}
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    cases = [("fiamma", "default"), ("fiamma", "fork"), ("fiamma", "forkserver"),
             ("fiamma", "spawn")]
    try:
        import torch  # noqa: F401

        cases.append(("torch", "default"))
    except ImportError:
        pass
    print(f"{'loader':24} {'1st epoch: 1st batch':>21} {'epoch':>9} "
          f"{'later epoch: 1st batch':>23} {'epoch':>9}   (ms, median of {args.repeats})")
    for lib, ctx in cases:
        r = run(lib, ctx, args.repeats)
        name = f"{lib} {ctx}"
        if "error" in r:
            print(f"{name:24} {r['error']}")
            continue
        print(f"{name:24} {r['first_batch_ms']:21.1f} {r['first_epoch_ms']:9.1f} "
              f"{r['later_batch_ms']:23.1f} {r['later_epoch_ms']:9.1f}")


if __name__ == "__main__":
    main()
