// Threads for the HTP kernels: the OpenMP runtime oneDNN was built with (Debian's libdnnl 2.6.3:
// DNNL_CPU_RUNTIME = DNNL_RUNTIME_OMP, GNU libgomp), reached through the symbols the loaded
// libgomp exports, so kiln's own loops and oneDNN's share one pool and one thread count.
//
// libgomp is a dependency of libdnnl, so it is in the process's global symbol scope; the
// kernels look up GOMP_parallel (what `#pragma omp parallel` compiles to) and the omp_* ICV
// functions with dlsym instead of being compiled with -fopenmp. Without them (a oneDNN built on
// another runtime) kiln's loops fall back to std::thread and the thread bound of oneDNN's own
// calls is whatever that runtime does.
#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <thread>

#include "conv_engine.h"

namespace kiln::htp::detail {

namespace {

struct Omp {
  void (*parallel)(void (*)(void*), void*, unsigned, unsigned) = nullptr;
  int (*thread_num)() = nullptr;
  int (*num_threads)() = nullptr;
  int (*get_max_threads)() = nullptr;
  void (*set_num_threads)(int) = nullptr;
  bool ok() const {
    return parallel && thread_num && num_threads && get_max_threads && set_num_threads;
  }
};

const Omp& omp() {
  static const Omp o = [] {
    // Make sure oneDNN (and so libgomp) is loaded and initialised before looking up.
    (void)dnnl_get_effective_cpu_isa();
    Omp r;
    r.parallel = reinterpret_cast<decltype(r.parallel)>(dlsym(RTLD_DEFAULT, "GOMP_parallel"));
    r.thread_num =
        reinterpret_cast<decltype(r.thread_num)>(dlsym(RTLD_DEFAULT, "omp_get_thread_num"));
    r.num_threads =
        reinterpret_cast<decltype(r.num_threads)>(dlsym(RTLD_DEFAULT, "omp_get_num_threads"));
    r.get_max_threads =
        reinterpret_cast<decltype(r.get_max_threads)>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    r.set_num_threads =
        reinterpret_cast<decltype(r.set_num_threads)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    return r;
  }();
  return o;
}

struct Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n;
  int chunks;
};

void run_chunk(const Job& job, int c) {
  const int64_t b = job.n * c / job.chunks, e = job.n * (c + 1) / job.chunks;
  if (b < e) (*job.fn)(b, e);
}

void omp_body(void* data) {
  const Job& job = *static_cast<const Job*>(data);
  const int tid = omp().thread_num(), nt = omp().num_threads();
  // The runtime may give fewer threads than asked for (nesting, limits): take every nt-th chunk.
  for (int c = tid; c < job.chunks; c += nt) run_chunk(job, c);
}

}  // namespace

void parallel_for(int threads, int64_t n, int64_t min_chunk,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t chunks = std::min<int64_t>(std::max(1, threads), n / std::max<int64_t>(1, min_chunk));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  Job job{&fn, n, static_cast<int>(chunks)};
  if (omp().ok()) {
    omp().parallel(omp_body, &job, static_cast<unsigned>(job.chunks), 0);
    return;
  }
  std::vector<std::thread> workers;
  for (int c = 1; c < job.chunks; ++c) workers.emplace_back([&job, c] { run_chunk(job, c); });
  run_chunk(job, 0);
  for (auto& w : workers) w.join();
}

OmpThreadsScope::OmpThreadsScope(int threads) {
  if (!omp().ok()) return;
  old_ = omp().get_max_threads();
  omp().set_num_threads(std::max(1, threads));
}

OmpThreadsScope::~OmpThreadsScope() {
  if (omp().ok() && old_ > 0) omp().set_num_threads(old_);
}

bool has_avx512() {
  static const bool v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return v;
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

bool dnnl_has_vnni() {
  static const bool v = [] {
    const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    // dnnl_cpu_isa_avx512_core_vnni (0x67) and avx2_vnni (0x407) carry these bits; so do the
    // ISAs above them (bf16, amx).
    return (isa & 0x40u) != 0 || (isa & 0x400u) != 0;
  }();
  return v;
}

}  // namespace kiln::htp::detail
