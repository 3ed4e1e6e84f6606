"""fiamma.profiler: events of a known program (names, counts, nesting, shapes, times), the
key_averages table, the Chrome trace's schema, schedules, memory against the allocator's
counters, record_function, and that nothing of the profiler stays in place after a profile."""

import gzip
import json
import os
import types
import warnings

import numpy as np
import pytest

import fiamma
from fiamma.profiler import (
    ProfilerAction,
    ProfilerActivity,
    _record,
    hook,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)


def _names(events):
    return [e.name for e in events]


def _depth(e):
    d, p = 0, e.cpu_parent
    while p is not None:
        d, p = d + 1, p.cpu_parent
    return d


def _program():
    a = fiamma.ones(2, 3)
    b = a * 2
    b.sum()
    with record_function("blk"):
        d = fiamma.matmul(a, a.t())
        d.exp() + 1
    a[0]
    a.reshape(3, 2).contiguous()
    a += 1
    return a


# ---- events of a known program ----------------------------------------------------------------

def test_known_program_events_and_nesting():
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        _program()
    ev = prof.events()
    assert _names(ev) == ["aten::ones", "aten::mul", "aten::sum", "blk", "aten::t",
                          "aten::matmul", "aten::exp", "aten::add", "aten::index",
                          "aten::reshape", "aten::contiguous", "aten::add_"]
    blk = ev[3]
    assert [c.name for c in blk.cpu_children] == ["aten::t", "aten::matmul", "aten::exp",
                                                   "aten::add"]
    assert all(c.cpu_parent is blk for c in blk.cpu_children)
    assert [_depth(e) for e in ev] == [0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]
    shapes = {e.name: e.input_shapes for e in ev}
    assert shapes["aten::mul"] == [[2, 3], []]
    assert shapes["aten::matmul"] == [[2, 3], [3, 2]]
    assert shapes["aten::sum"] == [[2, 3]]
    assert shapes["aten::add_"] == [[2, 3], []]
    assert [e.id for e in ev] == list(range(1, len(ev) + 1))


def test_times_self_and_total():
    with profile() as prof:
        _program()
    for e in prof.events():
        assert e.cpu_time_total > 0
        assert e.self_cpu_time_total == pytest.approx(
            e.cpu_time_total - sum(c.cpu_time_total for c in e.cpu_children))
        assert e.self_cpu_time_total >= 0
        tr = e.time_range
        assert tr.elapsed_us() == pytest.approx(e.cpu_time_total)
        for c in e.cpu_children:  # children lie inside their parent
            assert tr.start <= c.time_range.start <= c.time_range.end <= tr.end
    ev = prof.events()
    assert ev.self_cpu_time_total == pytest.approx(sum(e.self_cpu_time_total for e in ev))
    # top-level events' totals add up to the self total of everything
    top = sum(e.cpu_time_total for e in ev if e.cpu_parent is None)
    assert ev.self_cpu_time_total == pytest.approx(top)


def test_method_and_operator_are_one_event_each():
    x, y = fiamma.ones(4), fiamma.ones(4)
    with profile() as prof:
        x + y
        fiamma.add(x, y)
        x.add(y)
        x.exp()
        fiamma.exp(x)
        x.sum(0)
    assert _names(prof.events()) == ["aten::add"] * 3 + ["aten::exp"] * 2 + ["aten::sum"]
    assert all(e.cpu_parent is None for e in prof.events())


def test_metadata_methods_are_not_events():
    x = fiamma.ones(2, 3)
    with profile() as prof:
        x.size(), x.dim(), x.numel(), x.stride(), x.is_contiguous(), x.shape, x.dtype
        fiamma.is_grad_enabled(), fiamma.get_default_dtype()
    assert len(prof.events()) == 0


def test_exception_inside_an_op_closes_its_event():
    with profile() as prof:
        with pytest.raises(RuntimeError):
            fiamma.ones(2, 3) @ fiamma.ones(2, 3)
        fiamma.zeros(1)
    ev = prof.events()
    assert _names(ev) == ["aten::ones", "aten::ones", "aten::matmul", "aten::zeros"]
    assert all(e.cpu_parent is None for e in ev)


