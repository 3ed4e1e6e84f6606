"""``fiamma.utils.model_zoo``: PyTorch's old name for :func:`fiamma.hub.load_state_dict_from_url`
(``load_url``)."""

from fiamma.hub import load_state_dict_from_url as load_url

__all__ = ["load_url"]
