"""fiamma's batched vmap (the function run once on tensors carrying the mapped dimension) against
its per-element loop (what vmap did before, still its fallback) and against torch.func.

Each line: the median over rounds, in milliseconds, of fiamma batched, fiamma loop and PyTorch,
then loop/batched (the gain) and batched/PyTorch.

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/bench_vmap_batched.py \\
        [substring] [--threads N]
"""

import statistics
import sys
import time

import numpy as np
import torch

import fiamma
import fiamma.func
from fiamma.func import _jacobian, _vmap

sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parent))
from _timing import threads_and_filter  # noqa: E402


def median_ms(fn, rounds=5, reps=3):
    fn()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        times.append((time.perf_counter() - t) / reps * 1e3)
    return statistics.median(times)


def looped(fn):
    def run():
        _vmap._BATCHED[0] = False
        try:
            return fn()
        finally:
            _vmap._BATCHED[0] = True
    return run


def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 10))


def cnn(lib):
    nn, F = lib.nn, lib.nn.functional

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3)
            self.conv2 = nn.Conv2d(8, 16, 3)
            self.fc = nn.Linear(16 * 5 * 5, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            return self.fc(x.flatten(1))

    return CNN()


def cases(rng):
    xm = rng.standard_normal((64, 32)).astype(np.float32)
    xc = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 64)
    v = rng.standard_normal(32).astype(np.float32)
    xj = rng.standard_normal((64, 31)).astype(np.float32)
    wj = rng.standard_normal((33, 31)).astype(np.float32)
    bj = rng.standard_normal(33).astype(np.float32)
    out = {}
    for lib in (fiamma, torch):
        lib.manual_seed(0)
        F, nnF = lib.func, lib.nn.functional
        m, c = mlp(lib), cnn(lib)
        pm = {k: p.detach() for k, p in m.named_parameters()}
        pc = {k: p.detach() for k, p in c.named_parameters()}
        t = lib.tensor(y)

        def loss(p, x, t, model, F=F, nnF=nnF):
            return nnF.cross_entropy(F.functional_call(model, p, (x[None],)), t[None])

        g_mlp = F.vmap(F.grad(lambda p, x, t, m=m, loss=loss: loss(p, x, t, m)),
                       in_dims=(None, 0, 0))
        g_cnn = F.vmap(F.grad(lambda p, x, t, c=c, loss=loss: loss(p, x, t, c)),
                       in_dims=(None, 0, 0))
        big = lib.nn.Sequential(lib.nn.Linear(32, 64), lib.nn.Tanh(), lib.nn.Linear(64, 128))
        pb = {k: p.detach() for k, p in big.named_parameters()}

        def predict(w, b, x, nnF=nnF):
            return nnF.linear(x, w, b).tanh()

        ms = [mlp(lib) for _ in range(8)]
        sp, sb = F.stack_module_state(ms)
        ens = F.vmap(lambda p, b, x, base=m, F=F: F.functional_call(base, (p, b), (x,)),
                     in_dims=(0, 0, None))
        X = {k: lib.tensor(a) for k, a in (("xm", xm), ("xc", xc), ("v", v), ("xj", xj),
                                            ("wj", wj), ("bj", bj))}
        out[lib.__name__] = {
            "per-sample grads, MLP 32-64-10, batch 64":
                lambda g=g_mlp, p=pm, X=X, t=t: g(p, X["xm"], t),
            "per-sample grads, CNN (2 conv + fc), batch 64":
                lambda g=g_cnn, p=pc, X=X, t=t: g(p, X["xc"], t),
            "jacrev of an MLP 32-64-128 (128 rows)":
                lambda F=F, big=big, pb=pb, X=X: F.jacrev(
                    lambda x: F.functional_call(big, pb, (x,)))(X["v"]),
            "vmap(jacrev) 31->33, batch 64 (tutorial)":
                lambda F=F, X=X, pr=predict: F.vmap(F.jacrev(pr, argnums=2),
                                                    in_dims=(None, None, 0))(
                    X["wj"], X["bj"], X["xj"]),
            "ensemble of 8 MLPs, vmap(functional_call)":
                lambda e=ens, p=sp, b=sb, X=X: e(p, b, X["xm"]),
        }
    return out


def loop_variant(fn):
    """The old behaviour: vmap per element, jacrev one backward per row."""
    def run():
        old = _jacobian._MIN_BASIS[0]
        _vmap._BATCHED[0] = False
        _jacobian._MIN_BASIS[0] = 1 << 62
        try:
            return fn()
        finally:
            _vmap._BATCHED[0] = True
            _jacobian._MIN_BASIS[0] = old
    return run


def main():
    threads, only = threads_and_filter(sys.argv[1:])
    c = cases(np.random.default_rng(0))
    print(f"{'case':48s} {'batched':>9s} {'loop':>9s} {'torch':>9s} {'loop/b':>7s} "
          f"{'b/torch':>7s}")
    for name, fn in c["fiamma"].items():
        if only not in name:
            continue
        b = median_ms(fn)
        lp = median_ms(loop_variant(fn))
        tt = median_ms(c["torch"][name])
        print(f"{name:48s} {b:9.2f} {lp:9.2f} {tt:9.2f} {lp / b:7.2f} {b / tt:7.2f}",
              flush=True)


if __name__ == "__main__":
    main()
