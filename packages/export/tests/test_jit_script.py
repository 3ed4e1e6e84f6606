"""fiamma.jit.script: scripted modules and functions run their own Python and save (as a
trace of their last call, or of ``example_inputs``) into files ``fiamma.jit.load`` runs in a
fresh process without the model's code; what can't be saved is refused with a clear error."""
import io
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import fiamma
import fiamma.jit
import fiamma.nn as nn
from fiamma.nn import functional as F


def randn(*shape, seed=0):
    return fiamma.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x).softmax(-1)


class Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:          # a branch on a tensor value
            return x * 2
        return x - 1


def _roundtrip(m):
    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    return fiamma.jit.load(buf)


def test_scripted_module_runs_eagerly_and_shares_state():
    m = Net().eval()
    sm = fiamma.jit.script(m)
    assert isinstance(sm, fiamma.jit.ScriptModule) and isinstance(sm, Net)
    assert isinstance(sm, fiamma.jit.RecursiveScriptModule) and sm.original_name == "Net"
    assert type(m) is Net and not isinstance(m, fiamma.jit.ScriptModule)
    assert list(sm.state_dict()) == list(m.state_dict())
    assert sm.conv is m.conv and sm.fc.weight is m.fc.weight
    x = randn(2, 1, 6, 6)
    with fiamma.no_grad():
        np.testing.assert_array_equal(sm(x).numpy(), m(x).numpy())
        m.fc.bias.add_(1.0)                               # the scripted module sees it
        np.testing.assert_array_equal(sm(x).numpy(), m(x).numpy())
    sm.train()
    assert sm.training and not m.training                 # its own flag, as PyTorch's copy
    assert fiamma.jit.script(sm) is sm


def test_scripted_module_saves_its_last_call_and_loads_without_code(tmp_path):
    m = Net().eval()
    sm = fiamma.jit.script(m)
    with pytest.raises(RuntimeError, match="has not been called yet"):
        sm.save(str(tmp_path / "net.pt"))
    with fiamma.no_grad():
        sm(randn(2, 1, 6, 6))
    path = tmp_path / "net.pt"
    sm.save(str(path))
    assert "def forward" in sm.code and sm.graph.nodes
    x = randn(5, 1, 7, 7, seed=3)                        # another batch and image size
    with fiamma.no_grad():
        want = m(x).numpy()
    np.save(tmp_path / "x.npy", x.numpy())
    code = ("import sys, numpy as np, fiamma, fiamma.jit\n"
            "d = sys.argv[1]\n"
            "tm = fiamma.jit.load(d + '/net.pt')\n"
            "y = tm(fiamma.from_numpy(np.load(d + '/x.npy')))\n"
            "assert 'test_jit_script' not in sys.modules\n"
            "np.save(d + '/y.npy', y.numpy())\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-5, atol=1e-6)


def test_example_inputs_and_jit_save():
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh()).eval()
    sm = fiamma.jit.script(m, example_inputs=[(randn(2, 3),)])
    buf = io.BytesIO()
    fiamma.jit.save(sm, buf)                              # no call needed
    buf.seek(0)
    x = randn(6, 3, seed=1)
    with fiamma.no_grad():
        np.testing.assert_allclose(fiamma.jit.load(buf)(x).numpy(), m(x).numpy(), rtol=1e-6,
                                   atol=1e-6)
    with pytest.raises(TypeError, match="example_inputs should be"):
        fiamma.jit.script(m, example_inputs=3)


def test_value_dependent_branches_are_refused():
    sm = fiamma.jit.script(Branchy())
    assert sm(fiamma.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert sm(-fiamma.ones(3)).tolist() == [-2.0, -2.0, -2.0]
    with pytest.raises(RuntimeError, match="control flow depends on tensor values"):
        sm.save(io.BytesIO())
    with warnings.catch_warnings():
        warnings.simplefilter("error")                    # no warning leaks out of save
        with pytest.raises(RuntimeError):
            fiamma.jit.save(sm, io.BytesIO())


def test_scripted_functions():
    @fiamma.jit.script
    def f(x, y):
        return (x * y + 1).relu()

    assert isinstance(f, fiamma.jit.ScriptFunction) and f.__name__ == "f"
    a, b = randn(4), randn(4, seed=1)
    np.testing.assert_array_equal(f(a, b).numpy(), ((a * b + 1).relu()).numpy())
    tm = _roundtrip(f)
    a2, b2 = randn(7, seed=2), randn(7, seed=3)
    np.testing.assert_allclose(tm(a2, b2).numpy(), f(a2, b2).numpy(), rtol=1e-6)
    assert "relu" in f.code

    @fiamma.jit.script
    def g(x, k: int):
        return x * k

    assert g(fiamma.tensor([1.0, 2.0]), 3).tolist() == [3.0, 6.0]
    with pytest.raises(TypeError, match="saved as a trace of its last call.*int"):
        g.save(io.BytesIO())
    with pytest.raises(TypeError, match="function or a module"):
        fiamma.jit.script(3)


def test_scripted_module_inside_a_trace_is_traced_through():
    inner = fiamma.jit.script(nn.Linear(3, 3))

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x) * 2

    x = randn(2, 3)
    tm = fiamma.jit.trace(Outer().eval(), x)
    with fiamma.no_grad():
        np.testing.assert_allclose(tm(x).numpy(), (inner(x) * 2).numpy(), rtol=1e-6)


