"""PyTorch peer: `torch.nn.Transformer` (post-norm, ReLU) with a tied embedding, trained with Adam.

    .bench/torch/bin/python bench/peers/torch_peer.py --task=train --dtype=float32

bfloat16 runs the forward and loss under `torch.autocast("cpu", torch.bfloat16)` with float32
weights (PyTorch's mixed precision on CPU).
"""

from __future__ import annotations

import math

import protocol as P
import torch
from torch import nn


class Seq2Seq(nn.Module):
    """Shared embedding x sqrt(d_model) + sinusoids -> nn.Transformer -> tied projection."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(P.VOCAB, P.D_MODEL, padding_idx=P.PAD_ID)
        nn.init.normal_(self.embedding.weight, std=P.D_MODEL**-0.5)
        self.transformer = nn.Transformer(
            d_model=P.D_MODEL,
            nhead=P.HEADS,
            num_encoder_layers=P.LAYERS,
            num_decoder_layers=P.LAYERS,
            dim_feedforward=P.D_FF,
            dropout=P.DROPOUT,
            batch_first=True,
        )
        position = torch.arange(512, dtype=torch.float32)[:, None]
        rates = torch.exp(torch.arange(0, P.D_MODEL, 2) * (-math.log(10000.0) / P.D_MODEL))
        table = torch.zeros(512, P.D_MODEL)
        table[:, 0::2], table[:, 1::2] = torch.sin(position * rates), torch.cos(position * rates)
        self.register_buffer("positions", table)

    def embed(self, ids):
        return self.embedding(ids) * math.sqrt(P.D_MODEL) + self.positions[: ids.shape[1]]

    def forward(self, source, target):
        """source [b, s], target [b, t] ids -> logits [b, t, vocab] (teacher forcing)."""
        decoder_input = nn.functional.pad(target, (1, 0))[:, :-1]  # shift right, start id 0
        causal = nn.Transformer.generate_square_subsequent_mask(target.shape[1])
        hidden = self.transformer(
            self.embed(source),
            self.embed(decoder_input),
            tgt_mask=causal,
            tgt_is_causal=True,
            src_key_padding_mask=source == P.PAD_ID,
            memory_key_padding_mask=source == P.PAD_ID,
        )
        return hidden @ self.embedding.weight.T


def main() -> None:
    args = P.parse_args(("train",), ("float32", "bfloat16"))
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Seq2Seq()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=P.PAD_ID, label_smoothing=P.LABEL_SMOOTHING)
    source, target = (torch.from_numpy(a).long() for a in P.batch())
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.dtype == "bfloat16")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            logits = model(source, target)
            loss = loss_fn(logits.float().reshape(-1, P.VOCAB), target.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    seconds = P.time_calls(step, args.steps, args.warmup, f"torch {args.dtype}")
    P.report(seconds, version=torch.__version__, threads=torch.get_num_threads())


if __name__ == "__main__":
    main()
