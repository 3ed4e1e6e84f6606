"""fiamma.distributed against mpi4py, and DDP training against one process.

    python benchmarks/bench_distributed.py [--repeat 30] [--epochs 2] [--ddp-rounds 1]
        [--ceiling] [--json out.json]

1. all_reduce (SUM, float32) of 16 MB, 4 KB and 4 bytes on 2 ranks: fiamma's ``all_reduce``
   on a tensor (with the cross-rank metadata check, the default, and without it) beside
   mpi4py's own ``Allreduce`` on a NumPy buffer of the same size, in the same job, the variants
   timed round-robin (median of ``--repeat`` rounds, a barrier before each call).
2. LeNet on the shipped MNIST digits (examples/ddp_digits.py, global batch 64, the same
   learning rate): 2 ranks x 1 thread with DDP beside 1 rank x 1 thread, training samples per
   second and test accuracy after ``--epochs``; also the CPU seconds of the busiest rank (all
   its threads, MPI's busy waiting included), whose ratio estimates the speed-up on idle
   cores when the machine is shared. ``--ddp-rounds N`` alternates the two trainings N times
   (the speed-up of each round and their median); ``--ceiling`` also runs two independent
   1-rank trainings at the per-rank batch of 32 at once beside one alone at 32 and at 64: the
   speed-up the machine's two cores allow the same work with no communication at all.
   ``--torch`` also trains benchmarks/ddp_lenet_torch.py, the same LeNet written against
   PyTorch's API, under torchrun (gloo) and unmodified under fiamma's launcher with
   ``-m fiamma.run``, 1 and 2 ranks each.

3. DDP's own per-step cost in a world of one (no communication to wait for): LeNet steps at
   the per-rank batch 32 with and without the DDP wrapper, alternated, in thread CPU time
   (unaffected by other processes on a shared machine); the median of the per-pair
   differences (``--overhead-pairs``, 0 to skip).

Needs mpi4py and an MPI (``pip install mpi4py mpich``); both parts run through
``python -m fiamma.distributed.run``.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"16 MB": 4 * 1024 * 1024, "4 KB": 1024, "4 B": 1}


def worker(repeat):
    """Runs on each rank: the all_reduce timings; rank 0 prints them as JSON."""
    import numpy as np

    import fiamma
    import fiamma.distributed as dist
    from fiamma.distributed._mpi import mpi

    dist.init_process_group("mpi")
    dist.set_debug_level("OFF")
    unchecked = dist.new_group(list(range(dist.get_world_size())))
    dist.set_debug_level("INFO")
    comm = mpi().COMM_WORLD.Dup()
    MPI = mpi()
    out = {}
    for label, n in SIZES.items():
        t = fiamma.ones(n)
        a = np.ones(n, dtype=np.float32)
        variants = {
            "fiamma all_reduce": lambda: dist.all_reduce(t),
            "fiamma all_reduce, no check": lambda: dist.all_reduce(t, group=unchecked),
            "mpi4py Allreduce": lambda: comm.Allreduce(MPI.IN_PLACE, a, MPI.SUM),
        }
        times = {k: [] for k in variants}
        cpu = {k: [] for k in variants}
        for _ in range(3):
            for f in variants.values():
                f()
        for _ in range(repeat):
            for name, f in variants.items():
                comm.Barrier()
                c0 = time.process_time()  # every thread of the process (MPI's worker too)
                start = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - c0)
        mine = {k: float(np.median(v)) for k, v in times.items()}
        mine.update({f"{k} cpu": float(np.median(v)) for k, v in cpu.items()})
        # the slower rank's time is the collective's time
        both = comm.allgather(mine)
        out[label] = {k: max(r[k] for r in both) for k in mine}
        t.fill_(1.0)
        a[:] = 1.0
        dist.all_reduce(t)
        comm.Allreduce(MPI.IN_PLACE, a, MPI.SUM)
        assert float(t[0]) == float(a[0]) == dist.get_world_size()
    if dist.get_rank() == 0:
        print("FIGURES " + json.dumps(out), flush=True)
    comm.Free()
    dist.destroy_process_group()


def overhead(pairs, batch=32):
    """Part 3, in this process (a world of one): thread CPU seconds per step, plain and DDP."""
    import numpy as np

    import fiamma
    import fiamma.distributed as dist
    import fiamma.nn as nn
    import fiamma.nn.functional as F

    sys.path.insert(0, str(ROOT / "examples"))
    from ddp_digits import LeNet

    dist.init_process_group("mpi")
    fiamma.manual_seed(0)
    plain, ddp = LeNet(), nn.parallel.DistributedDataParallel(LeNet())
    x, y = fiamma.randn(batch, 1, 28, 28), fiamma.randint(0, 10, (batch,))
    opts = {m: fiamma.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in (plain, ddp)}

    def step(m):
        c = time.thread_time()
        opts[m].zero_grad()
        F.cross_entropy(m(x), y).backward()
        opts[m].step()
        return time.thread_time() - c

    for _ in range(10):
        step(plain), step(ddp)
    base, extra = [], []
    for i in range(pairs):
        a, b = (step(plain), step(ddp)) if i % 2 else (step(ddp), step(plain))[::-1]
        base.append(a)
        extra.append(b - a)
    dist.destroy_process_group()
    return {"plain_step_cpu_s": float(np.median(base)),
            "ddp_overhead_cpu_s": float(np.median(extra)),
            "ddp_overhead_iqr_s": [float(np.percentile(extra, 25)),
                                   float(np.percentile(extra, 75))]}


def _launch(nproc, *argv):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "fiamma.distributed.run", "--nproc-per-node", str(nproc), *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("FIGURES "))
    return json.loads(line[len("FIGURES "):])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--json", default=None)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--skip-ddp", action="store_true")
    p.add_argument("--ddp-rounds", type=int, default=1,
                   help="alternate the 1-rank and 2-rank trainings this many times")
    p.add_argument("--ceiling", action="store_true",
                   help="also time two independent 1-rank trainings at once")
    p.add_argument("--overhead-pairs", type=int, default=300)
    p.add_argument("--torch", action="store_true",
                   help="also train benchmarks/ddp_lenet_torch.py (the same LeNet written "
                        "against PyTorch's API) under torchrun with gloo and, unmodified, "
                        "under fiamma's launcher and runner, 1 and 2 ranks each")
    args = p.parse_args()
    if args.worker:
        return worker(args.repeat)
    load = os.getloadavg()
    results = {"all_reduce": _launch(2, __file__, "--worker", "--repeat", str(args.repeat)),
               "load_average_before": load}
    print(f"load average before: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
          f"({os.cpu_count()} cores)")
    print("all_reduce on 2 ranks (median per call, the slower rank's)")
    print(f"{'size':>6}  {'fiamma':>10}  {'no check':>10}  {'mpi4py':>10}  {'ratio':>6}  "
          f"{'no-check ratio':>14}")
    for label, r in results["all_reduce"].items():
        if not isinstance(r, dict):
            continue
        ours, raw, ref = (r["fiamma all_reduce"], r["fiamma all_reduce, no check"],
                          r["mpi4py Allreduce"])
        print(f"{label:>6}  {ours * 1e6:8.0f}us  {raw * 1e6:8.0f}us  {ref * 1e6:8.0f}us  "
              f"{ref / ours:5.2f}x  {ref / raw:13.2f}x")
    print("  ratio = mpi4py time / fiamma time (target >= 0.9 at 16 MB)")
    print("CPU time per call (process CPU seconds, all threads; the busier rank's):")
    for label, r in results["all_reduce"].items():
        if not isinstance(r, dict):
            continue
        ours, raw, ref = (r["fiamma all_reduce cpu"], r["fiamma all_reduce, no check cpu"],
                          r["mpi4py Allreduce cpu"])
        print(f"{label:>6}  {ours * 1e6:8.0f}us  {raw * 1e6:8.0f}us  {ref * 1e6:8.0f}us  "
              f"{ref / max(ours, 1e-9):5.2f}x  {ref / max(raw, 1e-9):13.2f}x")
    if not args.skip_ddp:
        example = str(ROOT / "examples" / "ddp_digits.py")
        flags = ["--epochs", str(args.epochs), "--batch-size", "64", "--json"]
        rounds = []
        for i in range(args.ddp_rounds):  # alternate the order: drifts in load cancel out
            pair = ((1, 2) if i % 2 == 0 else (2, 1))
            got = {n: _launch(n, example, *flags) for n in pair}
            rounds.append({"1 rank": got[1], "2 ranks": got[2]})
        one, two = rounds[0]["1 rank"], rounds[0]["2 ranks"]
        results["ddp"] = {"1 rank": one, "2 ranks": two, "rounds": rounds}
        print(f"\nLeNet on MNIST digits, {args.epochs} epochs, global batch 64, 1 thread per rank")
        for label, r in results["ddp"].items():
            if label != "rounds":
                print(f"  {label}: {r['samples_per_s']:8.1f} samples/s, test accuracy "
                      f"{r['test_accuracy']:.2%}")
        ratios = [r["2 ranks"]["samples_per_s"] / r["1 rank"]["samples_per_s"] for r in rounds]
        cpus = [r["1 rank"]["busiest_rank_cpu_s"] / r["2 ranks"]["busiest_rank_cpu_s"]
                for r in rounds]
        results["ddp"]["speedups"] = ratios
        print("  speed-up: " + ", ".join(f"{x:.2f}x" for x in ratios)
              + (f" (median {sorted(ratios)[len(ratios) // 2]:.2f}x)" if len(ratios) > 1 else "")
              + " (target >= 1.7x)")
        print("  CPU seconds of the busiest rank, 1 rank / 2 ranks: "
              + ", ".join(f"{x:.2f}x" for x in cpus)
              + ", the speed-up two idle cores would give if each rank ran undisturbed")
    if args.ceiling:
        # what two cores give two independent single-rank trainings (no communication at all):
        # the bound a data-parallel speed-up on this machine cannot pass
        example = str(ROOT / "examples" / "ddp_digits.py")
        env = dict(os.environ, OMP_NUM_THREADS="1")

        def rate(batch, n):
            cmd = [sys.executable, example, "--epochs", str(args.epochs), "--batch-size",
                   str(batch), "--json"]
            procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
                     for _ in range(n)]
            outs = [p.communicate()[0] for p in procs]
            lines = [next(x for x in o.splitlines() if x.startswith("FIGURES ")) for o in outs]
            return sum(json.loads(x[len("FIGURES "):])["samples_per_s"] for x in lines)

        solo64, solo32, pair32 = rate(64, 1), rate(32, 1), rate(32, 2)
        results["ceiling"] = {"solo_b64": solo64, "solo_b32": solo32, "pair_b32": pair32}
        print(f"\nTwo independent 1-rank trainings at batch 32 at once: {pair32 / solo32:.2f}x "
              f"the samples/s of one alone, {pair32 / solo64:.2f}x one at batch 64 (the bound "
              "on the 2-rank speed-up above: the same work with no communication)")
    if args.torch:
        script = str(ROOT / "benchmarks" / "ddp_lenet_torch.py")
        env = dict(os.environ, OMP_NUM_THREADS="1")

        def figures(cmd):
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
            line = next((x for x in proc.stdout.splitlines() if x.startswith("FIGURES ")), None)
            if line is None:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
            if proc.returncode:  # (PyTorch's gloo sometimes aborts a rank in its teardown)
                print(f"  note: {cmd[2]} exited with {proc.returncode} after its figures")
            return json.loads(line[len("FIGURES "):])

        flags = ["--epochs", str(args.epochs)]
        same = {}
        for n in (1, 2):
            same[("torch", n)] = figures([sys.executable, "-m", "torch.distributed.run",
                                          "--nproc-per-node", str(n), script, *flags])
            same[("fiamma", n)] = figures([sys.executable, "-m", "fiamma.distributed.run",
                                           "--nproc-per-node", str(n), "-m", "fiamma.run",
                                           script, *flags])
        results["same_program"] = {f"{lib} {n} rank(s)": r for (lib, n), r in same.items()}
        print(f"\nThe same PyTorch program (ddp_lenet_torch.py, {args.epochs} epochs, global "
              "batch 64, 1 thread per rank): PyTorch under torchrun (gloo), fiamma under "
              "its launcher and `-m fiamma.run`")
        for lib in ("torch", "fiamma"):
            one, two = same[(lib, 1)], same[(lib, 2)]
            up = two["samples_per_s"] / one["samples_per_s"]
            print(f"  {lib:7s} 1 rank {one['samples_per_s']:8.1f} samples/s, 2 ranks "
                  f"{two['samples_per_s']:8.1f} ({up:.2f}x)"
                  f", test accuracy {one['test_accuracy']:.1%} / {two['test_accuracy']:.1%}")
        print(f"  fiamma's 2 ranks / PyTorch's 2 ranks: "
              f"{same[('fiamma', 2)]['samples_per_s'] / same[('torch', 2)]['samples_per_s']:.2f}x")
    if args.overhead_pairs:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        code = (f"import sys, json; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); "
                "import bench_distributed as b; "
                f"print('FIGURES ' + json.dumps(b.overhead({args.overhead_pairs})))")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=1800)
        if proc.returncode:
            raise SystemExit(f"the overhead part failed:\n{proc.stdout}\n{proc.stderr}")
        line = next(x for x in proc.stdout.splitlines() if x.startswith("FIGURES "))
        o = results["ddp_overhead"] = json.loads(line[len("FIGURES "):])
        print(f"\nDDP's own work per LeNet step, world of one, batch 32, thread CPU: "
              f"{o['ddp_overhead_cpu_s'] * 1e6:.0f} us (quartiles "
              f"{o['ddp_overhead_iqr_s'][0] * 1e6:.0f}..{o['ddp_overhead_iqr_s'][1] * 1e6:.0f}) "
              f"beside a plain step of {o['plain_step_cpu_s'] * 1e3:.2f} ms")
    results["load_average_after"] = os.getloadavg()
    print(f"load average after: {results['load_average_after'][0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
