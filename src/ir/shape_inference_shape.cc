// Shape inference: reshaping, data movement and indexing ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "shape_inference.h"
#include "shape_inference_util.h"

namespace kiln::shape {
namespace {

// A Python-style slice bound: None keeps the edge, negatives count from the end.
int64_t clamp_bound(int64_t v, int64_t n) {
  if (v < 0) v += n;
  return std::clamp<int64_t>(v, 0, n);
}

constexpr int64_t kOpenEnd = std::numeric_limits<int64_t>::max() / 2;

}  // namespace

Status infer_reshape(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  std::string_view arg = node.target() == OpId::kView ? "size" : "shape";
  const auto& size = node.kwarg(arg).to_ints();
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) {
      if (infer_at >= 0) {
        return invalid_argument("argument '{}': got {}, expected at most one -1", arg,
                                ints_string(size));
      }
      infer_at = static_cast<int>(i);
    } else if (size[i] < 0) {
      return invalid_argument("argument '{}': got {}, expected sizes >= 0 or a single -1", arg,
                              ints_string(size));
    } else if (__builtin_mul_overflow(known, size[i], &known)) {
      return out_of_range("argument '{}': got {}, whose element count overflows", arg,
                          ints_string(size));
    }
  }
  Shape shape(size.begin(), size.end());
  int64_t static_in = 1;
  Shape syms;
  for (const Dim& d : self.shape) {
    if (!d.is_static()) {
      syms.push_back(d);
    } else if (__builtin_mul_overflow(static_in, d.value(), &static_in)) {
      return out_of_range("argument 'self': got {}, whose element count overflows",
                          self.to_string());
    }
  }
  auto mismatch = [&]() {
    return invalid_argument("argument '{}': got {}, which does not fit the elements of self {}",
                            arg, ints_string(size), self.to_string());
  };
  if (infer_at >= 0 && known == 0) {
    return invalid_argument("argument '{}': got {}, where -1 is ambiguous next to a 0 size", arg,
                            ints_string(size));
  }
  if (syms.empty()) {
    if (infer_at < 0) {
      if (known != static_in) return mismatch();
    } else {
      if (static_in % known != 0) return mismatch();
      shape[static_cast<size_t>(infer_at)] = static_in / known;
    }
    return single(out, self.dtype, std::move(shape));
  }
  // Symbolic input: the symbols' product is unknown, so only divisibility can be checked.
  if (infer_at < 0) {
    if (static_in == 0 ? known != 0 : known % static_in != 0) return mismatch();
    return single(out, self.dtype, std::move(shape));
  }
  Dim sym = dim_product(syms, 0, syms.size());
  Dim inferred;
  if (static_in % known == 0) {
    inferred = dim_mul(sym, Dim(static_in / known));
  } else if (static_in != 0 && known % static_in == 0) {
    inferred = dim_div(sym, known / static_in);
  } else {
    inferred = dim_div(dim_mul(sym, Dim(static_in)), known);
  }
  shape[static_cast<size_t>(infer_at)] = inferred;
  return single(out, self.dtype, std::move(shape));
}

Status infer_permute(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const auto& dims = node.kwarg("dims").to_ints();
  if (dims.size() != self.rank()) {
    return invalid_argument("argument 'dims': got {}, expected {} dims for self {}",
                            ints_string(dims), self.rank(), self.to_string());
  }
  std::vector<bool> seen(self.rank(), false);
  Shape shape;
  for (int64_t d : dims) {
    int64_t nd = 0;
    KILN_RETURN_IF_ERROR(normalize_dim(d, self.rank(), "dims", &nd));
    if (seen[static_cast<size_t>(nd)]) {
      return invalid_argument("argument 'dims': got {}, dim {} appears more than once",
                              ints_string(dims), nd);
    }
    seen[static_cast<size_t>(nd)] = true;
    shape.push_back(self.shape[static_cast<size_t>(nd)]);
  }
  return single(out, self.dtype, std::move(shape));
}

Status infer_transpose(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  int64_t a = 0, b = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim0"), self.rank(), "dim0", &a, true));
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim1"), self.rank(), "dim1", &b, true));
  Shape shape = self.shape;
  if (!shape.empty()) std::swap(shape[static_cast<size_t>(a)], shape[static_cast<size_t>(b)]);
  return single(out, self.dtype, std::move(shape));
}

