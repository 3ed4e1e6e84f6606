"""torchvision's int8 quantizable models (random weights, converted by torch) load into
fiamma.vision's ``quantize=True`` models and give the same int8 outputs."""
import io
import warnings

import numpy as np
import pytest

import fiamma


@pytest.mark.parity
@pytest.mark.slow
@pytest.mark.parametrize("name,size", [("resnet18", 64), ("mobilenet_v2", 64),
                                       ("shufflenet_v2_x0_5", 64), ("googlenet", 64),
                                       ("inception_v3", 96)])
def test_quantized_model_loads_torch_int8_checkpoint(tmp_path, name, size):
    torch = pytest.importorskip("torch")
    tvq = pytest.importorskip("torchvision.models.quantization")
    import fiamma.vision.models.quantization as fvq
    warnings.filterwarnings("ignore")
    old = torch.backends.quantized.engine
    try:
        torch.manual_seed(0)
        tm = getattr(tvq, name)(quantize=True).eval()
        buf = io.BytesIO()
        torch.save(tm.state_dict(), buf)
        path = tmp_path / f"{name}_int8.pth"
        path.write_bytes(buf.getvalue())
        fm = getattr(fvq, name)(quantize=True, weights=str(path))
        assert sorted(fm.state_dict()) == sorted(tm.state_dict())
        x = torch.rand(2, 3, size, size)
        to = tm(x).numpy()
        fo = fm(fiamma.tensor(x.numpy())).numpy()
        fc = [m for m in tm.modules() if type(m).__name__ == "Linear"][-1]
        quanta = np.abs(to - fo) / float(fc.scale)
        assert quanta.max() <= 1.01 and (quanta < 0.5).mean() > 0.99
    finally:
        torch.backends.quantized.engine = old


TUTORIAL = """
import copy
import torch
import torch.nn as nn
import torch.ao.quantization as tq


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.skip = nn.quantized.FloatFunctional()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.pool(self.relu(self.bn(self.conv(self.quant(x)))))
        x = self.skip.add_relu(x, self.conv2(x))
        x = nn.functional.adaptive_avg_pool2d(x, 1)
        return self.dequant(self.fc(torch.flatten(x, 1)))

    def fuse_model(self):
        tq.fuse_modules(self, [["conv", "bn", "relu"]], inplace=True)


torch.manual_seed(0)
model = Net().eval()
x = torch.randn(16, 3, 16, 16)
ref = model(x)
model.fuse_model()
model.qconfig = tq.get_default_qconfig("x86")
torch.backends.quantized.engine = "x86"
tq.prepare(model, inplace=True)
model(x)
tq.convert(model, inplace=True)
out = model(x)
w = model.conv.weight()
assert w.dtype == torch.qint8 and w.qscheme() == torch.per_channel_affine
assert model.quant(x).dtype == torch.quint8
torch.save(model.state_dict(), "q.pt")
sd = torch.load("q.pt")
assert sd["conv.weight"].int_repr().equal(w.int_repr())
print("max abs diff to float", float((out - ref).abs().max()), "fc scale", model.fc.scale)
"""


def test_pytorch_static_quantization_tutorial_runs_under_fiamma_run(tmp_path):
    import os
    import subprocess
    import sys
    script = tmp_path / "tutorial.py"
    script.write_text(TUTORIAL)
    r = subprocess.run([sys.executable, "-m", "fiamma.run", str(script)], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr[-3000:]
    diff, scale = float(r.stdout.split()[5]), float(r.stdout.split()[-1])
    assert diff < 10 * scale  # int8 result within a few output quanta of the float model
