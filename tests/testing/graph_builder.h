// A fluent builder for test graphs: every call either succeeds or fails the test loudly.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ir/exported_program.h"

namespace kiln::testing {

inline TensorSpec f32(std::vector<int64_t> shape) { return TensorSpec::of(DType::kF32, shape); }

/// An f32 tensor of `shape` holding start, start + step, start + 2 step, ...
inline Tensor ramp(std::vector<int64_t> shape, double start, double step) {
  Tensor t(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_scalar_at(i, start + step * static_cast<double>(i));
  return t;
}

/// Builds into an ExportedProgram it does not own; the program must outlive the builder.
class GraphBuilder {
 public:
  explicit GraphBuilder(ExportedProgram& program) : p_(program) {}

  Node* input(const std::string& name, TensorSpec spec) { return p_.add_user_input(name, std::move(spec)); }
  Node* param(const std::string& name, std::vector<int64_t> shape, float fill = 0.5f) {
    Tensor t(DType::kF32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_scalar_at(i, fill + 0.25 * static_cast<double>(i));
    return p_.add_parameter("p_" + name, name, std::move(t));
  }
  Node* buffer(const std::string& name, std::vector<int64_t> shape) {
    return p_.add_buffer("b_" + name, name, Tensor(DType::kF32, shape));
  }
  Node* call(OpId op, std::vector<Arg> args, const Kwargs& kwargs = {}, std::string_view name = {}) {
    auto r = p_.graph().add_call(op, std::move(args), kwargs, name);
    if (!r.ok()) {
      ADD_FAILURE() << "add_call failed: " << r.status().message();
      return nullptr;
    }
    return *r;
  }
  Node* add(Node* a, Node* b) { return call(OpId::kAdd, {a, b}); }
  Node* mul(Node* a, Node* b) { return call(OpId::kMul, {a, b}); }
  Node* relu(Node* a) { return call(OpId::kRelu, {a}); }
  Node* neg(Node* a) { return call(OpId::kNeg, {a}); }
  Node* linear(Node* x, Node* w, Node* b = nullptr) { return call(OpId::kLinear, {x, w, b}); }

  /// Sets user outputs.
  void outputs(const std::vector<Node*>& values) {
    std::vector<OutputSpec> specs(values.size());
    EXPECT_TRUE(p_.set_outputs(values, specs).ok());
  }
  /// Sets outputs with explicit specs (buffer mutations etc.).
  void outputs(const std::vector<Node*>& values, std::vector<OutputSpec> specs) {
    EXPECT_TRUE(p_.set_outputs(values, std::move(specs)).ok());
  }

  ExportedProgram& program() { return p_; }
  Graph& graph() { return p_.graph(); }

 private:
  ExportedProgram& p_;
};

}  // namespace kiln::testing
