// Elementwise binary (broadcasting), unary lookup tables, pooling and reductions: bit-exact
// against naive references, within one step of float fake-quant, and errors for bad parameters.
#include "backends/htp/kernels_reference.h"

namespace kiln::htp::testing {
namespace {

const std::vector<DType> kActs = {DType::kU8, DType::kI8, DType::kU16, DType::kI16};

Encoding random_encoding(Rng& rng, DType dtype) {
  auto [lo, hi] = storage(dtype);
  return make_encoding(dtype, rng.scale(0.002, 0.2), static_cast<int32_t>(rng.zero_point(lo, hi)));
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Flat index into `shape` (right-aligned, broadcast) of the output multi-index `idx`.
int64_t broadcast_index(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t flat = 0;
  const size_t off = idx.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    flat = flat * shape[i] + (shape[i] == 1 ? 0 : idx[off + i]);
  }
  return flat;
}

int64_t ref_binary(BinaryOp op, int64_t qa, int64_t qb, const Encoding& a, const Encoding& b,
                   const Encoding& o) {
  const bool small = dtype_size(a.dtype) == 1 && dtype_size(b.dtype) == 1;
  const int shift = small ? 20 : 15;
  const double sa = a.scale(), sb = b.scale(), so = o.scale();
  const double twice = 2 * std::max(sa, sb);
  switch (op) {
    case BinaryOp::kMultiply:
      return requantize_output((qa - a.zero_point()) * (qb - b.zero_point()),
                               quantize_multiplier(sa * sb / so), o.zero_point(), o.qmin, o.qmax);
    case BinaryOp::kDivide:
      return quantize_value(dequantize_value(qa, a.scale(), a.zero_point()) /
                                dequantize_value(qb, b.scale(), b.zero_point()),
                            o.scale(), o.zero_point(), o.qmin, o.qmax);
    default:
      break;
  }
  const int64_t x =
      requantize((qa - a.zero_point()) * (int64_t{1} << shift), quantize_multiplier(sa / twice));
  const int64_t y =
      requantize((qb - b.zero_point()) * (int64_t{1} << shift), quantize_multiplier(sb / twice));
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      r = x + y;
      break;
    case BinaryOp::kSubtract:
      r = x - y;
      break;
    case BinaryOp::kMaximum:
      r = std::max(x, y);
      break;
    default:
      r = std::min(x, y);
      break;
  }
  return requantize_output(r, quantize_multiplier(twice / (std::ldexp(1.0, shift) * so)),
                           o.zero_point(), o.qmin, o.qmax);
}

double real_binary(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::kAdd:
      return x + y;
    case BinaryOp::kSubtract:
      return x - y;
    case BinaryOp::kMultiply:
      return x * y;
    case BinaryOp::kMaximum:
      return std::max(x, y);
    case BinaryOp::kMinimum:
      return std::min(x, y);
    case BinaryOp::kDivide:
      return x / y;
  }
  return 0;
}

