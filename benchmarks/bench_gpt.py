"""A GPT-style character model trained in fiamma beside PyTorch: same weights, same batches.

The model is written once in PyTorch's idiom (``nn.Module``, ``F.scaled_dot_product_attention``
with ``is_causal``, ``nn.GELU``, AdamW with weight-decay groups, gradient clipping) and built
from each library's ``nn``; fiamma's copy loads PyTorch's initial weights. 4 layers, 4 heads,
128 wide, block 64, batch 16, vocabulary 65.

    python benchmarks/bench_gpt.py                 # 1 thread (interleaved) and 2 threads
    python benchmarks/bench_gpt.py --threads 1     # one setting only
    python benchmarks/bench_gpt.py --profile       # where fiamma's step time goes

1 thread: both libraries in one process, timed round-robin (one fiamma step, one PyTorch step,
...), medians over the rounds of the process CPU time; ``--composed`` adds fiamma with nn's
composed attention instead of the fused op (before/after in one run). 2 threads: each library
in its own process (two OpenMP runtimes in one process would fight over 2 cores), the
processes alternated in blocks; medians of all rounds. The first step's losses are compared
(they agree to ~1e-6). Python's GC is off while timing, as in bench.py.
"""

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("GOMP_SPINCOUNT", "20000")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")

VOCAB, BLOCK, BATCH, LAYERS, HEADS, WIDTH = 65, 64, 16, 4, 4, 128


