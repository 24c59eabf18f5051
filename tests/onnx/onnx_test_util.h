// Shared helpers of the ONNX importer tests.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kiln/onnx/import.h"
#include "onnx/onnx_builder.h"

namespace kiln::testing {

/// Imports the builder's model from bytes (no folder: external data refused).
inline Result<ExportedProgram> import_model(const OnnxBuilder& b, const OnnxImportOptions& o = {}) {
  std::string bytes = b.bytes();
  return import_onnx_bytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "", o);
}

/// Op names of the call nodes, in graph order.
inline std::vector<std::string> call_ops(const ExportedProgram& p) {
  std::vector<std::string> out;
  for (Node* n : p.graph().nodes()) {
    if (n->op() == OpKind::kCallFunction) out.emplace_back(op_name(n->target()));
  }
  return out;
}

/// First call node of `op`, or null.
inline Node* find_op(const ExportedProgram& p, OpId op) {
  for (Node* n : p.graph().nodes()) {
    if (n->is_call(op)) return n;
  }
  return nullptr;
}

/// Kind of the input spec of the placeholder named `name` (from meta.source "constant 'x'").
inline const InputSpec* input_spec_named(const ExportedProgram& p, const std::string& arg) {
  for (const auto& s : p.signature().inputs) {
    if (s.arg == arg) return &s;
  }
  return nullptr;
}

}  // namespace kiln::testing
