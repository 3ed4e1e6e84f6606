"""The cuda backend's cuDNN convolutions on a GPU, in under 60 s: ResNet-18's convolution
shapes at batch 64 (224^2 input) in bfloat16, forward / data gradient / weight gradient, timed
for fiamma through cuDNN, fiamma's generic im2col path (cuDNN off: bfloat16 computes in
float32, as before cuDNN) and PyTorch; then the algorithms cuDNN chose, the library, and any
fast-path errors. Every part runs on its own: an exception is printed and the rest goes on.

    python benchmarks/gpu/cudnn_check.py [--reps 5] [--json out.json] [--budget 50]

``--device xp --batch 2`` checks the script's plumbing without a GPU, on a device whose
backend has the cuDNN path (the CPU emulation: import tools/cuda_emu's fiamma_cuda_emu first),
with PyTorch on the CPU.
"""

import argparse
import json
import sys
import time
import traceback

# (name, cin, cout, kernel, stride, padding, input size): ResNet-18's distinct convolutions
SHAPES = [
    ("conv1", 3, 64, 7, 2, 3, 224),
    ("l1.3x3", 64, 64, 3, 1, 1, 56),
    ("l2.3x3s2", 64, 128, 3, 2, 1, 56),
    ("l2.ds", 64, 128, 1, 2, 0, 56),
    ("l2.3x3", 128, 128, 3, 1, 1, 28),
    ("l3.3x3s2", 128, 256, 3, 2, 1, 28),
    ("l3.ds", 128, 256, 1, 2, 0, 28),
    ("l3.3x3", 256, 256, 3, 1, 1, 14),
    ("l4.3x3s2", 256, 512, 3, 2, 1, 14),
    ("l4.ds", 256, 512, 1, 2, 0, 14),
    ("l4.3x3", 512, 512, 3, 1, 1, 7),
]
BATCH = 64  # --batch
MODES = ("fwd", "bwd_data", "bwd_weight")


