// Convolution (1-D/2-D, groups, dilation, asymmetric padding) and 2-D transposed convolution:
// im2col + sgemm, a direct GEMM for 1x1, a direct loop for depthwise.

#include <algorithm>
#include <array>
#include <cstring>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

struct Geometry {
  int64_t n, c, h, w;        // input (1-D: h = 1)
  int64_t o, kh, kw;         // output channels, kernel
  int64_t sh, sw, dh, dw;    // stride, dilation
  int64_t pt, pl, pb, pr;    // padding: top, left, bottom, right
  int64_t oh, ow;            // output spatial
  int64_t groups;
  bool one_d;
};

// Expands a per-spatial-dim list (1 value, or one per dim) to {h, w}.
Result<std::pair<int64_t, int64_t>> expand2(const std::vector<int64_t>& v, bool one_d,
                                            int64_t dflt, const char* op, const char* what) {
  if (v.empty()) return std::make_pair(dflt, dflt);
  if (one_d) {
    if (v.size() != 1) return invalid_argument("{}: '{}' needs 1 value for 1-D, got {}", op, what, v.size());
    return std::make_pair(int64_t{1}, v[0]);
  }
  if (v.size() == 1) return std::make_pair(v[0], v[0]);
  if (v.size() == 2) return std::make_pair(v[0], v[1]);
  return invalid_argument("{}: '{}' needs 1 or 2 values, got {}", op, what, v.size());
}

// Padding: one value, one per spatial dim, or [begin..., end...].
Status expand_padding(const std::vector<int64_t>& p, bool one_d, Geometry* g, const char* op) {
  size_t sp = one_d ? 1 : 2;
  std::vector<int64_t> b(sp, 0), e(sp, 0);
  if (p.empty()) {
  } else if (p.size() == 1) {
    std::fill(b.begin(), b.end(), p[0]);
    std::fill(e.begin(), e.end(), p[0]);
  } else if (p.size() == sp) {
    b = p;
    e = p;
  } else if (p.size() == 2 * sp) {
    b.assign(p.begin(), p.begin() + static_cast<long>(sp));
    e.assign(p.begin() + static_cast<long>(sp), p.end());
  } else {
    return invalid_argument("{}: 'padding' has {} values; expected 1, {} or {}", op, p.size(), sp, 2 * sp);
  }
  for (size_t i = 0; i < sp; ++i) {
    if (b[i] < 0 || e[i] < 0) return invalid_argument("{}: negative padding", op);
  }
  if (one_d) {
    g->pt = g->pb = 0;
    g->pl = b[0];
    g->pr = e[0];
  } else {
    g->pt = b[0];
    g->pl = b[1];
    g->pb = e[0];
    g->pr = e[1];
  }
  return Status::Ok();
}

Result<Geometry> conv_geometry(const KernelArgs& args, const Tensor& x, const Tensor& w,
                               bool transposed, const char* op) {
  Geometry g{};
  if (x.rank() != 3 && x.rank() != 4) {
    return invalid_argument("{}: input must be 3-D or 4-D, got [{}]", op, fmt::join(x.shape(), ", "));
  }
  if (transposed && x.rank() != 4) return invalid_argument("{}: input must be 4-D", op);
  if (w.rank() != x.rank()) {
    return invalid_argument("{}: weight [{}] must have the rank of input [{}]", op,
                            fmt::join(w.shape(), ", "), fmt::join(x.shape(), ", "));
  }
  g.one_d = x.rank() == 3;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.h = g.one_d ? 1 : x.dim(2);
  g.w = x.dim(x.rank() - 1);
  g.groups = args.attr_int("groups", 1);
  g.kh = g.one_d ? 1 : w.dim(2);
  g.kw = w.dim(w.rank() - 1);
  KILN_ASSIGN_OR_RETURN(auto s, expand2(args.attr_ints("stride", {1}), g.one_d, 1, op, "stride"));
  KILN_ASSIGN_OR_RETURN(auto d, expand2(args.attr_ints("dilation", {1}), g.one_d, 1, op, "dilation"));
  g.sh = s.first;
  g.sw = s.second;
  g.dh = d.first;
  g.dw = d.second;
  if (g.sh <= 0 || g.sw <= 0 || g.dh <= 0 || g.dw <= 0) return invalid_argument("{}: stride and dilation must be positive", op);
  KILN_RETURN_IF_ERROR(expand_padding(args.attr_ints("padding", {0}), g.one_d, &g, op));
  if (g.groups <= 0 || g.c % g.groups != 0) {
    return invalid_argument("{}: {} input channels do not split into {} groups", op, g.c, g.groups);
  }
  if (!transposed) {
    g.o = w.dim(0);
    if (w.dim(1) * g.groups != g.c || g.o % g.groups != 0) {
      return invalid_argument("{}: weight [{}] does not fit {} input channels in {} groups", op,
                              fmt::join(w.shape(), ", "), g.c, g.groups);
    }
    int64_t eh = g.h + g.pt + g.pb - g.dh * (g.kh - 1) - 1;
    int64_t ew = g.w + g.pl + g.pr - g.dw * (g.kw - 1) - 1;
    if (eh < 0 || ew < 0) return invalid_argument("{}: kernel is larger than the padded input", op);
    g.oh = eh / g.sh + 1;
    g.ow = ew / g.sw + 1;
  } else {
    if (w.dim(0) != g.c) {
      return invalid_argument("{}: weight [{}] does not fit {} input channels", op,
                              fmt::join(w.shape(), ", "), g.c);
    }
    g.o = w.dim(1) * g.groups;
    KILN_ASSIGN_OR_RETURN(auto op_pad, expand2(args.attr_ints("output_padding", {0}), false, 0, op, "output_padding"));
    g.oh = (g.h - 1) * g.sh - g.pt - g.pb + g.dh * (g.kh - 1) + op_pad.first + 1;
    g.ow = (g.w - 1) * g.sw - g.pl - g.pr + g.dw * (g.kw - 1) + op_pad.second + 1;
    if (g.oh <= 0 || g.ow <= 0) return invalid_argument("{}: output size is not positive", op);
  }
  return g;
}

