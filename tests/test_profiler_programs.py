"""fiamma.profiler across packages: autograd's backward nodes, optimizer steps and DataLoader
fetches as events (with the ops they run nested in them), PyTorch's older API
(fiamma.autograd.profiler), and the main job's --profile trace."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import fiamma
import fiamma.nn as nn
from fiamma.data import DataLoader, Dataset, TensorDataset, default_collate
from fiamma.profiler import hook, profile, record_function, schedule

REPO = Path(__file__).resolve().parents[1]
EVAL = "autograd::engine::evaluate_function: "


def _model():
    fiamma.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))


def test_training_step_events():
    m = _model()
    opt = fiamma.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x = fiamma.randn(4, 3)
    with profile(record_shapes=True) as prof:
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
    ev = prof.events()
    top = [e.name for e in ev if e.cpu_parent is None]
    assert top[0] == "Optimizer.zero_grad#SGD.zero_grad"
    assert top[-1] == "Optimizer.step#SGD.step"
    nodes = Counter(e.name[len(EVAL):] for e in ev if e.name.startswith(EVAL))
    # the graph of sum(linear2(relu(linear1(x)))): one node per recorded op, one
    # AccumulateGrad per parameter
    assert nodes == Counter({"SumBackward0": 1, "AddmmBackward0": 2, "TransposeBackward0": 2,
                             "ReluBackward0": 1, "AccumulateGrad": 4})
    assert all(e.cpu_parent is None for e in ev if e.name.startswith(EVAL))
    # the backward formulas' ops are nested in their node's event
    addmm_bw = [e for e in ev if e.name == EVAL + "AddmmBackward0"]
    assert [c.name for c in addmm_bw[0].cpu_children].count("aten::mm") == 2  # dX and dW
    assert [c.name for c in addmm_bw[1].cpu_children].count("aten::mm") == 1  # x needs none
    relu_bw = next(e for e in ev if e.name == EVAL + "ReluBackward0")
    assert relu_bw.input_shapes == [[[4, 5]], []]  # its incoming gradient
    # forward: nn.functional's functions (registered by fiamma-nn) with core's ops nested in
    # them, in program order, as PyTorch shows aten::linear > aten::t, aten::addmm
    fwd = top[1:top.index(EVAL + "SumBackward0")]
    assert fwd == ["aten::linear", "aten::relu", "aten::linear", "aten::sum", "aten::ones_like"]
    linear = next(e for e in ev if e.name == "aten::linear")
    assert [c.name for c in linear.cpu_children] == ["aten::t", "aten::addmm"]
    assert linear.input_shapes == [[4, 3], [5, 3], [5]]
    assert not hook.enabled


def test_backward_inside_record_function_and_step_nesting():
    m = _model()
    opt = fiamma.optim.Adam(m.parameters())
    x = fiamma.randn(4, 3)
    seen = []
    with profile(schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: seen.append(p.events())) as prof:
        for _ in range(4):
            with record_function("bwd"):
                m(x).sum().backward()
            opt.step()
            prof.step()
    assert len(seen) == 1
    ev = seen[0]
    steps = [e for e in ev if e.name.startswith("ProfilerStep#")]
    assert [e.name for e in steps] == ["ProfilerStep#1", "ProfilerStep#2"]
    for s in steps:
        assert [c.name for c in s.cpu_children] == ["bwd", "Optimizer.step#Adam.step"]
        bwd = s.cpu_children[0]
        assert sum(c.name.startswith(EVAL) for c in bwd.cpu_children) == 10


def test_dataloader_fetch_events():
    ds = TensorDataset(fiamma.arange(40.0).reshape(20, 2), fiamma.arange(20))
    loader = DataLoader(ds, batch_size=6)
    with profile(record_shapes=True) as prof:
        batches = [x.sum() for x, _ in loader]
    assert len(batches) == 4
    name = "enumerate(DataLoader)#_SingleProcessIter.__next__"
    fetches = [e for e in prof.events() if e.name == name]
    assert len(fetches) == 5  # four batches and the StopIteration
    assert all(e.cpu_parent is None for e in fetches)
    # the batch's gather (a plain TensorDataset's rows in one indexing op) runs in the fetch
    assert "aten::index" in [c.name for c in fetches[0].cpu_children]
    assert prof.key_averages().table().count(name[:40]) == 1
    # and so does a collate's stacking of samples fetched one by one
    stacked = DataLoader(ds, batch_size=6, collate_fn=lambda b: default_collate(b))
    with profile() as prof:
        assert len([x.sum() for x, _ in stacked]) == 4
    fetches = [e for e in prof.events() if e.name == name]
    assert "aten::stack" in [c.name for c in fetches[0].cpu_children]


class _ProfilerStateInWorker(Dataset):
    """Items that tell whether the process that made them was recording a profile."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        from fiamma.profiler import _record

        return fiamma.tensor([float(hook.enabled), float(_record.installed())])


