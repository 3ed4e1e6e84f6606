"""``torch.fx.experimental.proxy_tensor``. fiamma.fx traces symbolically with Proxy objects and
has no proxy-tensor dispatch mode (no ``make_fx``), so no such mode is ever active."""

__all__ = ["get_proxy_mode"]


def get_proxy_mode():
    """The active proxy-tensor tracing mode: always None in fiamma (library code that asks
    takes its eager path).

    >>> from fiamma.fx.experimental.proxy_tensor import get_proxy_mode
    >>> get_proxy_mode() is None
    True
    """
    return None
