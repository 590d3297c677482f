#!/usr/bin/python3
"""Writes the ONNX fixtures of tests/data/onnx/: two small PyTorch models exported with
torch.onnx.export at opsets 14 and 17, in float32 and float64, each with PyTorch's input, output
and autograd gradients of loss = output.sum() as .npy files, and mapping.json relating the ONNX
initializers to the PyTorch parameters. Run with Debian's interpreter (python3-torch 1.13, numpy):

  /usr/bin/python3 tests/data/onnx/make_onnx_fixtures.py

The models:
  encoder  torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.1,
           activation="gelu", batch_first=True, norm_first=True); input x (2, 5, 16), output y.
  gpt      a 2-layer GPT (vocabulary 11, block 8, d 16, 2 heads) written below; input idx, int64
           (2, 6); output logp = log_softmax(logits, -1).

Both are in eval mode (dropout inactive). After PyTorch's initialization every parameter gets
N(0, 0.1^2) added (seeded), so that no two parameters are equal (the default layer-norm gains
are all ones and the biases zeros: the exporter would merge equal initializers, and the mapping
below could not tell them apart) and every parameter matters to the gradients. The float64 model
is a deep copy of the float32 one made with .double(), its input the float32 input upcast, so
both have the same values.

Per export, {model}_opset{N}_{dtype}.onnx and the directory {model}_opset{N}_{dtype}/ with
  input_{name}.npy           each graph input (x in the model's dtype, idx int64)
  output_{name}.npy          PyTorch's output
  grad_input_{name}.npy      d loss / d input for a float input (the encoder's x)
  grad_param_{param}.npy     d loss / d parameter, named as model.named_parameters() names them
  mapping.json               {"initializers": {onnx_name: {"parameter": torch name or null,
                               "buffer": bool, "transform": "same" | "transposed" | null,
                               "shape": [...], and when transform is null "derived": [...]}},
                               "parameters_unmapped": [...]}
An initializer maps to the parameter (else the buffer, "buffer": true, the first of equal ones)
whose value it equals exactly ("same", also in dtype and shape) or whose 2-D transpose it equals
exactly ("transposed"); equal parameters stop the script. Otherwise (a constant the exporter
folded) parameter and transform are null and "derived" lists what it was recognised to be
folded from: a leading slice of a parameter or buffer ("wpe.weight[:6]": constant folding turns
wpe(arange(T)) into the first T rows, so wpe.weight has no initializer of its own and is listed
in parameters_unmapped) or a bool test ("blocks.0.attn.mask[:6, :6] == 0", the causal mask).

The script does not need the onnx package: the initializers and nodes are read from the exported
file by the minimal protobuf reader below. The fast path of TransformerEncoderLayer in eval mode
(torch._transformer_encoder_layer_fwd, which does not export) is off because the export runs
with grad enabled and parameters that require grad; the op types are checked to be ONNX's own.
Seeded throughout: a rerun writes the same files.
"""
import copy
import json
import math
import os
import shutil
import struct
import sys
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OPSETS = (14, 17)
DTYPES = (("float32", torch.float32), ("float64", torch.float64))


# ---------------------------------------------------------------- a minimal protobuf reader

