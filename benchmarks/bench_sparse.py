"""Sparse COO beside PyTorch on a Cora-sized graph (2708 nodes, 10556 edges + self loops, 1433
binary features at 1.3% density): to_dense / coalesce / to_sparse, sparse @ dense and
dense @ sparse, a GCN training step (pytorch/examples gcn: two GraphConv layers, NLL loss,
forward + backward) and the dense small add (the hot path sparse support must not slow).
Then the compressed layout: a 10k x 10k CSR matrix at 0.1% density (100k entries) times a
(10k, 64) dense matrix (the C kernel fm_csr_mm), dense @ CSR (the transposed kernel), the
backward of CSR @ dense (the kernel again and the sampled product), the conversions, and the
GCN step with a CSR adjacency.
Both libraries in one process, interleaved round-robin, 1 thread; min over rounds of the mean
CPU time per call (the machine is shared and loaded), ratio fiamma / PyTorch.

    python benchmarks/bench_sparse.py
"""

import argparse
import warnings

import numpy as np
import torch
from _timing import compare_min

import fiamma


def compare(name, fns, rounds, reps):
    compare_min(name, fns, rounds, reps, width=28, num="9.1f")


def graph(rng, n=2708, e=10556, f=1433):
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    feats = (rng.random((n, f)) < 0.013).astype(np.float32)
    return np.stack([src, dst]), feats


def csr_train_step(lib, s, d, w):
    out = lib.mm(s, lib.mm(d, w))
    out.pow(2).sum().backward()
    w.grad = None


def gcn_step(lib, adj, x, w1, w2, y):
    h = lib.spmm(adj, lib.mm(x, w1)).relu()
    out = lib.spmm(adj, lib.mm(h, w2)).log_softmax(1)
    loss = -out[lib.arange(out.shape[0]), y].mean()
    loss.backward()
    w1.grad = None
    w2.grad = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    fiamma.set_num_threads(1)
    rng = np.random.default_rng(0)
    edges, feats = graph(rng)
    n = feats.shape[0]
    libs = {"fiamma": fiamma, "torch": torch}
    adj = {k: (lib.eye(n) + lib.sparse_coo_tensor(lib.from_numpy(edges), lib.ones(edges.shape[1]),
                                                   (n, n))).to_sparse() for k, lib in libs.items()}
    x = {k: lib.from_numpy(feats).to_sparse() for k, lib in libs.items()}
    unco = {k: lib.sparse_coo_tensor(lib.from_numpy(edges), lib.ones(edges.shape[1]), (n, n))
            for k, lib in libs.items()}
    d16 = rng.standard_normal((n, 16)).astype(np.float32)
    d16t = np.ascontiguousarray(d16.T)
    w1 = rng.standard_normal((feats.shape[1], 16)).astype(np.float32) * 0.05
    w2 = rng.standard_normal((16, 7)).astype(np.float32) * 0.3
    y = rng.integers(0, 7, n)
    small = rng.standard_normal(10).astype(np.float32)
    R = a.rounds
    compare("x + y (10 floats, dense)", {
        k: (lambda s=lib.from_numpy(small): s + s) for k, lib in libs.items()}, R, 20000)
    compare("coalesce (10556 nnz)", {k: (lambda s=unco[k]: s.coalesce()) for k in libs}, R, 20)
    compare("to_dense (2708^2)", {k: (lambda s=adj[k]: s.to_dense()) for k in libs}, R, 5)
    compare("to_sparse (features)", {
        k: (lambda d=lib.from_numpy(feats): d.to_sparse()) for k, lib in libs.items()}, R, 5)
    compare("spmm adj @ (2708,16)", {
        k: (lambda s=adj[k], d=lib.from_numpy(d16), lib=lib: lib.spmm(s, d))
        for k, lib in libs.items()}, R, 50)
    compare("(16,2708) @ adj", {
        k: (lambda s=adj[k], d=lib.from_numpy(d16t): d @ s) for k, lib in libs.items()}, R, 50)
    compare("features @ (1433,16)", {
        k: (lambda s=x[k], d=lib.from_numpy(w1), lib=lib: lib.mm(s, d)) for k, lib in libs.items()},
        R, 20)
    steps = {}
    for k, lib in libs.items():
        p1 = lib.from_numpy(w1.copy()).requires_grad_()
        p2 = lib.from_numpy(w2.copy()).requires_grad_()
        steps[k] = (lambda lib=lib, s=adj[k], f=x[k], p1=p1, p2=p2, t=lib.from_numpy(y):
                    gcn_step(lib, s, f, p1, p2, t))
    compare("GCN step (fwd + bwd)", steps, R, 10)
    csr_adj = {k: s.to_sparse_csr() for k, s in adj.items()}
    steps = {}
    for k, lib in libs.items():
        p1 = lib.from_numpy(w1.copy()).requires_grad_()
        p2 = lib.from_numpy(w2.copy()).requires_grad_()
        steps[k] = (lambda lib=lib, s=csr_adj[k], f=x[k], p1=p1, p2=p2, t=lib.from_numpy(y):
                    gcn_step(lib, s, f, p1, p2, t))
    compare("GCN step, CSR adjacency", steps, R, 10)

    # ---- compressed layout: 10k x 10k at 0.1% density -------------------------------------
    import scipy.sparse as sp

    n = 10000
    m = sp.random(n, n, density=0.001, format="csr", dtype=np.float32, random_state=0)
    parts = (m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data)
    csr = {k: lib.sparse_csr_tensor(*(lib.from_numpy(p) for p in parts), (n, n))
           for k, lib in libs.items()}
    d64 = rng.standard_normal((n, 64)).astype(np.float32)
    d64t = np.ascontiguousarray(d64.T)
    compare("CSR 10k^2 0.1% @ (10k,64)", {
        k: (lambda s=csr[k], d=lib.from_numpy(d64): s @ d) for k, lib in libs.items()}, R, 20)
    compare("(64,10k) @ CSR 10k^2", {
        k: (lambda s=csr[k], d=lib.from_numpy(d64t): d @ s) for k, lib in libs.items()}, R, 20)
    compare("CSR @ (10k,64) fwd + bwd", {
        k: (lambda lib=lib, s=csr[k], d=lib.from_numpy(d64),
            w=lib.from_numpy(np.eye(64, dtype=np.float32)).requires_grad_():
            csr_train_step(lib, s, d, w)) for k, lib in libs.items()}, R, 5)
    vals = {k: s.values().clone().requires_grad_() for k, s in csr.items()}
    compare("d(values) of CSR @ (10k,64)", {
        k: (lambda lib=lib, s=csr[k], v=vals[k], d=lib.from_numpy(d64):
            (lib.sparse_csr_tensor(s.crow_indices(), s.col_indices(), v, (n, n)) @ d)
            .sum().backward()) for k, lib in libs.items()}, R, 5)
    coo = {k: s.to_sparse_coo() for k, s in csr.items()}
    compare("COO -> CSR (100k nnz)", {k: (lambda s=coo[k]: s.to_sparse_csr()) for k in libs},
            R, 5)
    compare("CSR -> CSC (100k nnz)", {k: (lambda s=csr[k]: s.to_sparse_csc()) for k in libs},
            R, 5)


if __name__ == "__main__":
    main()
