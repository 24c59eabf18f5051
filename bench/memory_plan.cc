// Memory-plan figures: for each model (.onnx or .kir) the arena the planner needs against the
// lower bound (the most bytes live at once) and against no reuse, and the time to plan; then the
// time to plan synthetic 1M-node graphs.
//
// Usage: bench_memory_plan [--dim NAME=N]... [--alignment N] [--synthetic N] MODEL...
//   --dim bounds a symbolic dim for planning (models keep their symbolic shapes).
//   --synthetic sets the node count of the synthetic graphs (default 1000000; 0 skips them).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kiln/core/memory.h"
#include "kiln/ir/kir.h"
#include "kiln/onnx/import.h"
#include "kiln/passes/memory_plan.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Plans `p` `rounds` times; returns the best time and the plan.
Result<MemoryPlan> timed_plan(const ExportedProgram& p, const MemoryPlanOptions& options,
                              int rounds, double* best_ms) {
  Result<MemoryPlan> plan = invalid_argument("no round");
  *best_ms = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    plan = plan_memory(p, options);
    double ms = ms_since(t0);
    if (!plan.ok()) return plan;
    *best_ms = r == 0 ? ms : std::min(*best_ms, ms);
  }
  return plan;
}

void header() {
  std::printf("%-30s %9s %11s %11s %7s %11s %10s\n", "model", "values", "arena", "lower_bound",
              "ratio", "no_reuse", "plan_ms");
}

void row(const std::string& name, const MemoryPlan& plan, double ms) {
  size_t arena_values = 0;
  for (const PlannedValue& v : plan.values) arena_values += v.home == ValueHome::kArena;
  double ratio = plan.lower_bound_bytes == 0 ? 1.0
                                             : static_cast<double>(plan.arena_bytes) /
                                                   static_cast<double>(plan.lower_bound_bytes);
  std::printf("%-30s %9zu %11s %11s %6.3fx %11s %10.2f\n", name.c_str(), arena_values,
              format_bytes(plan.arena_bytes).c_str(), format_bytes(plan.lower_bound_bytes).c_str(),
              ratio, format_bytes(plan.no_reuse_bytes).c_str(), ms);
}

// A chain alternating add(cur, x) and relu(cur) on f32[16] (bench/graph_scale's graph).
bool build_chain(ExportedProgram& p, size_t n) {
  Graph& g = p.graph();
  Node* x = p.add_user_input("x", TensorSpec::of(DType::kF32, {16}));
  Node* cur = x;
  for (size_t i = 0; i < n; ++i) {
    auto r = (i % 2 == 0) ? g.add_call(OpId::kAdd, {cur, x}) : g.add_call(OpId::kRelu, {cur});
    if (!r.ok()) return false;
    cur = *r;
  }
  return p.set_outputs({cur}, {OutputSpec{}}).ok();
}

// A network-like random DAG: each node reads the previous one and, one time in four, a node up
// to 8 back; one in fifty also reads a skip connection up to 2000 back (residual / U-Net
// shapes). Sizes are log-uniform in [256 B, 4 MiB]; specs are set, not inferred.
bool build_random_dag(ExportedProgram& p, size_t n, uint64_t seed) {
  Graph& g = p.graph();
  std::mt19937_64 rng(seed);
  std::vector<Node*> nodes;
  nodes.reserve(n + 1);
  nodes.push_back(p.add_user_input("x", TensorSpec::of(DType::kF32, {1024})));
  std::uniform_real_distribution<double> log_size(6, 20);  // 2^6 .. 2^20 floats
  const Arg alpha(1.0);
  for (size_t i = 0; i < n; ++i) {
    std::vector<Node*> ins{nodes.back()};
    if (rng() % 4 == 0) ins.push_back(nodes[nodes.size() - 1 - rng() % std::min<size_t>(8, nodes.size())]);
    if (rng() % 50 == 0) ins.push_back(nodes[nodes.size() - 1 - rng() % std::min<size_t>(2000, nodes.size())]);
    // Args built in place: initializer lists of Arg trip g++ 12's -Wmaybe-uninitialized.
    std::vector<Arg> args, kwargs;
    OpId op = OpId::kRelu;
    if (ins.size() == 1) {
      args.emplace_back(ins[0]);
    } else if (ins.size() == 2) {
      op = OpId::kAdd;
      args.emplace_back(ins[0]);
      args.emplace_back(ins[1]);
      kwargs.push_back(alpha);
    } else {
      op = OpId::kCat;
      args.emplace_back(ins);
      kwargs.emplace_back(int64_t{0});
    }
    auto r = g.add_call_exact(op, std::move(args), std::move(kwargs), "", false);
    if (!r.ok()) {
      std::fprintf(stderr, "build failed: %s\n", r.status().message().c_str());
      return false;
    }
    int64_t numel = static_cast<int64_t>(std::exp2(log_size(rng)));
    (*r)->meta.val = {TensorSpec::of(DType::kF32, {numel})};
    nodes.push_back(*r);
  }
  return p.set_outputs({nodes.back()}, {OutputSpec{}}).ok();
}

}  // namespace

int main(int argc, char** argv) {
  MemoryPlanOptions options;
  size_t synthetic = 1000000;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--dim" || a == "--alignment" || a == "--synthetic") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--dim") {
        size_t eq = v.find('=');
        if (eq == std::string::npos) {
          std::fprintf(stderr, "--dim %s: expected NAME=N\n", v.c_str());
          return 2;
        }
        options.dim_bounds[v.substr(0, eq)] = std::strtoll(v.c_str() + eq + 1, nullptr, 10);
      } else if (a == "--alignment") {
        options.alignment = std::strtoull(v.c_str(), nullptr, 10);
      } else {
        synthetic = std::strtoull(v.c_str(), nullptr, 10);
      }
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    } else {
      models.push_back(a);
    }
  }
  int status = 0;
  header();
  for (const std::string& path : models) {
    Result<ExportedProgram> p = ends_with(path, ".onnx") ? import_onnx_file(path) : load_kir_file(path);
    if (!p.ok()) {
      std::printf("%-30s import failed: %s\n", base_name(path).c_str(), p.status().message().c_str());
      status = 1;
      continue;
    }
    double ms = 0;
    auto plan = timed_plan(*p, options, 5, &ms);
    if (!plan.ok()) {
      std::printf("%-30s plan failed: %s\n", base_name(path).c_str(), plan.status().message().c_str());
      status = 1;
      continue;
    }
    row(base_name(path), *plan, ms);
    if (plan->dynamic_values > 0) std::printf("    %s\n", format_memory_plan(*plan, options).c_str());
  }
  if (synthetic == 0) return status;
  struct Synthetic {
    const char* name;
    bool (*build)(ExportedProgram&, size_t);
  };
  const Synthetic graphs[] = {
      {"chain", build_chain},
      {"random DAG", [](ExportedProgram& p, size_t n) { return build_random_dag(p, n, 1); }},
  };
  for (const Synthetic& s : graphs) {
    ExportedProgram p;
    auto t0 = Clock::now();
    if (!s.build(p, synthetic)) return 1;
    double build_ms = ms_since(t0);
    double ms = 0;
    auto plan = timed_plan(p, options, 3, &ms);
    if (!plan.ok()) {
      std::printf("%s: plan failed: %s\n", s.name, plan.status().message().c_str());
      return 1;
    }
    row(fmt::format("synthetic {} {}k", s.name, synthetic / 1000), *plan, ms);
    std::printf("    (built in %.0f ms; plan time is the best of 3)\n", build_ms);
  }
  return status;
}
