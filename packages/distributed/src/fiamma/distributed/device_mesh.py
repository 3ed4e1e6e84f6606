"""``torch.distributed.device_mesh``'s names. fiamma has no device mesh yet:
:class:`DeviceMesh` is a class to test against (nothing is an instance of it) and making one
(``DeviceMesh(...)``, :func:`init_device_mesh`) raises :class:`NotImplementedError`."""

__all__ = ["DeviceMesh", "init_device_mesh"]

_GAP = ("fiamma has no device mesh (torch.distributed.device_mesh): {what} is not supported; "
        "use process groups (fiamma.distributed.new_group) instead")


class DeviceMesh:
    """PyTorch's n-dimensional mesh of devices: not supported by fiamma (construction raises)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_GAP.format(what="DeviceMesh(...)"))


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, **kwargs):
    """Not supported: fiamma has no device mesh (raises NotImplementedError)."""
    raise NotImplementedError(_GAP.format(what="init_device_mesh"))
