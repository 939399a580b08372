# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""A small CNN with BatchNorm, exported to ONNX the two ways users do.

    export_small_cnn.py --mode inference|training -o model.onnx

inference: torch.onnx.export's defaults (eval mode, constant folding), as
a first try usually is: BatchNorm is folded into the convolutions.
training: what the user guide says (training mode, no constant folding).
"""

import argparse

import torch


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["inference", "training"], required=True)
    parser.add_argument("-o", dest="output", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = SmallCNN()
    x = torch.randn(2, 3, 16, 16)
    if args.mode == "inference":
        model.eval()
        torch.onnx.export(model, x, args.output)
    else:
        model.train()
        torch.onnx.export(model, x, args.output, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)


if __name__ == "__main__":
    main()