def build_gpt(lib):
    """The model classes over ``lib`` (``torch`` or ``fiamma``)."""
    nn, F = lib.nn, lib.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
            self.c_proj = nn.Linear(WIDTH, WIDTH)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(WIDTH, dim=2)
            q = q.view(B, T, HEADS, C // HEADS).transpose(1, 2)
            k = k.view(B, T, HEADS, C // HEADS).transpose(1, 2)
            v = v.view(B, T, HEADS, C // HEADS).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(WIDTH, 4 * WIDTH)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(WIDTH)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(WIDTH)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, WIDTH)
            self.wpe = nn.Embedding(BLOCK, WIDTH)
            self.h = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.ln_f = nn.LayerNorm(WIDTH)
            self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)

        def forward(self, idx, targets=None):
            pos = lib.arange(idx.size(1), dtype=lib.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            if targets is None:
                return logits, None
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    return GPT


def _optimizer(lib, model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    return lib.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95))


def _weights():
    """PyTorch's initial weights (seed 0) as NumPy arrays."""
    import torch
    torch.manual_seed(0)
    model = build_gpt(torch)()
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _batches(n):
    rng = np.random.default_rng(0)
    data = rng.integers(0, VOCAB, size=20_000)
    out = []
    for _ in range(n):
        ix = rng.integers(0, len(data) - BLOCK - 1, size=BATCH)
        x = np.stack([data[i:i + BLOCK] for i in ix]).astype(np.int64)
        y = np.stack([data[i + 1:i + 1 + BLOCK] for i in ix]).astype(np.int64)
        out.append((x, y))
    return out


class Runner:
    """One library's model, optimizer and batches; ``step()`` and ``forward()`` time one call."""

    def __init__(self, name, threads, nbatches=8):
        self.clock = time.process_time if threads == 1 else time.perf_counter
        self.composed = name == "fiamma-composed"
        if name == "torch":
            import torch as lib
        else:
            import fiamma as lib
        self.name, self.lib = name, lib
        lib.set_num_threads(threads)
        self.model = build_gpt(lib)()
        self.model.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in _weights().items()})
        self.opt = _optimizer(lib, self.model)
        self.batches = [(lib.from_numpy(x), lib.from_numpy(y)) for x, y in _batches(nbatches)]
        self.i = 0

    def _next(self):
        self.i = (self.i + 1) % len(self.batches)
        return self.batches[self.i]

    def train_step(self):
        x, y = self._next()
        _, loss = self.model(x, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.lib.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return loss

    def forward(self):
        x, y = self._next()
        with self.lib.no_grad():
            _, loss = self.model(x, y)
        return loss

    def timed(self, what):
        fn = self.train_step if what == "step" else self.forward
        if self.composed:  # fiamma before the fused attention: nn's composition
            import fiamma.nn._attention_functional as AF
            saved, AF._fusable = AF._fusable, lambda *a: False
        t = self.clock()
        fn()
        t = self.clock() - t
        if self.composed:
            AF._fusable = saved
        return t


def first_losses():
    """The first training step's loss in both libraries, from the same weights and batch."""
    a, b = Runner("fiamma", 1), Runner("torch", 1)
    return float(a.train_step().item()), float(b.train_step().item())


def interleaved(threads, rounds, composed=False):
    """Both libraries in this process, round-robin; medians in seconds (1 thread: process CPU
    time, which the other processes on a loaded machine disturb least). ``composed``: also
    fiamma with nn's composed attention instead of the fused op (before/after)."""
    runners = [Runner("fiamma", threads), Runner("torch", threads)]
    if composed:
        runners.append(Runner("fiamma-composed", threads))
    res = {}
    for what in ("step", "forward"):
        for r in runners:
            for _ in range(3):
                r.timed(what)
        times = {r.name: [] for r in runners}
        gc.disable()
        for _ in range(rounds):
            for r in runners:
                times[r.name].append(r.timed(what))
        gc.enable()
        res[what] = {k: v for k, v in times.items()}
    return res


def worker(name, threads, rounds):
    r = Runner(name, threads)
    out = {}
    for what in ("step", "forward"):
        for _ in range(3):
            r.timed(what)
        gc.disable()
        out[what] = [r.timed(what) for _ in range(rounds)]
        gc.enable()
    print(json.dumps(out))


def separate(threads, rounds, blocks):
    """Each library in its own process, the processes alternated ``blocks`` times."""
    res = {"step": {"fiamma": [], "torch": []}, "forward": {"fiamma": [], "torch": []}}
    for _ in range(blocks):
        for name in ("fiamma", "torch"):
            cmd = [sys.executable, __file__, "--worker", name, "--threads", str(threads),
                   "--rounds", str(rounds)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            got = json.loads(out.strip().splitlines()[-1])
            for what in res:
                res[what][name] += got[what]
    return res


def report(threads, res):
    for what, times in res.items():
        f, t = statistics.median(times["fiamma"]), statistics.median(times["torch"])
        extra = ""
        if "fiamma-composed" in times:
            c = statistics.median(times["fiamma-composed"])
            extra = f"  composed attention {c * 1e3:8.2f} ms ratio {c / t:5.2f}"
        print(f"{threads} thread(s)  {what:8s} fiamma {f * 1e3:8.2f} ms  torch {t * 1e3:8.2f} ms"
              f"  ratio {f / t:5.2f}{extra}  (n={len(times['fiamma'])}, "
              f"load {os.getloadavg()[0]:.1f})", flush=True)


# lib.fm_* name prefixes -> op family, for the profile
_FAMILIES = [
    ("sgemm", "matmul"), ("matmul", "matmul"), ("bmm", "matmul"), ("gemm", "matmul"),
    ("softmax", "softmax"), ("norm", "norm"), ("layer", "norm"), ("cross", "cross_entropy"),
    ("nll", "cross_entropy"), ("gelu", "activation"), ("adam", "optimizer"), ("sgd", "optimizer"),
    ("reduce", "reduce"), ("sum", "reduce"), ("index", "index"), ("gather", "index"),
    ("scatter", "index"), ("embed", "index"), ("ixop", "index"), ("copy", "copy"), ("fill", "copy"),
    ("unary", "elementwise"), ("binary", "elementwise"), ("ternary", "elementwise"),
    ("elementwise", "elementwise"), ("alloc", "alloc"), ("free", "alloc"), ("random", "random"),
]


_CFN = re.compile(r"<built-in method (?:fiamma\._C\.)?(fm_\w+)>")


def _family(fname):
    low = fname.lower()
    for key, fam in _FAMILIES:
        if key in low:
            return fam
    return "other C: " + fname


def profile(steps):
    """cProfile over fiamma training steps (1 thread): time inside each C function (cffi's
    functions are builtins, so their time is exact) grouped by op family; the rest is Python."""
    import cProfile
    import pstats
    r = Runner("fiamma", 1)
    for _ in range(3):
        r.train_step()
    t = time.perf_counter()
    for _ in range(steps):
        r.train_step()
    plain = (time.perf_counter() - t) / steps
    prof = cProfile.Profile()
    gc.disable()
    prof.enable()
    for _ in range(steps):
        r.train_step()
    prof.disable()
    gc.enable()
    st = pstats.Stats(prof).stats
    fam, total = {}, 0.0
    for (file, _line, fname), (_cc, _nc, tt, _ct, _callers) in st.items():
        total += tt
        m = _CFN.match(fname) if file == "~" else None
        if m:
            f = _family(m.group(1))
            fam[f] = fam.get(f, 0.0) + tt
    c_total = sum(fam.values())
    print(f"fiamma step (1 thread, no profiler): {plain * 1e3:.2f} ms; "
          f"profiled {total / steps * 1e3:.2f} ms, of which C {c_total / steps * 1e3:.2f} ms "
          f"(load {os.getloadavg()[0]:.1f})")
    for f, v in sorted(fam.items(), key=lambda kv: -kv[1]):
        print(f"  {f:28s} {v / steps * 1e3:7.2f} ms  {v / c_total * 100:5.1f}% of C")
    print(f"  {'Python (inflated by cProfile)':28s} {(total - c_total) / steps * 1e3:7.2f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, choices=(1, 2))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--composed", action="store_true",
                    help="1 thread: also time fiamma with the composed (pre-fused) attention")
    ap.add_argument("--worker", choices=("fiamma", "torch"))
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.threads, a.rounds)
    if a.profile:
        return profile(a.rounds)
    lf, lt = first_losses()
    print(f"first-step loss: fiamma {lf:.7f}  torch {lt:.7f}  |diff| {abs(lf - lt):.2e}")
    if a.threads in (None, 1):
        report(1, interleaved(1, a.rounds, a.composed))
    if a.threads in (None, 2):
        report(2, separate(2, max(1, a.rounds // a.blocks), a.blocks))


if __name__ == "__main__":
    main()
