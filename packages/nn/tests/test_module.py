"""Module: registration, traversal, state dicts, hooks, modes, conversion, printing."""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import fiamma
from fiamma import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("running", fiamma.zeros(3))
        self.register_buffer("scratch", fiamma.ones(2), persistent=False)
        self.scale = nn.Parameter(fiamma.ones(()))

    def forward(self, x):
        return self.fc(x) * self.scale + self.running


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Block()
        self.seq = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
        self.shared = self.seq[0]  # the same module twice

    def forward(self, x):
        return self.seq(self.a(x))


def test_registration_and_traversal():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["a.scale", "a.fc.weight", "a.fc.bias", "seq.0.weight", "seq.0.bias",
                     "seq.2.weight", "seq.2.bias"]
    assert [n for n, _ in net.named_buffers()] == ["a.running", "a.scratch"]
    assert [n for n, _ in net.named_modules()] == ["", "a", "a.fc", "seq", "seq.0", "seq.1",
                                                   "seq.2"]
    assert [n for n, _ in net.named_children()] == ["a", "seq", "shared"]
    assert len(list(net.parameters())) == 7
    assert all(p.requires_grad and isinstance(p, nn.Parameter) for p in net.parameters())
    assert net.get_submodule("seq.2") is net.seq[2]
    assert net.get_parameter("a.fc.bias") is net.a.fc.bias
    assert net.get_buffer("a.running") is net.a.running
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        net.get_submodule("a.nope")


def test_setattr_rules():
    m = nn.Module()
    m.w = nn.Parameter(fiamma.zeros(2))
    assert "w" in m._parameters
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'w'"):
        m.w = fiamma.zeros(2)
    m.w = None
    assert m._parameters["w"] is None and m.w is None
    m.register_buffer("b", fiamma.zeros(1))
    m.b = fiamma.ones(1)
    assert m._buffers["b"].item() == 1.0
    with pytest.raises(TypeError, match="as buffer"):
        m.b = 3
    m.child = nn.Linear(1, 1)
    with pytest.raises(TypeError, match="as child module"):
        m.child = 5
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("child", fiamma.zeros(1))
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(AttributeError, match="has no attribute 'zzz'"):
        m.zzz
    del m.child
    assert "child" not in m._modules
    m.buf = nn.Buffer(fiamma.ones(2), persistent=False)
    assert "buf" in m._buffers and "buf" in m._non_persistent_buffers_set
    assert type(m.buf) is fiamma.Tensor


