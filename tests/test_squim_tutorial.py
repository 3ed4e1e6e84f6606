"""examples/speech_quality_squim.py (a torchaudio-tutorial-style PyTorch program) runs unmodified
under ``python -m fiamma.run`` with a local SQUIM_OBJECTIVE checkpoint: the test writes a random
full-size one (torchaudio's layout, a plain state dict) into a temporary $FIAMMA_HOME, with
output layers that make the estimates known constants; the intrusive SI-SNR the program prints
is real (speech + noise mixed at 20 and -5 dB)."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fiamma

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "speech_quality_squim.py"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not EXAMPLE.is_file(), reason="examples/ not found")]


def test_squim_tutorial_program_runs_with_local_weights(tmp_path):
    sf = pytest.importorskip("soundfile")
    from fiamma.audio.models import squim_objective_base
    from fiamma.audio.models.squim.objective import PESQRange

    fiamma.manual_seed(0)
    sd = dict(squim_objective_base().state_dict())
    # each branch's last linear layer: zero weights, so the scores are functions of the bias
    for b, bias in enumerate((1.0, 0.0, 7.5)):
        sd[f"branches.{b}.2.2.weight"] = fiamma.zeros(1, 256)
        sd[f"branches.{b}.2.2.bias"] = fiamma.tensor([bias])
    folder = tmp_path / "home" / "hub" / "checkpoints"
    folder.mkdir(parents=True)
    fiamma.save(sd, str(folder / "squim_objective_dns2020.pth"))

    rng = np.random.default_rng(0)
    t = np.arange(44100) / 44100.0     # 1 s at 44.1 kHz, stereo: resampled, first channel used
    voice = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 6))
    voice *= 0.2 * (1 + np.sin(2 * np.pi * 3 * t))
    sf.write(str(tmp_path / "speech.wav"),
             np.stack([voice, np.zeros_like(t)], 1).astype(np.float32), 44100)
    sf.write(str(tmp_path / "noise.wav"), 0.1 * rng.standard_normal(16000).astype(np.float32),
             16000)

    env = {**os.environ, "FIAMMA_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-m", "fiamma.run", str(EXAMPLE),
                        str(tmp_path / "speech.wav"), str(tmp_path / "noise.wav")],
                       capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "Speech: 16000 samples at 16000 Hz (1.00 s)" in out
    assert "Distorted: (2, 16000)" in out
    stoi = 1 / (1 + math.exp(-1.0))
    pesq = (1.0 + PESQRange[1]) / 2
    for snr in (20, -5):
        assert (f"Estimated metrics at {snr}dB: STOI {stoi:.4f} PESQ {pesq:.4f} "
                f"SI-SDR 7.5000") in out
        m = re.search(rf"Reference metrics at {snr}dB: SI-SNR (-?[\d.]+)", out)
        assert m and abs(float(m[1]) - snr) < 0.5, out
    assert "MOS" not in out
