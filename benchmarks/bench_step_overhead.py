"""Per-op overhead of a small model's training step, beside PyTorch: the character-level RNN of
PyTorch's name-classification tutorial (Linear(57+128 -> 128) and Linear(185 -> 18) on a
concatenated one-hot and hidden state, LogSoftmax, NLLLoss over an 8-character name, then a
manual SGD update of ``p.data``). Every tensor is a single row, so the step is almost all
per-op cost: op dispatch, autograd recording, the backward engine.

Both libraries run in this one process (as a real program has other libraries loaded), one
thread each, interleaved over the rounds; the figure is the median microseconds per step and
the ratio fiamma / PyTorch.

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/bench_step_overhead.py
"""

import statistics
import time

import torch

import fiamma

STEPS = 300
ROUNDS = 7


def make(lib):
    nn = lib.nn

    class RNN(nn.Module):
        def __init__(self, i, h, o):
            super().__init__()
            self.i2h = nn.Linear(i + h, h)
            self.h2o = nn.Linear(i + h, o)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, x, hidden):
            combined = lib.cat((x, hidden), 1)
            hidden = self.i2h(combined)
            return self.softmax(self.h2o(combined)), hidden

    lib.manual_seed(0)
    rnn = RNN(57, 128, 18)
    crit = nn.NLLLoss()
    line = lib.zeros(8, 1, 57)
    for i in range(8):
        line[i, 0, i * 3] = 1
    cat = lib.tensor([3])

    def step():
        hidden = lib.zeros(1, 128)
        rnn.zero_grad()
        for i in range(line.size(0)):
            out, hidden = rnn(line[i], hidden)
        loss = crit(out, cat)
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-0.005)
        return loss.item()

    return step


def per_step(step):
    t = time.perf_counter()
    for _ in range(STEPS):
        step()
    return (time.perf_counter() - t) / STEPS


def main():
    fiamma.set_num_threads(1)
    torch.set_num_threads(1)
    fs, ts = make(fiamma), make(torch)
    for _ in range(50):
        fs()
        ts()
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(per_step(fs))
        b.append(per_step(ts))
    fa, ta = statistics.median(a), statistics.median(b)
    print(f"char-RNN step  fiamma {fa * 1e6:7.0f} us  torch {ta * 1e6:7.0f} us  "
          f"ratio {fa / ta:5.2f}")


if __name__ == "__main__":
    main()
