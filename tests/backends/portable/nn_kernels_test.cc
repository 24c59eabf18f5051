// Conv, matmul, pooling, normalization and attention kernels against naive reference loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace kiln::portable::testing {
namespace {

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, groups;
  std::vector<int64_t> stride, padding, dilation;  // padding as [t, l, b, r]
};

std::vector<float> conv_ref(const Tensor& x, const Tensor& wt, const Tensor& b, const ConvCase& k,
                            int64_t oh, int64_t ow) {
  std::vector<float> out(static_cast<size_t>(k.n * k.o * oh * ow));
  int64_t cg = k.c / k.groups, og = k.o / k.groups;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = b.scalar_at(o);
          int64_t g = o / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                int64_t iy = y * k.stride[0] - k.padding[0] + i * k.dilation[0];
                int64_t ix = xx * k.stride[1] - k.padding[1] + j * k.dilation[1];
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                acc += x.scalar_at(((n * k.c + g * cg + ci) * k.h + iy) * k.w + ix) *
                       wt.scalar_at(((o * cg + ci) * k.kh + i) * k.kw + j);
              }
          out[static_cast<size_t>(((n * k.o + o) * oh + y) * ow + xx)] = static_cast<float>(acc);
        }
  return out;
}

TEST(PortableConv, MatchesNaiveLoops) {
  std::vector<ConvCase> cases = {
      {1, 3, 9, 9, 4, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {2, 4, 8, 7, 6, 3, 2, 2, {2, 1}, {0, 1, 2, 0}, {1, 2}},       // groups, asymmetric pad
      {1, 8, 10, 10, 8, 3, 3, 8, {1, 1}, {1, 1, 1, 1}, {1, 1}},     // depthwise
      {1, 8, 11, 11, 8, 3, 3, 8, {2, 2}, {1, 1, 1, 1}, {1, 1}},     // depthwise, stride 2
      {1, 4, 9, 9, 8, 3, 3, 4, {1, 1}, {2, 2, 2, 2}, {2, 2}},       // channel multiplier 2
      {2, 16, 5, 6, 7, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}},      // 1x1 direct GEMM
      {1, 3, 12, 12, 5, 5, 5, 1, {3, 3}, {2, 1, 0, 2}, {1, 1}},
  };
  uint64_t seed = 1;
  for (const auto& k : cases) {
    Tensor x = randn({k.n, k.c, k.h, k.w}, seed++);
    Tensor w = randn({k.o, k.c / k.groups, k.kh, k.kw}, seed++);
    Tensor b = randn({k.o}, seed++);
    int64_t oh = (k.h + k.padding[0] + k.padding[2] - k.dilation[0] * (k.kh - 1) - 1) / k.stride[0] + 1;
    int64_t ow = (k.w + k.padding[1] + k.padding[3] - k.dilation[1] * (k.kw - 1) - 1) / k.stride[1] + 1;
    std::vector<int64_t> pad = {k.padding[0], k.padding[1], k.padding[2], k.padding[3]};
    Tensor out = Call("convolution").in(x).in(w).in(b).attr("stride", k.stride).attr("padding", pad)
                     .attr("dilation", k.dilation).attr("groups", k.groups).run();
    EXPECT_LT(rel_err(out, conv_ref(x, w, b, k, oh, ow), {k.n, k.o, oh, ow}), 1e-5)
        << "case c=" << k.c << " groups=" << k.groups;
  }
}