def _out(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def _time(fn, sync, reps):
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps * 1e3


def fiamma_ops(fiamma, shape, device):
    _, cin, cout, k, s, p, hw = shape
    o = _out(hw, k, s, p)
    dt = fiamma.bfloat16
    x = fiamma.randn(BATCH, cin, hw, hw).to(device).to(dt)
    w = fiamma.randn(cout, cin, k, k).to(device).to(dt) * 0.05
    gy = fiamma.randn(BATCH, cout, o, o).to(device).to(dt)
    op = hw - ((o - 1) * s - 2 * p + k)
    return {
        "fwd": lambda: fiamma.conv2d(x, w, None, s, p),
        "bwd_data": lambda: fiamma.convolution(gy, w, None, [s, s], [p, p], [1, 1], True,
                                               [op, op], 1),
        "bwd_weight": lambda: fiamma.convolution_backward_weight(x, gy, tuple(w.shape), [s, s],
                                                                 [p, p], [1, 1], 1),
    }


def torch_ops(torch, shape, dev):
    _, cin, cout, k, s, p, hw = shape
    o = _out(hw, k, s, p)
    dt = torch.bfloat16
    x = torch.randn(BATCH, cin, hw, hw, device=dev, dtype=dt)
    w = torch.randn(cout, cin, k, k, device=dev, dtype=dt) * 0.05
    gy = torch.randn(BATCH, cout, o, o, device=dev, dtype=dt)
    cb = torch.ops.aten.convolution_backward
    args = (gy, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1)
    return {
        "fwd": lambda: torch.nn.functional.conv2d(x, w, None, s, p),
        "bwd_data": lambda: cb(*args, [True, False, False]),
        "bwd_weight": lambda: cb(*args, [False, True, False]),
    }


def main(argv=None):
    global BATCH
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget", type=float, default=50.0, help="seconds before parts are cut")
    ap.add_argument("--json", default=None)
    ap.add_argument("--device", default="cuda", help="fiamma's device (xp: a plumbing check)")
    ap.add_argument("--batch", type=int, default=BATCH)
    args = ap.parse_args(argv)
    BATCH = args.batch
    tdev = "cuda" if args.device == "cuda" else "cpu"
    start = time.perf_counter()
    report = {"rows": [], "errors": []}

    def over():
        return time.perf_counter() - start > args.budget

    def fail(what):
        msg = f"{what}: {traceback.format_exc(limit=4)}"
        print("ERROR", msg, flush=True)
        report["errors"].append(msg)

    try:
        import fiamma
        from fiamma import _backend
        from fiamma._backend.xp import cuda as fcuda, cudnn_api

        if args.device == "cuda":
            be = fcuda.backend()
            print("fiamma cuda backend:", "yes" if be is not None else f"no ({fcuda.reason()})")
            fsync = fiamma.cuda.synchronize
        else:
            be = _backend.backend_for(fiamma.device(args.device))
            fsync = be.synchronize
        lib = cudnn_api.library()
        print("libcudnn:", lib.path if lib else None, "version", cudnn_api.version(),
              "reason", cudnn_api.reason())
        print("backends.cudnn.is_available():", fiamma.backends.cudnn.is_available(),
              "version():", fiamma.backends.cudnn.version())
        if be is not None:
            print("cudnn_ready:", be.cudnn_ready(), be.cudnn_reason() or "")
        report["cudnn"] = {"path": lib.path if lib else None, "version": cudnn_api.version(),
                           "reason": cudnn_api.reason()}
    except Exception:
        fail("fiamma setup")
        fiamma = be = None
    try:
        import torch

        if tdev == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError("torch sees no CUDA device")
            print("torch", torch.__version__, torch.cuda.get_device_name(),
                  "cudnn", torch.backends.cudnn.version())
            tsync = torch.cuda.synchronize
        else:
            tsync = lambda: None  # noqa: E731
    except Exception:
        fail("torch setup")
        torch = None

    print(f"\n{'conv':10s} {'mode':11s} {'cudnn ms':>9s} {'im2col ms':>10s} {'torch ms':>9s} "
          f"{'cudnn/torch':>11s}", flush=True)
    for shape in SHAPES:
        f_ops = t_ops = None
        if fiamma is not None and be is not None:
            try:
                f_ops = fiamma_ops(fiamma, shape, args.device)
            except Exception:
                fail(f"fiamma inputs {shape[0]}")
        if torch is not None:
            try:
                t_ops = torch_ops(torch, shape, tdev)
            except Exception:
                fail(f"torch inputs {shape[0]}")
        for mode in MODES:
            row = {"conv": shape[0], "mode": mode, "shape": shape[1:]}
            if f_ops is not None:
                try:
                    with fiamma.backends.cudnn.flags(enabled=True, allow_tf32=True):
                        row["cudnn_ms"] = _time(f_ops[mode], fsync, args.reps)
                except Exception:
                    fail(f"fiamma cudnn {shape[0]} {mode}")
                if not over():
                    try:
                        with fiamma.backends.cudnn.flags(enabled=False):
                            row["im2col_ms"] = _time(f_ops[mode], fsync, max(1, args.reps // 2))
                    except Exception:
                        fail(f"fiamma im2col {shape[0]} {mode}")
            if t_ops is not None:
                try:
                    row["torch_ms"] = _time(t_ops[mode], tsync, args.reps)
                except Exception:
                    fail(f"torch {shape[0]} {mode}")
            report["rows"].append(row)

            def cell(k, width):
                v = row.get(k)
                return f"{v:{width}.3f}" if v is not None else f"{'-':>{width}s}"

            ratio = (f"{row['cudnn_ms'] / row['torch_ms']:11.2f}"
                     if row.get("cudnn_ms") and row.get("torch_ms") else f"{'-':>11s}")
            print(f"{shape[0]:10s} {mode:11s} {cell('cudnn_ms', 9)} {cell('im2col_ms', 10)} "
                  f"{cell('torch_ms', 9)} {ratio}", flush=True)
    try:
        rows = report["rows"]
        for k in ("cudnn_ms", "im2col_ms", "torch_ms"):
            vals = [r[k] for r in rows if k in r]
            print(f"total {k}: {sum(vals):.2f} over {len(vals)} convolutions")
    except Exception:
        fail("totals")
    if be is not None:
        try:
            print("\nalgorithms chosen (bfloat16 unless said):")
            plans = be.cudnn_plans()
            for p in plans:
                print("  ", p)
            report["plans"] = [{k: (list(v) if isinstance(v, tuple) else v)
                                for k, v in p.items() if k != "key"} for p in plans]
            print("fast_path_calls:", {k: v for k, v in be.fast_path_calls.items()
                                       if k.startswith("cudnn")})
            print("fast_path_errors:", be.fast_path_errors or "none")
            print("cudnn_declined (NOT_SUPPORTED):", be.cudnn_declined or "none")
            report["cudnn_declined"] = {str(k): v for k, v in be.cudnn_declined.items()}
            report["fast_path_calls"] = dict(be.fast_path_calls)
            report["fast_path_errors"] = dict(be.fast_path_errors)
        except Exception:
            fail("plans")
    print(f"\ncudnn_check finished in {time.perf_counter() - start:.1f} s, "
          f"{len(report['errors'])} errors")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
