"""Prints the launcher's environment of this rank as JSON, and checks it against MPI."""

import json
import os

import fiamma.distributed as dist

dist.init_process_group()  # env:// is the default: RANK/WORLD_SIZE must agree with MPI
names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
         "MASTER_PORT", "OMP_NUM_THREADS", "TORCHELASTIC_RUN_ID")
rec = {k: os.environ.get(k) for k in names}
rec["mpi_rank"], rec["mpi_size"] = dist.get_rank(), dist.get_world_size()
rec["launched"] = dist.is_torchelastic_launched()
everyone = [None] * dist.get_world_size()
dist.all_gather_object(everyone, rec)
if dist.get_rank() == 0:
    print("ENV " + json.dumps(everyone), flush=True)
dist.destroy_process_group()
