// ONNX's control flow.
// If: a condition known at import time (a constant, or shape arithmetic that folds once the dims
// are fixed, as exporters emit for "squeeze if the batch is 1") selects its branch there: the
// branch's nodes are converted in the enclosing scope and the If's outputs are the branch's. A
// condition computed when the model runs becomes a cond node: each branch a subgraph of its own
// taking, as operands, the enclosing scope's run-time values it reads.
// Loop: a loop node whose body is a subgraph (taking the iteration, the condition, the carried
// values and the run-time values it reads). Scan: a loop over its scan inputs' rows, the body
// gathering row i (or L-1-i) of each before the Scan's own body runs.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>

#include "convert_util.h"
#include "kiln/ir/spec_match.h"

namespace kiln::onnx_import {
namespace {

// The enclosing scope's run-time values graph `g` reads (not constants or shape arithmetic, which
// a subgraph copies in), added to `operands` once each.
Status runtime_operands(Importer& im, const onnx::GraphProto& g, std::string_view what,
                        std::vector<std::string>& operands) {
  for (const std::string& name : outer_names(g)) {
    KILN_ASSIGN_OR_RETURN(const Value* v, im.value_of(name));
    if (v->sequence) {
      return unsupported("{} reads sequence '{}'; a subgraph run at run time takes tensors only",
                         what, name);
    }
    if (v->constant || v->dims) continue;
    if (std::find(operands.begin(), operands.end(), name) == operands.end()) {
      operands.push_back(name);
    }
  }
  return Status::Ok();
}

Result<std::vector<Node*>> operand_nodes(Importer& im, const std::vector<std::string>& names) {
  std::vector<Node*> out;
  for (const std::string& name : names) {
    KILN_ASSIGN_OR_RETURN(const Value* v, im.value_of(name));
    out.push_back(v->node);
  }
  return out;
}

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
    KILN_RETURN_IF_ERROR(runtime_operands(im, *graphs[b], names[b], operands));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> operand_values, operand_nodes(im, operands));
  // A branch written for other input sizes (Silero VAD's 8 kHz network fed a 16 kHz chunk) may
  // not fit the shapes the program is built for: its shape error is kept, and a run that takes
  // it fails with that error, as it would in a runtime that tried. What kiln cannot import at
  // all (an unsupported op) is refused now.
  std::shared_ptr<ExportedProgram> programs[2];
  std::string errors[2];
  for (int b = 0; b < 2; ++b) {
    auto p = im.import_subgraph(*graphs[b], {}, operands);
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
  for (Node* n : operand_values) args.emplace_back(n);
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

// The name of the value `g` returns as output 0, followed back through Identity nodes.
std::string identity_source(const onnx::GraphProto& g) {
  std::string name = g.output(0).name();
  for (bool found = true; found;) {
    found = false;
    for (const auto& n : g.node()) {
      if (n.op_type() == "Identity" && n.output_size() == 1 && n.output(0) == name &&
          n.input_size() == 1) {
        name = n.input(0);
        found = true;
        break;
      }
    }
  }
  return name;
}

// A loop node running `body` (ONNX Loop's body: (iteration, condition, carried...) -> (condition,
// carried..., scan elements...)) from the carried values' initial values `carried`. `trips` is
// the trip count when the importer knows it (the scan outputs then have it as dim 0; else a
// fresh symbol). Returns the loop's results: the carried values' final values, then the stacked
// scan outputs.
Result<std::vector<Node*>> add_loop(Importer& im, Arg trip_count, Arg cond,
                                    std::optional<int64_t> trips, const onnx::GraphProto& body,
                                    const std::vector<Node*>& carried) {
  std::vector<std::string> operands;
  KILN_RETURN_IF_ERROR(runtime_operands(im, body, "the body", operands));
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> others, operand_nodes(im, operands));
  std::vector<TensorSpec> formals = {TensorSpec(DType::kI64, {}), TensorSpec(DType::kBool, {})};
  for (Node* c : carried) formals.push_back(c->spec());
  auto imported = im.import_subgraph(body, formals, operands);
  if (!imported.ok()) return imported.status().with_context("body");
  std::shared_ptr<ExportedProgram> program = std::move(imported).value();
  std::vector<Node*> outs = program->user_outputs();
  const size_t nc = carried.size();
  if (outs.size() < 1 + nc) {
    return invalid_argument(
        "the body returns {} values; it must return the condition and the {} "
        "carried values",
        outs.size(), nc);
  }
  if (outs[0]->spec() != TensorSpec(DType::kBool, {})) {
    return unsupported("the body returns a {} condition; kiln runs a bool[] one",
                       outs[0]->spec().to_string());
  }
  std::vector<TensorSpec> specs;
  for (size_t k = 0; k < nc; ++k) {
    const TensorSpec& in = carried[k]->spec();
    const TensorSpec& out = outs[1 + k]->spec();
    if (!may_equal(in, out)) {  // a symbolic dim coming out is checked when the loop runs
      return unsupported(
          "loop-carried value {} ('{}') is {} going into the body and {} coming out; "
          "kiln needs a carried value to keep its dtype and shape",
          k, body.input(static_cast<int>(2 + k)).name(), in.to_string(), out.to_string());
    }
    specs.push_back(in);
  }
  std::string label = im.node_label();
  Dim rows = trips ? Dim(*trips) : Dim::symbol(im.unique_name(label + "_trips"));
  for (size_t k = 1 + nc; k < outs.size(); ++k) {
    TensorSpec e = outs[k]->spec();
    e.shape.insert(e.shape.begin(), rows);
    specs.push_back(std::move(e));
  }
  std::string name = im.unique_name(label + "_body");
  im.program().subgraphs().push_back({name, program, ""});
  std::vector<Arg> args = {std::move(trip_count), std::move(cond),
                           im.graph().add_get_attr(name, name), static_cast<int64_t>(nc)};
  for (Node* c : carried) args.emplace_back(c);
  for (Node* o : others) args.emplace_back(o);
  KILN_ASSIGN_OR_RETURN(Node * loop,
                        im.graph().add_call(OpId::kLoop, std::move(args), {}, label, false));
  loop->meta.val = specs;
  loop->meta.source = fmt::format("{} '{}'", im.node().op_type(), im.node().name());
  std::vector<Node*> results;
  for (size_t i = 0; i < specs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Node * item, im.call(OpId::kGetitem, {loop, static_cast<int64_t>(i)}));
    results.push_back(item);
  }
  return results;
}