TEST(PortableConv, OneDimensionalAndSymmetricPadding) {
  Tensor x = randn({2, 3, 20}, 7), w = randn({4, 3, 5}, 8), b = randn({4}, 9);
  ConvCase k{2, 3, 1, 20, 4, 1, 5, 1, {1, 2}, {0, 2, 0, 2}, {1, 1}};
  Tensor out = Call("convolution").in(x).in(w).in(b).attr("stride", std::vector<int64_t>{2})
                   .attr("padding", std::vector<int64_t>{2}).run();
  int64_t ow = (20 + 4 - 4 - 1) / 2 + 1;
  Tensor x4 = x.reshaped({2, 3, 1, 20}), w4 = w.reshaped({4, 3, 1, 5});
  EXPECT_LT(rel_err(out, conv_ref(x4, w4, b, k, 1, ow), {2, 4, ow}), 1e-5);
  // Without bias, 2-D with one symmetric padding value per dim.
  Tensor x2 = randn({1, 2, 6, 6}, 10), w2 = randn({3, 2, 3, 3}, 11);
  Tensor zero(DType::kF32, {3});
  Tensor o2 = Call("convolution").in(x2).in(w2).none().attr("padding", std::vector<int64_t>{1, 0}).run();
  ConvCase k2{1, 2, 6, 6, 3, 3, 3, 1, {1, 1}, {1, 0, 1, 0}, {1, 1}};
  EXPECT_LT(rel_err(o2, conv_ref(x2, w2, zero, k2, 6, 4), {1, 3, 6, 4}), 1e-5);
}

TEST(PortableConv, TransposedMatchesScatterReference) {
  Tensor x = randn({1, 4, 5, 4}, 21), w = randn({4, 3, 3, 3}, 22), b = randn({6}, 23);
  // groups 2: weight [C_in, C_out/groups, kh, kw] = [4, 3, 3, 3], output channels 6.
  int64_t s = 2, p = 1, op = 1, groups = 2;
  int64_t oh = (5 - 1) * s - 2 * p + 3 + op, ow = (4 - 1) * s - 2 * p + 3 + op;
  std::vector<float> ref(static_cast<size_t>(6 * oh * ow));
  for (int64_t o = 0; o < 6; ++o)
    for (int64_t i = 0; i < oh * ow; ++i) ref[static_cast<size_t>(o * oh * ow + i)] = static_cast<float>(b.scalar_at(o));
  for (int64_t c = 0; c < 4; ++c) {
    int64_t g = c / 2;
    for (int64_t oc = 0; oc < 3; ++oc)
      for (int64_t iy = 0; iy < 5; ++iy)
        for (int64_t ix = 0; ix < 4; ++ix)
          for (int64_t ki = 0; ki < 3; ++ki)
            for (int64_t kj = 0; kj < 3; ++kj) {
              int64_t y = iy * s - p + ki, xx = ix * s - p + kj;
              if (y < 0 || y >= oh || xx < 0 || xx >= ow) continue;
              ref[static_cast<size_t>(((g * 3 + oc) * oh + y) * ow + xx)] += static_cast<float>(
                  x.scalar_at((c * 5 + iy) * 4 + ix) * w.scalar_at(((c * 3 + oc) * 3 + ki) * 3 + kj));
            }
  }
  Tensor out = Call("conv_transpose2d").in(x).in(w).in(b).attr("stride", std::vector<int64_t>{s})
                   .attr("padding", std::vector<int64_t>{p}).attr("output_padding", std::vector<int64_t>{op})
                   .attr("groups", groups).run();
  EXPECT_LT(rel_err(out, ref, {1, 6, oh, ow}), 1e-5);
}

std::vector<float> matmul_ref(const Tensor& a, const Tensor& b, int64_t batch, int64_t m, int64_t k,
                              int64_t n, bool b_shared) {
  std::vector<float> out(static_cast<size_t>(batch * m * n));
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) {
          acc += a.scalar_at((bi * m + i) * k + q) * b.scalar_at(((b_shared ? 0 : bi) * k + q) * n + j);
        }
        out[static_cast<size_t>((bi * m + i) * n + j)] = static_cast<float>(acc);
      }
  return out;
}

