def import_huggingface_model(original):
    raise NotImplementedError
