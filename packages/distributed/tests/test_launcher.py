"""python -m fiamma.distributed.run: torchrun's environment on every rank, its flags, and the
mpiexec command lines it builds."""

import json
import sys

import pytest
from _launch import launch, show

from fiamma.distributed import run


def test_environment_of_every_rank():
    proc = launch(3, "env.py")
    assert proc.returncode == 0, show(proc)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ENV "))
    ranks = json.loads(line[4:])
    port = ranks[0]["MASTER_PORT"]
    assert port.isdigit() and 0 < int(port) < 65536
    run_id = ranks[0]["TORCHELASTIC_RUN_ID"]
    for r, rec in enumerate(ranks):
        assert rec == {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "3",
                       "LOCAL_WORLD_SIZE": "3", "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": port, "OMP_NUM_THREADS": "1",
                       "TORCHELASTIC_RUN_ID": run_id, "mpi_rank": r, "mpi_size": 3,
                       "launched": True}


def test_flags_and_script_arguments(tmp_path):
    script = tmp_path / "echo_args.py"
    script.write_text("import json, os, sys\n"
                      "open(os.path.join(os.path.dirname(__file__), 'args-' + os.environ['RANK']),"
                      " 'w').write(json.dumps([sys.argv[1:], os.environ['MASTER_ADDR'],"
                      " os.environ['MASTER_PORT']]))\n")
    proc = launch(2, str(script), "--lr", "0.1", "-x",
                  flags=("--master-port", "29555", "--master_addr", "localhost"))
    assert proc.returncode == 0, show(proc)
    for r in (0, 1):  # (files: the ranks' printed lines may interleave)
        got = json.loads((tmp_path / f"args-{r}").read_text())
        assert got == [["--lr", "0.1", "-x"], "localhost", "29555"]


def test_exit_code_of_a_failing_script(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import os, sys\nif os.environ['RANK'] == '1':\n"
                      "    sys.exit('no data for rank 1')\n")
    proc = launch(2, str(script))
    assert proc.returncode == 1, show(proc)
    assert "rank 1 (of 2) failed first: exited with code 1; its last error output: no data " \
           "for rank 1" in proc.stderr, show(proc)


def test_max_restarts_starts_the_job_again(tmp_path):
    # torchrun's --max-restarts: a failed job runs again, every rank anew, with the attempt's
    # number in TORCHELASTIC_RESTART_COUNT; the script resumes from its own checkpoint
    script = tmp_path / "flaky.py"
    script.write_text(
        "import os, sys\n"
        "n, m = os.environ['TORCHELASTIC_RESTART_COUNT'], os.environ['TORCHELASTIC_MAX_RESTARTS']\n"
        "d = os.path.dirname(os.path.abspath(__file__))\n"
        "open(os.path.join(d, f'seen-{os.environ[\"RANK\"]}-{n}-{m}'), 'w').close()\n"
        "if os.environ['RANK'] == '1' and int(n) < int(sys.argv[1]):\n"
        "    sys.exit(f'rank 1 fails in attempt {n}')\n")
    proc = launch(2, str(script), "2", flags=("--max-restarts", "3"))
    assert proc.returncode == 0, show(proc)
    assert proc.stderr.count("restarting every rank") == 2, show(proc)
    assert "restart 2 of at most 3" in proc.stderr
    assert sorted(p.name for p in tmp_path.glob("seen-*")) == \
        [f"seen-{r}-{n}-3" for r in (0, 1) for n in (0, 1, 2)]
    # out of restarts: the last attempt's failure is the launcher's
    for p in tmp_path.glob("seen-*"):
        p.unlink()
    proc = launch(2, str(script), "5", flags=("--max-restarts", "1"))
    assert proc.returncode == 1, show(proc)
    assert proc.stderr.count("restarting every rank") == 1, show(proc)
    assert "rank 1 (of 2) failed first: exited with code 1; its last error output: rank 1 " \
           "fails in attempt 1" in proc.stderr, show(proc)
    assert sorted(p.name for p in tmp_path.glob("seen-*")) == \
        [f"seen-{r}-{n}-1" for r in (0, 1) for n in (0, 1)]


def _args(*argv):
    return run._parser().parse_args([*argv, "train.py", "--epochs", "2"])


def test_command_lines():
    cmd = run.command(_args("--nproc-per-node", "4"), "mpiexec", "hydra", 4, 1, ["X"])
    assert cmd == ["mpiexec", "-n", "4", sys.executable, "-m", "fiamma.distributed._bootstrap",
                   "python", "train.py", "--epochs", "2"]
    cmd = run.command(_args("--nnodes", "2", "--hostfile", "hosts", "-m"), "mpiexec", "hydra",
                      8, 2, [])
    assert cmd[:6] == ["mpiexec", "-n", "16", "-f", "hosts", "-ppn"] and cmd[6] == "8"
    assert cmd[-4:] == ["module", "train.py", "--epochs", "2"]
    cmd = run.command(_args("--hostfile", "h"), "mpirun", "openmpi", 2, 2, ["MASTER_PORT"])
    assert cmd[:9] == ["mpirun", "-n", "4", "--oversubscribe", "--hostfile", "h", "--npernode",
                       "2", "-x"]


