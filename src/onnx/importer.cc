#include "importer.h"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <exception>
#include <queue>

#include "fold.h"
#include "onnx_tensor.h"

namespace kiln::onnx_import {
namespace {

using AP = onnx::AttributeProto;

std::string attr_type_name(int t) {
  if (AP::AttributeType_IsValid(t)) return AP::AttributeType_Name(static_cast<AP::AttributeType>(t));
  return fmt::format("type {}", t);
}

// Some exporters leave `type` unset; infer it from the field that is filled.
int effective_type(const AP& a) {
  if (a.type() != AP::UNDEFINED) return a.type();
  if (a.has_t()) return AP::TENSOR;
  if (a.has_g()) return AP::GRAPH;
  if (a.has_s()) return AP::STRING;
  if (a.has_f()) return AP::FLOAT;
  if (a.has_i()) return AP::INT;
  if (a.ints_size() > 0) return AP::INTS;
  if (a.floats_size() > 0) return AP::FLOATS;
  return AP::UNDEFINED;
}

Status attr_mismatch(const AP& a, int expected) {
  return invalid_argument("attribute '{}': got {}, expected {}", a.name(),
                          attr_type_name(effective_type(a)), attr_type_name(expected));
}

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// The key of a node's converter: the op type, prefixed by its domain outside the default one.
std::string op_key(const onnx::NodeProto& n) {
  return is_default_domain(n.domain()) ? n.op_type() : n.domain() + "." + n.op_type();
}

constexpr std::string_view kTrainingDomain = "ai.onnx.preview.training";

std::string node_display_name(const onnx::NodeProto& n, int index) {
  return n.name().empty() ? fmt::format("#{}", index) : n.name();
}

}  // namespace

std::string sanitize_name(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 1);
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out.insert(out.begin(), '_');
  return out;
}

Importer::Importer(const OnnxImportOptions& options, std::string base_dir)
    : options_(options), base_dir_(std::move(base_dir)) {
  for (auto table : {elementwise_ops(), nn_ops(), tensor_ops(), shape_ops(), quant_ops(),
                     sequence_ops(), training_ops(), control_ops(), signal_ops()}) {
    for (const OpEntry& e : table) table_.emplace(e.op_type, e.fn);
  }
}

// ---- Inputs of the current node.

bool Importer::has_input(size_t i) const {
  return i < num_inputs() && !node_->input(static_cast<int>(i)).empty();
}

Value* Importer::input_value(size_t i) {
  if (!has_input(i)) return nullptr;
  auto it = values_.find(node_->input(static_cast<int>(i)));
  return it == values_.end() ? nullptr : &it->second;
}

const Tensor* Importer::const_input(size_t i) {
  Value* v = input_value(i);
  if (v == nullptr) return nullptr;
  if (v->constant) return &*v->constant;
  return nullptr;
}

bool Importer::is_runtime_input(size_t i) {
  const Value* v = input_value(i);
  return v != nullptr && !v->constant && !v->dims && !v->sequence;
}

Result<Tensor> Importer::require_const(size_t i, std::string_view what) {
  if (!has_input(i)) return invalid_argument("{} is missing", what);
  const Tensor* t = const_input(i);
  if (t == nullptr) {
    return unsupported("{} ('{}') must be known at import time (a constant or shape arithmetic "
                       "on static shapes)",
                       what, node_->input(static_cast<int>(i)));
  }
  return *t;
}

Result<std::vector<int64_t>> Importer::require_ints(size_t i, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(Tensor t, require_const(i, what));
  if (!is_integral(t.dtype()) || t.rank() > 1) {
    return invalid_argument("{}: got {}, expected a 1-D integer tensor", what,
                            format_shape(t.dtype(), t.shape()));
  }
  return fold::to_i64_vector(t);
}

