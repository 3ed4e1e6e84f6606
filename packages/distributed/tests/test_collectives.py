"""Every collective, point-to-point op and object variant, exact against NumPy, on 2-4 ranks
(tests/workers/collectives.py holds the checks; each rank raises on the first difference)."""

import pytest
from _launch import run_ranks, show


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_collectives_match_numpy(ranks):
    proc = run_ranks(ranks, "collectives.py", limit=120)
    assert proc.returncode == 0, show(proc)
    for r in range(ranks):  # (the ranks' lines may interleave)
        assert f"OK rank {r}" in proc.stdout, show(proc)


@pytest.mark.parametrize("ranks", [2, 3])
def test_functional_collectives_return_new_tensors(ranks):
    # torch.distributed._functional_collectives (imported by diffusers at start-up)
    proc = run_ranks(ranks, "functional_collectives.py", limit=120)
    assert proc.returncode == 0, show(proc)
    for r in range(ranks):
        assert f"OK rank {r}" in proc.stdout, show(proc)
