"""A siamese network in the style of pytorch/examples' siamese_network: two images through
one shared ResNet-like tower, their features concatenated and scored by a small head with a
sigmoid, trained with BCELoss on same/different-class pairs; Adadelta with StepLR. Synthetic
digits."""

import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from synthetic import SyntheticDigits
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.tower = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)))
        self.fc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, 1))
        self.sigmoid = nn.Sigmoid()
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        return self.tower(x).view(x.size(0), -1)

    def forward(self, input1, input2):
        out = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
        return self.sigmoid(self.fc(out))


class PairDataset(Dataset):
    """Pairs of images with target 1 for the same class, 0 otherwise (half and half)."""

    def __init__(self, digits, seed):
        self.digits = digits
        rng = random.Random(seed)
        by_class = {}
        for i, t in enumerate(digits.targets):
            by_class.setdefault(int(t), []).append(i)
        self.pairs = []
        for i, t in enumerate(digits.targets):
            if rng.random() < 0.5:
                j, same = rng.choice(by_class[int(t)]), 1.0
            else:
                other = rng.choice([c for c in by_class if c != int(t)])
                j, same = rng.choice(by_class[other]), 0.0
            self.pairs.append((i, j, same))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, k):
        i, j, same = self.pairs[k]
        return self.digits[i][0], self.digits[j][0], torch.tensor(same, dtype=torch.float)


def main():
    parser = argparse.ArgumentParser(description="siamese network")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--train-size", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(PairDataset(SyntheticDigits(args.train_size), 0),
                              batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(PairDataset(SyntheticDigits(512, train=False), 1),
                             batch_size=256)
    model = SiameseNetwork().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    criterion = nn.BCELoss()
    for epoch in range(1, args.epochs + 1):
        model.train()
        for batch_idx, (a, b, target) in enumerate(train_loader):
            a, b, target = a.to(device), b.to(device), target.to(device)
            optimizer.zero_grad()
            loss = criterion(model(a, b).squeeze(), target)
            loss.backward()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print(f"Train Epoch: {epoch} [{batch_idx * len(a)}/{len(train_loader.dataset)}]"
                      f"\tLoss: {loss.item():.6f}")
        model.eval()
        test_loss, correct = 0.0, 0
        with torch.no_grad():
            for a, b, target in test_loader:
                out = model(a.to(device), b.to(device)).squeeze()
                test_loss += F.binary_cross_entropy(out, target.to(device), reduction="sum").item()
                correct += torch.where(out > 0.5, 1, 0).eq(target.to(device)).sum().item()
        n = len(test_loader.dataset)
        print(f"Test set: Average loss: {test_loss / n:.4f}, Accuracy: {correct}/{n}")
        scheduler.step()
    print(f"RESULT test_loss={test_loss / n:.4f} accuracy={correct / n:.4f}")


if __name__ == "__main__":
    main()