Status infer_squeeze(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const Arg& dim_arg = node.kwarg("dim");
  std::vector<bool> target(self.rank(), dim_arg.is_none());
  if (!dim_arg.is_none()) {
    for (int64_t d : dim_arg.to_ints()) {
      int64_t nd = 0;
      KILN_RETURN_IF_ERROR(normalize_dim(d, self.rank(), "dim", &nd, true));
      if (self.rank() > 0) target[static_cast<size_t>(nd)] = true;
    }
  }
  Shape shape;
  for (size_t i = 0; i < self.rank(); ++i) {
    // Only dims known to be 1 go; torch leaves other dims named in `dim` as they are.
    bool one = self.shape[i].is_static() && self.shape[i].value() == 1;
    if (!(target[i] && one)) shape.push_back(self.shape[i]);
  }
  return single(out, self.dtype, std::move(shape));
}

Status infer_unsqueeze(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  int64_t d = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank() + 1, "dim", &d));
  Shape shape = self.shape;
  shape.insert(shape.begin() + d, Dim(1));
  return single(out, self.dtype, std::move(shape));
}

Status infer_flatten(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  int64_t start = 0, end = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("start_dim"), self.rank(), "start_dim", &start, true));
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("end_dim"), self.rank(), "end_dim", &end, true));
  if (start > end) {
    return invalid_argument("argument 'start_dim': got {}, which comes after end_dim {}",
                            node.kwarg_int("start_dim"), node.kwarg_int("end_dim"));
  }
  if (self.rank() == 0) return single(out, self.dtype, {Dim(1)});
  auto s = static_cast<size_t>(start), e = static_cast<size_t>(end);
  Shape shape(self.shape.begin(), self.shape.begin() + start);
  shape.push_back(dim_product(self.shape, s, e + 1));
  shape.insert(shape.end(), self.shape.begin() + end + 1, self.shape.end());
  return single(out, self.dtype, std::move(shape));
}

Status infer_unflatten(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  if (self.rank() == 0) {
    return invalid_argument("argument 'self': got {}, expected rank >= 1", self.to_string());
  }
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &dim));
  const auto& sizes = node.kwarg("sizes").to_ints();
  KILN_RETURN_IF_ERROR(bounded_ints("sizes", sizes));
  const Dim& n = self.shape[static_cast<size_t>(dim)];
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer_at < 0) {
      infer_at = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return invalid_argument("argument 'sizes': got {}, expected sizes >= 0 and at most one -1",
                              ints_string(sizes));
    } else if (__builtin_mul_overflow(known, sizes[i], &known)) {
      return out_of_range("argument 'sizes': got {}, whose product overflows", ints_string(sizes));
    }
  }
  auto mismatch = [&]() {
    return invalid_argument("argument 'sizes': got {}, which does not split dim {} of self {}",
                            ints_string(sizes), dim, self.to_string());
  };
  if (sizes.empty() || known <= 0 || known > kMaxAttr) return mismatch();
  Shape split(sizes.begin(), sizes.end());
  if (infer_at >= 0) {
    if (n.is_static() && n.value() % known != 0) return mismatch();
    split[static_cast<size_t>(infer_at)] =
        n.is_static() ? Dim(n.value() / known) : dim_div(n, known);
  } else if (!n.is_static() || n.value() != known) {
    return mismatch();
  }
  Shape shape(self.shape.begin(), self.shape.begin() + dim);
  shape.insert(shape.end(), split.begin(), split.end());
  shape.insert(shape.end(), self.shape.begin() + dim + 1, self.shape.end());
  return single(out, self.dtype, std::move(shape));
}

Status infer_expand(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const auto& size = node.kwarg("size").to_ints();
  if (size.size() < self.rank()) {
    return invalid_argument("argument 'size': got {}, expected at least {} dims for self {}",
                            ints_string(size), self.rank(), self.to_string());
  }
  size_t lead = size.size() - self.rank();
  Shape shape;
  for (size_t i = 0; i < size.size(); ++i) {
    int64_t t = size[i];
    if (i < lead) {
      if (t < 0) {
        return invalid_argument("argument 'size': got {}, expected a size >= 0 for new dim {}",
                                ints_string(size), i);
      }
      shape.push_back(t);
      continue;
    }
    const Dim& d = self.shape[i - lead];
    if (t == -1) {
      shape.push_back(d);
    } else if (t < 0) {
      return invalid_argument("argument 'size': got {}, expected sizes >= 0 or -1",
                              ints_string(size));
    } else if (d == Dim(t) || d == Dim(1) || !d.is_static()) {
      shape.push_back(t);
    } else {
      return invalid_argument("argument 'size': got {}, which cannot expand dim {} of size {} "
                              "of self {}",
                              ints_string(size), i - lead, d.value(), self.to_string());
    }
  }
  return single(out, self.dtype, std::move(shape));
}