TEST(PortableMatmul, MmBmmMatmulLinearAddmm) {
  Tensor a = randn({5, 7}, 31), b = randn({7, 3}, 32);
  EXPECT_LT(rel_err(Call("mm").in(a).in(b).run(), matmul_ref(a, b, 1, 5, 7, 3, true), {5, 3}), 1e-5);
  Tensor ba = randn({4, 5, 7}, 33), bb = randn({4, 7, 3}, 34);
  EXPECT_LT(rel_err(Call("bmm").in(ba).in(bb).run(), matmul_ref(ba, bb, 4, 5, 7, 3, false), {4, 5, 3}), 1e-5);
  // matmul: batch @ shared 2-D, broadcast batch, 1-D operands.
  EXPECT_LT(rel_err(Call("matmul").in(ba).in(b).run(), matmul_ref(ba, b, 4, 5, 7, 3, true), {4, 5, 3}), 1e-5);
  Tensor bc = randn({1, 7, 3}, 35);
  EXPECT_LT(rel_err(Call("matmul").in(ba).in(bc).run(), matmul_ref(ba, bc, 4, 5, 7, 3, true), {4, 5, 3}), 1e-5);
  Tensor v = randn({7}, 36);
  Tensor mv = Call("matmul").in(a).in(v).run();
  EXPECT_LT(rel_err(mv, matmul_ref(a, v.reshaped({7, 1}), 1, 5, 7, 1, true), {5}), 1e-5);
  Tensor vm = Call("matmul").in(v).in(b).run();
  EXPECT_LT(rel_err(vm, matmul_ref(v.reshaped({1, 7}), b, 1, 1, 7, 3, true), {3}), 1e-5);
  // linear: x @ w^T + bias over leading dims.
  Tensor x = randn({2, 3, 7}, 37), w = randn({4, 7}, 38), bias = randn({4}, 39);
  std::vector<float> ref(24);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 4; ++j) {
      double acc = bias.scalar_at(j);
      for (int64_t q = 0; q < 7; ++q) acc += x.scalar_at(r * 7 + q) * w.scalar_at(j * 7 + q);
      ref[static_cast<size_t>(r * 4 + j)] = static_cast<float>(acc);
    }
  EXPECT_LT(rel_err(Call("linear").in(x).in(w).in(bias).run(), ref, {2, 3, 4}), 1e-5);
  // addmm: beta * self + alpha * a @ b with self broadcast over rows.
  Tensor c = randn({3}, 40);
  auto prod_ref = matmul_ref(a, b, 1, 5, 7, 3, true);
  std::vector<float> aref(15);
  for (int64_t i = 0; i < 15; ++i) aref[static_cast<size_t>(i)] = static_cast<float>(0.5 * c.scalar_at(i % 3) + 2.0 * prod_ref[static_cast<size_t>(i)]);
  EXPECT_LT(rel_err(Call("addmm").in(c).in(a).in(b).attr("beta", 0.5).attr("alpha", 2.0).run(), aref, {5, 3}), 1e-5);
  auto bad = Call("mm").in(a).in(a).try_run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("inner dims"), std::string::npos);
}

