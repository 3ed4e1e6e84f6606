"""``torch``, ``torchvision``, ``torchaudio`` and ``functorch`` as names of fiamma's modules (for
``fiamma.run``).

:func:`install` puts a finder first on ``sys.meta_path`` that answers every import of
``torch``, ``torchvision``, ``torchaudio``, ``functorch`` and their submodules with fiamma's
module at the same path (``torch.nn.functional`` -> ``fiamma.nn.functional``,
``torchvision.transforms`` -> ``fiamma.vision.transforms``, ``functorch`` ->
``fiamma.functorch``): the very module objects, so ``torch.Tensor is fiamma.Tensor`` and
``torch.nn is fiamma.nn``. Only the top-level names are thin modules of their own, which
forward every attribute to fiamma's module and answer ``__version__`` with the version of the
library whose API fiamma follows (so a script's ``torch.__version__ >= "2.0"`` checks behave);
``torch.version`` tells the same and ``torch.version.fiamma`` gives fiamma's own.

A name fiamma does not have fails with :class:`FiammaModuleNotFoundError` or
:class:`FiammaAttributeError`, subclasses of the built-in errors (a script's own
``try: import torch.onnx / except ImportError`` still works) whose message names the PyTorch
name, fiamma's counterpart and that it is a gap in fiamma.

Package metadata: libraries check PyTorch's version with ``importlib.metadata.version("torch")``
(Hugging Face ``transformers`` counts torch as missing without it). Where no real ``torch``
(``torchvision``, ``torchaudio``) distribution is installed, :func:`install` makes
``importlib.metadata`` find one that describes fiamma's stand-in: the name, the version fiamma
follows (:data:`TORCH_VERSION` ...), a summary saying it is fiamma, and no files. A real
distribution, where installed, is found as before (its metadata, not fiamma's, answers).

Child processes: ``fork`` children inherit the finder. For ``spawn`` and ``forkserver``, the
data a parent sends a new child before the child imports the main script
(``multiprocessing.spawn.get_preparation_data``) gets one more entry whose unpickling imports
:mod:`fiamma._run_child`, which installs the finder again; the forkserver also preloads that
module, so the server (and every worker it forks) has the finder before anything imports
``torch``.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import re
import sys
import types

from fiamma import _dtype

# the releases whose APIs fiamma follows (what `torch.__version__` & co. answer under the runner)
TORCH_VERSION = "2.13.0"
TORCHVISION_VERSION = "0.28.0"
TORCHAUDIO_VERSION = "2.13.0"

# PyTorch's top-level names -> fiamma's module, the version answered, the distribution to install
ROOTS = {
    "torch": ("fiamma", TORCH_VERSION, "fiamma-core"),
    "torchvision": ("fiamma.vision", TORCHVISION_VERSION, "fiamma-vision"),
    "torchaudio": ("fiamma.audio", TORCHAUDIO_VERSION, "fiamma-audio"),
    "functorch": ("fiamma.functorch", TORCH_VERSION, "fiamma-nn"),
}

_CHILD_MODULE = "fiamma._run_child"
_PREP_KEY = "fiamma_torch_alias"


class FiammaModuleNotFoundError(ModuleNotFoundError):
    """A PyTorch module that fiamma does not provide (yet)."""


class FiammaAttributeError(AttributeError):
    """A PyTorch name that fiamma does not provide (yet)."""


def target_name(fullname):
    """fiamma's module name for a PyTorch module name (``None`` if the name is not PyTorch's).

    >>> target_name("torch.nn.functional"), target_name("torchvision.models")
    ('fiamma.nn.functional', 'fiamma.vision.models')
    """
    root, dot, rest = fullname.partition(".")
    if root not in ROOTS:
        return None
    return ROOTS[root][0] + dot + rest


def _version_key(v):
    if isinstance(v, tuple):
        parts = [int(p) for p in v]
    else:
        m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(v))
        if m is None:
            raise ValueError(f"cannot compare a version with {v!r}")
        parts = [int(p) for p in m.group(1).split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


class APIVersion(str):
    """A version string that compares as a version with strings and tuples (PyTorch's
    ``TorchVersion``): ``APIVersion("2.13.0") >= "2.1"`` and ``>= (2, 1)`` are true."""

    def __lt__(self, other):
        return _version_key(self) < _version_key(other)

    def __le__(self, other):
        return _version_key(self) <= _version_key(other)

    def __gt__(self, other):
        return _version_key(self) > _version_key(other)

    def __ge__(self, other):
        return _version_key(self) >= _version_key(other)

    def __eq__(self, other):
        if isinstance(other, (str, tuple)):
            try:
                return _version_key(self) == _version_key(other)
            except ValueError:
                return False
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__

    def __reduce__(self):
        return (str, (str(self),))


class AliasModule(types.ModuleType):
    """``torch`` (``torchvision``, ``torchaudio``): every attribute is fiamma's module's, except
    ``__version__`` (the PyTorch version whose API fiamma follows)."""

    def __init__(self, name, target, version):
        super().__init__(name, target.__doc__)
        d = self.__dict__
        d["_fiamma_target"] = target
        d["__version__"] = APIVersion(version)
        d["__path__"] = list(getattr(target, "__path__", []))
        d["__file__"] = getattr(target, "__file__", None)

    def __getattr__(self, name):
        target = self.__dict__["_fiamma_target"]
        try:
            value = getattr(target, name)
        except AttributeError as e:
            if name.startswith("__") and name.endswith("__"):
                if name == "__all__":  # `from torch import *`: fiamma's public names
                    return [n for n in dir(target) if not n.startswith("_")]
                raise
            if "not installed" in str(e):  # a sibling distribution: say what to install
                raise FiammaAttributeError(str(e)) from None
            raise FiammaAttributeError(
                f"module {self.__name__!r} has no attribute {name!r}: fiamma has no "
                f"{target.__name__}.{name} (a gap in fiamma's PyTorch API; "
                "see docs/porting.md)") from None
        if getattr(value, "__fx_original__", None) is None:
            # later lookups skip __getattr__; not a function fiamma.fx replaced for a trace
            # (it would outlive the trace here)
            self.__dict__[name] = value
        return value

    def __setattr__(self, name, value):
        # the import system sets submodules here; a script may set flags: fiamma sees both
        self.__dict__[name] = value
        if not (name.startswith("__") and name.endswith("__")
                or getattr(value, "_fiamma_alias_only", False)):
            setattr(self.__dict__["_fiamma_target"], name, value)

    def __dir__(self):
        return sorted(set(dir(self.__dict__["_fiamma_target"])) | set(self.__dict__))


def _version_module():
    import fiamma

    m = types.ModuleType("torch.version", "The PyTorch version whose API fiamma follows.")
    m.__version__ = APIVersion(TORCH_VERSION)
    m.cuda = None
    m.hip = None
    m.xpu = None
    m.debug = False
    m.git_version = "unknown"
    m.fiamma = fiamma.__version__
    m._fiamma_alias = True
    return m


def _load(fullname):
    """The module that answers an import of ``fullname`` (a PyTorch name)."""
    if fullname == "torch.version":
        return _version_module()
    if fullname == "torch._C":
        return importlib.import_module("fiamma._torch_c").module
    target = target_name(fullname)
    root = fullname.partition(".")[0]
    try:
        module = importlib.import_module(target)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        if not (target == missing or target.startswith(missing + ".")):
            raise  # something fiamma's module itself needs is missing: the real error
        if missing == ROOTS[root][0]:
            raise FiammaModuleNotFoundError(
                f"No module named {fullname!r}: it maps to {target!r}, which is not "
                f"installed (pip install {ROOTS[root][2]})", name=fullname) from None
        raise FiammaModuleNotFoundError(
            f"No module named {fullname!r}: fiamma has no {target!r} (a gap in fiamma's "
            "PyTorch API; see docs/porting.md)", name=fullname) from None
    if fullname != root:
        return module
    alias = AliasModule(root, module, ROOTS[root][1])
    if root == "torch":  # PyTorch imports torch.version with torch
        version = sys.modules.get("torch.version")
        if not _is_ours(version):
            version = sys.modules["torch.version"] = _version_module()
        alias.__dict__["version"] = version
        alias.__dict__["_C"] = importlib.import_module("fiamma._torch_c").module
        alias.__dict__["torch"] = alias  # PyTorch's torch.torch is torch itself
    return alias


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


class AliasFinder(importlib.abc.MetaPathFinder):
    """The meta-path finder that maps ``torch``/``torchvision``/``torchaudio`` to fiamma."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] not in ROOTS:
            return None
        module = _load(fullname)
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(module),
                                              is_package=hasattr(module, "__path__"))
        if isinstance(module, AliasModule) or fullname == "torch.version":
            module.__spec__ = spec
            module.__loader__ = spec.loader
            module.__package__ = fullname if hasattr(module, "__path__") else ""
        return spec


