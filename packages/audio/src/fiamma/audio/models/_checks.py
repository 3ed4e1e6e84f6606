"""Input checks shared by the torchaudio-style models: errors name the model, what it expects
and what it got."""

__all__ = ["check_input"]


def check_input(model, x, ndim, what, dims=None):
    """Raise ValueError unless ``x`` is a tensor of rank ``ndim`` (an int or a tuple of ints)
    whose sizes match ``dims`` ({axis: size}); ``what`` names the expected layout."""
    ranks = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"{model}: expected a tensor of shape {what}, got {type(x).__name__}")
    if len(shape) not in ranks:
        rank = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"{model}: expected a {rank} input {what}, got a {len(shape)}-D "
                         f"tensor of shape {tuple(shape)}")
    for axis, size in (dims or {}).items():
        if shape[axis] != size:
            raise ValueError(f"{model}: expected an input {what} with size {size} at dim "
                             f"{axis}, got shape {tuple(shape)}")