def test_assigning_before_init_is_an_error():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(fiamma.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_state_dict_and_load():
    net = Net()
    sd = net.state_dict()
    # PyTorch's order: a module's own parameters and buffers, then its children; a module
    # reachable under two names is saved under both
    assert list(sd) == ["a.scale", "a.running", "a.fc.weight", "a.fc.bias", "seq.0.weight",
                        "seq.0.bias", "seq.2.weight", "seq.2.bias", "shared.weight",
                        "shared.bias"]
    assert all(not v.requires_grad for v in sd.values())
    assert sd._metadata[""] == {"version": 1} and "a.fc" in sd._metadata
    other = Net()
    res = other.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    for k in sd:
        np.testing.assert_array_equal(other.state_dict()[k].numpy(), sd[k].numpy())
    # non-strict: missing and unexpected keys reported, not raised
    partial = OrderedDict((k, v) for k, v in sd.items() if not k.startswith("seq.2"))
    partial["extra.weight"] = fiamma.zeros(1)
    res = other.load_state_dict(partial, strict=False)
    assert res.missing_keys == ["seq.2.weight", "seq.2.bias"]  # reported even when not strict
    assert res.unexpected_keys == ["extra.weight"]
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "seq.2.weight"'):
        other.load_state_dict(partial)
    bad = dict(sd)
    bad["a.fc.weight"] = fiamma.zeros(5, 5)
    with pytest.raises(RuntimeError, match="size mismatch for a.fc.weight"):
        other.load_state_dict(bad)
    # assign=True takes the tensors themselves
    fresh = Net()
    fresh.load_state_dict(sd, assign=True)
    assert fresh.a.fc.weight.data_ptr() == sd["a.fc.weight"].data_ptr()
    assert isinstance(fresh.a.fc.weight, nn.Parameter) and fresh.a.fc.weight.requires_grad


def test_load_state_dict_copies_in_place_and_keeps_optimizer_references():
    net = Net()
    w = net.a.fc.weight
    net.load_state_dict(Net().state_dict())
    assert net.a.fc.weight is w


def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
    out = lin(fiamma.ones(3, 2))
    np.testing.assert_allclose(out.detach().numpy(), (lin.bias.detach() + 1).numpy()[None]
                               .repeat(3, 0), rtol=1e-6)
    assert calls == [(3, 2)]
    h1.remove()
    h2.remove()
    assert not lin._forward_hooks and not lin._forward_pre_hooks
    seen = []
    hk = lin.register_forward_hook(lambda m, a, k, o: seen.append(sorted(k)), with_kwargs=True)
    lin(input=fiamma.ones(1, 2))
    assert seen == [["input"]]
    hk.remove()
    g = nn.register_module_forward_hook(lambda m, a, o: seen.append(type(m).__name__))
    nn.Sequential(nn.ReLU())(fiamma.ones(1))
    g.remove()
    assert seen[-2:] == ["ReLU", "Sequential"]


def test_always_call_hook_runs_when_forward_raises():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    seen = []
    m.register_forward_hook(lambda mod, a, out: seen.append(out), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m(1)
    assert seen == [None]


def test_train_eval_requires_grad_zero_grad_apply():
    net = Net()
    assert net.training and net.eval() is net and not net.seq[1].training
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="boolean"):
        net.train(1)
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_(True)
    for p in net.parameters():
        p.grad = fiamma.ones_like(p)
    net.zero_grad(set_to_none=False)
    assert all(p.grad.abs().sum().item() == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    visited = []
    net.apply(lambda m: visited.append(type(m).__name__))
    assert visited[-1] == "Net" and visited[0] == "Linear"


def test_to_dtype_keeps_parameter_objects():
    net = Net()
    w = net.a.fc.weight
    net.double()
    assert net.a.fc.weight is w and w.dtype is fiamma.float64
    assert net.a.running.dtype is fiamma.float64 and isinstance(w, nn.Parameter)
    net.to(fiamma.float32)
    assert w.dtype is fiamma.float32
    with pytest.raises(TypeError, match="floating point"):
        net.to(fiamma.int64)


def test_to_takes_pytorchs_other_argument_forms():
    # diffusers' DiffusionPipeline.to(dtype) calls module.to(None, dtype) on each part
    net = Net()
    w = net.a.fc.weight
    assert net.to(None, fiamma.bfloat16) is net and w.dtype is fiamma.bfloat16
    assert net.to(None) is net and w.dtype is fiamma.bfloat16  # no device, no dtype: unchanged
    net.to("cpu", fiamma.float32, False)  # a trailing non_blocking flag
    assert w.dtype is fiamma.float32 and w.device == fiamma.device("cpu")
    lin = nn.Linear(2, 2).to(fiamma.complex64)  # complex dtypes are accepted, as in PyTorch
    assert lin.weight.dtype is fiamma.complex64
    assert lin.to(fiamma.complex128).weight.dtype is fiamma.complex128
    with pytest.raises(TypeError, match="invalid combination of arguments: 1.5"):
        net.to(1.5)
    assert net.to("cpu", None) is net and w.dtype is fiamma.float32
    with pytest.raises(TypeError, match="invalid combination of arguments: None"):
        net.to("cpu", fiamma.float32, None)


def test_repr_matches_pytorch_layout():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(inplace=True),
                        nn.Sequential(nn.Flatten(), nn.Identity()))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU(inplace=True)\n"
        "  (2): Sequential(\n"
        "    (0): Flatten(start_dim=1, end_dim=-1)\n"
        "    (1): Identity()\n"
        "  )\n"
        ")")


def test_pickle_and_deepcopy():
    net = Net()
    for clone in (pickle.loads(pickle.dumps(net)), copy.deepcopy(net)):
        assert clone.a.fc.weight is not net.a.fc.weight
        assert isinstance(clone.a.fc.weight, nn.Parameter) and clone.a.fc.weight.requires_grad
        np.testing.assert_array_equal(clone.a.fc.weight.detach().numpy(),
                                      net.a.fc.weight.detach().numpy())
        assert clone.shared is clone.seq[0]  # sharing preserved
        x = fiamma.randn(2, 4)
        np.testing.assert_allclose(clone(x).detach().numpy(), net(x).detach().numpy())


