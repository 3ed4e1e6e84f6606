"""A DCGAN in the style of pytorch/examples' dcgan/main.py (transposed-conv generator,
conv discriminator, BCELoss, Adam with beta1=0.5, weights_init through Module.apply) on
synthetic 16x16 digits."""

import argparse
import random

import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data
from synthetic import SyntheticDigits


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, nz, ngf):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),      # 4x4
            nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),  # 8x8
            nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, 1, 4, 2, 1, bias=False),        # 16x16
            nn.Tanh())

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self, ndf):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, x):
        return self.main(x).view(-1, 1).squeeze(1)


def main():
    parser = argparse.ArgumentParser(description="DCGAN")
    parser.add_argument("--batchSize", type=int, default=64)
    parser.add_argument("--niter", type=int, default=25)
    parser.add_argument("--train-size", type=int, default=2048)
    parser.add_argument("--nz", type=int, default=16)
    parser.add_argument("--ngf", type=int, default=16)
    parser.add_argument("--ndf", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--beta1", type=float, default=0.5)
    parser.add_argument("--manualSeed", type=int, default=999)
    parser.add_argument("--outf", default="")
    opt = parser.parse_args()
    random.seed(opt.manualSeed)
    torch.manual_seed(opt.manualSeed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    data = SyntheticDigits(opt.train_size, size=16, normalize=False)
    data.data = data.data * 2 - 1  # to [-1, 1], the generator's tanh range
    loader = torch.utils.data.DataLoader(data, batch_size=opt.batchSize, shuffle=True)
    netG = Generator(opt.nz, opt.ngf).to(device)
    netG.apply(weights_init)
    netD = Discriminator(opt.ndf).to(device)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    fixed_noise = torch.randn(64, opt.nz, 1, 1, device=device)
    real_label, fake_label = 1, 0
    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

    for epoch in range(opt.niter):
        for i, (real, _) in enumerate(loader, 0):
            # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            real = real.to(device)
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label, dtype=real.dtype, device=device)
            output = netD(real)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()
            noise = torch.randn(batch_size, opt.nz, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()
            # (2) update G: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()
            if i % 10 == 0:
                print(f"[{epoch}/{opt.niter}][{i}/{len(loader)}] Loss_D: {errD.item():.4f} "
                      f"Loss_G: {errG.item():.4f} D(x): {D_x:.4f} "
                      f"D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}")
        if opt.outf:
            torch.save(netG.state_dict(), f"{opt.outf}/netG_epoch_{epoch}.pth")
            torch.save(netD.state_dict(), f"{opt.outf}/netD_epoch_{epoch}.pth")
    with torch.no_grad():
        fake = netG(fixed_noise)
    print(f"RESULT loss_d={errD.item():.4f} loss_g={errG.item():.4f} d_x={D_x:.4f} "
          f"fake_std={fake.std().item():.4f}")


if __name__ == "__main__":
    main()
