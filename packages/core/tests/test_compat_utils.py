"""fiamma.utils.checkpoint, fiamma.hub (+ utils.model_zoo) and fiamma.utils.data's paths."""

import hashlib
import os
import sys
import warnings

import numpy as np
import pytest

import fiamma

# ---- checkpoint ------------------------------------------------------------------------------


@pytest.fixture
def autograd():
    return pytest.importorskip("fiamma.autograd")


def make_fn(w, calls):
    def fn(x, scale=1.0):
        calls.append(1)
        h = (x @ w).tanh()
        mask = (fiamma.rand(h.shape) > 0.3).float()  # random: must replay identically
        return (h * mask * scale).sin()
    return fn


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_matches_plain_backward_and_recomputes_once(autograd, reentrant):
    rng = np.random.default_rng(1)
    x = fiamma.from_numpy(rng.standard_normal((5, 4))).requires_grad_()
    w = fiamma.from_numpy(rng.standard_normal((4, 3))).requires_grad_()
    calls = []
    fn = make_fn(w, calls)
    fiamma.manual_seed(7)
    ref = fn(x).sum()
    ref.backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    calls.clear()
    fiamma.manual_seed(7)
    out = fiamma.utils.checkpoint.checkpoint(fn, x, use_reentrant=reentrant).sum()
    after_forward = fiamma.rand(1).item()
    assert len(calls) == 1
    out.backward()
    assert len(calls) == 2  # recomputed once, in backward
    assert out.item() == ref.item()
    np.testing.assert_allclose(x.grad.numpy(), gx.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), gw.numpy(), rtol=1e-12)
    # the recomputation restored the generator it borrowed
    fiamma.manual_seed(7)
    fn(x)
    assert fiamma.rand(1).item() == after_forward


def test_non_reentrant_keeps_no_intermediates_and_handles_kwargs_and_grad(autograd):
    from fiamma.autograd.graph import saved_tensors_hooks

    w = fiamma.randn(4, 3, dtype=fiamma.float64, requires_grad=True)
    x = fiamma.randn(5, 4, dtype=fiamma.float64)  # no input wants gradients
    calls = []
    fn = make_fn(w, calls)
    fiamma.manual_seed(3)
    y = fiamma.utils.checkpoint.checkpoint(fn, x, use_reentrant=False, scale=2.0)
    assert y.requires_grad
    (gw,) = autograd.grad(y.sum(), w)
    fiamma.manual_seed(3)
    (ref,) = autograd.grad(fn(x, scale=2.0).sum(), w)
    np.testing.assert_allclose(gw.numpy(), ref.numpy(), rtol=1e-12)
    # nothing the forward computed is held by the graph: the saved tensors are handles
    seen = []
    with saved_tensors_hooks(lambda t: seen.append(t) or t, lambda t: t):
        fiamma.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)
    assert seen == []


