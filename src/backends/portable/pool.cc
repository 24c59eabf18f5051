// Pooling, resizing and pixel (un)shuffle over [N, C, H, W] (or [C, H, W]) tensors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

struct Pool {
  int64_t planes, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow;
};

Result<std::pair<int64_t, int64_t>> pair_of(const std::vector<int64_t>& v, int64_t dflt_a,
                                            int64_t dflt_b, const char* op, const char* what) {
  if (v.empty()) return std::make_pair(dflt_a, dflt_b);
  if (v.size() == 1) return std::make_pair(v[0], v[0]);
  if (v.size() == 2) return std::make_pair(v[0], v[1]);
  return invalid_argument("{}: '{}' needs 1 or 2 values, got {}", op, what, v.size());
}

int64_t pool_out(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t s, int64_t d, bool ceil) {
  int64_t span = in + pb + pe - d * (k - 1) - 1;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  // torch: the last window must start inside the input or the begin padding.
  if (ceil && (out - 1) * s >= in + pb) --out;
  return out;
}

Result<Pool> pool_geometry(const KernelArgs& args, const Tensor& x, bool with_dilation,
                           const char* op) {
  if (x.rank() != 3 && x.rank() != 4) {
    return invalid_argument("{}: input must be 3-D or 4-D, got [{}]", op, fmt::join(x.shape(), ", "));
  }
  Pool p{};
  size_t r = x.rank();
  p.h = x.dim(r - 2);
  p.w = x.dim(r - 1);
  p.planes = x.numel() / std::max<int64_t>(p.h * p.w, 1);
  if (p.h * p.w == 0) p.planes = dims_product(x.shape(), 0, r - 2);
  auto ks = args.attr_ints("kernel_size", {});
  if (ks.empty()) return invalid_argument("{}: 'kernel_size' is required", op);
  KILN_ASSIGN_OR_RETURN(auto k, pair_of(ks, 1, 1, op, "kernel_size"));
  KILN_ASSIGN_OR_RETURN(auto s, pair_of(args.attr_ints("stride", {}), k.first, k.second, op, "stride"));
  std::pair<int64_t, int64_t> d{1, 1};
  if (with_dilation) {
    KILN_ASSIGN_OR_RETURN(d, pair_of(args.attr_ints("dilation", {1}), 1, 1, op, "dilation"));
  }
  auto pad = args.attr_ints("padding", {0});
  if (pad.size() == 1) {
    p.pt = p.pb = p.pl = p.pr = pad[0];
  } else if (pad.size() == 2) {
    p.pt = p.pb = pad[0];
    p.pl = p.pr = pad[1];
  } else if (pad.size() == 4) {
    p.pt = pad[0];
    p.pl = pad[1];
    p.pb = pad[2];
    p.pr = pad[3];
  } else {
    return invalid_argument("{}: 'padding' has {} values; expected 1, 2 or 4", op, pad.size());
  }
  p.kh = k.first;
  p.kw = k.second;
  p.sh = s.first;
  p.sw = s.second;
  p.dh = d.first;
  p.dw = d.second;
  if (p.kh <= 0 || p.kw <= 0 || p.sh <= 0 || p.sw <= 0 || p.dh <= 0 || p.dw <= 0 || p.pt < 0 ||
      p.pl < 0 || p.pb < 0 || p.pr < 0) {
    return invalid_argument("{}: kernel, stride and dilation must be positive, padding >= 0", op);
  }
  bool ceil = args.attr_bool("ceil_mode", false);
  p.oh = pool_out(p.h, p.pt, p.pb, p.kh, p.sh, p.dh, ceil);
  p.ow = pool_out(p.w, p.pl, p.pr, p.kw, p.sw, p.dw, ceil);
  if (p.oh <= 0 || p.ow <= 0) return invalid_argument("{}: output size is not positive", op);
  return p;
}

std::vector<int64_t> spatial_shape(const Tensor& x, int64_t oh, int64_t ow) {
  std::vector<int64_t> s = x.shape();
  s[s.size() - 2] = oh;
  s[s.size() - 1] = ow;
  return s;
}