Status infer_cat(const Node& node, SpecList* out) {
  const auto& tensors = node.arg(0).nodes();
  if (tensors.empty()) return invalid_argument("argument 'tensors': got an empty list");
  const TensorSpec& first = tensors[0]->spec();
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), first.rank(), "dim", &dim));
  auto d = static_cast<size_t>(dim);
  Shape shape = first.shape;
  DType dtype = first.dtype;
  for (size_t t = 1; t < tensors.size(); ++t) {
    const TensorSpec& s = tensors[t]->spec();
    bool ok = s.rank() == first.rank();
    for (size_t i = 0; ok && i < s.rank(); ++i) {
      if (i != d) ok = dims_compatible(s.shape[i], shape[i]);
    }
    if (!ok) {
      return invalid_argument("argument 'tensors': element {} is {}, expected the shape of "
                              "element 0 {} except at dim {}",
                              t, s.to_string(), first.to_string(), dim);
    }
    for (size_t i = 0; i < s.rank(); ++i) {
      shape[i] = i == d ? dim_add(shape[i], s.shape[i]) : merge_dims(shape[i], s.shape[i]);
    }
    dtype = promote_types(dtype, s.dtype);
  }
  return single(out, dtype, std::move(shape));
}

Status infer_split(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &dim));
  const Dim& n = self.shape[static_cast<size_t>(dim)];
  const auto& sizes = node.kwarg("split_sizes").to_ints();
  if (sizes.empty()) return invalid_argument("argument 'split_sizes': got [], expected sizes");
  KILN_RETURN_IF_ERROR(bounded_ints("split_sizes", sizes));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) {
      return invalid_argument("argument 'split_sizes': got {}, expected sizes >= 0",
                              ints_string(sizes));
    }
    total += s;
  }
  std::vector<int64_t> pieces = sizes;
  // One size that is not the whole dim is torch.split's chunk size (last chunk may be short).
  if (sizes.size() == 1 && !(n.is_static() && n.value() == total)) {
    if (!n.is_static()) {
      return invalid_argument("argument 'split_sizes': got {}, but dim {} of self {} is "
                              "symbolic; give every piece's size",
                              ints_string(sizes), dim, self.to_string());
    }
    int64_t chunk = sizes[0];
    if (chunk == 0) {
      return invalid_argument("argument 'split_sizes': got [0], expected a positive chunk size");
    }
    pieces.clear();
    for (int64_t left = n.value(); left > 0; left -= chunk) pieces.push_back(std::min(chunk, left));
    if (pieces.empty()) pieces.push_back(0);
  } else if (n.is_static() && n.value() != total) {
    return invalid_argument("argument 'split_sizes': got {} (sum {}), expected sizes summing to "
                            "{} (dim {} of self {})",
                            ints_string(sizes), total, n.value(), dim, self.to_string());
  }
  out->clear();
  for (int64_t p : pieces) {
    Shape shape = self.shape;
    shape[static_cast<size_t>(dim)] = p;
    out->emplace_back(self.dtype, std::move(shape));
  }
  return Status::Ok();
}

Status infer_slice(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &dim));
  int64_t step = node.kwarg_int("step");
  if (step <= 0) return invalid_argument("argument 'step': got {}, expected >= 1", step);
  // Bounds past any real size behave like the open end; clamping keeps the arithmetic exact.
  step = std::min(step, kOpenEnd);
  const Arg& sa = node.kwarg("start");
  const Arg& ea = node.kwarg("end");
  int64_t start = sa.is_none() ? 0 : std::clamp(sa.to_int(), -kOpenEnd, kOpenEnd);
  int64_t end = ea.is_none() ? kOpenEnd : std::clamp(ea.to_int(), -kOpenEnd, kOpenEnd);
  const Dim& n = self.shape[static_cast<size_t>(dim)];
  Dim len;
  if (n.is_static()) {
    int64_t s = clamp_bound(start, n.value()), e = clamp_bound(end, n.value());
    len = e > s ? (e - s - 1) / step + 1 : 0;
  } else if (start >= 0 && end >= kOpenEnd) {
    len = dim_affine_div(n, -start + step - 1, step, 0);
  } else if (start >= 0 && end < 0) {
    len = dim_affine_div(n, end - start + step - 1, step, 0);
  } else if (start < 0 && end >= kOpenEnd) {
    // The last -start elements, assuming the symbol is at least that long.
    len = (-start + step - 1) / step;
  } else if (start >= 0 && end >= start) {
    // torch.export's assumption too: a static end is within the symbolic size.
    len = (end - start + step - 1) / step;
  } else if (start < 0 && end < 0) {
    len = end > start ? (end - start + step - 1) / step : 0;
  } else {
    return unsupported("argument 'start': slice [{}:{}] of symbolic dim {} has no known length",
                       start, end, n.to_string());
  }
  Shape shape = self.shape;
  shape[static_cast<size_t>(dim)] = len;
  return single(out, self.dtype, std::move(shape));
}