TEST(HtpBinary, RandomBroadcastBitExact) {
  Rng rng(21);
  const std::vector<BinaryOp> ops = {BinaryOp::kAdd,     BinaryOp::kSubtract, BinaryOp::kMultiply,
                                     BinaryOp::kMaximum, BinaryOp::kMinimum,  BinaryOp::kDivide};
  for (int i = 0; i < 180; ++i) {
    const BinaryOp op = ops[static_cast<size_t>(i) % ops.size()];
    rng.dyadic = i % 7 == 3;
    const DType da = rng.pick(kActs), db = i % 3 == 0 ? da : rng.pick(kActs);
    const DType dout = rng.pick(kActs);
    std::vector<int64_t> out_shape(static_cast<size_t>(rng.uniform(0, 4)));
    for (auto& d : out_shape) d = rng.uniform(1, 6);
    auto sub_shape = [&]() {
      std::vector<int64_t> s(
          out_shape.begin() + rng.uniform(0, static_cast<int64_t>(out_shape.size())),
          out_shape.end());
      for (auto& d : s) {
        if (rng.coin(0.3)) d = 1;
      }
      return s;
    };
    std::vector<int64_t> sa = sub_shape(), sb = sub_shape();
    if (rng.coin(0.5)) sa = out_shape;
    Encoding ea = random_encoding(rng, da), eb = random_encoding(rng, db);
    if (i % 5 == 0 && da == db) eb = ea;
    Encoding eo = random_encoding(rng, dout);
    if (rng.coin(0.2)) eo.qmin = eo.zero_point();  // relu range
    auto qa = rng.codes(static_cast<size_t>(numel(sa)), ea.qmin, ea.qmax);
    auto qb = rng.codes(static_cast<size_t>(numel(sb)), eb.qmin, eb.qmax);
    auto bin = QuantBinary::prepare(op, sa, ea, sb, eb, eo, static_cast<int>(rng.uniform(1, 2)));
    ASSERT_TRUE(bin.ok()) << bin.status().message();
    auto expected_shape = broadcast_shapes(sa, sb);
    ASSERT_TRUE(expected_shape.ok());
    const std::vector<int64_t>& os = bin->output_shape();
    const int64_t n = numel(os);
    auto ab = to_bytes(qa, da), bb = to_bytes(qb, db);
    auto ob = buffer(static_cast<size_t>(n), dout);
    ASSERT_TRUE(bin->run(ab.data(), bb.data(), ob.data()).ok());
    const auto got = from_bytes(ob, dout);
    std::vector<int64_t> idx(os.size(), 0);
    for (int64_t f = 0; f < n; ++f) {
      int64_t rest = f;
      for (size_t d = os.size(); d-- > 0;) {
        idx[d] = rest % os[d];
        rest /= os[d];
      }
      const int64_t xa = qa[static_cast<size_t>(broadcast_index(idx, sa))];
      const int64_t xb = qb[static_cast<size_t>(broadcast_index(idx, sb))];
      const int64_t want = ref_binary(op, xa, xb, ea, eb, eo);
      ASSERT_EQ(got[static_cast<size_t>(f)], want)
          << "op " << static_cast<int>(op) << " " << dtype_name(da) << "," << dtype_name(db) << "->"
          << dtype_name(dout) << " codes " << xa << "," << xb;
      const double ra = (xa - ea.zero_point()) * static_cast<double>(ea.scale());
      const double rb = (xb - eb.zero_point()) * static_cast<double>(eb.scale());
      if (op == BinaryOp::kDivide && rb == 0) continue;
      ASSERT_LE(std::abs(want - fake_quant(real_binary(op, ra, rb), eo)), 1)
          << "op " << static_cast<int>(op) << " " << ra << ", " << rb;
    }
  }
}

