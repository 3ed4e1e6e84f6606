"""fiamma's host overhead per op on the array-module ("xp") backend, above the NumPy calls it
makes: what the cuda backend pays on the host per op besides CuPy's own per-call cost
(issue 21). The same Python code runs on the GPU with CuPy as the array module; here it runs
with NumPy on the reference device ``xp``, on small float32 operands (so the arrays' own work is
small and the difference is fiamma's Python: dispatch, checks, views, result wrapping).

Each line times (thread CPU time) a loop of fiamma calls and a loop of the equivalent plain
NumPy code on the same-sized arrays (what a NumPy user would write: one ufunc for ``a + b``,
``x @ w.T + b`` for a linear layer, ...), interleaved, and reports the best round of each in
microseconds per call and their difference: fiamma's overhead per op. Then the whole MLP step
(784-256-10, batch 64, and a tiny 32-16-4 at batch 8 whose arrays cost next to nothing; ReLU,
cross entropy, SGD with momentum) on xp beside the same step written in NumPy (same layouts:
weights stored (out, in)), with the NumPy step's count of array calls, so the difference per
array call is comparable with the per-op figures.

    PYTHONPATH=packages/core/src:packages/autograd/src:packages/nn/src:packages/optim/src \\
        python benchmarks/bench_xp_host.py [--only TEXT] [--rounds N] [--json PATH]

BLAS and OpenMP run on one thread (two BLAS thread pools in one process, NumPy's and fiamma's,
spin against each other on a small machine; host overhead is a one-thread quantity anyway).
"""

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import fiamma  # noqa: E402
import fiamma.nn.functional as F  # noqa: E402

DEV = "xp"

try:
    from scipy.special import erf as _erf
except ImportError:  # no SciPy: the exact GELU case is left out
    _erf = None


def _per_call(fn, n):
    t = time.thread_time()  # CPU time: steadier than wall time on a shared machine
    for _ in range(n):
        fn()
    return (time.thread_time() - t) / n


def compare(name, ff, nf, n, rounds, per=1):
    """Best-of-rounds time per call of ff (fiamma) and nf (NumPy), interleaved; ``per``
    divides both (calls that run several ops)."""
    ff()
    nf()
    a, b = [], []
    for _ in range(rounds):
        a.append(_per_call(ff, n))
        b.append(_per_call(nf, n))
    fa, nb = min(a) / per * 1e6, min(b) / per * 1e6
    print(f"{name:34s} fiamma {fa:8.2f} us  numpy {nb:8.2f} us  overhead {fa - nb:8.2f} us",
          flush=True)
    return {"name": name, "fiamma_us": round(fa, 3), "numpy_us": round(nb, 3),
            "overhead_us": round(fa - nb, 3)}


def _t(a, requires_grad=False):
    t = fiamma.from_numpy(np.ascontiguousarray(a)).to(DEV)
    return t.requires_grad_() if requires_grad else t


def _log_softmax(z):
    m = z.max(-1, keepdims=True)
    s = z - m
    return s - np.log(np.exp(s).sum(-1, keepdims=True))


def _layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(-1, keepdims=True)
    return d / np.sqrt(var + eps) * w + b