Result<DimsValue> Importer::require_dims(size_t i, std::string_view what) {
  Value* v = input_value(i);
  if (v == nullptr) return invalid_argument("{} is missing", what);
  if (v->dims) return *v->dims;
  KILN_ASSIGN_OR_RETURN(auto ints, require_ints(i, what));
  DimsValue d;
  d.scalar = v->constant->rank() == 0;
  d.dtype = v->constant->dtype();
  d.dims.assign(ints.begin(), ints.end());
  return d;
}

Result<Node*> Importer::input(size_t i, Role role) {
  Value* v = input_value(i);
  if (v == nullptr) return invalid_argument("input {} is missing", i);
  return materialize(*v, role);
}

Result<TensorSpec> Importer::input_spec(size_t i) {
  Value* v = input_value(i);
  if (v == nullptr) return invalid_argument("input {} is missing", i);
  if (v->constant) return TensorSpec::of(v->constant->dtype(), v->constant->shape());
  if (v->sequence) {
    return invalid_argument("input {} ('{}') is a sequence, expected a tensor", i, v->onnx_name);
  }
  if (v->dims) {
    TensorSpec s;
    s.dtype = v->dims->dtype;
    if (!v->dims->scalar) s.shape.push_back(static_cast<int64_t>(v->dims->dims.size()));
    return s;
  }
  if (v->node == nullptr || !v->node->has_spec()) {
    return internal_error("input '{}' has no known shape", v->onnx_name);
  }
  return v->node->spec();
}

Result<std::vector<int64_t>> Importer::static_input_shape(size_t i, std::string_view why) {
  KILN_ASSIGN_OR_RETURN(TensorSpec s, input_spec(i));
  auto shape = s.static_shape();
  if (!shape) {
    return unsupported("input '{}' has shape {} with a symbolic dim; {} needs a static shape "
                       "(fix the dim with a dim value option)",
                       node_->input(static_cast<int>(i)), s.to_string(), why);
  }
  return *shape;
}

// ---- Outputs.

Value& Importer::value_for_output(size_t i) {
  const std::string& name = node_->output(static_cast<int>(i));
  Value& v = values_[name];
  v.onnx_name = name;
  return v;
}

void Importer::set_output(size_t i, Node* n) {
  if (i >= num_outputs() || node_->output(static_cast<int>(i)).empty()) return;
  value_for_output(i).node = n;
}

void Importer::set_output_const(size_t i, Tensor t) {
  if (i >= num_outputs() || node_->output(static_cast<int>(i)).empty()) return;
  value_for_output(i).constant = std::move(t);
}

void Importer::set_output_value(size_t i, const Value& v) {
  if (i >= num_outputs() || node_->output(static_cast<int>(i)).empty()) return;
  Value& out = value_for_output(i);
  out.node = v.node;
  out.constant = v.constant;
  out.dims = v.dims;
  out.sequence = v.sequence;
}

Result<std::shared_ptr<const std::vector<Value>>> Importer::sequence_input(size_t i) {
  Value* v = input_value(i);
  if (v == nullptr) return invalid_argument("input {} is missing", i);
  if (!v->sequence) {
    return invalid_argument("input {} ('{}') is a tensor, expected a sequence", i, v->onnx_name);
  }
  return v->sequence;
}

void Importer::set_output_dims(size_t i, DimsValue d) {
  if (i >= num_outputs() || node_->output(static_cast<int>(i)).empty()) return;
  bool all_static = std::all_of(d.dims.begin(), d.dims.end(), [](Dim x) { return x.is_static(); });
  if (all_static) {
    std::vector<int64_t> ints;
    for (Dim x : d.dims) ints.push_back(x.value());
    Tensor t = fold::i64_tensor(ints, d.scalar);
    if (d.dtype != DType::kI64) {
      auto c = fold::cast(t, d.dtype);
      if (c.ok()) t = std::move(c).value();
    }
    value_for_output(i).constant = std::move(t);
    return;
  }
  value_for_output(i).dims = std::move(d);
}

