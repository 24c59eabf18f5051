// Graph-pass figures at scale: a program of N blocks, each a linear with its own weight and bias,
// a mul by the product of two more constants (constant folding makes it one), a permute pair
// that cancels and a relu: 6 calls and 4 constants per block. Prints each pass's milliseconds
// (PassManager records) and ns per node; the passes must stay linear in the graph (a 100k+ node
// model optimizes in well under a second).
// Usage: bench_optimize_scale [BLOCKS]   (default 25000: 250k nodes, 100k constants)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/ir/exported_program.h"
#include "kiln/passes/optimize.h"

namespace {

using namespace kiln;

Tensor filled(std::vector<int64_t> shape, float v) {
  Tensor t(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_scalar_at(i, v + 0.001 * static_cast<double>(i));
  return t;
}

bool build(ExportedProgram& p, size_t blocks) {
  Graph& g = p.graph();
  Node* cur = p.add_user_input("x", TensorSpec::of(DType::kF32, {2, 8}));
  for (size_t i = 0; i < blocks; ++i) {
    std::string k = std::to_string(i);
    Node* w = p.add_parameter("w" + k, "w" + k, filled({8, 8}, 0.01f));
    Node* b = p.add_parameter("b" + k, "b" + k, filled({8}, 0.0f));
    Node* s = p.add_constant("s" + k, "s" + k, filled({8}, 1.0f));
    Node* t = p.add_constant("t" + k, "t" + k, filled({8}, 0.5f));
    auto call = [&](OpId op, std::vector<Arg> args, const Kwargs& kw = {}) -> Node* {
      auto r = g.add_call(op, std::move(args), kw);
      if (!r.ok()) {
        std::fprintf(stderr, "build: %s\n", r.status().message().c_str());
        return nullptr;
      }
      return *r;
    };
    Node* st = call(OpId::kMul, {s, t});  // constant: folds
    Node* lin = call(OpId::kLinear, {cur, w, b});
    Node* scaled = call(OpId::kMul, {lin, st});
    Node* p1 = call(OpId::kPermute, {scaled}, {{"dims", std::vector<int64_t>{1, 0}}});
    Node* p2 = call(OpId::kPermute, {p1}, {{"dims", std::vector<int64_t>{1, 0}}});  // cancels p1
    cur = call(OpId::kRelu, {p2});
    if (cur == nullptr || st == nullptr) return false;
  }
  return p.set_outputs({cur}, {OutputSpec{OutputKind::kUserOutput, "", "y"}}).ok();
}

}  // namespace

int main(int argc, char** argv) {
  size_t blocks = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 25000;
  ExportedProgram p;
  if (!build(p, blocks)) return 1;
  size_t nodes = p.graph().size();
  std::printf("optimize: %zu blocks, %zu nodes, %zu constants\n", blocks, nodes, p.constants().size());
  OptimizeOptions options;
  options.evaluate = portable::evaluate_node;
  options.lint = false;
  auto t0 = std::chrono::steady_clock::now();
  auto records = optimize(p, options);
  if (!records.ok()) {
    std::fprintf(stderr, "optimize: %s\n", records.status().message().c_str());
    return 1;
  }
  for (const PassRecord& r : *records) {
    double ms = std::chrono::duration<double, std::milli>(r.time).count();
    std::printf("  %-20s %-9s %9.1f ms  %7.1f ns/node\n", r.name.c_str(), r.changed ? "changed" : "unchanged", ms,
                ms * 1e6 / static_cast<double>(nodes));
  }
  auto t1 = std::chrono::steady_clock::now();
  auto fused = fuse_activations(p);
  double fuse_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  if (!fused.ok()) return 1;
  std::printf("  %-20s %-9s %9.1f ms\n", "FuseActivations", *fused ? "changed" : "unchanged", fuse_ms);
  double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("total %.1f ms for %zu nodes (%zu after, %zu constants); lint %s\n", total, nodes, p.graph().size(),
              p.constants().size(), p.lint().ok() ? "ok" : "FAILED");
  return 0;
}
