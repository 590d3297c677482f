"""A two-layer torch.nn.TransformerEncoder called with a key padding mask (a bool graph input),
exported at opset 17 in float32, with PyTorch's output and the gradient of its sum w.r.t. x:
suite onnx_import checks that xgrad takes the mask at run time. Regenerate from the repository
root with Debian's python3-torch and numpy: /usr/bin/python3 tests/data/onnx/make_padded_fixture.py
"""
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
STEM = "encoder_padded_opset17_float32"


def main():
    torch.manual_seed(20)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=True, activation="gelu")
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    with torch.no_grad():  # distinct parameters (the two layers start as copies)
        for p in enc.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x = torch.randn(2, 5, 16, requires_grad=True)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    torch.onnx.export(enc, (x, None, pad), os.path.join(HERE, STEM + ".onnx"), input_names=["x", "pad"],
                      output_names=["y"], opset_version=17)
    y = enc(x, src_key_padding_mask=pad)
    y.sum().backward()
    out = os.path.join(HERE, STEM)
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "input_x.npy"), x.detach().numpy())
    np.save(os.path.join(out, "input_pad.npy"), pad.numpy())
    np.save(os.path.join(out, "output_y.npy"), y.detach().numpy())
    np.save(os.path.join(out, "grad_input_x.npy"), x.grad.numpy())


if __name__ == "__main__":
    main()
