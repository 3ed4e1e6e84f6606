"""timm (pytorch-image-models) unmodified under ``python -m fiamma.run``: a handful of its
models take a training step, its data transforms, losses, Mixup, EMA and schedulers run, and
(parity) the same weights give PyTorch's outputs and gradients. Skipped when timm is not
installed; nothing of timm is copied into this project.

The comparison with PyTorch runs in float64: float32 results of deep networks differ between
any two libraries by rounding that grows with depth (an element near a ReLU kink can take the
other branch), while a wrong formula shows at once against float64's 1e-12."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("timm") is None,
                                reason="timm is not installed")

# (name, image size, create_model keywords); stochastic depth off (swin defaults to 0.1), as
# random layer dropping in train mode cannot be compared
MODELS = [
    ("resnet18", 64, {}),
    ("efficientnet_b0", 64, {}),
    ("convnext_atto", 64, {}),
    ("mobilenetv3_small_100", 64, {}),
    ("vit_tiny_patch16_224", 32, {"img_size": 32, "depth": 2}),
    ("swin_tiny_patch4_window7_224", 64,
     {"img_size": 64, "window_size": 2, "depths": (1, 1, 1, 1), "drop_path_rate": 0.0}),
    ("densenet121", 64, {}),
]


def _run(script, tmp_path, *args, fiamma_run=True):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    cmd = [sys.executable] + (["-m", "fiamma.run"] if fiamma_run else []) + [str(path)]
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                       timeout=900, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


TRAIN = """
    import sys
    import numpy as np
    import torch, timm, timm.optim, timm.scheduler, timm.loss, timm.data, timm.utils
    import torch.nn.functional as F
    from PIL import Image
    models = eval(sys.argv[1])
    torch.manual_seed(0)
    for name, size, kw in models:
        m = timm.create_model(name, pretrained=False, num_classes=5, **kw)
        opt = timm.optim.create_optimizer_v2(m, "adamw", lr=1e-3, weight_decay=0.05)
        sched, _ = timm.scheduler.create_scheduler_v2(opt, "cosine", num_epochs=3,
                                                      warmup_epochs=1)
        ema = timm.utils.ModelEmaV3(m, decay=0.9)
        mix = timm.data.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, num_classes=5,
                              label_smoothing=0.1)
        crit = timm.loss.SoftTargetCrossEntropy()
        before = [p.detach().clone() for p in m.parameters()]
        x, y = mix(torch.randn(4, 3, size, size), torch.tensor([0, 1, 2, 3]))
        loss = crit(m(x), y)
        loss.backward()
        opt.step()
        sched.step(1)
        ema.update(m, step=1)
        moved = sum(int(not torch.equal(a, p)) for a, p in zip(before, m.parameters()))
        assert torch.isfinite(loss) and moved > 0, (name, loss, moved)
        m.eval()
        with torch.no_grad():
            assert m(x[:1]).shape == (1, 5)
        print(name, "ok", round(float(loss), 4))
    img = Image.fromarray((np.random.RandomState(0).rand(40, 50, 3) * 255).astype(np.uint8))
    tf = timm.data.create_transform(32, is_training=True, auto_augment="rand-m9-mstd0.5",
                                    re_prob=0.25)
    assert tf(img).shape == (3, 32, 32)
    ev = timm.data.create_transform(32, is_training=False)
    assert ev(img).shape == (3, 32, 32)
    ls = timm.loss.LabelSmoothingCrossEntropy(0.1)(torch.randn(3, 5), torch.tensor([0, 1, 2]))
    assert torch.isfinite(ls)
    print("data ok")
"""


def test_timm_training_step_runs_under_fiamma_run(tmp_path):
    out = _run(TRAIN, tmp_path, repr(MODELS))
    for name, _, _ in MODELS:
        assert f"{name} ok" in out
    assert "data ok" in out


# the reference: PyTorch with the same models, float64, weights written for the fiamma side
REFERENCE = """
    import sys, types
    try:
        import torchvision  # noqa: F401
    except Exception:
        # a torchvision build whose C ops do not load beside this torch: timm only needs its
        # Python transforms, so skip the ops' meta registrations
        for k in [k for k in sys.modules if k.startswith("torchvision")]:
            del sys.modules[k]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("stub")
    import numpy as np
    import torch, timm
    import torch.nn.functional as F
    models, out = eval(sys.argv[1]), sys.argv[2]
    d = {}
    for name, size, kw in models:
        torch.manual_seed(0)
        m = timm.create_model(name, pretrained=False, num_classes=5, **kw).double().train()
        for k, v in m.state_dict().items():
            d[f"{name}|sd|{k}"] = v.numpy()
        x = torch.randn(4, 3, size, size, dtype=torch.float64)
        y = torch.tensor([0, 1, 2, 3])
        o = m(x)
        F.cross_entropy(o, y).backward()
        d[f"{name}|x"], d[f"{name}|out"] = x.numpy(), o.detach().numpy()
        for k, p in m.named_parameters():
            d[f"{name}|grad|{k}"] = p.grad.numpy()
    np.savez(out, **d)
"""

COMPARE = """
    import sys
    import numpy as np
    import torch, timm
    import torch.nn.functional as F
    models, ref = eval(sys.argv[1]), np.load(sys.argv[2])
    for name, size, kw in models:
        m = timm.create_model(name, pretrained=False, num_classes=5, **kw).double().train()
        pre = f"{name}|sd|"
        m.load_state_dict({k[len(pre):]: torch.from_numpy(ref[k].copy()) for k in ref.files
                           if k.startswith(pre)})
        o = m(torch.from_numpy(ref[f"{name}|x"].copy()))
        F.cross_entropy(o, torch.tensor([0, 1, 2, 3])).backward()
        want = ref[f"{name}|out"]
        out_err = np.abs(o.detach().numpy() - want).max() / np.abs(want).max()
        grads = {k: p.grad.numpy() for k, p in m.named_parameters()}
        gmax = max(np.abs(ref[f"{name}|grad|{k}"]).max() for k in grads)
        grad_err = max(np.abs(g - ref[f"{name}|grad|{k}"]).max() / gmax for k, g in grads.items())
        print(name, out_err, grad_err)
"""


@pytest.mark.parity
def test_timm_models_match_pytorch_in_float64(tmp_path):
    pytest.importorskip("torch")
    ref = tmp_path / "ref.npz"
    _run(REFERENCE, tmp_path, repr(MODELS), ref, fiamma_run=False)
    out = _run(COMPARE, tmp_path, repr(MODELS), ref)
    rows = [line.split() for line in out.splitlines() if line.split()[:1] and
            line.split()[0] in {n for n, _, _ in MODELS}]
    assert len(rows) == len(MODELS), out
    for name, out_err, grad_err in rows:
        assert float(out_err) < 1e-10, (name, out_err)
        # 1e-7, not 1e-10: PyTorch's float64 hardsigmoid gradient multiplies by float32's 1/6
        # (3e-8 relative; fiamma's is exact), which MobileNetV3's squeeze-excite gates show
        assert float(grad_err) < 1e-7, (name, grad_err)