def test_ops_on_other_threads_have_their_own_nesting(tmp_path):
    import threading

    def work():
        with record_function("in_thread"):
            fiamma.ones(2).exp()

    with profile() as prof:
        with record_function("main"):
            t = threading.Thread(target=work)
            t.start()
            t.join()
            fiamma.zeros(1)
    ev = prof.events()
    by = {e.name: e for e in ev}
    assert by["in_thread"].cpu_parent is None  # not nested in the main thread's block
    assert by["in_thread"].thread != by["main"].thread
    assert [c.name for c in by["in_thread"].cpu_children] == ["aten::ones", "aten::exp"]
    assert [c.name for c in by["main"].cpu_children] == ["aten::zeros"]
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    xs = [t for t in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
          if t["ph"] == "X"]
    assert len({t["tid"] for t in xs}) == 2


def test_linalg_functions_are_recorded_when_loaded():
    import fiamma.linalg

    m = fiamma.eye(3) * 2
    with profile() as prof:
        fiamma.linalg.inv(m)
    assert "aten::linalg_inv" in _names(prof.events())


# ---- key_averages and the table ---------------------------------------------------------------

def test_key_averages_counts_and_grouping():
    a, b = fiamma.ones(3), fiamma.ones(2, 2)
    with profile(record_shapes=True) as prof:
        for _ in range(5):
            a + a
        for _ in range(2):
            b + b
        a.exp()
    avg = prof.key_averages()
    by = {x.key: x for x in avg}
    assert [x.key for x in avg] == ["aten::add", "aten::exp"]
    assert by["aten::add"].count == 7 and by["aten::exp"].count == 1
    adds = [e for e in prof.events() if e.name == "aten::add"]
    assert by["aten::add"].cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in adds))
    assert by["aten::add"].cpu_time == pytest.approx(by["aten::add"].cpu_time_total / 7)
    shaped = prof.key_averages(group_by_input_shape=True)
    assert [(x.key, x.input_shapes, x.count) for x in shaped] == [
        ("aten::add", [[3], [3]], 5), ("aten::add", [[2, 2], [2, 2]], 2),
        ("aten::exp", [[3]], 1)]
    total = prof.events().total_average()
    assert total.key == "Total" and total.count == 8


def test_table_content():
    a = fiamma.ones(64, 64)
    with profile(record_shapes=True, profile_memory=True) as prof:
        for _ in range(3):
            a @ a
        with record_function("outer"):
            a.exp()
    t = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    lines = t.splitlines()
    header = lines[1]
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "CPU Mem", "Self CPU Mem", "# of Calls"):
        assert col in header
    assert "CUDA" not in header and "Input Shapes" not in header
    rows = {ln.split()[0]: ln for ln in lines[3:-2]}
    assert set(rows) == {"aten::matmul", "outer", "aten::exp"}
    assert rows["aten::matmul"].split()[-1] == "3"
    assert "16.00 Kb" in rows["aten::exp"]  # its 64x64 float32 result
    assert lines[-1].startswith("Self CPU time total: ")
    # sorted by CPU total, descending
    order = [ln.split()[0] for ln in lines[3:-2]]
    totals = {x.key: x.cpu_time_total for x in prof.key_averages()}
    assert order == sorted(totals, key=totals.get, reverse=True)
    one = prof.key_averages().table(sort_by="count", row_limit=1)
    assert len(one.splitlines()) == 6 and "aten::matmul" in one
    shaped = prof.key_averages(group_by_input_shape=True).table()
    assert "Input Shapes" in shaped and "[[64, 64], [64, 64]]" in shaped
    plain = profile()
    with plain:
        a.exp()
    assert "CPU Mem" not in plain.key_averages().table()
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="bogus")


def test_stacks_and_group_by_stack_n(tmp_path):
    def inner():
        return fiamma.ones(2).exp()

    with profile(with_stack=True) as prof:
        inner()
        fiamma.ones(2).exp()
    exps = [e for e in prof.events() if e.name == "aten::exp"]
    assert "inner" in exps[0].stack[0] and __file__ in exps[0].stack[0]
    assert "test_stacks_and_group_by_stack_n" in exps[1].stack[0]
    grouped = prof.key_averages(group_by_stack_n=1)
    assert len([g for g in grouped if g.key == "aten::exp"]) == 2
    assert "Source Location" in grouped.table()
    assert len([g for g in prof.key_averages() if g.key == "aten::exp"]) == 1
    path = tmp_path / "stacks.txt"
    prof.export_stacks(str(path))
    lines = path.read_text().splitlines()
    assert lines and all(ln.rsplit(" ", 1)[1].isdigit() for ln in lines)
    assert any(ln.rsplit(" ", 1)[0].endswith(";aten::exp") for ln in lines)


# ---- the Chrome trace -------------------------------------------------------------------------

