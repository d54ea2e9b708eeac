#!/usr/bin/env python3
"""PyTorch eager reference for the GPU training-step benchmark (scripts/device-check.sh, check (c)).

The model is pdist's GPT (ir/models/gpt.h) written in PyTorch: learned positions, pre-LayerNorm
blocks, fused qkv, GELU (tanh form) MLP of width 4h, biases everywhere, a final LayerNorm and an
untied head; causal attention through scaled_dot_product_attention (FlashAttention on recent
GPUs); bf16 autocast with f32 parameters and AdamW, as a PyTorch user trains. It reports what
pdist-train reports, with the same FLOP convention (Megatron-LM / PaLM: attention without its
mask, backward twice the forward, no recompute):

    model FLOPs per step = 72·B·l·s·h²·(1 + s/(6h) + V/(12·l·h))

    python3 benchmarks/torch_gpt.py --layers 24 --hidden 2048 --heads 16 --vocab 51200 --seq 2048 \\
        --batch 8 --steps 10 --peak-tflops 989

Timing: CUDA-synchronised wall time of the steps after --warmup, median step; tokens/s and MFU
from it. A batch that does not fit prints "out of memory" and exits 3.
"""
import argparse
import math
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=51200)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--peak-tflops", type=float, default=0, help="the device's bf16 dense peak: MFU")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (not eager)")
    args = p.parse_args()
    for name in ("layers", "hidden", "heads", "vocab", "seq", "batch", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.hidden % args.heads:
        p.error(f"--heads {args.heads} must divide --hidden {args.hidden}")
    return args


def model_flops_per_step(a):
    b, l, s, h, v = a.batch, a.layers, a.seq, a.hidden, a.vocab
    return 72.0 * b * l * s * h * h * (1 + s / (6.0 * h) + v / (12.0 * l * h))


def build(torch, a):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(a.hidden)
            self.qkv = nn.Linear(a.hidden, 3 * a.hidden)
            self.proj = nn.Linear(a.hidden, a.hidden)
            self.ln_2 = nn.LayerNorm(a.hidden)
            self.fc = nn.Linear(a.hidden, 4 * a.hidden)
            self.fc_proj = nn.Linear(4 * a.hidden, a.hidden)

        def forward(self, x):
            bsz, seq, hid = x.shape
            q, k, v = self.qkv(self.ln_1(x)).view(bsz, seq, a.heads, 3 * hid // a.heads).transpose(1, 2).chunk(3, dim=-1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(bsz, seq, hid))
            return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(a.vocab, a.hidden)
            self.wpe = nn.Embedding(a.seq, a.hidden)
            self.h = nn.ModuleList(Block() for _ in range(a.layers))
            self.ln_f = nn.LayerNorm(a.hidden)
            self.head = nn.Linear(a.hidden, a.vocab)
            for p in self.parameters():
                if p.dim() > 1:
                    nn.init.normal_(p, std=0.02)

        def forward(self, tokens, labels):
            x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
            for block in self.h:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.float().view(-1, a.vocab), labels.view(-1))

    return Gpt()


def main():
    a = parse_args()
    try:
        import torch
    except ImportError:
        print("torch_gpt: PyTorch is not installed here", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_gpt: no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    torch.manual_seed(1)
    device = torch.device("cuda")
    try:
        model = build(torch, a).to(device)
        params = sum(p.numel() for p in model.parameters())
        step_fn = torch.compile(model) if a.compile else model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq), device=device)
        labels = torch.randint(0, a.vocab, (a.batch, a.seq), device=device)
        times, loss = [], None
        for i in range(a.warmup + a.steps):
            torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = step_fn(tokens, labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            if i >= a.warmup:
                times.append(time.perf_counter() - start)
    except torch.cuda.OutOfMemoryError:
        print(f"torch_gpt: out of memory at batch {a.batch}", file=sys.stderr)
        return 3
    step = statistics.median(times)
    tflops = model_flops_per_step(a) / step / 1e12
    mfu = f", MFU {100 * tflops / a.peak_tflops:.1f}%" if a.peak_tflops > 0 else ""
    print(f"torch_gpt: {params / 1e9:.3f}B parameters, batch {a.batch} x seq {a.seq}, "
          f"{'compiled' if a.compile else 'eager'}: median step {step * 1e3:.1f} ms over {a.steps} steps, "
          f"{a.batch * a.seq / step:.0f} tokens/s, {tflops:.1f} TFLOP/s{mfu}, "
          f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB, last loss {loss.item():.4f}")
    assert math.isfinite(loss.item()), "loss is not finite"
    return 0


if __name__ == "__main__":
    sys.exit(main())
