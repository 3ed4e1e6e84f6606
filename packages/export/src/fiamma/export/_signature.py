"""``ExportGraphSignature``: what each placeholder and output of an exported graph is
(PyTorch's ``torch.export.graph_signature``)."""

import dataclasses
import enum

__all__ = ["InputKind", "OutputKind", "TensorArgument", "ConstantArgument", "InputSpec",
           "OutputSpec", "ExportGraphSignature", "ExportBackwardSignature"]


class InputKind(enum.Enum):
    USER_INPUT = enum.auto()
    PARAMETER = enum.auto()
    BUFFER = enum.auto()
    CONSTANT_TENSOR = enum.auto()
    CUSTOM_OBJ = enum.auto()
    TOKEN = enum.auto()


class OutputKind(enum.Enum):
    USER_OUTPUT = enum.auto()
    LOSS_OUTPUT = enum.auto()
    BUFFER_MUTATION = enum.auto()
    PARAMETER_MUTATION = enum.auto()
    GRADIENT_TO_PARAMETER = enum.auto()
    GRADIENT_TO_USER_INPUT = enum.auto()
    USER_INPUT_MUTATION = enum.auto()
    TOKEN = enum.auto()


@dataclasses.dataclass
class TensorArgument:
    name: str


@dataclasses.dataclass
class ConstantArgument:
    name: str
    value: object


@dataclasses.dataclass
class InputSpec:
    kind: InputKind
    arg: object
    target: str | None
    persistent: bool | None = None

    def __str__(self):
        s = f"{self.arg.name}: {self.kind.name}"
        if self.target is not None:
            s += f" target={self.target!r}"
        if self.persistent is not None:
            s += f" persistent={self.persistent}"
        return s


@dataclasses.dataclass
class OutputSpec:
    kind: OutputKind
    arg: object
    target: str | None

    def __str__(self):
        s = f"{self.arg.name}: {self.kind.name}"
        if self.target is not None:
            s += f" target={self.target!r}"
        return s


@dataclasses.dataclass
class ExportGraphSignature:
    """The graph's placeholders (``input_specs``: parameters, buffers, constants, then user
    inputs) and outputs (``output_specs``: buffer mutations, then user outputs)."""

    input_specs: list
    output_specs: list

    def _names(self, kind):
        return tuple(s.target for s in self.input_specs if s.kind == kind)

    @property
    def parameters(self):
        return self._names(InputKind.PARAMETER)

    @property
    def buffers(self):
        return self._names(InputKind.BUFFER)

    @property
    def non_persistent_buffers(self):
        return tuple(s.target for s in self.input_specs
                     if s.kind == InputKind.BUFFER and s.persistent is False)

    @property
    def lifted_tensor_constants(self):
        return self._names(InputKind.CONSTANT_TENSOR)

    @property
    def lifted_custom_objs(self):
        return ()

    @property
    def user_inputs(self):
        out = []
        for s in self.input_specs:
            if s.kind == InputKind.USER_INPUT:
                out.append(s.arg.value if isinstance(s.arg, ConstantArgument) else s.arg.name)
        return tuple(out)

    @property
    def user_outputs(self):
        return tuple(s.arg.name for s in self.output_specs if s.kind == OutputKind.USER_OUTPUT)

    @property
    def inputs_to_parameters(self):
        return {s.arg.name: s.target for s in self.input_specs
                if s.kind == InputKind.PARAMETER}

    @property
    def inputs_to_buffers(self):
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.BUFFER}

    @property
    def inputs_to_lifted_tensor_constants(self):
        return {s.arg.name: s.target for s in self.input_specs
                if s.kind == InputKind.CONSTANT_TENSOR}

    @property
    def buffers_to_mutate(self):
        return {s.arg.name: s.target for s in self.output_specs
                if s.kind == OutputKind.BUFFER_MUTATION}

    @property
    def user_inputs_to_mutate(self):
        return {}

    @property
    def backward_signature(self):
        return None

    @property
    def assertion_dep_token(self):
        return None

    def __str__(self):
        lines = ["# inputs"] + [str(s) for s in self.input_specs]
        lines += ["", "# outputs"] + [str(s) for s in self.output_specs]
        return "\n".join(lines) + "\n"


@dataclasses.dataclass
class ExportBackwardSignature:
    """The backward part of a joint (forward + backward) export: which outputs are the
    gradients of which parameters and inputs, and the loss. fiamma exports forward graphs
    only; ``ExportGraphSignature.backward_signature`` is None."""

    gradients_to_parameters: dict
    gradients_to_user_inputs: dict
    loss_output: str
