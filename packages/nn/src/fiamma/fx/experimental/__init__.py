"""``torch.fx.experimental``: the pieces library code consults (see :mod:`.proxy_tensor`)."""