def _varint(buf, pos):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf):
    """(field number, wire type, value) of each field of one message; value is an int for
    varints, bytes for the other wire types."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire} not handled")
        yield field, wire, value


def _signed64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _packed_varints(wire, value):
    if wire == 0:
        return [_signed64(value)]
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(_signed64(v))
    return out


# TensorProto.DataType -> numpy dtype and the typed field holding the data when not raw_data
_ONNX_DTYPES = {1: ("<f4", 4), 2: ("u1", 5), 3: ("i1", 5), 5: ("<i2", 5), 6: ("<i4", 5),
                7: ("<i8", 7), 9: ("?", 5), 11: ("<f8", 10)}


def parse_tensor(buf):
    """A TensorProto as (name, numpy array)."""
    dims, data_type, name, raw, typed = [], None, "", None, []
    for field, wire, value in _fields(buf):
        if field == 1:
            dims += _packed_varints(wire, value)
        elif field == 2:
            data_type = value
        elif field == 8:
            name = value.decode()
        elif field == 9:
            raw = value
        elif field in (4, 5, 7, 10):
            typed.append((field, wire, value))
        elif field == 14:
            raise ValueError(f"initializer {name}: external data not handled")
    if data_type not in _ONNX_DTYPES:
        raise ValueError(f"tensor {name}: ONNX data type {data_type} not handled")
    np_dtype, typed_field = _ONNX_DTYPES[data_type]
    if raw is not None:
        a = np.frombuffer(raw, dtype=np_dtype).copy()
    else:
        vals = []
        for field, wire, value in typed:
            if field != typed_field:
                continue
            if field == 4:
                vals += list(struct.unpack(f"<{len(value) // 4}f", value))
            elif field == 10:
                vals += list(struct.unpack(f"<{len(value) // 8}d", value))
            else:
                vals += _packed_varints(wire, value)
        a = np.array(vals, dtype=np_dtype)
    return name, a.reshape(dims)


def parse_model(path):
    """The graph of an ONNX file: opset imports, nodes (op_type, domain, inputs, outputs,
    the tensor of a Constant), initializers {name: array} in file order, graph inputs/outputs."""
    with open(path, "rb") as f:
        model = f.read()
    graph, opsets = None, {}
    for field, _, value in _fields(model):
        if field == 7:
            graph = value
        elif field == 8:
            domain, version = "", None
            for f2, _, v2 in _fields(value):
                if f2 == 1:
                    domain = v2.decode()
                elif f2 == 2:
                    version = v2
            opsets[domain] = version
    nodes, inits, inputs, outputs = [], {}, [], []
    for field, _, value in _fields(graph):
        if field == 1:
            node = {"op_type": "", "domain": "", "inputs": [], "outputs": [], "value": None}
            for f2, _, v2 in _fields(value):
                if f2 == 1:
                    node["inputs"].append(v2.decode())
                elif f2 == 2:
                    node["outputs"].append(v2.decode())
                elif f2 == 4:
                    node["op_type"] = v2.decode()
                elif f2 == 7:
                    node["domain"] = v2.decode()
                elif f2 == 5:  # AttributeProto: name 1, t 5
                    attr = dict((f3, v3) for f3, _, v3 in _fields(v2))
                    if attr.get(1) == b"value" and 5 in attr:
                        node["value"] = parse_tensor(attr[5])[1]
            nodes.append(node)
        elif field == 5:
            name, a = parse_tensor(value)
            inits[name] = a
        elif field in (11, 12):
            name = next(v2.decode() for f2, _, v2 in _fields(value) if f2 == 1)
            (inputs if field == 11 else outputs).append(name)
    return {"opsets": opsets, "nodes": nodes, "initializers": inits, "inputs": inputs,
            "outputs": outputs}


# ---------------------------------------------------------------- the models

class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, block):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)))

    def forward(self, x):
        B, T, C = x.size()
        hd = self.hd  # a Python int, not one traced from the shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(self.mask[:T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d, heads, block):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, block)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=11, block=8, d=16, heads=2, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.blocks = nn.ModuleList([Block(d, heads, block) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return F.log_softmax(self.head(self.ln_f(x)), dim=-1)


def perturb(model, seed):
    """Adds N(0, 0.1^2) to every parameter: no two parameters equal, none trivial."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def make_encoder():
    torch.manual_seed(1)
    m = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.1,
                                   activation="gelu", batch_first=True, norm_first=True)
    perturb(m, 2)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 16, generator=g, dtype=torch.float32)
    return m.eval(), {"x": x}, "y"


def make_gpt():
    torch.manual_seed(4)
    m = GPT()
    perturb(m, 5)
    g = torch.Generator().manual_seed(6)
    idx = torch.randint(0, 11, (2, 6), generator=g, dtype=torch.int64)
    return m.eval(), {"idx": idx}, "logp"


MODELS = (("encoder", make_encoder), ("gpt", make_gpt))


# ---------------------------------------------------------------- mapping and export

def tensor_np(t):
    return np.ascontiguousarray(t.detach().cpu().numpy())


def derivations(a, pool):
    """What an unmapped initializer was folded from, as far as recognised: a leading slice of a
    parameter or buffer (e.g. wpe.weight[:6], the rows of arange(T)) or, for a bool one, the
    test == 0 of such a slice (the causal mask)."""
    found = []
    for pname, p in pool:
        if p.ndim != a.ndim or any(s > t for s, t in zip(a.shape, p.shape)):
            continue
        part = p[tuple(slice(0, s) for s in a.shape)]
        cut = [f":{s}" if s < t else ":" for s, t in zip(a.shape, p.shape)]
        while cut and cut[-1] == ":":
            cut.pop()
        text = pname + ("[" + ", ".join(cut) + "]" if cut else "")
        if a.dtype == np.bool_ and p.dtype != np.bool_ and np.array_equal(part == 0, a):
            found.append(text + " == 0")
        elif a.dtype == p.dtype and np.array_equal(part, a):
            found.append(text)
    return found


