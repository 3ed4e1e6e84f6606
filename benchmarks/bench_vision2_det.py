"""Dense-prediction models in eval mode beside torchvision, each library in its own process
(so their OpenMP runtimes never share the 2 cores): DeepLabV3-ResNet50 on one 520x520 image,
and Faster R-CNN ResNet-50 FPN on one 800x800 image (the issue's target) and on one small
320x320 image (``min_size=max_size=320``, so it is not upscaled to 800). Both libraries load
the same random weights (saved once to a temp .npz); each process times ``--rounds`` calls
after a warm-up and prints the median.

    PYTHONPATH=<the packages' src dirs> python benchmarks/bench_vision2_det.py [--rounds 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

THREADS = 2
WORKLOADS = {
    # name: (fiamma module, builder, input size[, builder kwargs])
    "deeplabv3_resnet50 520x520": ("fiamma.vision.models.segmentation", "deeplabv3_resnet50",
                                   520),
    "fasterrcnn_resnet50_fpn 800x800": ("fiamma.vision.models.detection",
                                        "fasterrcnn_resnet50_fpn", 800),
    "fasterrcnn_resnet50_fpn 320x320": ("fiamma.vision.models.detection",
                                        "fasterrcnn_resnet50_fpn", 320,
                                        {"min_size": 320, "max_size": 320}),
}


def _kwargs(name):
    return WORKLOADS[name][3] if len(WORKLOADS[name]) > 3 else {}


def _child(lib, name, weights, rounds):
    os.environ["OMP_NUM_THREADS"] = str(THREADS)
    import importlib

    import numpy as np
    mod_name, builder, size = WORKLOADS[name][:3]
    x = np.random.default_rng(0).random((1, 3, size, size), dtype=np.float32)
    sd = dict(np.load(weights))
    if lib == "torch":
        import torch
        import torchvision.models.detection as D
        import torchvision.models.segmentation as S
        torch.set_num_threads(THREADS)
        mod = S if "segmentation" in mod_name else D
        m = getattr(mod, builder)(weights=None, weights_backbone=None, **_kwargs(name)).eval()
        m.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
        inp = torch.from_numpy(x)
        ctx = torch.no_grad
    else:
        import fiamma
        try:
            mod = importlib.import_module(mod_name)
            fn = getattr(mod, builder)
        except (ImportError, AttributeError):
            print(json.dumps({"median": None}))
            return
        m = fn(weights=None, weights_backbone=None, **_kwargs(name)).eval()
        m.load_state_dict({k: fiamma.from_numpy(v) for k, v in sd.items()})
        inp = fiamma.from_numpy(x)
        ctx = fiamma.no_grad
    call = (lambda: m(inp)) if "segmentation" in mod_name else (lambda: m([inp[0]]))
    with ctx():
        call()
        ts = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            out = call()
            ts.append(time.perf_counter() - t0)
    first = out["out"] if isinstance(out, dict) else out[0]["boxes"]
    extra = {} if isinstance(out, dict) else {"detections": int(first.shape[0])}
    print(json.dumps({"median": statistics.median(ts), "min": min(ts),
                      "checksum": float(first.sum()), **extra}))


def _weights(name, path):
    """Random weights (torchvision's init, BN stats perturbed) written to ``path``."""
    import numpy as np
    import torch
    import torchvision.models.detection as D
    import torchvision.models.segmentation as S
    mod_name, builder = WORKLOADS[name][:2]
    torch.manual_seed(0)
    mod = S if "segmentation" in mod_name else D
    m = getattr(mod, builder)(weights=None, weights_backbone=None)
    for b in m.modules():
        if isinstance(b, torch.nn.BatchNorm2d):
            b.running_mean.uniform_(-0.1, 0.1)
            b.running_var.uniform_(0.5, 1.5)
    np.savez(path, **{k: v.detach().numpy() for k, v in m.state_dict().items()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--child", nargs=3, metavar=("LIB", "NAME", "WEIGHTS"))
    args = ap.parse_args()
    if args.child:
        _child(*args.child, args.rounds)
        return
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError:
        sys.exit("bench_vision2_det: needs torch and torchvision for the shared weights")
    print(f"eval, batch 1, {THREADS} threads each, separate processes, median of "
          f"{args.rounds} calls")
    for name in WORKLOADS:
        if args.only not in name:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "w.npz")
            _weights(name, path)
            res = {}
            for lib in ("fiamma", "torch"):
                out = subprocess.run([sys.executable, __file__, "--rounds", str(args.rounds),
                                      "--child", lib, name, path], capture_output=True,
                                     text=True, env=os.environ.copy())
                if out.returncode:
                    sys.exit(f"{lib} {name} failed:\n{out.stderr}")
                res[lib] = json.loads(out.stdout.strip().splitlines()[-1])
        f, t = res["fiamma"], res["torch"]
        if f["median"] is None:
            print(f"  {name:34s} fiamma n/a (not built)   torch {t['median'] * 1e3:8.1f} ms")
            continue
        rel = abs(f["checksum"] - t["checksum"]) / max(abs(t["checksum"]), 1e-9)
        print(f"  {name:34s} fiamma {f['median'] * 1e3:8.1f} ms   torch "
              f"{t['median'] * 1e3:8.1f} ms   ratio {f['median'] / t['median']:.2f}x "
              f"(min-ratio {f['min'] / t['min']:.2f}x, checksum rel. diff {rel:.1e})")


if __name__ == "__main__":
    main()
