"""Reference-free speech quality estimates with TorchAudio-SQUIM, written for PyTorch/torchaudio
in the style of torchaudio's "Torchaudio-Squim" tutorial: clean speech + noise at two SNRs ->
SQUIM_OBJECTIVE's STOI / wide-band PESQ / SI-SDR estimates, next to the intrusive SI-SNR (and,
when the ``pesq`` / ``pystoi`` packages are installed, the true PESQ and STOI); optionally the
MOS of each noisy copy from SQUIM_SUBJECTIVE against a non-matching clean reference.

Run it on fiamma unmodified:

    python -m fiamma.run examples/speech_quality_squim.py speech.wav [noise.wav] [--mos ref.wav]

Without a noise file, white noise is used. The weights are torchaudio's
squim_objective_dns2020.pth (28 MB) and, with --mos, squim_subjective_bvcc_daps.pth (360 MB):
downloaded on first use into $FIAMMA_HOME/hub/checkpoints (~/.cache/fiamma by default);
without a network, put the files there by hand.
"""

import argparse

import torch
import torchaudio
import torchaudio.functional as F
from torchaudio.pipelines import SQUIM_OBJECTIVE, SQUIM_SUBJECTIVE


def si_snr(estimate, reference, epsilon=1e-8):
    """Scale-invariant signal-to-noise ratio (dB) of ``estimate`` against ``reference``."""
    estimate = estimate - estimate.mean()
    reference = reference - reference.mean()
    scale = (estimate * reference).mean(dim=1, keepdim=True) / (
        reference.pow(2).mean(dim=1, keepdim=True) + epsilon)
    target = scale * reference
    error = estimate - target
    return (10 * torch.log10(target.pow(2).mean(dim=1))
            - 10 * torch.log10(error.pow(2).mean(dim=1))).item()


def load_mono_16k(path):
    waveform, sample_rate = torchaudio.load(path)
    waveform = waveform[0:1]
    if sample_rate != 16000:
        waveform = F.resample(waveform, sample_rate, 16000)
    return waveform


def intrusive_metrics(clean, noisy):
    """True PESQ / STOI when their packages exist (as in the tutorial), else None."""
    try:
        from pesq import pesq
        from pystoi import stoi
    except ImportError:
        return None
    return (stoi(clean.numpy(), noisy.numpy(), 16000, extended=False),
            pesq(16000, clean.numpy(), noisy.numpy(), mode="wb"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("speech")
    parser.add_argument("noise", nargs="?")
    parser.add_argument("--mos", metavar="REFERENCE", help="also estimate MOS against this "
                        "clean, non-matching reference recording")
    args = parser.parse_args()
    torch.random.manual_seed(0)

    speech = load_mono_16k(args.speech)
    noise = load_mono_16k(args.noise) if args.noise else torch.randn_like(speech)
    length = min(speech.shape[1], noise.shape[1])
    speech, noise = speech[:, :length], noise[:, :length]
    print(f"Speech: {length} samples at {SQUIM_OBJECTIVE.sample_rate} Hz "
          f"({length / SQUIM_OBJECTIVE.sample_rate:.2f} s)")

    snr_dbs = torch.tensor([20, -5])
    distorted = F.add_noise(speech, noise, snr_dbs)
    print("Distorted:", tuple(distorted.shape))

    objective_model = SQUIM_OBJECTIVE.get_model()
    for i, snr in enumerate(snr_dbs.tolist()):
        with torch.inference_mode():
            stoi_hyp, pesq_hyp, si_sdr_hyp = objective_model(distorted[i:i + 1, :])
        print(f"Estimated metrics at {snr}dB: STOI {stoi_hyp[0].item():.4f} "
              f"PESQ {pesq_hyp[0].item():.4f} SI-SDR {si_sdr_hyp[0].item():.4f}")
        line = f"Reference metrics at {snr}dB: SI-SNR {si_snr(distorted[i:i + 1], speech):.4f}"
        truth = intrusive_metrics(speech[0], distorted[i])
        if truth is not None:
            line += f" STOI {truth[0]:.4f} PESQ {truth[1]:.4f}"
        print(line)

    if args.mos:
        subjective_model = SQUIM_SUBJECTIVE.get_model()
        reference = load_mono_16k(args.mos)
        for i, snr in enumerate(snr_dbs.tolist()):
            with torch.inference_mode():
                mos = subjective_model(distorted[i:i + 1, :], reference)
            print(f"Estimated MOS at {snr}dB: {mos[0].item():.4f}")


if __name__ == "__main__":
    main()
