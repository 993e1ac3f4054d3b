from __future__ import annotations

import torch
from torch import nn

from repro.models.resnet50 import BN_EPS, BN_MOMENTUM, EXPANSION, ResNetDims


def _bn(c: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(c, eps=BN_EPS, momentum=1 - BN_MOMENTUM)


class Bottleneck(nn.Module):
    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        c_out = width * EXPANSION
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = _bn(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = _bn(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = _bn(c_out)
        if stride != 1 or c_in != c_out:
            self.down_conv = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)
            self.down_bn = _bn(c_out)
        else:
            self.down_conv = self.down_bn = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        if self.down_conv is not None:
            x = self.down_bn(self.down_conv(x))
        return torch.relu(x + y)


class ResNet(nn.Module):
    def __init__(self, d: ResNetDims):
        super().__init__()
        w = d.width
        self.conv1 = nn.Conv2d(d.channels, w, 7, stride=2, padding=3, bias=False)
        self.bn1 = _bn(w)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        stages, c_in = [], w
        for i, n in enumerate(d.blocks):
            width = w * 2**i
            stages.append(nn.ModuleList(
                Bottleneck(c_in if j == 0 else width * EXPANSION, width, 2 if (i > 0 and j == 0) else 1)
                for j in range(n)
            ))
            c_in = width * EXPANSION
        self.stages = nn.ModuleList(stages)
        self.fc = nn.Linear(c_in, d.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [B, C, H, W]
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        for stage in self.stages:
            for block in stage:
                x = block(x)
        return self.fc(x.mean(dim=(2, 3)))


def build(dims: ResNetDims) -> ResNet:
    return ResNet(dims)
