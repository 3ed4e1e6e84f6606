"""``torch.torch_version``: ``TorchVersion``, a version string that compares as a version
(``TorchVersion("2.13.0") >= "2.1"``, ``>= (2, 1)``), as libraries use it to gate features on
PyTorch's version. ``__version__`` here is the PyTorch version whose API fiamma follows (what
``torch.__version__`` answers under ``fiamma.run``).

>>> from fiamma.torch_version import TorchVersion, __version__
>>> TorchVersion("2.13.0") > "2.9", __version__ >= (2, 0)
(True, True)
"""

from fiamma._torch_alias import TORCH_VERSION, APIVersion as TorchVersion

__all__ = ["TorchVersion"]

__version__ = TorchVersion(TORCH_VERSION)
