"""fiamma.jit.trace and fiamma.library operators: one node ``ns::op.overload`` per call (the
operator's inside not traced), written arguments as new values, save/load by name."""

import io

import fiamma
import fiamma.jit as jit
from fiamma.library import custom_op

T = fiamma.Tensor


@custom_op("jitlib::scale_np", mutates_args=())
def scale_np(x: T, k: float) -> T:
    return fiamma.from_numpy(x.numpy() * k)  # NumPy: a trace would bake its result in


@custom_op("jitlib::put", mutates_args={"o"})
def put(x: T, o: T) -> None:
    o.copy_(x)


def _f(x):
    o = fiamma.zeros(3)
    put(x * 2, o)
    return scale_np(x, 3.0) + o


def test_traced_operator_runs_on_new_inputs_and_after_save_load():
    tm = jit.trace(_f, fiamma.ones(3))
    text = str(tm.graph)
    assert "jitlib::scale_np.default" in text and "jitlib::put.default" in text
    x = fiamma.tensor([1.0, 2.0, 3.0])
    assert tm(x).tolist() == _f(x).tolist() == [5.0, 10.0, 15.0]
    buf = io.BytesIO()
    jit.save(tm, buf)
    buf.seek(0)
    assert jit.load(buf)(x).tolist() == [5.0, 10.0, 15.0]
