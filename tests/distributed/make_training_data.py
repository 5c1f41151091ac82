"""Writes what the training command-line tests read, as a PyTorch user would:
OUT/net.pt, a small CNN saved with torch.jit.script, and OUT/data.pt, its
training data saved with plain torch.save((inputs, labels)), and
OUT/bad_labels.pt, the same data with label 100 in row 37 (the model has 10
classes), and OUT/net_dropout.pt, a CNN with batch norm and dropout (its
masks drawn from the CPU generator: a resumed run must restore it).

usage: python3 make_training_data.py OUT_DIR
"""
import os
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        h = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1))


class DropoutNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.drop = torch.nn.Dropout(0.3)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv1(x)))
        h = self.drop(torch.relu(self.conv2(h)))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1))


def write(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.jit.script(Net()).save(out + "/net.pt")
    torch.jit.script(DropoutNet()).save(out + "/net_dropout.pt")
    inputs = torch.randn(64, 3, 12, 12)
    labels = torch.randint(0, 10, (64,))
    torch.save((inputs, labels), out + "/data.pt")
    bad = labels.clone()
    bad[37] = 100
    torch.save((inputs, bad), out + "/bad_labels.pt")


if __name__ == "__main__":
    write(sys.argv[1])
