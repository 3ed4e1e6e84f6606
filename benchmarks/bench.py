"""fiamma beside NumPy and PyTorch: the same workloads on the same arrays, with ratios and the
speed targets of the project.

    python benchmarks/bench.py [--json out.json] [--only NAME] [--quick] [--no-torch]

(or `nox -s bench -- --json out.json`, which installs core's wheel and, if it can, PyTorch).
Times are the median (or, with --stat min, the best) of several timed runs after warm-up runs,
with the garbage collector off.
A workload whose fiamma op does not exist yet prints "n/a" instead of failing. Every fiamma
result is checked against NumPy's once; a wrong result is reported as WRONG.
"""

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# fiamma and PyTorch each load an OpenMP runtime (libgomp) whose idle threads spin after a
# parallel region (by default for milliseconds); timed back to back in one process on 2 cores,
# one library's spinning threads slow the other down. A short spin (set before either library
# loads; an explicit setting wins) keeps the comparison fair to both.
os.environ.setdefault("GOMP_SPINCOUNT", "20000")
# The same for NumPy's own OpenBLAS: its idle threads poll for work for ~0.1 s after a threaded
# call (fiamma loads its OpenBLAS with this setting already), which took the CPU from the
# library timed after NumPy's matmul.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")

import numpy as np  # noqa: E402
from _models import nn_models  # noqa: E402

import fiamma  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

THREADS = 2  # the reference machine has 2 cores; PyTorch would otherwise pick its own count
MISSING = (AttributeError, NotImplementedError)  # a fiamma op that is not there yet


@dataclass
class Workload:
    name: str
    unit: str                  # "ms", "GFLOP/s", "GB/s", "us/add", "MB"
    fiamma: object             # () -> result, or None
    numpy: object
    torch: object = None
    targets: tuple = ()        # (("np" | "pt" | "abs", factor or bound), ...)
    flops: float = 0.0         # for GFLOP/s workloads (bytes for GB/s workloads)
    repeat: int = 15
    number: int = 1            # calls per timed run
    check: bool = True         # compare fiamma's result with NumPy's
    rtol: float = 1e-5
    direct: object = None      # () -> (fiamma, numpy, torch) values measured by other means
    results: dict = field(default_factory=dict)

    @property
    def higher_is_better(self):
        return self.unit in ("GFLOP/s", "GB/s")


# ---- timing ------------------------------------------------------------------------------------

STAT = statistics.median  # --stat min: the best run (steadier on a busy machine)
SETTLE = 0.0  # seconds to sleep before a library's timed run (see measure_interleaved)


