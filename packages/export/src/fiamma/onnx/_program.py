"""``fiamma.onnx.ONNXProgram``: what ``export`` returns (``torch.onnx.ONNXProgram``'s API).

    >>> import fiamma, fiamma.onnx
    >>> from fiamma import nn
    >>> prog = fiamma.onnx.export(nn.Linear(4, 2).eval(), (fiamma.randn(1, 4),))
    >>> prog.optimize()
    >>> [i.name for i in prog.model_proto.graph.input]
    ['input_0']

The program holds the exported ``onnx.ModelProto`` (``model_proto``; attributes it does not
have itself are the proto's, so ``prog.graph`` and ``prog.SerializeToString()`` work as on the
proto), saves it (``save``), runs it in ONNX Runtime on fiamma tensors (``prog(*args)``,
flattened as at export, results as fiamma tensors) and swaps weights in (``apply_weights``).
"""

import os
import warnings

import numpy as np

import fiamma

__all__ = ["ONNXProgram"]


class ONNXProgram:
    """An exported model: ``model_proto`` (an ``onnx.ModelProto``), run with ``prog(*args,
    **kwargs)`` through ONNX Runtime, written with ``save(path)``.

    ``model`` is the same proto (PyTorch's is an ``onnx_ir.Model``, a library fiamma does not
    use); ``exported_program`` is the :class:`fiamma.export.ExportedProgram` (given, or made
    on first access)."""

    def __init__(self, model_proto, *, input_names, output_names, complex_outputs=(),
                 folded=(), flatten=None):
        self.__dict__["model_proto"] = model_proto
        self._input_names = list(input_names)
        self._output_names = list(output_names)
        self._complex_outputs = set(complex_outputs)
        self._folded = set(folded)
        self._flatten = flatten
        self._session = None

    # the proto's own attributes (graph, opset_import, SerializeToString, ...)
    def __getattr__(self, name):
        proto = self.__dict__.get("model_proto")
        if name.startswith("__") or proto is None:
            raise AttributeError(name)
        try:
            return getattr(proto, name)
        except AttributeError:
            raise AttributeError(f"'ONNXProgram' object has no attribute '{name}'") from None

    @property
    def model(self):
        return self.model_proto

    @property
    def exported_program(self):
        """The :class:`fiamma.export.ExportedProgram` exported: the one given to
        ``fiamma.onnx.export``, or for a module made on first access by
        ``fiamma.export.export`` on the same inputs (None where that export fails: a model
        whose Python reads tensor values, which fiamma's ONNX exporter can trace but
        fiamma.export refuses; PyTorch's is None where its exporter fell back to
        TorchScript)."""
        ep = self.__dict__.get("_exported_program")
        if ep is not None:
            return ep
        source = self.__dict__.pop("_export_source", None)
        if source is None:
            return None
        model, args, kwargs = source
        try:
            import fiamma.export
            import fiamma.nn as nn

            if not isinstance(model, nn.Module):
                return None
            was = model.training
            model.eval()  # as the ONNX file was traced
            try:
                ep = fiamma.export.export(model, tuple(args), dict(kwargs or {}))
            finally:
                model.train(was)
        except Exception:  # noqa: BLE001 - a model fiamma.export can't capture: None
            return None
        self.__dict__["_exported_program"] = ep
        return ep

    def __repr__(self):
        g = self.model_proto.graph
        ops = sorted({n.op_type for n in g.node})
        return (f"ONNXProgram(graph={g.name!r}, opset="
                f"{[o.version for o in self.model_proto.opset_import]}, inputs="
                f"{[i.name for i in g.input]}, outputs={[o.name for o in g.output]}, "
                f"{len(g.node)} nodes, {len(g.initializer)} initializers, ops={ops})")

    def optimize(self):
        """In place, as PyTorch's. fiamma's exporter already folds constants and drops unused
        values while exporting, so the graph it returns is what this pass would leave."""
        return None

    def save(self, destination, *, include_initializers=True,
             keep_initializers_as_inputs=False, external_data=None):
        """Write the model to ``destination`` (a path or a binary file). ``external_data``:
        True writes the weights (tensors over 1 KB) to ``<file name>.data`` beside the file,
        None does so only for models over 2 GB (the protobuf limit), False never.
        ``include_initializers=False`` leaves the weights out; ``keep_initializers_as_inputs=True``
        also lists them as graph inputs (older runtimes' convention)."""
        import onnx

        model = self.model_proto
        if not include_initializers or keep_initializers_as_inputs:
            model = onnx.ModelProto()
            model.CopyFrom(self.model_proto)
            if keep_initializers_as_inputs:
                have = {i.name for i in model.graph.input}
                for t in model.graph.initializer:
                    if t.name not in have:
                        model.graph.input.append(onnx.helper.make_tensor_value_info(
                            t.name, t.data_type, list(t.dims)))
            if not include_initializers:
                del model.graph.initializer[:]
        if external_data is None:
            external_data = model.ByteSize() > 2 ** 31 - 1 if include_initializers else False
        if not isinstance(destination, (str, os.PathLike)):
            if external_data:
                raise ValueError("ONNXProgram.save: external_data=True needs a path, not a "
                                 "file object")
            destination.write(model.SerializeToString())
            return
        path = os.fspath(destination)
        if external_data:
            location = os.path.basename(path) + ".data"
            onnx.save_model(model, path, save_as_external_data=True,
                            all_tensors_to_one_file=True, location=location,
                            size_threshold=1024)
        else:
            onnx.save_model(model, path)

    def initialize_inference_session(self, initializer=None):
        """Start the ONNX Runtime session ``prog(...)`` uses (``initializer(model_bytes)``
        makes it when given; by default a CPU session)."""
        data = self.model_proto.SerializeToString()
        if initializer is not None:
            self._session = initializer(data)
            return
        try:
            import onnxruntime as ort
        except ImportError:
            raise ImportError("ONNXProgram: running the model needs onnxruntime") from None
        self._session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])

    def release(self):
        """Drop the inference session (it is made again on the next call)."""
        self._session = None

    def __call__(self, *args, **kwargs):
        """Run the model in ONNX Runtime on ``args``/``kwargs`` (structured as at export);
        returns the flat outputs as a tuple of fiamma tensors."""
        if self._session is None:
            self.initialize_inference_session()
        flat = self._flatten(args, kwargs) if self._flatten else list(args)
        names = [i.name for i in self._session.get_inputs()]
        if len(flat) != len(names):
            raise ValueError(f"ONNXProgram: the model takes {len(names)} input tensors "
                             f"({names}), got {len(flat)}")
        feeds = {}
        for n, x in zip(names, flat):
            a = x.detach().cpu().numpy() if isinstance(x, fiamma.Tensor) else np.asarray(x)
            if np.iscomplexobj(a):
                a = np.stack([a.real, a.imag], axis=-1)
            feeds[n] = a
        outs = self._session.run(None, feeds)
        result = []
        for name, a in zip(self._output_names, outs):
            if name in self._complex_outputs:
                a = a[..., 0] + 1j * a[..., 1]
            result.append(fiamma.from_numpy(np.ascontiguousarray(a)))
        return tuple(result)

    def apply_weights(self, state_dict):
        """Replace the weights stored under ``state_dict``'s names (shapes and dtypes must
        match). A weight the exporter folded into other constants (a batch norm's statistics,
        a transposed linear weight) cannot be replaced and raises; a name the model does not
        have is skipped with a warning, as PyTorch does."""
        from onnx import numpy_helper

        inits = {t.name: t for t in self.model_proto.graph.initializer}
        for name, value in state_dict.items():
            t = inits.get(name)
            if t is None:
                if name in self._folded:
                    raise ValueError(
                        f"ONNXProgram.apply_weights: '{name}' was folded into other constants "
                        "at export; export the model with these weights instead")
                warnings.warn(f"Weight '{name}' not found in the model. Skipped applying.",
                              stacklevel=2)
                continue
            a = value.detach().cpu().numpy() if isinstance(value, fiamma.Tensor) \
                else np.asarray(value)
            old = numpy_helper.to_array(t)
            if a.shape != old.shape or a.dtype != old.dtype:
                raise ValueError(f"ONNXProgram.apply_weights: '{name}' has shape "
                                 f"{tuple(old.shape)} and dtype {old.dtype} in the model, got "
                                 f"{tuple(a.shape)} {a.dtype}")
            t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(a), name))
        self._session = None
