"""``parameters_to_vector`` / ``vector_to_parameters``."""

import fiamma

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one vector."""
    return fiamma.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into the parameters (their ``.data``)."""
    if not isinstance(vec, fiamma.Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    off = 0
    for p in parameters:
        n = p.numel()
        p.data = vec[off:off + n].reshape(tuple(p.shape)).clone()
        off += n
    if off != vec.numel():
        raise ValueError(f"vector_to_parameters: the vector has {vec.numel()} elements but the "
                         f"parameters hold {off}")