TEST(HtpBinary, LongRowsBitExact) {
  // Rows long enough for the vector form (multiples of 16 and 64, and tails), same shape and
  // broadcast along the row or of a scalar, every 8/16-bit input pairing, 1 and 2 threads.
  Rng rng(26);
  const std::vector<BinaryOp> ops = {BinaryOp::kAdd, BinaryOp::kSubtract, BinaryOp::kMultiply,
                                     BinaryOp::kMaximum, BinaryOp::kMinimum};
  const std::vector<DType> outs = {DType::kU8, DType::kI8, DType::kU16, DType::kI16, DType::kI32};
  for (int i = 0; i < 150; ++i) {
    const BinaryOp op = ops[static_cast<size_t>(i) % ops.size()];
    rng.dyadic = i % 7 == 3;
    const DType da = rng.pick(kActs), db = rng.pick(kActs), dout = rng.pick(outs);
    const int64_t len = rng.pick(std::vector<int64_t>{16, 64, 128, 1, 15, 17, 63, 65, 200, 1000});
    const int64_t rows = rng.uniform(1, 40);
    std::vector<int64_t> sa = {rows, len}, sb = sa;
    const int kind = static_cast<int>(rng.uniform(0, 3));
    if (kind == 1) sb = {len};
    if (kind == 2) sb = {1};
    if (kind == 3) sb = {rows, 1};
    if (rng.coin(0.3)) std::swap(sa, sb);
    Encoding ea = random_encoding(rng, da), eb = random_encoding(rng, db);
    if (i % 5 == 0 && da == db) eb = ea;
    Encoding eo = dout == DType::kI32 ? make_encoding(DType::kI32, rng.scale(1e-5, 0.1), 0)
                                      : random_encoding(rng, dout);
    if (rng.coin(0.2)) eo.qmin = eo.zero_point();  // relu range
    auto qa = rng.codes(static_cast<size_t>(numel(sa)), ea.qmin, ea.qmax);
    auto qb = rng.codes(static_cast<size_t>(numel(sb)), eb.qmin, eb.qmax);
    auto bin = QuantBinary::prepare(op, sa, ea, sb, eb, eo, static_cast<int>(rng.uniform(1, 2)));
    ASSERT_TRUE(bin.ok()) << bin.status().message();
    const std::vector<int64_t>& os = bin->output_shape();
    const int64_t n = numel(os);
    auto ab = to_bytes(qa, da), bb = to_bytes(qb, db);
    auto ob = buffer(static_cast<size_t>(n), dout);
    ASSERT_TRUE(bin->run(ab.data(), bb.data(), ob.data()).ok());
    const auto got = from_bytes(ob, dout);
    std::vector<int64_t> idx(os.size(), 0);
    for (int64_t f = 0; f < n; ++f) {
      idx[0] = f / os[1];
      idx[1] = f % os[1];
      const int64_t xa = qa[static_cast<size_t>(broadcast_index(idx, sa))];
      const int64_t xb = qb[static_cast<size_t>(broadcast_index(idx, sb))];
      ASSERT_EQ(got[static_cast<size_t>(f)], ref_binary(op, xa, xb, ea, eb, eo))
          << "case " << i << " op " << static_cast<int>(op) << " " << dtype_name(da) << ","
          << dtype_name(db) << "->" << dtype_name(dout) << " at " << f;
    }
  }
}

TEST(HtpBinary, FineOutputScaleExposesTheScheme) {
  // An i32 output 10^4 to 10^5 times finer than the inputs makes the rounding of a' and b'
  // (the left shift L) visible in most outputs: the reference must match bit for bit.
  Rng rng(25);
  for (DType d : {DType::kU8, DType::kU16}) {
    Encoding a = make_encoding(d, 1.0f, 3), b = make_encoding(d, 0.37f, 1);
    Encoding o = make_encoding(DType::kI32, d == DType::kU8 ? 1e-5f : 1e-4f, 0);
    for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSubtract, BinaryOp::kMaximum}) {
      std::vector<int64_t> shape = {4099};
      auto [lo, hi] = storage(d);
      auto qa = rng.codes(4099, lo, hi), qb = rng.codes(4099, lo, hi);
      auto bin = QuantBinary::prepare(op, shape, a, shape, b, o);
      ASSERT_TRUE(bin.ok());
      auto ab = to_bytes(qa, d), bb = to_bytes(qb, d);
      auto ob = buffer(qa.size(), DType::kI32);
      ASSERT_TRUE(bin->run(ab.data(), bb.data(), ob.data()).ok());
      const auto got = from_bytes(ob, DType::kI32);
      int differs_from_float = 0;
      for (size_t i = 0; i < qa.size(); ++i) {
        ASSERT_EQ(got[i], ref_binary(op, qa[i], qb[i], a, b, o));
        const double real = real_binary(op, (qa[i] - 3) * 1.0, (qb[i] - 1) * double{0.37f});
        differs_from_float += got[i] != fake_quant(real, o);
      }
      EXPECT_GT(differs_from_float, 10);  // the scheme's rounding shows
    }
  }
}

