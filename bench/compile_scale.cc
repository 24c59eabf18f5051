// bench/compile_scale: a synthetic program of N nodes (default 1M) end to end, as `kiln compile`
// and `kiln run` would take it: build, partition + lower (the demo backend takes add and relu;
// every K-th node is a tanh it refuses), plan memory + serialize, write the file, load it back
// (mapped; every delegate initialised) and run it once. Prints each step's time and peak memory
// (the process's peak RSS over the step, reset between steps through /proc/self/clear_refs).
//
// Usage: bench_compile_scale [--nodes N] [--unsupported-every K] [--out FILE.kpte]
// Goal (issue 9): the whole pipeline under 5 s and 4 GB at 1M nodes.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/backends/demo/demo_backend.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/capability_partitioner.h"
#include "kiln/runtime/program.h"
#include "kiln/serialize/program_writer.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "VmHWM" (peak RSS since the last reset) and "VmRSS", in MiB.
long status_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field) + 1) / 1024;
  }
  return -1;
}

void reset_peak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

struct Step {
  const char* name;
  Clock::time_point t0;
};

double g_total = 0;
long g_peak = 0;

void report(const char* name, Clock::time_point t0, const std::string& what) {
  double s = seconds_since(t0);
  long peak = status_mib("VmHWM:");
  g_total += s;
  g_peak = std::max(g_peak, peak);
  fmt::print("{:<22} {:>8.3f} s  peak {:>6} MiB  {}\n", name, s, peak, what);
  std::fflush(stdout);
  reset_peak();
}

}  // namespace

int main(int argc, char** argv) {
  int n = 1000000;
  int every = 100;
  std::string out = "/tmp/kiln_compile_scale.kpte";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--nodes") n = std::atoi(next().c_str());
    else if (a == "--unsupported-every") every = std::max(2, std::atoi(next().c_str()));
    else if (a == "--out") out = next();
    else {
      fmt::print(stderr, "usage: {} [--nodes N] [--unsupported-every K] [--out FILE.kpte]\n", argv[0]);
      return 2;
    }
  }
  fmt::print("synthetic program: {} nodes (relu/add chain with skips, every {}th a tanh the demo "
             "backend refuses)\n", n, every);
  reset_peak();

  auto t0 = Clock::now();
  ExportedProgram ep;
  Graph& g = ep.graph();
  const TensorSpec spec = TensorSpec::of(DType::kF32, {8});
  Node* x = ep.add_user_input("x", spec);
  std::vector<Node*> nodes;
  nodes.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Node* prev = i == 0 ? x : nodes.back();
    Result<Node*> r = nullptr;
    if (i % every == every - 1) {
      r = g.add_call_exact(OpId::kTanh, {prev}, {}, fmt::format("n{}", i), false);
    } else if (i % 4 == 3 && i >= 3) {
      r = g.add_call_exact(OpId::kAdd, {prev, nodes[static_cast<size_t>(i - 3)]}, {Arg(1.0)},
                           fmt::format("n{}", i), false);
    } else {
      r = g.add_call_exact(OpId::kRelu, {prev}, {}, fmt::format("n{}", i), false);
    }
    if (!r.ok()) {
      fmt::print(stderr, "building: {}\n", r.status().message());
      return 1;
    }
    (*r)->meta.val = {spec};
    nodes.push_back(*r);
  }
  if (Status st = ep.set_outputs({nodes.back()}, {OutputSpec{}}); !st.ok()) {
    fmt::print(stderr, "{}\n", st.message());
    return 1;
  }
  report("build", t0, fmt::format("{} nodes", g.size()));

  t0 = Clock::now();
  BackendRegistry registry;
  (void)demo::register_demo_backend(registry);
  std::vector<CompileSpec> specs = {make_compile_spec(std::string(demo::kOpsSpecKey), "add,relu")};
  auto support = demo::demo_operator_support(specs);
  CapabilityPartitioner partitioner("demo", specs, *support);
  ToBackendOptions options;
  options.check_identical_graph = false;  // the partitioner only tags; the check is a debug aid
  auto lowered = to_backend(ep, partitioner, registry, options);
  if (!lowered.ok()) {
    fmt::print(stderr, "to_backend: {}\n", lowered.status().message());
    return 1;
  }
  report("partition + lower", t0, fmt::format("{} partitions, {} of {} calls delegated",
                                               lowered->partitions, lowered->nodes_delegated,
                                               lowered->nodes_total));

  t0 = Clock::now();
  std::vector<MethodToSerialize> methods = {{"forward", &ep}};
  auto image = serialize_program(methods);
  if (!image.ok()) {
    fmt::print(stderr, "serialize: {}\n", image.status().message());
    return 1;
  }
  report("plan + serialize", t0, fmt::format("{} bytes", image->size));

  t0 = Clock::now();
  if (Status st = write_program(out, *image); !st.ok()) {
    fmt::print(stderr, "write: {}\n", st.message());
    return 1;
  }
  report("write", t0, out);

  t0 = Clock::now();
  auto program = runtime::Program::load_file(out);
  if (!program.ok()) {
    fmt::print(stderr, "load: {}\n", program.status().message());
    return 1;
  }
  runtime::BackendRegistry backends;
  (void)backends.add(demo::make_demo_runtime_backend());
  auto method = (*program)->load_method("forward", backends);
  if (!method.ok()) {
    fmt::print(stderr, "load_method: {}\n", method.status().message());
    return 1;
  }
  report("load (map + init)", t0, fmt::format("{} segments", (*program)->segments().size()));

  t0 = Clock::now();
  std::vector<Tensor> inputs = {Tensor(DType::kF32, {8})};
  auto r = (*method)->execute(inputs);
  if (!r.ok()) {
    fmt::print(stderr, "execute: {}\n", r.status().message());
    return 1;
  }
  report("run once", t0, "");
  fmt::print("total {:.3f} s, largest step peak {} MiB (goal: under 5 s and 4096 MiB)\n", g_total, g_peak);
  std::remove(out.c_str());
  return 0;
}