bool Importer::output_used(size_t i) const {
  if (i >= num_outputs()) return false;
  const std::string& name = node_->output(static_cast<int>(i));
  return !name.empty() && consumed_.count(name) != 0;
}

// ---- Node creation.

std::string Importer::unique_name(std::string_view onnx_name) {
  std::string base = sanitize_name(onnx_name);
  std::string name = base;
  for (int k = 1; used_names_.count(name) || graph().find(name) != nullptr ||
                  program_.constants().contains(name);
       ++k) {
    name = fmt::format("{}_{}", base, k);
  }
  used_names_.insert(name);
  return name;
}

Result<Node*> Importer::call(OpId op, std::vector<Arg> args, const Kwargs& kwargs) {
  KILN_ASSIGN_OR_RETURN(Node * n, graph().add_call(op, std::move(args), kwargs, node_label_));
  n->meta.source = fmt::format("{} '{}'", node_->op_type(), node_->name());
  return n;
}

Node* Importer::constant_node(Tensor t, std::string_view hint, Role role) {
  std::string name = unique_name(hint);
  bool weight = role == Role::kWeight && is_floating(t.dtype()) && t.rank() >= 1;
  Node* n = weight ? program_.add_parameter(name, name, std::move(t))
                   : program_.add_constant(name, name, std::move(t));
  n->meta.source = fmt::format("constant '{}'", hint);
  return n;
}

Result<Node*> Importer::materialize(Value& v, Role role) {
  if (v.node != nullptr) return v.node;
  if (v.constant) {
    v.node = constant_node(*v.constant, v.onnx_name, role);
    return v.node;
  }
  if (v.sequence) {
    return unsupported("value '{}' is a sequence where a tensor is expected", v.onnx_name);
  }
  if (v.dims) {
    std::vector<std::string> shown;
    for (Dim d : v.dims->dims) shown.push_back(d.to_string());
    return unsupported("value '{}' is shape arithmetic on symbolic dims [{}] that kiln cannot "
                       "compute at import time; fix the symbolic dims with dim value options",
                       v.onnx_name, fmt::join(shown, ", "));
  }
  return internal_error("value '{}' has not been computed", v.onnx_name);
}

// ---- Attributes.