Status need_rank34(const Tensor& x, const char* op) {
  if (x.rank() != 3 && x.rank() != 4) {
    return invalid_argument("{}: input must be 3-D or 4-D, got [{}]", op, fmt::join(x.shape(), ", "));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// Max pooling of every plane of `x` into `out` (-inf, or the type's lowest value, where a window
// holds no element).
template <typename T>
void max_pool_planes(KernelContext& ctx, const Pool& p, const Tensor& x, Tensor& out) {
  const T* px = x.data_as<T>();
  T* po = writable<T>(out);
  const T lowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                        : std::numeric_limits<T>::lowest();
  // Valid kernel taps per output column, computed once, keep the inner loops branch-free.
  std::vector<int64_t> kx_lo(static_cast<size_t>(p.ow)), kx_hi(static_cast<size_t>(p.ow));
  for (int64_t ox = 0; ox < p.ow; ++ox) {
    int64_t x0 = ox * p.sw - p.pl;
    int64_t lo = 0, hi = p.kw;
    while (lo < hi && x0 + lo * p.dw < 0) ++lo;
    while (hi > lo && x0 + (hi - 1) * p.dw >= p.w) --hi;
    kx_lo[static_cast<size_t>(ox)] = lo;
    kx_hi[static_cast<size_t>(ox)] = hi;
  }
  ctx.parallel_for(p.planes, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const T* in = px + c * p.h * p.w;
      T* o = po + c * p.oh * p.ow;
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        T* orow = o + oy * p.ow;
        std::fill(orow, orow + p.ow, lowest);
        for (int64_t ki = 0; ki < p.kh; ++ki) {
          int64_t iy = oy * p.sh - p.pt + ki * p.dh;
          if (iy < 0 || iy >= p.h) continue;
          const T* irow = in + iy * p.w;
          for (int64_t ox = 0; ox < p.ow; ++ox) {
            const T* src = irow + ox * p.sw - p.pl;
            T m = orow[ox];
            for (int64_t kj = kx_lo[static_cast<size_t>(ox)]; kj < kx_hi[static_cast<size_t>(ox)]; ++kj) {
              T v = src[kj * p.dw];
              m = (v > m || v != v) ? v : m;  // NaN propagates, as in torch
            }
            orow[ox] = m;
          }
        }
      }
    }
  });
}

}  // namespace

