"""PyTorch peer on a GPU: bench/peers/torch_peer.py's `nn.Transformer` model at the sizes of
bench/gpu/base_config.py, trained with Adam on CUDA.

    python3 bench/gpu/torch_cuda.py --precision=bfloat16 [--compile]

float32 allows TF32 matmuls (`torch.set_float32_matmul_precision("high")`), as XLA does by
default; bfloat16 and float16 run the forward and loss under `torch.autocast("cuda")`, float16
with a GradScaler. --compile wraps the model in `torch.compile`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import base_config as C
import torch
import values
from torch import nn


class Seq2Seq(nn.Module):
    """Shared embedding x sqrt(d_model) + sinusoids -> nn.Transformer -> tied projection."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(C.VOCAB, C.D_MODEL, padding_idx=0)
        nn.init.normal_(self.embedding.weight, std=C.D_MODEL**-0.5)
        self.transformer = nn.Transformer(
            d_model=C.D_MODEL,
            nhead=C.HEADS,
            num_encoder_layers=C.LAYERS,
            num_decoder_layers=C.LAYERS,
            dim_feedforward=C.D_FF,
            dropout=C.DROPOUT,
            batch_first=True,
        )
        position = torch.arange(1024, dtype=torch.float32)[:, None]
        rates = torch.exp(torch.arange(0, C.D_MODEL, 2) * (-math.log(10000.0) / C.D_MODEL))
        table = torch.zeros(1024, C.D_MODEL)
        table[:, 0::2], table[:, 1::2] = torch.sin(position * rates), torch.cos(position * rates)
        self.register_buffer("positions", table)

    def embed(self, ids):
        return self.embedding(ids) * math.sqrt(C.D_MODEL) + self.positions[: ids.shape[1]]

    def forward(self, source, target):
        """source [b, s], target [b, t] ids -> logits [b, t, vocab] (teacher forcing)."""
        decoder_input = nn.functional.pad(target, (1, 0))[:, :-1]  # shift right, start id 0
        causal = nn.Transformer.generate_square_subsequent_mask(
            target.shape[1], device=target.device
        )
        hidden = self.transformer(
            self.embed(source), self.embed(decoder_input), tgt_mask=causal, tgt_is_causal=True
        )
        return hidden @ self.embedding.weight.T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--precision", default="float32", choices=("float32", "bfloat16", "float16")
    )
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    torch.set_float32_matmul_precision("high")
    torch.manual_seed(0)
    model = Seq2Seq().cuda()
    forward = torch.compile(model) if args.compile else model
    optimizer = torch.optim.Adam(
        model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True
    )
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=C.LABEL_SMOOTHING)
    source, target = (
        torch.from_numpy(a).long().cuda() for a in values.batch(C.SENTENCES, C.LENGTH, C.VOCAB)
    )
    half = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(args.precision)
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "float16")

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=half or torch.float32, enabled=half is not None):
            logits = forward(source, target)
            loss = loss_fn(logits.float().reshape(-1, C.VOCAB), target.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.item()  # waits for the step

    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    warmup_seconds = time.perf_counter() - start
    seconds = []
    for i in range(args.steps):
        start = time.perf_counter()
        loss = step()
        seconds.append(time.perf_counter() - start)
        print(
            f"torch {args.precision} {i + 1}/{args.steps}: "
            f"{seconds[-1] * 1e3:.1f} ms, loss {loss:.4f}",
            file=sys.stderr,
        )
    median = statistics.median(seconds)
    print(
        "RESULT "
        + json.dumps(
            {
                "peer": "torch" + (" compile" if args.compile else ""),
                "precision": args.precision,
                "steps": args.steps,
                "seconds_per_step": median,
                "target_tokens_per_s": C.TARGET_TOKENS / median,
                "last_loss": loss,
                "warmup_seconds": warmup_seconds,
                "torch": torch.__version__,
                "device": torch.cuda.get_device_name(),
            }
        )
    )


if __name__ == "__main__":
    main()