def op_cases(rng):
    """(name, fiamma fn, NumPy fn, ops per call) for the ops of an MLP and a GPT step."""
    f32 = np.float32
    a = rng.standard_normal((16, 64)).astype(f32)
    b = rng.standard_normal((16, 64)).astype(f32)
    row = rng.standard_normal(64).astype(f32)
    w = rng.standard_normal((32, 64)).astype(f32)
    bias = rng.standard_normal(32).astype(f32)
    x3 = rng.standard_normal((2, 8, 64)).astype(f32)
    idx = rng.integers(0, 16, 8)
    tgt = rng.integers(0, 64, 16)
    emb = rng.standard_normal((65, 64)).astype(f32)
    tok = rng.integers(0, 65, (2, 8))
    ta, tb, trow, tw, tbias = _t(a), _t(b), _t(row), _t(w), _t(bias)
    tx3, tidx, ttgt, temb, ttok = _t(x3), _t(idx), _t(tgt), _t(emb), _t(tok)
    ln_w, ln_b = np.ones(64, f32), np.zeros(64, f32)
    tln_w, tln_b = _t(ln_w), _t(ln_b)
    c = np.float32(2.0)
    i = a.copy()  # written in place
    ti = _t(i)
    cases = [
        ("a + b", lambda: ta + tb, lambda: a + b),
        ("a * b", lambda: ta * tb, lambda: a * b),
        ("a + row (broadcast)", lambda: ta + trow, lambda: a + row),
        ("a * 2.0 (Python scalar)", lambda: ta * 2.0, lambda: a * c),
        ("a + 1 (int scalar)", lambda: ta + 1, lambda: a + c),
        ("i.add_(b) (in place)", lambda: ti.add_(tb), lambda: np.add(i, b, out=i)),
        ("i.mul_(0.999) (in place scalar)", lambda: ti.mul_(0.999),
         lambda: np.multiply(i, np.float32(0.999), out=i)),
        ("a / b", lambda: ta / tb, lambda: a / b),
        ("a.exp()", lambda: ta.exp(), lambda: np.exp(a)),
        ("a.relu()", lambda: ta.relu(), lambda: np.maximum(a, c * 0)),
        ("gelu(a) (tanh)", lambda: F.gelu(ta, approximate="tanh"),
         lambda: 0.5 * a * (1 + np.tanh(0.7978846 * (a + 0.044715 * a * a * a)))),
        ("gelu(a) (exact)", lambda: F.gelu(ta),
         None if _erf is None else lambda: 0.5 * a * (1 + _erf(a * f32(0.70710677)))),
        ("a @ w.T", lambda: ta @ tw.T, lambda: a @ w.T),
        ("linear(a, w, bias)", lambda: F.linear(ta, tw, tbias), lambda: a @ w.T + bias),
        ("a.sum()", lambda: ta.sum(), lambda: a.sum()),
        ("a.sum(0)", lambda: ta.sum(0), lambda: a.sum(0)),
        ("a.mean(-1, keepdim)", lambda: ta.mean(-1, keepdim=True),
         lambda: a.mean(-1, keepdims=True)),
        ("softmax(a, -1)", lambda: ta.softmax(-1),
         lambda: (lambda e: e / e.sum(-1, keepdims=True))(np.exp(a - a.max(-1, keepdims=True)))),
        ("log_softmax(a, -1)", lambda: F.log_softmax(ta, -1), lambda: _log_softmax(a)),
        ("layer_norm(x3, 64)", lambda: F.layer_norm(tx3, (64,), tln_w, tln_b),
         lambda: _layer_norm(x3, ln_w, ln_b)),
        ("cross_entropy(a, tgt)", lambda: F.cross_entropy(ta, ttgt),
         lambda: -_log_softmax(a)[np.arange(16), tgt].mean()),
        ("embedding(tok, emb)", lambda: F.embedding(ttok, temb), lambda: emb[tok]),
        ("a.view(4, 256)", lambda: ta.view(4, 256), lambda: a.reshape(4, 256)),
        ("a.reshape(4, 256)", lambda: ta.reshape(4, 256), lambda: a.reshape(4, 256)),
        ("a.t()", lambda: ta.t(), lambda: a.T),
        ("x3.transpose(1, 2)", lambda: tx3.transpose(1, 2), lambda: x3.transpose(0, 2, 1)),
        ("x3.transpose(1,2).contiguous()", lambda: tx3.transpose(1, 2).contiguous(),
         lambda: np.ascontiguousarray(x3.transpose(0, 2, 1))),
        ("a[3]", lambda: ta[3], lambda: a[3]),
        ("a[:, 8:24]", lambda: ta[:, 8:24], lambda: a[:, 8:24]),
        ("a[idx] (gather rows)", lambda: ta[tidx], lambda: a[idx]),
        ("x3[:, -1, :]", lambda: tx3[:, -1, :], lambda: x3[:, -1, :]),
        ("a.split(16, 1)", lambda: ta.split(16, 1), lambda: np.split(a, 4, 1)),
        ("cat([a, b])", lambda: fiamma.cat([ta, tb]), lambda: np.concatenate([a, b])),
        ("zeros(16, 64)", lambda: fiamma.zeros(16, 64, device=DEV),
         lambda: np.zeros((16, 64), f32)),
        ("a.clone()", lambda: ta.clone(), lambda: a.copy()),
        ("a.item() of a[0, 0]", lambda: ta[0, 0].item(), lambda: a[0, 0].item()),
    ]
    return [c for c in cases if c[2] is not None]



