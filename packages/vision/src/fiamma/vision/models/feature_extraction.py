"""Intermediate features of a model by name (``torchvision.models.feature_extraction``).

:func:`create_feature_extractor` wraps a model so that calling it returns a dict of the outputs
of the named submodules instead of the model's output. Names are the submodules' qualified
names (``"layer2"``, ``"layer3.1"``, ``"features.6"``), as ``model.named_modules()`` lists them,
plus ``"x"`` for the input; the forward pass stops as soon as every requested output exists, so
later layers cost nothing. torchvision builds a torch.fx graph instead, whose node names also
include functional calls (``"flatten"``, ``"layer1.0.add"``); fiamma has no symbolic tracer,
so such names are refused by name, listing the names there are.

    >>> import fiamma
    >>> from fiamma.vision.models import resnet18
    >>> from fiamma.vision.models.feature_extraction import create_feature_extractor
    >>> fe = create_feature_extractor(resnet18(), {"layer1": "low", "layer3": "high"})
    >>> {k: tuple(v.shape) for k, v in fe(fiamma.rand(1, 3, 64, 64)).items()}
    {'low': (1, 64, 16, 16), 'high': (1, 256, 4, 4)}
"""

import collections

from fiamma import nn

__all__ = ["create_feature_extractor", "get_graph_node_names"]

INPUT = "x"  # torchvision's name for the model's (first) input


def _node_names(model):
    return [INPUT] + [name for name, _ in model.named_modules() if name]


def get_graph_node_names(model, tracer_kwargs=None, suppress_diff_warning=False,
                         concrete_args=None):
    """The names :func:`create_feature_extractor` accepts, for train and for eval mode: ``"x"``
    and every submodule's qualified name, in registration order. (torchvision's fx graph also
    names functional calls; those are not available here.)

    >>> from fiamma.vision.models import resnet18
    >>> train, ev = get_graph_node_names(resnet18())
    >>> train[:4], train == ev
    (['x', 'conv1', 'bn1', 'relu'], True)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"get_graph_node_names: model must be an nn.Module, got "
                        f"{type(model).__name__}")
    names = _node_names(model)
    return names, list(names)


def _as_dict(nodes, which):
    if nodes is None:
        return None
    if isinstance(nodes, str):
        nodes = [nodes]
    if isinstance(nodes, dict):
        pairs = list(nodes.items())
    elif isinstance(nodes, (list, tuple)):
        pairs = [(n, n) for n in nodes]
    else:
        raise TypeError(f"create_feature_extractor: {which} must be a list or a dict of node "
                        f"names, got {type(nodes).__name__}")
    for k, v in pairs:
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"create_feature_extractor: {which} holds a non-string name or "
                            f"output key: {k!r}: {v!r}")
    out = collections.OrderedDict(pairs)
    if not out:
        raise ValueError(f"create_feature_extractor: {which} is empty")
    return out


class _Done(Exception):
    """Raised by the last needed hook: the rest of the forward pass is not run."""


class FeatureExtractor(nn.Module):
    """The module :func:`create_feature_extractor` returns: it holds the model's own parameters,
    buffers and submodules (so ``state_dict()`` keys are the model's), and its forward returns
    ``{output_key: tensor}`` for the current mode's return nodes."""

    def __init__(self, model, train_nodes, eval_nodes):
        super().__init__()
        # share the model's tables: state_dict, .to(), parameters() act on the same objects
        self._parameters = model._parameters
        self._buffers = model._buffers
        self._modules = model._modules
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_nodes", {True: train_nodes, False: eval_nodes})
        self.training = model.training
        modules = dict(model.named_modules())
        for name in set(train_nodes) | set(eval_nodes):
            if name != INPUT:
                modules[name].register_forward_hook(self._hook(name))
        object.__setattr__(self, "_active", None)

    def _hook(self, name):
        def hook(module, args, output):
            active = self._active
            if active is None or name not in active[0]:
                return None
            active[1][name] = output
            if len(active[1]) == len(active[0]):
                raise _Done
            return None
        return hook

    def train(self, mode=True):
        super().train(mode)
        self._model.training = mode
        return self

    def forward(self, *args, **kwargs):
        nodes = self._nodes[self.training]
        got = {}
        if INPUT in nodes:
            if not args:
                raise TypeError("FeatureExtractor: node 'x' asks for the first positional "
                                "input, but none was given")
            got[INPUT] = args[0]
        object.__setattr__(self, "_active", (nodes, got))
        try:
            if len(got) < len(nodes):
                self._model(*args, **kwargs)
        except _Done:
            pass
        finally:
            object.__setattr__(self, "_active", None)
        missing = [n for n in nodes if n not in got]
        if missing:
            raise RuntimeError(f"FeatureExtractor: the forward pass never ran node(s) "
                               f"{missing} in {'train' if self.training else 'eval'} mode")
        return {key: got[name] for name, key in nodes.items()}

    def extra_repr(self):
        return f"model={type(self._model).__name__}"


def create_feature_extractor(model, return_nodes=None, train_return_nodes=None,
                             eval_return_nodes=None, tracer_kwargs=None,
                             suppress_diff_warning=False, concrete_args=None):
    """A module whose forward returns the outputs of the named nodes of ``model``.

    ``return_nodes``: a list of node names (the output keys are the names) or a dict
    ``{node name: output key}``; or ``train_return_nodes`` and ``eval_return_nodes`` together,
    for modes whose graphs differ. Node names: ``"x"`` and submodule names
    (:func:`get_graph_node_names`). ``tracer_kwargs`` and ``concrete_args`` configure
    torch.fx's tracer in torchvision and must be None here.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"create_feature_extractor: model must be an nn.Module, got "
                        f"{type(model).__name__}")
    if tracer_kwargs or concrete_args:
        raise ValueError("create_feature_extractor: tracer_kwargs and concrete_args configure "
                         "torch.fx tracing, which fiamma does not use (nodes are submodules); "
                         "leave them None")
    if return_nodes is None and (train_return_nodes is None or eval_return_nodes is None):
        raise ValueError("create_feature_extractor: give either return_nodes, or both "
                         "train_return_nodes and eval_return_nodes")
    if return_nodes is not None and (train_return_nodes is not None or
                                     eval_return_nodes is not None):
        raise ValueError("create_feature_extractor: give return_nodes, or train_return_nodes "
                         "and eval_return_nodes, not both")
    if return_nodes is not None:
        train = ev = _as_dict(return_nodes, "return_nodes")
    else:
        train = _as_dict(train_return_nodes, "train_return_nodes")
        ev = _as_dict(eval_return_nodes, "eval_return_nodes")
    known = set(_node_names(model))
    for nodes in (train, ev):
        for name in nodes:
            if name not in known:
                raise ValueError(
                    f"create_feature_extractor: node {name!r} is not present in the model; "
                    "nodes are 'x' and the submodule names of model.named_modules() (see "
                    "get_graph_node_names): functional calls such as 'flatten' are not nodes "
                    "in fiamma")
    return FeatureExtractor(model, train, ev)
