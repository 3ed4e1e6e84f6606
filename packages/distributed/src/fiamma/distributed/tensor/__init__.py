"""``torch.distributed.tensor``'s names, without the sharded tensor itself.

fiamma has no distributed tensor (DTensor) yet. Libraries such as Hugging Face ``transformers``
import this module at start-up only to ask whether a tensor *is* a DTensor
(``isinstance(t, DTensor)``) or to name the placement types in annotations and defaults;
for them this module gives:

- :class:`Shard`, :class:`Replicate`, :class:`Partial` (and their base :class:`Placement`):
  real placement descriptions with PyTorch's fields, equality, hashing and
  ``is_shard()``/``is_replicate()``/``is_partial()`` queries;
- :class:`DTensor`: a subclass of ``fiamma.Tensor`` that no tensor is an instance of, as no
  fiamma operation makes one; creating one (``DTensor(...)``, ``DTensor.from_local``) and
  ``distribute_tensor``/``distribute_module`` raise :class:`NotImplementedError` saying so.

>>> from fiamma.distributed.tensor import DTensor, Shard
>>> import fiamma
>>> isinstance(fiamma.ones(2), DTensor), Shard(0).is_shard(0)
(False, True)
"""

from fiamma import Tensor as _Tensor
from fiamma.overrides import disabled_torch_function_impl as _disabled

__all__ = ["DTensor", "Placement", "Shard", "Replicate", "Partial", "distribute_tensor",
           "distribute_module", "DeviceMesh", "init_device_mesh"]

_GAP = ("fiamma has no distributed tensor (torch.distributed.tensor.DTensor): "
        "{what} is not supported; only isinstance checks against DTensor work (nothing is one)")


class Placement:
    """How a tensor is laid out over one dimension of a device mesh (the base class)."""

    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self, reduce_op=None):
        return False


class Shard(Placement):
    """The tensor is split along dimension ``dim`` over the mesh dimension."""

    def __init__(self, dim):
        if not isinstance(dim, int):
            raise TypeError(f"Shard(dim): expected an int dim, got {type(dim).__name__}")
        self.dim = dim

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self):
        return hash((type(self).__name__, self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"


class Replicate(Placement):
    """Every device of the mesh dimension holds the whole tensor."""

    def is_replicate(self):
        return True

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self).__name__)

    def __repr__(self):
        return "Replicate()"


class Partial(Placement):
    """Each device holds a partial value; the tensor is their reduction (``reduce_op``)."""

    def __init__(self, reduce_op="sum"):
        self.reduce_op = reduce_op

    def is_partial(self, reduce_op=None):
        return reduce_op is None or reduce_op == self.reduce_op

    def __eq__(self, other):
        return type(other) is type(self) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash((type(self).__name__, self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"


class DTensor(_Tensor):
    """PyTorch's distributed tensor: here only a name to test against (``isinstance(t,
    DTensor)`` is false for every fiamma tensor); making one raises NotImplementedError."""

    __torch_function__ = _disabled

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(_GAP.format(what="creating a DTensor"))

    @classmethod
    def from_local(cls, *args, **kwargs):
        raise NotImplementedError(_GAP.format(what="DTensor.from_local"))


def distribute_tensor(tensor, device_mesh=None, placements=None, **kwargs):
    """Not supported: fiamma has no DTensor (raises NotImplementedError)."""
    raise NotImplementedError(_GAP.format(what="distribute_tensor"))


def distribute_module(module, device_mesh=None, partition_fn=None, **kwargs):
    """Not supported: fiamma has no DTensor (raises NotImplementedError)."""
    raise NotImplementedError(_GAP.format(what="distribute_module"))


from fiamma.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: E402
