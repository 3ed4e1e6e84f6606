"""``Module._named_members`` with a member function, as PyTorch's signature (Pyro's
``PyroModule.named_pyro_params`` walks the modules with its own function)."""

from fiamma import nn


def test_named_members_with_a_function():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))

    def weights_only(mod):
        for name, p in mod._parameters.items():
            if name == "weight":
                yield name, p

    got = list(net._named_members(weights_only, prefix="net"))
    assert [n for n, _ in got] == ["net.0.weight", "net.2.weight"]
    assert got[0][1] is net[0].weight
    # not recursing: only the module's own members
    assert list(net[0]._named_members(weights_only, recurse=False))[0][0] == "weight"
    # a member reached twice is yielded once unless remove_duplicate=False
    shared = nn.Sequential(net[0], net[0])
    assert len(list(shared._named_members(weights_only))) == 1
    assert len(list(shared._named_members(weights_only, remove_duplicate=False))) == 2
