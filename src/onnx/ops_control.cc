// ONNX's If. A condition known at import time (a constant, or shape arithmetic that folds once the
// dims are fixed, as exporters emit for "squeeze if the batch is 1") selects its branch there:
// the branch's nodes are converted in the enclosing scope and the If's outputs are the branch's.
// A condition computed when the model runs becomes a cond node: each branch a subgraph of its
// own taking, as operands, the enclosing scope's run-time values it reads.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "convert_util.h"

namespace kiln::onnx_import {
namespace {

Status convert_runtime_if(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * pred, im.input(0));
  KILN_ASSIGN_OR_RETURN(TensorSpec ps, im.input_spec(0));
  auto shape = ps.static_shape();
  if (shape &&
      std::accumulate(shape->begin(), shape->end(), int64_t{1}, std::multiplies<>()) != 1) {
    return invalid_argument("input 'cond' must hold one element, it is {}", ps.to_string());
  }
  const char* names[2] = {"then_branch", "else_branch"};
  const onnx::GraphProto* graphs[2];
  std::vector<std::string> operands;
  for (int b = 0; b < 2; ++b) {
    KILN_ASSIGN_OR_RETURN(graphs[b], im.attr_graph(names[b]));
    if (static_cast<size_t>(graphs[b]->output_size()) != im.num_outputs()) {
      return invalid_argument("{} has {} outputs, the If has {}", names[b],
                              graphs[b]->output_size(), im.num_outputs());
    }
    for (const std::string& name : outer_names(*graphs[b])) {
      KILN_ASSIGN_OR_RETURN(const Value* v, im.value_of(name));
      if (v->sequence) {
        return unsupported("{} reads sequence '{}'; a branch chosen at run time takes tensors only",
                           names[b], name);
      }
      if (v->constant || v->dims) continue;
      if (std::find(operands.begin(), operands.end(), name) == operands.end()) {
        operands.push_back(name);
      }
    }
  }
  std::vector<Node*> operand_nodes;
  for (const std::string& name : operands) {
    KILN_ASSIGN_OR_RETURN(const Value* v, im.value_of(name));
    operand_nodes.push_back(v->node);
  }
  // A branch written for other input sizes (Silero VAD's 8 kHz network fed a 16 kHz chunk) may
  // not fit the shapes the program is built for: its shape error is kept, and a run that takes
  // it fails with that error, as it would in a runtime that tried. What kiln cannot import at
  // all (an unsupported op) is refused now.
  std::shared_ptr<ExportedProgram> programs[2];
  std::string errors[2];
  for (int b = 0; b < 2; ++b) {
    auto p = im.import_subgraph(*graphs[b], operands);
    if (p.ok()) {
      programs[b] = std::move(p).value();
    } else if (p.status().code() == StatusCode::kInvalidArgument) {
      errors[b] = p.status().message();
    } else {
      return p.status().with_context(names[b]);
    }
  }
  if (!programs[0] && !programs[1]) {
    return invalid_argument(
        "neither branch fits the input shapes: then_branch: {}; else_branch: {}", errors[0],
        errors[1]);
  }
  // The cond's results: what its branches return, the same from both where both can run.
  std::vector<Node*> outs[2];
  for (int b = 0; b < 2; ++b)
    outs[b] = (programs[b] ? programs[b] : programs[1 - b])->user_outputs();
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < im.num_outputs(); ++i) {
    const TensorSpec& a = outs[0][i]->spec();
    const TensorSpec& b = outs[1][i]->spec();
    if (a != b) {
      return unsupported(
          "output {} ('{}') is {} from then_branch but {} from else_branch; kiln "
          "needs both branches to give the same dtype and shape",
          i, im.node().output(static_cast<int>(i)), a.to_string(), b.to_string());
    }
    specs.push_back(a);
  }
  Node* attrs[2];
  for (int b = 0; b < 2; ++b) {
    std::string name = im.unique_name(
        fmt::format("{}_{}", sanitize_name(im.node().name().empty() ? "If" : im.node().name()),
                    b == 0 ? "then" : "else"));
    im.program().subgraphs().push_back({name, programs[b], errors[b]});
    attrs[b] = im.graph().add_get_attr(name, name);
  }
  std::vector<Arg> args = {pred, attrs[0], attrs[1]};
  for (Node* n : operand_nodes) args.emplace_back(n);
  KILN_ASSIGN_OR_RETURN(
      Node * cond, im.graph().add_call(OpId::kCond, std::move(args), {}, im.node_label(), false));
  cond->meta.val = std::move(specs);
  cond->meta.source = fmt::format("If '{}'", im.node().name());
  for (size_t i = 0; i < im.num_outputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Node * item, im.call(OpId::kGetitem, {cond, static_cast<int64_t>(i)}));
    im.set_output(i, item);
  }
  return Status::Ok();
}

Status convert_if(Importer& im) {
  const Tensor* cond = im.const_input(0);
  if (cond == nullptr) return convert_runtime_if(im);
  if (cond->numel() != 1) {
    return invalid_argument("input 'cond' must hold one element, it has shape [{}]",
                            fmt::join(cond->shape(), ", "));
  }
  const char* branch = cond->scalar_at(0) != 0 ? "then_branch" : "else_branch";
  KILN_ASSIGN_OR_RETURN(const onnx::GraphProto* g, im.attr_graph(branch));
  if (static_cast<size_t>(g->output_size()) != im.num_outputs()) {
    return invalid_argument("{} has {} outputs, the If has {}", branch, g->output_size(),
                            im.num_outputs());
  }
  Status st = im.inline_subgraph(*g);
  if (!st.ok()) return st.with_context(branch);
  for (size_t i = 0; i < im.num_outputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Value* v, im.value_of(g->output(static_cast<int>(i)).name()));
    im.set_output_value(i, *v);
  }
  return Status::Ok();
}

constexpr OpEntry kControlOps[] = {
    {"If", convert_if},
};

}  // namespace

std::span<const OpEntry> control_ops() { return kControlOps; }

}  // namespace kiln::onnx_import
