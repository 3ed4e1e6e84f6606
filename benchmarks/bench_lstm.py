"""A character LSTM language model trained in fiamma beside PyTorch: same weights, same batches.

Embedding (vocabulary 65, 256) -> ``nn.LSTM`` (2 layers, 256 hidden, batch_first; ``--rnn gru``:
``nn.GRU`` of the same sizes) -> Linear to the vocabulary -> ``cross_entropy``; Adam, gradient
clipping; sequence 64, batch 32. The model is written once in PyTorch's idiom and built from
each library's ``nn``; fiamma's copy loads PyTorch's initial weights and the first step's losses
are compared. Both libraries in one process, 1 thread (timed in process CPU time: the machine is
shared) or ``--threads 2`` (wall time), round-robin; medians over the rounds, ratio to PyTorch,
the load average.

    python benchmarks/bench_lstm.py [--rnn lstm|gru] [--rounds 11] [--threads 1] [--profile]
"""

import argparse
import gc
import os
import statistics
import time

import numpy as np

VOCAB, HIDDEN, LAYERS, SEQ, BATCH = 65, 256, 2, 64, 32


def build(lib, rnn="lstm"):
    nn, F = lib.nn, lib.nn.functional
    layer = nn.GRU if rnn == "gru" else nn.LSTM

    class CharLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, HIDDEN)
            self.lstm = layer(HIDDEN, HIDDEN, num_layers=LAYERS, batch_first=True)
            self.head = nn.Linear(HIDDEN, VOCAB)

        def forward(self, x, y):
            h, _ = self.lstm(self.emb(x))
            logits = self.head(h)
            return F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))

    return CharLSTM


def _weights(rnn):
    import torch
    torch.manual_seed(0)
    return {k: v.detach().numpy().copy() for k, v in build(torch, rnn)().state_dict().items()}


def _batches(n):
    rng = np.random.default_rng(0)
    return [(rng.integers(0, VOCAB, (BATCH, SEQ)), rng.integers(0, VOCAB, (BATCH, SEQ)))
            for _ in range(n)]


class Runner:
    def __init__(self, name, weights, batches, threads=1, rnn="lstm"):
        if name == "torch":
            import torch as lib
        else:
            import fiamma as lib
        self.name, self.lib = name, lib
        self.threads = threads
        self.model = build(lib, rnn)()
        self.model.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in weights.items()})
        self.opt = lib.optim.Adam(self.model.parameters(), lr=2e-3)
        self.batches = [(lib.from_numpy(x), lib.from_numpy(y)) for x, y in batches]
        self.i = 0

    def _next(self):
        self.i = (self.i + 1) % len(self.batches)
        return self.batches[self.i]

    def step(self):
        x, y = self._next()
        loss = self.model(x, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.lib.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return loss

    def forward(self):
        x, y = self._next()
        with self.lib.no_grad():
            return self.model(x, y)

    def timed(self, what):
        fn = self.step if what == "step" else self.forward
        clock = time.process_time if self.threads == 1 else time.perf_counter
        self.lib.set_num_threads(self.threads)  # both libraries share the process
        t = clock()
        fn()
        return clock() - t


def profile(runner, steps):
    import cProfile
    import pstats
    for _ in range(2):
        runner.step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        runner.step()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rnn", choices=("lstm", "gru"), default="lstm")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="cProfile fiamma's step instead")
    a = ap.parse_args()
    w, b = _weights(a.rnn), _batches(4)
    runners = [Runner(n, w, b, a.threads, a.rnn) for n in ("fiamma", "torch")]
    for r in runners:
        r.lib.set_num_threads(a.threads)
    if a.profile:
        return profile(runners[0], a.rounds)
    lf, lt = (float(r.step().item()) for r in runners)
    print(f"first-step loss: fiamma {lf:.7f}  torch {lt:.7f}  |diff| {abs(lf - lt):.2e}")
    for what in ("step", "forward"):
        for r in runners:
            r.timed(what)
        times = {r.name: [] for r in runners}
        gc.disable()
        for _ in range(a.rounds):
            for r in runners:
                times[r.name].append(r.timed(what))
        gc.enable()
        f, t = statistics.median(times["fiamma"]), statistics.median(times["torch"])
        label = f"{a.threads} thread{'s' if a.threads > 1 else ' '}"
        print(f"{a.rnn} {label} {what:8s} fiamma {f * 1e3:8.2f} ms  torch {t * 1e3:8.2f} ms  ratio "
              f"{f / t:5.2f}  (n={a.rounds}, load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
