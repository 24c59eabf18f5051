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

namespace {

// GridSample in 2-D as ONNX's reference (and torch's grid_sampler_2d) define it: a grid point
// (x, y) in [-1, 1] maps to a pixel position, nearest rounds it half to even, border clamps
// and reflection folds it into the image, and each tap outside the image reads zero (zeros),
// the nearest edge pixel (border) or its reflection (reflection).
struct GridSampler {
  const float* img;  // one [H, W] plane
  int64_t h, w;
  bool align_corners;
  enum class Pad { kZeros, kBorder, kReflection } pad;
  enum class Mode { kBilinear, kNearest, kBicubic } mode;

  double denormalize(double n, int64_t len) const {
    return align_corners ? (n + 1) / 2 * static_cast<double>(len - 1)
                         : ((n + 1) * static_cast<double>(len) - 1) / 2;
  }
  double low(int64_t) const { return align_corners ? 0.0 : -0.5; }
  double high(int64_t len) const {
    return align_corners ? static_cast<double>(len - 1) : static_cast<double>(len) - 0.5;
  }

  // Folds x into [lo, hi] by reflecting at the nearer edge until it lands inside.
  static double reflect(double x, double lo, double hi) {
    const double range = hi - lo;
    if (range <= 0) return lo;
    if (x >= lo && x <= hi) return x;
    // dx past the edge is k whole ranges and r: an even k ends at the same edge.
    const double dx = x < lo ? lo - x : x - hi;
    const double k = std::floor(dx / range), r = dx - k * range;
    const bool same_edge = std::fmod(k, 2.0) == 0;
    if (x < lo) return same_edge ? lo + r : hi - r;
    return same_edge ? hi - r : lo + r;
  }

  // The coordinate after border clamping or reflection (zeros leaves it as it is).
  double clip(double x, int64_t len) const {
    const double lo = low(len), hi = high(len);
    if (x >= lo && x <= hi) return x;
    if (pad == Pad::kBorder) return std::clamp(x, 0.0, static_cast<double>(len - 1));
    if (pad == Pad::kReflection) return reflect(x, lo, hi);
    return x;
  }

  // The index a tap at i reads, or -1 for zero.
  int64_t index(int64_t i, int64_t len) const {
    if (i >= 0 && i < len) return i;
    if (pad == Pad::kZeros) return -1;
    if (pad == Pad::kBorder) return std::clamp<int64_t>(i, 0, len - 1);
    const auto r = static_cast<int64_t>(reflect(static_cast<double>(i), low(len), high(len)));
    return std::clamp<int64_t>(r, 0, len - 1);
  }

  double at(int64_t y, int64_t x) const {
    const int64_t iy = index(y, h), ix = index(x, w);
    return iy < 0 || ix < 0 ? 0.0 : static_cast<double>(img[iy * w + ix]);
  }

  static void cubic_coeffs(double t, double c[4]) {
    constexpr double A = -0.75;
    const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
    c[0] = ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A;
    c[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
    c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
  }

  float sample(double gx, double gy) const {
    if (!std::isfinite(gx) || !std::isfinite(gy)) return 0;
    double x = denormalize(gx, w), y = denormalize(gy, h);
    if (mode == Mode::kNearest) {
      x = std::nearbyint(x);
      y = std::nearbyint(y);
    }
    // Far outside the image every tap reads the same as a few pixels out: bounded so the
    // integer conversions below stay defined.
    x = std::clamp(clip(x, w), -8.0 - static_cast<double>(w), 8.0 + static_cast<double>(w));
    y = std::clamp(clip(y, h), -8.0 - static_cast<double>(h), 8.0 + static_cast<double>(h));
    if (mode == Mode::kNearest)
      return static_cast<float>(at(static_cast<int64_t>(y), static_cast<int64_t>(x)));
    const double fx = std::floor(x), fy = std::floor(y);
    const auto x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
    const double tx = x - fx, ty = y - fy;
    if (mode == Mode::kBilinear) {
      const double top = (1 - tx) * at(y0, x0) + tx * at(y0, x0 + 1);
      const double bottom = (1 - tx) * at(y0 + 1, x0) + tx * at(y0 + 1, x0 + 1);
      return static_cast<float>((1 - ty) * top + ty * bottom);
    }
    double cx[4], cy[4];
    cubic_coeffs(tx, cx);
    cubic_coeffs(ty, cy);
    double acc = 0;
    for (int64_t i = 0; i < 4; ++i) {
      double row = 0;
      for (int64_t j = 0; j < 4; ++j) row += cx[j] * at(y0 - 1 + i, x0 - 1 + j);
      acc += cy[i] * row;
    }
    return static_cast<float>(acc);
  }
};

}  // namespace

Status grid_sample(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "grid_sample", "self"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, "grid_sample", "grid"));
  const Tensor& x = args.tensor(0);
  const Tensor& grid = args.tensor(1);
  if (x.rank() != 4 || grid.rank() != 4 || grid.dim(3) != 2 || grid.dim(0) != x.dim(0)) {
    return invalid_argument(
        "grid_sample: self {} and grid {}: expected [N, C, H, W] and [N, Ho, Wo, 2]",
        format_shape(x.dtype(), x.shape()), format_shape(grid.dtype(), grid.shape()));
  }
  const std::string mode_name = args.attr_str("mode", "bilinear");
  const std::string padding = args.attr_str("padding_mode", "zeros");
  GridSampler::Mode mode = GridSampler::Mode::kBilinear;
  if (mode_name == "nearest") {
    mode = GridSampler::Mode::kNearest;
  } else if (mode_name == "bicubic") {
    mode = GridSampler::Mode::kBicubic;
  } else if (mode_name != "bilinear") {
    return invalid_argument("grid_sample: mode '{}' (expected bilinear, nearest or bicubic)",
                            mode_name);
  }
  GridSampler::Pad pad = GridSampler::Pad::kZeros;
  if (padding == "border") {
    pad = GridSampler::Pad::kBorder;
  } else if (padding == "reflection") {
    pad = GridSampler::Pad::kReflection;
  } else if (padding != "zeros") {
    return invalid_argument("grid_sample: padding_mode '{}' (expected zeros, border or reflection)",
                            padding);
  }
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t ho = grid.dim(1), wo = grid.dim(2);
  Tensor out = ctx.allocate(DType::kF32, {n, c, ho, wo});
  const float* src = x.data_as<float>();
  const float* g = grid.data_as<float>();
  float* dst = out.mutable_data_as<float>();
  const bool align = args.attr_bool("align_corners", false);
  parallel_range(ctx, n * c, grain_for(ho * wo * 8), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t b = plane / c;
      GridSampler s{src + plane * h * w, h, w, align, pad, mode};
      const float* gp = g + b * ho * wo * 2;
      float* d = dst + plane * ho * wo;
      for (int64_t i = 0; i < ho * wo; ++i) d[i] = s.sample(gp[2 * i], gp[2 * i + 1]);
    }
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace kiln::portable::k
