// bench/partition_vs_fx: times kiln's capability-based partitioner on synthetic graphs (chains,
// diamonds, wide fan-out; 10% scattered unsupported nodes) and, with --fx SCRIPT, torch.fx's
// CapabilityBasedPartitioner on the same graphs (bench/partition_fx.py, run in a subprocess under
// a memory cap and a time limit), printing both and the ratio.
//
// The graphs are defined by make_graph below and by make_graph in partition_fx.py; keep them
// identical. Node i is unsupported when the LCG below draws 0 mod 10 at step i.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/partition/capability_partitioner.h"

namespace {

using kiln::Node;
using kiln::OpId;

struct Op {
  bool add = false;  // add(a, b); else relu(a)
  int a = -1;        // input node index; -1: the placeholder x
  int b = -1;
};

constexpr int kFanWidth = 64;

std::vector<Op> make_graph(const std::string& shape, int n) {
  std::vector<Op> ops;
  ops.reserve(static_cast<size_t>(n));
  int prev = -1;
  for (int i = 0; i < n; ++i) {
    Op op;
    if (shape == "chain") {
      op.a = i - 1;
    } else if (shape == "diamond") {
      switch (i % 4) {
        case 0: op.a = prev; break;
        case 1: op.a = i - 1; break;
        case 2: op.a = i - 2; break;
        default: op = {true, i - 2, i - 1}; prev = i;
      }
    } else {  // fanout: root, kFanWidth branches reading it, then a chain of adds over them
      int j = i % (2 * kFanWidth);
      int root = i - j;
      if (j == 0) {
        op.a = prev;
      } else if (j <= kFanWidth) {
        op.a = root;
      } else if (j == kFanWidth + 1) {
        op = {true, root + 1, root + 2};
      } else {
        op = {true, i - 1, root + (j - kFanWidth) + 1};
      }
      if (j >= kFanWidth + 1) prev = i;
    }
    ops.push_back(op);
  }
  return ops;
}

std::vector<bool> unsupported_set(int n) {
  std::vector<bool> out(static_cast<size_t>(n));
  uint64_t state = 12345;
  for (int i = 0; i < n; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    out[static_cast<size_t>(i)] = ((state >> 33) % 10) == 0;
  }
  return out;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct FxResult {
  bool ok = false;
  double seconds = 0;  // init + propose, or elapsed until failure
  size_t partitions = 0;
  std::string failure;
};

FxResult run_fx(const std::string& script, const std::string& shape, int n, int timeout_s,
                long mem_kb) {
  std::string cmd = fmt::format(
      "/bin/sh -c 'ulimit -v {}; exec timeout {} /usr/bin/python3 {} {} {}' 2>&1; echo \"rc=$?\"",
      mem_kb, timeout_s, script, shape, n);
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  FxResult r;
  if (p == nullptr) {
    r.failure = "could not start";
    return r;
  }
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  pclose(p);
  double elapsed = ms_since(t0) / 1000.0;
  double init = 0, propose = 0;
  size_t parts = 0;
  auto pos = out.find("fx_result ");
  if (pos != std::string::npos &&
      std::sscanf(out.c_str() + pos, "fx_result init_s=%lf propose_s=%lf partitions=%zu", &init,
                  &propose, &parts) == 3) {
    r.ok = true;
    r.seconds = init + propose;
    r.partitions = parts;
    return r;
  }
  r.seconds = elapsed;
  if (out.find("rc=124") != std::string::npos) {
    r.failure = fmt::format("timed out after {:.0f} s", elapsed);
  } else if (out.find("MemoryError") != std::string::npos || out.find("rc=137") != std::string::npos ||
             out.find("Cannot allocate") != std::string::npos) {
    r.failure = fmt::format("out of memory after {:.0f} s", elapsed);
  } else {
    auto line = out.substr(0, std::min<size_t>(out.size(), 200));
    for (char& c : line) {
      if (c == '\n') c = ' ';
    }
    r.failure = fmt::format("failed after {:.0f} s ({})", elapsed, line);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {10000, 50000, 100000};
  std::vector<std::string> shapes = {"chain", "diamond", "fanout"};
  std::string fx_script;
  int timeout_s = 60;
  long mem_kb = 8L * 1024 * 1024;
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--fx") fx_script = next();
    else if (a == "--timeout") timeout_s = std::atoi(next().c_str());
    else if (a == "--mem-mb") mem_kb = std::atol(next().c_str()) * 1024;
    else if (a == "--repeat") repeat = std::max(1, std::atoi(next().c_str()));
    else if (a == "--sizes") {
      sizes.clear();
      std::string s = next();
      for (size_t p = 0; p < s.size();) {
        size_t q = s.find(',', p);
        sizes.push_back(std::atoi(s.substr(p, q - p).c_str()));
        p = q == std::string::npos ? s.size() : q + 1;
      }
    } else if (a == "--shapes") {
      shapes.clear();
      std::string s = next();
      for (size_t p = 0; p < s.size();) {
        size_t q = s.find(',', p);
        shapes.push_back(s.substr(p, q == std::string::npos ? std::string::npos : q - p));
        p = q == std::string::npos ? s.size() : q + 1;
      }
    } else {
      fmt::print(stderr,
                 "usage: {} [--sizes 10000,50000,100000] [--shapes chain,diamond,fanout] "
                 "[--repeat N] [--fx bench/partition_fx.py [--timeout S] [--mem-mb MB]]\n",
                 argv[0]);
      return 2;
    }
  }

  fmt::print("{:<8} {:>7} {:>11} {:>10} {:>11} | {:>10} {:>6} | {}\n", "shape", "nodes",
             "kiln ms", "partitions", "unsupported", "fx s", "parts", "fx / kiln");
  for (const auto& shape : shapes) {
    for (int n : sizes) {
      std::vector<Op> ops = make_graph(shape, n);
      std::vector<bool> unsup = unsupported_set(n);
      kiln::ExportedProgram ep;
      kiln::Graph& g = ep.graph();
      Node* x = ep.add_user_input("x", kiln::TensorSpec::of(kiln::DType::kF32, {8}));
      std::vector<Node*> nodes;
      nodes.reserve(static_cast<size_t>(n));
      std::vector<bool> unsupported_by_id;
      auto in = [&](int k) { return k < 0 ? x : nodes[static_cast<size_t>(k)]; };
      for (int i = 0; i < n; ++i) {
        const Op& op = ops[static_cast<size_t>(i)];
        std::vector<kiln::Arg> kw;
        auto r = op.add ? g.add_call_exact(OpId::kAdd, {in(op.a), in(op.b)}, {kiln::Arg(1.0)},
                                           fmt::format("n{}", i), false)
                        : g.add_call_exact(OpId::kRelu, {in(op.a)}, {}, fmt::format("n{}", i),
                                           false);
        if (!r.ok()) {
          fmt::print(stderr, "building {} graph: {}\n", shape, r.status().message());
          return 1;
        }
        (*r)->meta.val = {x->spec()};
        nodes.push_back(*r);
      }
      (void)ep.set_outputs({nodes.back()}, {kiln::OutputSpec{}});
      std::vector<uint8_t> unsup_by_id(g.id_bound(), 0);
      size_t n_unsup = 0;
      for (int i = 0; i < n; ++i) {
        if (unsup[static_cast<size_t>(i)]) {
          unsup_by_id[nodes[static_cast<size_t>(i)]->id()] = 1;
          ++n_unsup;
        }
      }
      auto support = kiln::support_fn([&](const kiln::ExportedProgram&, const Node& node) {
        return unsup_by_id[node.id()] ? kiln::SupportResult::no("unsupported by the benchmark")
                                      : kiln::SupportResult::yes();
      });
      double best = 1e300;
      kiln::Proposal proposal;
      for (int rep = 0; rep < repeat; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        proposal = kiln::propose_partitions(ep, *support, {});
        best = std::min(best, ms_since(t0));
      }
      std::string fx_col = "(not run)", ratio = "";
      std::string parts_col;
      if (!fx_script.empty()) {
        FxResult fx = run_fx(fx_script, shape, n, timeout_s, mem_kb);
        if (fx.ok) {
          fx_col = fmt::format("{:.2f}", fx.seconds);
          parts_col = fmt::format("{}", fx.partitions);
          ratio = fmt::format("{:.0f} x", fx.seconds * 1000.0 / best);
        } else {
          fx_col = "-";
          parts_col = "-";
          ratio = fmt::format("> {:.0f} x (fx: {})", fx.seconds * 1000.0 / best, fx.failure);
        }
      }
      fmt::print("{:<8} {:>7} {:>11.2f} {:>10} {:>11} | {:>10} {:>6} | {}\n", shape, n, best,
                 proposal.partitions.size(), n_unsup, fx_col, parts_col, ratio);
      std::fflush(stdout);
    }
  }
  return 0;
}
