// Load-to-use latency of a global load that misses the L2 (DRAM) and of one the L2 serves, in SM cycles
// (clock64), measured on this GPU instead of taken from a paper. latency_probe.cu's DRAM ring was chased best of 8
// with no flush, so every run after the first hit the L2 (RESULTS 25: 288 cycles, an L2 figure); here the L2 is
// flushed (a memset of a buffer several times its size) before every timed chase, and each chase starts at
// another node of the ring. One thread chases `hops` dependent ld.global.cg.u64 (L1 skipped), each node on its own
// 4 KiB slot in random order: no two hops share a line, so no hop is served by a line another brought in.
// Rings: 16 MiB (8 large pages: the TLB holds them; a real kernel's tiles stream through few pages at a time) and
// 2 GiB (TLB misses included). Medians and minima over `runs` chases; per hop, cycles.
//   nvcc -O3 -arch=sm_90a -o dram_latency_probe dram_latency_probe.cu && ./dram_latency_probe
#include <cstdint>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>

#include "chase.cuh"

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)

constexpr int UNROLL = 16;

// A ring of `nodes` pointers over `bytes`, one per 4 KiB slot, in random order; returns the slots in ring order.
static std::vector<size_t> ring(uint64_t* dev, size_t bytes, size_t nodes, unsigned seed) {
    size_t slots = bytes / 4096;
    std::vector<size_t> pick(slots);
    for (size_t i = 0; i < slots; i++) pick[i] = i;
    std::mt19937_64 rng(seed);
    std::shuffle(pick.begin(), pick.end(), rng);
    pick.resize(nodes);
    std::vector<uint64_t> host(bytes / 8, 0);
    for (size_t i = 0; i < nodes; i++) host[pick[i] * 512] = (uint64_t)(dev + pick[(i + 1) % nodes] * 512);
    if (cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) pick.clear();
    return pick;
}

static int measure(const char* name, size_t bytes, bool flush, uint64_t* scratch, size_t scratch_bytes,
                   long long* out, uint64_t* sink, bool last) {
    uint64_t* dev; CHECK(cudaMalloc(&dev, bytes));
    const size_t nodes = std::min<size_t>(bytes / 4096, 65536);
    std::vector<size_t> order = ring(dev, bytes, nodes, 7);
    if (order.empty()) return 1;
    const int iters = 16, runs = 15;            // 256 hops a chase
    const double hops = (double)iters * UNROLL;
    std::vector<double> per_hop;
    for (int r = 0; r < runs + 1; r++) {
        uint64_t* start = dev + order[(r * 997) % nodes] * 512;
        if (!flush) chase_cg<UNROLL><<<1, 1>>>(start, iters, out, sink);  // warm pass: the chase's nodes into the L2
        if (flush) CHECK(cudaMemset(scratch, r & 0xff, scratch_bytes));
        CHECK(cudaDeviceSynchronize());
        chase_cg<UNROLL><<<1, 1>>>(start, iters, out, sink);
        CHECK(cudaDeviceSynchronize());
        long long c = 0; CHECK(cudaMemcpy(&c, out, 8, cudaMemcpyDeviceToHost));
        if (r > 0) per_hop.push_back(c / hops);   // the first chase also pays the kernel's first launch
    }
    std::sort(per_hop.begin(), per_hop.end());
    printf("  \"%s\": {\"median\": %.1f, \"min\": %.1f, \"max\": %.1f, \"ring_bytes\": %zu, \"l2_flushed\": %s}%s\n",
           name, per_hop[per_hop.size() / 2], per_hop.front(), per_hop.back(), bytes, flush ? "true" : "false",
           last ? "" : ",");
    CHECK(cudaFree(dev));
    return 0;
}

int main() {
    long long* out; uint64_t* sink;
    CHECK(cudaMalloc(&out, 8)); CHECK(cudaMalloc(&sink, 8));
    int l2 = 0; cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
    size_t scratch_bytes = (size_t)8 * l2;
    uint64_t* scratch; CHECK(cudaMalloc(&scratch, scratch_bytes));
    int clock_khz = 0; cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    printf("{\n  \"l2_bytes\": %d,\n  \"device_clock_khz\": %d,\n", l2, clock_khz);
    if (measure("l2_hit", (size_t)16 << 20, false, scratch, scratch_bytes, out, sink, false)) return 1;
    if (measure("dram_16mib", (size_t)16 << 20, true, scratch, scratch_bytes, out, sink, false)) return 1;
    if (measure("dram_2gib", (size_t)2 << 30, true, scratch, scratch_bytes, out, sink, true)) return 1;
    printf("}\n");
    return 0;
}
