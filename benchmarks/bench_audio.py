"""fiamma.audio speed beside soundfile and torch: load a 60 s FLAC, resample it, filter it.

Run: PYTHONPATH=<the packages' src dirs> python benchmarks/bench_audio.py
Prints the best-of-N time of each workload and the ratio fiamma / reference (lower is better).
The resample and lfilter references are written with torch ops (conv1d with the same kernel; the
IIR recursion as torchaudio's C++ loop is not installed: a torch sample loop would be unfairly slow,
so the lfilter line compares against NumPy's direct form only over 1 s of audio, scaled).
"""

import math
import os
import tempfile
import time

import numpy as np
import soundfile as sf

import fiamma
import fiamma.audio
import fiamma.audio.functional as AF


def best(fn, repeat=7):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def interleaved(f, g, repeat=21):
    """Best-of times of f and g run alternately, so load on a shared machine hits both alike."""
    f(), g()
    tf, tg = [], []
    for _ in range(repeat):
        for fn, ts in ((f, tf), (g, tg)):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return min(tf), min(tg)


def row(name, ours, ref, refname):
    print(f"{name:<44} fiamma {ours * 1e3:8.2f} ms   {refname} {ref * 1e3:8.2f} ms   "
          f"ratio {ours / ref:5.2f}")


def main():
    sr = 16000
    rng = np.random.default_rng(0)
    t = np.arange(60 * sr) / sr
    x = (0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
    d = tempfile.mkdtemp()
    flac, wav = os.path.join(d, "a.flac"), os.path.join(d, "a.wav")
    sf.write(flac, x, sr, subtype="PCM_16")
    sf.write(wav, x, sr, subtype="PCM_16")

    for path, label in [(flac, "load 60 s FLAC 16 kHz mono"), (wav, "load 60 s WAV PCM_16 mono")]:
        ours, ref = interleaved(lambda: fiamma.audio.load(path),
                                lambda: sf.read(path, dtype="float32", always_2d=True))
        row(label, ours, ref, "soundfile.read")
    ours, ref = interleaved(
        lambda: list(fiamma.audio.stream(flac, 16000)),
        lambda: list(sf.blocks(flac, blocksize=16000, dtype="float32", always_2d=True)), 7)
    row("stream 60 s FLAC in 1 s chunks", ours, ref, "soundfile.blocks")

    xt = fiamma.from_numpy(x)[None]
    ours = best(lambda: AF.resample(xt, 16000, 8000), 5)
    try:
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
        g = math.gcd(16000, 8000)
        from fiamma.audio.functional._filtering import _sinc_resample_kernel
        k, width = _sinc_resample_kernel(16000, 8000, g)
        kt = torch.from_numpy(k.astype(np.float32))[:, None]
        xtt = torch.from_numpy(x)[None]

        def torch_resample():
            p = torch.nn.functional.pad(xtt, (width, width + 2))
            y = torch.nn.functional.conv1d(p[:, None], kt, stride=2)
            return y.transpose(1, 2).reshape(1, -1)[:, :x.size // 2]
        ref = best(torch_resample, 5)
        row("resample 60 s 16k->8k", ours, ref, "torch conv1d")
        ours = best(lambda: AF.resample(xt, 44100, 16000), 3)
        g = math.gcd(44100, 16000)
        k, width = _sinc_resample_kernel(44100, 16000, g)
        kt = torch.from_numpy(k.astype(np.float32))[:, None]

        def torch_resample2():
            p = torch.nn.functional.pad(xtt, (width, width + 441))
            y = torch.nn.functional.conv1d(p[:, None], kt, stride=441)
            return y.transpose(1, 2).reshape(1, -1)
        ref = best(torch_resample2, 3)
        row("resample 60 s 44.1k->16k (as if)", ours, ref, "torch conv1d")
    except ImportError:
        print(f"resample 60 s 16k->8k: fiamma {ours * 1e3:.2f} ms (torch not installed)")

    a, b = [1.0, -1.8, 0.81], [0.2, 0.1, 0.05]
    ours = best(lambda: AF.lfilter(xt, fiamma.tensor(a), fiamma.tensor(b), clamp=False), 5)
    xs = x[:sr].astype(np.float64)

    def direct():
        y = np.zeros_like(xs)
        y1 = y2 = x1 = x2 = 0.0
        for n in range(xs.size):
            v = b[0] * xs[n] + b[1] * x1 + b[2] * x2 - a[1] * y1 - a[2] * y2
            x2, x1, y2, y1 = x1, xs[n], y1, v
            y[n] = v
        return y
    ref = best(direct, 1) * 60
    row("lfilter biquad 60 s (float32)", ours, ref, "python loop (x60)")
    print(f"lfilter: {x.size / ours / 1e6:.1f} Msamples/s")


if __name__ == "__main__":
    main()
