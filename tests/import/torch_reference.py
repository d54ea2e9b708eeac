#!/usr/bin/env python3
"""Two small transformers in PyTorch, exported to ONNX, with their losses and gradients.

    /usr/bin/python3 tests/import/torch_reference.py OUTDIR

writes, for `decoder` (a GPT-style language model written here) and `encoder` (a BERT-style
classifier from torch.nn.TransformerEncoder, with token-type embeddings and a tanh pooler),
OUTDIR/<name>/model.onnx (opset 17, static shapes) and OUTDIR/<name>/reference.json: the batch
(every graph input, and the labels), PyTorch's mean cross-entropy loss on it and the gradient of
every ONNX initializer, keyed by the initializer's name. The exporter renames and transposes parameters
(a Linear's weight becomes `onnx::MatMul_<n>`, its transpose), so each initializer is matched
to the PyTorch parameter it came from by its numbers, which are random and so unique.
tests/import/onnx_torch_test.cc imports the model and checks pdist against this file.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn

VOCAB, HIDDEN, HEADS, SEQ, BATCH, LAYERS = 256, 32, 2, 8, 4, 2  # vocab: bytes, so text trains it


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN)
        self.fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.out = nn.Linear(4 * HIDDEN, HIDDEN)
        # Causal mask as a bool buffer and masked_fill: exported as an initializer and Where.
        self.register_buffer("mask", torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1))

    def heads(self, x):
        return x.reshape(BATCH, SEQ, HEADS, HIDDEN // HEADS).transpose(1, 2)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(HIDDEN, dim=-1)
        q, k, v = self.heads(q), self.heads(k), self.heads(v)
        scores = (q @ k.transpose(-1, -2) * (1.0 / (HIDDEN // HEADS) ** 0.5)).masked_fill(self.mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(BATCH, SEQ, HIDDEN))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))  # erf form: ONNX Erf


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Parameter(torch.randn(SEQ, HIDDEN) * 0.02)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.lnf = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))


class Encoder(nn.Module):
    CLASSES, TYPES = 3, 2

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.types = nn.Embedding(self.TYPES, HIDDEN)
        layer = nn.TransformerEncoderLayer(HIDDEN, 4, 2 * HIDDEN, dropout=0.0, batch_first=True, activation="gelu")
        self.layers = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.pool = nn.Linear(HIDDEN, HIDDEN)
        self.cls = nn.Linear(HIDDEN, self.CLASSES)

    def forward(self, tokens, types):
        h = self.layers(self.wte(tokens) + self.types(types))
        return self.cls(torch.tanh(self.pool(h[:, 0])))


def export(name, model, inputs, labels, out_dir):
    with torch.no_grad():  # every number distinct, so each initializer matches one parameter
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.eval()  # dropout off: the exported graph is the deterministic forward
    directory = os.path.join(out_dir, name)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "model.onnx")
    torch.onnx.export(model, tuple(inputs.values()), path, opset_version=17, input_names=list(inputs),
                      output_names=["logits"], do_constant_folding=True)
    logits = model(*inputs.values())
    loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    loss.backward()

    import onnx
    from onnx import numpy_helper
    params = [(name, p.detach().numpy(), p.grad.numpy()) for name, p in model.named_parameters()]
    gradients = {}
    for init in onnx.load(path).graph.initializer:
        value = numpy_helper.to_array(init)
        if value.dtype == np.bool_:  # the causal mask, folded by the exporter: not a parameter
            continue
        for name, p, g in params:
            if p.shape == value.shape and np.array_equal(p, value):
                gradients[init.name] = g.ravel().tolist()
                break
            if p.ndim == 2 and p.T.shape == value.shape and np.array_equal(p.T, value):
                gradients[init.name] = g.T.ravel().tolist()
                break
        else:
            sys.exit(f"initializer {init.name} matches no parameter")
    reference = {"inputs": {k: v.ravel().tolist() for k, v in inputs.items()}, "labels": labels.ravel().tolist(),
                 "loss": loss.item(), "gradients": gradients}
    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump(reference, f)
    print(f"{path}: {len(gradients)} parameters, loss {loss.item():.6f}")


def main(out_dir):
    torch.manual_seed(0)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ))
    export("decoder", Decoder(), {"tokens": tokens}, torch.randint(0, VOCAB, (BATCH, SEQ)), out_dir)
    types = torch.randint(0, Encoder.TYPES, (BATCH, SEQ))
    export("encoder", Encoder(), {"tokens": tokens, "types": types}, torch.randint(0, Encoder.CLASSES, (BATCH,)), out_dir)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: torch_reference.py OUTDIR")
    main(sys.argv[1])