const AP* Importer::attr(std::string_view name) const {
  for (const AP& a : node_->attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

Result<int64_t> Importer::attr_int(std::string_view name, int64_t dflt) const {
  const AP* a = attr(name);
  if (a == nullptr) return dflt;
  if (effective_type(*a) != AP::INT) return attr_mismatch(*a, AP::INT);
  return a->i();
}

Result<float> Importer::attr_float(std::string_view name, float dflt) const {
  const AP* a = attr(name);
  if (a == nullptr) return dflt;
  if (effective_type(*a) != AP::FLOAT) return attr_mismatch(*a, AP::FLOAT);
  return a->f();
}

Result<std::string> Importer::attr_str(std::string_view name, std::string_view dflt) const {
  const AP* a = attr(name);
  if (a == nullptr) return std::string(dflt);
  if (effective_type(*a) != AP::STRING) return attr_mismatch(*a, AP::STRING);
  return a->s();
}

Result<std::vector<int64_t>> Importer::attr_ints(std::string_view name) const {
  const AP* a = attr(name);
  if (a == nullptr) return std::vector<int64_t>{};
  int t = effective_type(*a);
  if (t != AP::INTS && !(t == AP::UNDEFINED)) return attr_mismatch(*a, AP::INTS);
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

Result<std::vector<float>> Importer::attr_floats(std::string_view name) const {
  const AP* a = attr(name);
  if (a == nullptr) return std::vector<float>{};
  int t = effective_type(*a);
  if (t != AP::FLOATS && !(t == AP::UNDEFINED)) return attr_mismatch(*a, AP::FLOATS);
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

Result<Tensor> Importer::attr_tensor(std::string_view name) const {
  const AP* a = attr(name);
  if (a == nullptr) return invalid_argument("attribute '{}' is missing", name);
  if (effective_type(*a) != AP::TENSOR) return attr_mismatch(*a, AP::TENSOR);
  return tensor_from_proto(a->t(), base_dir_, fmt::format("attribute '{}'", name));
}

Result<const onnx::GraphProto*> Importer::attr_graph(std::string_view name) const {
  const AP* a = attr(name);
  if (a == nullptr) return invalid_argument("attribute '{}' is missing", name);
  if (effective_type(*a) != AP::GRAPH) return attr_mismatch(*a, AP::GRAPH);
  return &a->g();
}

Result<std::optional<std::vector<int64_t>>> Importer::axes_attr_or_input(std::string_view name,
                                                                        size_t input_index,
                                                                        int64_t input_from) {
  if (opset_ >= input_from) {
    if (!has_input(input_index)) return std::optional<std::vector<int64_t>>();
    KILN_ASSIGN_OR_RETURN(auto v, require_ints(input_index, fmt::format("input '{}'", name)));
    return std::optional<std::vector<int64_t>>(std::move(v));
  }
  if (!has_attr(name)) return std::optional<std::vector<int64_t>>();
  KILN_ASSIGN_OR_RETURN(auto v, attr_ints(name));
  return std::optional<std::vector<int64_t>>(std::move(v));
}

// ---- The import.

Status Importer::check_model(const onnx::ModelProto& model) {
  if (!model.has_graph()) return parse_error("the model has no graph");
  bool found = false, training = false;
  for (const auto& op : model.opset_import()) {
    if (is_default_domain(op.domain())) {
      opset_ = op.version();
      found = true;
    }
    training = training || op.domain() == kTrainingDomain;
  }
  if (!found && training) {
    opset_ = kOnnxMinOpset;  // only optimizer ops: no default-domain op to convert
  } else if (!found) {
    if (model.ir_version() >= 3) return parse_error("the model imports no default-domain opset");
    opset_ = 1;
  }
  if (opset_ < 1 || opset_ > kOnnxMaxOpset) {
    return unsupported("the model uses default-domain opset {}; kiln imports opsets 1 to {} (below {} "
                       "through ONNX's version converter)",
                       opset_, kOnnxMaxOpset, kOnnxMinOpset);
  }
  return Status::Ok();
}

// A model below kOnnxMinOpset is brought up to it by ONNX's own version converter, after ONNX's
// checker has accepted each node against its schema (the converter's adapters assume the
// attributes and inputs the schema requires). Graph-level rules the checker also enforces (a shape
// on every output) are left alone: ONNX Runtime does not require them either. Both throw.
Status Importer::upgrade_opset(onnx::ModelProto& model) {
  const int64_t from = opset_;
  auto failed = [&](std::string_view step, std::string_view what) {
    std::string first(what.substr(0, what.find('\n')));
    return unsupported("the model uses default-domain opset {}; {} before converting it to opset {}: {}", from,
                       step, kOnnxMinOpset, first);
  };
  try {
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(model.ir_version()));
    std::unordered_map<std::string, int> opsets;
    for (const auto& op : model.opset_import()) opsets[op.domain()] = static_cast<int>(op.version());
    ctx.set_opset_imports(std::move(opsets));
    onnx::checker::LexicalScopeContext scope;
    for (const auto& n : model.graph().node()) onnx::checker::check_node(n, ctx, scope);
  } catch (const std::exception& e) {
    return failed("ONNX's checker rejected a node", e.what());
  }
  try {
    // The converter's adapters (Gemm's and the broadcasting ops' at opset 7) need the shapes of
    // their inputs: ONNX's shape inference states them first, as onnx.version_converter does.
    onnx::shape_inference::InferShapes(model);
    model = onnx::version_conversion::ConvertVersion(model, static_cast<int>(kOnnxMinOpset));
  } catch (const std::exception& e) {
    return failed("ONNX's version converter failed", e.what());
  }
  opset_ = kOnnxMinOpset;
  return Status::Ok();
}

Status Importer::load_initializers(onnx::GraphProto& g) {
  if (g.sparse_initializer_size() > 0) {
    return unsupported("sparse initializer '{}' is not supported",
                       g.sparse_initializer(0).values().name());
  }
  for (onnx::TensorProto& init : *g.mutable_initializer()) {
    if (init.name().empty()) return invalid_argument("an initializer has no name");
    std::string what = fmt::format("initializer '{}'", init.name());
    if (values_.count(init.name())) return invalid_argument("{} is defined twice", what);
    KILN_ASSIGN_OR_RETURN(Tensor t, take_tensor_from_proto(init, base_dir_, what));
    Value& v = values_[init.name()];
    v.onnx_name = init.name();
    v.constant = std::move(t);
    // Whatever the proto still holds (typed fields) is no longer needed: free it now, so a
    // model's weights are held once, not twice, while the rest imports.
    onnx::TensorProto().Swap(&init);
  }
  return Status::Ok();
}

Result<TensorSpec> Importer::spec_from_type(const onnx::TypeProto& type, const std::string& what) {
  if (!type.has_tensor_type()) return unsupported("{}: only tensor types are supported", what);
  const auto& tt = type.tensor_type();
  auto dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype) {
    return unsupported("{}: element type {} is not supported", what, onnx_type_name(tt.elem_type()));
  }
  if (!tt.has_shape()) return unsupported("{}: the input has no shape (unknown rank)", what);
  TensorSpec spec;
  spec.dtype = *dtype;
  int64_t numel = 1;
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto& dim = tt.shape().dim(d);
    std::string sym;
    if (dim.has_dim_value()) {
      int64_t n = dim.dim_value();
      if (n < 0) return invalid_argument("{}: dim {} is negative ({})", what, d, n);
      if (n != 0 && numel > kMaxElements / n) {
        return out_of_range("{}: shape has more than 2^40 elements", what);
      }
      numel *= n;
      spec.shape.push_back(Dim(n));
      continue;
    }
    sym = dim.has_dim_param() && !dim.dim_param().empty()
              ? sanitize_name(dim.dim_param())
              : (d == 0 ? std::string("batch") : fmt::format("unk_{}", unk_counter_++));
    auto fixed = options_.dim_values.find(dim.has_dim_param() ? dim.dim_param() : sym);
    if (fixed == options_.dim_values.end()) fixed = options_.dim_values.find(sym);
    if (fixed != options_.dim_values.end()) {
      int64_t n = fixed->second;
      if (n < 0 || (n != 0 && numel > kMaxElements / n)) {
        return out_of_range("{}: fixed value {} for dim '{}' is out of range", what, n, sym);
      }
      numel *= n;
      spec.shape.push_back(Dim(n));
    } else {
      spec.shape.push_back(Dim::symbol(sym));
    }
  }
  return spec;
}

Status Importer::add_inputs(const onnx::GraphProto& g) {
  for (const auto& in : g.input()) {
    // IR >= 4: an input that is also an initializer only gives the initializer a default that a
    // caller may override; kiln treats it as the constant it holds.
    if (values_.count(in.name())) continue;
    if (in.name().empty()) return invalid_argument("a graph input has no name");
    std::string what = fmt::format("graph input '{}'", in.name());
    KILN_ASSIGN_OR_RETURN(TensorSpec spec, spec_from_type(in.type(), what));
    auto given = options_.input_shapes.find(in.name());
    if (given != options_.input_shapes.end()) {
      const std::vector<int64_t>& sizes = given->second;
      if (sizes.size() != spec.shape.size()) {
        return invalid_argument("{} has rank {}; the tensor given for it has shape [{}]", what,
                                spec.shape.size(), fmt::join(sizes, ", "));
      }
      for (size_t d = 0; d < sizes.size(); ++d) {
        if (spec.shape[d].is_static() && spec.shape[d].value() != sizes[d]) {
          return invalid_argument("{} has shape {}; the tensor given for it has shape [{}]", what,
                                  spec.to_string(), fmt::join(sizes, ", "));
        }
      }
      for (size_t d = 0; d < sizes.size(); ++d) spec.shape[d] = Dim(sizes[d]);
    }
    Node* n = program_.add_user_input(unique_name(in.name()), std::move(spec), in.name());
    n->meta.source = fmt::format("input '{}'", in.name());
    Value& v = values_[in.name()];
    v.onnx_name = in.name();
    v.node = n;
  }
  return Status::Ok();
}

Status Importer::check_supported(const onnx::GraphProto& g) {
  std::vector<std::string> order;
  std::unordered_map<std::string, std::vector<std::string>> nodes_of;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    std::string key = op_key(n);
    if (table_.count(key)) continue;
    auto [it, inserted] = nodes_of.try_emplace(key);
    if (inserted) order.push_back(key);
    it->second.push_back(node_display_name(n, i));
  }
  if (order.empty()) return Status::Ok();
  std::vector<std::string> parts;
  for (const auto& key : order) {
    const auto& names = nodes_of[key];
    std::vector<std::string> quoted;
    for (const auto& n : names) quoted.push_back(fmt::format("'{}'", n));
    parts.push_back(fmt::format("{} ({} {})", key, names.size() == 1 ? "node" : "nodes",
                                fmt::join(quoted, ", ")));
  }
  return unsupported("unsupported ONNX ops: {}", fmt::join(parts, ", "));
}