// Range of output columns [lo, hi) whose input column ow*s - pad + k*d falls inside [0, w).
inline void valid_range(int64_t w, int64_t ow, int64_t s, int64_t pad, int64_t off, int64_t* lo,
                        int64_t* hi) {
  // iw = o*s + (off - pad); need 0 <= iw < w.
  int64_t base = off - pad;
  int64_t l = base >= 0 ? 0 : (-base + s - 1) / s;
  int64_t h = w - base <= 0 ? 0 : (w - base - 1) / s + 1;
  *lo = std::min(l, ow);
  *hi = std::max(*lo, std::min(h, ow));
}

void im2col(const float* x, const Geometry& g, int64_t cg, float* col) {
  const int64_t plane = g.oh * g.ow;
  for (int64_t c = 0; c < cg; ++c) {
    const float* xc = x + c * g.h * g.w;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        float* row = col + ((c * g.kh + ki) * g.kw + kj) * plane;
        int64_t lo, hi;
        valid_range(g.w, g.ow, g.sw, g.pl, kj * g.dw, &lo, &hi);
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          float* dst = row + oy * g.ow;
          int64_t iy = oy * g.sh - g.pt + ki * g.dh;
          if (iy < 0 || iy >= g.h) {
            std::memset(dst, 0, sizeof(float) * static_cast<size_t>(g.ow));
            continue;
          }
          const float* src = xc + iy * g.w + kj * g.dw - g.pl;
          std::fill(dst, dst + lo, 0.0f);
          if (g.sw == 1) {
            std::memcpy(dst + lo, src + lo, sizeof(float) * static_cast<size_t>(hi - lo));
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * g.sw];
          }
          std::fill(dst + hi, dst + g.ow, 0.0f);
        }
      }
    }
  }
}

// One channel of a depthwise convolution.
void depthwise_channel(const float* x, const float* wk, float bias, const Geometry& g, float* out) {
  std::fill(out, out + g.oh * g.ow, bias);
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    float* orow = out + oy * g.ow;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      int64_t iy = oy * g.sh - g.pt + ki * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      const float* irow = x + iy * g.w;
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float wv = wk[ki * g.kw + kj];
        int64_t lo, hi;
        valid_range(g.w, g.ow, g.sw, g.pl, kj * g.dw, &lo, &hi);
        const float* src = irow + kj * g.dw - g.pl;
        if (g.sw == 1) {
          for (int64_t ox = lo; ox < hi; ++ox) orow[ox] += wv * src[ox];
        } else if (g.sw == 2) {
          for (int64_t ox = lo; ox < hi; ++ox) orow[ox] += wv * src[2 * ox];
        } else {
          for (int64_t ox = lo; ox < hi; ++ox) orow[ox] += wv * src[ox * g.sw];
        }
      }
    }
  }
}