def test_checkpoint_errors_and_warnings(autograd):
    x = fiamma.randn(3, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
        fiamma.utils.checkpoint.checkpoint(lambda t: t * 2, x)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
        y = fiamma.utils.checkpoint.checkpoint(lambda t: t * 2, x.detach(), use_reentrant=True)
    assert not y.requires_grad
    with pytest.raises(ValueError, match="unexpected keyword"):
        fiamma.utils.checkpoint.checkpoint(lambda t: t, x, use_reentrant=True, foo=1)
    with pytest.raises(ValueError, match="determinism_check"):
        fiamma.utils.checkpoint.checkpoint(lambda t: t, x, use_reentrant=False,
                                           determinism_check="nope")
    # a function that runs different ops the second time is caught, not silently wrong
    state = {"n": 0}

    def moody(t):
        state["n"] += 1
        return (t * t).sin() if state["n"] == 1 else t.sin()

    y = fiamma.utils.checkpoint.checkpoint(moody, x, use_reentrant=False)
    with pytest.raises(fiamma.utils.checkpoint.CheckpointError, match="recomputation"):
        y.sum().backward()


def test_checkpoint_sequential(autograd):
    rng = np.random.default_rng(2)
    ws = [fiamma.from_numpy(rng.standard_normal((3, 3))).requires_grad_() for _ in range(5)]
    fns = [lambda t, w=w: (t @ w).tanh() for w in ws]
    x = fiamma.from_numpy(rng.standard_normal((2, 3))).requires_grad_()
    ref = x
    for f in fns:
        ref = f(ref)
    ref.sum().backward()
    g = [w.grad.clone() for w in ws] + [x.grad.clone()]
    for t in ws + [x]:
        t.grad = None
    for segments in (1, 2, 3, 5):
        out = fiamma.utils.checkpoint.checkpoint_sequential(fns, segments, x,
                                                            use_reentrant=False)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
        out.sum().backward()
        for t, want in zip(ws + [x], g):
            np.testing.assert_allclose(t.grad.numpy(), want.numpy(), rtol=1e-10)
            t.grad = None


# ---- hub -------------------------------------------------------------------------------------


@pytest.fixture
def hubdir(tmp_path):
    saved = fiamma.hub._hub_dir
    fiamma.hub.set_dir(tmp_path / "hub")
    yield tmp_path
    fiamma.hub._hub_dir = saved


def test_get_dir_follows_fiamma_home(monkeypatch, tmp_path):
    saved = fiamma.hub._hub_dir
    fiamma.hub._hub_dir = None
    try:
        monkeypatch.setenv("FIAMMA_HOME", str(tmp_path / "home"))
        assert fiamma.hub.get_dir() == str(tmp_path / "home" / "hub")
        monkeypatch.delenv("FIAMMA_HOME")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert fiamma.hub.get_dir() == str(tmp_path / "xdg" / "fiamma" / "hub")
        monkeypatch.delenv("XDG_CACHE_HOME")
        assert fiamma.hub.get_dir() == os.path.expanduser("~/.cache/fiamma/hub")
    finally:
        fiamma.hub._hub_dir = saved


def test_hub_reexports_pytorchs_helper_names(monkeypatch, tmp_path):
    # timm imports HASH_REGEX, urlparse and _get_torch_home from torch.hub
    assert fiamma.hub.urlparse("https://host/a/resnet18-f37072fd.pth").netloc == "host"
    assert fiamma.hub.HASH_REGEX.search("resnet18-f37072fd.pth").group(1) == "f37072fd"
    monkeypatch.setenv("FIAMMA_HOME", str(tmp_path / "home"))
    assert fiamma.hub._get_torch_home() == str(tmp_path / "home")


def test_load_state_dict_from_file_url_caches_and_checks_hash(hubdir):
    src = hubdir / "weights.pth"
    fiamma.save({"w": fiamma.arange(4.0), "b": fiamma.ones(2)}, str(src))
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    named = hubdir / f"tiny-{digest[:8]}.pth"
    named.write_bytes(src.read_bytes())
    sd = fiamma.hub.load_state_dict_from_url(named.as_uri(), check_hash=True, progress=False)
    assert sd["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    cached = hubdir / "hub" / "checkpoints" / named.name
    assert cached.is_file()
    named.unlink()  # the cached copy answers from now on
    sd = fiamma.hub.load_state_dict_from_url(named.as_uri(), map_location="cpu")
    assert sd["b"].tolist() == [1.0, 1.0]
    bad = hubdir / "tiny-deadbeef.pth"
    bad.write_bytes(src.read_bytes())
    with pytest.raises(RuntimeError, match='invalid hash value \\(expected "deadbeef"'):
        fiamma.hub.load_state_dict_from_url(bad.as_uri(), check_hash=True, progress=False)
    assert not (hubdir / "hub" / "checkpoints" / bad.name).exists()
    assert [p for p in (hubdir / "hub" / "checkpoints").iterdir()
            if p.name.startswith(".download")] == []
    other = hubdir / "elsewhere"
    sd = fiamma.utils.model_zoo.load_url(bad.as_uri(), model_dir=str(other),
                                         file_name="renamed.pth", progress=False)
    assert (other / "renamed.pth").is_file() and sd["w"].shape == (4,)


def test_download_errors_are_clear(hubdir):
    with pytest.raises(fiamma.hub.DownloadError, match="cannot download") as e:
        fiamma.hub.load_state_dict_from_url("http://127.0.0.1:9/nothing-here.pth",
                                            progress=False)
    assert isinstance(e.value, OSError) and "nothing-here.pth" in str(e.value)
    with pytest.raises(fiamma.hub.DownloadError, match="cannot download"):
        fiamma.hub.load_state_dict_from_url((hubdir / "missing.pth").as_uri(), progress=False)
    with pytest.raises(ValueError, match="file_name"):
        fiamma.hub.load_state_dict_from_url("http://127.0.0.1:9/", progress=False)


# ---- utils.data --------------------------------------------------------------------------


def test_utils_data_is_fiamma_data():
    data = pytest.importorskip("fiamma.data")
    import fiamma.utils.data as ud
    import fiamma.utils.data.dataloader as dl
    import fiamma.utils.data.dataset as ds
    import fiamma.utils.data.distributed as dist
    import fiamma.utils.data.sampler as sm

    assert ud.DataLoader is data.DataLoader and ud.TensorDataset is data.TensorDataset
    assert dl is data.dataloader and ds is data.dataset and sm is data.sampler
    assert dist.DistributedSampler is data.DistributedSampler
    assert set(data.__all__) <= set(dir(ud)) and ud.__all__ == data.__all__
    assert fiamma.utils.data is ud
    with pytest.raises(AttributeError, match="nor has fiamma.data"):
        ud.no_such_name


def test_utils_data_without_fiamma_data_names_the_distribution():
    import subprocess

    code = ("import sys; sys.modules['fiamma.data'] = None\n"
            "import fiamma\n"
            "try:\n    import fiamma.utils.data\n"
            "except ModuleNotFoundError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "pip install fiamma-data" in r.stdout


def test_no_warning_on_import_of_utils():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import fiamma.hub  # noqa: F401
        import fiamma.utils.checkpoint  # noqa: F401


def test_swap_tensors_plain():
    a, b = fiamma.arange(2), fiamma.arange(3.0).reshape(3, 1)
    ida, idb = id(a), id(b)
    fiamma.utils.swap_tensors(a, b)
    assert id(a) == ida and id(b) == idb
    assert a.tolist() == [[0.0], [1.0], [2.0]] and a.dtype == fiamma.float32
    assert b.tolist() == [0, 1] and b.dtype == fiamma.int64
    (a + 1).sum()  # usable afterwards: shape, strides and data moved together


def test_swap_tensors_class_dict_and_refusals():
    import weakref

    class Sub(fiamma.Tensor):
        pass

    s = fiamma.ones(2).as_subclass(Sub)
    s.tag = "sub"
    t = fiamma.zeros(3).as_subclass(Sub)
    t.tag = "other"
    fiamma.utils.swap_tensors(s, t)
    assert s.tag == "other" and s.shape == (3,) and t.tag == "sub" and t.tolist() == [1.0, 1.0]
    u = fiamma.ones(1)
    keep = weakref.ref(u)
    with pytest.raises(RuntimeError, match="Cannot swap t1 because it has weakref"):
        fiamma.utils.swap_tensors(u, fiamma.ones(1))
    assert keep() is u
    with pytest.raises(TypeError, match="swap_tensors: expected two Tensors"):
        fiamma.utils.swap_tensors(fiamma.ones(1), [1.0])


def test_swap_tensors_saved_for_backward_is_detected():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.ones(3, requires_grad=True)
    y = x * 2          # not a leaf: no AccumulateGrad weakref
    z = (y * y).sum()  # saves y
    fiamma.utils.swap_tensors(y, fiamma.full((3,), 5.0))
    with pytest.raises(RuntimeError, match="inplace|in-place|modified"):
        z.backward()


def test_device_context_manager():
    with fiamma.device("cpu") as d:
        assert d == fiamma.device("cpu") and fiamma.ones(1).device.type == "cpu"
    with fiamma.device("meta"):
        assert fiamma.ones(1).device.type == "meta"
        with fiamma.device("cpu"):
            assert fiamma.ones(1).device.type == "cpu"
        assert fiamma.get_default_device().type == "meta"
    assert fiamma.get_default_device().type == "cpu"
