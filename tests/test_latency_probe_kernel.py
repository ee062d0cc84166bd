"""The load-latency probe of `advisor calibrate` (`kernels.probes.pointer_chase_kernel` over
`advisor.measure.calibrate.chase_ring`): the ring must be one cycle through every node, each on its own 4 KiB,
and the kernel must follow it link by link, or the time per hop it reports is not one dependent load each."""

from __future__ import annotations

import torch

from advisor.measure.calibrate import chase_ring
from kernels.probes import pointer_chase_kernel


def test_the_ring_is_one_cycle_through_every_node_each_on_its_own_4_kib():
    ring, order = chase_ring(torch, 1 << 20)
    assert order.numel() == 256 and sorted(order.tolist()) == list(range(0, 1 << 17, 512))
    node, seen = int(order[0]), []
    for _ in range(order.numel()):
        seen.append(node)
        node = int(ring[node])
    assert node == int(order[0]) and len(set(seen)) == 256 and seen == order.tolist()
    off_nodes = torch.ones_like(ring, dtype=torch.bool)
    off_nodes[order] = False
    assert not ring[off_nodes].any()


def test_the_chase_ends_where_that_many_links_lead(device):
    ring, order = chase_ring(torch, 1 << 18)      # 64 nodes
    ring = ring.to(device)
    out = torch.empty(1, dtype=torch.int64, device=device)
    for hops in (1, 5, 64, 70):
        pointer_chase_kernel[(1,)](ring, out, int(order[3]), hops, num_warps=1)
        assert int(out.item()) == int(order[(3 + hops) % 64])
