// The machine's f32 GEMM peak, the figure a conv's achieved GFLOP/s is judged against: OpenBLAS
// (the GEMM under kiln's portable kernels) on C[n,n] = A[n,n] * B[n,n], best of RUNS, at each
// thread count given.
//
// Usage: bench_gemm_peak [N=1024] [RUNS=20] [THREADS...=1 2]
// Prints one line per thread count: "gemm f32 N^3 threads T: best X ms, Y GFLOP/s".
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 20;
  std::vector<int> threads;
  for (int i = 3; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 2};
  if (n <= 0 || runs <= 0) {
    std::fprintf(stderr, "usage: bench_gemm_peak [N] [RUNS] [THREADS...]\n");
    return 2;
  }
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-1, 1);
  for (size_t i = 0; i < a.size(); ++i) a[i] = u(rng), b[i] = u(rng);
  const double flops = 2.0 * n * n * n;
  for (int t : threads) {
    openblas_set_num_threads(t);
    double best = 1e30;
    for (int r = 0; r < runs + 2; ++r) {  // two warm-up runs
      auto t0 = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                  0.0f, c.data(), n);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 2) best = std::min(best, ms);
    }
    std::printf("gemm f32 %d^3 threads %d: best %.3f ms, %.1f GFLOP/s\n", n, t, best, flops / best / 1e6);
  }
  return 0;
}
