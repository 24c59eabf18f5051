// Import-time constants: Constant, Shape, ConstantOfShape, Range, and the folding of shape
// arithmetic (Shape -> Gather -> Concat -> Reshape) on constant or symbolic-dim values.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "fold.h"
#include "importer.h"
#include "onnx_tensor.h"
#include "shape_util.h"

namespace kiln::onnx_import {
namespace {

using fold::BinOp;

Status convert_constant(Importer& im) {
  const auto& n = im.node();
  if (n.attribute_size() != 1) {
    return invalid_argument("Constant needs exactly one value attribute, got {}", n.attribute_size());
  }
  const std::string& key = n.attribute(0).name();
  if (key == "value") {
    KILN_ASSIGN_OR_RETURN(Tensor t, im.attr_tensor("value"));
    im.set_output_const(0, std::move(t));
  } else if (key == "value_float") {
    KILN_ASSIGN_OR_RETURN(float f, im.attr_float("value_float", 0));
    Tensor t(DType::kF32, {});
    t.set_scalar_at(0, f);
    im.set_output_const(0, std::move(t));
  } else if (key == "value_floats") {
    KILN_ASSIGN_OR_RETURN(auto fs, im.attr_floats("value_floats"));
    Tensor t(DType::kF32, {static_cast<int64_t>(fs.size())});
    for (size_t i = 0; i < fs.size(); ++i) t.set_scalar_at(static_cast<int64_t>(i), fs[i]);
    im.set_output_const(0, std::move(t));
  } else if (key == "value_int") {
    KILN_ASSIGN_OR_RETURN(int64_t v, im.attr_int("value_int", 0));
    im.set_output_const(0, fold::i64_tensor(std::vector<int64_t>{v}, /*scalar=*/true));
  } else if (key == "value_ints") {
    KILN_ASSIGN_OR_RETURN(auto vs, im.attr_ints("value_ints"));
    im.set_output_const(0, fold::i64_tensor(vs));
  } else {
    return unsupported("Constant attribute '{}' is not supported", key);
  }
  return Status::Ok();
}

Status convert_shape(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec spec, im.input_spec(0));
  int64_t r = static_cast<int64_t>(spec.rank());
  KILN_ASSIGN_OR_RETURN(int64_t start, im.attr_int("start", 0));
  KILN_ASSIGN_OR_RETURN(int64_t end, im.attr_int("end", r));
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  DimsValue d;
  for (int64_t i = start; i < end; ++i) d.dims.push_back(spec.shape[static_cast<size_t>(i)]);
  im.set_output_dims(0, std::move(d));
  return Status::Ok();
}

// Size: the element count, a number when the shape is static, else symbolic shape arithmetic.
Status convert_size(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec spec, im.input_spec(0));
  Dim n(1);
  for (const Dim& d : spec.shape) n = dim_mul(n, d);
  DimsValue v;
  v.dims.push_back(n);
  v.scalar = true;
  im.set_output_dims(0, std::move(v));
  return Status::Ok();
}

