"""The model registry and the weights API (torchvision's ``get_model`` / ``WeightsEnum``).

A builder registers itself with the weights enum it accepts::

    @register_model(weights=ResNet18_Weights)
    def resnet18(*, weights=None, progress=True, **kwargs): ...

and resolves its ``weights`` argument with ``resolve_weights(ResNet18_Weights, weights)``, then
loads them with ``weights.get_state_dict(progress=progress)`` (or ``load_weights`` for a local
file). ``weights`` may be a member (``ResNet18_Weights.IMAGENET1K_V1``), its name as a string
(``"IMAGENET1K_V1"``, ``"ResNet18_Weights.IMAGENET1K_V1"``, ``"DEFAULT"``), None (random
initialisation), or the path of a checkpoint file on disk (loaded with no network).

Downloads go to ``$FIAMMA_HOME/hub/checkpoints`` (``FIAMMA_HOME`` defaults to
``~/.cache/fiamma``) through :func:`fiamma.vision.datasets.utils.download_url`: atomic,
resumable, hash-checked, with a progress bar; a file already in the cache is used as it is.
Checkpoints are read with :func:`fiamma.load`, which never runs code from the file.
"""

import enum
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

import fiamma

__all__ = ["Weights", "WeightsEnum", "register_model", "get_model", "get_model_builder",
           "get_model_weights", "get_weight", "list_models", "load_state_dict_from_url",
           "resolve_weights", "load_weights", "fiamma_home"]


def fiamma_home():
    """``$FIAMMA_HOME``, default ``~/.cache/fiamma``."""
    return Path(os.environ.get("FIAMMA_HOME", Path.home() / ".cache" / "fiamma")).expanduser()


@dataclass(eq=False)
class Weights:
    """One set of pretrained weights: where they are, how inputs must be prepared, and what
    they are (``meta``: ``categories``, ``num_params``, ``min_size``, ``_metrics``, ...).

    ``sha256`` is the full hex digest of the file when known; torchvision-style URLs whose file
    name ends in ``-<hex prefix>.pth`` are also checked against that prefix.
    """
    url: str
    transforms: Callable[..., Any]
    meta: dict = field(default_factory=dict)
    sha256: str = None


class WeightsEnum(enum.Enum):
    """Base of the per-architecture weights enums; members hold :class:`Weights`."""

    @classmethod
    def verify(cls, obj):
        """``obj`` as a member of this enum (None passes through); names are accepted."""
        if obj is None or isinstance(obj, cls):
            return obj
        if isinstance(obj, str):
            name = obj.split(".", 1)[1] if obj.startswith(cls.__name__ + ".") else obj
            try:
                return cls[name]
            except KeyError:
                raise ValueError(f"{cls.__name__}: no weights named {obj!r}; known: "
                                 f"{', '.join(cls.__members__)}") from None
        raise TypeError(f"{cls.__name__}: expected a member of {cls.__name__}, its name or None, "
                        f"got {type(obj).__name__}")

    @property
    def url(self):
        return self.value.url

    @property
    def transforms(self):
        return self.value.transforms

    @property
    def meta(self):
        return self.value.meta

    @property
    def sha256(self):
        return self.value.sha256

    def get_state_dict(self, progress=True, check_hash=True, *, model_dir=None, path=None):
        """The state dict of these weights: from ``path`` if given (no network), else from the
        cache, downloading it first if it is not there."""
        if path is not None:
            return load_weights(path)
        return load_state_dict_from_url(self.url, model_dir=model_dir, progress=progress,
                                        check_hash=check_hash, sha256=self.sha256)

    def __repr__(self):
        return f"{type(self).__name__}.{self.name}"


