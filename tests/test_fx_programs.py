"""fiamma.fx with other packages: torchvision-style models from fiamma.vision, and an
unmodified torch.fx program under ``python -m fiamma.run`` (``import torch.fx`` resolves to
fiamma.fx)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fiamma
import fiamma.fx as fx

models = pytest.importorskip("fiamma.vision.models")


@pytest.mark.parametrize("builder", ["resnet18", "mobilenet_v2"])
def test_vision_models_trace_and_match(builder):
    fiamma.manual_seed(0)
    m = getattr(models, builder)(num_classes=10).eval()
    gm = fx.symbolic_trace(m)
    x = fiamma.randn(2, 3, 64, 64)
    np.testing.assert_allclose(gm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    assert set(gm.state_dict()) == set(m.state_dict())


PROGRAM = """
import copy
import operator
from collections import Counter

import torch
import torch.fx
import torch.nn as nn
import torchvision
from torch.fx.passes.shape_prop import ShapeProp


def fuse_conv_bn(conv, bn):
    fused = copy.deepcopy(conv)
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
    fused.weight = nn.Parameter(conv.weight * scale.reshape(-1, 1, 1, 1))
    fused.bias = nn.Parameter((bias - bn.running_mean) * scale + bn.bias)
    return fused


def fuse(model: nn.Module) -> torch.fx.GraphModule:
    model = copy.deepcopy(model)
    fx_model: torch.fx.GraphModule = torch.fx.symbolic_trace(model)
    modules = dict(fx_model.named_modules())
    for node in fx_model.graph.nodes:
        if node.op != "call_module" or type(modules[node.target]) is not nn.BatchNorm2d:
            continue
        prev = node.args[0]
        if prev.op != "call_module" or type(modules[prev.target]) is not nn.Conv2d:
            continue
        if len(prev.users) > 1:
            continue
        fused = fuse_conv_bn(modules[prev.target], modules[node.target])
        parent, _, name = prev.target.rpartition(".")
        setattr(modules[parent] if parent else fx_model, name, fused)
        node.replace_all_uses_with(prev)
        fx_model.graph.erase_node(node)
    fx_model.graph.lint()
    fx_model.recompile()
    return fx_model


class ReluToGelu(torch.fx.Transformer):
    def call_module(self, target, args, kwargs):
        if isinstance(self.fetch_attr(target), nn.ReLU):
            return self.call_function(torch.nn.functional.gelu, args, kwargs)
        return super().call_module(target, args, kwargs)


def main():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 64, 64)
    fused = fuse(model)
    with torch.no_grad():
        err = (fused(x) - model(x)).abs().max().item()
    kinds = Counter(type(fused.get_submodule(n.target)).__name__
                    for n in fused.graph.nodes if n.op == "call_module")
    print("fused max abs diff", err, "batchnorms left", kinds["BatchNorm2d"])
    assert err < 1e-3 and kinds["BatchNorm2d"] == 0
    ops = Counter(n.op for n in fused.graph.nodes)
    print("ops", dict(ops))
    gm = torch.fx.symbolic_trace(model)
    ShapeProp(gm).propagate(x)
    print("fc", tuple(next(n for n in gm.graph.nodes if n.target == "fc")
                      .meta["tensor_meta"].shape))
    gelu = ReluToGelu(gm).transform()
    assert any(n.target is torch.nn.functional.gelu for n in gelu.graph.nodes)
    assert any(n.target is operator.add for n in gelu.graph.nodes)
    print("gelu changes output", (gelu(x) - gm(x)).abs().max().item() > 1e-4)
    print(type(torch.fx.GraphModule).__name__, torch.fx.__name__)


if __name__ == "__main__":
    main()
"""


def test_torch_fx_program_unmodified_under_fiamma_run(tmp_path):
    script = tmp_path / "fx_tutorial.py"
    script.write_text(textwrap.dedent(PROGRAM))
    r = subprocess.run([sys.executable, "-m", "fiamma.run", str(script)], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    assert "batchnorms left 0" in r.stdout
    assert "fc (2, 10)" in r.stdout
    assert "gelu changes output True" in r.stdout
    assert "fiamma.fx" in r.stdout.splitlines()[-1]
