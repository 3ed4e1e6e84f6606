"""Per-sample gradients with torch.func, in the style of PyTorch's per-sample-gradients
tutorial: a small CNN on digits, ``vmap(grad(compute_loss))`` over a batch through
``functional_call``, checked against the per-sample loop, then DP-SGD-style training
(per-sample gradients clipped to a norm, averaged, noised). Synthetic digits."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from synthetic import SyntheticDigits
from torch.func import functional_call, grad, vmap
from torch.utils.data import DataLoader


class SimpleCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.fc1 = nn.Linear(400, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def loss_fn(predictions, targets):
    return F.nll_loss(predictions, targets)


def main():
    parser = argparse.ArgumentParser(description="per-sample gradients with torch.func")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--train-size", type=int, default=512)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--noise-multiplier", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train = DataLoader(SyntheticDigits(args.train_size, train=True), batch_size=args.batch_size,
                       shuffle=True)
    test = DataLoader(SyntheticDigits(256, train=False), batch_size=128)
    model = SimpleCNN().to(device)

    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        targets = target.unsqueeze(0)
        predictions = functional_call(model, (params, buffers), (batch,))
        return loss_fn(predictions, targets)

    ft_compute_sample_grad = vmap(grad(compute_loss), in_dims=(None, None, 0, 0))

    # 1. the transform against the per-sample loop, on one batch
    data, targets = next(iter(train))
    data, targets = data.to(device), targets.to(device)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    ft_grads = ft_compute_sample_grad(params, buffers, data, targets)
    max_diff = 0.0
    for i in range(data.shape[0]):
        model.zero_grad()
        loss_fn(model(data[i:i + 1]), targets[i:i + 1]).backward()
        for name, p in model.named_parameters():
            max_diff = max(max_diff, (ft_grads[name][i] - p.grad).abs().max().item())
    print(f"per-sample gradients: {data.shape[0]} samples, max |vmap - loop| = {max_diff:.3e}")

    # 2. DP-SGD-style training with clipped, noised per-sample gradients
    for epoch in range(1, args.epochs + 1):
        model.train()
        for data, targets in train:
            data, targets = data.to(device), targets.to(device)
            params = {k: v.detach() for k, v in model.named_parameters()}
            sample_grads = ft_compute_sample_grad(params, buffers, data, targets)
            norms = torch.stack([g.flatten(1).norm(dim=1) for g in sample_grads.values()])
            norms = norms.norm(dim=0)
            scale = (args.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
            with torch.no_grad():
                for name, p in model.named_parameters():
                    g = (sample_grads[name] * scale.view(-1, *[1] * p.dim())).sum(0)
                    g += torch.randn_like(g) * args.noise_multiplier * args.max_grad_norm
                    p -= args.lr * g / data.shape[0]
        model.eval()
        test_loss, correct = 0.0, 0
        with torch.no_grad():
            for data, targets in test:
                data, targets = data.to(device), targets.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, targets, reduction="sum").item()
                correct += (output.argmax(1) == targets).sum().item()
        n = len(test.dataset)
        print(f"epoch {epoch}: test loss {test_loss / n:.4f}, accuracy {correct}/{n}")
    print(f"RESULT max_diff={max_diff} test_loss={test_loss / n} accuracy={correct / n}")


if __name__ == "__main__":
    main()
