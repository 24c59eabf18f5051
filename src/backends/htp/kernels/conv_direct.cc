// kiln's own conv loops: a generic grouped conv in int64 (the exact fallback) and an NHWC
// depthwise kernel (int32 accumulators when prepare proved they cannot overflow, else int64).
// Padding taps are skipped: they read zp_x, and (zp_x - zp_x) * w = 0.
#include "conv_engine.h"

namespace kiln::htp {

namespace {

template <typename T>
void direct_rows(const ConvEngine& e, const T* x, int64_t row_begin, int64_t row_end,
                 std::vector<int64_t>& acc, void* out) {
  const Conv2dParams& p = e.p;
  const int64_t cout = p.out_c, ow = e.ow;
  for (int64_t row = row_begin; row < row_end; ++row) {  // row = n * oh + oy
    const int64_t n = row / e.oh, oy = row % e.oh;
    std::fill(acc.begin(), acc.end(), 0);
    for (int64_t ox = 0; ox < ow; ++ox) {
      int64_t* a = acc.data() + ox * cout;
      for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
        const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
        if (iy < 0 || iy >= p.in_h) continue;
        for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
          const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
          if (ix < 0 || ix >= p.in_w) continue;
          const T* xp = x + ((n * p.in_h + iy) * p.in_w + ix) * p.in_c;
          const int32_t* wp = e.w.data() + (ky * p.kernel_w + kx) * e.cig * cout;
          for (int64_t g = 0; g < p.groups; ++g) {
            for (int64_t ic = 0; ic < e.cig; ++ic) {
              const int64_t xv = static_cast<int64_t>(xp[g * e.cig + ic]) - e.zx;
              const int32_t* wr = wp + ic * cout + g * e.cog;
              int64_t* ar = a + g * e.cog;
              for (int64_t oc = 0; oc < e.cog; ++oc) ar[oc] += xv * wr[oc];
            }
          }
        }
      }
    }
    e.stage.store64(acc.data(), ow, cout, out, row * ow);
  }
}

// Depthwise: output channel c reads input channel c / multiplier; weights [KH, KW, 1, Cout].
template <typename T, typename A>
[[gnu::always_inline]] inline void depthwise_row(const ConvEngine& e, const T* x, int64_t row,
                                                 A* acc) {
  const Conv2dParams& p = e.p;
  const int64_t cout = p.out_c, mult = e.cog, cin = p.in_c;
  const int64_t n = row / e.oh, oy = row % e.oh;
  const A zx = static_cast<A>(e.zx);
  for (int64_t ox = 0; ox < e.ow; ++ox) {
    A* a = acc + ox * cout;
    for (int64_t c = 0; c < cout; ++c) a[c] = 0;
    for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.in_h) continue;
      for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
        const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
        if (ix < 0 || ix >= p.in_w) continue;
        const T* xp = x + ((n * p.in_h + iy) * p.in_w + ix) * cin;
        const int32_t* wp = e.w.data() + (ky * p.kernel_w + kx) * cout;
        if (mult == 1) {
          for (int64_t c = 0; c < cout; ++c) a[c] += (static_cast<A>(xp[c]) - zx) * wp[c];
        } else {
          for (int64_t ic = 0; ic < cin; ++ic) {
            const A xv = static_cast<A>(xp[ic]) - zx;
            for (int64_t m = 0; m < mult; ++m) a[ic * mult + m] += xv * wp[ic * mult + m];
          }
        }
      }
    }
  }
}

template <typename T>
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) void depthwise_row_avx512(
    const ConvEngine& e, const T* x, int64_t row, int32_t* acc) {
  depthwise_row<T, int32_t>(e, x, row, acc);
}

template <typename T>
void depthwise_row_default(const ConvEngine& e, const T* x, int64_t row, int32_t* acc) {
  depthwise_row<T, int32_t>(e, x, row, acc);
}

}  // namespace

void ConvEngine::run_direct(const void* in, void* out) const {
  detail::dispatch_storage(in_dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    detail::parallel_for(p.threads, p.batch * oh, 1, [&](int64_t b, int64_t e) {
      std::vector<int64_t> acc(static_cast<size_t>(ow * p.out_c));
      direct_rows(*this, x, b, e, acc, out);
    });
  });
}

void ConvEngine::run_depthwise(const void* in, void* out) const {
  detail::dispatch_storage(in_dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    detail::parallel_for(p.threads, p.batch * oh, 1, [&](int64_t b, int64_t e) {
      if (depthwise_i32) {
        std::vector<int32_t> acc(static_cast<size_t>(ow * p.out_c));
        auto fn = detail::has_avx512() ? depthwise_row_avx512<T> : depthwise_row_default<T>;
        for (int64_t row = b; row < e; ++row) {
          fn(*this, x, row, acc.data());
          stage.store(acc.data(), ow, p.out_c, p.out_c, out, row * ow);
        }
        return;
      }
      std::vector<int64_t> acc(static_cast<size_t>(ow * p.out_c));
      for (int64_t row = b; row < e; ++row) {
        depthwise_row<T, int64_t>(*this, x, row, acc.data());
        stage.store64(acc.data(), ow, p.out_c, out, row * ow);
      }
    });
  });
}

}  // namespace kiln::htp