def test_containers():
    seq = nn.Sequential(OrderedDict(first=nn.Linear(1, 2), act=nn.ReLU()))
    assert list(seq._modules) == ["first", "act"] and isinstance(seq[-1], nn.ReLU)
    assert isinstance(seq[:1], nn.Sequential) and len(seq[:1]) == 1
    s2 = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
    del s2[0]
    assert list(s2._modules) == ["0", "1"] and isinstance(s2[0], nn.Tanh)
    s2.insert(0, nn.ReLU())
    s2.append(nn.Identity())
    assert [type(m).__name__ for m in s2] == ["ReLU", "Tanh", "Sigmoid", "Identity"]
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml.append(nn.ReLU())
    assert isinstance(ml[-1], nn.ReLU)
    md = nn.ModuleDict({"x": nn.Linear(1, 1)})
    md["y"] = nn.ReLU()
    assert list(md.keys()) == ["x", "y"] and "x" in md
    pl = nn.ParameterList([fiamma.zeros(2), nn.Parameter(fiamma.ones(1))])
    assert all(isinstance(p, nn.Parameter) for p in pl) and len(pl) == 2
    pd = nn.ParameterDict({"a": fiamma.zeros(1)})
    assert isinstance(pd["a"], nn.Parameter)
    holder = nn.Module()
    holder.pl, holder.pd = pl, pd
    assert [n for n, _ in holder.named_parameters()] == ["pl.0", "pl.1", "pd.a"]
    with pytest.raises(IndexError):
        ml[10]


def test_parameter():
    p = nn.Parameter(fiamma.arange(3.0))
    assert p.requires_grad and p.is_leaf and repr(p).startswith("Parameter containing:")
    q = nn.Parameter(fiamma.zeros(2), requires_grad=False)
    assert not q.requires_grad
    assert type(p * 2) is fiamma.Tensor
    with pytest.raises(TypeError, match="must be a Tensor"):
        nn.Parameter([1.0])


def test_load_from_state_dict_override_with_pytorchs_signature():
    # torchmetrics' Metric and other libraries override it with PyTorch's seven arguments;
    # load_state_dict(assign=True) reaches them through local_metadata, as in PyTorch
    seen = []

    class Custom(nn.Linear):
        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                  missing_keys, unexpected_keys, error_msgs):
            seen.append(local_metadata.get("assign_to_params_buffers", False))
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                          missing_keys, unexpected_keys, error_msgs)

    src = nn.Linear(2, 3)
    m = nn.Sequential(Custom(2, 3))
    m.load_state_dict({"0." + k: v for k, v in src.state_dict().items()})
    assert fiamma.equal(m[0].weight, src.weight) and m[0].weight is not src.weight
    m.load_state_dict({"0." + k: v for k, v in src.state_dict().items()}, assign=True)
    assert seen == [False, True]
    assert m[0].weight.data_ptr() == src.weight.data_ptr()  # assigned, not copied


def test_op_kept_as_class_attribute_does_not_bind():
    # PyTorch's ops are C builtins, which do not bind as methods: ``conv = torch.conv2d`` in a
    # class body is called as ``self.conv(x, weight=w)`` (kornia's HausdorffERLoss)
    import fiamma.nn.functional as F

    class Erode(nn.Module):
        conv = fiamma.conv2d
        act = F.relu
        norm = fiamma.linalg.vector_norm

        def forward(self, x, w):
            return self.norm(self.act(self.conv(x, weight=w, padding=1) - 4))

        def conv2d(self, x):  # a method of its own, even if named like an op, stays a method
            return x + 1

    m = Erode()
    x, w = fiamma.ones(1, 1, 3, 3), fiamma.ones(1, 1, 3, 3)
    assert m(x, w).item() == pytest.approx(41 ** 0.5)  # corners 0, edges 2, centre 5
    assert Erode.conv is fiamma.conv2d and m.conv is fiamma.conv2d
    assert m.conv2d(fiamma.zeros(1)).item() == 1.0

    class Sub(Erode):  # inherited: still static
        pass

    assert Sub()(x, w).item() == pytest.approx(m(x, w).item())
