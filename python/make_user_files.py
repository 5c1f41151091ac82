#!/usr/bin/python3
"""Models and inputs saved the ordinary way in Python, for the command-line
tests of tests/cli/tests_inputs.cmake (issue 26): plain torch.save of a dict
of named inputs and of bare lists (Python pickles one-element ones with
APPEND / SETITEM), a forward taking List[Tensor], and a small Sequential with
an Identity, scripted and traced, for inspect --summary.

Writes into the directory given as argument. Run with Debian's python3
(python3-torch). Seeded; nothing is downloaded.
"""
import os
import sys
from typing import List

import torch
import torch.nn as nn


class Images(nn.Module):
    """Takes a list of images, as detection models do."""

    def forward(self, images: List[torch.Tensor], scale: float = 1.0):
        return torch.cat(images, 0) * scale


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    x = torch.ones(2, 4)  # for linear.pt of make_corrupt_files.py: forward(input)
    torch.save({"input": x}, os.path.join(d, "dict_input.pt"))
    torch.save([x], os.path.join(d, "list_input.pt"))
    torch.save({"x": x}, os.path.join(d, "unknown_key_input.pt"))
    torch.jit.script(Images()).save(os.path.join(d, "images.pt"))
    img = torch.ones(1, 3, 2, 2)
    torch.save([img, img], os.path.join(d, "images_list.pt"))
    torch.save({"scale": 2.0, "images": [img]}, os.path.join(d, "images_dict.pt"))
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 64, 3), nn.Identity(), nn.Flatten(), nn.Linear(256, 10)).eval()
    torch.jit.script(m).save(os.path.join(d, "seq.script.pt"))
    torch.jit.trace(m, torch.ones(1, 3, 4, 4)).save(os.path.join(d, "seq.trace.pt"))
    torch.save(torch.ones(1, 3, 4, 4), os.path.join(d, "seq.input.pt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
