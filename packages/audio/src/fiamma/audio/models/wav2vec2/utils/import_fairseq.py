def import_fairseq_model(original):
    raise NotImplementedError