def build_mapping(model, inits):
    params = [(n, tensor_np(p)) for n, p in model.named_parameters()]
    buffers = [(n, tensor_np(b)) for n, b in model.named_buffers()]
    for i, (n1, a1) in enumerate(params):  # equal parameters could not be told apart
        for n2, a2 in params[i + 1:]:
            if a1.shape == a2.shape and np.array_equal(a1, a2):
                sys.exit(f"parameters {n1} and {n2} are equal")
    out, mapped = {}, set()
    for name, a in inits.items():
        entry = {"parameter": None, "buffer": False, "transform": None, "shape": list(a.shape)}
        for is_buffer, pool in ((False, params), (True, buffers)):
            hits = []
            for pname, p in pool:
                if p.dtype != a.dtype:
                    continue
                if p.shape == a.shape and np.array_equal(p, a):
                    hits.append((pname, "same"))
                elif p.ndim == 2 and p.T.shape == a.shape and np.array_equal(p.T, a):
                    hits.append((pname, "transposed"))
            if len(hits) > 1 and not is_buffer:
                sys.exit(f"initializer {name} equals several tensors: {hits}")
            if hits:
                entry.update(parameter=hits[0][0], buffer=is_buffer, transform=hits[0][1])
                if not is_buffer:
                    mapped.add(hits[0][0])
                break
        if entry["transform"] is None:
            entry["derived"] = derivations(a, params + buffers)
        out[name] = entry
    unmapped = [n for n, _ in params if n not in mapped]
    return {"initializers": out, "parameters_unmapped": unmapped}


def save(path, array):
    a = np.asarray(array)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    np.save(path, np.ascontiguousarray(a))


def export_one(name, model, inputs, out_name, opset, dtype_name):
    stem = f"{name}_opset{opset}_{dtype_name}"
    onnx_path = os.path.join(HERE, stem + ".onnx")
    in_names = list(inputs)
    args = tuple(inputs.values())
    assert all(p.requires_grad for p in model.parameters())
    with torch.enable_grad():  # with parameters requiring grad: no encoder fast path
        torch.onnx.export(model, args, onnx_path, input_names=in_names,
                          output_names=[out_name], opset_version=opset)
    g = parse_model(onnx_path)
    assert g["opsets"].get("") == opset, g["opsets"]
    assert g["inputs"] == in_names and g["outputs"] == [out_name], (g["inputs"], g["outputs"])
    ops = Counter(n["op_type"] for n in g["nodes"])
    foreign = [n["op_type"] for n in g["nodes"] if n["domain"] not in ("", "ai.onnx")
               or n["op_type"] in ("ATen", "PythonOp")]
    if foreign:
        sys.exit(f"{stem}: ops outside ONNX's domain: {foreign}")
    if ("LayerNormalization" in ops) != (opset >= 17):
        sys.exit(f"{stem}: LayerNormalization expected exactly at opset 17: {dict(ops)}")

    # PyTorch's output and gradients of loss = output.sum()
    model.zero_grad(set_to_none=True)
    leaves = {k: (v.clone().requires_grad_(True) if v.is_floating_point() else v)
              for k, v in inputs.items()}
    with torch.enable_grad():
        out = model(*leaves.values())
        out.sum().backward()
    d = os.path.join(HERE, stem)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for k, v in inputs.items():
        save(os.path.join(d, f"input_{k}.npy"), tensor_np(v))
        if v.is_floating_point():
            save(os.path.join(d, f"grad_input_{k}.npy"), tensor_np(leaves[k].grad))
    save(os.path.join(d, f"output_{out_name}.npy"), tensor_np(out))
    for pname, p in model.named_parameters():
        save(os.path.join(d, f"grad_param_{pname}.npy"), tensor_np(p.grad))
    model.zero_grad(set_to_none=True)

    mapping = build_mapping(model, g["initializers"])
    with open(os.path.join(d, "mapping.json"), "w") as f:  # one line per initializer
        items = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in mapping["initializers"].items()]
        f.write('{\n "initializers": {\n' + ",\n".join(items) + "\n },\n"
                f' "parameters_unmapped": {json.dumps(mapping["parameters_unmapped"])}\n}}\n')

    print(f"== {stem}.onnx: {len(g['nodes'])} nodes, {len(g['initializers'])} initializers")
    print("   ops: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    for iname, e in mapping["initializers"].items():
        a = g["initializers"][iname]
        what = (f"{'buffer' if e['buffer'] else 'param'} {e['parameter']} ({e['transform']})"
                if e["parameter"] else f"none, derived: {' = '.join(e['derived']) or '?'}")
        print(f"   {iname:28s} {str(a.dtype):8s} {str(list(a.shape)):10s} -> {what}")
    consts = [(n["value"].dtype, list(n["value"].shape)) for n in g["nodes"]
              if n["op_type"] == "Constant" and n["value"] is not None]
    print(f"   Constant nodes: {len(consts)} "
          f"({', '.join(sorted(set(f'{dt}{sh}' for dt, sh in consts)))})")
    if mapping["parameters_unmapped"]:
        print(f"   WARNING: parameters without an initializer: {mapping['parameters_unmapped']}")


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    for name, make in MODELS:
        model32, inputs32, out_name = make()
        model64 = copy.deepcopy(model32).double()
        inputs64 = {k: (v.double() if v.is_floating_point() else v) for k, v in inputs32.items()}
        for opset in OPSETS:
            for dtype_name, dtype in DTYPES:
                model, inputs = (model32, inputs32) if dtype == torch.float32 else (model64,
                                                                                      inputs64)
                export_one(name, model, inputs, out_name, opset, dtype_name)


if __name__ == "__main__":
    main()
