"""fiamma.distributions beside torch.distributions on the workloads of issue 20: Normal
log_prob and rsample on 1M elements, Categorical(logits=(1000, 1000)) sample and log_prob,
MultivariateNormal (dim 64, batch 1024) log_prob (and rsample), float32, no gradients unless
noted. Each line is the median over interleaved rounds, in milliseconds, with the ratio
fiamma / PyTorch. Argument validation is left on, as in both libraries by default.

    PYTHONPATH=packages/core/src:packages/autograd/src:packages/distributions/src \\
        python benchmarks/bench_distributions.py [substring] [--threads N]

--threads sets both libraries' intra-op threads (default 2, as the other benchmarks). On a
loaded machine threaded BLAS and PyTorch's spinning pool lose far more than single-threaded
kernels do, so record which setting a figure used.
"""

import os

# as bench.py: idle OpenMP / OpenBLAS threads must not spin into the next library's timing
os.environ.setdefault("GOMP_SPINCOUNT", "20000")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")

import statistics  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import compare_median, threads_and_filter  # noqa: E402

import fiamma  # noqa: E402
import fiamma.distributions as FD  # noqa: E402

TD = torch.distributions


def compare(name, ff, tf, reps=10, rounds=7):
    return compare_median(name, ff, tf, reps, rounds, digits=3)


def _pair(a):
    return fiamma.tensor(a), torch.from_numpy(a)


def main():
    rng = np.random.default_rng(0)
    n = 1 << 20
    mu, tmu = _pair(rng.standard_normal(n).astype(np.float32))
    sd, tsd = _pair(rng.uniform(0.5, 2.0, n).astype(np.float32))
    x, tx = _pair(rng.standard_normal(n).astype(np.float32))
    fn, tn = FD.Normal(mu, sd), TD.Normal(tmu, tsd)
    lg, tlg = _pair(rng.standard_normal((1000, 1000)).astype(np.float32))
    fc, tc = FD.Categorical(logits=lg), TD.Categorical(logits=tlg)
    idx = fc.sample()
    tidx = torch.from_numpy(idx.numpy())
    d, b = 64, 1024
    A = rng.standard_normal((d, d)).astype(np.float32)
    cov, tcov = _pair((A @ A.T / d + np.eye(d, dtype=np.float32)).astype(np.float32))
    loc, tloc = _pair(rng.standard_normal((b, d)).astype(np.float32))
    v, tv = _pair(rng.standard_normal((b, d)).astype(np.float32))
    fm = FD.MultivariateNormal(loc, covariance_matrix=cov)
    tm = TD.MultivariateNormal(tloc, covariance_matrix=tcov)
    mug = fiamma.tensor(mu.numpy(), requires_grad=True)
    tmug = tmu.clone().requires_grad_()
    cases = [
        ("Normal(1M).log_prob(x)", lambda: fn.log_prob(x), lambda: tn.log_prob(tx)),
        ("Normal(1M).rsample()", lambda: fn.rsample(), lambda: tn.rsample()),
        ("Normal(1M).sample()", lambda: fn.sample(), lambda: tn.sample()),
        ("Normal(mu requires grad).rsample().sum().backward",
         lambda: FD.Normal(mug, sd).rsample().sum().backward(),
         lambda: TD.Normal(tmug, tsd).rsample().sum().backward()),
        ("Categorical(logits 1000x1000) construct", lambda: FD.Categorical(logits=lg),
         lambda: TD.Categorical(logits=tlg)),
        ("Categorical(logits 1000x1000).sample()", lambda: fc.sample(), lambda: tc.sample()),
        ("Categorical(logits 1000x1000).log_prob", lambda: fc.log_prob(idx),
         lambda: tc.log_prob(tidx)),
        ("Categorical(logits 1000x1000).entropy()", lambda: fc.entropy(), lambda: tc.entropy()),
        ("MultivariateNormal(64, batch 1024).log_prob", lambda: fm.log_prob(v),
         lambda: tm.log_prob(tv)),
        ("MultivariateNormal(64, batch 1024).rsample", lambda: fm.rsample(),
         lambda: tm.rsample()),
        ("MultivariateNormal(64, batch 1024) construct",
         lambda: FD.MultivariateNormal(loc, covariance_matrix=cov),
         lambda: TD.MultivariateNormal(tloc, covariance_matrix=tcov)),
    ]
    threads, only = threads_and_filter(sys.argv[1:])
    print(f"fiamma {fiamma.__version__} | torch {torch.__version__} | float32, "
          f"torch threads {threads}")
    ratios = [compare(name, f, g) for name, f, g in cases if only in name]
    if ratios:
        print(f"geometric mean of the ratios: {statistics.geometric_mean(ratios):.2f}")


if __name__ == "__main__":
    main()
