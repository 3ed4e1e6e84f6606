"""MAML on sine-wave regression with torch.func, in the style of functorch's maml-regression
example: the inner loop adapts fast weights with ``grad`` of a ``functional_call`` loss, the
tasks of a meta-batch run under ``vmap``, and the outer (meta) loss backpropagates through the
inner steps into the model's parameters (second-order MAML). Tasks are drawn with NumPy from
a seed, so PyTorch and fiamma see the same data."""

import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap


def sample_tasks(rng, n_tasks, k):
    """``n_tasks`` sine waves (amplitude, phase), ``k`` support and ``k`` query points each."""
    amp = rng.uniform(0.1, 5.0, (n_tasks, 1, 1))
    phase = rng.uniform(0.0, math.pi, (n_tasks, 1, 1))
    xs = rng.uniform(-5.0, 5.0, (n_tasks, 2 * k, 1))
    ys = amp * np.sin(xs + phase)
    t = [torch.from_numpy(a.astype(np.float32)) for a in (xs, ys)]
    return t[0][:, :k], t[1][:, :k], t[0][:, k:], t[1][:, k:]


def main():
    parser = argparse.ArgumentParser(description="MAML sine regression with torch.func")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=5, help="tasks per meta-batch")
    parser.add_argument("--k-shot", type=int, default=10)
    parser.add_argument("--inner-steps", type=int, default=1)
    parser.add_argument("--inner-lr", type=float, default=0.01)
    parser.add_argument("--meta-lr", type=float, default=1e-3)
    parser.add_argument("--log-interval", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    net = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(),
                        nn.Linear(40, 1)).to(device)
    params = dict(net.named_parameters())
    opt = torch.optim.Adam(net.parameters(), lr=args.meta_lr)

    def loss_fn(params, x, y):
        return F.mse_loss(functional_call(net, params, (x,)), y)

    def adapt(params, x, y, steps):
        fast = params
        for _ in range(steps):
            grads = grad(loss_fn)(fast, x, y)
            fast = {k: fast[k] - args.inner_lr * grads[k] for k in fast}
        return fast

    def task_loss(params, x_spt, y_spt, x_qry, y_qry):
        return loss_fn(adapt(params, x_spt, y_spt, args.inner_steps), x_qry, y_qry)

    for it in range(1, args.iterations + 1):
        x_spt, y_spt, x_qry, y_qry = (t.to(device) for t in sample_tasks(rng, args.tasks,
                                                                          args.k_shot))
        opt.zero_grad()
        losses = vmap(task_loss, in_dims=(None, 0, 0, 0, 0))(params, x_spt, y_spt, x_qry, y_qry)
        meta_loss = losses.mean()
        meta_loss.backward()
        opt.step()
        if it % args.log_interval == 0:
            print(f"iteration {it}: meta loss {meta_loss.item():.4f}")

    # evaluation on new tasks: the query loss before and after 5 adaptation steps
    x_spt, y_spt, x_qry, y_qry = (t.to(device) for t in sample_tasks(rng, 20, args.k_shot))
    pre = vmap(loss_fn, in_dims=(None, 0, 0))(params, x_qry, y_qry).mean().item()
    post_fn = vmap(lambda p, a, b, c, d: loss_fn(adapt(p, a, b, 5), c, d),
                   in_dims=(None, 0, 0, 0, 0))
    post = post_fn(params, x_spt, y_spt, x_qry, y_qry).mean().item()
    print(f"test tasks: query loss {pre:.4f} before adaptation, {post:.4f} after 5 steps")
    print(f"RESULT pre_loss={pre} post_loss={post} gain={pre / post}")


if __name__ == "__main__":
    main()