def measure_interleaved(fns, repeat, number, warmup=2):
    """Seconds per call of each of ``fns``, timed round-robin (one timed run of each library
    per round), so that drift in the machine's state (page promotion to huge pages, frequency,
    other load) falls on every library alike; the median (or min) over ``repeat`` rounds."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        times = [[] for _ in fns]
        for _ in range(repeat):
            for fn, ts in zip(fns, times):
                if len(fns) > 1:
                    # one untimed call first: it wakes this library's threads while the other
                    # library's idle OpenMP threads stop spinning (GOMP_SPINCOUNT, set low at
                    # the top of this file, bounds how long they spin)
                    if SETTLE:
                        time.sleep(SETTLE)
                    fn()
                t0 = time.perf_counter()
                for _ in range(number):
                    fn()
                ts.append((time.perf_counter() - t0) / number)
    finally:
        if was_enabled:
            gc.enable()
    return [STAT(ts) for ts in times]


def to_unit(seconds, w):
    if w.unit in ("GFLOP/s", "GB/s"):
        return w.flops / seconds / 1e9
    if w.unit == "us/add":
        return seconds * 1e6
    return seconds * 1e3  # ms


def as_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    if torch is not None and isinstance(x, torch.Tensor):
        return x.numpy()
    return np.asarray(x)


# ---- workloads ----------------------------------------------------------------------------------

def _chain(x, y, n=10_000):
    """``z = z + y`` written out, n times from ``z = x`` (the operator itself, no call around it:
    what a user's loop costs per add)."""
    def run():
        z = x
        for _ in range(n):
            z = z + y
        return z
    return run


def _grad_chain(x, y, n=10_000):
    """``n`` adds ``z = z + y`` from ``z = x`` with x, y requiring grad, then one backward of
    ``z.sum()``; returns y's gradient (n everywhere)."""
    def run():
        x.grad = None
        y.grad = None
        z = x
        for _ in range(n):
            z = z + y
        z.sum().backward()
        return y.grad
    return run


def _grad_chain_numpy(x, y, n=10_000):
    def run():  # the same forward, and the gradient by hand
        z = x
        for _ in range(n):
            z = z + y
        return np.full(y.shape, float(n), dtype=y.dtype)
    return run


def _import_ms(module, repeat=5):
    """Best wall time of `python -c "import <module>"` in a fresh interpreter, in ms.

    As a user runs it: bytecode caching on (an untimed first run writes the .pyc files that an
    installer such as pip would have compiled; uv and PYTHONDONTWRITEBYTECODE=1 skip them)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmd = [sys.executable, "-c", f"import {module}"]
    subprocess.run(cmd, capture_output=True, env=env)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, env=env)
        elapsed = time.perf_counter() - t0
        if res.returncode:
            return None
        best = min(best, elapsed)
    return best * 1e3


def _dir_mb(folder, skip=()):
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"
                       and os.path.join(dirpath, d) not in skip]
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in filenames)
    return total / 1e6


def fiamma_installed_mb():
    """fiamma-core's installed files (the `fiamma` package with its compiled module, without
    NumPy, cffi or OpenBLAS and without __pycache__). From the distribution's file list when
    installed; from the package folder (minus build leftovers) when run from source."""
    from importlib import metadata

    try:
        dist = metadata.distribution("fiamma-core")
        files = [f for f in (dist.files or []) if f.parts[0] == "fiamma"
                 and "__pycache__" not in f.parts]
        if files and str(getattr(dist, "_path", "")).endswith(".dist-info"):
            paths = [f.locate() for f in files]
            return sum(os.path.getsize(p) for p in paths if os.path.exists(p)) / 1e6
    except metadata.PackageNotFoundError:
        pass
    pkg = Path(fiamma.__file__).parent
    siblings = {str(p) for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()
                and p.name != "_ops"}
    total = _dir_mb(pkg, skip=siblings)
    leftovers = sum(p.stat().st_size for p in pkg.glob("*.c")) / 1e6
    return total - leftovers


class _Checkpoint:
    """A 200 MB checkpoint (50 float32 tensors) written by fiamma.save in a temporary folder on
    first use, with the same bytes as one .npy file for NumPy's memory-mapped load."""

    NBYTES = 200_000_000

    def __init__(self):
        self.dir = None

    def paths(self):
        if self.dir is None:
            import shutil
            import tempfile
            import weakref

            self.dir = tempfile.mkdtemp(prefix="fiamma-bench-")
            weakref.finalize(self, shutil.rmtree, self.dir, True)
            rng = np.random.default_rng(0)
            n = self.NBYTES // 4 // 50
            arrays = [rng.standard_normal(n, dtype=np.float32) for _ in range(50)]
            fiamma.save({f"layer{i}.weight": fiamma.from_numpy(a) for i, a in enumerate(arrays)},
                        os.path.join(self.dir, "ckpt.pt"))
            np.save(os.path.join(self.dir, "ckpt.npy"), np.concatenate(arrays))
            back = fiamma.load(os.path.join(self.dir, "ckpt.pt"), mmap=True)
            if not all(np.array_equal(back[f"layer{i}.weight"].numpy(), a)
                       for i, a in enumerate(arrays)):
                raise AssertionError("fiamma.load(mmap=True) read back different values")
        return os.path.join(self.dir, "ckpt.pt"), os.path.join(self.dir, "ckpt.npy")