TEST(HtpBinary, Errors) {
  Encoding e = make_encoding(DType::kU8, 0.1f, 0);
  std::vector<int64_t> a = {2, 3}, b = {4};
  auto r = QuantBinary::prepare(BinaryOp::kAdd, a, e, b, e, e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("add: broadcast: dimension 1 is 3 in one shape and 4"),
            std::string::npos)
      << r.status().message();
  r = QuantBinary::prepare(BinaryOp::kMultiply, a, make_encoding(DType::kI32, 1.0f, 0), a, e, e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("multiply: input dtype i32"), std::string::npos);
  Encoding pa = make_per_axis_encoding(DType::kU8, {0.1f, 0.2f}, {0, 0}, 1, 0, 255);
  r = QuantBinary::prepare(BinaryOp::kAdd, a, e, a, pa, e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("add: input b encoding is per axis"), std::string::npos);
  std::vector<int64_t> neg = {-1};
  EXPECT_FALSE(QuantBinary::prepare(BinaryOp::kAdd, neg, e, neg, e, e).ok());
}

TEST(HtpLut, EveryFunctionMatchesItsDefinition) {
  Rng rng(22);
  const UnaryFunction fns[] = {
      UnaryFunction::kIdentity,  UnaryFunction::kRelu,        UnaryFunction::kReluMinMax,
      UnaryFunction::kLeakyRelu, UnaryFunction::kPRelu,       UnaryFunction::kElu,
      UnaryFunction::kSigmoid,   UnaryFunction::kTanh,        UnaryFunction::kGelu,
      UnaryFunction::kGeluTanh,  UnaryFunction::kHardSigmoid, UnaryFunction::kHardSwish,
      UnaryFunction::kSilu,      UnaryFunction::kMish,        UnaryFunction::kSoftplus,
      UnaryFunction::kExp,       UnaryFunction::kLog,         UnaryFunction::kSqrt,
      UnaryFunction::kRsqrt,     UnaryFunction::kReciprocal,  UnaryFunction::kAbs,
      UnaryFunction::kNeg,       UnaryFunction::kSquare,      UnaryFunction::kSin,
      UnaryFunction::kCos};
  int i = 0;
  for (UnaryFunction fn : fns) {
    for (DType din : kActs) {
      const DType dout = kActs[static_cast<size_t>(i++) % kActs.size()];
      Encoding in = random_encoding(rng, din), out = random_encoding(rng, dout);
      auto f = unary_function(fn, 0.1f, 6.0f);
      auto lut = Lut::prepare(in, out, f, 2);
      ASSERT_TRUE(lut.ok()) << lut.status().message();
      auto [lo, hi] = storage(din);
      std::vector<int64_t> codes;
      for (int64_t q = lo; q <= hi; ++q) codes.push_back(q);
      auto ib = to_bytes(codes, din);
      auto ob = buffer(codes.size(), dout);
      ASSERT_TRUE(lut->run(ib.data(), ob.data(), static_cast<int64_t>(codes.size())).ok());
      const auto got = from_bytes(ob, dout);
      for (size_t k = 0; k < codes.size(); ++k) {
        const float y = f(dequantize_value(codes[k], in.scale(), in.zero_point()));
        ASSERT_EQ(got[k], quantize_value(y, out.scale(), out.zero_point(), out.qmin, out.qmax));
        ASSERT_EQ(lut->lookup(codes[k]), got[k]);
      }
    }
  }
  // Spot values of the functions themselves.
  EXPECT_FLOAT_EQ(unary_function(UnaryFunction::kGelu)(1.0f), 0.8413447f);
  EXPECT_FLOAT_EQ(unary_function(UnaryFunction::kHardSwish)(1.0f), 4.0f / 6.0f);
  EXPECT_FLOAT_EQ(unary_function(UnaryFunction::kHardSigmoid)(1.0f), 1.0f / 6.0f + 0.5f);
  EXPECT_FLOAT_EQ(unary_function(UnaryFunction::kHardSigmoid, 0.2f, 0.5f)(1.0f), 0.7f);
  EXPECT_FLOAT_EQ(unary_function(UnaryFunction::kReluMinMax, 0.0f, 6.0f)(7.0f), 6.0f);
  EXPECT_FLOAT_EQ(unary_function(UnaryFunction::kLeakyRelu, 0.1f)(-2.0f), -0.2f);
  EXPECT_FLOAT_EQ(unary_function(UnaryFunction::kSilu)(2.0f), 2.0f / (1.0f + std::exp(-2.0f)));
}