def test_load_explains_files_it_cannot_read(tmp_path):
    buf = io.BytesIO()
    fiamma.save({"w": fiamma.ones(2)}, buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="read it with fiamma.load"):
        fiamma.jit.load(buf)
    with pytest.raises(TypeError, match="expected a TracedModule or a scripted module"):
        fiamma.jit.save(nn.Linear(2, 2), io.BytesIO())


@pytest.mark.parity
def test_torchscript_archive_is_refused_and_outputs_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 4 * 4, 3)).eval()
    fnet = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 4 * 4, 3)).eval()
    fnet.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in tnet.state_dict().items()})
    ts = torch.jit.script(tnet)
    ts.save(str(tmp_path / "torch.pt"))
    with pytest.raises(RuntimeError, match="TorchScript archive written by PyTorch"):
        fiamma.jit.load(str(tmp_path / "torch.pt"))
    fs = fiamma.jit.script(fnet)
    x = np.random.default_rng(0).standard_normal((3, 1, 6, 6)).astype(np.float32)
    with fiamma.no_grad():
        fs(fiamma.tensor(x))
    fs.save(str(tmp_path / "fiamma.pt"))
    got = fiamma.jit.load(str(tmp_path / "fiamma.pt"))(fiamma.tensor(x)).numpy()
    want = torch.jit.load(str(tmp_path / "torch.pt"))(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gallery_scripted_predictor_flow(tmp_path):
    # torchvision's others/plot_scripted_tensor_transforms.py with random weights: script a
    # predictor (preset transforms + ResNet-18 + argmax), call it, save, load, same answers
    pytest.importorskip("fiamma.vision")
    from fiamma.vision.models import resnet18
    from fiamma.vision.transforms._presets import ImageClassification

    class Predictor(nn.Module):
        def __init__(self):
            super().__init__()
            self.resnet18 = resnet18(weights=None).eval()
            self.transforms = ImageClassification(crop_size=224, antialias=True)

        def forward(self, x):
            with fiamma.no_grad():
                x = self.transforms(x)
                return self.resnet18(x).argmax(dim=1)

    fiamma.manual_seed(0)
    predictor = Predictor()
    scripted = fiamma.jit.script(predictor).to("cpu")
    batch = fiamma.randint(0, 256, (2, 3, 250, 300), dtype=fiamma.uint8)
    res = predictor(batch)
    res_scripted = scripted(batch)
    assert (res == res_scripted).all()
    # another batch size: the forward's no_grad block is in the graph, not a constant of it
    batch3 = fiamma.randint(0, 256, (3, 3, 250, 300), dtype=fiamma.uint8)
    assert fiamma.equal(scripted(batch3), predictor(batch3))
    scripted.save(str(tmp_path / "scripted_predictor.pt"))
    dumped = fiamma.jit.load(str(tmp_path / "scripted_predictor.pt"))
    assert (dumped(batch) == res_scripted).all()


def test_script_function_checks_inferred_tensor_parameters():
    """TorchScript's rule: an unannotated parameter is a Tensor, so a number there raises
    PyTorch's error (the torch.compile tutorial's ``script_f2(x, 3)``); annotated ones take
    what they say; ``code`` shows the source where there is no tensor-only trace."""
    def f2(x, y):
        return x + y

    s = fiamma.jit.script(f2)
    assert s(fiamma.ones(2), fiamma.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match=r"f2\(\) Expected a value of type 'Tensor "
                                           r"\(inferred\)' for argument 'y' but instead found "
                                           r"type 'int'"):
        s(fiamma.ones(2), 3)
    with pytest.raises(RuntimeError, match="argument 'x'"):
        s(x=[1.0], y=fiamma.ones(1))

    @fiamma.jit.script
    def g(x, k: int, scale=2.0):
        return x * k * scale

    assert g(fiamma.ones(2), 3).tolist() == [6.0, 6.0]
    assert g.code.startswith("@fiamma.jit.script\ndef g(x, k: int, scale=2.0):")


def test_jit_annotations_module_gives_typing_names():
    # old model code (timm's densenet) writes ``from torch.jit.annotations import List``
    import typing

    from fiamma.jit.annotations import BroadcastingList2, Dict, List, Optional, Tuple

    assert (List, Tuple, Dict, Optional) == (typing.List, typing.Tuple, typing.Dict,
                                            typing.Optional)
    assert BroadcastingList2[int] == typing.List[int]