def make_workloads(quick):
    rng = np.random.default_rng(0)
    big = 10_000_000
    a, b, c = (rng.standard_normal(big, dtype=np.float32) for _ in range(3))
    fa, fb, fc = (fiamma.from_numpy(x) for x in (a, b, c))
    m = rng.standard_normal((4096, 2048), dtype=np.float32)
    fm = fiamma.from_numpy(m)
    s = rng.standard_normal((4096, 1024), dtype=np.float32)
    fs = fiamma.from_numpy(s)
    mats = {n: (rng.standard_normal((n, n), dtype=np.float32),
                rng.standard_normal((n, n), dtype=np.float32)) for n in (1024, 256)}
    ba = rng.standard_normal((64, 128, 128), dtype=np.float32)
    bb = rng.standard_normal((64, 128, 128), dtype=np.float32)
    fba, fbb = fiamma.from_numpy(ba), fiamma.from_numpy(bb)
    x16 = rng.standard_normal(16, dtype=np.float32)
    y16 = rng.standard_normal(16, dtype=np.float32)
    gx = rng.standard_normal((1000, 1000), dtype=np.float32)  # gather / scatter_add (1M)
    gi = rng.integers(0, 1000, size=(1000, 1000))
    fgx, fgi = fiamma.from_numpy(gx), fiamma.from_numpy(gi)
    grows = np.arange(1000)[:, None]

    def np_scatter_add():
        r = gx.copy()
        np.add.at(r, (grows, gi), gx)
        return r

    if torch is not None:
        ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
        tm, ts = torch.from_numpy(m), torch.from_numpy(s)
        tmats = {n: tuple(torch.from_numpy(x) for x in mats[n]) for n in mats}
        tba, tbb = torch.from_numpy(ba), torch.from_numpy(bb)
        tx16, ty16 = torch.from_numpy(x16), torch.from_numpy(y16)
        tgx, tgi = torch.from_numpy(gx), torch.from_numpy(gi)

    def pt(fn):
        return fn if torch is not None else None

    def np_softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        e /= e.sum(axis=-1, keepdims=True)
        return e

    def fmat(n):
        x, y = (fiamma.from_numpy(v) for v in mats[n])
        return lambda: fiamma.matmul(x, y)

    a1m = a[:1_000_000].copy()  # sort: 1M float32
    fa1m = fiamma.from_numpy(a1m)
    ta1m = torch.from_numpy(a1m) if torch is not None else None

    r = 5 if quick else 15
    ckpt = _Checkpoint()
    w = [
        Workload("a+b (10M)", "ms", lambda: fa + fb, lambda: a + b, pt(lambda: ta + tb),
                 targets=(("pt", 0.6), ("np", 1.0)), repeat=r),
        Workload("a*b+c (10M)", "ms", lambda: fa * fb + fc, lambda: a * b + c,
                 pt(lambda: ta * tb + tc), targets=(("np", 1.0),), repeat=r),
        Workload("exp (10M)", "ms", lambda: fiamma.exp(fa), lambda: np.exp(a),
                 pt(lambda: torch.exp(ta)), targets=(("np", 1.0),), repeat=r),
        Workload("relu (10M)", "ms", lambda: fiamma.relu(fa), lambda: np.maximum(a, 0),
                 pt(lambda: torch.relu(ta)), targets=(("np", 1.0),), repeat=r),
        Workload("sum (10M)", "ms", lambda: fiamma.sum(fa), lambda: a.sum(),
                 pt(lambda: ta.sum()), targets=(("pt", 1.0),), repeat=r, rtol=1e-3),
        Workload("sum(-1) (4096,2048)", "ms", lambda: fiamma.sum(fm, -1),
                 lambda: m.sum(-1), pt(lambda: tm.sum(-1)), targets=(("pt", 1.0),), repeat=r,
                 rtol=1e-4),
        Workload("argmax(-1) (4096,2048)", "ms", lambda: fiamma.argmax(fm, -1),
                 lambda: m.argmax(-1), pt(lambda: tm.argmax(-1)), targets=(("np", 1.0),),
                 repeat=r),
        Workload("softmax(-1) (4096,1024)", "ms", lambda: fiamma.softmax(fs, -1),
                 lambda: np_softmax(s), pt(lambda: torch.softmax(ts, -1)),
                 targets=(("pt", 1.0),), repeat=r),
        # np.sort returns the values alone: the same work is fiamma.msort (torch.msort); the
        # indexed sort is held to torch.sort, which does the same work
        Workload("sort (1M)", "ms", lambda: fiamma.sort(fa1m).values, lambda: np.sort(a1m),
                 pt(lambda: torch.sort(ta1m).values), targets=(("pt", 1.0),), repeat=r),
        Workload("msort (1M)", "ms", lambda: fiamma.msort(fa1m), lambda: np.sort(a1m),
                 pt(lambda: torch.msort(ta1m)), targets=(("np", 1.0),), repeat=r),
        Workload("topk(10) (4096,1024)", "ms", lambda: fiamma.topk(fs, 10).values,
                 lambda: -np.sort(-np.partition(s, -10, axis=-1)[:, -10:], axis=-1),
                 pt(lambda: torch.topk(ts, 10).values), targets=(("pt", 1.0),), repeat=r),
        Workload("matmul 1024x1024", "GFLOP/s", fmat(1024), lambda: mats[1024][0] @ mats[1024][1],
                 pt(lambda: tmats[1024][0] @ tmats[1024][1]), targets=(("pt", 0.95),),
                 flops=2 * 1024**3, repeat=5 if quick else 10, rtol=1e-3),
        Workload("matmul 256x256", "GFLOP/s", fmat(256), lambda: mats[256][0] @ mats[256][1],
                 pt(lambda: tmats[256][0] @ tmats[256][1]), targets=(("pt", 0.9),),
                 flops=2 * 256**3, repeat=r, number=20, rtol=1e-3),
        Workload("bmm (64,128,128)", "GFLOP/s", lambda: fiamma.bmm(fba, fbb),
                 lambda: np.matmul(ba, bb), pt(lambda: torch.bmm(tba, tbb)),
                 targets=(("pt", 0.9),), flops=2 * 64 * 128**3, repeat=r, number=5, rtol=1e-3),
        Workload("gather (1M)", "ms", lambda: fiamma.gather(fgx, 1, fgi),
                 lambda: np.take_along_axis(gx, gi, 1), pt(lambda: torch.gather(tgx, 1, tgi)),
                 targets=(("pt", 1.0),), repeat=r),
        Workload("scatter_add (1M)", "ms", lambda: fiamma.scatter_add(fgx, 1, fgi, fgx),
                 np_scatter_add, pt(lambda: torch.scatter_add(tgx, 1, tgi, tgx)),
                 targets=(("pt", 1.0),), repeat=r, rtol=1e-4),
        Workload("10k adds (16,)", "us/add",
                 _chain(fiamma.from_numpy(x16), fiamma.from_numpy(y16)),
                 _chain(x16, y16),
                 _chain(tx16, ty16) if torch is not None else None,
                 targets=(("abs", 1.0),), repeat=3 if quick else 7, rtol=1e-3),
        Workload("load 200MB ckpt (mmap)", "GB/s",
                 lambda: fiamma.load(ckpt.paths()[0], mmap=True),
                 lambda: np.load(ckpt.paths()[1], mmap_mode="r"),
                 pt(lambda: torch.load(ckpt.paths()[0], mmap=True, weights_only=True)),
                 targets=(("abs", 1.0),), flops=_Checkpoint.NBYTES, repeat=r, check=False),
        Workload("10k adds + backward (16,)", "us/add",
                 _grad_chain(fiamma.from_numpy(x16.copy()).requires_grad_(),
                             fiamma.from_numpy(y16.copy()).requires_grad_()),
                 _grad_chain_numpy(x16, y16),
                 _grad_chain(torch.from_numpy(x16.copy()).requires_grad_(),
                             torch.from_numpy(y16.copy()).requires_grad_())
                 if torch is not None else None,
                 targets=(("pt", 1.0),), repeat=3 if quick else 7, rtol=1e-3),
        Workload("import time", "ms", None, None, targets=(("abs", 150.0),), check=False,
                 direct=lambda: (_import_ms("fiamma"), _import_ms("numpy"),
                                 _import_ms("torch", 3) if torch is not None else None)),
        Workload("installed size", "MB", None, None, targets=(("abs", 10.0),), check=False,
                 direct=lambda: (fiamma_installed_mb(),
                                 _dir_mb(Path(np.__file__).parent),
                                 _dir_mb(Path(torch.__file__).parent) if torch else None)),
    ]
    return w + optim_workloads(quick) + nn_workloads(quick) + data_workloads(quick)