Status convert_constant_of_shape(Importer& im) {
  Tensor value(DType::kF32, {1});
  if (im.has_attr("value")) {
    KILN_ASSIGN_OR_RETURN(value, im.attr_tensor("value"));
    if (value.numel() != 1) return invalid_argument("attribute 'value' must hold one element");
  }
  if (im.is_runtime_input(0)) {  // a shape the model computes: read when the program runs
    KILN_ASSIGN_OR_RETURN(Node * shape, im.input(0));
    KILN_ASSIGN_OR_RETURN(
        Node * n, im.call(OpId::kDynamicFull, {shape},
                          {{"fill_value", fold::get_f64(value, 0)}, {"dtype", value.dtype()}}));
    im.set_output(0, n);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(DimsValue shape, im.require_dims(0, "input 'input'"));
  std::vector<int64_t> size;
  for (Dim d : shape.dims) {
    if (!d.is_static()) {
      return unsupported("the shape '{}' has a symbolic dim {}; fix it with a dim value option",
                         im.node().input(0), d.to_string());
    }
    size.push_back(d.value());
  }
  KILN_RETURN_IF_ERROR(check_shape(size, "ConstantOfShape"));
  int64_t numel = checked_numel(size).value_or(0);
  if (numel <= im.options().fold_limit) {
    KILN_ASSIGN_OR_RETURN(Tensor t, fold::fill(size, value));
    im.set_output_const(0, std::move(t));
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(Node * n, im.call(OpId::kFull, {},
                                          {{"size", size}, {"fill_value", fold::get_f64(value, 0)},
                                           {"dtype", value.dtype()}}));
  im.set_output(0, n);
  return Status::Ok();
}

Status convert_range(Importer& im) {
  if (im.is_runtime_input(0) || im.is_runtime_input(1) || im.is_runtime_input(2)) {
    // Bounds the model computes: the length is known when the program runs.
    Node* in[3];
    for (size_t i = 0; i < 3; ++i) {
      KILN_ASSIGN_OR_RETURN(in[i], im.input(i));
    }
    KILN_ASSIGN_OR_RETURN(Node * n, im.call(OpId::kDynamicArange, {in[0], in[1], in[2]}));
    im.set_output(0, n);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(Tensor start, im.require_const(0, "input 'start'"));
  KILN_ASSIGN_OR_RETURN(Tensor limit, im.require_const(1, "input 'limit'"));
  KILN_ASSIGN_OR_RETURN(Tensor delta, im.require_const(2, "input 'delta'"));
  KILN_ASSIGN_OR_RETURN(Tensor t, fold::range(start, limit, delta, im.options().fold_limit));
  im.set_output_const(0, std::move(t));
  return Status::Ok();
}

constexpr OpEntry kShapeOps[] = {
    {"Constant", convert_constant},
    {"Shape", convert_shape},
    {"Size", convert_size},
    {"ConstantOfShape", convert_constant_of_shape},
    {"Range", convert_range},
};

std::optional<BinOp> binop_of(std::string_view op) {
  if (op == "Add") return BinOp::kAdd;
  if (op == "Sub") return BinOp::kSub;
  if (op == "Mul") return BinOp::kMul;
  if (op == "Div") return BinOp::kDiv;
  if (op == "Equal") return BinOp::kEq;
  if (op == "Less") return BinOp::kLt;
  if (op == "Greater") return BinOp::kGt;
  if (op == "LessOrEqual") return BinOp::kLe;
  if (op == "GreaterOrEqual") return BinOp::kGe;
  if (op == "And") return BinOp::kAnd;
  if (op == "Or") return BinOp::kOr;
  return std::nullopt;
}

bool is_foldable(std::string_view op) {
  static constexpr std::string_view kOps[] = {"Gather", "Concat", "Unsqueeze", "Squeeze", "Slice",
                                              "Cast", "Not", "Where", "Expand", "Identity",
                                              "Reshape", "Transpose", "Flatten"};
  return binop_of(op).has_value() || std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

// Slice parameters resolved against `shape`: (starts, ends, axes, steps) with axes normalized.
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};

Result<SliceParams> slice_params(Importer& im, size_t rank) {
  SliceParams p;
  KILN_ASSIGN_OR_RETURN(p.starts, im.require_ints(1, "input 'starts'"));
  KILN_ASSIGN_OR_RETURN(p.ends, im.require_ints(2, "input 'ends'"));
  if (im.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(p.axes, im.require_ints(3, "input 'axes'"));
  } else {
    p.axes.resize(p.starts.size());
    std::iota(p.axes.begin(), p.axes.end(), 0);
  }
  if (im.has_input(4)) {
    KILN_ASSIGN_OR_RETURN(p.steps, im.require_ints(4, "input 'steps'"));
  } else {
    p.steps.assign(p.starts.size(), 1);
  }
  if (p.ends.size() != p.starts.size() || p.axes.size() != p.starts.size() ||
      p.steps.size() != p.starts.size()) {
    return invalid_argument("starts, ends, axes and steps differ in length");
  }
  for (int64_t& a : p.axes) KILN_RETURN_IF_ERROR(normalize_axis(&a, rank, "input 'axes'"));
  return p;
}

}  // namespace

std::span<const OpEntry> shape_ops() { return kShapeOps; }

// Tensor folding of the current node when every input is a constant.
static Result<std::optional<Tensor>> fold_constant(Importer& im, std::string_view op) {
  const int64_t limit = im.options().fold_limit;
  if (!im.has_input(0)) return std::optional<Tensor>();
  std::vector<Tensor> in;
  for (size_t i = 0; i < im.num_inputs(); ++i) {
    if (!im.has_input(i)) {
      in.emplace_back();
      continue;
    }
    const Tensor* t = im.const_input(i);
    if (t == nullptr) return std::optional<Tensor>();
    if (t->numel() > limit) return std::optional<Tensor>();
    in.push_back(*t);
  }
  if (in.empty()) return std::optional<Tensor>();
  if (auto b = binop_of(op)) {
    if (in.size() != 2) return invalid_argument("expected 2 inputs, got {}", in.size());
    if (in[0].dtype() != in[1].dtype()) {
      return invalid_argument("inputs have different dtypes ({} and {})", dtype_name(in[0].dtype()),
                              dtype_name(in[1].dtype()));
    }
    KILN_ASSIGN_OR_RETURN(auto shape, fold::broadcast_shapes(in[0].shape(), in[1].shape()));
    if (checked_numel(shape).value_or(INT64_MAX) > limit) return std::optional<Tensor>();
    KILN_ASSIGN_OR_RETURN(Tensor t, fold::binary(*b, in[0], in[1]));
    return std::optional<Tensor>(std::move(t));
  }
  const Tensor& x = in[0];
  Tensor out;
  if (op == "Identity") {
    out = x;
  } else if (op == "Not") {
    KILN_ASSIGN_OR_RETURN(out, fold::logical_not(x));
  } else if (op == "Where") {
    if (in.size() != 3) return invalid_argument("expected 3 inputs");
    KILN_ASSIGN_OR_RETURN(out, fold::where(in[0], in[1], in[2]));
  } else if (op == "Cast") {
    KILN_ASSIGN_OR_RETURN(int64_t to, im.attr_int("to", 0));
    auto dt = dtype_from_onnx(static_cast<int32_t>(to));
    if (!dt) return unsupported("attribute 'to': type {} is not supported", onnx_type_name(static_cast<int32_t>(to)));
    KILN_ASSIGN_OR_RETURN(out, fold::cast(x, *dt));
  } else if (op == "Gather") {
    KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
    if (in.size() != 2) return invalid_argument("expected 2 inputs");
    if (x.numel() > 0 && in[1].numel() > limit / std::max<int64_t>(1, x.numel())) {
      return std::optional<Tensor>();
    }
    KILN_ASSIGN_OR_RETURN(out, fold::gather(x, in[1], axis));
  } else if (op == "Concat") {
    KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
    KILN_ASSIGN_OR_RETURN(out, fold::concat(in, axis));
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    KILN_ASSIGN_OR_RETURN(auto axes, im.axes_attr_or_input("axes", 1, 13));
    std::vector<int64_t> shape;
    if (op == "Unsqueeze") {
      if (!axes) return invalid_argument("Unsqueeze needs axes");
      KILN_ASSIGN_OR_RETURN(shape, unsqueeze_shape(x.shape(), *axes));
    } else {
      KILN_ASSIGN_OR_RETURN(shape, squeeze_shape(x.shape(), axes));
    }
    out = x.reshaped(shape);
  } else if (op == "Slice") {
    KILN_ASSIGN_OR_RETURN(SliceParams p, slice_params(im, x.rank()));
    KILN_ASSIGN_OR_RETURN(out, fold::slice(x, p.starts, p.ends, p.axes, p.steps));
  } else if (op == "Expand") {
    if (in.size() != 2) return invalid_argument("expected 2 inputs");
    auto target = fold::to_i64_vector(in[1]);
    KILN_ASSIGN_OR_RETURN(auto shape, fold::broadcast_shapes(x.shape(), target));
    if (checked_numel(shape).value_or(INT64_MAX) > limit) return std::optional<Tensor>();
    KILN_ASSIGN_OR_RETURN(out, fold::expand(x, target));
  } else if (op == "Reshape") {
    if (in.size() != 2) return invalid_argument("expected 2 inputs");
    KILN_ASSIGN_OR_RETURN(int64_t allowzero, im.attr_int("allowzero", 0));
    KILN_ASSIGN_OR_RETURN(auto shape, resolve_reshape(x.shape(), fold::to_i64_vector(in[1]), allowzero != 0));
    out = x.reshaped(shape);
  } else if (op == "Flatten") {
    KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 1));
    int64_t r = static_cast<int64_t>(x.rank());
    if (axis < -r || axis > r) return invalid_argument("attribute 'axis' {} is out of range", axis);
    if (axis < 0) axis += r;
    int64_t a = 1, b = 1;
    for (int64_t d = 0; d < r; ++d) (d < axis ? a : b) *= x.dim(static_cast<size_t>(d));
    out = x.reshaped({a, b});
  } else if (op == "Transpose") {
    KILN_ASSIGN_OR_RETURN(auto perm, im.attr_ints("perm"));
    if (perm.empty()) {
      for (size_t d = x.rank(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    }
    KILN_ASSIGN_OR_RETURN(out, fold::transpose(x, perm));
  } else {
    return std::optional<Tensor>();
  }
  return std::optional<Tensor>(std::move(out));
}

// Folding of symbolic shape arithmetic; nullopt when the node is not of that kind.
static Result<std::optional<DimsValue>> fold_dims(Importer& im, std::string_view op) {
  std::vector<DimsValue> in;
  bool any_dims = false;
  for (size_t i = 0; i < im.num_inputs(); ++i) {
    if (!im.has_input(i)) {
      in.emplace_back();
      continue;
    }
    Value* v = im.input_value(i);
    if (v->dims) {
      any_dims = true;
      in.push_back(*v->dims);
      continue;
    }
    if (!v->constant || v->constant->rank() > 1 || !is_integral(v->constant->dtype())) {
      return std::optional<DimsValue>();
    }
    KILN_ASSIGN_OR_RETURN(DimsValue d, im.require_dims(i, "input"));
    in.push_back(std::move(d));
  }
  if (!any_dims) return std::optional<DimsValue>();
  const DimsValue& x = in[0];
  DimsValue out;
  out.dtype = x.dtype;
  auto fail = std::optional<DimsValue>();
  if (op == "Identity") {
    out = x;
  } else if (op == "Cast") {
    KILN_ASSIGN_OR_RETURN(int64_t to, im.attr_int("to", 0));
    auto dt = dtype_from_onnx(static_cast<int32_t>(to));
    if (!dt || !is_integral(*dt)) return fail;
    out = x;
    out.dtype = *dt;
  } else if (op == "Gather") {
    KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
    if (x.scalar || (axis != 0 && axis != -1) || in.size() != 2) return fail;
    const DimsValue& idx = in[1];
    int64_t n = static_cast<int64_t>(x.dims.size());
    out.scalar = idx.scalar;
    for (Dim j : idx.dims) {
      if (!j.is_static()) return fail;
      int64_t k = j.value();
      if (k < -n || k >= n) return out_of_range("Gather: index {} is out of range for {} dims", k, n);
      out.dims.push_back(x.dims[static_cast<size_t>(k < 0 ? k + n : k)]);
    }
  } else if (op == "Concat") {
    for (const DimsValue& p : in) {
      if (p.scalar) return fail;
      out.dims.insert(out.dims.end(), p.dims.begin(), p.dims.end());
    }
  } else if (op == "Unsqueeze") {
    if (!x.scalar) return fail;
    out.dims = x.dims;
  } else if (op == "Squeeze") {
    if (x.scalar || x.dims.size() != 1) return fail;
    out.dims = x.dims;
    out.scalar = true;
  } else if (op == "Reshape") {
    if (in.size() != 2) return fail;
    int64_t n = 1;
    for (Dim d : in[1].dims) {
      if (!d.is_static()) return fail;
      n *= d.value() == -1 ? static_cast<int64_t>(x.dims.size()) : d.value();
    }
    if (n != static_cast<int64_t>(x.dims.size()) || in[1].dims.size() > 1) return fail;
    out.dims = x.dims;
    out.scalar = in[1].dims.empty();
  } else if (op == "Slice") {
    if (x.scalar) return fail;
    KILN_ASSIGN_OR_RETURN(SliceParams p, slice_params(im, 1));
    std::vector<int64_t> iota(x.dims.size());
    std::iota(iota.begin(), iota.end(), 0);
    KILN_ASSIGN_OR_RETURN(Tensor picked, fold::slice(fold::i64_tensor(iota), p.starts, p.ends, p.axes, p.steps));
    for (int64_t k : fold::to_i64_vector(picked)) out.dims.push_back(x.dims[static_cast<size_t>(k)]);
  } else if (auto b = binop_of(op)) {
    if (in.size() != 2) return fail;
    const DimsValue& y = in[1];
    size_t n = std::max(x.dims.size(), y.dims.size());
    if ((x.dims.size() != n && x.dims.size() != 1) || (y.dims.size() != n && y.dims.size() != 1)) {
      return fail;
    }
    out.scalar = x.scalar && y.scalar;
    for (size_t k = 0; k < n; ++k) {
      Dim a = x.dims[x.dims.size() == 1 ? 0 : k], c = y.dims[y.dims.size() == 1 ? 0 : k];
      if (a.is_static() && c.is_static()) {
        KILN_ASSIGN_OR_RETURN(Tensor r, fold::binary(*b, fold::i64_tensor(std::vector<int64_t>{a.value()}),
                                                     fold::i64_tensor(std::vector<int64_t>{c.value()})));
        if (r.dtype() != DType::kI64) return fail;
        out.dims.push_back(fold::get_i64(r, 0));
      } else if (*b == BinOp::kMul && (a != Dim(0) && c != Dim(0))) {
        out.dims.push_back(a == Dim(1) ? c : c == Dim(1) ? a : dim_mul(a, c));
      } else if (*b == BinOp::kAdd) {
        out.dims.push_back(a == Dim(0) ? c : c == Dim(0) ? a : dim_add(a, c));
      } else if (*b == BinOp::kDiv && c == Dim(1)) {
        out.dims.push_back(a);
      } else {
        return fail;
      }
    }
  } else {
    return fail;
  }
  return std::optional<DimsValue>(std::move(out));
}

Result<bool> Importer::try_fold(const onnx::NodeProto& n) {
  if (!(n.domain().empty() || n.domain() == "ai.onnx") || !is_foldable(n.op_type())) return false;
  if (n.output_size() < 1) return false;
  if (n.op_type() == "Split") return false;
  KILN_ASSIGN_OR_RETURN(auto t, fold_constant(*this, n.op_type()));
  if (t) {
    set_output_const(0, std::move(*t));
    return true;
  }
  KILN_ASSIGN_OR_RETURN(auto d, fold_dims(*this, n.op_type()));
  if (d) {
    set_output_dims(0, std::move(*d));
    return true;
  }
  return false;
}

}  // namespace kiln::onnx_import