Status max_pool2d(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "max_pool2d", "self"));
  Tensor x = args.tensor(0);
  KILN_ASSIGN_OR_RETURN(Pool p, pool_geometry(args, x, true, "max_pool2d"));
  Tensor out = ctx.allocate(x.dtype(), spatial_shape(x, p.oh, p.ow));
  switch (x.dtype()) {
    case DType::kF32:
      max_pool_planes<float>(ctx, p, x, out);
      break;
    case DType::kU8:
      max_pool_planes<uint8_t>(ctx, p, x, out);
      break;
    case DType::kI8:
      max_pool_planes<int8_t>(ctx, p, x, out);
      break;
    case DType::kI32:
      max_pool_planes<int32_t>(ctx, p, x, out);
      break;
    case DType::kI64:
      max_pool_planes<int64_t>(ctx, p, x, out);
      break;
    default:
      return unsupported("max_pool2d: dtype {} is not supported", dtype_name(x.dtype()));
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status avg_pool2d(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, "avg_pool2d", "self"));
  Tensor x = args.tensor(0);
  if (x.dtype() != DType::kF32) return unsupported("avg_pool2d: dtype {} is not supported", dtype_name(x.dtype()));
  KILN_ASSIGN_OR_RETURN(Pool p, pool_geometry(args, x, false, "avg_pool2d"));
  bool include_pad = args.attr_bool("count_include_pad", true);
  Tensor out = ctx.allocate(DType::kF32, spatial_shape(x, p.oh, p.ow));
  const float* px = x.data_as<float>();
  float* po = writable<float>(out);
  ctx.parallel_for(p.planes, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const float* in = px + c * p.h * p.w;
      float* o = po + c * p.oh * p.ow;
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        int64_t y0 = oy * p.sh - p.pt, y1 = std::min(y0 + p.kh, p.h + p.pb);
        int64_t pool_h = y1 - y0;
        int64_t ya = std::max<int64_t>(y0, 0), yb = std::min(y1, p.h);
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          int64_t x0 = ox * p.sw - p.pl, x1 = std::min(x0 + p.kw, p.w + p.pr);
          int64_t pool_w = x1 - x0;
          int64_t xa = std::max<int64_t>(x0, 0), xb = std::min(x1, p.w);
          float sum = 0;
          for (int64_t iy = ya; iy < yb; ++iy) {
            for (int64_t ix = xa; ix < xb; ++ix) sum += in[iy * p.w + ix];
          }
          int64_t count = include_pad ? pool_h * pool_w : (yb - ya) * (xb - xa);
          o[oy * p.ow + ox] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
        }
      }
    }
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status adaptive_avg_pool2d(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "adaptive_avg_pool2d";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  Tensor x = args.tensor(0);
  KILN_RETURN_IF_ERROR(need_rank34(x, op));
  if (x.dtype() != DType::kF32) return unsupported("{}: dtype {} is not supported", op, dtype_name(x.dtype()));
  auto os = args.attr_ints("output_size", {});
  if (os.empty() || os.size() > 2) return invalid_argument("{}: 'output_size' needs 1 or 2 values", op);
  int64_t h = x.dim(x.rank() - 2), w = x.dim(x.rank() - 1);
  int64_t oh = os[0], ow = os.size() == 2 ? os[1] : os[0];
  if (oh <= 0 || ow <= 0) return invalid_argument("{}: output size must be positive", op);
  int64_t planes = dims_product(x.shape(), 0, x.rank() - 2);
  Tensor out = ctx.allocate(DType::kF32, spatial_shape(x, oh, ow));
  const float* px = x.data_as<float>();
  float* po = writable<float>(out);
  for (int64_t c = 0; c < planes; ++c) {
    const float* in = px + c * h * w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      int64_t y0 = oy * h / oh, y1 = ((oy + 1) * h + oh - 1) / oh;
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t x0 = ox * w / ow, x1 = ((ox + 1) * w + ow - 1) / ow;
        float sum = 0;
        for (int64_t iy = y0; iy < y1; ++iy) {
          for (int64_t ix = x0; ix < x1; ++ix) sum += in[iy * w + ix];
        }
        int64_t count = (y1 - y0) * (x1 - x0);
        po[(c * oh + oy) * ow + ox] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
      }
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

namespace {

// Output size and source scale (input / output, as torch computes it) for one axis.
struct Axis {
  int64_t out;
  double scale;
};

Result<std::pair<Axis, Axis>> resize_axes(const KernelArgs& args, const Tensor& x, bool align,
                                          const char* op) {
  int64_t h = x.dim(x.rank() - 2), w = x.dim(x.rank() - 1);
  auto size = args.attr_opt_ints("output_size");
  auto scales = args.attr_opt_floats("scales");
  Axis ah{}, aw{};
  if (size) {
    if (size->size() != 2) return invalid_argument("{}: 'output_size' needs 2 values", op);
    ah.out = (*size)[0];
    aw.out = (*size)[1];
  } else if (scales) {
    if (scales->size() != 2 || (*scales)[0] <= 0 || (*scales)[1] <= 0) {
      return invalid_argument("{}: 'scales' needs 2 positive values", op);
    }
    ah.out = static_cast<int64_t>(std::floor(static_cast<double>(h) * (*scales)[0]));
    aw.out = static_cast<int64_t>(std::floor(static_cast<double>(w) * (*scales)[1]));
  } else {
    return invalid_argument("{}: one of 'output_size' or 'scales' is required", op);
  }
  if (ah.out <= 0 || aw.out <= 0 || ah.out > (int64_t{1} << 24) || aw.out > (int64_t{1} << 24)) {
    return invalid_argument("{}: output size {}x{} is invalid", op, ah.out, aw.out);
  }
  auto scale_for = [&](int64_t in, int64_t out, int idx) {
    if (align) return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    if (scales && !size) return 1.0 / (*scales)[static_cast<size_t>(idx)];
    return static_cast<double>(in) / static_cast<double>(out);
  };
  ah.scale = scale_for(h, ah.out, 0);
  aw.scale = scale_for(w, aw.out, 1);
  return std::make_pair(ah, aw);
}

}  // namespace

Status upsample_nearest2d(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "upsample_nearest2d";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  const Tensor& x = args.tensor(0);
  KILN_RETURN_IF_ERROR(need_rank34(x, op));
  KILN_ASSIGN_OR_RETURN(auto axes, resize_axes(args, x, false, op));
  const auto& ah = axes.first;  // not a structured binding: the row lambda below captures them
  const auto& aw = axes.second;
  int64_t h = x.dim(x.rank() - 2), w = x.dim(x.rank() - 1);
  int64_t planes = dims_product(x.shape(), 0, x.rank() - 2);
  Tensor out = ctx.allocate(x.dtype(), spatial_shape(x, ah.out, aw.out));
  size_t es = dtype_size(x.dtype());
  std::vector<int64_t> src_x(static_cast<size_t>(aw.out));
  for (int64_t ox = 0; ox < aw.out; ++ox) {
    src_x[ox] = std::min(static_cast<int64_t>(std::floor(static_cast<double>(ox) * aw.scale)), w - 1);
  }
  std::vector<int64_t> src_y(static_cast<size_t>(ah.out));
  for (int64_t oy = 0; oy < ah.out; ++oy) {
    src_y[oy] = std::min(static_cast<int64_t>(std::floor(static_cast<double>(oy) * ah.scale)), h - 1);
  }
  const uint8_t* px = static_cast<const uint8_t*>(x.data());
  uint8_t* po = writable<uint8_t>(out);
  const size_t out_row = static_cast<size_t>(aw.out) * es;
  // Each output row gathers its input row once; a row that repeats the one above (upsampling)
  // is a copy of it. Planes are split over the context's threads.
  auto gather_row = [&](const uint8_t* row, uint8_t* orow) {
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* in = reinterpret_cast<const T*>(row);
      T* o = reinterpret_cast<T*>(orow);
      for (int64_t ox = 0; ox < aw.out; ++ox) o[ox] = in[src_x[ox]];
    });
  };
  ctx.parallel_for(planes, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      for (int64_t oy = 0; oy < ah.out; ++oy) {
        uint8_t* orow = po + ((c * ah.out + oy) * aw.out) * es;
        if (oy > 0 && src_y[oy] == src_y[oy - 1]) {
          std::memcpy(orow, orow - out_row, out_row);
        } else {
          gather_row(px + ((c * h + src_y[oy]) * w) * es, orow);
        }
      }
    }
  });
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status upsample_bilinear2d(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "upsample_bilinear2d";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  const Tensor& x = args.tensor(0);
  KILN_RETURN_IF_ERROR(need_rank34(x, op));
  if (x.dtype() != DType::kF32) return unsupported("{}: dtype {} is not supported", op, dtype_name(x.dtype()));
  bool align = args.attr_bool("align_corners", false);
  KILN_ASSIGN_OR_RETURN(auto axes, resize_axes(args, x, align, op));
  auto [ah, aw] = axes;
  int64_t h = x.dim(x.rank() - 2), w = x.dim(x.rank() - 1);
  int64_t planes = dims_product(x.shape(), 0, x.rank() - 2);
  Tensor out = ctx.allocate(DType::kF32, spatial_shape(x, ah.out, aw.out));
  struct Tap {
    int64_t i0, i1;
    float l1;
  };
  auto taps = [&](const Axis& a, int64_t in) {
    std::vector<Tap> t(static_cast<size_t>(a.out));
    for (int64_t o = 0; o < a.out; ++o) {
      double src = align ? static_cast<double>(o) * a.scale
                         : std::max(0.0, (static_cast<double>(o) + 0.5) * a.scale - 0.5);
      int64_t i0 = std::min(static_cast<int64_t>(src), in - 1);
      int64_t i1 = std::min(i0 + 1, in - 1);
      t[o] = {i0, i1, static_cast<float>(src - static_cast<double>(i0))};
    }
    return t;
  };
  auto ty = taps(ah, h), tx = taps(aw, w);
  const float* px = x.data_as<float>();
  float* po = writable<float>(out);
  for (int64_t c = 0; c < planes; ++c) {
    const float* in = px + c * h * w;
    for (int64_t oy = 0; oy < ah.out; ++oy) {
      const Tap& a = ty[oy];
      const float* r0 = in + a.i0 * w;
      const float* r1 = in + a.i1 * w;
      float* orow = po + (c * ah.out + oy) * aw.out;
      for (int64_t ox = 0; ox < aw.out; ++ox) {
        const Tap& b = tx[ox];
        float top = r0[b.i0] + (r0[b.i1] - r0[b.i0]) * b.l1;
        float bot = r1[b.i0] + (r1[b.i1] - r1[b.i0]) * b.l1;
        orow[ox] = top + (bot - top) * a.l1;
      }
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

namespace {

// Shared by pixel_shuffle (up = true) and pixel_unshuffle.
Status shuffle(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs, bool up) {
  const char* op = up ? "pixel_shuffle" : "pixel_unshuffle";
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "self"));
  const Tensor& x = args.tensor(0);
  if (x.rank() < 3) return invalid_argument("{}: input must be at least 3-D", op);
  int64_t r = args.attr_int(up ? "upscale_factor" : "downscale_factor", 1);
  size_t rk = x.rank();
  int64_t c = x.dim(rk - 3), h = x.dim(rk - 2), w = x.dim(rk - 1);
  if (r <= 0 || (up && c % (r * r) != 0) || (!up && (h % r != 0 || w % r != 0))) {
    return invalid_argument("{}: factor {} does not fit input [{}]", op, r, fmt::join(x.shape(), ", "));
  }
  std::vector<int64_t> shape = x.shape();
  int64_t oc = up ? c / (r * r) : c * r * r, oh = up ? h * r : h / r, ow = up ? w * r : w / r;
  shape[rk - 3] = oc;
  shape[rk - 2] = oh;
  shape[rk - 1] = ow;
  Tensor out = ctx.allocate(x.dtype(), shape);
  size_t es = dtype_size(x.dtype());
  int64_t batch = dims_product(x.shape(), 0, rk - 3);
  const uint8_t* px = static_cast<const uint8_t*>(x.data());
  uint8_t* po = writable<uint8_t>(out);
  // Small-channel layout: out[b, oc, oy, ox] with oy = y*r + i, ox = x*r + j, and in channel
  // (oc*r + i)*r + j (pixel_shuffle); the same map read backwards for pixel_unshuffle.
  int64_t sc = up ? oc : c, sh = up ? h : oh, sw = up ? w : ow;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t ch = 0; ch < sc; ++ch) {
      for (int64_t i = 0; i < r; ++i) {
        for (int64_t j = 0; j < r; ++j) {
          int64_t big_c = (ch * r + i) * r + j;
          for (int64_t y = 0; y < sh; ++y) {
            for (int64_t xx = 0; xx < sw; ++xx) {
              int64_t small_off = ((b * sc + ch) * sh * r + (y * r + i)) * sw * r + xx * r + j;
              int64_t big_off = ((b * sc * r * r + big_c) * sh + y) * sw + xx;
              if (up) {
                std::memcpy(po + small_off * es, px + big_off * es, es);
              } else {
                std::memcpy(po + big_off * es, px + small_off * es, es);
              }
            }
          }
        }
      }
    }
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace

Status pixel_shuffle(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return shuffle(ctx, args, outputs, true);
}
Status pixel_unshuffle(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return shuffle(ctx, args, outputs, false);
}

}  // namespace kiln::portable::k
