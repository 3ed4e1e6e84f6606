"""fiamma.vision.models.feature_extraction: outputs equal the submodules' own outputs, the pass
stops after the last needed node, train/eval node sets, shared parameters, bad names; parity
with torchvision's create_feature_extractor (marked)."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.vision import models
from fiamma.vision.models.feature_extraction import create_feature_extractor, get_graph_node_names


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 5)
        self.b = nn.Sequential(nn.ReLU(), nn.Linear(5, 3))
        self.drop = nn.Dropout(0.5)
        self.c = nn.Linear(3, 2)
        self.scale = nn.Parameter(fiamma.ones(1) * 2)
        self.calls = []

    def forward(self, x):
        self.calls.append("forward")
        h = self.a(x)
        h = self.b(h)
        if self.training:
            h = self.drop(h)
        return self.c(h) * self.scale


def test_outputs_are_the_submodules_outputs_and_keys_follow_the_dict():
    fiamma.manual_seed(0)
    net = Net().eval()
    x = fiamma.randn(6, 4)
    fe = create_feature_extractor(net, {"b.1": "mid", "a": "first", "x": "input", "c": "out"})
    out = fe(x)
    assert list(out) == ["mid", "first", "input", "out"]
    a = net.a(x)
    mid = net.b(a)
    np.testing.assert_allclose(out["first"].detach().numpy(), a.detach().numpy())
    np.testing.assert_allclose(out["mid"].detach().numpy(), mid.detach().numpy())
    np.testing.assert_allclose(out["out"].detach().numpy(), net.c(mid).detach().numpy())
    assert out["input"] is x
    # a list: names are the keys
    assert list(create_feature_extractor(net, ["b.0"])(x)) == ["b.0"]


def test_the_pass_stops_after_the_last_needed_node():
    net = Net().eval()
    seen = []
    net.c.register_forward_hook(lambda m, a, o: seen.append("c"))
    fe = create_feature_extractor(net, ["a"])
    fe(fiamma.randn(2, 4))
    assert seen == []
    net(fiamma.randn(2, 4))  # the plain model is untouched by the extractor's hooks
    assert seen == ["c"]


def test_train_and_eval_nodes_and_shared_parameters():
    net = Net()
    fe = create_feature_extractor(net, train_return_nodes=["drop"], eval_return_nodes=["c"])
    assert fe.training and list(fe(fiamma.randn(2, 4))) == ["drop"]
    fe.eval()
    assert not net.training and list(fe(fiamma.randn(2, 4))) == ["c"]
    assert list(fe.state_dict()) == list(net.state_dict())
    assert [id(p) for p in fe.parameters()] == [id(p) for p in net.parameters()]
    fe.double()
    assert net.a.weight.dtype == fiamma.float64 and net.scale.dtype == fiamma.float64


def test_gradients_flow_through_features():
    pytest.importorskip("fiamma.autograd")
    net = Net().eval()
    fe = create_feature_extractor(net, ["b"])
    fe(fiamma.randn(3, 4))["b"].sum().backward()
    assert net.a.weight.grad is not None and net.c.weight.grad is None


def test_node_names_and_bad_arguments():
    net = Net()
    train, ev = get_graph_node_names(net)
    assert train == ev == ["x", "a", "b", "b.0", "b.1", "drop", "c"]
    with pytest.raises(ValueError, match="node 'flatten' is not present"):
        create_feature_extractor(net, ["flatten"])
    with pytest.raises(ValueError, match="either return_nodes, or both"):
        create_feature_extractor(net, train_return_nodes=["a"])
    with pytest.raises(ValueError, match="not both"):
        create_feature_extractor(net, ["a"], eval_return_nodes=["a"])
    with pytest.raises(ValueError, match="torch.fx"):
        create_feature_extractor(net, ["a"], tracer_kwargs={"leaf_modules": []})
    with pytest.raises(TypeError, match="nn.Module"):
        create_feature_extractor(lambda x: x, ["a"])
    with pytest.raises(ValueError, match="empty"):
        create_feature_extractor(net, [])
    with pytest.raises(TypeError, match="first positional"):
        create_feature_extractor(net, ["x"])()


def test_resnet_backbone_features():
    m = models.resnet18().eval()
    fe = create_feature_extractor(m, {"layer1": "c2", "layer2": "c3", "layer4": "c5"})
    out = fe(fiamma.rand(1, 3, 64, 64))
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "c2": (1, 64, 16, 16), "c3": (1, 128, 8, 8), "c5": (1, 512, 2, 2)}


@pytest.mark.parity
def test_parity_torchvision():
    torch = pytest.importorskip("torch")
    tv = pytest.importorskip("torchvision")
    tfe = pytest.importorskip("torchvision.models.feature_extraction")
    torch.manual_seed(0)
    tm = tv.models.resnet18().eval()
    m = models.resnet18().eval()
    m.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    nodes = {"layer1": "a", "layer3.1": "b", "avgpool": "c"}
    x = np.random.default_rng(0).random((2, 3, 64, 64), dtype=np.float32)
    want = tfe.create_feature_extractor(tm, nodes)(torch.tensor(x))
    got = create_feature_extractor(m, nodes)(fiamma.tensor(x))
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_allclose(got[k].detach().numpy(), want[k].detach().numpy(),
                                   rtol=1e-4, atol=1e-5)
    tnames = set(tfe.get_graph_node_names(tm)[0])
    assert set(get_graph_node_names(m)[0]) - {"layer1", "layer2", "layer3", "layer4"} - {
        f"layer{i}.{j}" for i in range(1, 5) for j in range(2)} - {
        f"layer{i}.0.downsample" for i in range(2, 5)} <= tnames
