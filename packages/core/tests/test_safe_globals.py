"""fiamma.save of arbitrary objects and fiamma.load of allowlisted classes
(``fiamma.serialization.add_safe_globals`` / ``safe_globals``: PyTorch 2.6's weights-only rules).
The whole-module tests with fiamma.nn live in packages/nn/tests/test_module_checkpoint.py."""

import enum
import io
import math
import pickle

import numpy as np
import pytest

import fiamma
from fiamma import serialization as S


class Point:
    def __init__(self, x, y, t=None):
        self.x, self.y, self.t = x, y, t


class Tracked:
    """Has __setstate__: the loader must call it (and nothing else of the class)."""

    calls = []

    def __init__(self, v):
        self.v = v

    def __getstate__(self):
        return {"v": self.v}

    def __setstate__(self, state):
        Tracked.calls.append(state)
        self.v = state["v"] * 10


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def roundtrip(obj, **kw):
    buf = io.BytesIO()
    fiamma.save(obj, buf)
    buf.seek(0)
    return fiamma.load(buf, **kw)


@pytest.fixture(autouse=True)
def _clean_allowlist():
    S.clear_safe_globals()
    yield
    S.clear_safe_globals()


def test_unlisted_class_is_refused_by_name_with_the_fix():
    obj = {"p": Point(1, 2, fiamma.arange(3))}
    with pytest.raises(pickle.UnpicklingError) as info:
        roundtrip(obj)
    msg = str(info.value)
    assert f"refusing to load global {__name__}.Point" in msg
    assert "fiamma.serialization.add_safe_globals([Point])" in msg
    assert "safe_globals([Point])" in msg
    assert "weights_only=False" in msg
    # a file the caller trusts loads as pickle would, as in PyTorch
    back = roundtrip(obj, weights_only=False)
    assert type(back["p"]) is Point and back["p"].x == 1 and back["p"].t.tolist() == [0, 1, 2]


def test_allowlisted_class_is_rebuilt():
    t = fiamma.arange(6).reshape(2, 3)
    p = Point(1, "two", t)
    with S.safe_globals([Point]):
        assert S.get_safe_globals() == [Point]
        back = roundtrip({"p": p, "again": p, "view": t[1]})
    assert S.get_safe_globals() == []  # the context manager restores the list
    q = back["p"]
    assert type(q) is Point and q.x == 1 and q.y == "two" and q.t.tolist() == t.tolist()
    assert back["again"] is q  # one object saved twice is one object again
    q.t[1, 0] = 100  # views share their storage after loading
    assert back["view"].tolist() == [100, 4, 5]


def test_setstate_slots_reduce_and_recursion():
    Tracked.calls.clear()
    S.add_safe_globals([Tracked, Slotted, Color])
    a = Point(1, 2)
    a.t = a  # an object that refers to itself
    S.add_safe_globals([Point])
    back = roundtrip([Tracked(4), Slotted(5, fiamma.ones(2)), Color.BLUE, a])
    assert back[0].v == 40 and Tracked.calls == [{"v": 4}]
    assert back[1].a == 5 and back[1].b.tolist() == [1.0, 1.0]
    assert back[2] is Color.BLUE  # an Enum is rebuilt by calling its (allowlisted) class
    assert back[3].t is back[3]


def test_functions_are_saved_by_name_and_only_referenced():
    S.add_safe_globals([math.sqrt, Point])
    back = roundtrip(Point(math.sqrt, 0))
    assert back.x is math.sqrt
    with pytest.raises(pickle.UnpicklingError, match="global math.sqrt"):
        S.clear_safe_globals()
        S.add_safe_globals([Point])
        roundtrip(Point(math.sqrt, 0))


def test_named_pairs_and_argument_checks():
    S.add_safe_globals([(Point, "legacy.module.Pt")])
    assert S.get_safe_globals() == [(Point, "legacy.module.Pt")]
    # a file naming the class by its old path finds it
    payload = (b"\x80\x02clegacy.module\nPt\n)\x81}X\x01\x00\x00\x00xK\x07sb.")
    buf = io.BytesIO()
    import zipfile
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a/data.pkl", payload)
    buf.seek(0)
    assert fiamma.load(buf).x == 7
    with pytest.raises(TypeError, match="expected a list"):
        S.add_safe_globals(Point)
    with pytest.raises(TypeError, match="module.name"):
        S.add_safe_globals([(Point, 3)])


