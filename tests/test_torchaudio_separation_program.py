"""tests/ports/conv_tasnet_separation.py, a PyTorch program that imports torchaudio and trains
torchaudio.models.ConvTasNet on a real recording, runs unmodified under ``python -m fiamma.run``
and learns: after a few Adam steps the held-out SI-SNR beats both the untrained model's and
the unprocessed mixture's. The recording is CPython's own test sound
(Lib/test/audiodata/pluck-pcm32.wav); skipped where the Python installation has no test suite
(set FIAMMA_AUDIO_SAMPLE to another file to run it anyway)."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("fiamma.audio")
pytest.importorskip("fiamma.optim")
pytest.importorskip("soundfile")

PROGRAM = Path(__file__).parent / "ports" / "conv_tasnet_separation.py"


def _audio():
    for cand in (os.environ.get("FIAMMA_AUDIO_SAMPLE", ""),
                 os.path.join(sysconfig.get_paths()["stdlib"], "test", "audiodata",
                              "pluck-pcm32.wav")):
        if cand and os.path.exists(cand):
            return cand
    pytest.skip("no real recording here (CPython's test/audiodata is not installed)")


def test_conv_tasnet_program_learns_to_separate(tmp_path):
    cmd = [sys.executable, "-m", "fiamma.run", str(PROGRAM), _audio(), "--steps", "25",
           "--save", "separated.wav"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="2"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    got = {k: float(v) for k, v in (item.split("=") for item in line.split()[1:])}
    assert got["final_si_snr"] > got["initial_si_snr"] + 10, got
    assert got["final_si_snr"] > got["mixture_si_snr"] + 2, got
    import soundfile

    wav, sr = soundfile.read(tmp_path / "separated.wav", always_2d=True)
    assert wav.shape[1] == 2 and sr == 11025     # two separated sources, at the input's rate
