// bench_program_load FILE.kpte [RUNS]: the time to make a program file ready to run (map it,
// check it, load its method: kernels resolved, delegates initialised, arena allocated), median
// and min over RUNS (default 20), as a deployment's start-up sees it. Links the runtime only.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kiln/backends/demo/demo_runtime.h"
#include "kiln/runtime/program.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.kpte [RUNS]\n", argv[0]);
    return 2;
  }
  int runs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  kiln::runtime::BackendRegistry backends;
  (void)backends.add(kiln::demo::make_demo_runtime_backend());
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto program = kiln::runtime::Program::load_file(argv[1]);
    if (!program.ok()) {
      std::fprintf(stderr, "%s\n", program.status().message().c_str());
      return 1;
    }
    auto method = (*program)->load_method("forward", backends);
    if (!method.ok()) {
      std::fprintf(stderr, "%s\n", method.status().message().c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("kiln load median_ms %.3f min_ms %.3f\n", ms[ms.size() / 2], ms.front());
  return 0;
}
