"""The port corpus: PyTorch-style programs (written for this project in the idioms of
pytorch/examples) run unmodified under the zero-edit runner ``python -m fiamma.run`` with
tiny budgets; in the parity session the same programs run under real PyTorch and their final
figures are compared.

Same seeds do not give the same numbers across libraries (different random streams and
kernels), so the parity checks compare what is comparable: final losses within a stated
relative margin, and accuracies both above chance and within a stated distance.
"""

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TIMEOUT = 300

# program -> (tiny flags, {figure: (kind, margin)}) where kind is "rel" (relative difference
# of the two libraries' figures at most margin), "abs" (absolute difference), "min" (both at
# least margin) or "max" (both at most margin); the CI run checks the "min"/"max" figures and
# that every figure is finite
PROGRAMS = {
    "mnist_cnn": (["--epochs", "2", "--train-size", "512", "--log-interval", "100",
                   "--save-model", "mnist_cnn.pt"],
                  {"accuracy": ("min", 0.5), "test_loss": ("rel", 0.6)}),
    "vae": (["--epochs", "2", "--train-size", "512", "--log-interval", "100"],
            {"test_loss": ("rel", 0.1)}),
    "dcgan": (["--niter", "1", "--train-size", "512", "--outf", "."],
              {"loss_d": ("abs", 1.0), "loss_g": ("abs", 1.5), "fake_std": ("min", 0.01)}),
    "word_language_model": (["--model", "LSTM", "--epochs", "2", "--sentences", "300",
                             "--save", "lstm.pt"],
                            {"val_ppl": ("rel", 0.3)}),
    "word_language_model_transformer": (["--model", "Transformer", "--epochs", "2",
                                         "--sentences", "300", "--save", "tr.pt"],
                                        {"val_ppl": ("rel", 0.3)}),
    "mnist_hogwild": (["--epochs", "1", "--train-size", "512", "--log-interval", "100"],
                      {"accuracy": ("min", 0.2), "test_loss": ("rel", 0.5)}),
    "imagenet": (["IMAGES", "--epochs", "2", "-b", "16", "-j", "2", "--image-size", "32",
                  "--lr", "0.01", "-p", "100", "--seed", "0", "--checkpoint", "ck.pth"],
                 {"train_loss": ("max", 1.2)}),  # chance: ln(6) = 1.79
    "actor_critic": (["--episodes", "30", "--log-interval", "100"],
                     {"running_reward": ("min", 8.0)}),
    "siamese_network": (["--epochs", "2", "--train-size", "512", "--log-interval", "100"],
                        {"test_loss": ("rel", 0.2)}),
    # torch.func: vmap(grad) per-sample gradients, stack_module_state ensembles, MAML
    "per_sample_grads": (["--epochs", "1", "--train-size", "256"],
                         {"max_diff": ("max", 1e-5), "accuracy": ("min", 0.3),
                          "test_loss": ("rel", 0.5)}),
    "ensembling": (["--epochs", "2", "--train-size", "512"],
                   {"diff_err": ("max", 1e-5), "same_err": ("max", 1e-5),
                    "accuracy": ("min", 0.5), "test_loss": ("rel", 0.6)}),
    "maml": (["--iterations", "60", "--log-interval", "20"],
             {"gain": ("min", 1.0), "post_loss": ("rel", 0.3)}),
}


def _script(name):
    return HERE / (name.replace("_transformer", "") + ".py")


def _args(name, tmp_path):
    args = list(PROGRAMS[name][0])
    if "IMAGES" in args:
        sys.path.insert(0, str(HERE))
        from make_image_folder import make

        images = tmp_path / "images"
        if not images.exists():
            make(images)
        args[args.index("IMAGES")] = str(images)
    return args


def run_program(name, tmp_path, runner):
    """Run a corpus program (``runner``: 'fiamma' through fiamma.run, 'torch' as plain python)
    in ``tmp_path``; returns its RESULT figures as a dict of floats."""
    cmd = [sys.executable] + (["-m", "fiamma.run"] if runner == "fiamma" else [])
    cmd += [str(_script(name))] + _args(name, tmp_path)
    env = dict(os.environ, OMP_NUM_THREADS="2")
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT,
                          env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{name} under {runner} failed:\n{out[-4000:]}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"{name} under {runner} printed no RESULT line:\n{out[-2000:]}"
    figures = {}
    for item in lines[-1].split()[1:]:
        k, v = item.split("=")
        figures[k] = 1.0 if v == "True" else 0.0 if v == "False" else float(v)
    return figures


def _needs(name):
    if name == "actor_critic" and importlib.util.find_spec("fiamma.distributions") is None:
        pytest.skip("fiamma.distributions is not installed")


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_runs_on_fiamma(name, tmp_path):
    _needs(name)
    got = run_program(name, tmp_path, "fiamma")
    for k, v in got.items():
        assert math.isfinite(v), (name, k, v)
    for k, (kind, margin) in PROGRAMS[name][1].items():
        if kind == "min":
            assert got[k] >= margin, f"{name}: {k}={got[k]} below {margin}"
        if kind == "max":
            assert got[k] <= margin, f"{name}: {k}={got[k]} above {margin}"
    if name == "mnist_hogwild":
        assert got["shared_update"] == 1.0  # the workers' steps reached the shared model
    if name == "imagenet":
        assert (tmp_path / "ck.pth").exists() and (tmp_path / "model_best.pth.tar").exists()


@pytest.mark.parity
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_figures_match_pytorch(name, tmp_path):
    pytest.importorskip("torch")
    if name == "imagenet":
        pytest.importorskip("torchvision")
    _needs(name)
    (tmp_path / "f").mkdir()
    (tmp_path / "t").mkdir()
    got = run_program(name, tmp_path / "f", "fiamma")
    want = run_program(name, tmp_path / "t", "torch")
    for k, (kind, margin) in PROGRAMS[name][1].items():
        g, w = got[k], want[k]
        if kind == "rel":
            assert abs(g - w) <= margin * abs(w), f"{name}: {k} fiamma {g} vs torch {w}"
        elif kind == "abs":
            assert abs(g - w) <= margin, f"{name}: {k} fiamma {g} vs torch {w}"
        elif kind == "min":
            assert g >= margin and w >= margin, f"{name}: {k} fiamma {g} torch {w} < {margin}"
        else:
            assert g <= margin and w <= margin, f"{name}: {k} fiamma {g} torch {w} > {margin}"
