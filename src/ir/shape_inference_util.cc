#include "shape_inference_util.h"

#include <algorithm>

#include "kiln/ir/fused_activation.h"

namespace kiln::shape {
namespace {

// Symbols printed inside a larger expression need parentheses unless they are identifiers.
std::string wrapped(const Dim& d) {
  std::string s = d.to_string();
  if (s.find_first_of("+-*/") != std::string::npos) return "(" + s + ")";
  return s;
}

int category(DType t) {
  if (t == DType::kBool) return 0;
  if (is_integral(t)) return 1;
  return 2;
}

}  // namespace

std::string_view arg_name(const Node& node, size_t i) {
  const auto& pos = node.schema().positional;
  return pos[std::min(i, pos.size() - 1)].name;
}

const TensorSpec& arg_spec(const Node& node, size_t i) { return node.arg(i).node()->spec(); }

const TensorSpec* opt_arg_spec(const Node& node, size_t i) {
  if (i >= node.num_args() || !node.arg(i).is_node()) return nullptr;
  return &node.arg(i).node()->spec();
}

Status single(SpecList* out, DType dtype, Shape shape) {
  out->clear();
  out->emplace_back(dtype, std::move(shape));
  return Status::Ok();
}

ScalarOperand scalar_arg(const Node& node, size_t i) {
  ScalarOperand op;
  op.name = arg_name(node, i);
  const Arg& a = node.arg(i);
  if (a.is_node()) {
    op.spec = &a.node()->spec();
  } else if (a.kind() == Arg::Kind::kFloat) {
    op.number_kind = DType::kF32;
  } else if (a.kind() == Arg::Kind::kBool) {
    op.number_kind = DType::kBool;
  }
  return op;
}

DType result_type(const std::vector<ScalarOperand>& ops) {
  std::optional<DType> tensors;
  int number_cat = -1;
  for (const auto& op : ops) {
    if (op.spec) {
      tensors = tensors ? promote_types(*tensors, op.spec->dtype) : op.spec->dtype;
    } else {
      number_cat = std::max(number_cat, category(op.number_kind));
    }
  }
  if (!tensors) {
    return number_cat == 2 ? DType::kF32 : number_cat == 1 ? DType::kI64 : DType::kBool;
  }
  // A number of a higher category lifts the result to that category's default type.
  if (number_cat > category(*tensors)) return number_cat == 2 ? DType::kF32 : DType::kI64;
  return *tensors;
}

Status normalize_dim(int64_t dim, size_t rank, std::string_view arg, int64_t* out,
                     bool scalar_ok) {
  auto r = static_cast<int64_t>(rank);
  if (r == 0 && scalar_ok) r = 1;
  if (r == 0) return invalid_argument("argument '{}': got {}, but the tensor has rank 0", arg, dim);
  if (dim < -r || dim >= r) {
    return invalid_argument("argument '{}': got {}, expected a dim in [{}, {}] for rank {}", arg,
                            dim, -r, r - 1, rank);
  }
  *out = dim < 0 ? dim + r : dim;
  return Status::Ok();
}

bool dims_compatible(const Dim& a, const Dim& b) {
  return a == b || !a.is_static() || !b.is_static();
}

Dim merge_dims(const Dim& a, const Dim& b) {
  if (!a.is_static() && b.is_static()) return b;
  return a;
}

Status broadcast_shapes(const Shape& a, const Shape& b,
                        std::string_view a_name, const TensorSpec& a_spec,
                        std::string_view b_name, const TensorSpec& b_spec,
                        Shape* out) {
  size_t n = std::max(a.size(), b.size());
  Shape res(n);
  for (size_t i = 0; i < n; ++i) {
    bool has_a = i < a.size(), has_b = i < b.size();
    const Dim* da = has_a ? &a[a.size() - 1 - i] : nullptr;
    const Dim* db = has_b ? &b[b.size() - 1 - i] : nullptr;
    Dim& r = res[n - 1 - i];
    if (!da) { r = *db; continue; }
    if (!db) { r = *da; continue; }
    if (*da == *db) { r = *da; continue; }
    if (da->is_static() && da->value() == 1) { r = *db; continue; }
    if (db->is_static() && db->value() == 1) { r = *da; continue; }
    if (da->is_static() && db->is_static()) {
      return invalid_argument(
          "argument '{}': got {}, which does not broadcast with {} {} (size {} vs {} at dim -{})",
          b_name, b_spec.to_string(), a_name, a_spec.to_string(), db->value(), da->value(), i + 1);
    }
    r = merge_dims(*da, *db);
  }
  *out = std::move(res);
  return Status::Ok();
}

Dim dim_offset(const Dim& d, int64_t k) {
  if (d.is_static()) return Dim(d.value() + k);
  if (k >= 0) return dim_add(d, Dim(k));
  return Dim::symbol(fmt::format("{}-{}", d.to_string(), -k));
}

Dim dim_affine_div(const Dim& d, int64_t add, int64_t div, int64_t add2) {
  if (d.is_static()) {
    int64_t num = d.value() + add;
    // Floor division also for negative numerators (callers then reject the result).
    int64_t q = num / div;
    if ((num % div != 0) && ((num < 0) != (div < 0))) --q;
    return Dim(q + add2);
  }
  if (div == 1) return dim_offset(d, add + add2);
  Dim inner = dim_offset(d, add);
  Dim q = Dim::symbol(fmt::format("{}/{}", wrapped(inner), div));
  return dim_offset(q, add2);
}

Dim dim_div(const Dim& d, int64_t k) {
  if (d.is_static()) return Dim(d.value() / k);
  if (k == 1) return d;
  return Dim::symbol(fmt::format("{}/{}", wrapped(d), k));
}

Dim dim_product(const Shape& dims, size_t begin, size_t end) {
  // Static factors are folded into one so [batch, 3, 4] gives "batch*12", not "batch*3*4".
  int64_t factor = 1;
  Dim sym(1);
  for (size_t i = begin; i < end; ++i) {
    if (dims[i].is_static()) factor *= dims[i].value();
    else sym = dim_mul(sym, dims[i]);
  }
  return dim_mul(sym, Dim(factor));
}

std::string shape_string(const Shape& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i].to_string();
  }
  return s + "]";
}

