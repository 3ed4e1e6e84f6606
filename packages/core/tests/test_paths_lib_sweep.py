"""PyTorch paths that libraries built on PyTorch reach for at import time (MONAI, Captum, skorch):
``torch.serialization.DEFAULT_PROTOCOL``, ``torch.backends.__allow_nonbracketed_mutation``,
``torch.utils.hooks`` as an attribute of ``torch.utils`` after ``import torch``."""

import pickle

import fiamma
import fiamma.backends
import fiamma.serialization


def test_serialization_default_protocol(tmp_path):
    assert fiamma.serialization.DEFAULT_PROTOCOL == 2
    assert "DEFAULT_PROTOCOL" in fiamma.serialization.__all__
    # save's default is that protocol: the data.pkl record starts with PROTO 2
    p = tmp_path / "x.pt"
    fiamma.save({"a": fiamma.ones(2)}, p)
    import zipfile

    with zipfile.ZipFile(p) as z:
        name = next(n for n in z.namelist() if n.endswith("data.pkl"))
        head = z.read(name)[:2]
    assert head == bytes([pickle.PROTO[0], 2])


def test_backends_nonbracketed_mutation_context():
    allow = getattr(fiamma.backends, "__allow_nonbracketed_mutation")
    before = fiamma.backends.cudnn.deterministic
    try:
        with allow():
            fiamma.backends.cudnn.deterministic = True
        assert fiamma.backends.cudnn.deterministic is True
    finally:
        fiamma.backends.cudnn.deterministic = before
    assert fiamma.backends.flags_frozen() is False


def test_utils_hooks_is_an_attribute():
    import fiamma.utils

    assert fiamma.utils.hooks.RemovableHandle.__name__ == "RemovableHandle"


class _Meta(fiamma.Tensor):
    pass


def test_tensor_subclass_pickles_as_its_class_with_attributes():
    t = fiamma.arange(4.0).as_subclass(_Meta)
    t.meta = {"name": "a", "affine": fiamma.eye(2)}
    u = pickle.loads(pickle.dumps(t))
    assert type(u) is _Meta and u.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert u.meta["name"] == "a" and u.meta["affine"].tolist() == [[1.0, 0.0], [0.0, 1.0]]
    plain = pickle.loads(pickle.dumps(fiamma.ones(2)))
    assert type(plain) is fiamma.Tensor and not plain.__dict__


def test_tensor_subclass_crosses_processes_with_attributes():
    from multiprocessing.reduction import ForkingPickler

    import fiamma.multiprocessing  # noqa: F401 (registers the shared-memory reducers)

    t = fiamma.arange(3.0).as_subclass(_Meta)
    t.meta = {"k": 1}
    u = pickle.loads(ForkingPickler.dumps(t))
    assert type(u) is _Meta and u.meta == {"k": 1} and u.tolist() == [0.0, 1.0, 2.0]


def test_save_accepts_torch_save_keywords(tmp_path):
    p = tmp_path / "k.pt"
    fiamma.save({"a": fiamma.ones(2)}, p, pickle_module=pickle, pickle_protocol=2,
                _use_new_zipfile_serialization=True, _disable_byteorder_record=False)
    assert fiamma.load(p)["a"].tolist() == [1.0, 1.0]
    import json

    import pytest

    with pytest.raises(ValueError, match="fiamma.save: pickle_module must be the standard"):
        fiamma.save({}, tmp_path / "j.pt", pickle_module=json)
    with pytest.raises(ValueError, match="_use_new_zipfile_serialization=False"):
        fiamma.save({}, tmp_path / "l.pt", _use_new_zipfile_serialization=False)


def test_tensor_subclass_saves_and_loads_as_its_class(tmp_path):
    import pytest

    t = fiamma.arange(4.0).as_subclass(_Meta)
    t.meta = {"k": 1}
    p = tmp_path / "s.pt"
    fiamma.save({"t": t, "plain": fiamma.ones(1)}, p)
    # weights-only loading refuses a class the user has not allowlisted ...
    with pytest.raises(pickle.UnpicklingError, match="_Meta"):
        fiamma.load(p)
    # ... and rebuilds it, with its attributes, when allowlisted (or weights_only=False)
    with fiamma.serialization.safe_globals([_Meta]):
        got = fiamma.load(p)
    u = got["t"]
    assert type(u) is _Meta and u.meta == {"k": 1} and u.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert type(got["plain"]) is fiamma.Tensor
    u = fiamma.load(p, weights_only=False)["t"]
    assert type(u) is _Meta and u.meta == {"k": 1}