Status infer_select(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &dim));
  const Dim& n = self.shape[static_cast<size_t>(dim)];
  int64_t index = node.kwarg_int("index");
  if (n.is_static() && (index < -n.value() || index >= n.value())) {
    return invalid_argument("argument 'index': got {}, expected an index in [{}, {}] for dim {} "
                            "of self {}",
                            index, -n.value(), n.value() - 1, dim, self.to_string());
  }
  Shape shape = self.shape;
  shape.erase(shape.begin() + dim);
  return single(out, self.dtype, std::move(shape));
}

Status infer_index_select(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& index = arg_spec(node, 1);
  KILN_RETURN_IF_ERROR(expect_index("index", index));
  if (index.rank() > 1) {
    return invalid_argument("argument 'index': got {}, expected rank 0 or 1", index.to_string());
  }
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &dim, true));
  Shape shape = self.shape;
  if (!shape.empty()) shape[static_cast<size_t>(dim)] = index.rank() == 1 ? index.shape[0] : Dim(1);
  return single(out, self.dtype, std::move(shape));
}

Status infer_gather(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& index = arg_spec(node, 1);
  KILN_RETURN_IF_ERROR(expect_index("index", index));
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &dim, true));
  if (index.rank() != self.rank()) {
    return invalid_argument("argument 'index': got {}, expected rank {} to match self {}",
                            index.to_string(), self.rank(), self.to_string());
  }
  for (size_t i = 0; i < self.rank(); ++i) {
    const Dim& a = index.shape[i];
    const Dim& b = self.shape[i];
    if (static_cast<int64_t>(i) != dim && a.is_static() && b.is_static() && a.value() > b.value()) {
      return invalid_argument("argument 'index': got {}, expected size at most {} at dim {} "
                              "(self {})",
                              index.to_string(), b.value(), i, self.to_string());
    }
  }
  return single(out, self.dtype, index.shape);
}

namespace {

Status expect_reduce_name(const Node& node) {
  const std::string& r = node.kwarg("reduce").to_str();
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min") {
    return invalid_argument(
        "argument 'reduce': got \"{}\", expected \"none\", \"add\", \"mul\", "
        "\"max\" or \"min\"",
        r);
  }
  return Status::Ok();
}

}  // namespace

Status infer_scatter(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& index = arg_spec(node, 1);
  const TensorSpec& src = arg_spec(node, 2);
  KILN_RETURN_IF_ERROR(expect_index("index", index));
  KILN_RETURN_IF_ERROR(expect_same_dtype("src", src, "self", self));
  KILN_RETURN_IF_ERROR(expect_reduce_name(node));
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &dim, true));
  if (index.rank() != self.rank() || src.rank() != self.rank()) {
    return invalid_argument(
        "argument 'index': got {} with src {}, expected rank {} to match self {}",
        index.to_string(), src.to_string(), self.rank(), self.to_string());
  }
  for (size_t i = 0; i < self.rank(); ++i) {
    const Dim& a = index.shape[i];
    for (const Dim* b :
         {&src.shape[i], static_cast<int64_t>(i) != dim ? &self.shape[i] : nullptr}) {
      if (b && a.is_static() && b->is_static() && a.value() > b->value()) {
        return invalid_argument("argument 'index': got {}, larger than src {} or self {} at dim {}",
                                index.to_string(), src.to_string(), self.to_string(), i);
      }
    }
  }
  return single(out, self.dtype, self.shape);
}

Status infer_scatter_nd(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& indices = arg_spec(node, 1);
  const TensorSpec& updates = arg_spec(node, 2);
  KILN_RETURN_IF_ERROR(expect_index("indices", indices));
  KILN_RETURN_IF_ERROR(expect_same_dtype("updates", updates, "self", self));
  KILN_RETURN_IF_ERROR(expect_reduce_name(node));
  if (indices.rank() == 0 || !indices.shape.back().is_static() ||
      indices.shape.back().value() > static_cast<int64_t>(self.rank())) {
    return invalid_argument(
        "argument 'indices': got {}, expected a last dim of at most self's "
        "rank {}",
        indices.to_string(), self.rank());
  }
  Shape want(indices.shape.begin(), indices.shape.end() - 1);
  want.insert(want.end(), self.shape.begin() + indices.shape.back().value(), self.shape.end());
  KILN_RETURN_IF_ERROR(expect_shape("updates", updates, want));
  return single(out, self.dtype, self.shape);
}

