"""PyTorch's repr of a sparse COO tensor: ``tensor(indices=..., values=..., size=..., nnz=...,
layout=torch.sparse_coo)``, the inner tensors indented under their opening bracket."""

from fiamma import _dtype as D
from fiamma._printing import _add_suffixes, _grad_fn_name, get_printoptions

__all__ = ["sparse_repr"]


def _inner(t, column):
    """repr of a dense part, its continuation lines shifted to ``column``, without a dtype
    suffix (the sparse tensor's own dtype is shown once, outside)."""
    text = repr(t)
    dt = f"dtype={t.dtype}"
    for sep in (", ", ",\n" + " " * 7):
        text = text.replace(sep + dt + ")", ")").replace(sep + dt + ",", ",")
    return text.replace("\n", "\n" + " " * column)


def sparse_repr(s):
    indent = len("tensor(")
    i = s._indices().detach()
    v = s._values().detach()
    text = "tensor(indices=" + _inner(i, len("tensor(indices=")) + ",\n" + " " * indent
    text += "values=" + _inner(v, indent + len("values="))
    suffixes = [",\n" + " " * indent + f"size={tuple(s.shape)}", f"nnz={s._nnz()}"]
    dev = s.device
    if dev.type != "cpu":
        suffixes.append(f"device='{dev.type}:{dev.index or 0}'" if dev.type == "cuda"
                        else f"device='{dev}'")
    dt = s.dtype
    if dt not in (D.get_default_dtype(), D.int64, D.bool, D.default_complex_dtype()):
        suffixes.append(f"dtype={dt}")
    suffixes.append(f"layout={s.layout!r}")
    if s.grad_fn is not None:
        suffixes.append(f"grad_fn=<{_grad_fn_name(s.grad_fn)}>")
    elif s.requires_grad:
        suffixes.append("requires_grad=True")
    # size starts its own line; the rest follow as the dense repr places its suffixes
    text += suffixes[0]
    return _add_suffixes(text, suffixes[1:], indent, get_printoptions()["linewidth"])
