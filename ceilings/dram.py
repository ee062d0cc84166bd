"""Expected DRAM bytes of a launch, as Nsight Compute counts them: re-reads past the L2 and writes still
in the L2 when the kernel ends.

The compulsory bytes of `ceilings.demand` (each tensor's touched bytes once) stay the floor. What a
profiler measures differs both ways (RESULTS 12-13): an operand of a GEMM-like kernel is read again from
DRAM when the CTAs that share a tile run too far apart for it to stay in the L2, and a kernel's output
still in the L2 when it ends has not been written to DRAM (Nsight Compute flushes the caches before each
profiled kernel and counts `dram__bytes_write` within it). This is an estimate for the model's features
(`expected_dram_bytes`), never part of a ceiling.

The launch is replayed at the granularity of waves and streams: CTAs run in launch order (x fastest),
`resident` at a time; each access of each CTA reads or writes a *stream*, the data its per-CTA scalars
address (`ceilings.ttir_eval.Access.stream`: CTAs with equal ids address the same elements), whose size
is its bytes per CTA capped by the tensor's footprint over its distinct streams. The L2 is an LRU cache
of `l2_bytes` over streams: a wave's read of a stream not in it is a DRAM read; a written stream is
dirty, and its bytes reach DRAM when it is evicted, not when the kernel ends. A stream a CTA reads twice
(a row read by two loops) is read again from DRAM when the wave's distinct bytes exceed the L2. An access
whose address depends on memory (a gather) counts its compulsory bytes. Assumptions: whole lines written
(no read for ownership), LRU replacement, one L2 of the spec's size (Hopper's two partitions not told
apart), CTAs dispatched in launch order.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

# The L2 capacity a launch's data competes for, as a share of the spec's: Hopper's (and Ampere's) L2 is two
# partitions, each caching what the SMs next to it access, so data read from both sides is held twice
# (NVIDIA A100 whitepaper, "L2 cache"). Chosen between 1 and 1/2 on the corpus against Nsight Compute, each
# library's value decided on the other three (1/2 every time; RESULTS 26).
L2_SHARE = 0.5
# Launches of more waves are replayed in at most this many steps, consecutive waves merged (the
# replay's time grows with its steps; merging counts a tile shared by neighbouring waves once).
MAX_WAVES = 128


@dataclass
class StreamAccess:
    """One access of the IR over the evaluated CTAs."""

    argument: str
    kind: str                   # "load", "store", "atomic"
    bytes_per_cta: np.ndarray   # per evaluated CTA: bytes its executions move (expected runs)
    stream: np.ndarray | None   # per evaluated CTA: id of the data it addresses; None: depends on memory


@dataclass
class DramTraffic:
    """What the expected DRAM bytes are computed from: the launch's accesses and tensors' footprints."""

    footprint: dict[str, float]
    accesses: list[StreamAccess] = field(default_factory=list)
    share: float = 1.0          # CTAs of the grid each evaluated CTA stands for


def expected_dram_bytes(traffic: DramTraffic, l2_bytes: float, resident_ctas: int) -> tuple[float, float]:
    """(DRAM bytes read, DRAM bytes written) the launch is expected to move within the kernel, on an L2 of
    `l2_bytes` with `resident_ctas` CTAs running at once (module docstring).

    The L2's recency order is taken at wave granularity: a stream touched again at wave v after wave u is
    still in the L2 when the distinct bytes of waves u to v - 1 fit in it (an upper bound on its LRU
    distance: a stream touched in several of those waves counts in each), and a dirty stream reaches DRAM
    when the distinct bytes from its last write to its next touch, or to the end, do not fit."""
    known = [a for a in traffic.accesses if a.stream is not None and a.argument in traffic.footprint]
    read, written = _compulsory([a for a in traffic.accesses if a.stream is None and a.argument in traffic.footprint],
                                traffic)
    if not known:
        return read, written
    evaluated = len(known[0].stream)
    wave = max(1, round(resident_ctas / max(traffic.share, 1.0)), -(-evaluated // MAX_WAVES))
    of_cta = np.arange(evaluated) // wave
    waves = int(of_cta[-1]) + 1
    arguments = sorted({a.argument for a in known})
    span = max(int(a.stream.max()) for a in known) + 1
    # Per (stream, wave): the bytes one CTA moves on it (max over CTAs, summed over accesses), read / write.
    keys, per_wave, moved, is_read, is_write = [], [], [], [], []
    for a in known:
        live = a.bytes_per_cta > 0
        if not live.any():
            continue
        pair = (arguments.index(a.argument) * span + a.stream[live]) * waves + of_cta[live]
        pairs, where = np.unique(pair, return_inverse=True)
        most = np.zeros(len(pairs))
        np.maximum.at(most, where, a.bytes_per_cta[live])
        keys.append(pairs // waves)
        per_wave.append(pairs % waves)
        moved.append(most)
        is_read.append(np.full(len(pairs), a.kind in ("load", "atomic")))
        is_write.append(np.full(len(pairs), a.kind in ("store", "atomic")))
    if not keys:
        return read, written
    key, at, most = np.concatenate(keys), np.concatenate(per_wave), np.concatenate(moved)
    reads, writes = np.concatenate(is_read), np.concatenate(is_write)
    size = _stream_sizes(key, most, at, traffic.footprint, arguments, span)
    # One row per (stream, wave) touched.
    pair = key * waves + at
    pairs, where = np.unique(pair, return_inverse=True)
    stream, touched_at = pairs // waves, pairs % waves
    touched = np.bincount(where, weights=most, minlength=len(pairs))
    read_here = np.bincount(where, weights=reads, minlength=len(pairs)) > 0
    write_here = np.bincount(where, weights=writes, minlength=len(pairs)) > 0
    bytes_ = size[np.searchsorted(np.unique(key), stream)] * traffic.share
    distinct = np.bincount(touched_at, weights=bytes_, minlength=waves)
    before = np.concatenate([[0.0], np.cumsum(distinct)])  # distinct bytes of the waves before each wave
    # Bytes one CTA moves on a stream beyond its size are read again (a row read by two loops): from DRAM
    # when the wave's distinct bytes exceed the L2.
    again = np.where(distinct > 0, np.maximum(0.0, 1.0 - l2_bytes / np.maximum(distinct, 1e-30)), 0.0)
    extra = np.maximum(0.0, touched - bytes_ / traffic.share) * traffic.share * again[touched_at]
    read += float(extra[read_here].sum())
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = stream[1:] != stream[:-1]
    # Distinct bytes between two touches: the waves strictly between, and half of each touch's own wave
    # (where in its wave an access falls is not known).
    gone = np.ones(len(pairs), dtype=bool)  # evicted between the previous touch and this one
    u, v = touched_at[:-1], touched_at[1:]
    # Summed over waves, a stream touched in several counts in each: at most every stream's bytes once.
    everything = float(size.sum()) * traffic.share
    gone[1:] = np.minimum(before[v] - before[u + 1] + 0.5 * (distinct[u] + distinct[v]), everything) > l2_bytes
    gone[first] = True
    read += float(bytes_[read_here & gone].sum())
    # Dirty streams: written back when evicted before the next touch (or before the end).
    last = np.ones(len(pairs), dtype=bool)
    last[:-1] = stream[:-1] != stream[1:]
    evicted_after = np.empty(len(pairs), dtype=bool)
    evicted_after[:-1] = gone[1:]
    w = touched_at[last]
    evicted_after[last] = np.minimum(before[waves] - before[w + 1] + 0.5 * distinct[w], everything) > l2_bytes
    dirty = _dirty_since_eviction(write_here, gone)
    written += float(bytes_[dirty & evicted_after].sum())
    return read, written


def expected_dram_for(traffic: DramTraffic | None, l2_bytes: float | None, resident_ctas: int) -> float | None:
    """Expected DRAM bytes (read + written) on a GPU with `l2_bytes` of L2; None without the traffic or L2."""
    if traffic is None or not l2_bytes:
        return None
    return sum(expected_dram_bytes(traffic, l2_bytes * L2_SHARE, max(resident_ctas, 1)))


def _dirty_since_eviction(write_here: np.ndarray, gone: np.ndarray) -> np.ndarray:
    """Per touch (sorted by stream, then wave): whether a write happened at it or at an earlier touch of the
    same stream since the stream last came back from DRAM (`gone`)."""
    segment = np.cumsum(gone)  # touches between two evictions share a segment
    writes_so_far = np.cumsum(write_here)
    at_segment_start = np.zeros(int(segment[-1]) + 1 if len(segment) else 1)
    starts = np.flatnonzero(gone)
    at_segment_start[segment[starts]] = writes_so_far[starts] - write_here[starts]
    return writes_so_far - at_segment_start[segment] > 0


def _stream_sizes(key: np.ndarray, most: np.ndarray, at: np.ndarray, footprint: dict[str, float],
                  arguments: list[str], span: int) -> np.ndarray:
    """Bytes of each stream (sorted keys): the most one CTA moves on it in a wave over its accesses, at most
    the tensor's footprint over its distinct streams (a tensor's streams are taken to partition it)."""
    streams, where = np.unique(key, return_inverse=True)
    largest = np.zeros(len(streams))
    # Sum over accesses within a wave, then the largest over waves.
    pair = key * (int(at.max()) + 1) + at
    pairs, inverse = np.unique(pair, return_inverse=True)
    summed = np.bincount(inverse, weights=most)
    np.maximum.at(largest, np.searchsorted(streams, pairs // (int(at.max()) + 1)), summed)
    argument = streams // span
    count = np.bincount(argument, minlength=len(arguments))
    cap = np.array([footprint[name] for name in arguments]) / np.maximum(count, 1)
    return np.minimum(largest, cap[argument])


def _compulsory(accesses: list[StreamAccess], traffic: DramTraffic) -> tuple[float, float]:
    """Reads and writes of accesses whose addresses depend on memory: each tensor's issued bytes, at most
    its footprint."""
    read: dict[str, float] = defaultdict(float)
    written: dict[str, float] = defaultdict(float)
    for a in accesses:
        moved = float(a.bytes_per_cta.sum()) * traffic.share
        if a.kind in ("load", "atomic"):
            read[a.argument] += moved
        if a.kind in ("store", "atomic"):
            written[a.argument] += moved
    cap = traffic.footprint
    return sum(min(cap[k], v) for k, v in read.items()), sum(min(cap[k], v) for k, v in written.items())