TEST(PortablePool, MaxAndAvgMatchTorchSemantics) {
  Tensor x = randn({2, 3, 7, 6}, 41);
  struct Case {
    std::vector<int64_t> k, s, p;
    bool ceil, include_pad;
  } cases[] = {{{3, 3}, {2, 2}, {1, 1}, false, true}, {{3, 2}, {2, 2}, {1, 0}, true, false},
               {{2, 2}, {}, {0, 0}, true, true}, {{3, 3}, {1, 1}, {0, 1, 1, 0}, false, false}};
  for (const auto& c : cases) {
    int64_t kh = c.k[0], kw = c.k[1], sh = c.s.empty() ? kh : c.s[0], sw = c.s.empty() ? kw : c.s[1];
    int64_t pt = c.p[0], pl = c.p[1], pb = c.p.size() == 4 ? c.p[2] : pt, pr = c.p.size() == 4 ? c.p[3] : pl;
    auto out_size = [&](int64_t in, int64_t b, int64_t e, int64_t k, int64_t s) {
      int64_t span = in + b + e - k;
      int64_t o = (c.ceil ? (span + s - 1) / s : span / s) + 1;
      if (c.ceil && (o - 1) * s >= in + b) --o;
      return o;
    };
    int64_t oh = out_size(7, pt, pb, kh, sh), ow = out_size(6, pl, pr, kw, sw);
    std::vector<float> mx, av;
    for (int64_t pl_i = 0; pl_i < 6; ++pl_i)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          float m = -INFINITY;
          double sum = 0;
          int64_t cnt = 0;
          int64_t y0 = y * sh - pt, x0 = xx * sw - pl;
          int64_t y1 = std::min(y0 + kh, 7 + pb), x1 = std::min(x0 + kw, 6 + pr);
          for (int64_t iy = y0; iy < y0 + kh; ++iy)
            for (int64_t ix = x0; ix < x0 + kw; ++ix) {
              if (iy < 0 || iy >= 7 || ix < 0 || ix >= 6) continue;
              float v = static_cast<float>(x.scalar_at((pl_i * 7 + iy) * 6 + ix));
              m = std::max(m, v);
              sum += v;
              ++cnt;
            }
          mx.push_back(m);
          int64_t div = c.include_pad ? (y1 - y0) * (x1 - x0) : cnt;
          av.push_back(static_cast<float>(sum / static_cast<double>(div)));
        }
    auto call = [&](const char* op) {
      Call k(op);
      k.in(x).attr("kernel_size", c.k).attr("stride", c.s).attr("padding", c.p).attr("ceil_mode", c.ceil);
      if (std::string(op) == "avg_pool2d") k.attr("count_include_pad", c.include_pad);
      return k.run();
    };
    EXPECT_LT(rel_err(call("max_pool2d"), mx, {2, 3, oh, ow}), 1e-6);
    EXPECT_LT(rel_err(call("avg_pool2d"), av, {2, 3, oh, ow}), 1e-6);
  }
  // Adaptive average pooling to 1x1 is the global mean; to 3x2 uses torch's floor/ceil windows.
  Tensor g = Call("adaptive_avg_pool2d").in(x).attr("output_size", std::vector<int64_t>{1, 1}).run();
  double mean0 = 0;
  for (int64_t i = 0; i < 42; ++i) mean0 += x.scalar_at(i);
  EXPECT_NEAR(g.scalar_at(0), mean0 / 42, 1e-5);
  Tensor a = Call("adaptive_avg_pool2d").in(x).attr("output_size", std::vector<int64_t>{3, 4}).run();
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{2, 3, 3, 4}));
  // Row 1 of 3 over 7 rows: [2, 5); column 1 of 4 over 6: [1, 3).
  double s = 0;
  for (int64_t iy = 2; iy < 5; ++iy)
    for (int64_t ix = 1; ix < 3; ++ix) s += x.scalar_at(iy * 6 + ix);
  EXPECT_NEAR(a.scalar_at(1 * 4 + 1), s / 6, 1e-5);
}

TEST(PortablePool, MaxPoolKeepsIntegerTypes) {
  // 1x1x3x3 u8 (200 and up would read as negative in i8), kernel 2, stride 1, padding 1 below and
  // right: every window holds at least one element.
  Tensor x = make(DType::kU8, {1, 1, 3, 3}, {1, 250, 3, 4, 5, 6, 7, 8, 200});
  Tensor y = Call("max_pool2d")
                 .in(x)
                 .attr("kernel_size", std::vector<int64_t>{2, 2})
                 .attr("stride", std::vector<int64_t>{1, 1})
                 .attr("padding", std::vector<int64_t>{0, 0, 1, 1})
                 .run();
  EXPECT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(values(y), (std::vector<double>{250, 250, 6, 8, 200, 200, 8, 200, 200}));
  Tensor xi = make(DType::kI8, {1, 1, 2, 2}, {-5, -7, -9, -128});
  Tensor yi = Call("max_pool2d").in(xi).attr("kernel_size", std::vector<int64_t>{2, 2}).run();
  EXPECT_EQ(yi.dtype(), DType::kI8);
  EXPECT_EQ(values(yi), (std::vector<double>{-5}));
}

