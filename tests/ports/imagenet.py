"""An ImageNet-style training loop in the style of pytorch/examples' imagenet/main.py: a
torchvision ResNet-18, ImageFolder with RandomResizedCrop/RandomHorizontalFlip and
Resize/CenterCrop, Normalize, DataLoader workers, SGD with momentum and weight decay, StepLR,
AverageMeter/ProgressMeter logging, top-1/top-5 accuracy, a checkpoint dict with the best
model. Point --data at a folder with train/ and val/ ImageFolder trees."""

import argparse
import os
import shutil
import time

import torch
import torch.nn as nn
import torch.optim
import torch.utils.data
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms
from torch.optim.lr_scheduler import StepLR


class AverageMeter:
    def __init__(self, name, fmt=":f"):
        self.name, self.fmt = name, fmt
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        return ("{name} {val" + self.fmt + "} ({avg" + self.fmt + "})").format(**self.__dict__)


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / batch_size)
                for k in topk]


def run_epoch(loader, model, criterion, optimizer, epoch, device, args, train):
    meters = [AverageMeter("Loss", ":.4e"), AverageMeter("Acc@1", ":6.2f"),
              AverageMeter("Acc@5", ":6.2f")]
    model.train() if train else model.eval()
    end = time.time()
    with torch.set_grad_enabled(train):
        for i, (images, target) in enumerate(loader):
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            output = model(images)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            for m, v in zip(meters, (loss.item(), acc1[0].item(), acc5[0].item())):
                m.update(v, images.size(0))
            if train:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            if i % args.print_freq == 0:
                tag = f"Epoch: [{epoch}]" if train else "Test:"
                print(f"{tag}[{i}/{len(loader)}]\tTime {time.time() - end:.3f}\t"
                      + "\t".join(str(m) for m in meters))
            end = time.time()
    return meters[0].avg, meters[1].avg, meters[2].avg


def main():
    parser = argparse.ArgumentParser(description="ImageNet-style training")
    parser.add_argument("data", help="path to dataset (train/ and val/ folders)")
    parser.add_argument("-a", "--arch", default="resnet18")
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("-b", "--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--wd", "--weight-decay", type=float, default=1e-4, dest="weight_decay")
    parser.add_argument("-p", "--print-freq", type=int, default=10)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--checkpoint", default="checkpoint.pth.tar")
    args = parser.parse_args()
    if args.seed is not None:
        torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    traindir, valdir = os.path.join(args.data, "train"), os.path.join(args.data, "val")
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    size = args.image_size
    train_dataset = datasets.ImageFolder(traindir, transforms.Compose([
        transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), normalize]))
    val_dataset = datasets.ImageFolder(valdir, transforms.Compose([
        transforms.Resize(int(size * 256 / 224)), transforms.CenterCrop(size),
        transforms.ToTensor(), normalize]))
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size,
                                               shuffle=True, num_workers=args.workers)
    val_loader = torch.utils.data.DataLoader(val_dataset, batch_size=args.batch_size,
                                             shuffle=False, num_workers=args.workers)

    print(f"=> creating model '{args.arch}'")
    model = models.__dict__[args.arch](num_classes=len(train_dataset.classes)).to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    scheduler = StepLR(optimizer, step_size=30, gamma=0.1)
    best_acc1 = 0.0
    for epoch in range(args.epochs):
        train_loss, _, _ = run_epoch(train_loader, model, criterion, optimizer, epoch, device,
                                     args, True)
        val_loss, acc1, acc5 = run_epoch(val_loader, model, criterion, None, epoch, device,
                                         args, False)
        scheduler.step()
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        state = {"epoch": epoch + 1, "arch": args.arch, "state_dict": model.state_dict(),
                 "best_acc1": best_acc1, "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict()}
        torch.save(state, args.checkpoint)
        if is_best:
            shutil.copyfile(args.checkpoint, "model_best.pth.tar")
    ckpt = torch.load(args.checkpoint, weights_only=True)
    model.load_state_dict(ckpt["state_dict"])
    print(f"RESULT train_loss={train_loss:.4f} val_loss={val_loss:.4f} acc1={acc1:.2f} "
          f"acc5={acc5:.2f} classes={len(train_dataset.classes)}")


if __name__ == "__main__":
    main()