// Checks the input, weight and optional bias shared by both convolutions and works out the
// geometry; `bias` is null when absent.
Result<Geometry> conv_operands(const KernelArgs& args, bool transposed, const char* op,
                               const float** bias) {
  KILN_RETURN_IF_ERROR(need_tensor(args, 0, op, "input"));
  KILN_RETURN_IF_ERROR(need_tensor(args, 1, op, "weight"));
  const Tensor &x = args.tensor(0), &w = args.tensor(1);
  KILN_RETURN_IF_ERROR(need_f32(x, op, "input"));
  KILN_RETURN_IF_ERROR(need_f32(w, op, "weight"));
  KILN_ASSIGN_OR_RETURN(Geometry g, conv_geometry(args, x, w, transposed, op));
  *bias = nullptr;
  if (args.has_tensor(2)) {
    const Tensor& b = args.tensor(2);
    KILN_RETURN_IF_ERROR(need_f32(b, op, "bias"));
    if (b.numel() != g.o) return invalid_argument("{}: bias has {} elements, expected {}", op, b.numel(), g.o);
    *bias = b.data_as<float>();
  }
  return g;
}

// A per-spatial-dim list of three: one value for all dims, or one each.
Result<std::array<int64_t, 3>> per_dim3(const std::vector<int64_t>& v, const char* op,
                                        const char* what) {
  if (v.size() == 1) return std::array<int64_t, 3>{v[0], v[0], v[0]};
  if (v.size() == 3) return std::array<int64_t, 3>{v[0], v[1], v[2]};
  return invalid_argument("{}: '{}' needs 1 or 3 values for 3-D, got {}", op, what, v.size());
}

// Convolution over three spatial dims (D, H, W): per image and group, the input windows as
// columns (vol2col), then the group's GEMM onto the bias; the fused activation after.
Status convolution_3d(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "convolution";
  const Tensor &x = args.tensor(0), &w = args.tensor(1);
  KILN_RETURN_IF_ERROR(need_f32(x, op, "input"));
  KILN_RETURN_IF_ERROR(need_f32(w, op, "weight"));
  if (w.rank() != 5) {
    return invalid_argument("{}: weight [{}] must have the rank of input [{}]", op,
                            fmt::join(w.shape(), ", "), fmt::join(x.shape(), ", "));
  }
  const int64_t n = x.dim(0), c = x.dim(1), o = w.dim(0), groups = args.attr_int("groups", 1);
  if (groups <= 0 || c % groups != 0 || o % groups != 0 || w.dim(1) * groups != c) {
    return invalid_argument("{}: weight [{}] does not fit {} input channels in {} groups", op,
                            fmt::join(w.shape(), ", "), c, groups);
  }
  KILN_ASSIGN_OR_RETURN(auto stride, per_dim3(args.attr_ints("stride", {1}), op, "stride"));
  KILN_ASSIGN_OR_RETURN(auto dilation, per_dim3(args.attr_ints("dilation", {1}), op, "dilation"));
  std::vector<int64_t> pad = args.attr_ints("padding", {0});
  std::array<int64_t, 3> pb{}, pe{};
  if (pad.size() == 6) {
    std::copy(pad.begin(), pad.begin() + 3, pb.begin());
    std::copy(pad.begin() + 3, pad.end(), pe.begin());
  } else {
    KILN_ASSIGN_OR_RETURN(pb, per_dim3(pad, op, "padding"));
    pe = pb;
  }
  const float* bias = nullptr;
  if (args.has_tensor(2)) {
    const Tensor& b = args.tensor(2);
    KILN_RETURN_IF_ERROR(need_f32(b, op, "bias"));
    if (b.numel() != o)
      return invalid_argument("{}: bias has {} elements, expected {}", op, b.numel(), o);
    bias = b.data_as<float>();
  }
  KILN_ASSIGN_OR_RETURN(Epilogue epilogue, read_epilogue(args, op));
  std::array<int64_t, 3> in{}, k{}, out{};
  // For each dim, the input index each (kernel offset, output position) reads, or -1 (padding).
  std::array<std::vector<int64_t>, 3> source;
  for (size_t i = 0; i < 3; ++i) {
    in[i] = x.dim(2 + i);
    k[i] = w.dim(2 + i);
    if (stride[i] <= 0 || dilation[i] <= 0 || pb[i] < 0 || pe[i] < 0) {
      return invalid_argument("{}: stride and dilation must be positive, padding not negative", op);
    }
    int64_t e = in[i] + pb[i] + pe[i] - dilation[i] * (k[i] - 1) - 1;
    if (e < 0) return invalid_argument("{}: kernel is larger than the padded input", op);
    out[i] = e / stride[i] + 1;
    source[i].resize(static_cast<size_t>(k[i] * out[i]));
    for (int64_t a = 0; a < k[i]; ++a) {
      for (int64_t q = 0; q < out[i]; ++q) {
        int64_t v = q * stride[i] - pb[i] + a * dilation[i];
        source[i][static_cast<size_t>(a * out[i] + q)] = v >= 0 && v < in[i] ? v : -1;
      }
    }
  }
  Tensor y = ctx.allocate(DType::kF32, {n, o, out[0], out[1], out[2]});
  float* py = writable<float>(y);
  const float* px = x.data_as<float>();
  const float* pw = w.data_as<float>();
  const int64_t cg = c / groups, og = o / groups, volume = in[0] * in[1] * in[2];
  const int64_t plane = out[0] * out[1] * out[2], window = k[0] * k[1] * k[2], rows = cg * window;
  float* col = scratch_floats(static_cast<size_t>(rows * plane));
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* xg = px + (img * c + gi * cg) * volume;
      ctx.parallel_for(rows, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {  // row: (channel, kd, kh, kw)
          const int64_t ci = r / window, a = r / (k[1] * k[2]) % k[0], b = r / k[2] % k[1],
                        cc = r % k[2];
          const float* xc = xg + ci * volume;
          const int64_t* sd = source[0].data() + a * out[0];
          const int64_t* sh = source[1].data() + b * out[1];
          const int64_t* sw = source[2].data() + cc * out[2];
          float* dst = col + r * plane;
          for (int64_t q0 = 0; q0 < out[0]; ++q0) {
            for (int64_t q1 = 0; q1 < out[1]; ++q1) {
              const bool inside = sd[q0] >= 0 && sh[q1] >= 0;
              const float* row = xc + (sd[q0] * in[1] + sh[q1]) * in[2];
              for (int64_t q2 = 0; q2 < out[2]; ++q2) {
                *dst++ = inside && sw[q2] >= 0 ? row[sw[q2]] : 0.0f;
              }
            }
          }
        }
      });
      float* yg = py + (img * o + gi * og) * plane;
      for (int64_t oc = 0; oc < og; ++oc) {
        std::fill(yg + oc * plane, yg + (oc + 1) * plane, bias ? bias[gi * og + oc] : 0.0f);
      }
      sgemm(ctx, false, false, og, plane, rows, 1.0f, pw + gi * og * rows, rows, col, plane, 1.0f,
            yg, plane);
      apply_epilogue(ctx, epilogue, yg, og * plane);
    }
  }
  outputs->push_back(std::move(y));
  return Status::Ok();
}

}  // namespace