TEST(PortableNorm, SoftmaxLayerBatchGroupRms) {
  Tensor x = randn({2, 3, 4}, 51);
  Tensor sm = Call("softmax").in(x).attr("dim", int64_t{1}).run();
  Tensor lsm = Call("log_softmax").in(x).attr("dim", int64_t{-1}).run();
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 4; ++c) {
      double den = 0;
      for (int64_t b = 0; b < 3; ++b) den += std::exp(x.scalar_at((a * 3 + b) * 4 + c));
      for (int64_t b = 0; b < 3; ++b) {
        EXPECT_NEAR(sm.scalar_at((a * 3 + b) * 4 + c), std::exp(x.scalar_at((a * 3 + b) * 4 + c)) / den, 1e-6);
      }
    }
  for (int64_t r = 0; r < 6; ++r) {
    double den = 0;
    for (int64_t c = 0; c < 4; ++c) den += std::exp(x.scalar_at(r * 4 + c));
    EXPECT_NEAR(lsm.scalar_at(r * 4), x.scalar_at(r * 4) - std::log(den), 1e-5);
  }
  Tensor w = randn({4}, 52), b = randn({4}, 53);
  Tensor ln = Call("layer_norm").in(x).in(w).in(b).attr("normalized_shape", std::vector<int64_t>{4}).attr("eps", 1e-5).run();
  Tensor rms = Call("rms_norm").in(x).in(w).attr("normalized_shape", std::vector<int64_t>{4}).attr("eps", 1e-6).run();
  for (int64_t r = 0; r < 6; ++r) {
    double m = 0, v = 0, ms = 0;
    for (int64_t c = 0; c < 4; ++c) m += x.scalar_at(r * 4 + c) / 4;
    for (int64_t c = 0; c < 4; ++c) {
      double d = x.scalar_at(r * 4 + c) - m;
      v += d * d / 4;
      ms += x.scalar_at(r * 4 + c) * x.scalar_at(r * 4 + c) / 4;
    }
    for (int64_t c = 0; c < 4; ++c) {
      EXPECT_NEAR(ln.scalar_at(r * 4 + c), (x.scalar_at(r * 4 + c) - m) / std::sqrt(v + 1e-5) * w.scalar_at(c) + b.scalar_at(c), 1e-5);
      EXPECT_NEAR(rms.scalar_at(r * 4 + c), x.scalar_at(r * 4 + c) / std::sqrt(ms + 1e-6) * w.scalar_at(c), 1e-5);
    }
  }
  Tensor img = randn({2, 4, 3, 3}, 54);
  Tensor mean = randn({4}, 55), var = make(DType::kF32, {4}, {0.5, 1, 2, 3});
  Tensor bn = Call("batch_norm").in(img).in(w).in(b).in(mean).in(var).attr("eps", 1e-5).run();
  for (int64_t i = 0; i < img.numel(); ++i) {
    int64_t c = (i / 9) % 4;
    EXPECT_NEAR(bn.scalar_at(i), (img.scalar_at(i) - mean.scalar_at(c)) / std::sqrt(var.scalar_at(c) + 1e-5) * w.scalar_at(c) + b.scalar_at(c), 1e-5);
  }
  Tensor gn = Call("group_norm").in(img).in(w).in(b).attr("num_groups", int64_t{2}).run();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t g = 0; g < 2; ++g) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < 18; ++i) m += img.scalar_at(n * 36 + g * 18 + i) / 18;
      for (int64_t i = 0; i < 18; ++i) v += std::pow(img.scalar_at(n * 36 + g * 18 + i) - m, 2) / 18;
      for (int64_t i = 0; i < 18; ++i) {
        int64_t c = g * 2 + i / 9;
        EXPECT_NEAR(gn.scalar_at(n * 36 + g * 18 + i), (img.scalar_at(n * 36 + g * 18 + i) - m) / std::sqrt(v + 1e-5) * w.scalar_at(c) + b.scalar_at(c), 1e-5);
      }
    }
}

