"""``python -m fiamma.run``: PyTorch-style programs across packages, unmodified, in a fresh
interpreter (torch.utils.data with workers, torch.nn, torch.optim, torchvision)."""

import os
import subprocess
import sys
import textwrap

import pytest


def run(tmp_path, code, *args, timeout=180):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, "-m", "fiamma.run", str(script), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


PROGRAM = """
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset
import torch.utils.data.dataloader
import torch.utils.data.sampler
from torch.utils.data.distributed import DistributedSampler


class Squares(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = (self.x ** 2).sum(1, keepdim=True)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--context", default=None)
    args = p.parse_args()
    torch.manual_seed(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    sched = StepLR(opt, step_size=1, gamma=0.9)
    loader = DataLoader(Squares(256), batch_size=32, shuffle=True, num_workers=args.workers,
                        multiprocessing_context=args.context)
    assert torch.utils.data.dataloader.DataLoader is DataLoader
    assert torch.utils.data.sampler.RandomSampler is torch.utils.data.RandomSampler
    assert DistributedSampler is torch.utils.data.DistributedSampler
    first = last = None
    for epoch in range(5):
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            first = loss.item() if first is None else first
            last = loss.item()
        sched.step()
    model.eval()
    with torch.no_grad():
        out = model(torch.zeros(1, 4))
    print(f"first {first:.3f} last {last:.3f} out {tuple(out.shape)}")
    print("decreased", last < first)


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("context", [None, "spawn", "fork"])
def test_training_script_with_dataloader_workers(tmp_path, context):
    pytest.importorskip("fiamma.data")
    pytest.importorskip("fiamma.nn")
    pytest.importorskip("fiamma.optim")
    args = ["--workers", "2"] + (["--context", context] if context else [])
    r = run(tmp_path, PROGRAM, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "decreased True", r.stdout


def test_torchvision_names(tmp_path):
    pytest.importorskip("fiamma.vision")
    r = run(tmp_path, """
        import torch
        import torchvision
        import torchvision.transforms as transforms
        from torchvision import datasets, models
        import fiamma.vision
        print(torchvision.__version__ >= "0.20", torchvision.transforms is fiamma.vision.transforms)
        print(datasets.FakeData is fiamma.vision.datasets.FakeData, models.resnet18.__name__)
        t = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
        ds = datasets.FakeData(size=4, image_size=(1, 8, 8), transform=t)
        x, y = ds[0]
        print(type(x) is torch.Tensor, tuple(x.shape))
        """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["True True", "True resnet18", "True (1, 8, 8)"]


def test_fx_examples_idioms_under_the_runner(tmp_path):
    """pytorch/examples' fx scripts' idioms: a trace of code that reads ``torch.tan`` first
    during the trace (the ``torch`` alias must not keep the trace's stand-in), graphs built
    from hand-made Proxies (``torch.cat`` on Proxies records), ``torch.ops.profiler`` ranges
    and ``torch.fx.node.Target`` annotations."""
    pytest.importorskip("fiamma.nn")
    r = run(tmp_path, """
        from typing import Any
        import torch
        import torch.fx as fx
        from torch.fx import Proxy

        def f(x):
            return torch.exp(torch.tan(x))

        gm = fx.symbolic_trace(f)
        print(hasattr(torch.tan, "__fx_original__"), hasattr(torch.exp, "__fx_original__"))
        graph = fx.Graph()
        tracer = fx.proxy.GraphAppendingTracer(graph)
        a, b = (Proxy(graph.placeholder(n), tracer) for n in "ab")
        graph.output(torch.neg(torch.tanh(torch.cat([a, b]))).node)
        m = fx.GraphModule(torch.nn.Module(), graph)
        out = m(torch.ones(1), torch.zeros(1))
        print([round(v, 4) for v in out.tolist()])
        print(torch.ops.profiler._record_function_exit.__name__)

        def create(kind: str, target: torch.fx.node.Target) -> Any:
            return target
        print(create("call_function", torch.relu) is torch.relu)
        """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["False False", "[-0.7616, -0.0]", "_exit", "True"]


def test_forward_ad_tutorial_idioms_under_the_runner(tmp_path):
    # PyTorch's forward-mode AD tutorial: torch.autograd.forward_ad, a custom Function's jvp,
    # gradcheck(check_forward_ad=True) and the legacy functorch module
    pytest.importorskip("fiamma.nn")
    r = run(tmp_path, """
        import functools
        import warnings
        import torch
        import torch.autograd.forward_ad as fwAD
        import torch.nn as nn
        from torch.func import functional_call
        import functorch as ft
        import fiamma.autograd.forward_ad
        import fiamma.functorch
        warnings.simplefilter("ignore", FutureWarning)
        print(ft.jvp is fiamma.functorch.jvp, fwAD is fiamma.autograd.forward_ad)
        primal, tangent = torch.randn(10, 10), torch.randn(10, 10)
        with fwAD.dual_level():
            d = fwAD.make_dual(primal, tangent)
            ok = [fwAD.unpack_dual(d).tangent is tangent,
                  fwAD.unpack_dual(fwAD.make_dual(primal, tangent.T)).tangent is not tangent]
            out = d ** 2 + torch.randn(10, 10) ** 2
            ok.append(torch.allclose(fwAD.unpack_dual(out).tangent, 2 * primal * tangent))
        ok.append(fwAD.unpack_dual(out).tangent is None)
        model, x = nn.Linear(5, 5), torch.randn(16, 5)
        params = dict(model.named_parameters())
        tangents = {k: torch.rand_like(p) for k, p in params.items()}
        with fwAD.dual_level():
            jvp = fwAD.unpack_dual(functional_call(
                model, {k: fwAD.make_dual(p, tangents[k]) for k, p in params.items()},
                x)).tangent
        ok.append(torch.allclose(jvp, x @ tangents["weight"].T + tangents["bias"]))

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, foo):
                result = torch.exp(foo)
                ctx.result = result
                return result

            @staticmethod
            def jvp(ctx, gI):
                gO = gI * ctx.result
                del ctx.result
                return gO

        p = torch.randn(4, 4, dtype=torch.double, requires_grad=True)
        ok.append(torch.autograd.gradcheck(Fn.apply, (p,), check_forward_ad=True,
                                           check_backward_ad=False, check_undefined_grad=False,
                                           check_batched_grad=False))
        func, ps, bs = ft.make_functional_with_buffers(model)
        ts = tuple(torch.rand_like(q) for q in ps)
        _, jo = ft.jvp(lambda q: func(q, bs, x), (ps,), (ts,))
        ok.append(torch.allclose(jo, x @ ts[0].T + ts[1]))
        y = torch.randn(3)
        _, t2 = ft.jvp(functools.partial(lambda a, y: a * y, y=y), (torch.ones(3),),
                       (torch.ones(3),))
        ok.append(torch.equal(t2, y))
        print(ok)
        """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["True True", str([True] * 8)]


def test_batched_vmap_through_the_torch_aliases(tmp_path):
    # the rules reach functions read through the runner's torch aliases (cached or not), and
    # the aliases keep the original functions afterwards
    r = run(tmp_path, """
        import torch
        import torch.nn.functional as F
        from fiamma.func import _vmap
        x, w = torch.randn(4, 3), torch.randn(2, 3)
        e0 = torch.einsum
        f = lambda a: torch.einsum("i,ji->j", a, w) + F.gelu(a).sum() + torch.tanh(a).sum()
        got = torch.vmap(f)(x)
        dots = torch.vmap(torch.dot, in_dims=(0, None))(x, w[0])
        assert _vmap.STATS["batched"] == 2 and _vmap.STATS["fallback"] == 0, _vmap.STATS
        assert torch.einsum is e0 and not hasattr(torch.tanh, "_vmap_rule")
        assert torch.allclose(got, torch.stack([f(a) for a in x]))
        assert torch.allclose(dots, x @ w[0])
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_python2_iterator_next_is_not_called_a_gap(tmp_path):
    # old tutorials call iter(loader).next(); PyTorch's DataLoader iterators have no .next()
    r = run(tmp_path, """
        import torch
        from torch.utils.data import DataLoader
        it = iter(DataLoader(torch.arange(4), batch_size=2))
        print(next(it).tolist())
        it.next()
        """)
    assert r.returncode == 1
    assert r.stdout.splitlines() == ["[0, 1]"]
    assert "AttributeError" in r.stderr and "next(it)" in r.stderr
    assert "not a gap in fiamma" in r.stderr and "is a gap" not in r.stderr