_HASH_PREFIX = re.compile(r"-([a-f0-9]{6,})\.")


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=True, *, sha256=None):
    """Load the checkpoint at ``url``: a ``file://`` URL or plain path is read in place; an
    http(s) URL is downloaded once into ``model_dir`` (default
    ``$FIAMMA_HOME/hub/checkpoints``). With ``check_hash`` the downloaded file must match
    ``sha256`` (or the hex prefix in its torchvision-style name); a file already in the cache
    is loaded without hashing it again, as ``torch.hub.load_state_dict_from_url`` does."""
    parsed = urlparse(str(url))
    if parsed.scheme in ("", "file"):
        return load_weights(parsed.path if parsed.scheme == "file" else url, map_location)
    model_dir = Path(model_dir) if model_dir is not None else fiamma_home() / "hub" / "checkpoints"
    name = file_name or os.path.basename(parsed.path)
    target = model_dir / name
    if not target.exists():     # as torch.hub: a cached file is used as it is, not re-hashed
        from fiamma.vision.datasets.utils import download_url
        download_url(url, str(model_dir), name, sha256=sha256 if check_hash else None,
                     progress=progress)
        if check_hash and sha256 is None:
            m = _HASH_PREFIX.search(name)
            if m:
                from fiamma.vision.datasets.utils import _file_hash
                digest = _file_hash(str(target), "sha256")
                if not digest.startswith(m.group(1)):
                    target.unlink()
                    raise RuntimeError(f"load_state_dict_from_url: {name}: sha256 {digest} does "
                                       f"not start with {m.group(1)} (file removed)")
    return load_weights(target, map_location)


def load_weights(path, map_location=None):
    """The state dict stored in a checkpoint file (PyTorch zip or legacy format, or
    safetensors), read without running code from it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"load_weights: no checkpoint file at {str(path)!r}")
    if path.suffix == ".safetensors":
        return fiamma.safetensors.load_file(str(path))
    sd = fiamma.load(str(path), map_location=map_location)
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    return sd


def resolve_weights(enum_cls, weights):
    """A builder's ``weights`` argument as a member of ``enum_cls``, None, or a
    :class:`pathlib.Path` to a local checkpoint file."""
    if isinstance(weights, (str, os.PathLike)) and not isinstance(weights, enum.Enum):
        s = os.fspath(weights)
        if s not in enum_cls.__members__ and not s.startswith(enum_cls.__name__ + "."):
            if os.path.isfile(s):
                return Path(s)
            if os.sep in s or s.endswith((".pth", ".pt", ".safetensors", ".bin")):
                raise FileNotFoundError(f"{enum_cls.__name__}: no weights file at {s!r}")
    return enum_cls.verify(weights)


_MODELS = {}     # name -> builder
_WEIGHTS = {}    # name -> weights enum class


def register_model(name=None, *, weights=None):
    """Decorator: register a model builder under ``name`` (default: the function's name) with
    the weights enum it accepts."""
    def deco(fn):
        key = name or fn.__name__
        if key in _MODELS:
            raise ValueError(f"register_model: a model named {key!r} is already registered")
        _MODELS[key] = fn
        if weights is not None:
            _WEIGHTS[key] = weights
        return fn
    return deco


def _load_all():
    import fiamma.vision.models  # noqa: F401  (importing the package registers every builder)


def list_models(module=None, include=None, exclude=None):
    """Sorted names of the registered models (of ``module`` only, if given); ``include`` /
    ``exclude`` are fnmatch patterns (or lists of them)."""
    import fnmatch
    _load_all()
    names = [n for n, fn in _MODELS.items()
             if module is None or fn.__module__.startswith(getattr(module, "__name__", module))]
    if include:
        pats = [include] if isinstance(include, str) else include
        names = [n for n in names if any(fnmatch.fnmatch(n, p) for p in pats)]
    if exclude:
        pats = [exclude] if isinstance(exclude, str) else exclude
        names = [n for n in names if not any(fnmatch.fnmatch(n, p) for p in pats)]
    return sorted(names)


def get_model_builder(name):
    _load_all()
    try:
        return _MODELS[name.lower()]
    except KeyError:
        raise ValueError(f"get_model: unknown model {name!r}; see list_models()") from None


def get_model(name, **config):
    """Build the registered model ``name`` with ``config`` (e.g. ``weights="DEFAULT"``)."""
    return get_model_builder(name)(**config)


def get_model_weights(name):
    """The weights enum class of a model (its name or its builder)."""
    _load_all()
    if callable(name):
        name = next((k for k, v in _MODELS.items() if v is name), None)
    if name not in _WEIGHTS:
        raise ValueError(f"get_model_weights: no weights registered for {name!r}")
    return _WEIGHTS[name]


def get_weight(name):
    """A weights member from its full name, e.g. ``"ResNet50_Weights.IMAGENET1K_V1"``."""
    _load_all()
    enum_name, _, member = name.partition(".")
    for cls in set(_WEIGHTS.values()):
        if cls.__name__ == enum_name:
            return cls.verify(member)
    raise ValueError(f"get_weight: unknown weights enum {enum_name!r}")