Status infer_gather_nd(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& indices = arg_spec(node, 1);
  KILN_RETURN_IF_ERROR(expect_index("indices", indices));
  const int64_t b = node.kwarg_int("batch_dims");
  const size_t r = indices.rank();
  if (b < 0 || static_cast<size_t>(b) >= std::max<size_t>(r, 1) ||
      static_cast<size_t>(b) > self.rank()) {
    return invalid_argument(
        "argument 'batch_dims': got {}, expected a value below the rank of "
        "indices {} and self {}",
        b, indices.to_string(), self.to_string());
  }
  const size_t bd = static_cast<size_t>(b);
  if (!indices.shape.back().is_static() ||
      bd + static_cast<size_t>(indices.shape.back().value()) > self.rank()) {
    return invalid_argument(
        "argument 'indices': got {}, expected a last dim of at most {} (self {} "
        "past {} batch dims)",
        indices.to_string(), self.rank() - bd, self.to_string(), bd);
  }
  for (size_t i = 0; i < bd; ++i) {
    if (!dims_compatible(indices.shape[i], self.shape[i])) {
      return invalid_argument("argument 'indices': got {}, expected batch dim {} to match self {}",
                              indices.to_string(), i, self.to_string());
    }
  }
  Shape shape(indices.shape.begin(), indices.shape.end() - 1);
  shape.insert(shape.end(),
               self.shape.begin() + static_cast<std::ptrdiff_t>(bd) + indices.shape.back().value(),
               self.shape.end());
  return single(out, self.dtype, std::move(shape));
}

Status infer_pad(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const auto& pad = node.kwarg("pad").to_ints();
  const std::string& mode = node.kwarg("mode").to_str();
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular") {
    return invalid_argument("argument 'mode': got \"{}\", expected \"constant\", \"reflect\", "
                            "\"replicate\" or \"circular\"",
                            mode);
  }
  if (pad.size() % 2 != 0 || pad.size() / 2 > self.rank()) {
    return invalid_argument("argument 'pad': got {}, expected pairs for at most the {} dims of "
                            "self {}",
                            ints_string(pad), self.rank(), self.to_string());
  }
  KILN_RETURN_IF_ERROR(bounded_ints("pad", pad));
  Shape shape = self.shape;
  for (size_t p = 0; p < pad.size() / 2; ++p) {
    size_t d = self.rank() - 1 - p;
    int64_t before = pad[2 * p], after = pad[2 * p + 1];
    const Dim& n = self.shape[d];
    if (mode == "reflect" && n.is_static() && (before >= n.value() || after >= n.value())) {
      return invalid_argument("argument 'pad': got {}, expected reflect padding below the size "
                              "{} of dim {}",
                              ints_string(pad), n.value(), d);
    }
    if (mode != "constant" && (before < 0 || after < 0)) {
      return invalid_argument("argument 'pad': got {}, expected non-negative values for mode "
                              "\"{}\"",
                              ints_string(pad), mode);
    }
    shape[d] = dim_offset(n, before + after);
    if (shape[d].is_static() && shape[d].value() < 0) {
      return invalid_argument("argument 'pad': got {}, which leaves size {} at dim {} of self {}",
                              ints_string(pad), shape[d].value(), d, self.to_string());
    }
  }
  return single(out, self.dtype, std::move(shape));
}

Status infer_pixel_shuffle(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  int64_t r = node.kwarg_int("upscale_factor");
  if (r <= 0 || r > (1 << 16)) {
    return invalid_argument("argument 'upscale_factor': got {}, expected 1 to 65536", r);
  }
  if (self.rank() < 3) {
    return invalid_argument("argument 'self': got {}, expected rank at least 3", self.to_string());
  }
  Shape shape = self.shape;
  size_t c = self.rank() - 3;
  const Dim& ch = shape[c];
  if (ch.is_static() && ch.value() % (r * r) != 0) {
    return invalid_argument("argument 'upscale_factor': got {}, but channels {} of self {} are "
                            "not divisible by {}",
                            r, ch.value(), self.to_string(), r * r);
  }
  shape[c] = dim_div(ch, r * r);
  shape[c + 1] = dim_mul(shape[c + 1], Dim(r));
  shape[c + 2] = dim_mul(shape[c + 2], Dim(r));
  return single(out, self.dtype, std::move(shape));
}

Status infer_pixel_unshuffle(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  int64_t r = node.kwarg_int("downscale_factor");
  if (r <= 0 || r > (1 << 16)) {
    return invalid_argument("argument 'downscale_factor': got {}, expected 1 to 65536", r);
  }
  if (self.rank() < 3) {
    return invalid_argument("argument 'self': got {}, expected rank at least 3", self.to_string());
  }
  Shape shape = self.shape;
  size_t c = self.rank() - 3;
  for (size_t i = c + 1; i < c + 3; ++i) {
    if (shape[i].is_static() && shape[i].value() % r != 0) {
      return invalid_argument("argument 'downscale_factor': got {}, but dim {} of self {} is "
                              "not divisible by it",
                              r, i, self.to_string());
    }
    shape[i] = dim_div(shape[i], r);
  }
  shape[c] = dim_mul(shape[c], Dim(r * r));
  return single(out, self.dtype, std::move(shape));
}