_finder = AliasFinder()


class AliasDistribution(importlib.metadata.Distribution):
    """The metadata of a PyTorch distribution fiamma stands in for (no files)."""

    def __init__(self, name, version, provider):
        self._text = {
            "METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                         f"Summary: fiamma's stand-in for {name} under fiamma.run "
                         f"(the API of {name} {version}, provided by {provider})\n"),
            # the import name it provides (importlib.metadata.packages_distributions)
            "top_level.txt": f"{name}\n",
        }

    def read_text(self, filename):
        return self._text.get(filename)

    def locate_file(self, path):
        return None


def _real_distribution_installed(name):
    """Whether a finder other than fiamma's finds a distribution called ``name``."""
    context = importlib.metadata.DistributionFinder.Context(name=name)
    for finder in sys.meta_path:
        if finder is _dist_finder:
            continue
        find = getattr(finder, "find_distributions", None)
        if find is not None and next(iter(find(context)), None) is not None:
            return True
    return False


class AliasDistributionFinder(importlib.abc.MetaPathFinder):
    """Answers ``importlib.metadata`` for ``torch``/``torchvision``/``torchaudio`` when no real
    distribution of that name is installed (last on ``sys.meta_path``; imports it leaves to
    :class:`AliasFinder`)."""

    def find_spec(self, fullname, path=None, target=None):
        return None

    def find_distributions(self, context=importlib.metadata.DistributionFinder.Context()):
        wanted = context.name
        key = None if wanted is None else wanted.lower().replace("-", "_").replace(".", "_")
        for root, (target, version, provider) in ROOTS.items():
            if root == "functorch" or (key is not None and key != root):
                continue
            if importlib.util.find_spec(target) is None:  # that fiamma package is not installed
                continue
            if not _real_distribution_installed(root):
                yield AliasDistribution(root, version, provider)