def autograd_cases(rng, depth=16):
    """Forward with recording plus backward, per node: a chain of ``depth`` products x * w_i
    (w_i not requiring grad) and its backward (g * w_i per node), beside NumPy's two products
    per node; and the same for a + b chains (the backward passes the gradient on)."""
    f32 = np.float32
    x = rng.standard_normal((16, 64)).astype(f32)
    ws = [rng.standard_normal((16, 64)).astype(f32) for _ in range(depth)]
    tx = _t(x, True)
    tws = [_t(v) for v in ws]
    g = np.ones_like(x)

    def fchain():
        y = tx
        for tw in tws:
            y = y * tw
        y.backward(fiamma.ones(16, 64, device=DEV))
        tx.grad = None

    def nchain():
        y = x
        for v in ws:
            y = y * v
        d = g
        for v in reversed(ws):
            d = d * v
        return d

    def fadd():
        y = tx
        for tw in tws:
            y = y + tw
        y.backward(fiamma.ones(16, 64, device=DEV))
        tx.grad = None

    def nadd():
        y = x
        for v in ws:
            y = y + v
        return g.copy()

    return [("mul node: forward + backward", fchain, nchain, depth),
            ("add node: forward + backward", fadd, nadd, depth)]


def optim_cases(rng, nparams=8):
    """One optimizer step per parameter (small (16, 64) parameters with gradients set)."""
    f32 = np.float32
    ps = [rng.standard_normal((16, 64)).astype(f32) for _ in range(nparams)]
    gs = [rng.standard_normal((16, 64)).astype(f32) for _ in range(nparams)]
    out = []
    for name, make in [("SGD momentum=0.9", lambda p: fiamma.optim.SGD(p, lr=0.01, momentum=0.9)),
                       ("AdamW", lambda p: fiamma.optim.AdamW(p, lr=1e-3))]:
        tps = [_t(p, True) for p in ps]
        for tp, gv in zip(tps, gs):
            tp.grad = _t(gv)
        opt = make(tps)
        out.append((f"{name} step, per parameter", opt.step, None, nparams))
    bufs = [np.zeros_like(p) for p in ps]
    ms = [np.zeros_like(p) for p in ps]
    vs = [np.zeros_like(p) for p in ps]

    def nsgd():
        for p, gv, buf in zip(ps, gs, bufs):
            buf *= f32(0.9)
            buf += gv
            p -= f32(0.01) * buf

    def nadamw(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=1e-2, step=10):
        c1, c2 = 1 - b1 ** step, 1 - b2 ** step
        for p, gv, m, v in zip(ps, gs, ms, vs):
            p *= f32(1 - lr * wd)
            m *= f32(b1)
            m += f32(1 - b1) * gv
            v *= f32(b2)
            v += f32(1 - b2) * gv * gv
            d = np.sqrt(v / f32(c2))
            d += f32(eps)
            p -= f32(lr / c1) * m / d

    return [(out[0][0], out[0][1], nsgd, nparams), (out[1][0], out[1][1], nadamw, nparams)]


# ---- the MLP step ------------------------------------------------------------------------------