Status convolution(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "convolution";
  if (args.has_tensor(0) && args.has_tensor(1) && args.tensor(0).rank() == 5) {
    return convolution_3d(ctx, args, outputs);
  }
  const float* bias = nullptr;
  KILN_ASSIGN_OR_RETURN(Geometry g, conv_operands(args, false, op, &bias));
  KILN_ASSIGN_OR_RETURN(Epilogue epilogue, read_epilogue(args, op));
  const Tensor &x = args.tensor(0), &w = args.tensor(1);
  std::vector<int64_t> shape = g.one_d ? std::vector<int64_t>{g.n, g.o, g.ow}
                                       : std::vector<int64_t>{g.n, g.o, g.oh, g.ow};
  Tensor out = ctx.allocate(DType::kF32, shape);
  float* po = writable<float>(out);
  const float* px = x.data_as<float>();
  const float* pw = w.data_as<float>();
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow, ksize = cg * g.kh * g.kw;

  if (cg == 1 && og == 1) {
    ctx.parallel_for(g.n * g.c, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int64_t ch = i % g.c;
        depthwise_channel(px + i * in_plane, pw + ch * g.kh * g.kw, bias ? bias[ch] : 0.0f, g,
                          po + i * out_plane);
        apply_epilogue(epilogue, po + i * out_plane, out_plane);
      }
    });
    outputs->push_back(std::move(out));
    return Status::Ok();
  }
  const bool direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 &&
                      g.pl == 0 && g.pb == 0 && g.pr == 0;
  // One group of one image: im2col (none for a plain 1x1), the group's GEMM, bias, activation.
  // `split` spreads the work of this one group over ctx's threads; otherwise it runs on the
  // calling thread (a worker's share of whole groups).
  auto conv_group = [&](int64_t n, int64_t gi, bool split) {
    const float* xg = px + (n * g.c + gi * cg) * in_plane;
    float* og_out = po + (n * g.o + gi * og) * out_plane;
    const float* b_mat = xg;
    if (!direct) {
      float* col = scratch_floats(static_cast<size_t>(ksize * out_plane));
      if (split) {  // each channel writes its own rows of `col`
        ctx.parallel_for(cg, [&](int64_t begin, int64_t end) {
          im2col(xg + begin * in_plane, g, end - begin, col + begin * g.kh * g.kw * out_plane);
        });
      } else {
        im2col(xg, g, cg, col);
      }
      b_mat = col;
    }
    float beta = 0.0f;
    if (bias != nullptr) {
      for (int64_t oc = 0; oc < og; ++oc) {
        std::fill(og_out + oc * out_plane, og_out + (oc + 1) * out_plane, bias[gi * og + oc]);
      }
      beta = 1.0f;
    }
    const float* wg = pw + gi * og * ksize;
    if (split) {
      sgemm(ctx, false, false, og, out_plane, ksize, 1.0f, wg, ksize, b_mat, out_plane, beta, og_out, out_plane);
      apply_epilogue(ctx, epilogue, og_out, og * out_plane);
    } else {
      sgemm_serial(false, false, og, out_plane, ksize, 1.0f, wg, ksize, b_mat, out_plane, beta, og_out, out_plane);
      apply_epilogue(epilogue, og_out, og * out_plane);
    }
  };
  // Many groups (ResNeXt, RegNet, ShuffleNet): whole groups per thread, when they share out
  // evenly; one group's small product split over threads costs more than it saves.
  const int64_t units = g.n * g.groups, threads = ctx.num_threads();
  if (g.groups > 1 && threads > 1 && (units % threads == 0 || units >= 4 * threads)) {
    ctx.parallel_for(units, [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) conv_group(u / g.groups, u % g.groups, false);
    });
  } else {
    for (int64_t u = 0; u < units; ++u) conv_group(u / g.groups, u % g.groups, true);
  }
  outputs->push_back(std::move(out));
  return Status::Ok();
}

