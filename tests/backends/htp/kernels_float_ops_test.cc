// Softmax and layer norm (computed in double between dequantize and quantize): softmax bit-exact
// against its definition, both within one step of the float fake-quant result.
#include "backends/htp/kernels_reference.h"

namespace kiln::htp::testing {
namespace {

const std::vector<DType> kActs = {DType::kU8, DType::kI8, DType::kU16, DType::kI16};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

TEST(HtpSoftmax, RandomAxesMatchDefinitionAndFloat) {
  Rng rng(41);
  for (int i = 0; i < 60; ++i) {
    std::vector<int64_t> shape(static_cast<size_t>(rng.uniform(1, 4)));
    for (auto& d : shape) d = rng.uniform(1, 9);
    const int64_t rank = static_cast<int64_t>(shape.size());
    const int64_t axis = rng.uniform(-rank, rank - 1);
    const int64_t ax = axis < 0 ? axis + rank : axis;
    const DType din = rng.pick(kActs), dout = rng.pick(kActs);
    auto [lo, hi] = storage(din);
    Encoding in = make_encoding(
        din, rng.scale(0.001, 0.2) * (din == DType::kU16 || din == DType::kI16 ? 0.01f : 1.0f),
        static_cast<int32_t>(rng.zero_point(lo, hi)));
    auto [olo, ohi] = storage(dout);
    Encoding out =
        make_encoding(dout, 1.0f / static_cast<float>(ohi - olo), static_cast<int32_t>(olo));
    const float beta = rng.coin() ? 1.0f : static_cast<float>(rng.real(0.2, 3));
    auto sm =
        QuantSoftmax::prepare(shape, axis, in, out, beta, static_cast<int>(rng.uniform(1, 2)));
    ASSERT_TRUE(sm.ok()) << sm.status().message();
    auto x = rng.codes(static_cast<size_t>(numel(shape)), in.qmin, in.qmax);
    auto xb = to_bytes(x, din);
    auto ob = buffer(x.size(), dout);
    ASSERT_TRUE(sm->run(xb.data(), ob.data()).ok());
    const auto got = from_bytes(ob, dout);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < ax; ++d) outer *= shape[d];
    for (int64_t d = ax + 1; d < rank; ++d) inner *= shape[d];
    const int64_t count = shape[ax];
    const double k = static_cast<double>(beta) * in.scale();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < inner; ++j) {
        auto at = [&](int64_t c) { return static_cast<size_t>((o * count + c) * inner + j); };
        int64_t qmax = x[at(0)];
        for (int64_t c = 1; c < count; ++c) qmax = std::max(qmax, x[at(c)]);
        std::vector<double> e(static_cast<size_t>(count));
        double sum = 0, fsum = 0;
        for (int64_t c = 0; c < count; ++c) {
          e[c] = std::exp(-k * static_cast<double>(qmax - x[at(c)]));
          sum += e[c];
          fsum += std::exp(beta * (x[at(c)] - qmax) * static_cast<double>(in.scale()));
        }
        for (int64_t c = 0; c < count; ++c) {
          const int64_t want = quantize_value(static_cast<float>(e[c] / sum), out.scale(),
                                              out.zero_point(), out.qmin, out.qmax);
          ASSERT_EQ(got[at(c)], want);
          const double real =
              std::exp(beta * (x[at(c)] - qmax) * static_cast<double>(in.scale())) / fsum;
          ASSERT_LE(std::abs(got[at(c)] - fake_quant(real, out)), 1);
        }
      }
    }
  }
}

TEST(HtpLayerNorm, RandomWithinOneStepOfFloat) {
  Rng rng(42);
  for (int i = 0; i < 60; ++i) {
    const bool rms = i % 3 == 2;
    std::vector<int64_t> shape(static_cast<size_t>(rng.uniform(1, 4)));
    for (auto& d : shape) d = rng.uniform(1, 12);
    const int64_t rank = static_cast<int64_t>(shape.size());
    const int64_t axis = rng.uniform(0, rank - 1);
    int64_t rows = 1, size = 1;
    for (int64_t d = 0; d < axis; ++d) rows *= shape[d];
    for (int64_t d = axis; d < rank; ++d) size *= shape[d];
    std::vector<float> gamma, beta;
    if (rng.coin(0.8)) {
      for (int64_t j = 0; j < size; ++j) gamma.push_back(static_cast<float>(rng.real(0.5, 1.5)));
    }
    if (rng.coin(0.8)) {
      for (int64_t j = 0; j < size; ++j) beta.push_back(static_cast<float>(rng.real(-0.5, 0.5)));
    }
    const DType din = rng.pick(kActs), dout = rng.pick(kActs);
    auto [lo, hi] = storage(din);
    Encoding in =
        make_encoding(din, rng.scale(0.001, 0.1), static_cast<int32_t>(rng.zero_point(lo, hi)));
    auto [olo, ohi] = storage(dout);
    Encoding out = make_encoding(dout, 8.0f / static_cast<float>(ohi - olo),
                                 static_cast<int32_t>((olo + ohi + 1) / 2));
    const float eps = 1e-5f;
    auto ln = QuantLayerNorm::prepare(shape, axis, gamma, beta, eps, in, out, rms,
                                      static_cast<int>(rng.uniform(1, 2)));
    ASSERT_TRUE(ln.ok()) << ln.status().message();
    auto x = rng.codes(static_cast<size_t>(numel(shape)), in.qmin, in.qmax);
    if (rng.coin(0.1)) std::fill(x.begin(), x.end(), x[0]);  // zero variance
    auto xb = to_bytes(x, din);
    auto ob = buffer(x.size(), dout);
    ASSERT_TRUE(ln->run(xb.data(), ob.data()).ok());
    const auto got = from_bytes(ob, dout);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> v(static_cast<size_t>(size));
      double mean = 0, var = 0;
      for (int64_t j = 0; j < size; ++j) {
        v[j] = (x[r * size + j] - in.zero_point()) * static_cast<double>(in.scale());
        mean += v[j];
      }
      mean = rms ? 0 : mean / size;
      for (double t : v) var += (t - mean) * (t - mean);
      var /= size;
      for (int64_t j = 0; j < size; ++j) {
        double y = (v[j] - mean) / std::sqrt(var + eps);
        if (!gamma.empty()) y *= gamma[j];
        if (!beta.empty()) y += beta[j];
        ASSERT_LE(std::abs(got[r * size + j] - fake_quant(y, out)), 1)
            << "case " << i << " row " << r << " y " << y;
      }
    }
  }
}

TEST(HtpFloatOps, Errors) {
  Encoding e = make_encoding(DType::kU8, 0.1f, 0);
  std::vector<int64_t> shape = {2, 3};
  auto s = QuantSoftmax::prepare(shape, 2, e, e);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("softmax: axis 2 is outside the rank-2 shape"),
            std::string::npos);
  EXPECT_FALSE(QuantSoftmax::prepare(shape, 1, e, e, 0.0f).ok());
  std::vector<float> g(4, 1.0f);
  auto l = QuantLayerNorm::prepare(shape, 1, g, {}, 1e-5f, e, e);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("layer_norm: gamma has 4 values, expected 3"),
            std::string::npos)
      << l.status().message();
  EXPECT_FALSE(QuantLayerNorm::prepare(shape, 1, {}, {}, -1.0f, e, e).ok());
  EXPECT_FALSE(
      QuantLayerNorm::prepare(shape, 0, {}, {}, 1e-5f, make_encoding(DType::kI32, 1.0f, 0), e)
          .ok());
}

}  // namespace
}  // namespace kiln::htp::testing
