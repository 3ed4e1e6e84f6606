"""Model ensembling with torch.func, in the style of PyTorch's model-ensembling tutorial:
several MLPs of one architecture, their weights stacked with ``stack_module_state`` and run
together with ``vmap`` over ``functional_call`` (each model on its own minibatch, and all on
the same one), checked against the loop over the models; then the whole ensemble trained
at once through the stacked weights (dropout with ``randomness='different'``). Synthetic
digits."""

import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from synthetic import SyntheticDigits
from torch.func import functional_call, stack_module_state, vmap
from torch.utils.data import DataLoader


class SimpleMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 64)
        self.dropout = nn.Dropout(0.1)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, 10)

    def forward(self, x):
        x = x.flatten(1)
        x = self.dropout(F.relu(self.fc1(x)))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    parser = argparse.ArgumentParser(description="model ensembling with torch.func")
    parser.add_argument("--num-models", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train-size", type=int, default=512)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    models = [SimpleMLP().to(device) for _ in range(args.num_models)]
    for m in models:
        m.eval()
    params, buffers = stack_module_state(models)
    base_model = copy.deepcopy(models[0])

    def fmodel(params, buffers, x):
        return functional_call(base_model, (params, buffers), (x,))

    # 1. vmap over the stacked weights against the loop over the models
    digits = SyntheticDigits(args.num_models * args.batch_size, train=True)
    data = torch.stack([digits[i][0] for i in range(len(digits))]).to(device)
    minibatches = data.view(args.num_models, args.batch_size, 1, 28, 28)
    minibatch = minibatches[0]
    predictions_diff = vmap(fmodel)(params, buffers, minibatches)
    expected_diff = torch.stack([m(mb) for m, mb in zip(models, minibatches)])
    predictions_same = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
    expected_same = torch.stack([m(minibatch) for m in models])
    diff_err = (predictions_diff - expected_diff).abs().max().item()
    same_err = (predictions_same - expected_same).abs().max().item()
    print(f"ensemble of {args.num_models}: max |vmap - loop| = {diff_err:.3e} (own minibatches), "
          f"{same_err:.3e} (same minibatch)")

    # 2. train every model of the ensemble at once through the stacked weights
    train = DataLoader(SyntheticDigits(args.train_size, train=True, seed=1),
                       batch_size=args.batch_size, shuffle=True, drop_last=True)
    test = DataLoader(SyntheticDigits(256, train=False, seed=1), batch_size=128)
    optimizer = torch.optim.SGD(params.values(), lr=args.lr, momentum=0.9)
    train_step = vmap(fmodel, in_dims=(0, 0, None), randomness="different")
    for epoch in range(1, args.epochs + 1):
        base_model.train()
        for x, y in train:
            x, y = x.to(device), y.to(device)
            logits = train_step(params, buffers, x)  # (models, batch, classes)
            loss = sum(F.cross_entropy(out, y) for out in logits)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        base_model.eval()
        correct, per_model, test_loss = 0, torch.zeros(args.num_models), 0.0
        with torch.no_grad():
            for x, y in test:
                x, y = x.to(device), y.to(device)
                logits = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
                probs = logits.softmax(-1).mean(0)
                test_loss += F.nll_loss(probs.log(), y, reduction="sum").item()
                correct += (probs.argmax(1) == y).sum().item()
                per_model += (logits.argmax(-1) == y).sum(1).float()
        n = len(test.dataset)
        print(f"epoch {epoch}: ensemble test loss {test_loss / n:.4f}, accuracy {correct}/{n}; "
              f"per model {[round(a, 3) for a in (per_model / n).tolist()]}")
    print(f"RESULT diff_err={diff_err} same_err={same_err} test_loss={test_loss / n} "
          f"accuracy={correct / n}")


if __name__ == "__main__":
    main()
