"""ConvNeXt-Tiny forward (batch 8, 224x224, eval) and nms on 10k boxes: fiamma.vision beside
torchvision, each library in its own long-lived worker process (2 threads each by default). The
parent alternates the rounds between the two workers (one round of fiamma, then one of torch),
so both see the same load from the rest of the machine, and compares the medians of the wall
times and of the workers' process CPU times (ratio < 1: fiamma faster). The CPU-time ratio at
``--threads 1`` is the figure that load from other processes disturbs least. ``--busiest``
(Linux) runs both workers with ``OMP_WAIT_POLICY=PASSIVE`` (a waiting thread sleeps instead of
spinning) and reports the CPU time of each worker's busiest thread: the wall time the forward
would take on ``--threads`` free cores, the serial work included, whatever the load. Without
torch/torchvision only fiamma's times are printed.

    PYTHONPATH=<the packages' src dirs> python benchmarks/bench_vision2.py [--rounds 5]
        [--threads 2] [--batch 8] [--busiest]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _boxes(n=10_000, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 1000, (n, 2))
    wh = rng.uniform(10, 100, (n, 2))
    b = np.concatenate([xy, xy + wh], 1).astype(np.float32)
    return b, rng.uniform(0, 1, n).astype(np.float32)


def _thread_cpu():
    """{thread id: CPU seconds} of this process's threads (Linux /proc), {} elsewhere."""
    out = {}
    try:
        tick = os.sysconf("SC_CLK_TCK")
        for t in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{t}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[t] = (int(fields[11]) + int(fields[12])) / tick
    except OSError:
        pass
    return out


def _timed(fn, reps=1):
    a = _thread_cpu()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(reps):
        fn()
    wall, cpu = (time.perf_counter() - t0) / reps, (time.process_time() - c0) / reps
    b = _thread_cpu()
    busiest = max((b[k] - a.get(k, 0.0) for k in b), default=float("nan")) / reps
    return wall, cpu, busiest


def worker(lib, batch, threads):
    """Build the model, then answer each request line ("convnext" or "nms") on stdin with one
    JSON line of its wall and CPU seconds on stdout."""
    import numpy as np
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype(np.float32)
    b, s = _boxes()
    if lib == "fiamma":
        import fiamma
        from fiamma.vision import models, ops
        fiamma.set_num_threads(threads)
        m = models.convnext_tiny().eval()
        xf = fiamma.from_numpy(x)
        no_grad, nms = fiamma.no_grad, ops.nms
        bf, sf = fiamma.from_numpy(b), fiamma.from_numpy(s)
    else:
        import torch
        import torchvision
        torch.set_num_threads(threads)
        m = torchvision.models.convnext_tiny().eval()
        xf = torch.from_numpy(x)
        no_grad, nms = torch.no_grad, torchvision.ops.nms
        bf, sf = torch.from_numpy(b), torch.from_numpy(s)

    def fwd():
        with no_grad():
            return m(xf)
    jobs = {"convnext": (fwd, 1), "nms": (lambda: nms(bf, sf, 0.5), 4)}
    fwd()  # warm-up
    print(json.dumps({"ready": True, "kept": len(nms(bf, sf, 0.5))}), flush=True)
    for line in sys.stdin:
        fn, reps = jobs[line.strip()]
        wall, cpu, busiest = _timed(fn, reps)
        print(json.dumps({"wall": wall, "cpu": cpu, "busiest": busiest}), flush=True)


def _start(lib, args):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    if args.busiest:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    p = subprocess.Popen([sys.executable, __file__, "--worker", lib, "--batch", str(args.batch),
                          "--threads", str(args.threads)], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line:
        err = p.stderr.read().strip().splitlines()[-1:]
        p.wait()
        print(f"{lib}: not run ({err})")
        return None, None
    return p, json.loads(line)


def _ask(p, job):
    p.stdin.write(job + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--busiest", action="store_true",
                    help="passive OpenMP waits; report each worker's busiest thread's CPU time")
    ap.add_argument("--worker", choices=["fiamma", "torch"])
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.batch, args.threads)
    procs, kept = {}, {}
    for lib in ("fiamma", "torch"):
        p, hello = _start(lib, args)
        if p is not None:
            procs[lib], kept[lib] = p, hello["kept"]
    load0 = os.getloadavg()[0]
    res = {lib: {"convnext": [], "nms": []} for lib in procs}
    for _ in range(args.rounds):
        for job in ("convnext", "nms"):
            for lib, p in procs.items():
                res[lib][job].append(_ask(p, job))
    load1 = os.getloadavg()[0]
    for p in procs.values():
        p.stdin.close()
        p.wait()
    print(f"{args.threads} thread(s) each, median of {args.rounds} alternating rounds, "
          f"load average {load0:.1f} -> {load1:.1f}"
          + (", OMP_WAIT_POLICY=PASSIVE" if args.busiest else ""))
    for job, label in (("convnext", f"ConvNeXt-Tiny fwd batch {args.batch} 224x224"),
                       ("nms", "nms 10k boxes (IoU 0.5)")):
        keys = ("wall", "cpu", "busiest") if args.busiest else ("wall", "cpu")
        med = {lib: {k: statistics.median(r[k] for r in res[lib][job]) for k in keys}
               for lib in procs}
        parts = [f"{lib} {med[lib]['wall'] * 1e3:.1f} ms (cpu {med[lib]['cpu'] * 1e3:.1f}"
                 + (f", busiest thread {med[lib]['busiest'] * 1e3:.1f}" if args.busiest else "")
                 + ")" for lib in procs]
        line = f"{label}: " + ", ".join(parts)
        if len(procs) == 2:
            f, t = med["fiamma"], med["torch"]
            line += "; ratio " + ", ".join(f"{k} {f[k] / t[k]:.2f}x" for k in keys)
        print(line)
    if len(set(kept.values())) > 1:
        print(f"WARNING: nms kept {kept}")


if __name__ == "__main__":
    main()