Status convert_loop(Importer& im) {
  KILN_ASSIGN_OR_RETURN(const onnx::GraphProto* body, im.attr_graph("body"));
  if (body->input_size() < 2 || body->output_size() < 1) {
    return invalid_argument(
        "the body takes {} inputs and returns {} values; it takes at least "
        "the iteration and the condition and returns the condition",
        body->input_size(), body->output_size());
  }
  const size_t nc = im.num_inputs() < 2 ? 0 : im.num_inputs() - 2;
  if (static_cast<size_t>(body->input_size()) != 2 + nc) {
    return invalid_argument(
        "the body takes {} inputs; the Loop carries {} values (plus the "
        "iteration and the condition)",
        body->input_size(), nc);
  }
  if (static_cast<size_t>(body->output_size()) != 1 + im.num_outputs()) {
    return invalid_argument(
        "the body returns {} values; the Loop has {} outputs (plus the "
        "condition)",
        body->output_size(), im.num_outputs());
  }
  Arg limits[2];
  std::optional<double> known[2];
  for (size_t i = 0; i < 2; ++i) {
    if (!im.has_input(i)) continue;
    KILN_ASSIGN_OR_RETURN(TensorSpec spec, im.input_spec(i));
    auto shape = spec.static_shape();
    if (!shape ||
        std::accumulate(shape->begin(), shape->end(), int64_t{1}, std::multiplies<>()) != 1) {
      return invalid_argument("input '{}' must hold one element, it is {}", i == 0 ? "M" : "cond",
                              spec.to_string());
    }
    if (i == 0 && !is_integral(spec.dtype)) {
      return invalid_argument("input 'M' must be an integer, it is {}", spec.to_string());
    }
    if (const Tensor* t = im.const_input(i)) known[i] = t->scalar_at(0);
    KILN_ASSIGN_OR_RETURN(Node * n, im.input(i));
    limits[i] = n;
  }
  // The trip count is known when M is (a size, not the "no limit" INT64_MAX exporters write) and
  // the condition cannot stop the loop early: it is absent, or a constant true that the body
  // passes through unchanged.
  std::optional<int64_t> trips;
  bool cond_stays = !im.has_input(1) ||
                    (known[1] && *known[1] != 0 && identity_source(*body) == body->input(1).name());
  if (known[0] && cond_stays && *known[0] <= static_cast<double>(int64_t{1} << 32)) {
    trips = std::max<int64_t>(static_cast<int64_t>(*known[0]), 0);
  }
  if (known[1] && *known[1] == 0) trips = 0;
  std::vector<Node*> carried;
  for (size_t i = 2; i < im.num_inputs(); ++i) {
    if (!im.has_input(i)) return unsupported("loop-carried input {} is not given", i - 2);
    KILN_ASSIGN_OR_RETURN(Node * n, im.input(i));
    carried.push_back(n);
  }
  Arg cond = limits[1];
  if (cond_stays && im.has_input(1) && known[1]) cond = Arg();  // a constant true: no condition
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> results,
                        add_loop(im, limits[0], cond, trips, *body, carried));
  for (size_t i = 0; i < results.size(); ++i) im.set_output(i, results[i]);
  return Status::Ok();
}