Status conv_transpose2d(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  const char* op = "conv_transpose2d";
  const float* bias = nullptr;
  KILN_ASSIGN_OR_RETURN(Geometry g, conv_operands(args, true, op, &bias));
  KILN_ASSIGN_OR_RETURN(Epilogue epilogue, read_epilogue(args, op));
  const Tensor &x = args.tensor(0), &w = args.tensor(1);
  Tensor out = ctx.allocate(DType::kF32, {g.n, g.o, g.oh, g.ow});
  float* po = writable<float>(out);
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow, rows = og * g.kh * g.kw;
  float* col = scratch_floats(static_cast<size_t>(rows * in_plane));
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      // col[og*kh*kw, h*w] = W_g^T @ X_g, then scatter-add each column into the output.
      const float* wg = w.data_as<float>() + gi * cg * rows;
      const float* xg = x.data_as<float>() + (n * g.c + gi * cg) * in_plane;
      sgemm(ctx, true, false, rows, in_plane, cg, 1.0f, wg, rows, xg, in_plane, 0.0f, col, in_plane);
      float* outg = po + (n * g.o + gi * og) * out_plane;
      for (int64_t oc = 0; oc < og; ++oc) {
        float* plane = outg + oc * out_plane;
        std::fill(plane, plane + out_plane, bias ? bias[gi * og + oc] : 0.0f);
        for (int64_t ki = 0; ki < g.kh; ++ki) {
          for (int64_t kj = 0; kj < g.kw; ++kj) {
            const float* crow = col + ((oc * g.kh + ki) * g.kw + kj) * in_plane;
            for (int64_t iy = 0; iy < g.h; ++iy) {
              int64_t oy = iy * g.sh - g.pt + ki * g.dh;
              if (oy < 0 || oy >= g.oh) continue;
              for (int64_t ix = 0; ix < g.w; ++ix) {
                int64_t ox = ix * g.sw - g.pl + kj * g.dw;
                if (ox < 0 || ox >= g.ow) continue;
                plane[oy * g.ow + ox] += crow[iy * g.w + ix];
              }
            }
          }
        }
      }
    }
  }
  apply_epilogue(ctx, epilogue, po, out.numel());
  outputs->push_back(std::move(out));
  return Status::Ok();
}

}  // namespace kiln::portable::k