Result<std::vector<int>> Importer::topo_order(const onnx::GraphProto& g) {
  const int n = g.node_size();
  std::unordered_map<std::string_view, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const auto& out : g.node(i).output()) {
      if (out.empty()) continue;
      if (values_.count(out)) {
        return invalid_argument("node '{}' ({}): output '{}' is already a graph input or "
                                "initializer",
                                node_display_name(g.node(i), i), g.node(i).op_type(), out);
      }
      if (!producer.emplace(out, i).second) {
        return invalid_argument("node '{}' ({}): output '{}' is also produced by node '{}'",
                                node_display_name(g.node(i), i), g.node(i).op_type(), out,
                                node_display_name(g.node(producer[out]), producer[out]));
      }
    }
  }
  std::vector<int> indegree(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> users(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (const auto& in : g.node(i).input()) {
      if (in.empty()) continue;
      consumed_.insert(in);
      auto it = producer.find(in);
      if (it == producer.end()) {
        if (values_.count(in)) continue;
        return invalid_argument("node '{}' ({}): input '{}' is not a graph input, an initializer "
                                "or the output of any node",
                                node_display_name(g.node(i), i), g.node(i).op_type(), in);
      }
      ++indegree[static_cast<size_t>(i)];
      users[static_cast<size_t>(it->second)].push_back(i);
    }
  }
  // Kahn's algorithm, lowest index first so the file's order is kept where it is valid.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (indegree[static_cast<size_t>(i)] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(static_cast<size_t>(n));
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[static_cast<size_t>(i)]) {
      if (--indegree[static_cast<size_t>(u)] == 0) ready.push(u);
    }
  }
  if (static_cast<int>(order.size()) == n) return order;
  // Walk backwards through unfinished producers until a node repeats: it lies on a cycle.
  int cur = 0;
  while (indegree[static_cast<size_t>(cur)] == 0) ++cur;
  std::vector<char> seen(static_cast<size_t>(n), 0);
  while (!seen[static_cast<size_t>(cur)]) {
    seen[static_cast<size_t>(cur)] = 1;
    for (const auto& in : g.node(cur).input()) {
      auto it = producer.find(in);
      if (it != producer.end() && indegree[static_cast<size_t>(it->second)] > 0) {
        cur = it->second;
        break;
      }
    }
  }
  return invalid_argument("the graph has a cycle through node '{}' ({})",
                          node_display_name(g.node(cur), cur), g.node(cur).op_type());
}

