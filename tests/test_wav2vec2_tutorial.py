"""examples/speech_recognition_wav2vec2.py (a torchaudio-tutorial-style PyTorch program) runs
unmodified under ``python -m fiamma.run`` with a local WAV2VEC2_ASR_BASE_960H checkpoint: the
test writes a random full-size one (torchaudio's layout: 32 output rows, the positional conv
as weight_g/weight_v) into a temporary $FIAMMA_HOME, with an output layer that always says "A",
so the transcript is known."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fiamma

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "speech_recognition_wav2vec2.py"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not EXAMPLE.is_file(), reason="examples/ not found")]


def test_tutorial_program_runs_with_local_weights(tmp_path):
    sf = pytest.importorskip("soundfile")
    from fiamma.audio.models import wav2vec2_base

    fiamma.manual_seed(0)
    model = wav2vec2_base(aux_num_out=32)
    sd = dict(model.state_dict())
    p = "encoder.transformer.pos_conv_embed.conv."
    sd[p + "weight_g"] = sd.pop(p + "parametrizations.weight.original0")
    sd[p + "weight_v"] = sd.pop(p + "parametrizations.weight.original1")
    # output rows: 0 blank, 1-3 fairseq's <pad> </s> <unk> (dropped by get_model), then labels;
    # a bias of 100 on "A" (label index 4, row 7) makes every frame say "A"
    sd["aux.weight"] = fiamma.zeros(32, 768)
    bias = fiamma.zeros(32)
    bias[7] = 100.0
    sd["aux.bias"] = bias
    folder = tmp_path / "home" / "hub" / "checkpoints"
    folder.mkdir(parents=True)
    fiamma.save(sd, str(folder / "wav2vec2_fairseq_base_ls960_asr_ls960.pth"))
    del model, sd

    t = np.arange(44100) / 44100.0      # 1 s at 44.1 kHz, stereo: resampled, first channel
    audio = np.stack([0.3 * np.sin(2 * np.pi * 220 * t), np.zeros_like(t)], axis=1)
    wav = tmp_path / "tone.wav"
    sf.write(str(wav), audio.astype(np.float32), 44100)

    env = {**os.environ, "FIAMMA_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-m", "fiamma.run", str(EXAMPLE), str(wav)],
                       capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "Sample Rate: 16000" in out
    assert "Labels: ('-', '|', 'E', 'T', 'A'," in out
    assert "Features: 12 layers of (1, 49, 768)" in out
    assert "Emission: (1, 49, 29)" in out
    assert "Transcript: A\n" in out