Status infer_index_put(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const auto& indices = node.arg(1).nodes();
  const TensorSpec& values = arg_spec(node, 2);
  KILN_RETURN_IF_ERROR(expect_same_dtype("values", values, "self", self));
  if (indices.empty()) return invalid_argument("argument 'indices': got an empty list");
  size_t covered = 0;
  bool all_int = true;
  Shape index_shape;
  for (size_t i = 0; i < indices.size(); ++i) {
    const TensorSpec& ix = indices[i]->spec();
    if (ix.dtype == DType::kBool || ix.dtype == DType::kU8) {
      covered += std::max<size_t>(ix.rank(), 1);
      all_int = false;
    } else if (ix.dtype == DType::kI64 || ix.dtype == DType::kI32) {
      covered += 1;
      TensorSpec acc(ix.dtype, index_shape);
      KILN_RETURN_IF_ERROR(broadcast_shapes(index_shape, ix.shape, "indices", acc, "indices", ix,
                                            &index_shape));
    } else {
      return invalid_argument("argument 'indices': element {} is {}, expected an i32, i64 or "
                              "bool tensor",
                              i, ix.to_string());
    }
  }
  if (covered > self.rank()) {
    return invalid_argument("argument 'indices': got {} indexed dims, but self {} has rank {}",
                            covered, self.to_string(), self.rank());
  }
  if (all_int) {
    // values broadcast to the indexed result: the index shape, then the untouched dims.
    Shape target = index_shape;
    target.insert(target.end(), self.shape.begin() + static_cast<ptrdiff_t>(covered), self.shape.end());
    TensorSpec t(self.dtype, target);
    Shape b;
    KILN_RETURN_IF_ERROR(broadcast_shapes(target, values.shape, "indexed self", t, "values",
                                          values, &b));
    if (b.size() != target.size()) {
      return invalid_argument("argument 'values': got {}, expected a shape that broadcasts to {}",
                              values.to_string(), shape_string(target));
    }
  }
  return single(out, self.dtype, self.shape);
}

}  // namespace kiln::shape

// ---- Shapes known when the program runs.

