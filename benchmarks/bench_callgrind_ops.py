"""Per-op instruction counts under callgrind: ``a + b`` on 4 floats, or one training step of
a small MLP (Linear 8-16, ReLU, Linear 16-4, MSE, SGD), run N times after a warm-up of N.
Run it for two N and divide the difference of the totals by twice the difference of the N
(startup cancels out):

    for n in 1000 11000; do PYTHONHASHSEED=0 valgrind --tool=callgrind \\
        --callgrind-out-file=/dev/null python benchmarks/bench_callgrind_ops.py add $n; done
    (mlp: n = 20 and 420)
"""

import sys

import fiamma
import fiamma.nn as nn
import fiamma.optim as optim


def main():
    which, n = sys.argv[1], int(sys.argv[2])
    a, b = fiamma.ones(4), fiamma.ones(4)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = optim.SGD(m.parameters(), lr=0.01)
    x, y = fiamma.randn(2, 8), fiamma.randn(2, 4)

    def add():
        for _ in range(n):
            a + b

    def mlp():
        for _ in range(n):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()

    f = add if which == "add" else mlp
    f()  # warm-up
    f()


if __name__ == "__main__":
    main()
