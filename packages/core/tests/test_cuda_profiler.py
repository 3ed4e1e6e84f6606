"""fiamma.profiler's device time on a real GPU (issue 26): CUDA events around each op on a cuda
tensor, in the table and the Chrome trace. test_profiler.py checks the same plumbing over the
stand-in for CuPy; these run only where CuPy sees a GPU (benchmarks/gpu/run.sh)."""

import json

import pytest
from conftest import _cuda_reason

import fiamma
from fiamma.profiler import ProfilerActivity, profile

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(_cuda_reason() is not None, reason=str(_cuda_reason()))]


def _by_name(events):
    out = {}
    for e in events:
        out.setdefault(e.name, []).append(e)
    return out


def test_device_time_of_a_large_product_is_measured(tmp_path):
    import cupy

    n = 4096
    a = fiamma.randn(n, n, device="cuda")
    b = fiamma.randn(n, n, device="cuda")
    (a @ b).sum().item()  # warm: cuBLAS handle, kernels compiled
    # the product's time by CUDA events of our own, for comparison
    s, e = cupy.cuda.Event(), cupy.cuda.Event()
    s.record()
    for _ in range(3):
        a @ b
    e.record()
    e.synchronize()
    ref_ms = cupy.cuda.get_elapsed_time(s, e) / 3
    assert ref_ms > 0
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        c = a @ b
        fiamma.ones(3) * 2  # a CPU op: no device time
        host = c[:2, :2].to("cpu")
    assert host.shape == (2, 2)
    by = _by_name(prof.events())
    mm = [ev for k, v in by.items() if k in ("aten::mm", "aten::matmul") for ev in v]
    assert mm, sorted(by)
    dev_us = max(ev.device_time_total for ev in mm)
    # 2 n^3 flops at well under 1000 TFLOP/s take > 0.1 ms; the events bracket the same work
    assert dev_us > 100.0
    assert 0.3 * ref_ms * 1e3 < dev_us < 5 * ref_ms * 1e3 + 1000
    assert all(ev.device_time_total == 0 for ev in by["aten::mul"])
    table = prof.key_averages().table(sort_by="cuda_time_total")
    assert "Self CUDA" in table and "CUDA total" in table
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    kernels = [t for t in trace["traceEvents"] if t.get("cat") == "kernel"]
    assert any(k["name"] in ("aten::mm", "aten::matmul") and k["dur"] > 100 for k in kernels)
    names = [d["name"] for d in trace.get("deviceProperties", [])]
    assert any(fiamma.cuda.get_device_name() in nm for nm in names), names


def test_training_step_profiles_forward_backward_and_step():
    fiamma.manual_seed(0)
    model = fiamma.nn.Sequential(fiamma.nn.Linear(64, 128), fiamma.nn.ReLU(),
                                 fiamma.nn.Linear(128, 10)).to("cuda")
    opt = fiamma.optim.SGD(model.parameters(), lr=0.1)
    x = fiamma.randn(32, 64, device="cuda")
    y = fiamma.randint(0, 10, (32,), device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        loss = fiamma.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
    ev = prof.events()
    names = {e.name for e in ev}
    assert "aten::addmm" in names or "aten::linear" in names or "aten::mm" in names, names
    assert any("Backward" in n for n in names), names
    assert any("Optimizer.step" in n for n in names), names
    assert sum(e.device_time_total for e in ev) > 0