TEST(PortableAttention, SdpaWithMaskAndCausal) {
  Tensor q = randn({2, 3, 4, 8}, 61), k = randn({2, 3, 5, 8}, 62), v = randn({2, 3, 5, 6}, 63);
  Tensor mask(DType::kBool, {4, 5});
  for (int64_t i = 0; i < 20; ++i) mask.set_scalar_at(i, (i % 3) != 1);
  for (int causal = 0; causal < 2; ++causal) {
    for (int use_mask = 0; use_mask < 2; ++use_mask) {
      if (causal && use_mask) continue;
      std::vector<float> ref;
      for (int64_t bh = 0; bh < 6; ++bh)
        for (int64_t i = 0; i < 4; ++i) {
          std::vector<double> s(5);
          double mx = -INFINITY;
          for (int64_t j = 0; j < 5; ++j) {
            double d = 0;
            for (int64_t e = 0; e < 8; ++e) d += q.scalar_at((bh * 4 + i) * 8 + e) * k.scalar_at((bh * 5 + j) * 8 + e);
            s[static_cast<size_t>(j)] = d / std::sqrt(8.0);
            if ((causal && j > i) || (use_mask && mask.scalar_at(i * 5 + j) == 0)) s[static_cast<size_t>(j)] = -INFINITY;
            mx = std::max(mx, s[static_cast<size_t>(j)]);
          }
          double den = 0;
          for (auto& t : s) den += (t = std::exp(t - mx));
          for (int64_t e = 0; e < 6; ++e) {
            double o = 0;
            for (int64_t j = 0; j < 5; ++j) o += s[static_cast<size_t>(j)] / den * v.scalar_at((bh * 5 + j) * 6 + e);
            ref.push_back(static_cast<float>(o));
          }
        }
      Call c("scaled_dot_product_attention");
      c.in(q).in(k).in(v);
      if (use_mask) {
        c.in(mask);
      } else {
        c.none();
      }
      c.attr("is_causal", causal == 1);
      EXPECT_LT(rel_err(c.run(), ref, {2, 3, 4, 6}), 1e-5) << "causal " << causal << " mask " << use_mask;
    }
  }
}

TEST(PortableResize, BilinearAlignCornersBothWaysAndNearest) {
  Tensor x = make(DType::kF32, {1, 1, 2, 2}, {0, 1, 2, 3});
  Tensor t = Call("upsample_bilinear2d").in(x).attr("output_size", std::vector<int64_t>{4, 4}).attr("align_corners", true).run();
  std::vector<double> row0 = {0, 1.0 / 3, 2.0 / 3, 1}, col0 = {0, 2.0 / 3, 4.0 / 3, 2};
  for (int64_t j = 0; j < 4; ++j) EXPECT_NEAR(t.scalar_at(j), row0[static_cast<size_t>(j)], 1e-6);
  for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(t.scalar_at(i * 4), col0[static_cast<size_t>(i)], 1e-6);
  Tensor f = Call("upsample_bilinear2d").in(x).attr("output_size", std::vector<int64_t>{4, 4}).attr("align_corners", false).run();
  std::vector<double> frow0 = {0, 0.25, 0.75, 1}, fcol0 = {0, 0.5, 1.5, 2};
  for (int64_t j = 0; j < 4; ++j) EXPECT_NEAR(f.scalar_at(j), frow0[static_cast<size_t>(j)], 1e-6);
  for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(f.scalar_at(i * 4), fcol0[static_cast<size_t>(i)], 1e-6);
  Tensor n = Call("upsample_nearest2d").in(x).attr("scales", std::vector<double>{2.0, 1.5}).run();
  EXPECT_EQ(n.shape(), (std::vector<int64_t>{1, 1, 4, 3}));
  EXPECT_EQ(values(n), (std::vector<double>{0, 0, 1, 0, 0, 1, 2, 2, 3, 2, 2, 3}));
  Tensor ps = Call("pixel_shuffle").in(randn({1, 8, 2, 3}, 71)).attr("upscale_factor", int64_t{2}).run();
  Tensor back = Call("pixel_unshuffle").in(ps).attr("downscale_factor", int64_t{2}).run();
  EXPECT_EQ(values(back), values(randn({1, 8, 2, 3}, 71)));
  // pixel_shuffle: out[0, 0, 0, 1] comes from channel 1 at (0, 0).
  Tensor src = randn({1, 8, 2, 3}, 71);
  EXPECT_EQ(ps.scalar_at(1), src.scalar_at(1 * 6));
}