Status Importer::convert_node(const onnx::NodeProto& n) {
  node_ = &n;
  node_label_ = sanitize_name(n.name().empty() ? n.op_type() : n.name());
  for (int i = 0; i < n.input_size(); ++i) {
    const std::string& in = n.input(i);
    if (!in.empty() && !values_.count(in)) {
      return internal_error("input '{}' has not been computed", in);
    }
  }
  KILN_ASSIGN_OR_RETURN(bool folded, try_fold(n));
  if (!folded) {
    auto it = table_.find(op_key(n));
    if (it == table_.end()) return unsupported("op {} is not supported", op_key(n));
    KILN_RETURN_IF_ERROR(it->second(*this));
  }
  for (int i = 0; i < n.output_size(); ++i) {
    const std::string& out = n.output(i);
    if (out.empty() || !consumed_.count(out)) continue;
    auto it = values_.find(out);
    if (it == values_.end() || (it->second.node == nullptr && !it->second.constant &&
                                !it->second.dims && !it->second.sequence)) {
      return unsupported("output {} ('{}') is used but kiln does not compute it", i, out);
    }
  }
  return Status::Ok();
}

Status Importer::set_outputs(const onnx::GraphProto& g) {
  std::vector<Node*> outs;
  std::vector<OutputSpec> specs;
  std::unordered_set<std::string_view> seen;
  for (const auto& o : g.output()) {
    if (o.name().empty()) return invalid_argument("a graph output has no name");
    if (!seen.insert(o.name()).second) {
      return invalid_argument("graph output '{}' is listed twice", o.name());
    }
    auto it = values_.find(o.name());
    if (it == values_.end()) {
      return invalid_argument("graph output '{}' is not produced by any node", o.name());
    }
    auto n = materialize(it->second, Role::kActivation);
    if (!n.ok()) return n.status().with_context(fmt::format("graph output '{}'", o.name()));
    outs.push_back(*n);
    specs.push_back({OutputKind::kUserOutput, "", o.name()});
  }
  if (outs.empty()) return invalid_argument("the graph has no outputs");
  return program_.set_outputs(outs, std::move(specs));
}

