"""Does compiling the binary-op driver per op pay? ``x + y`` on (16,) float32 tensors through
three versions of ``Tensor.__add__``, swapped in turn in one process: the driver's generated
entry (the op's code, name and dtype rule as constants), the same fast test compiled once with
them as closure variables (what one hand-written generic driver would be), and a method that
calls the general path ``binary()``. Prints the minimum over interleaved samples, in
microseconds per call (see docs/architecture.md, "One binary-op driver").

    PYTHONPATH=packages/core/src python benchmarks/bench_binary_driver.py
"""

import timeit

import fiamma
from fiamma._autograd_api import ops
from fiamma._backend import codes as K
from fiamma._backend.cpu import operators as O
from fiamma._ops import elementwise as E

SAMPLES, CALLS = 60, 3000


def closure_driver():
    """The fast test with the op's code, name and kind as closure variables."""
    int_div = ("\n            if truediv and dt._kind != 2:"
               "\n                return fallback(self, other)")
    body = O._TENSOR_TEST.format(self_ok="", extra="") + O._TENSOR_NEW.format(
        int_div=int_div, code="code", name="{name}", rdt="(D.bool if pred else dt)", pred="pred",
        miss_call="fallback(self, other)")
    body = body.replace("'{name}'", "name").replace("_KEY", "name")
    src = ("def make(code, name, pred, truediv, fallback):\n    def op(self, other):" + body +
           "\n        return fallback(self, other)\n    return op\n")
    scope = {}
    tf = O.TF
    env = dict(vars(O), _raise=E._raise, Tensor=tf.Tensor, new_empty=tf.new_empty,
               _STRIDES=tf.STRIDES, _cached_strides=tf.cached_strides)
    exec(compile(src, "<closure driver>", "exec"), env, scope)
    return scope["make"](int(K.BIN_ADD), ops.add, False, False, E.add)


def general(self, other):
    return E.binary(K.BIN_ADD, ops.add, E.ARITH, self, other)


def main():
    generated = fiamma.Tensor.__add__
    variants = {"generated": generated, "closure": closure_driver(), "general": general}
    x, y = fiamma.rand(16), fiamma.rand(16)
    for f in variants.values():
        assert f(x, y).tolist() == generated(x, y).tolist()
    best = dict.fromkeys(variants, float("inf"))
    timer = timeit.Timer("x + y", globals={"x": x, "y": y})
    try:
        for _ in range(SAMPLES):
            for name, f in variants.items():
                fiamma.Tensor.__add__ = f
                best[name] = min(best[name], timer.timeit(CALLS) / CALLS)
    finally:
        fiamma.Tensor.__add__ = generated
    for name, t in best.items():
        print(f"x + y via the {name:9s} entry: {t * 1e6:.3f} us")


if __name__ == "__main__":
    main()
