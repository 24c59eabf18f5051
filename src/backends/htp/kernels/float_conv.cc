// Float NHWC conv2d (oneDNN f32) and pooling, with HTP's fp16 rounding as an option.
#include <cmath>
#include <limits>

#include "conv_engine.h"

namespace kiln::htp {

struct FloatConvState {
  Conv2dParams p;
  int64_t oh = 0, ow = 0;
  bool fp16 = false;
  dnnl::stream stream;
  dnnl::primitive prim;
  dnnl::memory::desc src_md, dst_md;
  dnnl::memory weights, bias;
};

FloatConv2d::FloatConv2d() = default;
FloatConv2d::FloatConv2d(FloatConv2d&&) noexcept = default;
FloatConv2d& FloatConv2d::operator=(FloatConv2d&&) noexcept = default;
FloatConv2d::~FloatConv2d() = default;

Result<FloatConv2d> FloatConv2d::prepare(const Conv2dParams& p, std::span<const float> weights,
                                         std::span<const float> bias, bool fp16) {
  const char* op = "float_conv2d";
  KILN_RETURN_IF_ERROR(detail::check_conv_geometry(op, p));
  const int64_t cig = p.in_c / p.groups, cog = p.out_c / p.groups, cout = p.out_c;
  const int64_t count = p.kernel_h * p.kernel_w * cig * cout;
  if (static_cast<int64_t>(weights.size()) != count) {
    return invalid_argument("{}: weights have {} values, expected {} (HWIO {}x{}x{}x{})", op,
                            weights.size(), count, p.kernel_h, p.kernel_w, cig, cout);
  }
  if (!bias.empty() && static_cast<int64_t>(bias.size()) != cout) {
    return invalid_argument("{}: bias has {} values, expected {} (one per output channel)", op,
                            bias.size(), cout);
  }
  auto st = std::make_unique<FloatConvState>();
  st->p = p;
  st->oh = p.out_h();
  st->ow = p.out_w();
  st->fp16 = fp16;
  std::vector<float> w(weights.begin(), weights.end());
  std::vector<float> b(static_cast<size_t>(cout), 0.0f);
  std::copy(bias.begin(), bias.end(), b.begin());
  if (fp16) {
    round_to_half(w.data(), w.size());
    round_to_half(b.data(), b.size());
  }
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  try {
    detail::OmpThreadsScope threads(p.threads);
    const dnnl::engine& eng = detail::cpu_engine();
    st->stream = dnnl::stream(eng);
    st->src_md = dnnl::memory::desc({p.batch, p.in_c, p.in_h, p.in_w}, dt::f32, tag::nhwc);
    st->dst_md = dnnl::memory::desc({p.batch, cout, st->oh, st->ow}, dt::f32, tag::nhwc);
    dnnl::memory::desc bias_md({cout}, dt::f32, tag::x);
    dnnl::memory::dims wdims, wstrides;
    const int64_t sh = p.kernel_w * cig * cout, sw = cig * cout;
    if (p.groups > 1) {
      wdims = {p.groups, cog, cig, p.kernel_h, p.kernel_w};
      wstrides = {cog, 1, cout, sh, sw};
    } else {
      wdims = {cout, cig, p.kernel_h, p.kernel_w};
      wstrides = {1, cout, sh, sw};
    }
    dnnl::memory::desc w_any(wdims, dt::f32, tag::any);
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, st->src_md, w_any,
        bias_md, st->dst_md, {p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1},
        {p.pad_top, p.pad_left}, {p.pad_bottom, p.pad_right});
    dnnl::convolution_forward::primitive_desc pd(d, eng);
    st->prim = dnnl::convolution_forward(pd);
    dnnl::memory user(dnnl::memory::desc(wdims, dt::f32, wstrides), eng, w.data());
    st->weights = dnnl::memory(pd.weights_desc(), eng);
    dnnl::reorder(user, st->weights).execute(st->stream, user, st->weights);
    st->bias = dnnl::memory(bias_md, eng);
    std::copy(b.begin(), b.end(), static_cast<float*>(st->bias.get_data_handle()));
    st->stream.wait();
  } catch (const dnnl::error& e) {
    return unsupported("{}: onednn: {}", op, e.what());
  }
  FloatConv2d conv;
  conv.state_ = std::move(st);
  return conv;
}

