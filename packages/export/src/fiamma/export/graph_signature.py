"""``torch.export.graph_signature``: the signature classes of an exported graph."""

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

__all__ = ["ConstantArgument", "ExportBackwardSignature", "ExportGraphSignature", "InputKind",
           "InputSpec", "OutputKind", "OutputSpec", "TensorArgument"]
