"""Embedding(sparse=True) trained end to end (fiamma-nn's sparse gradient, fiamma-optim's
SparseAdam / SGD / Adagrad beside a dense optimizer for the rest): the same trajectory as
PyTorch from the same weights, and only the looked-up rows of the table change."""

import numpy as np
import pytest

import fiamma

VOCAB, DIM, CLASSES = 30, 6, 4


def _batches():
    rng = np.random.default_rng(7)
    return [(rng.integers(1, VOCAB // 2, (5, 3)), rng.integers(0, CLASSES, 5))
            for _ in range(6)]


def _train(lib, sparse_opt, start_emb, start_w):
    if lib == "torch":
        import torch as M
    else:
        M = fiamma
    emb = M.nn.Embedding(VOCAB, DIM, padding_idx=0, sparse=True)
    lin = M.nn.Linear(DIM, CLASSES)
    with M.no_grad():
        emb.weight.copy_(M.tensor(start_emb))
        lin.weight.copy_(M.tensor(start_w))
        lin.bias.zero_()
    name, kw = sparse_opt
    opt_s = getattr(M.optim, name)(emb.parameters(), **kw)
    opt_d = M.optim.Adam(lin.parameters(), lr=0.01)
    for ids, y in _batches():
        opt_s.zero_grad()
        opt_d.zero_grad()
        h = emb(M.tensor(ids)).mean(1)
        loss = M.nn.functional.cross_entropy(lin(h), M.tensor(y))
        loss.backward()
        assert emb.weight.grad.is_sparse
        opt_s.step()
        opt_d.step()
    return emb.weight.detach().numpy().copy(), float(loss)


OPTS = [("SparseAdam", {"lr": 0.05}), ("SGD", {"lr": 0.5}),
        ("SGD", {"lr": 0.5, "momentum": 0.9}), ("Adagrad", {"lr": 0.3})]


def _starts():
    rng = np.random.default_rng(0)
    e = rng.standard_normal((VOCAB, DIM)).astype(np.float32)
    e[0] = 0
    return e, (rng.standard_normal((CLASSES, DIM)) * 0.3).astype(np.float32)


@pytest.mark.parametrize("sparse_opt", OPTS, ids=lambda o: f"{o[0]}{o[1]}")
def test_only_looked_up_rows_change(sparse_opt):
    e0, w0 = _starts()
    e, _ = _train("fiamma", sparse_opt, e0, w0)
    used = {int(i) for ids, _ in _batches() for i in ids.reshape(-1)}
    if sparse_opt[1].get("momentum"):
        return  # a momentum buffer keeps moving rows a later step does not look up
    for r in range(VOCAB):
        if r in used:
            assert not np.array_equal(e[r], e0[r]), r
        else:
            np.testing.assert_array_equal(e[r], e0[r])


@pytest.mark.parity
@pytest.mark.parametrize("sparse_opt", OPTS, ids=lambda o: f"{o[0]}{o[1]}")
def test_sparse_embedding_training_parity(sparse_opt):
    pytest.importorskip("torch")
    e0, w0 = _starts()
    ef, lf = _train("fiamma", sparse_opt, e0, w0)
    et, lt = _train("torch", sparse_opt, e0, w0)
    np.testing.assert_allclose(ef, et, rtol=2e-5, atol=2e-6)
    assert abs(lf - lt) < 1e-5 * max(1.0, abs(lt))


def test_sparse_bag_trains_with_sparse_adam():
    fiamma.manual_seed(0)
    bag = fiamma.nn.EmbeddingBag(20, 4, mode="sum", sparse=True)
    before = bag.weight.detach().clone()
    opt = fiamma.optim.SparseAdam(bag.parameters(), lr=0.1)
    idx, offsets = fiamma.tensor([3, 5, 5, 7]), fiamma.tensor([0, 2])
    for _ in range(3):
        opt.zero_grad()
        bag(idx, offsets).pow(2).sum().backward()
        opt.step()
    changed = (bag.weight.detach() != before).any(dim=1).nonzero().reshape(-1).tolist()
    assert changed == [3, 5, 7]

