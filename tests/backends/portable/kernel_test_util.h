// Helpers for calling portable kernels directly in tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kiln/backends/portable/kernels.h"

namespace kiln::portable::testing {

/// A seeded normal-random f32 tensor.
inline Tensor randn(std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor t(DType::kF32, std::move(shape));
  float* p = t.mutable_data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

/// A tensor from values.
inline Tensor make(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  Tensor t(dtype, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  for (int64_t i = 0; i < t.numel() && static_cast<size_t>(i) < values.size(); ++i) t.set_scalar_at(i, values[static_cast<size_t>(i)]);
  return t;
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.scalar_at(i));
  return v;
}

/// A context with `threads` real threads: parallel_for runs one contiguous chunk per thread, each
/// chunk but the first on a thread of its own, like the interpreter's pool.
class ThreadedKernelContext : public SimpleKernelContext {
 public:
  explicit ThreadedKernelContext(int threads) : threads_(threads) {}
  int num_threads() const override { return threads_; }
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    ++calls;
    std::vector<std::thread> workers;
    for (int i = 1; i < threads_; ++i) {
      int64_t begin = n * i / threads_, end = n * (i + 1) / threads_;
      if (begin < end) workers.emplace_back([&fn, begin, end] { fn(begin, end); });
    }
    if (n / threads_ > 0) fn(0, n / threads_);
    for (auto& w : workers) w.join();
  }
  int calls = 0;  ///< parallel_for calls so far

 private:
  int threads_;
};

/// Calls kernel `op` on tensors (and attributes); fails the test if the kernel errs.
struct Call {
  std::string op;
  KernelArgs args;
  std::deque<Tensor> keep;  // stable addresses for args

  explicit Call(std::string name) : op(std::move(name)) {}
  Call& in(const Tensor& t) {
    keep.push_back(t);
    args.inputs.push_back(KernelInput::of(&keep.back()));
    return *this;
  }
  Call& in_list(const std::vector<Tensor>& ts) {
    std::vector<const Tensor*> ptrs;
    for (const auto& t : ts) {
      keep.push_back(t);
      ptrs.push_back(&keep.back());
    }
    args.inputs.push_back(KernelInput::of_list(ptrs));
    return *this;
  }
  Call& none() {
    args.inputs.push_back(KernelInput::none());
    return *this;
  }
  Call& number(double v, bool is_int = false) {
    args.inputs.push_back(KernelInput::of_number(v, is_int));
    return *this;
  }
  Call& attr(const std::string& name, AttrValue v) {
    args.attrs.push_back({name, std::move(v)});
    return *this;
  }
  Result<std::vector<Tensor>> try_run() {
    SimpleKernelContext ctx;
    return try_run(ctx);
  }
  Result<std::vector<Tensor>> try_run(KernelContext& ctx) {
    KernelFn fn = find_kernel(op);
    if (fn == nullptr) return not_found("no kernel {}", op);
    std::vector<Tensor> out;
    KILN_RETURN_IF_ERROR(fn(ctx, args, &out));
    return out;
  }
  Tensor run() {
    auto r = try_run();
    EXPECT_TRUE(r.ok()) << op << ": " << (r.ok() ? "" : r.status().message());
    if (!r.ok() || r->empty()) return Tensor();
    return (*r)[0];
  }
};

/// Max |a - b| relative to max(1, max |b|); also checks shapes match.
inline double rel_err(const Tensor& a, const std::vector<float>& ref, const std::vector<int64_t>& shape) {
  EXPECT_EQ(a.shape(), shape);
  if (a.shape() != shape || static_cast<size_t>(a.numel()) != ref.size()) return INFINITY;
  double mag = 1, err = 0;
  for (float r : ref) mag = std::max(mag, static_cast<double>(std::fabs(r)));
  for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::fabs(a.scalar_at(static_cast<int64_t>(i)) - ref[i]));
  return err / mag;
}

}  // namespace kiln::portable::testing