// ONNX Scan (opset 9 on): a loop over the rows of its scan inputs.
Status convert_scan(Importer& im) {
  KILN_ASSIGN_OR_RETURN(const onnx::GraphProto* body, im.attr_graph("body"));
  KILN_ASSIGN_OR_RETURN(int64_t m, im.attr_int("num_scan_inputs", 0));
  const auto n_in = static_cast<int64_t>(im.num_inputs());
  if (m < 1 || m > n_in) {
    return invalid_argument("num_scan_inputs is {} with {} inputs", m, n_in);
  }
  const int64_t n = n_in - m;  // state values
  const int64_t k = static_cast<int64_t>(im.num_outputs()) - n;
  if (k < 0 || body->input_size() != n + m || body->output_size() != n + k) {
    return invalid_argument(
        "the body takes {} inputs and returns {} values; the Scan has {} state "
        "values, {} scan inputs and {} scan outputs",
        body->input_size(), body->output_size(), n, m, k);
  }
  auto list = [&](std::string_view name, int64_t size) -> Result<std::vector<int64_t>> {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, im.attr_ints(name));
    if (v.empty()) v.assign(static_cast<size_t>(size), 0);
    if (static_cast<int64_t>(v.size()) != size) {
      return invalid_argument("{} has {} values, expected {}", name, v.size(), size);
    }
    return v;
  };
  KILN_ASSIGN_OR_RETURN(auto in_axes, list("scan_input_axes", m));
  KILN_ASSIGN_OR_RETURN(auto in_dirs, list("scan_input_directions", m));
  KILN_ASSIGN_OR_RETURN(auto out_axes, list("scan_output_axes", k));
  KILN_ASSIGN_OR_RETURN(auto out_dirs, list("scan_output_directions", k));

  // The trip count: every scan input's length along its axis.
  std::optional<int64_t> length;
  for (int64_t j = 0; j < m; ++j) {
    KILN_ASSIGN_OR_RETURN(TensorSpec spec, im.input_spec(static_cast<size_t>(n + j)));
    auto rank = static_cast<int64_t>(spec.shape.size());
    int64_t axis = in_axes[j] < 0 ? in_axes[j] + rank : in_axes[j];
    if (axis < 0 || axis >= rank) {
      return invalid_argument("scan input {} is {}; scan_input_axes {} is out of range", j,
                              spec.to_string(), in_axes[j]);
    }
    const Dim& d = spec.shape[static_cast<size_t>(axis)];
    if (!d.is_static()) {
      return unsupported(
          "scan input {} ({}) has a symbolic length '{}'; kiln scans a static "
          "length",
          j, spec.to_string(), d.to_string());
    }
    if (length && *length != d.value()) {
      return invalid_argument("scan inputs have lengths {} and {}", *length, d.value());
    }
    length = d.value();
  }

  // The loop's body: row i of each scan input (Gather at i, or at -1 - i when reversed), then
  // the Scan's body; the condition passes through.
  onnx::GraphProto loop_body;
  const std::string iter = "__kiln_scan_iteration", cond = "__kiln_scan_condition";
  auto add_input = [&](const std::string& name, int elem_type) {
    onnx::ValueInfoProto* v = loop_body.add_input();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
  };
  add_input(iter, onnx::TensorProto::INT64);
  add_input(cond, onnx::TensorProto::BOOL);
  for (int64_t i = 0; i < n; ++i) *loop_body.add_input() = body->input(static_cast<int>(i));
  for (int64_t j = 0; j < m; ++j) {
    std::string index = iter;
    if (in_dirs[j] != 0) {
      index = fmt::format("__kiln_scan_reversed_{}", j);
      onnx::NodeProto* minus_one = loop_body.add_node();
      minus_one->set_op_type("Constant");
      minus_one->add_output(index + "_minus_one");
      onnx::AttributeProto* value = minus_one->add_attribute();
      value->set_name("value");
      value->set_type(onnx::AttributeProto::TENSOR);
      value->mutable_t()->set_data_type(onnx::TensorProto::INT64);
      value->mutable_t()->add_int64_data(-1);
      onnx::NodeProto* sub = loop_body.add_node();
      sub->set_op_type("Sub");
      sub->add_input(index + "_minus_one");
      sub->add_input(iter);
      sub->add_output(index);
    }
    onnx::NodeProto* gather = loop_body.add_node();
    gather->set_op_type("Gather");
    gather->add_input(im.node().input(static_cast<int>(n + j)));
    gather->add_input(index);
    gather->add_output(body->input(static_cast<int>(n + j)).name());
    onnx::AttributeProto* axis = gather->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(in_axes[j]);
  }
  for (const auto& node : body->node()) *loop_body.add_node() = node;
  for (const auto& init : body->initializer()) *loop_body.add_initializer() = init;
  loop_body.add_output()->set_name(cond);
  for (const auto& o : body->output()) *loop_body.add_output() = o;

  std::vector<Node*> states;
  for (int64_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(Node * s, im.input(static_cast<size_t>(i)));
    states.push_back(s);
  }
  Tensor trips(DType::kI64, {});
  trips.set_scalar_at(0, static_cast<double>(*length));
  Node* trip_count = im.constant_node(std::move(trips), im.node_label() + "_length");
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> results,
                        add_loop(im, trip_count, Arg(), length, loop_body, states));
  for (int64_t i = 0; i < n; ++i) {
    im.set_output(static_cast<size_t>(i), results[static_cast<size_t>(i)]);
  }
  // Each scan output: rows stacked along dim 0 in iteration order; reversed, then moved to its
  // axis as the attributes ask.
  for (int64_t j = 0; j < k; ++j) {
    Node* y = results[static_cast<size_t>(n + j)];
    auto rank = static_cast<int64_t>(y->spec().shape.size());
    if (out_dirs[j] != 0 && *length > 1) {
      Tensor order(DType::kI64, {*length});
      for (int64_t r = 0; r < *length; ++r) {
        order.set_scalar_at(r, static_cast<double>(*length - 1 - r));
      }
      Node* index = im.constant_node(std::move(order), im.node_label() + "_reversed");
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kIndexSelect, {y, index}, {{"dim", int64_t{0}}}));
    }
    int64_t axis = out_axes[j] < 0 ? out_axes[j] + rank : out_axes[j];
    if (axis < 0 || axis >= rank) {
      return invalid_argument("scan output {} has rank {}; scan_output_axes {} is out of range", j,
                              rank, out_axes[j]);
    }
    if (axis != 0) {
      std::vector<int64_t> perm;
      for (int64_t d = 1; d <= axis; ++d) perm.push_back(d);
      perm.push_back(0);
      for (int64_t d = axis + 1; d < rank; ++d) perm.push_back(d);
      KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kPermute, {y}, {{"dims", perm}}));
    }
    im.set_output(static_cast<size_t>(n + j), y);
  }
  return Status::Ok();
}

constexpr OpEntry kControlOps[] = {
    {"If", convert_if},
    {"Loop", convert_loop},
    {"Scan", convert_scan},
};

}  // namespace

std::span<const OpEntry> control_ops() { return kControlOps; }

}  // namespace kiln::onnx_import