std::string ints_string(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

Status check_fused_activation(const Node& node) {
  const std::string& name = node.kwarg("activation").to_str();
  auto act = fused_activation_from_name(name);
  if (!act) {
    return invalid_argument("argument 'activation': got \"{}\", expected one of {}", name,
                            fmt::join(kFusedActivationNames, ", "));
  }
  const Arg& lo = node.kwarg("clamp_min");
  const Arg& hi = node.kwarg("clamp_max");
  if (*act != FusedActivation::kClamp) {
    if (!lo.is_none() || !hi.is_none()) {
      return invalid_argument("arguments 'clamp_min' / 'clamp_max': given with activation \"{}\" (only clamp "
                              "takes them)", name);
    }
    return Status::Ok();
  }
  if (lo.is_none() && hi.is_none()) {
    return invalid_argument("activation \"clamp\" needs clamp_min or clamp_max");
  }
  if (!lo.is_none() && !hi.is_none() && !(lo.to_float() <= hi.to_float())) {
    return invalid_argument("activation \"clamp\": clamp_min {} is above clamp_max {}", lo.to_float(), hi.to_float());
  }
  return Status::Ok();
}

Status expect_floating(std::string_view arg, const TensorSpec& s) {
  if (is_floating(s.dtype)) return Status::Ok();
  return invalid_argument("argument '{}': got {}, expected a floating-point tensor", arg,
                          s.to_string());
}

Status expect_numeric(std::string_view arg, const TensorSpec& s) {
  if (s.dtype != DType::kBool) return Status::Ok();
  return invalid_argument("argument '{}': got {}, expected a numeric (non-bool) tensor", arg,
                          s.to_string());
}

Status expect_index(std::string_view arg, const TensorSpec& s) {
  if (s.dtype == DType::kI64 || s.dtype == DType::kI32) return Status::Ok();
  return invalid_argument("argument '{}': got {}, expected an i32 or i64 index tensor", arg,
                          s.to_string());
}

Status expect_rank(std::string_view arg, const TensorSpec& s, size_t rank) {
  if (s.rank() == rank) return Status::Ok();
  return invalid_argument("argument '{}': got {}, expected rank {}", arg, s.to_string(), rank);
}

Status expect_same_dtype(std::string_view arg, const TensorSpec& s, std::string_view ref_name,
                         const TensorSpec& ref) {
  if (s.dtype == ref.dtype) return Status::Ok();
  return invalid_argument("argument '{}': got {}, expected dtype {} to match {} {}", arg,
                          s.to_string(), dtype_name(ref.dtype), ref_name, ref.to_string());
}

Status bounded_ints(std::string_view arg, const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x > kMaxAttr || x < -kMaxAttr) {
      return out_of_range("argument '{}': got {}, expected values within +-2^32", arg,
                          ints_string(v));
    }
  }
  return Status::Ok();
}

Status per_dim_ints(std::string_view arg, const std::vector<int64_t>& v, size_t n,
                    std::vector<int64_t>* out) {
  KILN_RETURN_IF_ERROR(bounded_ints(arg, v));
  if (v.size() == 1) {
    out->assign(n, v[0]);
    return Status::Ok();
  }
  if (v.size() == n) {
    *out = v;
    return Status::Ok();
  }
  return invalid_argument("argument '{}': got {} ({} values), expected 1 or {} values", arg,
                          ints_string(v), v.size(), n);
}

Status begin_end_padding(std::string_view arg, const std::vector<int64_t>& v, size_t n,
                         std::vector<int64_t>* begin, std::vector<int64_t>* end) {
  KILN_RETURN_IF_ERROR(bounded_ints(arg, v));
  if (v.size() == 2 * n && n > 1) {
    begin->assign(v.begin(), v.begin() + static_cast<ptrdiff_t>(n));
    end->assign(v.begin() + static_cast<ptrdiff_t>(n), v.end());
  } else if (v.size() == 1 || v.size() == n) {
    KILN_RETURN_IF_ERROR(per_dim_ints(arg, v, n, begin));
    *end = *begin;
  } else if (v.size() == 2 * n) {
    begin->assign(1, v[0]);
    end->assign(1, v[1]);
  } else {
    return invalid_argument("argument '{}': got {} ({} values), expected 1, {} or {} values",
                            arg, ints_string(v), v.size(), n, 2 * n);
  }
  for (size_t i = 0; i < n; ++i) {
    if ((*begin)[i] < 0 || (*end)[i] < 0) {
      return invalid_argument("argument '{}': got {}, expected non-negative values", arg,
                              ints_string(v));
    }
  }
  return Status::Ok();
}

Status expect_shape(std::string_view arg, const TensorSpec& s, const Shape& want) {
  bool ok = s.rank() == want.size();
  for (size_t i = 0; ok && i < want.size(); ++i) ok = dims_compatible(s.shape[i], want[i]);
  if (!ok) {
    return invalid_argument("argument '{}': got {}, expected shape {}", arg, s.to_string(),
                            shape_string(want));
  }
  return Status::Ok();
}

}  // namespace kiln::shape
