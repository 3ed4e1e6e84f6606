"""The public autograd hook (fiamma.autograd_hook): core records through a registered recorder
and says to install fiamma-autograd when none is available. Each test runs in a fresh
interpreter so the global registration of the real fiamma-autograd cannot interfere."""

import subprocess
import sys
import textwrap

from conftest import c_kernels_only


def run(code):
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_without_autograd_asking_for_gradients_names_the_distribution():
    out = run("""
        import sys
        sys.modules["fiamma.autograd"] = None     # as if fiamma-autograd were not installed
        import fiamma
        x = fiamma.ones(2)
        assert (x + x).tolist() == [2.0, 2.0]     # core works without autograd
        for action in (lambda: x.requires_grad_(), lambda: x.sum().backward(),
                       lambda: x.register_hook(print), lambda: x.retain_grad()):
            try:
                action()
            except RuntimeError as e:
                assert "pip install fiamma-autograd" in str(e), e
            else:
                raise AssertionError("no error")
        print("ok")
    """)
    assert out.strip() == "ok"


def test_registered_recorder_sees_ops_and_inplace():
    out = run("""
        import sys
        sys.modules["fiamma.autograd"] = None
        import fiamma
        from fiamma import autograd_hook as H
        assert H.registered_recorder() is None
        calls = []

        class Rec:
            # op.name: core passes keys of autograd_hook.ops (a plain str has no .name)
            def record(self, op, out, inputs, kwargs):
                calls.append(("record", op.name, len(inputs)))
            def record_inplace(self, op, out, inputs, kwargs):
                calls.append(("record_inplace", op.name))
            def inplace(self, fn, name, self_, args, kwargs):
                calls.append(("inplace", name))
            def requires_grad_(self, t, flag):
                t.requires_grad = flag

        H.register_autograd(Rec())
        assert H.autograd_module() is H.registered_recorder()
        x = fiamma.ones(3).requires_grad_()
        x * 2
        x + x
        x.sum()
        x[1:]
        with H.no_grad():
            x * 3                       # grad mode off: nothing recorded
        y = fiamma.zeros(3)
        y.mul_(x)
        y.copy_(x)
        print(calls)
    """)
    calls = eval(out)
    assert ("record", "mul", 2) in calls and ("record", "add", 2) in calls
    assert ("record", "sum", 1) in calls
    assert any(c[0] == "record" and c[1] == "getitem" for c in calls)
    assert ("inplace", "mul_") in calls and ("record_inplace", "copy_") in calls
    assert sum(1 for c in calls if c[:2] == ("record", "mul")) == 1


@c_kernels_only  # the operator/unary fast paths are the C backend's (xp records unary ops)
def test_record_new_gets_the_fast_paths_fresh_results():
    out = run("""
        import sys
        sys.modules["fiamma.autograd"] = None
        import fiamma
        from fiamma import autograd_hook as H
        calls = []

        class Rec:
            def record(self, op, out, inputs, kwargs):
                calls.append(("record", op.name, sorted(kwargs)))
            def record_new(self, op, out, inputs):
                assert getattr(out, "_base", None) is None and all(out is not i for i in inputs)
                calls.append(("record_new", op.name, len(inputs)))
            def requires_grad_(self, t, flag):
                t.requires_grad = flag

        H.register_autograd(Rec())
        x = fiamma.ones(3).requires_grad_()
        x + x                            # the operator fast path
        x * 2.0                          # a tensor and a number
        x.exp()                          # the unary fast path
        x[None] * x                      # the general binary path (broadcasting)
        x.add(x, alpha=2)                # keyword arguments: record
        x.view(3)                        # a view: record
        prev = H.set_trace_hook(Rec.__new__(type("T", (), {"record": Rec.record})))
        try:
            x + x                        # a tracer gets record calls only
        finally:
            H.set_trace_hook(prev)
        print(calls)
    """)
    full = eval(out)
    assert full[5] == ("record", "add", ["alpha"]) and full[7] == ("record", "add", [])
    calls = [c[:2] for c in full]
    assert calls == [("record_new", "add"), ("record_new", "mul"), ("record_new", "exp"),
                     ("record", "getitem"), ("record_new", "mul"), ("record", "add"),
                     ("record", "view"), ("record", "add")], calls


def test_views_know_their_root_base():
    import fiamma

    x = fiamma.zeros(4, 3)
    assert getattr(x, "_base", None) is None
    for v in (x.t(), x[1], x[1:3, ::2], x.view(12), x.t()[0][1:], x.unsqueeze(0).expand(2, 4, 3)):
        assert v._base is x
    assert getattr(x.clone(), "_base", None) is None
    assert getattr(x + 1, "_base", None) is None