def data_workloads(quick):
    """One epoch of a DataLoader over 60,000 28x28 uint8 images with a per-sample transform,
    batch 128, shuffled (ms per epoch, worker start-up included)."""
    try:
        from fiamma import data
    except (ImportError, AttributeError):
        return [Workload(f"loader epoch, {k} workers", "ms", None, None,
                         targets=(("pt", 1.0),), check=False, direct=lambda: (None,) * 3)
                for k in (0, 2)]
    import bench_datasets as B

    x, y = B.images()
    fds = B.FiammaDigits(x, y)

    def epoch(loader):
        return lambda: sum(1 for _ in loader)

    out = []
    for k in (0, 2):
        floader = data.DataLoader(fds, batch_size=128, shuffle=True, num_workers=k)
        tloader = None
        if torch is not None:
            tloader = torch.utils.data.DataLoader(B.TorchDigits(x, y), batch_size=128,
                                                  shuffle=True, num_workers=k)
        npy = lambda: [((x[i].astype(np.float32) / 255.0 - B.MEAN) / B.STD)  # noqa: E731
                       for i in np.random.permutation(len(x))]
        out.append(Workload(f"loader epoch, {k} workers", "ms", epoch(floader),
                            npy if k == 0 else None,
                            epoch(tloader) if tloader is not None else None,
                            targets=(("pt", 1.0),), check=False, repeat=2 if quick else 3,
                            ))
    # the small-data pattern: tensors already in memory, TensorDataset, the default collate
    fx = data.TensorDataset(fiamma.from_numpy(x[:20_000].astype(np.float32)),
                            fiamma.from_numpy(y[:20_000]))
    floader = data.DataLoader(fx, batch_size=64, shuffle=True)
    tloader = None
    if torch is not None:
        tx = torch.utils.data.TensorDataset(torch.from_numpy(x[:20_000].astype(np.float32)),
                                            torch.from_numpy(y[:20_000]))
        tloader = torch.utils.data.DataLoader(tx, batch_size=64, shuffle=True)
    out.append(Workload("TensorDataset epoch (20k, batch 64)", "ms", epoch(floader), None,
                        epoch(tloader) if tloader is not None else None,
                        targets=(("pt", 1.0),), check=False, repeat=3))
    return out


