"""fiamma.multiprocessing.spawn / start_processes (torch.multiprocessing.spawn's contract):
fn(i, *args) in each process, a child's exception or exit raised in the parent with its
traceback or exit code, the other children stopped, join(timeout) polling."""

import warnings

import mp_workers as W
import pytest

import fiamma
import fiamma.multiprocessing as mp


def test_spawn_runs_fn_with_the_index_and_args():
    out = fiamma.zeros(3).share_memory_()
    assert mp.spawn(W.spawn_fill, args=(out, 10.0), nprocs=3) is None
    assert out.tolist() == [10.0, 11.0, 12.0]


def test_start_processes_fork_and_join_false():
    out = fiamma.zeros(2).share_memory_()
    ctx = mp.start_processes(W.spawn_fill, args=(out, 1.0), nprocs=2, join=False,
                             start_method="fork")
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 2
    while not ctx.join(timeout=30):
        pass
    assert out.tolist() == [1.0, 2.0]
    assert ctx.join() is True  # joining again after success is fine


def test_join_with_timeout_reports_still_running():
    ctx = mp.start_processes(W.spawn_sleep, args=(1.0,), nprocs=1, join=False,
                             start_method="fork")
    assert ctx.join(timeout=0) is False
    while not ctx.join(timeout=30):
        pass


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_raising_child_is_reported_with_its_traceback_and_the_others_stopped(method):
    ctx = mp.start_processes(W.spawn_fail_one, args=(1, "raise"), nprocs=3, join=False,
                             start_method=method)
    with pytest.raises(mp.ProcessRaisedException) as info:
        while not ctx.join(grace_period=5):
            pass
    e = info.value
    assert e.error_index == 1 and e.pid == ctx.pids()[1]
    assert "-- Process 1 terminated with the following error:" in str(e)
    assert "ValueError: boom in process 1" in str(e) and "Traceback" in str(e)
    assert not any(p.is_alive() for p in ctx.processes)  # the sleepers were stopped


def test_exit_code_and_signal_are_reported():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit "
                       "code 3") as info:
        mp.start_processes(W.spawn_fail_one, args=(0, "exit"), nprocs=2, start_method="fork")
    assert info.value.exit_code == 3 and info.value.signal_name is None
    with pytest.raises(mp.ProcessExitedException, match="terminated with signal SIGKILL") \
            as info:
        mp.start_processes(W.spawn_fail_one, args=(0, "kill"), nprocs=1, start_method="fork")
    assert info.value.signal_name == "SIGKILL" and info.value.error_index == 0


def test_bad_arguments_and_the_start_method_warning():
    with pytest.raises(ValueError, match="nprocs must be a positive int, got 0"):
        mp.spawn(W.spawn_sleep, args=(0,), nprocs=0)
    with pytest.raises(TypeError, match="args must be a tuple or list, got int"):
        mp.spawn(W.spawn_sleep, args=0, nprocs=1)
    # a list is unpacked as a tuple is (PyTorch Lightning passes one)
    mp.start_processes(W.spawn_sleep, args=[0], nprocs=1, start_method="fork")
    with pytest.raises(TypeError, match="fn must be callable"):
        mp.spawn(3, nprocs=1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        mp.spawn(W.spawn_sleep, args=(0,), nprocs=1, start_method="fork")
    assert any(issubclass(x.category, FutureWarning) and "start_processes" in str(x.message)
               for x in w)


def test_exceptions_pickle():
    import pickle

    e = pickle.loads(pickle.dumps(mp.ProcessExitedException("m", 1, 42, -9, "SIGKILL")))
    assert (e.error_index, e.pid, e.exit_code, e.signal_name) == (1, 42, -9, "SIGKILL")
