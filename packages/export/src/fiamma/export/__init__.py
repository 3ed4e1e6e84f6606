"""fiamma.export: whole-model capture into a graph with lifted state (PyTorch's
``torch.export``).

:func:`export` runs the module once on example inputs with fiamma.jit's tracer and returns an
:class:`ExportedProgram`: a :class:`fiamma.fx.GraphModule` whose placeholders are the
parameters, buffers, constants, then the user inputs (``graph_signature`` says which), the
state it needs, the dims declared dynamic with :class:`Dim` and their ranges. ``ep.module()``
runs it with the original call convention and checks its inputs against the exported shapes;
:func:`save` / :func:`load` store it as a zip of JSON and safetensors (no pickled code).

>>> import fiamma, fiamma.nn as nn
>>> from fiamma.export import export, Dim
>>> m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
>>> ep = export(m, (fiamma.randn(3, 4),), dynamic_shapes={"input": {0: Dim("batch")}})
>>> [s.kind.name for s in ep.graph_signature.input_specs]
['PARAMETER', 'PARAMETER', 'PARAMETER', 'PARAMETER', 'USER_INPUT']
>>> x = fiamma.randn(7, 4)
>>> bool((ep.module()(x) - m(x)).abs().max() < 1e-6)
True

Graph ops are fiamma's own (``fiamma.export.ops.<name>``, the table fiamma.jit graphs run
with), not PyTorch's ATen overloads; archives are fiamma's, not readable by PyTorch.
"""

import collections
import warnings

from fiamma import cond

from . import _pytree, dynamic_shapes, exported_program, graph_signature
from ._dims import Dim, Range, ShapesCollection, dims
from ._errors import ConstraintViolationError, DataDependentError, UserError
from ._export import draft_export, export
from ._program import (
    CallSpec,
    ExportedProgram,
    ExportOp,
    ModuleCallEntry,
    ModuleCallSignature,
)
from ._serialize import load, save
from ._signature import (
    ConstantArgument,
    ExportBackwardSignature,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

__all__ = ["export", "draft_export", "export_for_training", "ExportedProgram",
           "ExportGraphSignature", "InputKind", "OutputKind", "InputSpec", "OutputSpec",
           "TensorArgument", "ConstantArgument", "ModuleCallEntry", "ModuleCallSignature",
           "CallSpec", "Dim", "dims", "ShapesCollection", "Range", "save", "load", "unflatten",
           "UnflattenedModule", "register_dataclass", "default_decompositions", "cond",
           "ExportOp", "ops", "UserError", "ConstraintViolationError", "DataDependentError",
           "ExportBackwardSignature", "CustomDecompTable", "FlatArgsAdapter", "PassResult",
           "DEFAULT_PICKLE_PROTOCOL", "graph_signature", "exported_program", "dynamic_shapes"]

DEFAULT_PICKLE_PROTOCOL = 2  # accepted by save() (fiamma's archives hold no pickles)


class PassResult(collections.namedtuple("PassResult", ["graph_module", "modified"])):
    """What a graph pass returns: the (new) graph module and whether it changed."""


class CustomDecompTable(dict):
    """A decomposition table for :meth:`ExportedProgram.run_decompositions`: op (or op
    name) -> function. Starts empty (fiamma's graph ops are already its primitive set)."""


class FlatArgsAdapter:
    """For :func:`unflatten`: adapts flat inputs to another input spec. fiamma's unflattened
    module takes the original inputs, so an adapter is accepted and not called."""

    def adapt(self, target_spec, input_spec, input_args, metadata=None, obj=None):
        raise NotImplementedError

register_dataclass = _pytree.register_dataclass


class _Ops:
    """``fiamma.export.ops.<name>``: the ops an exported graph's nodes call."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        from ._program import op

        try:
            return op(name)
        except RuntimeError:
            raise AttributeError(f"fiamma.export.ops has no op {name!r}") from None

    def __dir__(self):
        from fiamma.jit._interp import OPS

        return sorted(OPS)


ops = _Ops()


def export_for_training(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False,
                        preserve_module_call_signature=()):
    """PyTorch 2.5-2.9's name for :func:`export` (PyTorch 2.13 no longer has it: ``export``
    itself returns the training-IR program). Warns FutureWarning and calls :func:`export`."""
    warnings.warn("export_for_training is deprecated (and gone in PyTorch 2.13): call "
                  "fiamma.export.export, which gives the same program", FutureWarning,
                  stacklevel=2)
    return export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                  preserve_module_call_signature=preserve_module_call_signature)


def default_decompositions():
    """The table :meth:`ExportedProgram.run_decompositions` uses by default: empty (fiamma's
    graph ops are already its primitive set)."""
    return CustomDecompTable()


class UnflattenedModule:
    """Marker type: :func:`unflatten` returns a module of this kind (see there)."""


def unflatten(module, flat_args_adapter=None):
    """A module with the original module's hierarchy of parameters and buffers
    (``u.fc.weight``) that runs the exported program (PyTorch's ``torch.export.unflatten``).
    fiamma keeps one flat graph: the submodules hold state, not their own graphs (their
    ``forward`` is not rebuilt)."""
    if not isinstance(module, ExportedProgram):
        raise TypeError(f"unflatten: expected an ExportedProgram, got "
                        f"{type(module).__name__}")
    gm = module.module()
    type(gm).__bases__ = type(gm).__bases__ + (UnflattenedModule,)
    type(gm).__name__ = type(gm).__qualname__ = "UnflattenedModule"
    return gm