def _check_trace(trace, prof):
    assert isinstance(trace["traceEvents"], list)
    xs = [t for t in trace["traceEvents"] if t["ph"] == "X"]
    for t in trace["traceEvents"]:
        assert {"ph", "name", "pid", "tid"} <= set(t)
        assert isinstance(t["pid"], int) and isinstance(t["tid"], int)
    for t in xs:
        assert isinstance(t["ts"], (int, float)) and isinstance(t["dur"], (int, float))
        assert t["dur"] >= 0 and isinstance(t["name"], str) and "cat" in t
    assert [t["name"] for t in xs] == _names(prof.events())
    by_id = {t["args"]["External id"]: t for t in xs}
    for t in xs:  # a child's span lies inside its parent's
        pid = t["args"].get("Parent id")
        if pid is not None:
            p = by_id[pid]
            assert p["ts"] <= t["ts"] + 1e-3 and t["ts"] + t["dur"] <= p["ts"] + p["dur"] + 2e-3
    assert any(t["ph"] == "M" and t["name"] == "process_name" for t in trace["traceEvents"])
    return xs


def test_chrome_trace_schema(tmp_path):
    with profile(record_shapes=True) as prof:
        _program()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    xs = _check_trace(trace, prof)
    mul = next(t for t in xs if t["name"] == "aten::mul")
    assert mul["cat"] == "cpu_op" and mul["args"]["Input Dims"] == [[2, 3], []]
    assert next(t for t in xs if t["name"] == "blk")["cat"] == "user_annotation"
    assert len({t["tid"] for t in xs}) == 1 and xs[0]["pid"] == os.getpid()
    gz = tmp_path / "trace.json.gz"
    prof.export_chrome_trace(str(gz))
    assert json.loads(gzip.decompress(gz.read_bytes())) == trace | {"traceName": str(gz)}
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def test_tensorboard_trace_handler(tmp_path):
    d = tmp_path / "tb"
    with profile(on_trace_ready=tensorboard_trace_handler(str(d), worker_name="w0")) as prof:
        fiamma.ones(3) + 1
    files = os.listdir(d)
    assert len(files) == 1 and files[0].startswith("w0.") and files[0].endswith(".pt.trace.json")
    _check_trace(json.loads((d / files[0]).read_text()), prof)
    with profile(on_trace_ready=tensorboard_trace_handler(str(d), "w1", use_gzip=True)):
        fiamma.ones(3)
    gz = [f for f in os.listdir(d) if f.startswith("w1.")]
    assert len(gz) == 1 and gz[0].endswith(".pt.trace.json.gz")


# ---- schedules ---------------------------------------------------------------------------------

def test_schedule_actions():
    A = ProfilerAction
    s = schedule(wait=1, warmup=1, active=2, repeat=2)
    assert [s(i) for i in range(10)] == [A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE] * 2 + [
        A.NONE, A.NONE]
    s = schedule(wait=2, warmup=1, active=1, skip_first=3)
    assert [s(i) for i in range(11)] == [A.NONE] * 3 + [A.NONE, A.NONE, A.WARMUP,
                                                         A.RECORD_AND_SAVE] * 2
    s = schedule(wait=2, warmup=1, active=1, repeat=1, skip_first_wait=1)
    assert [s(i) for i in range(4)] == [A.WARMUP, A.RECORD_AND_SAVE, A.NONE, A.NONE]
    with pytest.raises(ValueError, match="active"):
        schedule(wait=1, warmup=1, active=0)
    with pytest.raises(ValueError, match="wait"):
        schedule(wait=-1, warmup=1, active=1)
    with pytest.warns(UserWarning, match="warmup"):
        schedule(wait=0, warmup=0, active=1)


@pytest.mark.parametrize("repeat,steps,expected", [(2, 12, 2), (0, 12, 3), (1, 3, 1)])
def test_schedule_cycles_call_on_trace_ready(repeat, steps, expected):
    seen = []

    def ready(p):
        seen.append([e.name for e in p.events() if e.cpu_parent is None])

    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=repeat),
                 on_trace_ready=ready) as prof:
        for i in range(steps):
            with record_function(f"iter{i}"):
                fiamma.ones(1)
            prof.step()
    assert len(seen) == expected
    for k, names in enumerate(seen):  # only the active steps' events, each in its step
        first = 4 * k + 2
        assert names == [f"ProfilerStep#{first}", f"ProfilerStep#{first + 1}"]
        cycle = [e for e in prof.events()] if k == len(seen) - 1 else None
        if cycle is not None:
            iters = [e for e in cycle if e.name.startswith("iter")]
            want = [f"iter{i}" for i in (first, first + 1) if i < steps]
            assert [e.name for e in iters] == want
            assert [e.cpu_parent.name for e in iters] == names[:len(want)]
    assert prof.step_num == steps
    assert not _record.installed()


