"""Dynamic quantization beside PyTorch (fbgemm/x86, 2 threads): a dynamic int8 ``Linear``
(a big one, 1024 -> 1024 on a batch of 64, and a small one, 64 -> 64 on a batch of 8) and the
dynamic recipe's ``LSTM`` (the recipe's 8 x 8 on 20 steps, and a 256 x 256 one on 50 steps of a
batch of 8), each beside its float32 module, in both libraries. fiamma has no int8 GEMM: its
dynamic Linear is a float32 GEMM on the exact integer operands plus the quantization passes
(see fiamma.ao.nn.quantized.dynamic._ops), so it is not expected to beat the float layer.
Mean CPU time per call, the least disturbed of a few rounds (benchmarks/_timing.py).

    source /work/venv/bin/activate
    export PYTHONPATH=$(ls -d $PWD/packages/*/src | tr '\\n' ':')
    python benchmarks/bench_dynamic_quant.py

One run on the 2-core shared machine: see benchmarks/README.md (bench_dynamic_quant.py).
"""
import warnings

import numpy as np
import torch
from _timing import compare_min

import fiamma
import fiamma.ao.quantization as fq
from fiamma import nn

warnings.filterwarnings("ignore")
torch.set_num_threads(2)


def _pair(tmod, fmod):
    for n, p in tmod.named_parameters():
        getattr(fmod, n).data = fiamma.from_numpy(p.detach().numpy().copy())


def linear(name, n, i, o, reps):
    tm = torch.nn.Sequential(torch.nn.Linear(i, o)).eval()
    fm = nn.Sequential(nn.Linear(i, o)).eval()
    _pair(tm[0], fm[0])
    tqm = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear})
    fqm = fq.quantize_dynamic(fm, {nn.Linear})
    x = np.random.default_rng(0).standard_normal((n, i)).astype(np.float32)
    xt, xf = torch.from_numpy(x), fiamma.from_numpy(x.copy())
    with torch.no_grad(), fiamma.no_grad():
        compare_min(f"{name} float32", {"fiamma": lambda: fm(xf), "torch": lambda: tm(xt)},
                    rounds=5, reps=reps, width=34)
        compare_min(f"{name} dynamic int8", {"fiamma": lambda: fqm(xf),
                                             "torch": lambda: tqm(xt)},
                    rounds=5, reps=reps, width=34)


def lstm(name, t, b, d, reps):
    tm = torch.nn.Sequential(torch.nn.LSTM(d, d)).eval()
    fm = nn.Sequential(nn.LSTM(d, d)).eval()
    _pair(tm[0], fm[0])
    tqm = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.LSTM, torch.nn.Linear})
    fqm = fq.quantize_dynamic(fm, {nn.LSTM, nn.Linear})
    x = np.random.default_rng(0).standard_normal((t, b, d)).astype(np.float32)
    xt, xf = torch.from_numpy(x), fiamma.from_numpy(x.copy())
    with torch.no_grad(), fiamma.no_grad():
        compare_min(f"{name} float32", {"fiamma": lambda: fm(xf), "torch": lambda: tm(xt)},
                    rounds=5, reps=reps, width=34)
        compare_min(f"{name} dynamic int8", {"fiamma": lambda: fqm(xf),
                                             "torch": lambda: tqm(xt)},
                    rounds=5, reps=reps, width=34)


def main():
    torch.manual_seed(0)
    linear("Linear 1024x1024, batch 64", 64, 1024, 1024, reps=20)
    linear("Linear 64x64, batch 8", 8, 64, 64, reps=500)
    lstm("LSTM 8x8, 20 steps, batch 1", 20, 1, 8, reps=50)
    lstm("LSTM 256x256, 50 steps, batch 8", 50, 8, 256, reps=5)


if __name__ == "__main__":
    main()