// The nodes of graph `g` in topological order, each error naming its node; `g`'s outputs count as
// read (a node computing one must compute it).
Status Importer::convert_nodes(const onnx::GraphProto& g) {
  for (const auto& o : g.output()) consumed_.insert(o.name());
  KILN_ASSIGN_OR_RETURN(auto order, topo_order(g));
  for (int i : order) {
    const auto& n = g.node(i);
    Status st = convert_node(n);
    if (!st.ok()) {
      return st.with_context(fmt::format("node '{}' ({})", node_display_name(n, i), n.op_type()));
    }
  }
  return Status::Ok();
}

// The nodes of subgraph `g` (an If branch, a Loop body), converted in topological order after its
// initializers (copies: the model stays intact) join the scope. ONNX names are unique across nested
// graphs, so load_initializers and topo_order refuse a name that shadows an outer one.
Status Importer::convert_subgraph_nodes(const onnx::GraphProto& g) {
  onnx::GraphProto initializers;
  *initializers.mutable_initializer() = g.initializer();
  *initializers.mutable_sparse_initializer() = g.sparse_initializer();
  KILN_RETURN_IF_ERROR(load_initializers(initializers));
  return convert_nodes(g);
}

Status Importer::inline_subgraph(const onnx::GraphProto& g) {
  if (g.input_size() != 0) {
    return invalid_argument("subgraph '{}' takes {} inputs; an If branch takes none", g.name(),
                            g.input_size());
  }
  const onnx::NodeProto* outer = node_;
  const std::string outer_label = node_label_;
  KILN_RETURN_IF_ERROR(convert_subgraph_nodes(g));
  node_ = outer;
  node_label_ = outer_label;
  return Status::Ok();
}