TEST(HtpLut, ReluOnOneEncodingKeepsCodes) {
  Encoding e = make_encoding(DType::kU8, 0.05f, 100);
  auto lut = Lut::prepare(e, e, unary_function(UnaryFunction::kRelu));
  ASSERT_TRUE(lut.ok());
  for (int64_t q = 0; q < 256; ++q) EXPECT_EQ(lut->lookup(q), std::max<int64_t>(q, 100));
  EXPECT_FALSE(
      Lut::prepare(make_encoding(DType::kI32, 1.0f, 0), e, [](float x) { return x; }).ok());
  EXPECT_FALSE(Lut::prepare(e, e, nullptr).ok());
}

// ---- pooling

struct PoolRef {
  Pool2dParams p;
  Encoding in, out;
  std::vector<int64_t> x;
};

std::vector<int64_t> ref_pool(PoolKind kind, const PoolRef& r, std::vector<double>* real) {
  const Pool2dParams& p = r.p;
  const int64_t oh = p.out_h(), ow = p.out_w();
  std::vector<int64_t> y;
  const int64_t zi = r.in.zero_point(), zo = r.out.zero_point();
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        for (int64_t c = 0; c < p.channels; ++c) {
          const int64_t hs = oy * p.stride_h - p.pad_top, ws = ox * p.stride_w - p.pad_left;
          const int64_t he = std::min(hs + p.kernel_h, p.in_h + p.pad_bottom);
          const int64_t we = std::min(ws + p.kernel_w, p.in_w + p.pad_right);
          int64_t sum = 0, valid = 0, mx = INT64_MIN;
          for (int64_t iy = hs; iy < he; ++iy)
            for (int64_t ix = ws; ix < we; ++ix) {
              if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w) continue;
              const int64_t q = r.x[((n * p.in_h + iy) * p.in_w + ix) * p.channels + c];
              sum += q - zi;
              mx = std::max(mx, q);
              ++valid;
            }
          const int64_t zero = std::clamp<int64_t>(zo, r.out.qmin, r.out.qmax);
          if (kind == PoolKind::kMax) {
            if (valid == 0) {
              y.push_back(zero);
              real->push_back(0);
              continue;
            }
            const bool same = r.in.scale() == r.out.scale() && zi == zo;
            y.push_back(
                same ? std::clamp(mx, r.out.qmin, r.out.qmax)
                     : requantize_output(
                           mx - zi,
                           quantize_multiplier(static_cast<double>(r.in.scale()) / r.out.scale()),
                           static_cast<int32_t>(zo), r.out.qmin, r.out.qmax));
            real->push_back((mx - zi) * static_cast<double>(r.in.scale()));
            continue;
          }
          const int64_t count = p.count_include_pad ? (he - hs) * (we - ws) : valid;
          if (count == 0) {
            y.push_back(zero);
            real->push_back(0);
            continue;
          }
          y.push_back(
              requantize_output(sum,
                                quantize_multiplier(static_cast<double>(r.in.scale()) /
                                                    (static_cast<double>(r.out.scale()) * count)),
                                static_cast<int32_t>(zo), r.out.qmin, r.out.qmax));
          real->push_back(static_cast<double>(sum) * r.in.scale() / count);
        }
  return y;
}

