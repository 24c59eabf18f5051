// Quantized matmul of two activations: bit-exact against the integer reference (broadcast batch
// dimensions, transposes, 8/16-bit operands, both algorithms), within one step of fake-quant.
#include "backends/htp/kernels_reference.h"

namespace kiln::htp::testing {
namespace {

const std::vector<DType> kActs = {DType::kU8, DType::kI8, DType::kU16, DType::kI16};

TEST(HtpMatMul, RandomBroadcastTransposeBitExact) {
  Rng rng(31);
  for (int i = 0; i < 100; ++i) {
    rng.dyadic = i % 5 == 2;
    const DType da = kActs[static_cast<size_t>(i) % 4], db = kActs[static_cast<size_t>(i / 4) % 4];
    const DType dout = rng.pick(kActs);
    MatMulParams p;
    const int64_t m = rng.uniform(1, 13),
                  k = rng.coin(0.2) ? rng.uniform(100, 300) : rng.uniform(1, 20),
                  n = rng.uniform(1, 13);
    p.transpose_a = rng.coin();
    p.transpose_b = rng.coin();
    std::vector<int64_t> batch(static_cast<size_t>(rng.uniform(0, 2)));
    for (auto& d : batch) d = rng.uniform(1, 3);
    auto sub = [&]() {
      std::vector<int64_t> s(batch.begin() + rng.uniform(0, static_cast<int64_t>(batch.size())),
                             batch.end());
      for (auto& d : s) {
        if (rng.coin(0.3)) d = 1;
      }
      return s;
    };
    p.a_shape = sub();
    p.b_shape = sub();
    for (int64_t d : p.transpose_a ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}) {
      p.a_shape.push_back(d);
    }
    for (int64_t d : p.transpose_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}) {
      p.b_shape.push_back(d);
    }
    p.threads = static_cast<int>(rng.uniform(1, 2));
    auto enc = [&](DType d) {
      auto [lo, hi] = storage(d);
      return make_encoding(d, rng.scale(0.01, 0.1), static_cast<int32_t>(rng.zero_point(lo, hi)));
    };
    Encoding ea = enc(da), eb = enc(db);
    auto numel = [](const std::vector<int64_t>& s) {
      int64_t v = 1;
      for (int64_t d : s) v *= d;
      return v;
    };
    auto qa = rng.codes(static_cast<size_t>(numel(p.a_shape)), ea.qmin, ea.qmax);
    auto qb = rng.codes(static_cast<size_t>(numel(p.b_shape)), eb.qmin, eb.qmax);
    // Reference accumulators.
    auto bshape = broadcast_shapes(std::span(p.a_shape.data(), p.a_shape.size() - 2),
                                   std::span(p.b_shape.data(), p.b_shape.size() - 2));
    ASSERT_TRUE(bshape.ok());
    const int64_t nbatch = numel(*bshape);
    std::vector<int64_t> acc;
    std::vector<int64_t> idx(bshape->size());
    auto batch_offset = [&](const std::vector<int64_t>& shape) {
      const size_t r = shape.size() - 2, off = idx.size() - r;
      int64_t flat = 0;
      for (size_t d = 0; d < r; ++d) flat = flat * shape[d] + (shape[d] == 1 ? 0 : idx[off + d]);
      return flat;
    };
    for (int64_t bi = 0; bi < nbatch; ++bi) {
      int64_t rest = bi;
      for (size_t d = idx.size(); d-- > 0;) {
        idx[d] = rest % (*bshape)[d];
        rest /= (*bshape)[d];
      }
      const int64_t oa = batch_offset(p.a_shape) * m * k, ob = batch_offset(p.b_shape) * k * n;
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          int64_t s = 0;
          for (int64_t j = 0; j < k; ++j) {
            const int64_t av = qa[oa + (p.transpose_a ? j * m + r : r * k + j)];
            const int64_t bv = qb[ob + (p.transpose_b ? c * k + j : j * n + c)];
            s += (av - ea.zero_point()) * (bv - eb.zero_point());
          }
          acc.push_back(s);
        }
      }
    }
    std::vector<double> real;
    for (int64_t v : acc) real.push_back(static_cast<double>(v) * ea.scale() * eb.scale());
    Encoding eo = fit_output(rng, dout, real);
    const FixedPointMultiplier mult =
        quantize_multiplier(static_cast<double>(ea.scale()) * eb.scale() / eo.scale());
    const std::string desc = fmt::format("{} x {} ({}{}) {} x {}", fmt::join(p.a_shape, ","),
                                         fmt::join(p.b_shape, ","), p.transpose_a ? "Ta" : "",
                                         p.transpose_b ? "Tb" : "", dtype_name(da), dtype_name(db));
    auto ab = to_bytes(qa, da), bb = to_bytes(qb, db);
    for (ConvAlgorithm algo : {ConvAlgorithm::kOneDnn, ConvAlgorithm::kDirect}) {
      auto mm = QuantMatMul::prepare(p, ea, eb, eo, algo);
      ASSERT_TRUE(mm.ok()) << desc << ": " << mm.status().message();
      std::vector<int64_t> want_shape = *bshape;
      want_shape.push_back(m);
      want_shape.push_back(n);
      ASSERT_EQ(mm->output_shape(), want_shape);
      auto ob = buffer(acc.size(), dout);
      ASSERT_TRUE(mm->run(ab.data(), bb.data(), ob.data()).ok());
      const auto got = from_bytes(ob, dout);
      for (size_t j = 0; j < acc.size(); ++j) {
        ASSERT_EQ(got[j], requantize_output(acc[j], mult, eo.zero_point(), eo.qmin, eo.qmax))
            << desc << " " << algorithm_name(algo) << " at " << j;
        ASSERT_LE(std::abs(got[j] - fake_quant(real[j], eo)), 1) << desc;
      }
    }
  }
}

TEST(HtpMatMul, Errors) {
  Encoding e = make_encoding(DType::kU8, 0.1f, 3);
  MatMulParams p;
  p.a_shape = {2, 3};
  p.b_shape = {4, 5};
  auto r = QuantMatMul::prepare(p, e, e, e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a has 3 columns (K) and b has 4 rows"), std::string::npos)
      << r.status().message();
  p.a_shape = {3};
  r = QuantMatMul::prepare(p, e, e, e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rank 1 and 2"), std::string::npos);
  p.a_shape = {2, 2, 4};
  p.b_shape = {3, 4, 5};
  r = QuantMatMul::prepare(p, e, e, e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("matmul: batch dimensions: broadcast"), std::string::npos);
  p.b_shape = {4, 5};
  r = QuantMatMul::prepare(p, make_encoding(DType::kI32, 1.0f, 0), e, e);
  ASSERT_FALSE(r.ok());
  QuantMatMul empty;
  EXPECT_FALSE(empty.run(nullptr, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace kiln::htp::testing
