"""Where the non-wav2vec2 bundles find their files (checkpoints, JSON statistics, tokenizer
models) torchaudio publishes under ``https://download.pytorch.org/torchaudio/<key>``.

A file is looked up, in order:

1. ``path=...`` given to the bundle method (a fiamma extension), used as is;
2. ``dl_kwargs={"model_dir": folder}``: ``folder/<file name>``, downloaded there if missing;
3. otherwise ``$FIAMMA_HOME/hub/checkpoints/<file name>`` (:func:`fiamma.hub.get_dir`), or a
   copy already in torchaudio's own cache layout ``$FIAMMA_HOME/hub/torchaudio/<key>``;
   downloaded into the first when neither exists.

Without a network the error names the URL and the file to put in place by hand.
"""

import importlib
import os
import sys

import fiamma

__all__ = []

BASE_URL = "https://download.pytorch.org/torchaudio/"


def asset_url(key):
    return key if key.startswith(("https://", "http://")) else BASE_URL + key


def asset_file_name(key):
    return asset_url(key).rsplit("/", 1)[-1]


def bundle_name(bundle):
    """The public name of a bundle instance (``SQUIM_OBJECTIVE``), else its class name."""
    pipelines = sys.modules.get("fiamma.audio.pipelines")
    if pipelines is not None:
        for name in getattr(pipelines, "__all__", ()):
            if getattr(pipelines, name, None) is bundle:
                return name
    return type(bundle).__name__


def fetch_asset(owner, key, dl_kwargs=None, path=None):
    """The local file for ``key`` (see the module docstring); ``owner`` names the bundle
    method in errors, e.g. ``"SQUIM_OBJECTIVE.get_model"``."""
    url = asset_url(key)
    if path is not None:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{owner}: no file at {path!r} (the published one is {url})")
        return path
    hub = importlib.import_module("fiamma.hub")
    kwargs = dict(dl_kwargs or {})
    unknown = set(kwargs) - {"model_dir", "file_name", "progress", "check_hash"}
    if unknown:
        raise TypeError(f"{owner}: unexpected dl_kwargs {sorted(unknown)} (expected model_dir, "
                        "file_name, progress, check_hash)")
    name = kwargs.get("file_name") or asset_file_name(key)
    if kwargs.get("model_dir") is not None:
        folder = os.path.expanduser(os.fspath(kwargs["model_dir"]))
    else:
        folder = os.path.join(hub.get_dir(), "checkpoints")
        legacy = os.path.join(hub.get_dir(), "torchaudio", *key.split("/"))
        if not key.startswith(("https://", "http://")) and os.path.isfile(legacy) \
                and not os.path.isfile(os.path.join(folder, name)):
            return legacy
    target = os.path.join(folder, name)
    if not os.path.isfile(target):
        progress = kwargs.get("progress", True)
        if progress:
            sys.stderr.write(f'Downloading: "{url}" to {target}\n')
        hash_prefix = None
        if kwargs.get("check_hash"):            # as fiamma.hub: the hex digits after a '-'
            m = hub.HASH_REGEX.search(name)
            hash_prefix = m.group(1) if m else None
        try:
            hub.download_url_to_file(url, target, hash_prefix, progress=progress)
        except hub.DownloadError as e:
            raise hub.DownloadError(f"{owner}: {e}; or pass path=<local copy of "
                                    f"{name}>") from None
    return target


def load_checkpoint(owner, key, dl_kwargs=None, path=None):
    """A state dict from the checkpoint file for ``key``."""
    dl_kwargs = dict(dl_kwargs or {})
    map_location = dl_kwargs.pop("map_location", None)
    state = fiamma.load(fetch_asset(owner, key, dl_kwargs, path), map_location=map_location)
    if not isinstance(state, dict):
        raise TypeError(f"{owner}: expected the checkpoint to hold a state dict, got "
                        f"{type(state).__name__}")
    return state
