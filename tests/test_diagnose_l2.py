"""The L2 re-read cause of `advisor diagnose` on launches whose weight traffic is known by construction:
a GEMM whose 132 N blocks fill exactly one wave per M block (GROUP_M = 1: every wave re-reads all 277
MB of B, far past the 50 MB L2; GROUP_M = 8: the three M blocks of each N block run in one wave and
share each slab), a GEMM whose whole B (23 MB) stays in L2, and the reuse-distance rule itself."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.advice.diagnose import diagnose, diagnose_ceiling
from advisor.advice.diagnose_l2 import even_runs, grouped_order, reread_bytes
from advisor.advice.subjects import FamilySubject
from ceilings.launch import Config
from kernels.family import family_named
from tests.test_diagnose import GPU, SMS, check_sums

LONG = 10_000.0
SLAB = 256 * 4096 * 2  # one BLOCK_N = 256 slab of a K = 4096 bf16 weight matrix


def gemm(shape: str, group_m: int) -> FamilySubject:
    family = family_named("gemm")
    config = Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": group_m}, 8, 3)
    return FamilySubject(family, family.read_shape(shape), GPU, config)


def rereads(d):
    return next(c for c in d.causes if c.name == "L2 re-reads")


def test_grouped_order_is_row_major_at_one_and_column_major_past_the_grid():
    pid_m, pid_n = grouped_order(3, 4, 1)
    assert list(pid_m) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2] and list(pid_n) == [0, 1, 2, 3] * 3
    pid_m, pid_n = grouped_order(3, 4, 8)
    assert list(pid_m) == [0, 1, 2] * 4 and list(pid_n) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    pid_m, _ = grouped_order(5, 2, 2)  # groups of two rows, the last group one row
    assert list(pid_m) == [0, 1, 0, 1, 2, 3, 2, 3, 4, 4]


def test_one_m_row_per_wave_re_reads_every_slab_each_wave():
    subject = gemm("384,33792,4096", 1)  # 3 M blocks x 132 N blocks, one CTA per SM: a wave per M block
    (ceiling,) = subject.ceilings([subject.current])
    assert ceiling.active_ctas == 3 * SMS and ceiling.ctas_per_sm == 1
    d = diagnose(subject, time_us=LONG)
    # Waves 1 and 2 read all 132 slabs again; between two reads 132 slabs (277 MB) stream past.
    expected_us = 2 * SMS * SLAB / (GPU.rates.dram_tbs * 1e12) * 1e6
    assert rereads(d).estimate_us == pytest.approx(expected_us, rel=1e-9)
    assert "3 wave(s) of 132 CTAs" in rereads(d).why
    assert any("least-recently-used" in n for n in d.notes)
    check_sums(d)


def test_grouping_the_m_blocks_shares_each_slab_within_a_wave():
    d = diagnose(gemm("384,33792,4096", 8), time_us=LONG)
    assert rereads(d).estimate_us == 0.0
    assert not any("least-recently-used" in n for n in d.notes)


def test_weights_that_fit_in_l2_are_not_read_again():
    d = diagnose(gemm("6144,2816,4096", 1), time_us=LONG)  # B is 23 MB; a wave streams 44 MB
    assert rereads(d).estimate_us == 0.0
    check_sums(d)


def test_the_reuse_distance_is_measured_against_the_l2_size():
    # 3 M blocks x 4 N blocks, 4 CTAs per wave, GROUP_M 1: one M block per wave, 4 bytes a wave.
    kw = dict(m_runs=[3], grid_m=3, num_pid_n=4, group_m=1, resident=4, slab_bytes=1.0, a_tile_bytes=0.0,
              c_tile_bytes=0.0)
    assert reread_bytes(**kw, l2_bytes=4.0) == (0.0, 3)     # 4 bytes between two reads: they fit
    assert reread_bytes(**kw, l2_bytes=3.9) == (8.0, 3)     # 2 later waves x 4 slabs miss
    # Two weight matrices: M blocks 0-1 use one, block 2 the other: only block 1 re-reads.
    assert reread_bytes(**{**kw, "m_runs": [2, 1]}, l2_bytes=3.9) == (4.0, 3)
    # 5 CTAs a wave: wave 0 holds M block 0 and (0, slab 0) of block 1, wave 1 block 1's slabs 1-3.
    # With C tiles of 0.5 bytes wave 0 streams 6.5 bytes, wave 1 4.5: between a K step's two reads the
    # distance falls from 6.5 (x = 0) to 4.5 (x = 1), past 5.5 for the first half of the loop.
    partial = dict(kw, m_runs=[2], grid_m=2, resident=5, c_tile_bytes=0.5)
    extra, waves = reread_bytes(**partial, l2_bytes=5.5)
    assert waves == 2 and extra == pytest.approx(3 * 0.5)


def test_a_routing_s_expert_blocks_decide_what_is_shared():
    from advisor.advice import moe
    from advisor.advice.ceiling import parse_config

    config = parse_config("M128 N256 K64 G1 w8 s3", moe.family())
    subject = moe.gemm_subject("mixtral-8x7b", 1024, 2, 1, GPU, config)
    (ceiling,) = subject.ceilings([config])
    m_blocks = round(ceiling.active_ctas / 56)  # N = 14336 in 56 blocks of 256
    spread = diagnose_ceiling(subject, config, ceiling, LONG, read_sass=False)
    # Every M block its own expert: no slab is read twice.
    alone = diagnose_ceiling(subject, config, ceiling, LONG, read_sass=False, m_runs=[1] * m_blocks)
    assert rereads(alone).estimate_us == 0.0 < rereads(spread).estimate_us
    assert sum(even_runs(m_blocks, 8)) == m_blocks and max(even_runs(m_blocks, 8)) - min(even_runs(m_blocks, 8)) <= 1


def test_even_runs_never_exceed_the_blocks():
    assert even_runs(3, 8) == [1, 1, 1]
    assert np.sum(even_runs(17, 4)) == 17
