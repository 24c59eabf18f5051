// tag_quant_io: user inputs and outputs that carry quantized codes instead of real numbers.
#include <fmt/format.h>

#include "kiln/backends/htp/capture.h"
#include "kiln/lower/utils.h"
#include "pass_util.h"

namespace kiln::htp {
namespace {

Status check_dtype(std::string_view what, std::string_view name, DType want, DType have) {
  if (want != DType::kU8 && want != DType::kU16) {
    return invalid_argument("tag_quant_io: {} '{}' tagged {}: quantized I/O is u8 or u16", what, name,
                            dtype_name(want));
  }
  if (want != have) {
    return invalid_argument("tag_quant_io: {} '{}' is quantized to {}, not {} as tagged", what, name,
                            dtype_name(have), dtype_name(want));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<QuantizedIo>> tag_quant_io(ExportedProgram& program, const QuantIoDtypeFn& dtype_of) {
  // Everything is checked before anything changes.
  std::vector<QuantizedIo> tagged;
  std::vector<Node*> inputs;
  for (Node* p : program.user_inputs()) {
    std::optional<DType> want = dtype_of(*p);
    if (!want) continue;
    const InputSpec* spec = program.input_spec(p);
    const std::string name = spec->name.empty() ? p->name() : spec->name;
    const Node* q = nullptr;
    std::optional<QuantAttrs> qa;
    for (const Node* u : p->users()) {
      if (!u->is_call(OpId::kQuantizePerTensor) || u->arg(0).node() != p) {
        return invalid_argument("tag_quant_io: input '{}' is read as real numbers by node '{}' ({}), not only "
                                "quantized: it cannot take codes", name, u->name(), u->target_name());
      }
      KILN_ASSIGN_OR_RETURN(QuantAttrs attrs, qdq_attrs(program, u));
      if (q != nullptr && attrs != *qa) {
        return invalid_argument("tag_quant_io: input '{}' is quantized two ways (nodes '{}' and '{}'): it cannot "
                                "take one set of codes", name, q->name(), u->name());
      }
      q = u;
      qa = std::move(attrs);
    }
    if (q == nullptr) return invalid_argument("tag_quant_io: input '{}' is not quantized: it cannot take codes", name);
    KILN_RETURN_IF_ERROR(check_dtype("input", name, *want, qa->dtype));
    inputs.push_back(p);
    tagged.push_back({QuantizedIo::kInput, name, std::move(*qa)});
  }
  Graph& g = program.graph();
  Node* out = g.output_node();
  const std::vector<Node*> values = out != nullptr ? out->arg(0).nodes() : std::vector<Node*>{};
  const auto& specs = program.signature().outputs;
  std::vector<size_t> outputs;
  for (size_t i = 0; i < values.size() && i < specs.size(); ++i) {
    if (specs[i].kind != OutputKind::kUserOutput) continue;
    std::optional<DType> want = dtype_of(*values[i]);
    if (!want) continue;
    const std::string name = specs[i].name.empty() ? values[i]->name() : specs[i].name;
    Node* dq = values[i];
    if (!dq->is_call(OpId::kDequantizePerTensor)) {
      return invalid_argument("tag_quant_io: output '{}' is computed by node '{}' ({}), not dequantized from "
                              "codes: it cannot return codes", name, dq->name(), dq->target_name());
    }
    KILN_ASSIGN_OR_RETURN(QuantAttrs qa, qdq_attrs(program, dq));
    KILN_RETURN_IF_ERROR(check_dtype("output", name, *want, qa.dtype));
    outputs.push_back(i);
    tagged.push_back({QuantizedIo::kOutput, name, std::move(qa)});
  }

  for (size_t i = 0; i < inputs.size(); ++i) {
    Node* p = inputs[i];
    for (Node* q : p->users()) {  // a copy: the loop erases them
      g.replace_all_uses_with(q, p);
      g.erase(q);
    }
    p->meta.val[0].dtype = tagged[i].quant.dtype;
  }
  KILN_RETURN_IF_ERROR(return_codes_instead_of_dequantized(program, outputs));
  if (!tagged.empty()) KILN_RETURN_IF_ERROR(program.lint().with_context("tag_quant_io"));
  return tagged;
}

}  // namespace kiln::htp
