"""A variational autoencoder in the style of pytorch/examples' vae/main.py (fully connected
encoder/decoder, reparameterisation, BCE + KL loss, Adam), on synthetic digits."""

import argparse

import torch
import torch.utils.data
from synthetic import SyntheticDigits
from torch import nn, optim
from torch.nn import functional as F


class VAE(nn.Module):
    def __init__(self, hidden=200, latent=10):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main():
    parser = argparse.ArgumentParser(description="VAE")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--train-size", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_loader = torch.utils.data.DataLoader(
        SyntheticDigits(args.train_size, normalize=False), batch_size=args.batch_size,
        shuffle=True)
    test_loader = torch.utils.data.DataLoader(
        SyntheticDigits(256, train=False, normalize=False), batch_size=args.batch_size)
    model = VAE().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(1, args.epochs + 1):
        model.train()
        train_loss = 0.0
        for batch_idx, (data, _) in enumerate(train_loader):
            data = data.to(device)
            optimizer.zero_grad()
            recon, mu, logvar = model(data)
            loss = loss_function(recon, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/"
                      f"{len(train_loader.dataset)}]\tLoss: {loss.item() / len(data):.6f}")
        print(f"====> Epoch: {epoch} Average loss: "
              f"{train_loss / len(train_loader.dataset):.4f}")
        model.eval()
        test_loss = 0.0
        with torch.no_grad():
            for data, _ in test_loader:
                data = data.to(device)
                recon, mu, logvar = model(data)
                test_loss += loss_function(recon, data, mu, logvar).item()
        test_loss /= len(test_loader.dataset)
        print(f"====> Test set loss: {test_loss:.4f}")
    with torch.no_grad():
        sample = model.decode(torch.randn(16, 10).to(device)).cpu()
    print(f"RESULT test_loss={test_loss:.4f} sample_mean={sample.mean().item():.4f}")


if __name__ == "__main__":
    main()