def test_dataloader_with_workers_fetch_events():
    loader = DataLoader(_ProfilerStateInWorker(), batch_size=4, num_workers=1,
                        multiprocessing_context="fork")
    with profile() as prof:
        batches = list(loader)
    assert len(batches) == 3
    names = [e.name for e in prof.events()]
    assert names.count("enumerate(DataLoader)#MultiProcessIter.__next__") == 4
    # a worker forked while the profile recorded records nothing itself
    assert all(b.sum().item() == 0 for b in batches)


def test_hooks_cost_one_check_when_off():
    m = _model()
    opt = fiamma.optim.SGD(m.parameters(), lr=0.1)
    with profile():
        pass
    assert not hook.enabled
    # with no profile the same program records nothing anywhere
    from fiamma.profiler import _record

    m(fiamma.randn(2, 3)).sum().backward()
    opt.step()
    assert _record.current_recorder() is None and not _record.installed()


# ---- PyTorch's older API ---------------------------------------------------------------------

def test_autograd_profiler_legacy_api(tmp_path):
    from fiamma.autograd import profiler

    m = _model()
    x = fiamma.randn(4, 3)
    with profiler.profile(record_shapes=True, profile_memory=True) as prof:
        with profiler.record_function("model_forward"):
            y = m(x)
        y.sum().backward()
    names = [e.name for e in prof.function_events]
    assert names[0] == "model_forward" and EVAL + "AddmmBackward0" in names
    keys = [a.key for a in prof.key_averages()]
    assert "aten::addmm" in keys and "model_forward" in keys
    table = prof.table(sort_by="self_cpu_time_total", row_limit=5)
    assert "Self CPU time total" in table and "CPU Mem" in table
    assert prof.total_average().count == len(names)
    path = tmp_path / "legacy.json"
    prof.export_chrome_trace(str(path))
    assert [t["name"] for t in json.loads(path.read_text())["traceEvents"]
            if t["ph"] == "X"] == names
    assert fiamma.autograd.profiler.record_function is record_function
    off = profiler.profile(enabled=False)
    with off:
        m(x)
    with pytest.raises(RuntimeError, match="didn't finish"):
        off.table()
    p = profiler.profile()
    with p:
        with pytest.raises(RuntimeError, match="reentrant"):
            p.__enter__()


def test_torch_names_under_the_runner():
    from fiamma._torch_alias import target_name

    assert target_name("torch.profiler") == "fiamma.profiler"
    assert target_name("torch.autograd.profiler") == "fiamma.autograd.profiler"


# ---- the main job's --profile ------------------------------------------------------------------

SCRIPT = REPO / "examples" / "train_digits.py"


@pytest.mark.skipif(not SCRIPT.exists(), reason="not running from a checkout")
def test_main_job_profile_writes_a_trace(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--profile",
                           "--epochs", "1", "--limit", "384", "--batch-size", "64"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "profile of training steps 3-5" in proc.stdout and "Self CPU time total" in proc.stdout
    trace = json.loads((out / "trace.json").read_text())
    xs = [t for t in trace["traceEvents"] if t["ph"] == "X"]
    assert all({"ts", "dur", "name", "pid", "tid"} <= set(t) for t in xs)
    names = {t["name"] for t in xs}
    assert {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4", "Optimizer.step#Adam.step",
            "Optimizer.zero_grad#Adam.zero_grad", "aten::conv2d",
            "enumerate(DataLoader)#_SingleProcessIter.__next__"} <= names
    assert "ProfilerStep#1" not in names and "ProfilerStep#5" not in names
    assert any(n.startswith(EVAL) for n in names)
