"""The backend contract (fiamma._backend.contract): the CPU backend implements every primitive
with the documented parameters, its codes agree with the C library, and only the CPU backend
calls the C library."""

import inspect
import pathlib
import re

import pytest
from conftest import c_kernels_only

import fiamma
from fiamma import _backend
from fiamma._backend import codes, contract, cpu

CORE = pathlib.Path(fiamma.__file__).parent


def _params(fn, drop_self):
    ps = list(inspect.signature(fn).parameters)
    return ps[1:] if drop_self else ps


@pytest.mark.parametrize("family", sorted(contract.FAMILIES))
def test_cpu_backend_implements_each_primitive(family):
    for name in contract.FAMILIES[family]:
        spec = getattr(contract.Backend, name, None)
        assert spec is not None, f"{family}.{name} is listed but not documented in Backend"
        assert spec.__doc__ and len(spec.__doc__) > 40, f"{name}: document its semantics"
        impl = getattr(cpu, name, None)
        assert callable(impl), f"the CPU backend has no primitive {name}"
        assert _params(impl, False) == _params(spec, True), name


def test_every_documented_primitive_is_in_a_family():
    listed = {n for names in contract.FAMILIES.values() for n in names}
    documented = {n for n, v in vars(contract.Backend).items()
                  if callable(v) and not n.startswith("_")}
    assert documented == listed


def test_codes_match_the_c_library():
    from fiamma._lib import lib

    names = [k for k in vars(codes) if k.isupper()]
    assert len(names) > 150
    for k in names:
        assert getattr(codes, k) == getattr(lib, "FM_" + k), k


def test_status_codes_become_exceptions():
    with pytest.raises(IndexError, match="myop: index out of range: at 3"):
        _backend.check(codes.ERR_INDEX, "myop", "at 3")
    with pytest.raises(TypeError, match="myop: unsupported dtype"):
        _backend.check(codes.ERR_DTYPE, "myop")
    _backend.check(codes.OK, "myop")


def test_only_the_cpu_backend_imports_the_c_library():
    users = set()
    for path in CORE.rglob("*.py"):
        rel = path.relative_to(CORE).as_posix()
        if re.search(r"_lib\b", path.read_text()):
            users.add(rel)
    backend = {u for u in users if u.startswith("_backend/cpu/") or u == "_lib.py"}
    assert users - backend == set()


# FIAMMA_CPU_BACKEND=xp puts the NumPy backend behind the CPU device on purpose
@c_kernels_only
def test_a_tensor_names_its_backend():
    x = fiamma.ones(3)
    assert x._storage.backend is cpu
    assert _backend.backend_for(x.device) is cpu
    assert fiamma.from_numpy(x.numpy())._storage.backend is cpu
    with pytest.raises(RuntimeError, match="cuda"):
        _backend.backend_for(fiamma.device("cuda"))
    assert _backend.backend_for(fiamma.device("meta")).name == "meta"
