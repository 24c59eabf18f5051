// ONNX Resize over any rank (the resize op), as ONNX's reference defines it: one axis at a time,
// each output index reading one (nearest), two (linear) or four (cubic) input indices with
// weights, indices clamped to the edge (the reference pads the input with its edge values), and
// tf_crop_and_resize's points outside the input taking extrapolation_value.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

constexpr int64_t kMaxResizeElements = int64_t{1} << 32;

struct Axis {
  int64_t in = 1, out = 1;
  double scale = 1;                   // ONNX's scale_factor: given, or out / in from sizes
  double roi_start = 0, roi_end = 1;  // tf_crop_and_resize
};

struct Options {
  std::string mode, coord, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  float extrapolation = 0;
};

// The input coordinate of output index x (ONNX's coordinate transformations; output_width is
// scale * in, a float, as in the reference).
double source_coord(const Options& o, double x, const Axis& a) {
  const double in = static_cast<double>(a.in), width = a.scale * in;
  if (o.coord == "asymmetric") return x / a.scale;
  if (o.coord == "align_corners") return width == 1 ? 0.0 : x * (in - 1) / (width - 1);
  if (o.coord == "pytorch_half_pixel") return width == 1 ? -0.5 : (x + 0.5) / a.scale - 0.5;
  if (o.coord == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(a.out) / width, center = in / 2;
    return center * (1 - adjustment) + (x + 0.5) / a.scale - 0.5;
  }
  if (o.coord == "tf_crop_and_resize") {
    const double span = (a.roi_end - a.roi_start) * (in - 1);
    const double at = width == 1 ? span / 2 : x * span / (width - 1);
    return at + a.roi_start * (in - 1);
  }
  return (x + 0.5) / a.scale - 0.5;  // half_pixel
}

// Keys's cubic convolution weights of the four points around a fraction r in (0, 1).
void cubic_weights(double r, double A, double w[4]) {
  const double s = r + 1, t = 1 - r, u = 2 - r;
  w[0] = ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
  w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
  w[2] = ((A + 2) * t - (A + 3)) * t * t + 1;
  w[3] = ((A * u - 5 * A) * u + 8 * A) * u - 4 * A;
}

// The taps of every output index of one axis: up to 4 (index, weight) pairs; outside[j] when
// tf_crop_and_resize's point j lies outside the input.
struct Taps {
  int n = 1;
  std::vector<int64_t> index;
  std::vector<float> weight;
  std::vector<uint8_t> outside;
};

Taps axis_taps(const Options& o, const Axis& a) {
  Taps t;
  t.n = o.mode == "nearest" ? 1 : o.mode == "linear" ? 2 : 4;
  const size_t n = static_cast<size_t>(t.n);
  t.index.assign(static_cast<size_t>(a.out) * n, 0);
  t.weight.assign(static_cast<size_t>(a.out) * n, 0.0f);
  t.outside.assign(static_cast<size_t>(a.out), 0);
  const int64_t last = a.in - 1;
  for (int64_t j = 0; j < a.out; ++j) {
    const double x = source_coord(o, static_cast<double>(j), a);
    int64_t* idx = &t.index[static_cast<size_t>(j) * n];
    float* w = &t.weight[static_cast<size_t>(j) * n];
    if (o.coord == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(last))) {
      t.outside[static_cast<size_t>(j)] = 1;
      continue;
    }
    const double fl = std::floor(x), r = x - fl;
    const int64_t x0 = static_cast<int64_t>(fl);
    if (r == 0) {  // on an input point: that point alone
      idx[0] = std::clamp<int64_t>(x0, 0, last);
      w[0] = 1;
      continue;
    }
    double ws[4] = {0, 0, 0, 0};
    int64_t first = x0;
    if (o.mode == "nearest") {
      bool up = o.nearest == "ceil" || (o.nearest == "round_prefer_floor" && r > 0.5) ||
                (o.nearest == "round_prefer_ceil" && r >= 0.5);
      first = up ? x0 + 1 : x0;
      ws[0] = 1;
    } else if (o.mode == "linear") {
      ws[0] = 1 - r;
      ws[1] = r;
    } else {
      first = x0 - 1;
      cubic_weights(r, o.cubic_a, ws);
    }
    double sum = 0;
    for (size_t k = 0; k < n; ++k) {
      const int64_t i = first + static_cast<int64_t>(k);
      if (o.exclude_outside && (i < 0 || i > last)) ws[k] = 0;
      sum += ws[k];
    }
    for (size_t k = 0; k < n; ++k) {
      idx[k] = std::clamp<int64_t>(first + static_cast<int64_t>(k), 0, last);
      w[k] = static_cast<float>(o.exclude_outside && sum != 0 ? ws[k] / sum : ws[k]);
    }
  }
  return t;
}

// Resamples `src` along `axis` (viewed as [outer, in, inner]) into `dst` ([outer, out, inner]).
void resample(KernelContext& ctx, const float* src, float* dst, int64_t outer, int64_t inner,
              const Axis& a, const Taps& t, float extrapolation) {
  const size_t n = static_cast<size_t>(t.n);
  ctx.parallel_for(outer, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const float* s = src + o * a.in * inner;
      float* d = dst + o * a.out * inner;
      for (int64_t j = 0; j < a.out; ++j) {
        float* row = d + j * inner;
        if (t.outside[static_cast<size_t>(j)]) {
          std::fill(row, row + inner, extrapolation);
          continue;
        }
        const int64_t* idx = &t.index[static_cast<size_t>(j) * n];
        const float* w = &t.weight[static_cast<size_t>(j) * n];
        const float* r0 = s + idx[0] * inner;
        for (int64_t i = 0; i < inner; ++i) row[i] = w[0] * r0[i];
        for (size_t k = 1; k < n; ++k) {
          if (w[k] == 0) continue;
          const float* rk = s + idx[k] * inner;
          for (int64_t i = 0; i < inner; ++i) row[i] += w[k] * rk[i];
        }
      }
    }
  });
}

}  // namespace