TEST(HtpPool2d, OutputSizesFollowTorch) {
  Pool2dParams p;
  p.in_h = 6;
  p.kernel_h = 3;
  p.stride_h = 2;
  p.pad_top = p.pad_bottom = 1;
  EXPECT_EQ(p.out_h(), 3);
  p.ceil_mode = true;
  EXPECT_EQ(p.out_h(), 4);
  p.in_h = 5;
  p.kernel_h = 2;
  p.pad_top = p.pad_bottom = 0;
  EXPECT_EQ(p.out_h(), 3);  // ceil(3 / 2) + 1
  p.in_h = 4;
  p.pad_top = p.pad_bottom = 1;
  EXPECT_EQ(p.out_h(), 3);  // the 4th window would start in the trailing padding
  p.ceil_mode = false;
  EXPECT_EQ(p.out_h(), 3);
}

void random_pools(uint64_t seed, int cases, const std::vector<int64_t>& channels) {
  Rng rng(seed);
  for (int i = 0; i < cases; ++i) {
    const PoolKind kind = i % 2 ? PoolKind::kMax : PoolKind::kAverage;
    rng.dyadic = i % 6 == 5;
    PoolRef r;
    Pool2dParams& p = r.p;
    for (;;) {
      p.batch = rng.uniform(1, 2);
      p.in_h = rng.uniform(1, 9);
      p.in_w = rng.uniform(1, 9);
      p.channels = rng.pick(channels);
      p.kernel_h = rng.uniform(1, 4);
      p.kernel_w = rng.uniform(1, 4);
      p.stride_h = rng.uniform(1, 3);
      p.stride_w = rng.uniform(1, 3);
      p.pad_top = rng.uniform(0, p.kernel_h / 2);
      p.pad_bottom = rng.uniform(0, p.kernel_h / 2);
      p.pad_left = rng.uniform(0, p.kernel_w / 2);
      p.pad_right = rng.uniform(0, p.kernel_w / 2);
      p.ceil_mode = rng.coin();
      p.count_include_pad = rng.coin();
      p.threads = static_cast<int>(rng.uniform(1, 2));
      if (p.out_h() >= 1 && p.out_w() >= 1) break;
    }
    const DType din = rng.pick(kActs);
    r.in = random_encoding(rng, din);
    r.out = kind == PoolKind::kMax && rng.coin() ? r.in : random_encoding(rng, rng.pick(kActs));
    if (rng.coin(0.2)) r.out.qmin = r.out.zero_point();
    r.x = rng.codes(static_cast<size_t>(p.batch * p.in_h * p.in_w * p.channels), r.in.qmin,
                    r.in.qmax);
    std::vector<double> real;
    const auto want = ref_pool(kind, r, &real);
    auto pool = QuantPool2d::prepare(kind, p, r.in, r.out);
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    auto xb = to_bytes(r.x, din);
    auto ob = buffer(want.size(), r.out.dtype);
    ASSERT_TRUE(pool->run(xb.data(), ob.data()).ok());
    const auto got = from_bytes(ob, r.out.dtype);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(got[k], want[k]) << "case " << i << " at " << k;
      ASSERT_LE(std::abs(got[k] - fake_quant(real[k], r.out)), 1) << "case " << i;
    }
  }
}

TEST(HtpPool2d, RandomBitExact) {
  std::vector<int64_t> channels(17);
  for (int64_t c = 1; c <= 17; ++c) channels[static_cast<size_t>(c - 1)] = c;
  random_pools(23, 160, channels);
}

TEST(HtpPool2d, WideChannelsBitExact) {
  // Whole 64-byte vectors of channels and tails (the AVX-512 max).
  random_pools(27, 120, {31, 32, 33, 63, 64, 65, 100, 128, 130});
}

TEST(HtpPool2d, Errors) {
  Encoding e = make_encoding(DType::kU8, 0.1f, 0);
  Pool2dParams p;
  p.in_h = p.in_w = 2;
  p.kernel_h = p.kernel_w = 3;
  auto r = QuantPool2d::prepare(PoolKind::kMax, p, e, e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_pool2d: the 3x3 window does not fit the padded 2x2"),
            std::string::npos)
      << r.status().message();
  p.kernel_h = 0;
  EXPECT_FALSE(QuantPool2d::prepare(PoolKind::kAverage, p, e, e).ok());
  p.kernel_h = 1;
  p.pad_left = -2;
  EXPECT_FALSE(QuantPool2d::prepare(PoolKind::kAverage, p, e, e).ok());
}

