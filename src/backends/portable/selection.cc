// Kernels whose output size depends on the values of their inputs: nonzero,
// non_max_suppression and unique. Each states its size when it runs (the memory plan leaves
// such values to the kernel).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

// Whether element i of `x` is non-zero (a float's sign bit alone is zero).
template <typename T>
bool is_nonzero(const T* p, int64_t i, DType dtype) {
  if (dtype == DType::kF16 || dtype == DType::kBF16) {
    return (static_cast<uint16_t>(p[i]) & 0x7fff) != 0;
  }
  return p[i] != T{};
}

// One float of optional scalar input `i`, or `fallback` when it is not given.
Result<double> opt_scalar(const KernelArgs& args, size_t i, double fallback, const char* op,
                          const char* what) {
  if (!args.has_tensor(i)) return fallback;
  const Tensor& t = args.tensor(i);
  if (t.numel() != 1) {
    return invalid_argument("{}: '{}' is {}, expected one value", op, what,
                            format_shape(t.dtype(), t.shape()));
  }
  return t.scalar_at(0);
}

}  // namespace

Status nonzero(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "nonzero", "self"));
  const Tensor& x = args.tensor(0);
  const auto rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> hits;
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data_as<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (is_nonzero(p, i, x.dtype())) hits.push_back(i);
    }
  });
  Tensor out = ctx.allocate(DType::kI64, {static_cast<int64_t>(hits.size()), rank});
  auto* po = writable<int64_t>(out);
  for (int64_t flat : hits) {  // row-major coordinates, last dim fastest
    for (int64_t d = rank; d-- > 0;) {
      po[d] = flat % x.dim(static_cast<size_t>(d));
      flat /= x.dim(static_cast<size_t>(d));
    }
    po += rank;
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status non_max_suppression(KernelContext& ctx, const KernelArgs& args,
                           std::vector<Tensor>* outputs) {
  const char* op = "non_max_suppression";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "boxes"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, op, "scores"));
  const Tensor& boxes = args.tensor(0);
  const Tensor& scores = args.tensor(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 ||
      boxes.dim(0) != scores.dim(0) || boxes.dim(1) != scores.dim(2) ||
      boxes.dtype() != DType::kF32 || scores.dtype() != DType::kF32) {
    return invalid_argument(
        "{}: boxes {} and scores {}: expected f32 [batch, boxes, 4] and "
        "[batch, classes, boxes]",
        op, format_shape(boxes.dtype(), boxes.shape()),
        format_shape(scores.dtype(), scores.shape()));
  }
  KILN_ASSIGN_OR_RETURN(double max_per_class,
                        opt_scalar(args, 2, 0, op, "max_output_boxes_per_class"));
  KILN_ASSIGN_OR_RETURN(double iou_threshold, opt_scalar(args, 3, 0, op, "iou_threshold"));
  const bool has_score_threshold = args.has_tensor(4);
  KILN_ASSIGN_OR_RETURN(double score_threshold, opt_scalar(args, 4, 0, op, "score_threshold"));
  const bool centers = args.attr_int("center_point_box", 0) == 1;
  const int64_t batches = boxes.dim(0), classes = scores.dim(1), n = boxes.dim(1);
  const auto limit =
      static_cast<int64_t>(std::clamp<double>(max_per_class, 0, static_cast<double>(n)));

  // Each box as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2.
  std::vector<float> corners(static_cast<size_t>(batches * n * 4));
  const float* pb = boxes.data_as<float>();
  for (int64_t i = 0; i < batches * n; ++i) {
    const float* b = pb + i * 4;
    float* c = corners.data() + i * 4;
    if (centers) {  // (x_center, y_center, width, height)
      c[0] = b[1] - b[3] / 2, c[1] = b[0] - b[2] / 2, c[2] = b[1] + b[3] / 2,
      c[3] = b[0] + b[2] / 2;
    } else {
      c[0] = std::min(b[0], b[2]), c[1] = std::min(b[1], b[3]);
      c[2] = std::max(b[0], b[2]), c[3] = std::max(b[1], b[3]);
    }
  }
  // Suppressed when the IoU passes the threshold; boxes without area suppress nothing.
  auto suppresses = [&](const float* a, const float* b) {
    float ih = std::min(a[2], b[2]) - std::max(a[0], b[0]);
    float iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return false;
    float inter = ih * iw;
    float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    float uni = area_a + area_b - inter;
    if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
    return inter / uni > static_cast<float>(iou_threshold);
  };
  std::vector<int64_t> rows;
  std::vector<int64_t> order, kept;
  const float* ps = scores.data_as<float>();
  for (int64_t b = 0; b < batches && limit > 0; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = ps + (b * classes + c) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i) {
        if (!has_score_threshold || s[i] > static_cast<float>(score_threshold)) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= limit) break;
        const float* box = corners.data() + (b * n + i) * 4;
        bool keep = std::none_of(kept.begin(), kept.end(), [&](int64_t j) {
          return suppresses(corners.data() + (b * n + j) * 4, box);
        });
        if (keep) kept.push_back(i);
      }
      for (int64_t i : kept) rows.insert(rows.end(), {b, c, i});
    }
  }
  Tensor out = ctx.allocate(DType::kI64, {static_cast<int64_t>(rows.size() / 3), 3});
  if (!rows.empty())
    std::memcpy(writable<int64_t>(out), rows.data(), rows.size() * sizeof(int64_t));
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status unique(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "unique", "self"));
  const Tensor& x = args.tensor(0);
  const bool sorted = args.attr_bool("sorted", true);
  const auto dim_arg = args.attr_opt_int("dim");
  // Items: the elements of the flattened tensor, or the slices along `dim`, each `inner`
  // elements of `outer` runs.
  int64_t items = x.numel(), outer = 1, inner = 1, dim = 0;
  if (dim_arg) {
    KILN_ASSIGN_OR_RETURN(dim, norm_dim(*dim_arg, static_cast<int64_t>(x.rank()), "unique"));
    items = x.dim(static_cast<size_t>(dim));
    outer = dims_product(x.shape(), 0, static_cast<size_t>(dim));
    inner = dims_product(x.shape(), static_cast<size_t>(dim) + 1, x.rank());
  }
  const size_t es = dtype_size(x.dtype());
  const auto* px = static_cast<const uint8_t*>(x.data());
  // Element k of item i.
  auto at = [&](int64_t i, int64_t k) {
    return px + static_cast<size_t>((k / inner) * items * inner + i * inner + k % inner) * es;
  };
  const int64_t len = outer * inner;
  std::vector<int64_t> order(static_cast<size_t>(items));
  std::iota(order.begin(), order.end(), 0);
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto value = [&](int64_t i, int64_t k) {
      T v;
      std::memcpy(&v, at(i, k), sizeof(T));
      return v;
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      for (int64_t k = 0; k < len; ++k) {
        T va = value(a, k), vb = value(b, k);
        if (va != vb) return va < vb;
      }
      return false;
    });
  });
  auto same = [&](int64_t a, int64_t b) {
    for (int64_t k = 0; k < len; ++k) {
      if (std::memcmp(at(a, k), at(b, k), es) != 0) return false;
    }
    return true;
  };
  // Groups of equal items in sorted order; each group's first item is its first occurrence.
  std::vector<int64_t> first, counts, group_of(static_cast<size_t>(items));
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || !same(order[i - 1], order[i])) {
      first.push_back(order[i]);
      counts.push_back(0);
    }
    ++counts.back();
    group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(first.size()) - 1;
  }
  const auto u = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank(static_cast<size_t>(u));  // a group's place in the output
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {  // first-seen order
    std::vector<int64_t> by_first(static_cast<size_t>(u));
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) {
      return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)];
    });
    for (int64_t r = 0; r < u; ++r) rank[static_cast<size_t>(by_first[static_cast<size_t>(r)])] = r;
  }
  std::vector<int64_t> shape = {u};
  if (dim_arg) {
    shape = x.shape();
    shape[static_cast<size_t>(dim)] = u;
  }
  Tensor values = ctx.allocate(x.dtype(), shape);
  Tensor indices = ctx.allocate(DType::kI64, {u});
  Tensor inverse = ctx.allocate(DType::kI64, {items});
  Tensor count = ctx.allocate(DType::kI64, {u});
  auto* pv = writable<uint8_t>(values);
  auto* pi = writable<int64_t>(indices);
  auto* pc = writable<int64_t>(count);
  for (int64_t g = 0; g < u; ++g) {
    const int64_t r = rank[static_cast<size_t>(g)], item = first[static_cast<size_t>(g)];
    pi[r] = item;
    pc[r] = counts[static_cast<size_t>(g)];
    for (int64_t k = 0; k < len; ++k) {
      std::memcpy(pv + static_cast<size_t>((k / inner) * u * inner + r * inner + k % inner) * es,
                  at(item, k), es);
    }
  }
  auto* pinv = writable<int64_t>(inverse);
  for (int64_t i = 0; i < items; ++i)
    pinv[i] = rank[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
  outputs->push_back(std::move(values));
  outputs->push_back(std::move(indices));
  outputs->push_back(std::move(inverse));
  outputs->push_back(std::move(count));
  return Status::Ok();
}

}  // namespace kiln::portable::k