def test_schedule_waits_record_nothing():
    recording, installed = [], []
    with profile(schedule=schedule(wait=2, warmup=1, active=1, repeat=1)) as prof:
        for _ in range(6):
            recording.append(_record.current_recorder() is not None)
            installed.append(_record.installed())
            fiamma.ones(1)
            prof.step()
    assert recording == [False, False, True, True, False, False]
    # the wrappers stay for the whole profile (see _record.acquire) and go at its stop
    assert all(installed) and not _record.installed()
    assert [e.name for e in prof.events()] == ["ProfilerStep#3", "aten::ones"]


def test_stop_during_record_saves_and_acc_events():
    calls = []
    with profile(schedule=schedule(wait=0, warmup=1, active=3), on_trace_ready=calls.append,
                 acc_events=True) as prof:
        for i in range(6):  # cycles: W R R S | W R (stopped while recording)
            fiamma.full((1,), float(i))
            prof.step()
    assert len(calls) == 2
    fulls = [e for e in prof.events() if e.name == "aten::full"]
    assert len(fulls) == 4  # steps 1, 2, 3 of the first cycle and 5 of the second
    starts = [e.time_range.start for e in fulls]
    assert starts == sorted(starts)
    assert len({e.id for e in prof.events()}) == len(prof.events())


def test_start_stop_and_errors():
    p = profile()
    with pytest.raises(RuntimeError, match="not running"):
        p.step()
    p.start()
    try:
        with pytest.raises(RuntimeError, match="already"):
            p.start()
        with pytest.raises(RuntimeError, match="already running"):
            profile().start()
        fiamma.ones(2)
    finally:
        p.stop()
    assert _names(p.events()) == ["aten::ones"]
    p.stop()  # a second stop does nothing
    with pytest.raises(NotImplementedError, match="with_modules"):
        profile(with_modules=True)
    with pytest.raises(TypeError, match="ProfilerActivity"):
        profile(activities=["cpu"])
    with pytest.raises(TypeError, match="on_trace_ready"):
        profile(on_trace_ready=3)


# ---- memory against the allocator's counters -------------------------------------------------

def _allocated():
    from fiamma._storage import drain_small_pool

    drain_small_pool()  # blocks parked on the Python-side free lists count as free
    return fiamma.cpu_memory_stats()["allocated_bytes"]


def test_memory_columns_match_the_allocator():
    keep = []
    before = _allocated()
    with profile(profile_memory=True) as prof:
        keep.append(fiamma.zeros(1000, 1000))       # 4,000,000 bytes
        keep.append(fiamma.ones(3))                  # one small block
        with record_function("tmp"):
            t = fiamma.ones(256, 256)
            keep.append(t.sum())
            del t                                    # freed inside the block
    after = _allocated()
    ev = {}
    for e in prof.events():
        ev.setdefault(e.name, e)
    assert sum(e.cpu_memory_usage for e in prof.events() if e.cpu_parent is None) == \
        after - before
    from fiamma.profiler._record import _allocator_bytes

    assert ev["aten::zeros"].cpu_memory_usage == _allocator_bytes(4_000_000)
    assert ev["aten::ones"].cpu_memory_usage == 64
    tmp = ev["tmp"]
    assert tmp.cpu_memory_usage == 64  # only the sum's 0-d result outlives the block
    assert tmp.self_cpu_memory_usage == 64 - sum(c.cpu_memory_usage for c in tmp.cpu_children)
    assert tmp.self_cpu_memory_usage == -_allocator_bytes(256 * 256 * 4)
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["aten::ones"].cpu_memory_usage == 64 + _allocator_bytes(256 * 256 * 4)


def test_memory_off_records_zero():
    with profile() as prof:
        fiamma.zeros(100, 100)
    assert prof.events()[0].cpu_memory_usage == 0


# ---- record_function --------------------------------------------------------------------------

