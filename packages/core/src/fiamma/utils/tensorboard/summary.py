"""fiamma.utils.tensorboard.summary: PyTorch's summary-making functions that libraries call
directly (PyTorch Lightning's TensorBoard logger): ``hparams``.

>>> from fiamma.utils.tensorboard.summary import hparams
>>> exp, ssi, sei = hparams({"lr": 0.1, "opt": "sgd"}, {"hp_metric": -1})
>>> [s.value[0].tag for s in (exp, ssi, sei)]
['_hparams_/experiment', '_hparams_/session_start_info', '_hparams_/session_end_info']
"""

from fiamma.utils.tensorboard.writer import _hparams_summaries

__all__ = ["hparams"]


def hparams(hparam_dict=None, metric_dict=None, hparam_domain_discrete=None):
    """The hparams plugin's experiment, session-start and session-end summaries (protos to
    give ``SummaryWriter._get_file_writer().add_summary``), as ``SummaryWriter.add_hparams``
    writes them. Values: numbers, strings, bools or one-element tensors."""
    if type(hparam_dict) is not dict or type(metric_dict) is not dict:
        raise TypeError("hparams: hparam_dict and metric_dict should be dictionaries, got "
                        f"{type(hparam_dict).__name__} and {type(metric_dict).__name__}")
    exp, ssi, sei = _hparams_summaries(hparam_dict, metric_dict, hparam_domain_discrete)
    return exp, ssi, sei
