"""``python -m fiamma.distributed.launch`` (PyTorch's deprecated ``torch.distributed.launch``):
torchrun's launcher (:mod:`fiamma.distributed.run`) with the old convention that each script
gets ``--local-rank=N`` before its own arguments, unless ``--use-env`` (then only the
``LOCAL_RANK`` environment variable, as with torchrun).

    python -m fiamma.distributed.launch --nproc_per_node 2 train.py --epochs 3
"""

from __future__ import annotations

import sys
import warnings

from fiamma.distributed import run

_USE_ENV = ("--use-env", "--use_env")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    # launcher flags come before the script; the script's own arguments are left alone
    script_at = next((i for i, a in enumerate(argv) if not a.startswith("-")
                      and (i == 0 or not _takes_value(argv[i - 1]))), len(argv))
    use_env = any(a in _USE_ENV for a in argv[:script_at])
    argv = [a for i, a in enumerate(argv) if i >= script_at or a not in _USE_ENV]
    warnings.warn("fiamma.distributed.launch is deprecated (as torch.distributed.launch is): "
                  "use python -m fiamma.distributed.run (torchrun's command line); scripts "
                  "read LOCAL_RANK from the environment there", FutureWarning, stacklevel=2)
    env = {} if use_env else {"FIAMMA_LAUNCH_LOCAL_RANK_ARG": "1"}
    return run.main(argv, extra_env=env, prog="python -m fiamma.distributed.launch")


_FLAGS_WITH_VALUE = {"--nnodes", "--nproc-per-node", "--nproc_per_node", "--node-rank",
                     "--node_rank", "--master-addr", "--master_addr", "--master-port",
                     "--master_port", "--rdzv-backend", "--rdzv_backend", "--rdzv-endpoint",
                     "--rdzv_endpoint", "--rdzv-id", "--rdzv_id", "--max-restarts",
                     "--max_restarts", "--hostfile", "--mpiexec"}


def _takes_value(flag):
    return flag in _FLAGS_WITH_VALUE


if __name__ == "__main__":
    sys.exit(main())
