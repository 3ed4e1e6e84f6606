// The CUDA execution model on host threads, for build.py (see its docstring).
#include <cmath>
#include <cstring>
#include <cstdint>
#include <thread>
#include <barrier>
#include <vector>
#include <mutex>
#include <atomic>
#include <memory>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
static std::unique_ptr<std::barrier<>> g_block;
static std::vector<std::unique_ptr<std::barrier<>>> g_warp;
static double g_wbuf[32][32];
static std::mutex g_mu;
inline void __syncthreads() { g_block->arrive_and_wait(); }
inline double __shfl_down_sync(unsigned, double v, int o) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    g_wbuf[w][lane] = v;
    g_warp[w]->arrive_and_wait();
    double r = lane + o < 32 ? g_wbuf[w][lane + o] : v;
    g_warp[w]->arrive_and_wait();
    return r;
}
template <class V> inline V __shfl_xor_sync(unsigned, V v, int o) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    g_wbuf[w][lane] = (double)v;
    g_warp[w]->arrive_and_wait();
    V r = (V)g_wbuf[w][lane ^ o];
    g_warp[w]->arrive_and_wait();
    return r;
}
inline double __longlong_as_double(unsigned long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline float __uint_as_float(unsigned int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline unsigned int __float_as_uint(float f) { unsigned int v; std::memcpy(&v, &f, 4); return v; }
inline float atomicAdd(float* p, float v) { std::lock_guard<std::mutex> l(g_mu); float o = *p; *p += v; return o; }
inline double atomicAdd(double* p, double v) { std::lock_guard<std::mutex> l(g_mu); double o = *p; *p += v; return o; }
inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { std::lock_guard<std::mutex> l(g_mu); unsigned int o = *p; *p += v; return o; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline int atomicExch(int* p, int v) { std::lock_guard<std::mutex> l(g_mu); int o = *p; *p = v; return o; }
using std::isfinite; using std::fmax; using std::exp; using std::log; using std::sqrt; using std::erfc; using std::fabs;
template <class F> void launch(unsigned gx, unsigned gy, unsigned bx, F f) {
    gridDim.x = gx; gridDim.y = gy; blockDim.x = bx;
    g_block.reset(new std::barrier<>(bx));
    g_warp.clear();
    for (unsigned w = 0; w < (bx + 31) / 32; ++w) g_warp.emplace_back(new std::barrier<>(32));
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < bx; ++t) ts.emplace_back([=, &f] {
        threadIdx.x = t;
        for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x) {
            blockIdx.x = x; blockIdx.y = y;
            f();
            g_block->arrive_and_wait();
        }
    });
    for (auto& t : ts) t.join();
}
