"""Int8 eager-mode inference beside PyTorch (fbgemm/x86, 2 threads): torchvision's quantized
ResNet-18 (the same int8 checkpoint in both), one 1x3x224x224 image, and the float32 model it
was converted from. fiamma's int8 kernels are vectorised NumPy/core float64 ops with exact
integer sums (not an int8 GEMM), so the int8 ratio is expected to be large; this measures it.
Medians of interleaved runs.

    source /work/dev-env.sh && python benchmarks/bench_int8.py

Runs on this 2-core shared machine (load varies): int8 fiamma 1380 ms, torch 156 ms (ratio
8.9; a loaded run gave 4792 / 795 ms, 6.0); float32 fiamma 181 ms, torch 224 ms (0.8). A
profile puts ~85% of fiamma's int8 time in the exact float64 convolutions.
"""
import io
import statistics
import time
import warnings

import torch
import torchvision.models.quantization as tvq

import fiamma
import fiamma.vision.models.quantization as fvq

warnings.filterwarnings("ignore")
torch.set_num_threads(2)


def _once(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def compare(name, ff, tf, reps=5):
    ff()
    tf()
    a, b = [], []
    for _ in range(reps):
        a.append(_once(ff))
        b.append(_once(tf))
    fa, ta = statistics.median(a), statistics.median(b)
    print(f"{name:40s} fiamma {fa * 1e3:9.1f} ms  torch {ta * 1e3:8.1f} ms  "
          f"ratio {fa / ta:6.1f}", flush=True)


def main():
    torch.manual_seed(0)
    tq = tvq.resnet18(quantize=True).eval()
    buf = io.BytesIO()
    torch.save(tq.state_dict(), buf)
    path = "/tmp/bench_int8_resnet18.pth"
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    fq = fvq.resnet18(quantize=True, weights=path)
    tf = tvq.resnet18().eval()
    ff = fvq.resnet18().eval()
    ff.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in tf.state_dict().items()})
    x = torch.rand(1, 3, 224, 224)
    xf = fiamma.tensor(x.numpy())
    with torch.no_grad(), fiamma.no_grad():
        compare("resnet18 int8 forward 1x224", lambda: fq(xf), lambda: tq(x))
        compare("resnet18 float32 forward 1x224", lambda: ff(xf), lambda: tf(x))


if __name__ == "__main__":
    main()