def optim_workloads(quick):
    """Training-step workloads of the sibling packages that are installed."""
    try:
        from fiamma import optim
    except (ImportError, AttributeError):
        return [Workload("adam step (10M in 100)", "ms", None, None, targets=(("pt", 1.0),),
                         check=False, direct=lambda: (None, None, None))]
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(100_000, dtype=np.float32) for _ in range(100)]
    grads = [rng.standard_normal(100_000, dtype=np.float32) * 1e-3 for _ in range(100)]
    fp = [fiamma.tensor(x) for x in arrays]
    for p, g in zip(fp, grads):
        p.grad = fiamma.tensor(g)
    fopt = optim.Adam(fp, lr=1e-3)

    npp = [x.copy() for x in arrays]
    nm = [np.zeros_like(x) for x in arrays]
    nv = [np.zeros_like(x) for x in arrays]
    nstep = [0]

    def numpy_adam(b1=0.9, b2=0.999, lr=1e-3, eps=1e-8):
        nstep[0] += 1
        t = nstep[0]
        for p, g, m, v in zip(npp, grads, nm, nv):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            denom = np.sqrt(v)
            denom /= np.sqrt(1 - b2 ** t)
            denom += eps
            p -= (lr / (1 - b1 ** t)) * m / denom

    tstep = None
    if torch is not None:
        tp = [torch.tensor(x) for x in arrays]
        for p, g in zip(tp, grads):
            p.grad = torch.tensor(g)
        topt = torch.optim.Adam(tp, lr=1e-3)  # PyTorch's default implementation on the CPU
        tstep = topt.step
    return [Workload("adam step (10M in 100)", "ms", fopt.step, numpy_adam, tstep,
                     targets=(("pt", 1.0),), check=False, repeat=5 if quick else 10)]