def test_pytorch_module_paths_that_programs_import(tmp_path):
    """Module paths typed or older code imports from (the classes live elsewhere in fiamma)."""
    proc = run(tmp_path, """
        import torch
        from torch.types import Number, Device, _size
        from torch.storage import UntypedStorage, TypedStorage
        from torch.torch_version import TorchVersion
        from torch.nn.common_types import _size_2_t, _ratio_any_t
        from torch.autograd.grad_mode import no_grad, enable_grad
        from torch.distributions.studentT import StudentT
        from torch.nn.modules.flatten import Flatten, Unflatten
        from torch.nn.modules.channelshuffle import ChannelShuffle
        from torch.nn.modules.utils import _pair, consume_prefix_in_state_dict_if_present
        from torch.profiler.profiler import profile
        from torch.optim.adamw import AdamW
        from torch.optim.adagrad import Adagrad
        from torch.optim.rmsprop import RMSprop
        from torch.optim.sparse_adam import SparseAdam
        from torch.utils.dlpack import to_dlpack, from_dlpack
        assert TorchVersion(torch.__version__) >= (2, 1)
        assert isinstance(torch.ones(2).untyped_storage(), UntypedStorage)
        assert AdamW is torch.optim.AdamW and StudentT is torch.distributions.StudentT
        assert Flatten is torch.nn.Flatten and _pair(3) == (3, 3)
        with no_grad():
            assert not torch.is_grad_enabled()
        assert from_dlpack(to_dlpack(torch.arange(3))).tolist() == [0, 1, 2]
        m = torch.nn.LazyLinear(2)
        assert m(torch.ones(4, 5)).shape == (4, 2) and isinstance(m, torch.nn.Linear)
        print("paths ok")
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "paths ok" in proc.stdout
