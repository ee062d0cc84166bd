"""How fast atomic adds into a few hot cache lines go (issue 14: a floor for contended atomics; issue 15: set 7's
expert histogram, predicted 30x too fast).

    python3 benchmarks/atomic_contention_probe.py --out $OUT [--only indexed]   # on the GPU

1. *Hot lines.* Every lane of a grid of 4-warp programs adds 1 into one of LINES cache lines (128 B each, spaced
   STRIDE words apart), WORDS distinct words used per line, 2^20 adds per line in all, as int32 or float32 atomics
   (result unused), relaxed or acq_rel (Triton's default, what a user's `tl.atomic_add` gets). Scalar patterns
   permute the words so no two adjacent lanes hold adjacent words (no vector atomics); the vector pattern adds
   contiguous words (the compiler may issue 4 at a time). Per pattern: ns per add into one line (time x lines /
   adds) and ns per add into one word.
2. *Indexed adds.* The histogram's pattern without its kernel: 262,144 relaxed int32 adds into words read
   from an index tensor, drawn at random from W words, or no two alike in any run of 256 elements.
3. *The held-out kernel.* `benchmarks/user_kernels/expert_histogram.py` (written by a helper, set 7) on 32,768 x 8
   int32 ids drawn uniformly from [0, E) for several E, and with 8 hot experts of 256 taking 3/4 of the ids;
   its counts checked against `torch.bincount` first.
Every time is a CUDA graph of 10 launches, median of 20 replays, after warm-up (`advisor.measure.timing`).
Prints a short table; writes every row to $OUT/atomic_contention.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent / "user_kernels"))

ADDS_PER_LINE = 1 << 20
BLOCK = 1024
STRIDE = 1024  # words between hot lines: 4 KiB, so lines fall in different L2 slices


@triton.jit
def hot_lines_kernel(buf_ptr, LINES: tl.constexpr, WORDS: tl.constexpr, STRIDE_W: tl.constexpr,
                     VECTOR: tl.constexpr, FLOAT: tl.constexpr, RELAXED: tl.constexpr, BLOCK_E: tl.constexpr):
    pid = tl.program_id(0)
    i = tl.arange(0, BLOCK_E)
    if VECTOR:
        word = i % WORDS
        line = (i // WORDS + pid) % LINES
    else:
        word = (i * 5) % WORDS  # an odd multiplier permutes the words: adjacent lanes, non-adjacent words
        line = (i // WORDS + pid) % LINES
    ptrs = buf_ptr + line * STRIDE_W + word
    one = tl.full((BLOCK_E,), 1.0, dtype=tl.float32) if FLOAT else tl.full((BLOCK_E,), 1, dtype=tl.int32)
    if RELAXED:
        tl.atomic_add(ptrs, one, sem="relaxed")
    else:
        tl.atomic_add(ptrs, one)


@triton.jit
def indexed_adds_kernel(buf_ptr, idx_ptr, n, BLOCK_E: tl.constexpr):
    """One relaxed int32 add per element into the word its index names (no mask beyond the end)."""
    i = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    word = tl.load(idx_ptr + i, mask=i < n, other=0)
    tl.atomic_add(buf_ptr + word, tl.full((BLOCK_E,), 1, dtype=tl.int32), mask=i < n, sem="relaxed")


PATTERNS = [  # (lines, words, vector)
    (1, 1, False), (1, 8, False), (1, 32, False), (1, 32, True),
    (2, 32, False), (8, 32, False), (8, 32, True), (32, 32, False), (256, 32, False),
    (8, 1, False), (8, 8, False),
]


def hot_lines(torch, timer) -> list[dict]:
    rows = []
    for lines, words, vector in PATTERNS:
        for is_float in (False, True):
            for relaxed in (True, False):
                if is_float and not relaxed:
                    continue
                dtype = torch.float32 if is_float else torch.int32
                buf = torch.zeros(lines * STRIDE + 64, dtype=dtype, device="cuda")
                programs = lines * ADDS_PER_LINE // BLOCK

                def launch(buf=buf, lines=lines, words=words, vector=vector, is_float=is_float, relaxed=relaxed,
                           programs=programs):
                    hot_lines_kernel[(programs,)](buf, LINES=lines, WORDS=words, STRIDE_W=STRIDE, VECTOR=vector,
                                                  FLOAT=is_float, RELAXED=relaxed, BLOCK_E=BLOCK, num_warps=4)
                buf.zero_()
                launch()
                torch.cuda.synchronize()
                total = float(buf.sum().item())
                ok = total == lines * ADDS_PER_LINE
                us = timer(launch) if ok else None
                adds = lines * ADDS_PER_LINE
                rows.append({"lines": lines, "words": words, "vector": vector, "dtype": "f32" if is_float else "i32",
                             "sem": "relaxed" if relaxed else "acq_rel", "adds": adds, "checked": ok,
                             "us": us and round(us, 3),
                             "ns_per_add_per_line": us and round(us * 1e3 * lines / adds, 4),
                             "ns_per_add_per_word": us and round(us * 1e3 * lines * words / adds, 4)})
                print(json.dumps(rows[-1]), flush=True)
                del buf
    return rows


def indexed(torch, timer) -> list[dict]:
    """The histogram's access pattern without its kernel: 262,144 adds into words drawn at random from W, or a
    permutation of 256 words in every run of 256 elements (no two lanes of one instruction share a word,
    however the layout deals elements to lanes within 256), relaxed, unmasked."""
    rows = []
    n = 1 << 18
    gen = torch.Generator(device="cuda").manual_seed(1)
    draws = [(f"random of {w}", w, torch.randint(0, w, (n,), device="cuda", dtype=torch.int32, generator=gen))
             for w in (32, 256, 1024, 8192)]
    perm = torch.argsort(torch.rand((n // 256, 256), device="cuda", generator=gen), dim=1).to(torch.int32)
    draws.append(("a permutation of 256 per 256 elements", 256, perm.flatten().contiguous()))
    for name, w, idx in draws:
        buf = torch.zeros(w, dtype=torch.int32, device="cuda")

        def launch(buf=buf, idx=idx):
            indexed_adds_kernel[(n // BLOCK,)](buf, idx, n, BLOCK_E=BLOCK, num_warps=4)
        launch()
        torch.cuda.synchronize()
        ok = bool(torch.equal(buf, torch.bincount(idx.long(), minlength=w).to(torch.int32)))
        us = timer(launch) if ok else None
        rows.append({"pattern": name, "words": w, "adds": n, "checked": ok, "us": us and round(us, 3)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def histogram(torch, timer) -> list[dict]:
    from expert_histogram import expert_histogram

    rows = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    draws = [(e, "uniform", torch.randint(0, e, (32768, 8), device="cuda", dtype=torch.int32, generator=gen))
             for e in (8, 64, 256, 1024, 8192)]
    hot = torch.randint(0, 256, (32768, 8), device="cuda", dtype=torch.int32, generator=gen)
    few = torch.randint(0, 8, (32768, 8), device="cuda", dtype=torch.int32, generator=gen)
    pick = torch.rand((32768, 8), device="cuda", generator=gen) < 0.75
    draws.append((256, "8 hot of 256", torch.where(pick, few, hot)))
    for e, routing, ids in draws:
        ref = torch.bincount(ids.flatten().long(), minlength=e).to(torch.int32)
        ok = bool(torch.equal(expert_histogram(ids, num_experts=e), ref))
        us = timer(lambda ids=ids, e=e: expert_histogram(ids, num_experts=e)) if ok else None
        rows.append({"experts": e, "routing": routing, "ids": list(ids.shape), "checked": ok,
                     "us": us and round(us, 3), "most_adds_one_word": int(ref.max()),
                     "most_adds_one_line": int(ref.view(-1, 32).sum(1).max()) if e % 32 == 0 else int(ref.sum())})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", choices=("indexed",), help="only the indexed adds and the histogram")
    args = parser.parse_args(argv)
    import torch

    from advisor.measure.timing import time_launch, versions

    def timer(fn):
        return time_launch(fn, launches_per_graph=10, replays=20, warmup=3, warmup_s=0.05).us

    started = time.monotonic()
    doc = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "gpu": torch.cuda.get_device_name(),
           **versions(), "command": " ".join(sys.argv)}
    doc["hot_lines"] = [] if args.only else hot_lines(torch, timer)
    doc["indexed"] = indexed(torch, timer)
    doc["histogram"] = histogram(torch, timer)
    doc["wall_s"] = round(time.monotonic() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "atomic_contention.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\n{doc['gpu']}, {doc['date']}")
    print("| lines | words | vector | dtype | sem | us | ns / add / line | ns / add / word |")
    print("|---|---|---|---|---|---|---|---|")
    for r in doc["hot_lines"]:
        print(f"| {r['lines']} | {r['words']} | {r['vector']} | {r['dtype']} | {r['sem']} | {r['us']} | "
              f"{r['ns_per_add_per_line']} | {r['ns_per_add_per_word']} |")
    print("| indexed adds (262,144) | us |\n|---|---|")
    for r in doc["indexed"]:
        print(f"| {r['pattern']} | {r['us']} |")
    print("| experts | routing | us | most adds into one word | into one line |\n|---|---|---|---|---|")
    for r in doc["histogram"]:
        print(f"| {r['experts']} | {r['routing']} | {r['us']} | {r['most_adds_one_word']} | "
              f"{r['most_adds_one_line']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
