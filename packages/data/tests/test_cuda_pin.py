"""DataLoader(pin_memory=True) on a machine with CUDA: batches arrive in pinned host memory
(without CUDA the loader warns and yields ordinary batches: test_dataloader.py)."""

import pytest

import fiamma
import fiamma.data as D

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not fiamma.cuda.is_available(),
                                                  reason="needs CUDA (CuPy and a GPU)")]


class Pairs(D.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return {"x": fiamma.full((3,), float(i)), "y": i, "name": f"item{i}"}


@pytest.mark.parametrize("workers", [0, 2])
def test_pinned_batches(workers):
    loader = D.DataLoader(Pairs(), batch_size=2, pin_memory=True, num_workers=workers)
    for i, batch in enumerate(loader):
        assert batch["x"].is_pinned() and batch["y"].is_pinned()
        assert batch["name"] == [f"item{2 * i}", f"item{2 * i + 1}"]
        x = batch["x"].to("cuda", non_blocking=True)
        fiamma.cuda.synchronize()
        assert x.is_cuda and float(x[1, 0].item()) == 2 * i + 1
