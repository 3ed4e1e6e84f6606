"""A GCN-style PyTorch program with a CSR adjacency (``to_sparse_csr``, ``torch.sparse.mm``,
``adj @ h``, ``torch.sparse.sum``) runs unmodified under ``python -m fiamma.run`` and learns."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
n, f, c = 200, 32, 4
g = torch.Generator().manual_seed(1)
src = torch.randint(0, n, (800,), generator=g)
dst = torch.randint(0, n, (800,), generator=g)
idx = torch.cat([torch.stack([src, dst]), torch.stack([dst, src]),
                 torch.arange(n).repeat(2, 1)], 1)
adj = torch.sparse_coo_tensor(idx, torch.ones(idx.shape[1]), (n, n)).coalesce()
deg = torch.sparse.sum(adj, 1).to_dense()
vals = adj.values() / deg[adj.indices()[0]]
adj = torch.sparse_coo_tensor(adj.indices(), vals, (n, n)).to_sparse_csr()
print("layout", adj.layout)
x = torch.randn(n, f, generator=g)
y = torch.randint(0, c, (n,), generator=g)


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(f, 16)
        self.l2 = nn.Linear(16, c)

    def forward(self, x, a):
        h = F.relu(torch.sparse.mm(a, self.l1(x)))
        return F.log_softmax(a @ self.l2(h), 1)


model = GCN()
opt = torch.optim.Adam(model.parameters(), lr=0.02)
for step in range(40):
    opt.zero_grad()
    loss = F.nll_loss(model(x, adj), y)
    loss.backward()
    opt.step()
    print("loss", step, loss.item())
print("product", torch.allclose(adj @ x, adj.to_dense() @ x, atol=1e-5))
'''


def test_gcn_with_csr_adjacency_runs_under_fiamma_run(tmp_path):
    script = tmp_path / "gcn_csr.py"
    script.write_text(PROGRAM)
    env = dict(os.environ)
    paths = [os.path.join(ROOT, "packages", p, "src") for p in sorted(os.listdir(
        os.path.join(ROOT, "packages")))]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-m", "fiamma.run", str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "layout torch.sparse_csr" in r.stdout
    losses = [float(v) for v in re.findall(r"^loss \d+ (\S+)$", r.stdout, re.M)]
    assert len(losses) == 40
    assert losses[-1] < losses[0] - 0.1, losses
    assert "product True" in r.stdout