def _train_step(lib, model, opt, x, y):
    def step():
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def nn_workloads(quick):
    """The speed targets of fiamma-nn: conv2d, two training steps, ResNet-18 inference."""
    names = [("conv2d fwd (32,64,56,56)", (("pt", 1.3),)),
             ("conv2d fwd+bwd", (("pt", 1.3),)),
             ("MLP step b128 SGD", (("pt", 1.1),)),
             ("LeNet step b64 Adam", (("pt", 1.5),)),
             ("ResNet-18 fwd b8 224", (("pt", 1.3),))]
    try:
        from fiamma import nn, optim  # noqa: F401  (fiamma.optim is used through lib.optim)
        fiamma.conv2d, nn.BatchNorm2d, nn.MaxPool2d, nn.AdaptiveAvgPool2d  # noqa: B018
    except (ImportError, AttributeError):
        return [Workload(n, "ms", None, None, targets=t, check=False,
                         direct=lambda: (None, None, None)) for n, t in names]
    models = nn_models()
    rng = np.random.default_rng(2)
    repeat = 3 if quick else 7
    libs = [fiamma] + ([torch] if torch is not None else [])

    def per_lib(make):
        fns = [make(lib) for lib in libs]
        return fns[0], (fns[1] if len(fns) > 1 else None)

    def as_lib(lib, a):
        return lib.from_numpy(a)

    # conv2d x(32,64,56,56) w(64,64,3,3) padding 1
    cx = rng.standard_normal((32, 64, 56, 56), dtype=np.float32)
    cw = rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05

    def conv_fwd(lib):
        x, w = as_lib(lib, cx), as_lib(lib, cw)
        return lambda: lib.conv2d(x, w, padding=1)

    def conv_fwd_bwd(lib):
        x = as_lib(lib, cx).requires_grad_()
        w = as_lib(lib, cw).requires_grad_()

        def run():
            x.grad = w.grad = None
            lib.conv2d(x, w, padding=1).sum().backward()
            return w.grad
        return run

    def mlp_step(lib):
        lib.manual_seed(0)
        model = models.mlp(lib.nn)
        opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = as_lib(lib, rng.standard_normal((128, 784), dtype=np.float32))
        y = as_lib(lib, rng.integers(0, 10, 128))
        return _train_step(lib, model, opt, x, y)

    def lenet_step(lib):
        lib.manual_seed(0)
        model = models.lenet(lib.nn)
        opt = lib.optim.Adam(model.parameters(), lr=1e-3)
        x = as_lib(lib, rng.standard_normal((64, 1, 28, 28), dtype=np.float32))
        y = as_lib(lib, rng.integers(0, 10, 64))
        return _train_step(lib, model, opt, x, y)

    def resnet_fwd(lib):
        lib.manual_seed(0)
        model = models.resnet18(lib.nn).eval()
        x = as_lib(lib, rng.standard_normal((8, 3, 224, 224), dtype=np.float32))

        def run():
            with lib.no_grad():
                return model(x)
        return run

    out = []
    for (name, targets), make, rep in zip(
            names, (conv_fwd, conv_fwd_bwd, mlp_step, lenet_step, resnet_fwd),
            (repeat, max(3, repeat // 2), 3 * repeat, 2 * repeat, max(3, repeat // 2))):
        f, t = per_lib(make)
        out.append(Workload(name, "ms", f, None, t, targets=targets, check=False, repeat=rep))
    return out


# ---- running and judging ----------------------------------------------------------------------

def run_workload(w):
    if w.direct is not None:
        fm, npv, ptv = w.direct()
        w.results = {"fiamma": fm, "numpy": npv, "torch": ptv}
        return
    res = {}
    scale = 1 / 10_000 if w.unit == "us/add" else 1
    try:
        out = w.fiamma()
    except MISSING as e:
        res["fiamma"] = None
        res["missing"] = f"{type(e).__name__}: {e}"
    else:
        if w.check:
            ref = w.numpy()
            ok = np.allclose(as_numpy(out), ref, rtol=w.rtol, atol=w.rtol)
            res["correct"] = bool(ok)
    libs = [(k, f) for k, f in (("fiamma", None if "missing" in res else w.fiamma),
                                ("numpy", w.numpy), ("torch", w.torch)) if f is not None]
    times = measure_interleaved([f for _, f in libs], w.repeat, w.number)
    for (k, _), t in zip(libs, times):
        res[k] = to_unit(t * scale, w)
    for k in ("fiamma", "numpy", "torch"):
        res.setdefault(k, None)
    w.results = res


def ratio(w, other):
    fm, ot = w.results.get("fiamma"), w.results.get(other)
    if fm is None or not ot:
        return None
    return fm / ot


def judge(w):
    """PASS / MISS / n/a, and whether any target could not be checked (no PyTorch)."""
    fm = w.results.get("fiamma")
    if fm is None:
        return "n/a"
    if w.results.get("correct") is False:
        return "WRONG"
    verdicts, unchecked = [], False
    for kind, bound in w.targets:
        if kind == "abs":
            verdicts.append(fm >= bound if w.higher_is_better else fm <= bound)
            continue
        r = ratio(w, "numpy" if kind == "np" else "torch")
        if r is None:
            unchecked = True
            continue
        verdicts.append(r >= bound if w.higher_is_better else r <= bound)
    if not verdicts:
        return "n/a"
    status = "PASS" if all(verdicts) else "MISS"
    return status + ("*" if unchecked and status == "PASS" else "")


def target_text(w):
    parts = []
    for kind, bound in w.targets:
        if kind == "abs":
            parts.append(f"{'>=' if w.higher_is_better else '<='} {bound:g} {w.unit}")
        else:
            op = ">=" if w.higher_is_better else "<="
            parts.append(f"{op} {bound:g}x {kind}")
    return ", ".join(parts)


def fmt(v, digits=3):
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.{digits}g}" if abs(v) < 1 else f"{v:.2f}"


def machine():
    model = platform.processor() or "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": model, "cpus": cpus, "python": platform.python_version(),
            "platform": platform.platform()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--only", metavar="TEXT", help="run workloads whose name contains TEXT")
    ap.add_argument("--quick", action="store_true", help="fewer timed runs (noisier)")
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="statistic over the timed runs (default: median)")
    args = ap.parse_args(argv)

    global torch, STAT
    STAT = min if args.stat == "min" else statistics.median
    if args.no_torch:
        torch = None
    if torch is not None:
        torch.set_num_threads(THREADS)

    info = machine()
    versions = {"fiamma": fiamma.__version__, "numpy": np.__version__,
                "torch": torch.__version__ if torch is not None else None}
    print(f"fiamma {versions['fiamma']} | numpy {versions['numpy']} | torch "
          f"{versions['torch'] or 'not installed'}"
          f"{f' ({THREADS} threads)' if torch is not None else ''}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    info["load_average_1min"] = load
    print(f"{info['cpu']}, {info['cpus']} CPUs, Python {info['python']}, "
          f"load average {load:.1f}, {args.stat} of the timed runs" if load is not None else "")
    print()

    workloads = [w for w in make_workloads(args.quick)
                 if not args.only or args.only.lower() in w.name.lower()]
    header = (f"{'workload':<24} {'unit':<8} {'fiamma':>8} {'numpy':>8} {'torch':>8} "
              f"{'fm/np':>6} {'fm/pt':>6}  {'target':<24} status")
    print(header)
    print("-" * len(header))
    rows = []
    for w in workloads:
        run_workload(w)
        status = judge(w)
        rnp, rpt = ratio(w, "numpy"), ratio(w, "torch")
        print(f"{w.name:<24} {w.unit:<8} {fmt(w.results.get('fiamma')):>8} "
              f"{fmt(w.results.get('numpy')):>8} {fmt(w.results.get('torch')):>8} "
              f"{fmt(rnp, 2):>6} {fmt(rpt, 2):>6}  {target_text(w):<24} {status}", flush=True)
        rows.append({"workload": w.name, "unit": w.unit,
                     "better": "higher" if w.higher_is_better else "lower",
                     "fiamma": w.results.get("fiamma"), "numpy": w.results.get("numpy"),
                     "torch": w.results.get("torch"), "fiamma_over_numpy": rnp,
                     "fiamma_over_torch": rpt, "target": target_text(w), "status": status,
                     "correct": w.results.get("correct"),
                     "missing": w.results.get("missing")})
    print()
    print("ratios divide fiamma's number by the other library's (times: lower is better; "
          "GFLOP/s: higher is better)")
    print("n/a: the fiamma op does not exist yet (or the library is not installed); "
          "PASS*: the PyTorch part of the target was not checked")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "versions": versions, "threads": THREADS,
                       "statistic": args.stat, "results": rows}, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
