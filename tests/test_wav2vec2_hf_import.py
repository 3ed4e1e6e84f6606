"""fiamma.audio's ``import_huggingface_model`` against Hugging Face transformers itself: tiny
random ``Wav2Vec2ForCTC`` / ``HubertModel`` / ``WavLMModel`` / ``WavLMForCTC`` models are built
and run under PyTorch in a child process (float64), saved with ``save_pretrained``, imported
in fiamma from the folder and run on the same input. Skipped without torch or transformers."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = [pytest.mark.parity,
              pytest.mark.skipif(importlib.util.find_spec("transformers") is None
                                 or importlib.util.find_spec("torch") is None,
                                 reason="needs transformers and torch")]

REFERENCE = """
    import sys, types
    try:
        import torchvision  # noqa: F401
    except Exception:
        # a torchvision build whose C ops do not load beside this torch: keep transformers
        # from importing it
        for k in [k for k in sys.modules if k.startswith("torchvision")]:
            del sys.modules[k]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("stub")
    import numpy as np
    import torch
    import transformers as tf

    root = sys.argv[1]
    common = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=20, conv_dim=(8, 8, 8), conv_kernel=(10, 3, 2),
                  conv_stride=(5, 2, 2), num_conv_pos_embeddings=4,
                  num_conv_pos_embedding_groups=2, vocab_size=7, hidden_dropout=0.0,
                  attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
                  layerdrop=0.0, final_dropout=0.0)
    cases = {
        "w2v_ctc": (tf.Wav2Vec2ForCTC, tf.Wav2Vec2Config(**common)),
        "w2v_ctc_stable": (tf.Wav2Vec2ForCTC, tf.Wav2Vec2Config(
            **common, feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True)),
        "hubert": (tf.HubertModel, tf.HubertConfig(**common)),
        "wavlm": (tf.WavLMModel, tf.WavLMConfig(**common, num_buckets=8,
                                                max_bucket_distance=20)),
        "wavlm_ctc_stable": (tf.WavLMForCTC, tf.WavLMConfig(
            **common, feat_extract_norm="layer", do_stable_layer_norm=True, num_buckets=8,
            max_bucket_distance=20)),
    }
    torch.manual_seed(0)
    x = torch.randn(2, 400, dtype=torch.float64)
    np.save(f"{root}/input.npy", x.numpy())
    for name, (cls, cfg) in cases.items():
        m = cls(cfg).eval()
        with torch.no_grad():
            for n, p in m.named_parameters():      # move gates and biases off their init
                p.add_(torch.randn_like(p) * 0.1)
        m.save_pretrained(f"{root}/{name}")
        with torch.no_grad():
            out = m.double()(x)
        y = out.logits if hasattr(out, "logits") else out.last_hidden_state
        np.save(f"{root}/{name}/expected.npy", y.numpy())
    print("ok")
"""


def test_import_matches_transformers(tmp_path):
    script = tmp_path / "reference.py"
    script.write_text(textwrap.dedent(REFERENCE))
    r = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                       text=True, timeout=600, cwd=tmp_path,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]

    import fiamma
    from fiamma.audio.models.wav2vec2.utils import import_huggingface_model

    x = fiamma.tensor(np.load(tmp_path / "input.npy"))
    for name in ("w2v_ctc", "w2v_ctc_stable", "hubert", "wavlm", "wavlm_ctc_stable"):
        model = import_huggingface_model(str(tmp_path / name)).double().eval()
        y, _ = model(x)
        expected = np.load(tmp_path / name / "expected.npy")
        assert y.shape == expected.shape, name
        np.testing.assert_allclose(y.detach().numpy(), expected,
                                   atol=1e-12 * np.abs(expected).max(), rtol=0, err_msg=name)