// ONNX Resize's arithmetic on a ramp x[i] = i, one axis at a time.
TEST(PortableResize, OnnxModesCoordinatesAndEdges) {
  auto ramp = [](int64_t n) {
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i));
    return make(DType::kF32, {1, n}, v);
  };
  // resize of ramp(n) by `scale` along dim 1, with `attrs`.
  auto by_scale = [&](int64_t n, double scale, const char* mode, const char* coord,
                      std::vector<KernelAttr> attrs = {}) {
    Call c("resize");
    c.in(ramp(n)).in(make(DType::kF32, {2}, {1, scale})).none().none();
    c.attr("mode", std::string(mode)).attr("coordinate_transformation_mode", std::string(coord));
    for (auto& a : attrs) c.attr(a.name, a.value);
    return c.try_run();
  };
  auto first = [](Result<std::vector<Tensor>> r) {
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().message());
    return r.ok() ? (*r)[0] : Tensor();
  };
  // Keys's cubic convolution with a = -0.5 reproduces a linear function wherever its four taps
  // are inside (ONNX's default a = -0.75 does not: 1.703125 at 1.75, as the reference computes).
  Tensor c = first(by_scale(10, 2.0, "cubic", "half_pixel", {{"cubic_coeff_a", -0.5}}));
  EXPECT_NEAR(first(by_scale(10, 2.0, "cubic", "half_pixel")).scalar_at(4), 1.703125, 1e-6);
  ASSERT_EQ(c.shape(), (std::vector<int64_t>{1, 20}));
  for (int64_t j = 4; j < 16; ++j) EXPECT_NEAR(c.scalar_at(j), j / 2.0 - 0.25, 1e-5) << j;
  // Nearest at exact halves: round_prefer_floor vs round_prefer_ceil, clamped at the end.
  Tensor nf = first(by_scale(4, 2.0, "nearest", "asymmetric"));
  EXPECT_EQ(values(nf), (std::vector<double>{0, 0, 1, 1, 2, 2, 3, 3}));
  Tensor nc = first(by_scale(4, 2.0, "nearest", "asymmetric",
                             {{"nearest_mode", std::string("round_prefer_ceil")}}));
  EXPECT_EQ(values(nc), (std::vector<double>{0, 1, 1, 2, 2, 3, 3, 3}));
  // align_corners with a scale: ONNX's output width is scale * in (2.4), not the 2 sizes.
  Tensor a = first(by_scale(4, 0.6, "linear", "align_corners"));
  ASSERT_EQ(a.shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_NEAR(a.scalar_at(1), 3.0 / 1.4, 1e-5);
  // tf_crop_and_resize: points past the input take extrapolation_value.
  Tensor t = Call("resize")
                 .in(ramp(4))
                 .none()
                 .in(make(DType::kI64, {2}, {1, 3}))
                 .in(make(DType::kF32, {4}, {0, 0.5, 1, 1.5}))
                 .attr("mode", std::string("linear"))
                 .attr("coordinate_transformation_mode", std::string("tf_crop_and_resize"))
                 .attr("extrapolation_value", -1.0)
                 .run();
  EXPECT_EQ(values(t), (std::vector<double>{1.5, 3, -1}));
  // exclude_outside drops the taps past the edge and renormalizes: (w0 * 2 + w1 * 3) / (w0 + w1)
  // with A = -0.75 at ratio 0.5, w0 = -0.09375 and w1 = 0.59375.
  Tensor e = first(by_scale(4, 2.0, "cubic", "asymmetric", {{"exclude_outside", true}}));
  EXPECT_NEAR(e.scalar_at(7), 3.1875, 1e-6);
  // The sizes the program computes must match what it planned; scales must be positive.
  auto planned = by_scale(4, 2.0, "linear", "half_pixel",
                          {{"output_size", std::vector<int64_t>{1, 9}}});
  ASSERT_FALSE(planned.ok());
  EXPECT_NE(planned.status().message().find("the output is [1, 8], but the program planned [1, 9]"),
            std::string::npos);
  auto zero = by_scale(4, 0.0, "linear", "half_pixel");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("scale 0 of dim 1 (size 4) is invalid"), std::string::npos);
}