namespace kiln::shape {
namespace {

// Dim `i` of a node's output that only the run states: a symbol named after the node.
Dim runtime_dim(const Node& node, size_t i) {
  return Dim::symbol(fmt::format("{}_d{}", node.name(), i));
}

// Checks that argument `i` is a 1-D integer tensor of static length (a shape, one value per
// output dim) and returns that length.
Result<size_t> shape_operand(const Node& node, size_t i) {
  const TensorSpec& s = arg_spec(node, i);
  if (!is_integral(s.dtype) || s.rank() != 1 || !s.shape[0].is_static() ||
      s.shape[0].value() > 64) {
    return invalid_argument(
        "argument '{}': got {}, expected a 1-D integer tensor of static "
        "length (at most 64)",
        arg_name(node, i), s.to_string());
  }
  return static_cast<size_t>(s.shape[0].value());
}

// Checks that argument `i` holds one integer (rank 0 or 1).
Status int_scalar_operand(const Node& node, size_t i) {
  const TensorSpec& s = arg_spec(node, i);
  const auto n = s.numel();
  if (!is_integral(s.dtype) || s.rank() > 1 || !n || *n != 1) {
    return invalid_argument("argument '{}': got {}, expected one integer", arg_name(node, i),
                            s.to_string());
  }
  return Status::Ok();
}

// `rank` dims the run states.
Shape runtime_shape(const Node& node, size_t rank) {
  Shape shape;
  for (size_t i = 0; i < rank; ++i) shape.push_back(runtime_dim(node, i));
  return shape;
}

}  // namespace

Status infer_dynamic_reshape(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_ASSIGN_OR_RETURN(size_t rank, shape_operand(node, 1));
  Shape shape;
  for (size_t i = 0; i < rank; ++i) shape.push_back(runtime_dim(node, i));
  return single(out, self.dtype, std::move(shape));
}

Status infer_dynamic_expand(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_ASSIGN_OR_RETURN(size_t n, shape_operand(node, 1));
  const size_t rank = std::max(n, self.rank());
  Shape shape;
  for (size_t i = 0; i < rank; ++i) {
    // A static dim of self other than 1 is the output's: the shape's value must be 1 or it.
    const size_t lead = rank - self.rank();
    const Dim* d = i >= lead ? &self.shape[i - lead] : nullptr;
    const bool kept = d != nullptr && d->is_static() && d->value() != 1;
    shape.push_back(kept ? *d : runtime_dim(node, i));
  }
  return single(out, self.dtype, std::move(shape));
}

Status infer_dynamic_full(const Node& node, SpecList* out) {
  KILN_ASSIGN_OR_RETURN(size_t rank, shape_operand(node, 0));
  const DType dtype = node.kwarg("dtype").to_dtype();
  const double fill = node.kwarg_float("fill_value");
  if (!is_floating(dtype) && (!std::isfinite(fill) || fill != std::floor(fill))) {
    return invalid_argument("argument 'fill_value': got {}, which {} cannot hold exactly", fill,
                            dtype_name(dtype));
  }
  Shape shape;
  for (size_t i = 0; i < rank; ++i) shape.push_back(runtime_dim(node, i));
  return single(out, dtype, std::move(shape));
}

Status infer_dynamic_arange(const Node& node, SpecList* out) {
  const TensorSpec& start = arg_spec(node, 0);
  for (size_t i = 0; i < 3; ++i) {
    const TensorSpec& s = arg_spec(node, i);
    const auto n = s.numel();
    if (s.dtype == DType::kBool || !n || *n != 1 || s.rank() > 1) {
      return invalid_argument("argument '{}': got {}, expected a numeric scalar", arg_name(node, i),
                              s.to_string());
    }
    if (s.dtype != start.dtype) {
      return invalid_argument("argument '{}': got {}, expected dtype {} as start has",
                              arg_name(node, i), s.to_string(), dtype_name(start.dtype));
    }
  }
  return single(out, start.dtype, Shape{runtime_dim(node, 0)});
}

Status infer_dynamic_tile(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_ASSIGN_OR_RETURN(size_t n, shape_operand(node, 1));
  if (n != self.rank()) {
    return invalid_argument("argument 'repeats': got {}, expected {} values (the rank of self {})",
                            arg_spec(node, 1).to_string(), self.rank(), self.to_string());
  }
  return single(out, self.dtype, runtime_shape(node, self.rank()));
}

Status infer_dynamic_slice(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_ASSIGN_OR_RETURN(size_t n, shape_operand(node, 1));
  for (size_t i = 2; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(size_t m, shape_operand(node, i));
    if (m != n) {
      return invalid_argument("argument '{}': got {}, expected {} values as starts has",
                              arg_name(node, i), arg_spec(node, i).to_string(), n);
    }
  }
  if (n > self.rank()) {
    return invalid_argument("argument 'starts': got {}, more axes than self {} has",
                            arg_spec(node, 1).to_string(), self.to_string());
  }
  return single(out, self.dtype, runtime_shape(node, self.rank()));
}

Status infer_dynamic_unsqueeze(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_ASSIGN_OR_RETURN(size_t n, shape_operand(node, 1));
  return single(out, self.dtype, runtime_shape(node, self.rank() + n));
}

Status infer_dynamic_squeeze(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_ASSIGN_OR_RETURN(size_t n, shape_operand(node, 1));
  if (n > self.rank()) {
    return invalid_argument("argument 'axes': got {}, more axes than self {} has",
                            arg_spec(node, 1).to_string(), self.to_string());
  }
  return single(out, self.dtype, runtime_shape(node, self.rank() - n));
}

Status infer_dynamic_sum(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_numeric("self", self));
  KILN_ASSIGN_OR_RETURN(size_t n, shape_operand(node, 1));
  const bool keepdim = node.kwarg_bool("keepdim");
  if (n > self.rank()) {
    return invalid_argument("argument 'axes': got {}, more axes than self {} has",
                            arg_spec(node, 1).to_string(), self.to_string());
  }
  if (n == 0) {  // no axes: every dim, or none
    if (node.kwarg_bool("noop_with_empty_axes")) return single(out, self.dtype, self.shape);
    return single(out, self.dtype, keepdim ? Shape(self.rank(), Dim(1)) : Shape());
  }
  return single(out, self.dtype, runtime_shape(node, keepdim ? self.rank() : self.rank() - n));
}

Status infer_dynamic_cumsum(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_numeric("self", self));
  KILN_RETURN_IF_ERROR(int_scalar_operand(node, 1));
  if (self.rank() == 0)
    return invalid_argument("argument 'self': got {}, expected rank >= 1", self.to_string());
  return single(out, self.dtype, self.shape);
}