Status FloatConv2d::run(const float* input, float* output) {
  if (!state_) return invalid_argument("float_conv2d: run on an unprepared object");
  if (input == nullptr || output == nullptr) return invalid_argument("float_conv2d: null buffer");
  FloatConvState& st = *state_;
  try {
    detail::OmpThreadsScope threads(st.p.threads);
    const dnnl::engine& eng = detail::cpu_engine();
    dnnl::memory src(st.src_md, eng, const_cast<float*>(input));
    dnnl::memory dst(st.dst_md, eng, output);
    st.prim.execute(st.stream, {{DNNL_ARG_SRC, src},
                                {DNNL_ARG_WEIGHTS, st.weights},
                                {DNNL_ARG_BIAS, st.bias},
                                {DNNL_ARG_DST, dst}});
    st.stream.wait();
  } catch (const dnnl::error& e) {
    return internal_error("float_conv2d: onednn execution failed: {}", e.what());
  }
  if (st.fp16) {
    const int64_t n = st.p.batch * st.oh * st.ow * st.p.out_c;
    detail::parallel_for(st.p.threads, n, 65536, [&](int64_t b, int64_t e) {
      round_to_half(output + b, static_cast<size_t>(e - b));
    });
  }
  return Status::Ok();
}

std::array<int64_t, 4> FloatConv2d::output_shape() const {
  if (!state_) return {0, 0, 0, 0};
  return {state_->p.batch, state_->oh, state_->ow, state_->p.out_c};
}

// ---- pooling

Result<FloatPool2d> FloatPool2d::prepare(PoolKind kind, const Pool2dParams& p, bool fp16) {
  KILN_RETURN_IF_ERROR(detail::check_pool_geometry(
      kind == PoolKind::kMax ? "float_max_pool2d" : "float_avg_pool2d", p));
  FloatPool2d f;
  f.kind_ = kind;
  f.p_ = p;
  f.fp16_ = fp16;
  return f;
}

Status FloatPool2d::run(const float* in, float* out) const {
  if (in == nullptr || out == nullptr) return invalid_argument("float_pool2d: null buffer");
  const Pool2dParams& p = p_;
  const int64_t oh = p.out_h(), ow = p.out_w(), c = p.channels;
  if (oh < 1 || ow < 1) return invalid_argument("float_pool2d: run on an unprepared object");
  detail::parallel_for(p.threads, p.batch * oh, 1, [&](int64_t b, int64_t e) {
    std::vector<double> acc(static_cast<size_t>(c));
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / oh, oy = row % oh;
      const int64_t y0 = oy * p.stride_h - p.pad_top;
      const int64_t y1 = std::min(y0 + p.kernel_h, p.in_h + p.pad_bottom);
      const int64_t ys = std::max<int64_t>(y0, 0), ye = std::min(y1, p.in_h);
      for (int64_t ox = 0; ox < ow; ++ox) {
        const int64_t x0 = ox * p.stride_w - p.pad_left;
        const int64_t x1 = std::min(x0 + p.kernel_w, p.in_w + p.pad_right);
        const int64_t xs = std::max<int64_t>(x0, 0), xe = std::min(x1, p.in_w);
        float* dst = out + (row * ow + ox) * c;
        const int64_t valid = std::max<int64_t>(0, ye - ys) * std::max<int64_t>(0, xe - xs);
        if (valid == 0) {
          std::fill(dst, dst + c, 0.0f);
          continue;
        }
        if (kind_ == PoolKind::kMax) {
          std::fill(dst, dst + c, -std::numeric_limits<float>::infinity());
          for (int64_t iy = ys; iy < ye; ++iy) {
            for (int64_t ix = xs; ix < xe; ++ix) {
              const float* src = in + ((n * p.in_h + iy) * p.in_w + ix) * c;
              // NaN propagates (as torch's max pooling).
              for (int64_t ch = 0; ch < c; ++ch) {
                dst[ch] = (src[ch] > dst[ch] || std::isnan(src[ch])) ? src[ch] : dst[ch];
              }
            }
          }
          if (fp16_) round_to_half(dst, static_cast<size_t>(c));
          continue;
        }
        const int64_t count = p.count_include_pad ? (y1 - y0) * (x1 - x0) : valid;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t iy = ys; iy < ye; ++iy) {
          for (int64_t ix = xs; ix < xe; ++ix) {
            const float* src = in + ((n * p.in_h + iy) * p.in_w + ix) * c;
            for (int64_t ch = 0; ch < c; ++ch) acc[ch] += src[ch];
          }
        }
        for (int64_t ch = 0; ch < c; ++ch) {
          dst[ch] = static_cast<float>(acc[ch] / static_cast<double>(count));
        }
        if (fp16_) round_to_half(dst, static_cast<size_t>(c));
      }
    }
  });
  return Status::Ok();
}

}  // namespace kiln::htp