// An RNN with identity activation and unit weights sums its inputs: every rule about time order,
// sequence lengths and directions shows in the numbers. seq 3, batch 2 (lengths 3 and 1).
TEST(PortableRecurrent, RnnSequenceLengthsAndDirections) {
  Tensor x = make(DType::kF32, {3, 2, 1}, {1, 10, 2, 20, 3, 30});
  Tensor lens = make(DType::kI32, {2}, {3, 1});
  auto rnn = [&](const char* direction, int64_t dirs) {
    Call call("rnn");
    call.in(x)
        .in(make(DType::kF32, {dirs, 1, 1}, std::vector<double>(dirs, 1.0)))
        .in(make(DType::kF32, {dirs, 1, 1}, std::vector<double>(dirs, 1.0)))
        .none()
        .in(lens)
        .none()
        .attr("hidden_size", int64_t{1})
        .attr("direction", std::string(direction))
        .attr("activations", std::string("affine"));
    auto out = call.try_run();
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.status().message());
    return out.ok() ? *out : std::vector<Tensor>{};
  };
  auto fwd = rnn("forward", 1);
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd[0].shape(), (std::vector<int64_t>{3, 1, 2, 1}));
  EXPECT_EQ(values(fwd[0]), (std::vector<double>{1, 10, 3, 0, 6, 0}));  // zero past length 1
  EXPECT_EQ(values(fwd[1]), (std::vector<double>{6, 10}));
  // Reverse runs each row from its own last step.
  auto rev = rnn("reverse", 1);
  ASSERT_EQ(rev.size(), 2u);
  EXPECT_EQ(values(rev[0]), (std::vector<double>{6, 10, 5, 0, 3, 0}));
  EXPECT_EQ(values(rev[1]), (std::vector<double>{6, 10}));
  auto both = rnn("bidirectional", 2);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(values(both[0]), (std::vector<double>{1, 10, 6, 10, 3, 0, 5, 0, 6, 0, 3, 0}));
  EXPECT_EQ(values(both[1]), (std::vector<double>{6, 10, 6, 10}));
  // Lengths past the sequence are an error naming the row.
  Call bad("rnn");
  bad.in(x)
      .in(make(DType::kF32, {1, 1, 1}, {1}))
      .in(make(DType::kF32, {1, 1, 1}, {1}))
      .none()
      .in(make(DType::kI32, {2}, {4, 1}))
      .none()
      .attr("hidden_size", int64_t{1});
  auto r = bad.try_run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sequence_lens[0] is 4, outside [0, 3]"), std::string::npos)
      << r.status().message();
}

// One LSTM step by hand: i = sigmoid(x + h), peepholes add p * c to i and f, and o sees the new c.
TEST(PortableRecurrent, LstmStepWithPeepholesAndClip) {
  // hidden 1, input 1, W = R = 1 for every gate (i o f c), bias 0.1 on the input side.
  Tensor x = make(DType::kF32, {1, 1, 1}, {0.5});
  Tensor w = make(DType::kF32, {1, 4, 1}, {1, 1, 1, 1});
  Tensor bias = make(DType::kF32, {1, 8}, {0.1, 0.1, 0.1, 0.1, 0, 0, 0, 0});
  Tensor h0 = make(DType::kF32, {1, 1, 1}, {0.25}), c0 = make(DType::kF32, {1, 1, 1}, {-1});
  Tensor p = make(DType::kF32, {1, 3}, {0.5, 2, -0.5});  // i o f
  Call call("lstm");
  call.in(x)
      .in(w)
      .in(w)
      .in(bias)
      .none()
      .in(h0)
      .in(c0)
      .in(p)
      .attr("hidden_size", int64_t{1})
      .attr("clip", 0.7);
  auto out = call.try_run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 3u);
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  auto clip = [](double v) { return std::clamp(v, -0.7, 0.7); };
  double pre = 0.5 + 0.25 + 0.1;  // x w + h r + bias, the same for every gate
  double i = sig(clip(pre + 0.5 * -1)), f = sig(clip(pre + -0.5 * -1)), g = std::tanh(clip(pre));
  double c = f * -1 + i * g;
  double o = sig(clip(pre + 2 * c));
  EXPECT_NEAR((*out)[0].scalar_at(0), o * std::tanh(c), 1e-6);
  EXPECT_NEAR((*out)[1].scalar_at(0), o * std::tanh(c), 1e-6);
  EXPECT_NEAR((*out)[2].scalar_at(0), c, 1e-6);
}

}  // namespace
}  // namespace kiln::portable::testing
