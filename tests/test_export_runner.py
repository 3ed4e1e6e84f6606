"""``torch.export`` programs under ``python -m fiamma.run``: a deployment script written for
PyTorch 2.13, unmodified, in a fresh interpreter (export with a dynamic batch, run, save and
load in another process, torch.cond, the errors PyTorch gives)."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("fiamma.export")


def run(tmp_path, name, code, timeout=240):
    script = tmp_path / name
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, "-m", "fiamma.run", str(script)],
                          capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


EXPORT = """
import torch
import torch.nn as nn
from torch.export import Dim, export


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 5)

    def forward(self, x, *, temperature=1.0):
        y = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        logits = self.head(y) / temperature
        return torch.cond(logits.sum() > 0, lambda t: t.softmax(-1), lambda t: -t,
                          (logits,))


torch.manual_seed(0)
model = Net().eval()
batch = Dim("batch", min=1, max=32)
ep = export(model, (torch.randn(4, 3, 16, 16),), {"temperature": 2.0},
            dynamic_shapes={"x": {0: batch}, "temperature": None})
print([s.kind.name for s in ep.graph_signature.input_specs])
x = torch.randn(7, 3, 16, 16)
ref = model(x, temperature=2.0)
out = ep.module()(x, temperature=2.0)
print("max diff", float((out - ref).abs().max()))
try:
    ep(x)
except RuntimeError as e:
    print("direct call:", e)
try:
    ep.module()(torch.randn(7, 3, 17, 16), temperature=2.0)
except AssertionError as e:
    print("bad shape:", str(e).split(" (")[0])
torch.export.save(ep, "net.pt2")
torch.save(ref, "ref.pt")
torch.save(x, "x.pt")
"""

LOAD = """
import torch

ep = torch.export.load("net.pt2")
x, ref = torch.load("x.pt"), torch.load("ref.pt")
print("loaded diff", float((ep.module()(x, temperature=2.0) - ref).abs().max()))
print(ep.range_constraints)
"""


def test_export_save_and_load_in_another_process(tmp_path):
    r = run(tmp_path, "export_net.py", EXPORT)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == str(["PARAMETER"] * 6 + ["BUFFER"] * 3 + ["USER_INPUT"] * 2)
    assert float(lines[1].split()[-1]) < 1e-5
    assert "exported_program.module()" in lines[2]
    assert lines[3] == "bad shape: Guard failed: x.size()[2] == 16"
    r = run(tmp_path, "load_net.py", LOAD)  # a process that never saw the model's code
    assert r.returncode == 0, r.stderr
    diff, ranges = r.stdout.splitlines()
    assert float(diff.split()[-1]) < 1e-5
    assert ranges == "{'s0': VR[2, 32]}"