Result<std::shared_ptr<ExportedProgram>> Importer::import_subgraph(
    const onnx::GraphProto& g, const std::vector<TensorSpec>& formals,
    const std::vector<std::string>& operands) {
  if (static_cast<size_t>(g.input_size()) != formals.size()) {
    return invalid_argument("the graph takes {} inputs, expected {}", g.input_size(),
                            formals.size());
  }
  Importer child(options_, base_dir_);
  child.opset_ = opset_;
  for (size_t i = 0; i < formals.size(); ++i) {
    const std::string& name = g.input(static_cast<int>(i)).name();
    if (name.empty() || child.values_.count(name)) {
      return invalid_argument("graph input {} has no name or a name used before", i);
    }
    Node* n = child.program_.add_user_input(child.unique_name(name), formals[i], name);
    Value& v = child.values_[name];
    v.onnx_name = name;
    v.node = n;
  }
  for (const std::string& name : operands) {
    auto it = values_.find(name);
    if (it == values_.end() || it->second.node == nullptr || !it->second.node->has_spec()) {
      return internal_error("operand '{}' has not been computed", name);
    }
    Node* n = child.program_.add_user_input(child.unique_name(name), it->second.node->spec(), name);
    n->meta.source = fmt::format("operand '{}'", name);
    Value& v = child.values_[name];
    v.onnx_name = name;
    v.node = n;
  }
  for (const std::string& name : outer_names(g)) {
    auto it = values_.find(name);
    if (it == values_.end() || child.values_.count(name)) continue;
    const Value& v = it->second;
    if (!v.constant && !v.dims) continue;  // an operand, or not defined (topo_order says so)
    Value& copy = child.values_[name];
    copy.onnx_name = name;
    copy.constant = v.constant;
    copy.dims = v.dims;
  }
  KILN_RETURN_IF_ERROR(child.convert_subgraph_nodes(g));
  child.node_ = nullptr;
  KILN_RETURN_IF_ERROR(child.set_outputs(g));
  return std::make_shared<ExportedProgram>(std::move(child.program_));
}

std::vector<std::string> outer_names(const onnx::GraphProto& g) {
  std::unordered_set<std::string> defined, seen;
  std::vector<std::string> out;
  auto define_all = [&](const onnx::GraphProto& sub, auto&& self) -> void {
    for (const auto& i : sub.input()) defined.insert(i.name());
    for (const auto& i : sub.initializer()) defined.insert(i.name());
    for (const auto& n : sub.node()) {
      for (const auto& o : n.output()) defined.insert(o);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) self(a.g(), self);
        for (const auto& sg : a.graphs()) self(sg, self);
      }
    }
  };
  define_all(g, define_all);
  auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) out.push_back(name);
  };
  auto read_all = [&](const onnx::GraphProto& sub, auto&& self) -> void {
    for (const auto& n : sub.node()) {
      for (const auto& i : n.input()) read(i);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) self(a.g(), self);
        for (const auto& sg : a.graphs()) self(sg, self);
      }
    }
    for (const auto& o : sub.output()) read(o.name());
  };
  read_all(g, read_all);
  return out;
}

Result<const Value*> Importer::value_of(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return invalid_argument("value '{}' is not computed", name);
  return &it->second;
}

Result<ExportedProgram> Importer::run(onnx::ModelProto& model) {
  KILN_RETURN_IF_ERROR(check_model(model));
  if (opset_ < kOnnxMinOpset) KILN_RETURN_IF_ERROR(upgrade_opset(model));
  const auto& g = model.graph();
  KILN_RETURN_IF_ERROR(check_supported(g));
  KILN_RETURN_IF_ERROR(load_initializers(*model.mutable_graph()));
  KILN_RETURN_IF_ERROR(add_inputs(g));
  KILN_RETURN_IF_ERROR(convert_nodes(g));
  node_ = nullptr;
  KILN_RETURN_IF_ERROR(set_outputs(g));
  Status st = program_.lint();
  if (!st.ok()) return internal_error("imported program is malformed: {}", st.message());
  return std::move(program_);
}

}  // namespace kiln::onnx_import
