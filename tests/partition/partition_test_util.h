// A small fluent builder for partition tests: programs with placeholders, constants and calls
// whose specs are set by the test (no shape inference needed).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/exported_program.h"
#include "kiln/ir/graph.h"

namespace kiln::test {

class ProgramBuilder {
 public:
  ExportedProgram ep;

  Node* input(std::string_view name, TensorSpec spec = TensorSpec::of(DType::kF32, {4})) {
    return ep.add_user_input(name, std::move(spec));
  }
  Node* param(std::string_view name, std::vector<int64_t> shape = {4}) {
    return ep.add_parameter(name, std::string(name), Tensor(DType::kF32, std::move(shape)));
  }
  Node* buffer(std::string_view name, std::vector<int64_t> shape = {4}) {
    return ep.add_buffer(name, std::string(name), Tensor(DType::kF32, std::move(shape)));
  }
  Node* constant(std::string_view name, std::vector<int64_t> shape = {4}) {
    return ep.add_constant(name, std::string(name), Tensor(DType::kF32, std::move(shape)));
  }

  /// A call of `op` named `name`; kwargs not given take schema defaults. The output spec is
  /// `spec`, or the first node input's spec.
  Node* call(OpId op, std::vector<Arg> args, std::string_view name, const Kwargs& kwargs = {},
             std::optional<TensorSpec> spec = std::nullopt) {
    auto r = ep.graph().add_call(op, std::move(args), kwargs, name, /*infer_spec=*/false);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return nullptr;
    Node* n = *r;
    if (spec) {
      n->meta.val = {*spec};
    } else {
      for (const Use& u : n->operands()) {
        if (u.value->meta.val.size() == 1) {
          n->meta.val = {u.value->meta.val[0]};
          break;
        }
      }
    }
    return n;
  }
  Node* add(Node* a, Node* b, std::string_view name) { return call(OpId::kAdd, {a, b}, name); }
  Node* relu(Node* a, std::string_view name) { return call(OpId::kRelu, {a}, name); }

  /// quantize_per_tensor to i8 with scale 0.1.
  Node* q(Node* a, std::string_view name) {
    return call(OpId::kQuantizePerTensor, {a}, name,
                {{"scale", 0.1}, {"zero_point", 0}, {"quant_min", -128}, {"quant_max", 127},
                 {"dtype", DType::kI8}},
                TensorSpec(DType::kI8, a->spec().shape));
  }
  Node* dq(Node* a, std::string_view name) {
    return call(OpId::kDequantizePerTensor, {a}, name,
                {{"scale", 0.1}, {"zero_point", 0}, {"quant_min", -128}, {"quant_max", 127},
                 {"dtype", DType::kI8}},
                TensorSpec(DType::kF32, a->spec().shape));
  }

  /// Sets user outputs.
  void outputs(const std::vector<Node*>& values) {
    std::vector<OutputSpec> specs(values.size());
    EXPECT_TRUE(ep.set_outputs(values, specs).ok());
  }
  /// Sets outputs with explicit specs.
  void outputs(const std::vector<Node*>& values, std::vector<OutputSpec> specs) {
    Status st = ep.set_outputs(values, std::move(specs));
    EXPECT_TRUE(st.ok()) << st.message();
  }

  Node* find(std::string_view name) const { return ep.graph().find(name); }
  std::string tag(std::string_view name) const { return find(name)->meta.delegation_tag; }
};

}  // namespace kiln::test
