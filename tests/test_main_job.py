"""The main job (README's first command, `nox -s train`): examples/train_digits.py runs end to
end on a short budget, saves a checkpoint that reloads to the same predictions, and writes the
predictions grid and the curves as PNGs.

Skipped when the tests run from a copy outside a checkout (the script and its data live in
examples/).
"""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "train_digits.py"
DATA = REPO / "examples" / "data" / "mnist_5k.csv.gz"

pytestmark = pytest.mark.skipif(not SCRIPT.exists() or not DATA.exists(),
                                reason="not running from a checkout")


def run(tmp_path, *args):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc


def test_train_digits_briefly(tmp_path):
    """Two short epochs on the shipped digits, batches made by two DataLoader workers."""
    out, proc = run(tmp_path, "--epochs", "2", "--limit", "320", "--batch-size", "64",
                    "--workers", "2")
    for name in ("checkpoint.pt", "predictions.png", "curves.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert "reload check passed" in proc.stdout
    assert "epoch 2:" in proc.stdout and "test acc" in proc.stdout
    assert "epoch 2/2 [" in proc.stderr  # the progress bar

    from PIL import Image

    import fiamma
    for name in ("predictions.png", "curves.png"):
        with Image.open(out / name) as img:
            assert img.format == "PNG" and img.width > 200 and img.height > 200
    state = fiamma.load(out / "checkpoint.pt")
    assert set(state) >= {"model", "optimizer"}
    assert state["optimizer"]["state"], "the optimizer state was not saved"
    assert len(state["history"]) == 2
    # two short epochs on 320 digits already beat chance by far on the held-out digits
    assert state["history"][-1]["test_acc"] > 0.3


def test_train_digits_reads_idx_folders(tmp_path):
    """--data DIR: MNIST-format IDX files (here a few shipped digits written as IDX); batches
    made in the main process."""
    import gzip

    import numpy as np
    with gzip.open(DATA, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.uint8, max_rows=5000)[::25]  # 200 rows
    images, labels = table[:, :-1].reshape(-1, 28, 28), table[:, -1]
    idx = tmp_path / "idx"
    idx.mkdir()

    def write(name, arr):
        dims = b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
        with gzip.open(idx / (name + ".gz"), "wb") as f:
            f.write(bytes([0, 0, 8, arr.ndim]) + dims + arr.tobytes())

    write("train-images-idx3-ubyte", images[::2])
    write("train-labels-idx1-ubyte", labels[::2])
    write("t10k-images-idx3-ubyte", images[1::2])
    write("t10k-labels-idx1-ubyte", labels[1::2])
    out, proc = run(tmp_path, "--data", str(idx), "--epochs", "1", "--batch-size", "20",
                    "--workers", "0")
    assert "100 training and 100 held-out test images" in proc.stdout
    assert "reload check passed" in proc.stdout
    assert (out / "predictions.png").is_file() and (out / "curves.png").is_file()


def test_train_digits_exports_onnx(tmp_path):
    """--export: the trained model as ONNX, run in ONNX Runtime on the test digits."""
    pytest.importorskip("fiamma.onnx")
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    path = tmp_path / "digits.onnx"
    _, proc = run(tmp_path, "--epochs", "1", "--limit", "256", "--batch-size", "64",
                  "--export", str(path))
    assert path.is_file()
    assert "onnx check passed" in proc.stdout
