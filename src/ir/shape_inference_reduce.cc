// Shape inference: reductions and scans.
#include "shape_inference.h"
#include "shape_inference_util.h"

namespace kiln::shape {
namespace {

// Output shape of a reduction over the `dim` kwarg (None or [] reduces every dim, as torch).
Status reduce_shape(const Node& node, const TensorSpec& self, Shape* out) {
  const Arg& dim_arg = node.kwarg("dim");
  bool keepdim = node.kwarg_bool("keepdim");
  std::vector<bool> reduced(self.rank(), dim_arg.is_none());
  if (!dim_arg.is_none()) {
    const auto& dims = dim_arg.to_ints();
    if (dims.empty()) reduced.assign(self.rank(), true);
    std::vector<bool> seen(self.rank(), false);
    for (int64_t d : dims) {
      int64_t nd = 0;
      KILN_RETURN_IF_ERROR(normalize_dim(d, self.rank(), "dim", &nd, true));
      if (self.rank() == 0) continue;
      auto i = static_cast<size_t>(nd);
      if (seen[i]) {
        return invalid_argument("argument 'dim': got {}, dim {} appears more than once",
                                ints_string(dims), nd);
      }
      seen[i] = reduced[i] = true;
    }
  }
  out->clear();
  for (size_t i = 0; i < self.rank(); ++i) {
    if (!reduced[i]) out->push_back(self.shape[i]);
    else if (keepdim) out->push_back(Dim(1));
  }
  return Status::Ok();
}

Status reduce(const Node& node, DType dtype, SpecList* out) {
  Shape shape;
  KILN_RETURN_IF_ERROR(reduce_shape(node, arg_spec(node, 0), &shape));
  out->assign(1, TensorSpec(dtype, std::move(shape)));
  return Status::Ok();
}

// torch accumulates integer and bool sums in i64.
DType accumulate_type(DType t) { return is_floating(t) ? t : DType::kI64; }

}  // namespace

Status infer_reduce_float(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_floating("self", self));
  return reduce(node, self.dtype, out);
}

Status infer_reduce_sum(const Node& node, SpecList* out) {
  return reduce(node, accumulate_type(arg_spec(node, 0).dtype), out);
}

Status infer_reduce_same(const Node& node, SpecList* out) {
  return reduce(node, arg_spec(node, 0).dtype, out);
}

Status infer_argmax(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_numeric("self", self));
  const Arg& dim_arg = node.kwarg("dim");
  bool keepdim = node.kwarg_bool("keepdim");
  Shape shape;
  if (dim_arg.is_none()) {
    // Argmax of the flattened tensor; keepdim keeps every dim as 1.
    if (keepdim) shape.assign(self.rank(), Dim(1));
  } else {
    int64_t d = 0;
    KILN_RETURN_IF_ERROR(normalize_dim(dim_arg.to_int(), self.rank(), "dim", &d, true));
    for (size_t i = 0; i < self.rank(); ++i) {
      if (static_cast<int64_t>(i) != d) shape.push_back(self.shape[i]);
      else if (keepdim) shape.push_back(Dim(1));
    }
    if (self.rank() > 0) {
      const Dim& n = self.shape[static_cast<size_t>(d)];
      if (n.is_static() && n.value() == 0) {
        return invalid_argument("argument 'dim': got {}, but self {} is empty along it",
                                dim_arg.to_int(), self.to_string());
      }
    }
  }
  out->assign(1, TensorSpec(DType::kI64, std::move(shape)));
  return Status::Ok();
}

Status infer_topk(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_numeric("self", self));
  int64_t d = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &d));
  const int64_t k = node.kwarg_int("k");
  const Dim& n = self.shape[static_cast<size_t>(d)];
  if (k < 0 || (n.is_static() && k > n.value())) {
    return invalid_argument("argument 'k': got {}, expected 0 to the size of dim {} of self {}", k,
                            d, self.to_string());
  }
  Shape shape = self.shape;
  shape[static_cast<size_t>(d)] = Dim(k);
  out->clear();
  out->emplace_back(self.dtype, shape);
  out->emplace_back(DType::kI64, shape);
  return Status::Ok();
}

Status infer_cumsum(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  int64_t d = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &d, true));
  out->assign(1, TensorSpec(accumulate_type(self.dtype), self.shape));
  return Status::Ok();
}

}  // namespace kiln::shape