_dist_finder = AliasDistributionFinder()


def is_installed():
    """Whether the aliasing is active in this process."""
    return _finder in sys.meta_path


def install():
    """Make ``torch``, ``torchvision`` and ``torchaudio`` resolve to fiamma in this process and
    in the child processes it starts (idempotent). Names already imported from the real
    libraries stay as they are: call this before anything imports them."""
    if not is_installed():
        sys.meta_path.insert(0, _finder)
    if _dist_finder not in sys.meta_path:
        sys.meta_path.append(_dist_finder)
    _dtype.NAMESPACE = "torch."
    for name in list(sys.modules):
        if name.partition(".")[0] in ROOTS and not _is_ours(sys.modules[name]):
            del sys.modules[name]  # a real torch imported earlier must not answer
    _patch_multiprocessing()


def _is_ours(module):
    return (isinstance(module, AliasModule) or getattr(module, "_fiamma_alias", False)
            or getattr(module, "__name__", "").startswith("fiamma"))


def uninstall():
    """Undo :func:`install` in this process (the aliased names leave ``sys.modules``)."""
    while _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    while _dist_finder in sys.meta_path:
        sys.meta_path.remove(_dist_finder)
    _dtype.NAMESPACE = "fiamma."
    for name in list(sys.modules):
        if name.partition(".")[0] in ROOTS and _is_ours(sys.modules[name]):
            del sys.modules[name]
    _unpatch_multiprocessing()


class _ChildToken:
    """Sent to a spawned child before it imports the main script: unpickling it imports
    fiamma._run_child, which installs the aliasing there."""

    def __reduce__(self):
        return (importlib.import_module, (_CHILD_MODULE,))


def _patch_multiprocessing():
    from multiprocessing import forkserver, spawn

    if not getattr(spawn.get_preparation_data, "_fiamma_alias", False):
        original = spawn.get_preparation_data

        def get_preparation_data(name):
            d = original(name)
            if is_installed():
                d[_PREP_KEY] = _ChildToken()
            return d

        get_preparation_data._fiamma_alias = True
        get_preparation_data._fiamma_original = original
        spawn.get_preparation_data = get_preparation_data

    if not getattr(forkserver.set_forkserver_preload, "_fiamma_alias", False):
        original_preload = forkserver.set_forkserver_preload

        def set_forkserver_preload(modules_names):
            names = list(modules_names)
            if is_installed() and _CHILD_MODULE not in names:
                names.insert(0, _CHILD_MODULE)
            original_preload(names)

        set_forkserver_preload._fiamma_alias = True
        set_forkserver_preload._fiamma_original = original_preload
        forkserver.set_forkserver_preload = set_forkserver_preload
        server = getattr(forkserver, "_forkserver", None)
        if server is not None and _CHILD_MODULE not in server._preload_modules:
            server._preload_modules = [_CHILD_MODULE, *server._preload_modules]


def _unpatch_multiprocessing():
    from multiprocessing import forkserver, spawn

    for mod, name in ((spawn, "get_preparation_data"), (forkserver, "set_forkserver_preload")):
        f = getattr(mod, name)
        if getattr(f, "_fiamma_alias", False):
            setattr(mod, name, f._fiamma_original)
    server = getattr(forkserver, "_forkserver", None)
    if server is not None and _CHILD_MODULE in server._preload_modules:
        server._preload_modules = [m for m in server._preload_modules if m != _CHILD_MODULE]
