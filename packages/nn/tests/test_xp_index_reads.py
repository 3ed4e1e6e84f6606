"""A language-model step on the array-module backend's reference device ``xp`` checks its
indices without reading them back: token ids and targets uploaded from the host and positions
from ``arange`` have a range the backend knows, so the embedding lookups (forward and backward)
and the cross entropy (forward and backward) need no host read (on a GPU each would wait for
all the queued work)."""

import numpy as np

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F

DEV = "xp"


def test_a_language_model_step_reads_no_index_back(monkeypatch):
    rng = np.random.default_rng(0)
    fiamma.manual_seed(0)
    wte, wpe = nn.Embedding(11, 8).to(DEV), nn.Embedding(6, 8).to(DEV)
    head = nn.Linear(8, 11).to(DEV)
    params = list(wte.parameters()) + list(wpe.parameters()) + list(head.parameters())
    x = fiamma.from_numpy(rng.integers(0, 11, (2, 6))).to(DEV)
    y = fiamma.from_numpy(rng.integers(0, 11, (2, 6))).to(DEV)
    be = x._storage.backend
    unknown, reads = [], []
    known_in, first_bad = be.known_in, be._first_bad

    def counting_known(t, lo, hi):
        ok = known_in(t, lo, hi)
        if not ok:
            unknown.append((tuple(t.shape), lo, hi))
        return ok

    def counting_bad(badmask, values):
        reads.append(badmask.shape)
        return first_bad(badmask, values)

    monkeypatch.setattr(be, "known_in", counting_known)
    monkeypatch.setattr(be, "_first_bad", counting_bad)
    losses = []
    for _ in range(3):
        for p in params:
            p.grad = None
        pos = fiamma.arange(6, device=DEV)
        h = wte(x) + wpe(pos)
        loss = F.cross_entropy(head(h).view(-1, 11), y.view(-1))
        loss.backward()
        with fiamma.no_grad():
            for p in params:
                p -= 0.5 * p.grad
        losses.append(loss.item())
    assert unknown == [] and reads == []
    assert losses[2] < losses[0]
    # the same lookups with ids made on the device are checked (once: then known)
    made = fiamma.randint(0, 11, (2, 6), device=DEV)
    wte(made)
    wte(made)
    assert len(reads) == 1