def test_tensor_classes_stay_refused_even_when_allowlisted():
    # a Tensor made by NEWOBJ and given a state by BUILD could point anywhere: never
    S.add_safe_globals([fiamma.Tensor])
    payload = b"\x80\x02cfiamma._tensor\nTensor\n)\x81}X\x04\x00\x00\x00_ptrK\x00sb."
    buf = io.BytesIO()
    import zipfile
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a/data.pkl", payload)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="tensors and storages are rebuilt only"):
        fiamma.load(buf)


def test_unpicklable_objects_fail_at_save():
    with pytest.raises(TypeError, match="lambda"):
        fiamma.save(Point(lambda: 0, 1), io.BytesIO())


@pytest.mark.parity
def test_files_with_user_classes_load_in_torch_with_its_allowlist(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "p.pt"
    fiamma.save({"p": Point(3, [1, 2], fiamma.arange(4, dtype=fiamma.float32))}, path)
    with pytest.raises(pickle.UnpicklingError, match="Point"):
        torch.load(path)  # torch refuses it too, by default
    with torch.serialization.safe_globals([Point]):
        back = torch.load(path)
    assert type(back["p"]) is Point and back["p"].y == [1, 2]
    assert back["p"].t.tolist() == [0.0, 1.0, 2.0, 3.0]
    # and what torch writes for an allowlisted class loads here
    torch.save({"p": Point(5, 6, torch.ones(2))}, path)
    with S.safe_globals([Point]):
        q = fiamma.load(path)["p"]
    assert (q.x, q.y, q.t.tolist()) == (5, 6, [1.0, 1.0])


@pytest.mark.parity
def test_whole_torch_module_is_refused_by_name(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "m.pt"
    torch.save(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()), path)
    with pytest.raises(pickle.UnpicklingError,
                       match=r"global torch\.nn\.modules\.container\.Sequential.*"
                       r"state_dict"):
        fiamma.load(path)


def test_weights_only_false_loads_what_pickle_would():
    import argparse

    obj = {"a": np.arange(3), "s": np.float32(2.5), "ns": argparse.Namespace(lr=0.1),
           "t": fiamma.ones(2), "fn": math.sqrt, "uf": np.add}
    with pytest.raises(pickle.UnpicklingError, match="numpy"):
        roundtrip(obj)
    back = roundtrip(obj, weights_only=False)
    np.testing.assert_array_equal(back["a"], np.arange(3))
    assert back["s"] == np.float32(2.5) and back["ns"].lr == 0.1
    assert back["fn"] is math.sqrt and back["uf"] is np.add
    assert back["t"].tolist() == [1.0, 1.0]


def test_weights_only_false_names_a_global_that_cannot_be_imported():
    # a pickle naming a module that does not exist here (protocol 2: GLOBAL, EMPTY_TUPLE, NEWOBJ)
    data = b"\x80\x02cno_such_module_xyz\nThing\nq\x00)\x81q\x01."
    with pytest.raises(pickle.UnpicklingError, match=r"no_such_module_xyz\.Thing"):
        from fiamma._unpickler import RestrictedUnpickler
        RestrictedUnpickler(io.BytesIO(data), None, weights_only=False).load()


@pytest.mark.parity
def test_weights_only_false_reads_a_whole_torch_module_as_fiammas(tmp_path):
    torch = pytest.importorskip("torch")
    nn = pytest.importorskip("fiamma.nn")
    path = tmp_path / "m.pt"
    tm = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.BatchNorm1d(3))
    tm.train()(torch.randn(8, 2))  # running stats move
    torch.save(tm.eval(), path)
    m = fiamma.load(path, weights_only=False)
    assert type(m) is nn.Sequential and type(m[0]) is nn.Linear
    assert isinstance(m[0].weight, nn.Parameter) and m[0].weight.requires_grad
    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose(m(fiamma.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