Status resize(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "resize", "self"));
  const Tensor& x = args.tensor(0);
  KILN_RETURN_IF_ERROR(need_f32(x, "resize", "self"));
  const size_t rank = x.rank();
  Options o;
  o.mode = args.attr_str("mode", "nearest");
  o.coord = args.attr_str("coordinate_transformation_mode", "half_pixel");
  o.nearest = args.attr_str("nearest_mode", "round_prefer_floor");
  o.cubic_a = args.attr_float("cubic_coeff_a", -0.75);
  o.exclude_outside = args.attr_bool("exclude_outside", false);
  o.extrapolation = static_cast<float>(args.attr_float("extrapolation_value", 0.0));
  std::vector<Axis> axes(rank);
  for (size_t d = 0; d < rank; ++d) axes[d].in = x.dim(d);
  if (args.has_tensor(2)) {  // sizes win over scales
    KILN_ASSIGN_OR_RETURN(auto sizes, int_values(args, 2, "resize", "sizes"));
    if (sizes.size() != rank) {
      return invalid_argument("resize: 'sizes' holds {} values, the input [{}] has rank {}",
                              sizes.size(), fmt::join(x.shape(), ", "), rank);
    }
    for (size_t d = 0; d < rank; ++d) {
      if (sizes[d] < 0 || (sizes[d] > 0 && axes[d].in == 0)) {
        return invalid_argument("resize: 'sizes' holds [{}], invalid for the input [{}]",
                                fmt::join(sizes, ", "), fmt::join(x.shape(), ", "));
      }
      axes[d].out = sizes[d];
      axes[d].scale =
          axes[d].in == 0 ? 1.0 : static_cast<double>(sizes[d]) / static_cast<double>(axes[d].in);
    }
  } else if (args.has_tensor(1)) {
    const Tensor& s = args.tensor(1);
    if (s.rank() != 1 || s.numel() != static_cast<int64_t>(rank)) {
      return invalid_argument("resize: 'scales' holds {} values, the input [{}] has rank {}",
                              s.numel(), fmt::join(x.shape(), ", "), rank);
    }
    for (size_t d = 0; d < rank; ++d) {
      const double v = s.scalar_at(static_cast<int64_t>(d));
      const double out = std::floor(static_cast<double>(axes[d].in) * v);
      if (!(v > 0) || !std::isfinite(v) || out > static_cast<double>(kMaxResizeElements)) {
        return invalid_argument("resize: scale {} of dim {} (size {}) is invalid", v, d,
                                axes[d].in);
      }
      axes[d].scale = v;
      axes[d].out = static_cast<int64_t>(out);
    }
  } else {
    return invalid_argument("resize: expected 'scales' or 'sizes'");
  }
  if (o.coord == "tf_crop_and_resize") {
    if (!args.has_tensor(3) || args.tensor(3).numel() != static_cast<int64_t>(2 * rank)) {
      return invalid_argument("resize: tf_crop_and_resize needs 'roi' with {} values", 2 * rank);
    }
    for (size_t d = 0; d < rank; ++d) {
      axes[d].roi_start = args.tensor(3).scalar_at(static_cast<int64_t>(d));
      axes[d].roi_end = args.tensor(3).scalar_at(static_cast<int64_t>(rank + d));
    }
  }
  std::vector<int64_t> shape(rank);
  for (size_t d = 0; d < rank; ++d) shape[d] = axes[d].out;
  auto n = checked_numel(shape);
  if (!n || *n > kMaxResizeElements) {
    return out_of_range("resize: the output [{}] has more than 2^32 elements",
                        fmt::join(shape, ", "));
  }
  const auto planned = args.attr_opt_ints("output_size");
  if (planned && *planned != shape) {
    return invalid_argument("resize: the output is [{}], but the program planned [{}]",
                            fmt::join(shape, ", "), fmt::join(*planned, ", "));
  }
  // Resample the axes that change, one after the other; the last writes the output, allocated
  // first so that it takes the output's planned memory.
  std::vector<size_t> changing;
  for (size_t d = 0; d < rank; ++d) {
    const Axis& a = axes[d];
    if (a.out != a.in || a.scale != 1.0 || o.coord == "tf_crop_and_resize") changing.push_back(d);
  }
  if (changing.empty()) {
    outputs->push_back(x.clone());
    return Status::Ok();
  }
  Tensor out = ctx.allocate(DType::kF32, shape);
  Tensor cur = x;
  std::vector<int64_t> cur_shape = x.shape();
  for (size_t k = 0; k < changing.size(); ++k) {
    const size_t d = changing[k];
    const Axis& a = axes[d];
    cur_shape[d] = a.out;
    Tensor next = k + 1 == changing.size() ? out : ctx.allocate(DType::kF32, cur_shape);
    if (next.numel() > 0 && a.in > 0) {
      const int64_t outer = dims_product(cur_shape, 0, d);
      const int64_t inner = dims_product(cur_shape, d + 1, rank);
      resample(ctx, cur.data_as<float>(), writable<float>(next), outer, inner, a, axis_taps(o, a),
               o.extrapolation);
    }
    cur = std::move(next);
  }
  outputs->push_back(std::move(cur));
  return Status::Ok();
}

}  // namespace kiln::portable::k
