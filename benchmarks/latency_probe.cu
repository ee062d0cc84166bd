// Minimum latencies of the variable-latency operations the latency floor times (ceilings/latency_floor.py),
// in SM cycles (clock64), each as a chain of dependent instructions where every instruction waits on the
// previous one's result and nothing else runs between them (the SASS is dumped beside the numbers to check).
// One warp of one CTA; each chain is timed 8 times and the smallest cycles per operation printed (a floor needs
// the least the operation takes). Built and run by benchmarks/latency_probe.py:
//   nvcc -O3 -arch=sm_90a -o latency_probe latency_probe.cu && ./latency_probe
#include <cstdint>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>

#include "chase.cuh"

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)

constexpr int UNROLL = 32;

// Global loads through L1 (after a warm pass the 32 pointers are in L1): LDG.E.64 R, [R].
__global__ void chase_l1(uint64_t* head, int iters, long long* out, uint64_t* sink) {
    uint64_t p = (uint64_t)head;
    for (int i = 0; i < UNROLL; i++) asm volatile("ld.global.u64 %0, [%0];" : "+l"(p));  // warm
    long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < UNROLL; i++) asm volatile("ld.global.u64 %0, [%0];" : "+l"(p));
    }
    long long t1 = clock64();
    if (threadIdx.x == 0) { out[0] = t1 - t0; sink[0] = p; }
}

// Global loads that skip L1 (.cg): served by L2, or by DRAM for a ring spread over far more than L2 (chase.cuh).

// Shared-memory loads: LDS R, [R] (the value is the next byte address).
__global__ void chase_shared(int iters, long long* out, uint64_t* sink) {
    __shared__ uint32_t s[64];
    uint32_t base = (uint32_t)__cvta_generic_to_shared(s);
    for (int i = threadIdx.x; i < 64; i += blockDim.x) s[i] = base + 4 * ((i + 1) % 64);
    __syncthreads();
    uint32_t p = base;
    long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < UNROLL; i++) asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p));
    }
    long long t1 = clock64();
    if (threadIdx.x == 0) { out[0] = t1 - t0; sink[0] = p; }
}

// Warp shuffles: SHFL.BFLY R, R, 0x1, 0x1f, each on the previous one's result.
__global__ void chain_shfl(int iters, long long* out, uint64_t* sink) {
    uint32_t x = threadIdx.x;
    long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < UNROLL; i++)
            asm volatile("shfl.sync.bfly.b32 %0, %0, 1, 0x1f, 0xffffffff;" : "+r"(x));
    }
    long long t1 = clock64();
    if (threadIdx.x == 0) { out[0] = t1 - t0; sink[0] = x; }
}

// MUFU: EX2, RSQ, LG2, RCP chains (op 0..3).
__global__ void chain_mufu(int iters, int op, long long* out, uint64_t* sink) {
    float x = 1.0f + threadIdx.x * 1e-3f;
    long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
        if (op == 0) {
#pragma unroll
            for (int i = 0; i < UNROLL; i++) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x));
        } else if (op == 1) {
#pragma unroll
            for (int i = 0; i < UNROLL; i++) asm volatile("rsqrt.approx.ftz.f32 %0, %0;" : "+f"(x));
        } else if (op == 2) {
#pragma unroll
            for (int i = 0; i < UNROLL; i++) asm volatile("lg2.approx.ftz.f32 %0, %0;" : "+f"(x));
        } else {
#pragma unroll
            for (int i = 0; i < UNROLL; i++) asm volatile("rcp.approx.ftz.f32 %0, %0;" : "+f"(x));
        }
    }
    long long t1 = clock64();
    if (threadIdx.x == 0) { out[0] = t1 - t0; sink[0] = __float_as_uint(x); }
}

// CTA barriers back to back: BAR.SYNC, with the CTA's warps all arriving (blockDim chosen by the host).
__global__ void chain_bar(int iters, long long* out, uint64_t* sink) {
    long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < UNROLL; i++) asm volatile("bar.sync 0;");
    }
    long long t1 = clock64();
    if (threadIdx.x == 0) { out[0] = t1 - t0; sink[0] = 0; }
}

