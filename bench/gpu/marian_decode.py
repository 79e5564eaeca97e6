"""Decoding peer on a GPU: Hugging Face transformers' `MarianMTModel.generate` (beam 4, or
greedy) at the sizes of bench/gpu/base_config.py, with random weights, on the batch that
bench/gpu/export_decode.py exports for t2t_lite.

    python3 bench/gpu/marian_decode.py --precision=bfloat16 --steps=64

Marian is the paper's base Transformer in transformers (post-norm, sinusoidal positions, shared
embeddings). Its EOS is held back for --steps new tokens (`min_new_tokens`), so every search runs
exactly --steps steps, as t2t_lite's random-weight search runs to its state's width (run_decode
reports its steps). Eager PyTorch with transformers' own key/value cache; float32 allows TF32.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import base_config as C
import torch
import transformers
import values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--precision", default="float32", choices=("float32", "bfloat16", "float16")
    )
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--length", type=int, default=32, help="source tokens, EOS last")
    parser.add_argument("--steps", type=int, default=64, help="new tokens per sentence")
    parser.add_argument("--beam_size", type=int, default=4, help="1: greedy search")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    torch.set_float32_matmul_precision("high")
    torch.manual_seed(0)
    config = transformers.MarianConfig(
        vocab_size=C.VOCAB,
        d_model=C.D_MODEL,
        encoder_layers=C.LAYERS,
        decoder_layers=C.LAYERS,
        encoder_attention_heads=C.HEADS,
        decoder_attention_heads=C.HEADS,
        encoder_ffn_dim=C.D_FF,
        decoder_ffn_dim=C.D_FF,
        max_position_embeddings=512,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        scale_embedding=True,
    )
    dtype = getattr(torch, args.precision)
    model = transformers.MarianMTModel(config).to("cuda", dtype).eval()
    source = torch.from_numpy(values.batch(args.sentences, args.length, C.VOCAB)[0]).long().cuda()

    def search() -> int:
        with torch.inference_mode():
            out = model.generate(
                input_ids=source,
                attention_mask=torch.ones_like(source),
                num_beams=args.beam_size,
                length_penalty=0.6,
                max_new_tokens=args.steps,
                min_new_tokens=args.steps,
                do_sample=False,
            )
        if out.shape[1] != args.steps + 1:  # the start id, then exactly --steps tokens
            raise RuntimeError(f"generate made {out.shape[1] - 1} steps, not {args.steps}")
        return out.shape[0] * args.steps  # every position of the best hypotheses

    for _ in range(args.warmup):
        search()
    seconds = []
    for i in range(args.runs):
        start = time.perf_counter()
        tokens = search()
        seconds.append(time.perf_counter() - start)
        print(
            f"marian {args.precision} {i + 1}/{args.runs}: {seconds[-1] * 1e3:.1f} ms",
            file=sys.stderr,
        )
    median = statistics.median(seconds)
    result = {
        "peer": "transformers MarianMTModel.generate",
        "precision": args.precision,
        "beam_size": args.beam_size,
        "batch": [args.sentences, args.length],
        "runs": args.runs,
        "seconds_per_search": median,
        "steps": args.steps,
        "output_tokens": tokens,
        "output_tokens_per_s": tokens / median,
        "ms_per_step": median / args.steps * 1e3,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
