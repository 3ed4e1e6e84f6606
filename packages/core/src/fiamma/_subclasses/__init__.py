"""``torch._subclasses``: PyTorch's tracing tensor subclasses. fiamma traces without fake
tensors, so only the predicates that library code asks of a tensor are here."""