// A ring of `nodes` pointers spread over `bytes` of device memory in random order, one per 4 KiB page slot.
static int ring(uint64_t* dev, size_t bytes, int nodes, unsigned seed) {
    size_t slots = bytes / 4096;
    std::vector<size_t> pick(slots);
    for (size_t i = 0; i < slots; i++) pick[i] = i;
    std::mt19937_64 rng(seed);
    std::shuffle(pick.begin(), pick.end(), rng);
    pick.resize(nodes);
    for (int i = 0; i < nodes; i++) {
        uint64_t next = (uint64_t)(dev + pick[(i + 1) % nodes] * 512);
        CHECK(cudaMemcpy(dev + pick[i] * 512, &next, 8, cudaMemcpyHostToDevice));
    }
    return (int)(pick[0] * 512);
}

template <typename Launch>
static double best_cycles(Launch go, long long* out, double ops) {
    double best = 1e30;
    for (int rep = 0; rep < 8; rep++) {
        go();
        if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess) return -1;
        long long c = 0;
        cudaMemcpy(&c, out, 8, cudaMemcpyDeviceToHost);
        best = std::min(best, c / ops);
    }
    return best;
}

int main() {
    long long* out; uint64_t* sink;
    CHECK(cudaMalloc(&out, 8)); CHECK(cudaMalloc(&sink, 8));
    const int iters = 64;
    const double ops = (double)iters * UNROLL;
    // L1 ring: 32 pointers, 128 B apart (distinct lines).
    uint64_t* small; CHECK(cudaMalloc(&small, 32 * 128));
    for (int i = 0; i < 32; i++) {
        uint64_t next = (uint64_t)(small + ((i + 1) % 32) * 16);
        CHECK(cudaMemcpy(small + i * 16, &next, 8, cudaMemcpyHostToDevice));
    }
    // L2 ring: 512 nodes over 16 MiB; DRAM ring: 4096 nodes over 4 GiB (far past L2 and its TLB reach).
    uint64_t* mid; CHECK(cudaMalloc(&mid, 16u << 20));
    int mid0 = ring(mid, 16u << 20, 512, 1);
    size_t far_bytes = (size_t)4 << 30;
    uint64_t* far; CHECK(cudaMalloc(&far, far_bytes));
    int far0 = ring(far, far_bytes, 4096, 2);

    printf("{\n");
    printf("  \"ldg_l1_hit\": %.2f,\n", best_cycles([&] { chase_l1<<<1, 32>>>(small, iters, out, sink); }, out, ops));
    printf("  \"ldg_l2_hit\": %.2f,\n", best_cycles([&] { chase_cg<UNROLL><<<1, 32>>>(mid + mid0, iters, out, sink); }, out, ops));
    printf("  \"ldg_dram\": %.2f,\n", best_cycles([&] { chase_cg<UNROLL><<<1, 32>>>(far + far0, 2, out, sink); }, out, 2.0 * UNROLL));
    printf("  \"lds\": %.2f,\n", best_cycles([&] { chase_shared<<<1, 32>>>(iters, out, sink); }, out, ops));
    printf("  \"shfl\": %.2f,\n", best_cycles([&] { chain_shfl<<<1, 32>>>(iters, out, sink); }, out, ops));
    const char* mufu[] = {"mufu_ex2", "mufu_rsq", "mufu_lg2", "mufu_rcp"};
    for (int op = 0; op < 4; op++)
        printf("  \"%s\": %.2f,\n", mufu[op], best_cycles([&] { chain_mufu<<<1, 32>>>(iters, op, out, sink); }, out, ops));
    for (int warps : {1, 4, 32})
        printf("  \"bar_sync_w%d\": %.2f,\n", warps,
               best_cycles([&] { chain_bar<<<1, 32 * warps>>>(iters, out, sink); }, out, ops));
    int clock_khz = 0; cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    printf("  \"device_clock_khz\": %d\n}\n", clock_khz);
    return 0;
}
