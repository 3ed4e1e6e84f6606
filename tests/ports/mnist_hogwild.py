"""Hogwild training in the style of pytorch/examples' mnist_hogwild: one model in shared memory
(model.share_memory()), several torch.multiprocessing processes each running SGD on it without
locks, then a test pass in the parent. Synthetic digits."""

import argparse

import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from synthetic import SyntheticDigits
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=5)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=5)
        self.fc1 = nn.Linear(256, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = x.view(-1, 256)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def train(rank, args, model, device):
    torch.manual_seed(args.seed + rank)
    loader = DataLoader(SyntheticDigits(args.train_size, seed=rank), batch_size=args.batch_size,
                        shuffle=True)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    model.train()
    for epoch in range(1, args.epochs + 1):
        for batch_idx, (data, target) in enumerate(loader):
            optimizer.zero_grad()
            loss = F.nll_loss(model(data.to(device)), target.to(device))
            loss.backward()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print(f"{rank}\tTrain Epoch: {epoch} [{batch_idx * len(data)}/"
                      f"{len(loader.dataset)}]\tLoss: {loss.item():.6f}", flush=True)


def test(model, device):
    loader = DataLoader(SyntheticDigits(512, train=False), batch_size=256)
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            output = model(data.to(device))
            test_loss += F.nll_loss(output, target.to(device), reduction="sum").item()
            correct += output.max(1)[1].eq(target.to(device)).sum().item()
    n = len(loader.dataset)
    print(f"Test set: Average loss: {test_loss / n:.4f}, Accuracy: {correct}/{n}")
    return test_loss / n, correct / n


def main():
    parser = argparse.ArgumentParser(description="Hogwild digits")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--train-size", type=int, default=2048)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--num-processes", type=int, default=2)
    args = parser.parse_args()
    device = torch.device("cpu")
    torch.manual_seed(args.seed)
    mp.set_start_method("spawn", force=True)

    model = Net().to(device)
    model.share_memory()  # gradients are allocated lazily, so they are not shared
    before = model.fc2.bias.clone()
    processes = []
    for rank in range(args.num_processes):
        p = mp.Process(target=train, args=(rank, args, model, device))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
    if any(p.exitcode != 0 for p in processes):
        raise SystemExit("a training process failed")
    moved = (model.fc2.bias - before).abs().sum().item()
    loss, acc = test(model, device)
    print(f"RESULT test_loss={loss:.4f} accuracy={acc:.4f} shared_update={moved > 0}")


if __name__ == "__main__":
    main()