Status infer_dynamic_topk(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  KILN_RETURN_IF_ERROR(expect_numeric("self", self));
  KILN_RETURN_IF_ERROR(int_scalar_operand(node, 1));
  int64_t dim = 0;
  KILN_RETURN_IF_ERROR(normalize_dim(node.kwarg_int("dim"), self.rank(), "dim", &dim));
  Shape shape = self.shape;
  shape[static_cast<size_t>(dim)] = runtime_dim(node, static_cast<size_t>(dim));
  out->clear();
  out->push_back(TensorSpec(self.dtype, shape));
  out->push_back(TensorSpec(DType::kI64, std::move(shape)));
  return Status::Ok();
}

Status infer_dynamic_pad(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const TensorSpec& pads = arg_spec(node, 1);
  std::vector<bool> padded(self.rank(), true);
  const Arg& axes = node.kwarg("axes");
  if (!axes.is_none()) {
    padded.assign(self.rank(), false);
    for (int64_t a : axes.to_ints()) {
      int64_t d = 0;
      KILN_RETURN_IF_ERROR(normalize_dim(a, self.rank(), "axes", &d));
      padded[static_cast<size_t>(d)] = true;
    }
  }
  const auto n = static_cast<int64_t>(std::count(padded.begin(), padded.end(), true));
  if (!is_integral(pads.dtype) || pads.rank() != 1 ||
      (pads.shape[0].is_static() && pads.shape[0].value() != 2 * n)) {
    return invalid_argument(
        "argument 'pads': got {}, expected {} integers (a begin and an end for "
        "each padded dim)",
        pads.to_string(), 2 * n);
  }
  if (const TensorSpec* v = opt_arg_spec(node, 2); v != nullptr && v->numel() != 1) {
    return invalid_argument("argument 'value': got {}, expected one value", v->to_string());
  }
  Shape shape = self.shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (padded[d]) shape[d] = runtime_dim(node, d);
  }
  return single(out, self.dtype, std::move(shape));
}

Status infer_nonzero(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  if (self.rank() == 0) {
    return invalid_argument("argument 'self': got {}, expected rank >= 1", self.to_string());
  }
  return single(out, DType::kI64, {runtime_dim(node, 0), static_cast<int64_t>(self.rank())});
}

Status infer_non_max_suppression(const Node& node, SpecList* out) {
  const TensorSpec& boxes = arg_spec(node, 0);
  const TensorSpec& scores = arg_spec(node, 1);
  if (boxes.rank() != 3 || boxes.shape[2] != Dim(4) || !is_floating(boxes.dtype)) {
    return invalid_argument("argument 'boxes': got {}, expected [batch, boxes, 4] floats",
                            boxes.to_string());
  }
  if (scores.rank() != 3 || scores.dtype != boxes.dtype) {
    return invalid_argument(
        "argument 'scores': got {}, expected [batch, classes, boxes] of the "
        "boxes' dtype",
        scores.to_string());
  }
  const Dim pairs[2][2] = {{boxes.shape[0], scores.shape[0]}, {boxes.shape[1], scores.shape[2]}};
  for (const auto& p : pairs) {
    if (p[0] != p[1] && p[0].is_static() && p[1].is_static()) {
      return invalid_argument(
          "argument 'scores': got {}, which differs from boxes {} in batch or "
          "box count",
          scores.to_string(), boxes.to_string());
    }
  }
  for (size_t i = 2; i < 5; ++i) {
    if (const TensorSpec* t = opt_arg_spec(node, i); t != nullptr && t->numel() != 1) {
      return invalid_argument("argument '{}': got {}, expected one value", arg_name(node, i),
                              t->to_string());
    }
  }
  int64_t box = node.kwarg_int("center_point_box");
  if (box != 0 && box != 1) {
    return invalid_argument("argument 'center_point_box': got {}, expected 0 or 1", box);
  }
  return single(out, DType::kI64, {runtime_dim(node, 0), 3});
}

Status infer_unique(const Node& node, SpecList* out) {
  const TensorSpec& self = arg_spec(node, 0);
  const Arg& dim = node.kwarg("dim");
  const Dim count = runtime_dim(node, 0);  // how many distinct values (or slices)
  Shape values = {count};
  Dim inverse = 1;
  for (const Dim& d : self.shape) inverse = dim_mul(inverse, d);
  if (!dim.is_none()) {
    int64_t d = 0;
    KILN_RETURN_IF_ERROR(normalize_dim(dim.to_int(), self.rank(), "dim", &d));
    values = self.shape;
    values[static_cast<size_t>(d)] = count;
    inverse = self.shape[static_cast<size_t>(d)];
  }
  out->clear();
  out->push_back(TensorSpec(self.dtype, values));
  out->push_back(TensorSpec(DType::kI64, {count}));
  out->push_back(TensorSpec(DType::kI64, {inverse}));
  out->push_back(TensorSpec(DType::kI64, {count}));
  return Status::Ok();
}

}  // namespace kiln::shape