def mlp_step_pair(rng, batch=64, sizes=(784, 256, 10)):
    """(fiamma step, NumPy step, NumPy array calls per step): the same SGD-with-momentum step
    of a ReLU MLP (784-256-10: the brief's size; 32-16-4 at batch 8: arrays so small that the
    step is all host cost) with cross entropy, weights stored (out, in) in both."""
    f32 = np.float32
    d_in, d_h, d_out = sizes
    w1 = (rng.standard_normal((d_h, d_in)) * 0.05).astype(f32)
    b1 = np.zeros(d_h, f32)
    w2 = (rng.standard_normal((d_out, d_h)) * 0.05).astype(f32)
    b2 = np.zeros(d_out, f32)
    x = rng.standard_normal((batch, d_in)).astype(f32)
    y = rng.integers(0, d_out, batch)
    nn = fiamma.nn
    model = nn.Sequential(nn.Linear(d_in, d_h), nn.ReLU(), nn.Linear(d_h, d_out))
    with fiamma.no_grad():
        for p, v in zip(model.parameters(), (w1, b1, w2, b2)):
            p.copy_(fiamma.from_numpy(v))
    model.to(DEV)
    opt = fiamma.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    tx, ty = _t(x), _t(y)

    def fstep():
        opt.zero_grad()
        loss = F.cross_entropy(model(tx), ty)
        loss.backward()
        opt.step()
        return loss

    params = [w1.copy(), b1.copy(), w2.copy(), b2.copy()]
    bufs = [np.zeros_like(p) for p in params]
    rows = np.arange(batch)

    def nstep():  # 30 array calls
        W1, B1, W2, B2 = params
        h = x @ W1.T                                   # 1
        h += B1                                        # 2
        r = np.maximum(h, f32(0))                      # 3
        z = r @ W2.T                                   # 4
        z += B2                                        # 5
        m = z.max(1, keepdims=True)                    # 6
        e = np.exp(z - m)                              # 7, 8
        s = e.sum(1, keepdims=True)                    # 9
        loss = (np.log(s[:, 0]) + m[:, 0] - z[rows, y]).mean()  # 10-14
        gz = e / s                                     # 15
        gz[rows, y] -= f32(1)                          # 16
        gz *= f32(1.0 / batch)                         # 17
        gW2 = gz.T @ r                                 # 18
        gB2 = gz.sum(0)                                # 19
        gr = gz @ W2                                   # 20
        gr *= (h > 0)                                  # 21, 22
        gW1 = gr.T @ x                                 # 23
        gB1 = gr.sum(0)                                # 24
        for p, gv, buf in zip(params, (gW1, gB1, gW2, gB2), bufs):  # 3 per parameter
            buf *= f32(0.9)
            buf += gv
            p -= f32(0.01) * buf
        return loss

    return fstep, nstep, 24 + 3 * 4 + 4  # the SGD update's products count one each


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="cases whose name contains TEXT")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000, help="calls per round (ops)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    gc.disable()
    print(f"fiamma {fiamma.__version__} on device {DEV!r} (NumPy {np.__version__}); "
          f"best of {args.rounds} rounds; us per op")
    results = []
    groups = [op_cases(rng), autograd_cases(rng), optim_cases(rng)]
    for group in groups:
        for case in group:
            name, ff, nf = case[:3]
            per = case[3] if len(case) > 3 else 1
            if args.only in name:
                results.append(compare(name, ff, nf, max(args.calls // per, 50), args.rounds,
                                       per))
    for sizes, batch, calls in [((784, 256, 10), 64, 50), ((32, 16, 4), 8, 400)]:
        name = f"MLP step {'-'.join(map(str, sizes))} b{batch} (per step)"
        if args.only not in name:
            continue
        fstep, nstep, ncalls = mlp_step_pair(rng, batch, sizes)
        r = compare(name, fstep, nstep, calls, args.rounds)
        r["numpy_calls"] = ncalls
        r["overhead_per_numpy_call_us"] = round(r["overhead_us"] / ncalls, 3)
        print(f"{'':34s} NumPy step: {ncalls} array calls; overhead per call "
              f"{r['overhead_per_numpy_call_us']:.2f} us")
        results.append(r)
    ops = [r for r in results if "step" not in r["name"] and "node" not in r["name"]]
    if ops:
        mean = sum(r["overhead_us"] for r in ops) / len(ops)
        print(f"mean overhead over the {len(ops)} single ops: {mean:.2f} us")
    gc.enable()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