// ---- reductions

TEST(HtpReduce, RandomAxesBitExact) {
  Rng rng(24);
  for (int i = 0; i < 120; ++i) {
    const bool mean = i % 3 != 0;
    rng.dyadic = i % 5 == 1;
    std::vector<int64_t> shape(static_cast<size_t>(rng.uniform(1, 4)));
    for (auto& d : shape) d = rng.uniform(1, 7);
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (rng.coin()) axes.push_back(rng.coin() ? d : d - static_cast<int64_t>(shape.size()));
    }
    if (axes.empty()) axes.push_back(0);
    const DType din = rng.pick(kActs), dout = rng.pick(kActs);
    Encoding in = random_encoding(rng, din), out = random_encoding(rng, dout);
    const bool keep = rng.coin();
    auto red =
        QuantReduce::prepare(shape, axes, mean, keep, in, out, static_cast<int>(rng.uniform(1, 2)));
    ASSERT_TRUE(red.ok()) << red.status().message();
    auto x = rng.codes(static_cast<size_t>(numel(shape)), in.qmin, in.qmax);
    // Reference: accumulate every input element into its output slot.
    std::vector<bool> reduced(shape.size(), false);
    for (int64_t a : axes)
      reduced[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(shape.size()) : a)] = true;
    std::vector<int64_t> out_shape;
    int64_t count = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (reduced[d]) {
        count *= shape[d];
        if (keep) out_shape.push_back(1);
      } else {
        out_shape.push_back(shape[d]);
      }
    }
    ASSERT_EQ(red->output_shape(), out_shape);
    std::vector<int64_t> sums(static_cast<size_t>(numel(out_shape)), 0);
    for (int64_t f = 0; f < numel(shape); ++f) {
      int64_t rest = f, o = 0, stride = 1;
      for (size_t d = shape.size(); d-- > 0;) {
        const int64_t idx = rest % shape[d];
        rest /= shape[d];
        if (!reduced[d]) {
          o += idx * stride;
          stride *= shape[d];
        }
      }
      sums[static_cast<size_t>(o)] += x[static_cast<size_t>(f)] - in.zero_point();
    }
    auto xb = to_bytes(x, din);
    auto ob = buffer(sums.size(), dout);
    ASSERT_TRUE(red->run(xb.data(), ob.data()).ok());
    const auto got = from_bytes(ob, dout);
    const FixedPointMultiplier m = quantize_multiplier(
        static_cast<double>(in.scale()) / (static_cast<double>(out.scale()) * (mean ? count : 1)));
    for (size_t k = 0; k < sums.size(); ++k) {
      ASSERT_EQ(got[k], requantize_output(sums[k], m, out.zero_point(), out.qmin, out.qmax))
          << "case " << i << " shape " << fmt::format("{}", fmt::join(shape, ",")) << " axes "
          << fmt::format("{}", fmt::join(axes, ",")) << " mean " << mean << " at " << k;
      const double real = static_cast<double>(sums[k]) * in.scale() / (mean ? count : 1);
      ASSERT_LE(std::abs(got[k] - fake_quant(real, out)), 1);
    }
  }
}

TEST(HtpReduce, Errors) {
  Encoding e = make_encoding(DType::kU8, 0.1f, 0);
  std::vector<int64_t> shape = {2, 3};
  std::vector<int64_t> dup = {1, -1}, out_of_range = {2};
  auto r = QuantReduce::prepare(shape, dup, true, false, e, e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("axis -1 is given twice"), std::string::npos);
  r = QuantReduce::prepare(shape, out_of_range, true, false, e, e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("axis 2 is outside the rank-2 shape"), std::string::npos);
}

}  // namespace
}  // namespace kiln::htp::testing
