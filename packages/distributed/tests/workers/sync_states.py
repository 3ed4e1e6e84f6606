"""torch.distributed.utils._sync_module_states and distributed_c10d's private names on N
ranks: every rank ends with rank 1's parameters and buffers, except an ignored one; small
buckets (several broadcasts) give the same."""

import fiamma
import fiamma.distributed as dist
from fiamma import nn
from fiamma.distributed import distributed_c10d as c10d
from fiamma.distributed.utils import _sync_module_states

dist.init_process_group("mpi")
rank, n = dist.get_rank(), dist.get_world_size()
assert c10d._get_default_group() is dist.group.WORLD
assert len(c10d._pg_map) == 1 and dist.group.WORLD in c10d._pg_map
sub = dist.new_group([0, 1])
assert len(c10d._pg_map) == 2 and sub in c10d._pg_map

for bucket in (250 * 1024 * 1024, 16):
    fiamma.manual_seed(100 + rank)  # a different model on each rank
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    m[1].running_mean.fill_(float(rank))
    mine = m[2].bias.detach().clone()
    _sync_module_states(m, dist.group.WORLD, bucket, src=1,
                        params_and_buffers_to_ignore={"2.bias"})
    got = fiamma.cat([m[0].weight.detach().flatten(), m[1].running_mean, m[2].weight.flatten()])
    want = got.clone()
    dist.broadcast(want, src=1)  # rank 1's values, as rank 1 sees them
    assert fiamma.equal(got, want), (rank, bucket)
    assert m[1].running_mean.tolist() == [1.0] * 4
    assert fiamma.equal(m[2].bias, mine)  # ignored: each rank keeps its own
    assert m[0].weight.requires_grad  # still a parameter that trains
dist.destroy_process_group()
print(f"OK rank {rank}")
