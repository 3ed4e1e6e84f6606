"""Formulas the engine itself relies on (in-place copies); registered before the formula
modules, which may register these names again."""

from fiamma.autograd._formulas import derivative


@derivative("copy_", save="none")
def _copy_(ctx, grad):
    # self's old values are overwritten: no gradient; src gets the gradient (the engine sums
    # it back over broadcasting and casts it to src's dtype)
    return None, grad
