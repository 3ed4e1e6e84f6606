"""MelSpectrogram (n_fft 400, hop 160, 80 mels, power 2, Hann window) of 60 s of 16 kHz audio:
fiamma.audio's transform beside the same computation written with PyTorch ops
(torch.stft + |.|^2 + matmul with the same filter bank), 2 threads. Prints the median times
and the ratio fiamma / torch (< 1: fiamma faster).

    PYTHONPATH=... python benchmarks/bench_audio_spectral.py [--repeat 20] [--breakdown]
"""

import argparse
import os
import statistics
import time

THREADS = 2
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))

import numpy as np  # noqa: E402


def _median_time(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--breakdown", action="store_true")
    args = ap.parse_args()

    import fiamma
    try:
        from fiamma.audio.transforms import MelSpectrogram
    except ImportError:
        from fiamma.audio.transforms._spectral import MelSpectrogram

    sr = 16000
    wav = np.random.default_rng(0).standard_normal(int(sr * args.seconds)).astype(np.float32)
    mel = MelSpectrogram(sr, n_fft=400, hop_length=160, n_mels=80)
    xf = fiamma.from_numpy(wav)
    t_f = _median_time(lambda: mel(xf), args.repeat)
    print(f"fiamma MelSpectrogram ({args.seconds:g} s @ {sr} Hz): {t_f * 1e3:8.2f} ms")

    try:
        import torch
    except ImportError:
        print("torch not installed: no ratio")
        return
    torch.set_num_threads(THREADS)
    xt = torch.from_numpy(wav)
    win = torch.hann_window(400)
    fb = torch.from_numpy(mel.mel_scale.fb.numpy().copy())

    def torch_mel():
        s = torch.stft(xt, 400, hop_length=160, win_length=400, window=win, center=True,
                       pad_mode="reflect", return_complex=True)
        p = s.abs().pow(2.0)
        return torch.matmul(p.transpose(-1, -2), fb).transpose(-1, -2)

    t_t = _median_time(torch_mel, args.repeat)
    ref = torch_mel().numpy()
    got = mel(xf).numpy()
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    print(f"torch ops (stft + abs^2 + matmul, {THREADS} threads):   {t_t * 1e3:8.2f} ms")
    print(f"ratio fiamma / torch: {t_f / t_t:.2f}x   (max rel. difference {err:.1e})")

    if args.breakdown:
        spec = mel.spectrogram
        t_stft = _median_time(lambda: fiamma.stft(xf, 400, 160, 400, spec.window),
                              args.repeat)
        p = spec(xf)
        t_mm = _median_time(lambda: mel.mel_scale(p), args.repeat)
        t_tstft = _median_time(lambda: torch.stft(xt, 400, 160, 400, win,
                                                  return_complex=True), args.repeat)
        t_spec = _median_time(lambda: spec(xf), args.repeat)
        print(f"  fiamma.stft {t_stft * 1e3:.2f} ms, spectrogram {t_spec * 1e3:.2f} ms, "
              f"mel matmul {t_mm * 1e3:.2f} ms; torch.stft {t_tstft * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