def test_record_function_nesting_and_decorator():
    @record_function("deco")
    def f(x):
        return x * 3

    with profile() as prof:
        with record_function("a"):
            with record_function("b"):
                f(fiamma.ones(1))
            fiamma.ones(1)
        try:
            with record_function("c"):
                raise KeyError("x")
        except KeyError:
            pass
    ev = prof.events()
    assert _names(ev) == ["a", "b", "aten::ones", "deco", "aten::mul", "aten::ones", "c"]
    parents = [e.cpu_parent.name if e.cpu_parent else None for e in ev]
    assert parents == [None, "a", "b", "b", "deco", "a", None]
    assert f(fiamma.ones(1)).item() == 3.0 and f.__name__ == "f"
    with record_function("off"):  # no profile: nothing happens
        pass
    with pytest.raises(TypeError, match="str"):
        record_function(3)


def test_register_ops(tmp_path, monkeypatch):
    mod = types.ModuleType("my_ops_for_profiler")
    exec("import fiamma\ndef double(x):\n    return fiamma.mul(x, 2)\n"
         "def _helper(x):\n    return x\n", mod.__dict__)
    monkeypatch.setitem(__import__("sys").modules, mod.__name__, mod)
    monkeypatch.setattr(_record, "_REGISTERED", dict(_record._REGISTERED))
    fiamma.profiler.register_ops(mod, prefix="my_")
    plain = mod.double
    with profile() as prof:
        mod.double(fiamma.ones(2))
        mod._helper(1)
    assert _names(prof.events()) == ["aten::ones", "aten::my_double", "aten::mul"]
    assert mod.double is plain
    mod2 = types.ModuleType("my_ops_for_profiler2")
    exec("def triple(x):\n    return x * 3\n", mod2.__dict__)
    monkeypatch.setitem(__import__("sys").modules, mod2.__name__, mod2)
    with profile() as prof:  # registered while recording: recorded from then on
        mod2.triple(fiamma.ones(2))
        fiamma.profiler.register_ops("my_ops_for_profiler2")
        mod2.triple(fiamma.ones(2))
    assert _names(prof.events()) == ["aten::ones", "aten::mul", "aten::ones", "aten::triple",
                                     "aten::mul"]
    assert not _record.installed() and type(mod2.triple) is types.FunctionType
    assert not getattr(mod2.triple, "_fiamma_profiler_wrapper", False)


def test_hook_call():
    assert hook.enabled is False
    assert hook.call("x", lambda a, b: a + b, 1, b=2) == 3
    with profile(record_shapes=True) as prof:
        assert hook.enabled is True
        x = fiamma.ones(2)
        hook.call("my_event", lambda t: t * 2, x)
    assert hook.enabled is False
    ev = prof.events()
    assert _names(ev) == ["aten::ones", "my_event", "aten::mul"]
    assert ev[1].input_shapes == [[2]] and ev[2].cpu_parent is ev[1]


# ---- zero cost when off (structural) -----------------------------------------------------------

def _snapshot():
    import fiamma.linalg

    mods = [fiamma.Tensor, fiamma, fiamma.linalg]
    return [(m, k, v) for m in mods for k, v in list(vars(m).items())
            if isinstance(v, types.FunctionType)]


def test_no_wrapper_stays_after_the_profile():
    before = _snapshot()
    add = fiamma.Tensor.__add__
    with profile():
        assert fiamma.Tensor.__add__ is not add and _record.installed()
        wrapped_add = fiamma.add
        fiamma.ones(1) + 1
    assert fiamma.Tensor.__add__ is add
    assert _snapshot() == before
    assert not _record.installed() and _record.current_recorder() is None
    assert not any(getattr(v, "_fiamma_profiler_wrapper", False) for _, _, v in _snapshot())
    # a wrapper kept from inside the profile just calls the op
    assert wrapped_add(fiamma.ones(1), 1).item() == 2.0
    with pytest.raises(ValueError):
        with profile():
            raise ValueError("boom")
    assert _snapshot() == before and not hook.enabled


# ---- CUDA: device time from CUDA events, over the stand-in for CuPy ---------------------------

@pytest.fixture
def fake_cuda():
    if fiamma.cuda.is_available() and "_fake_cupy" not in str(type(fiamma.cuda)):
        pytest.skip("a GPU is here: test_profiler_cuda runs on the real one")
    import _fake_cupy

    with _fake_cupy.cuda_backend() as be:
        yield be


