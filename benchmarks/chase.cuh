// The pointer chase both latency probes time (latency_probe.cu, dram_latency_probe.cu): `iters` x HOPS dependent
// global loads that skip L1 (ld.global.cg: served by L2, or by DRAM where the ring is not in it), each address the
// value the previous load returned; clock64 around them, written by thread 0 with the last pointer (so the loads stay).
#pragma once
#include <cstdint>

template <int HOPS>
__global__ void chase_cg(uint64_t* head, int iters, long long* out, uint64_t* sink) {
    uint64_t p = (uint64_t)head;
    long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < HOPS; i++) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p));
    }
    long long t1 = clock64();
    if (threadIdx.x == 0) { out[0] = t1 - t0; sink[0] = p; }
}
