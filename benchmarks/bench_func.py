"""fiamma.func beside torch.func: what fiamma's per-element vmap and double-vjp forward mode
cost. Per-sample gradients of a small CNN (the per-sample-gradients recipe: vmap(grad) over a
batch of 32 digits; and the explicit per-sample loop in each library), an ensemble of 8 MLPs
run by vmap over stack_module_state, jacrev/jacfwd/hessian of a 64 -> 64 function. Each line
is the median over interleaved rounds, in milliseconds, with the ratio fiamma / PyTorch.

    PYTHONPATH=packages/core/src:packages/autograd/src:packages/nn/src \\
        python benchmarks/bench_func.py [substring] [--threads N]

fiamma's vmap calls the function once per element, so its vmap(grad) costs what its loop
costs; PyTorch's vmap runs batched kernels, so the ratio of the vmap lines grows with the
batch size.
"""

import os

os.environ.setdefault("GOMP_SPINCOUNT", "20000")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")

import copy  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import compare_median, threads_and_filter  # noqa: E402

import fiamma  # noqa: E402
import fiamma.func  # noqa: E402


def compare(name, ff, tf, reps=3, rounds=5):
    compare_median(name, ff, tf, reps, rounds, digits=2)


def cnn(lib):
    nn, F = lib.nn, lib.nn.functional

    class SimpleCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3)
            self.conv2 = nn.Conv2d(8, 16, 3)
            self.fc1 = nn.Linear(400, 32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = F.relu(self.fc1(lib.flatten(x, 1)))
            return F.log_softmax(self.fc2(x), dim=1)

    return SimpleCNN()


def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))


def cases(rng):
    x = rng.standard_normal((32, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 32)
    xe = rng.standard_normal((64, 128)).astype(np.float32)
    v = rng.standard_normal(64).astype(np.float32)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    out = {}
    for lib in (fiamma, torch):
        F = lib.func
        model = cnn(lib)
        params = {k: p.detach() for k, p in model.named_parameters()}
        data, target = lib.tensor(x), lib.tensor(y)

        def loss(p, xi, ti, model=model, lib=lib, F=F):
            out = F.functional_call(model, p, (xi[None],))
            return lib.nn.functional.nll_loss(out, ti[None])

        def loop(model=model, data=data, target=target, lib=lib):
            grads = []
            for i in range(data.shape[0]):
                model.zero_grad()
                lib.nn.functional.nll_loss(model(data[i:i + 1]), target[i:i + 1]).backward()
                grads.append([p.grad.clone() for p in model.parameters()])
            return grads

        per_sample = F.vmap(F.grad(loss), in_dims=(None, 0, 0))
        models = [mlp(lib) for _ in range(8)]
        sp, sb = F.stack_module_state(models)
        base = copy.deepcopy(models[0])
        ens = F.vmap(lambda p, b, xx, base=base, F=F: F.functional_call(base, (p, b), (xx,)),
                     in_dims=(0, 0, None))
        xt, vt, wt = lib.tensor(xe), lib.tensor(v), lib.tensor(w)

        def f(a, wt=wt):
            return (wt @ a).tanh() * a

        def scalar(a, wt=wt):
            return ((wt @ a).tanh() * a).sum()

        out[lib.__name__] = {
            "per-sample grads vmap(grad), batch 32": lambda ps=per_sample, p=params, d=data,
            t=target: ps(p, d, t),
            "per-sample grads loop, batch 32": loop,
            "ensemble of 8 MLPs, vmap(functional_call)": lambda e=ens, p=sp, b=sb, xx=xt: e(p, b,
                                                                                             xx),
            "jacrev 64 -> 64": lambda F=F, vv=vt, f=f: F.jacrev(f)(vv),
            "jacfwd 64 -> 64": lambda F=F, vv=vt, f=f: F.jacfwd(f)(vv),
            "hessian 64 -> 1": lambda F=F, vv=vt, s=scalar: F.hessian(s)(vv),
        }
    return out


def main():
    threads, only = threads_and_filter(sys.argv[1:])
    c = cases(np.random.default_rng(0))
    for name in c["fiamma"]:
        if only in name:
            compare(name, c["fiamma"][name], c["torch"][name])


if __name__ == "__main__":
    main()