def test_cuda_activity_times_ops_on_cuda_tensors(fake_cuda, tmp_path):
    x = fiamma.ones(4, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 profile_memory=True) as prof:
        y = x + 1
        fiamma.ones(4) * 2          # CPU only: no device time
        y.to("cpu")
    ev = prof.events()
    by = {e.name: e for e in ev}
    # the stand-in's get_elapsed_time answers 0.25 ms for every pair of events
    assert by["aten::add"].device_time_total == pytest.approx(250.0)
    assert by["aten::mul"].device_time_total == 0 and by["aten::ones"].device_time_total == 0
    assert by["aten::to"].device_time_total == pytest.approx(250.0)
    table = prof.key_averages().table()
    assert "Self CUDA" in table and "CUDA total" in table and "Self CUDA time total" in table
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    kernels = [t for t in trace["traceEvents"] if t.get("cat") == "kernel"]
    assert [k["name"] for k in kernels] == ["aten::add", "aten::to"]
    assert all(k["dur"] == pytest.approx(250.0) for k in kernels)
    assert {"id": 0, "name": "Fake GPU"} in trace["deviceProperties"]


def test_cuda_activity_without_cuda_warns():
    if fiamma.cuda.is_available():
        pytest.skip("CUDA is available here")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fiamma.ones(1)
    assert any("CUDA" in str(x.message) for x in w)
    assert _names(prof.events()) == ["aten::ones"]


# ---- with_flops ----------------------------------------------------------------------------

def _flop_ops(rng):
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 32)).astype(np.float32)
    bias = rng.standard_normal(32).astype(np.float32)
    x = rng.standard_normal((4, 8, 16)).astype(np.float32)
    y = rng.standard_normal((4, 16, 5)).astype(np.float32)
    v = rng.standard_normal(16).astype(np.float32)
    return [("mm", (a, b)), ("addmm", (bias, a, b)), ("bmm", (x, y)),
            ("baddbmm", (rng.standard_normal((4, 8, 5)).astype(np.float32), x, y)),
            ("matmul", (x, b)), ("matmul", (v, b)), ("mul", (x, x)), ("add", (a, a)),
            ("sub", (a, a))]


def test_with_flops_counts():
    rng = np.random.default_rng(0)
    with profile(with_flops=True) as p:
        for name, args in _flop_ops(rng):
            getattr(fiamma, name)(*[fiamma.tensor(t) for t in args])
        fiamma.ones(3).mul(2.0)
    got = [(e.name, e.flops) for e in p.events() if e.name != "aten::tensor"]
    assert got == [("aten::mm", 2 * 8 * 16 * 32), ("aten::addmm", 2 * 8 * 16 * 32),
                   ("aten::bmm", 2 * 4 * 8 * 16 * 5), ("aten::baddbmm", 2 * 4 * 8 * 16 * 5),
                   ("aten::matmul", 2 * 4 * 8 * 16 * 32), ("aten::matmul", 2 * 16 * 32),
                   ("aten::mul", 4 * 8 * 16), ("aten::add", 8 * 16), ("aten::sub", 0),
                   ("aten::ones", 0), ("aten::mul", 3)]
    avg = {a.key: a.flops for a in p.key_averages()}
    assert avg["aten::matmul"] == 2 * 4 * 8 * 16 * 32 + 2 * 16 * 32 and avg["aten::mul"] == 515
    table = p.key_averages().table(sort_by="flops", row_limit=3)
    assert "Total FLOPs" in table
    first = table.splitlines()[3]
    assert first.startswith("aten::matmul") and first.rstrip().endswith(
        f"{2 * 4 * 8 * 16 * 32 + 2 * 16 * 32:8.3f}")
    # without with_flops: no counts, no column
    with profile() as p2:
        fiamma.mm(fiamma.ones(2, 2), fiamma.ones(2, 2))
    assert [e.flops for e in p2.events()] == [0, 0, 0]
    assert "FLOPs" not in p2.key_averages().table()


def test_with_flops_table_unit():
    with profile(with_flops=True) as p:
        fiamma.ones(1000, 1000).mul(2.0)
    assert "Total MFLOPs" in p.key_averages().table()
    assert "   1.000" in p.key_averages().table()


@pytest.mark.parity
def test_with_flops_parity():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    ops = _flop_ops(rng)
    with torch.profiler.profile(with_flops=True) as tp:
        for name, args in ops:
            if name != "matmul":  # torch's matmul forwards to mm/bmm/dot, which hold the count
                getattr(torch, name)(*[torch.from_numpy(t) for t in args])
    with profile(with_flops=True) as fp:
        for name, args in ops:
            if name != "matmul":
                getattr(fiamma, name)(*[fiamma.tensor(t) for t in args])
    want = {a.key: a.flops for a in tp.key_averages() if a.flops}
    got = {a.key: a.flops for a in fp.key_averages() if a.flops}
    assert got == want