@pytest.mark.parametrize("argv,text", [
    (["--nnodes", "2"], "--nnodes > 1 needs --hostfile"),
    (["--nnodes", "2", "--node-rank", "1", "--hostfile", "h"], "do not run it on the other"),
    (["--nnodes", "1:4"], "elastic ranges are not supported"),
    (["--max-restarts", "-1"], "--max-restarts must be >= 0"),
])
def test_bad_flags(argv, text, capsys):
    assert run.main([*argv, "train.py"]) == 2
    assert text in capsys.readouterr().err


def test_rank_environment_from_each_mpi_launcher():
    from fiamma.distributed._bootstrap import rank_environment

    hydra = rank_environment({"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1",
                              "MPI_LOCALNRANKS": "4"})
    assert (hydra["RANK"], hydra["LOCAL_RANK"], hydra["GROUP_RANK"], hydra["WORLD_SIZE"]) == \
        ("5", "1", "1", "8")
    ompi = rank_environment({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
                             "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                             "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert (ompi["RANK"], ompi["LOCAL_RANK"], ompi["GROUP_RANK"]) == ("2", "0", "1")
    slurm = rank_environment({"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
                              "SLURM_NTASKS_PER_NODE": "2(x2)"})
    assert (slurm["RANK"], slurm["LOCAL_WORLD_SIZE"], slurm["GROUP_RANK"]) == ("3", "2", "1")
    with pytest.raises(RuntimeError, match="no MPI launcher variables"):
        rank_environment({})


def test_launcher_and_library_that_do_not_match_are_named():
    # mpiexec says 2 ranks (PMI_SIZE=2) but this process's MPI sees a world of one, as when
    # MPICH's mpiexec starts ranks whose mpi4py loaded Open MPI: each rank would train alone
    import os
    import subprocess

    from _launch import env

    code = ("import fiamma.distributed as d\n"
            "try:\n    d.init_process_group('mpi')\n"
            "except RuntimeError as e:\n    print('ERR', e)\n"
            "else:\n    print('ACCEPTED', d.get_world_size())\n")
    e = {**env(), "PMI_SIZE": "2"}
    e.pop("PMI_FD", None)
    e.pop("PMI_PORT", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=e, cwd=os.path.dirname(__file__))
    assert "ERR init_process_group: the launcher started 2 ranks (PMI_SIZE=2)" in proc.stdout, \
        show(proc)
    assert "sees a world of 1" in proc.stdout and "MPI4PY_LIBMPI" in proc.stdout, show(proc)


def _old_launch(n, script, *args, use_env=False):
    import subprocess

    from _launch import env

    flags = ["--nproc_per_node", str(n)] + (["--use_env"] if use_env else [])
    return subprocess.run([sys.executable, "-m", "fiamma.distributed.launch", *flags,
                           str(script), *args], capture_output=True, text=True, timeout=120,
                          env=env())


def test_deprecated_launch_passes_local_rank(tmp_path):
    script = tmp_path / "old_style.py"
    script.write_text(
        "import argparse, json, os\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--local-rank', '--local_rank', type=int, default=-1)\n"
        "p.add_argument('--lr', type=float)\n"
        "a = p.parse_args()\n"
        "open(os.path.join(os.path.dirname(__file__), 'r' + os.environ['RANK']), 'w').write("
        "json.dumps([a.local_rank, a.lr, os.environ['LOCAL_RANK']]))\n")
    proc = _old_launch(2, script, "--lr", "0.5")
    assert proc.returncode == 0, show(proc)
    assert "fiamma.distributed.launch is deprecated" in proc.stderr
    for r in (0, 1):
        assert json.loads((tmp_path / f"r{r}").read_text()) == [r, 0.5, str(r)]
    proc = _old_launch(2, script, "--lr", "0.25", use_env=True)  # LOCAL_RANK only
    assert proc.returncode == 0, show(proc)
    for r in (0, 1):
        assert json.loads((tmp_path / f"r{r}").read_text()) == [-1, 0.25, str(r)]


def test_record_writes_the_error_file_and_the_launcher_names_it(tmp_path, monkeypatch):
    from fiamma.distributed.elastic.multiprocessing.errors import record

    err = tmp_path / "err.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(err))

    @record
    def fails():
        raise ValueError("bad shard 3")

    with pytest.raises(ValueError, match="bad shard 3"):
        fails()
    rec = json.loads(err.read_text())["message"]
    assert rec["message"] == "ValueError: bad shard 3"
    assert "raise ValueError" in rec["extraInfo"]["py_callstack"]
    assert record(lambda: sys.exit(0))() is None
    with pytest.raises(SystemExit):
        record(lambda: sys.exit(2))()
    script = tmp_path / "rec.py"
    script.write_text(
        "import os\n"
        "from torch.distributed.elastic.multiprocessing.errors import record\n"
        "@record\n"
        "def main():\n"
        "    if os.environ['RANK'] == '1':\n"
        "        raise KeyError('missing column')\n"
        "    print('rank 0 done')\n"
        "main()\n")
    import subprocess

    from _launch import env

    proc = subprocess.run([sys.executable, "-m", "fiamma.distributed.run", "--nproc-per-node",
                           "2", "-m", "fiamma.run", str(script)], capture_output=True, text=True,
                          timeout=120, env=env())
    assert proc.returncode == 1, show(proc)
    assert "rank 1 (of 2) failed first: exited with code 1; its last error output: KeyError: " \
           "'missing column'" in proc.stderr, show(proc)
