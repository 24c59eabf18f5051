// bench_htp_kernels [RUNS [FILTER]]: median and min time of the HTP kernels on model-sized
// shapes, at 1 and 2 threads: resnet18 layer1's 3x3 conv (56x56x64 -> 64) with 8- and 16-bit
// activations and 8/16-bit weights, mobilenet_v2 depthwise and pointwise convs, a fully connected
// layer, elementwise binary ops (same shape and broadcast), a lookup table, pooling, quantize and
// dequantize. FILTER keeps the benchmarks whose name contains it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kiln/backends/htp/kernels.h"
#include "kiln/backends/portable/kernels.h"

using namespace kiln;
using namespace kiln::htp;

namespace {

int g_runs = 30;
std::string g_filter;

void report(const std::string& name, int threads, const std::function<void()>& fn) {
  if (name.find(g_filter) == std::string::npos) return;
  fn();  // warm up (first-touch, oneDNN's first execution)
  std::vector<double> ms;
  for (int i = 0; i < g_runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%-48s threads %d  median_ms %8.3f  min_ms %8.3f\n", name.c_str(), threads,
              ms[ms.size() / 2], ms.front());
}

template <typename T>
std::vector<T> random_codes(size_t n, int64_t lo, int64_t hi, std::mt19937& gen) {
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(gen));
  return v;
}

void bench_conv(const char* name, Conv2dParams p, DType act, DType wdt, int64_t wlo, int64_t whi,
                std::mt19937& gen) {
  const int64_t act_lo = act == DType::kU8 ? 0 : 0, act_hi = act == DType::kU8 ? 255 : 65535;
  Encoding in = make_encoding(act, 0.02f, static_cast<int32_t>((act_hi + 1) / 2));
  Encoding out = make_encoding(act, 0.05f, static_cast<int32_t>((act_hi + 1) / 2));
  std::vector<float> scales(static_cast<size_t>(p.out_c), 0.003f);
  std::vector<int32_t> zps(static_cast<size_t>(p.out_c), 0);
  Encoding w = make_per_axis_encoding(wdt, scales, zps, 3, wlo, whi);
  const int64_t nw = p.kernel_h * p.kernel_w * (p.in_c / p.groups) * p.out_c;
  std::vector<std::byte> wb;
  if (wdt == DType::kI8) {
    auto v = random_codes<int8_t>(static_cast<size_t>(nw), wlo, whi, gen);
    auto b = std::as_bytes(std::span(v));
    wb.assign(b.begin(), b.end());
  } else {
    auto v = random_codes<int16_t>(static_cast<size_t>(nw), wlo, whi, gen);
    auto b = std::as_bytes(std::span(v));
    wb.assign(b.begin(), b.end());
  }
  std::vector<int32_t> bias(static_cast<size_t>(p.out_c), 1000);
  const size_t in_n = static_cast<size_t>(p.batch * p.in_h * p.in_w * p.in_c);
  const size_t esize = dtype_size(act);
  std::vector<std::byte> x(in_n * esize),
      y(static_cast<size_t>(p.batch * p.out_h() * p.out_w() * p.out_c) * esize);
  if (act == DType::kU8) {
    auto v = random_codes<uint8_t>(in_n, act_lo, act_hi, gen);
    std::memcpy(x.data(), v.data(), in_n);
  } else {
    auto v = random_codes<uint16_t>(in_n, act_lo, act_hi, gen);
    std::memcpy(x.data(), v.data(), in_n * 2);
  }
  for (int threads : {1, 2}) {
    // Depthwise: both kernels (auto picks one); otherwise what auto picks.
    std::vector<ConvAlgorithm> algos = {ConvAlgorithm::kAuto};
    if (p.groups > 1) algos = {ConvAlgorithm::kOneDnn, ConvAlgorithm::kDirect};
    for (ConvAlgorithm algo : algos) {
      p.threads = threads;
      auto conv = QuantConv2d::prepare(p, in, wb, w, bias, out, algo);
      if (!conv.ok()) {
        std::printf("%s: %s\n", name, conv.status().message().c_str());
        continue;
      }
      report(std::string(name) + " [" + std::string(algorithm_name(conv->algorithm())) + "]",
             threads, [&] { (void)conv->run(x.data(), y.data()); });
    }
  }
}

// The ops around the convs of resnet18 / mobilenet_v2 int8: adds of two activations with their
// own scales (same shape, per-channel row and scalar broadcast), the stem's max pool, quantize
// of the input and dequantize of an output.
void bench_elementwise(std::mt19937& gen) {
  const int64_t n = 56 * 56 * 64;
  std::vector<int64_t> shape = {1, 56, 56, 64}, row = {64}, scalar = {1};
  Encoding ea = make_encoding(DType::kU8, 0.021f, 131), eb = make_encoding(DType::kU8, 0.037f, 120);
  Encoding eo = make_encoding(DType::kU8, 0.045f, 125);
  Encoding ea16 = make_encoding(DType::kU16, 0.0011f, 31000);
  Encoding eb16 = make_encoding(DType::kU16, 0.0017f, 29000);
  Encoding eo16 = make_encoding(DType::kU16, 0.0021f, 30500);
  auto a = random_codes<uint8_t>(static_cast<size_t>(n), 0, 255, gen);
  auto b = random_codes<uint8_t>(static_cast<size_t>(n), 0, 255, gen);
  auto a16 = random_codes<uint16_t>(static_cast<size_t>(n), 0, 65535, gen);
  auto b16 = random_codes<uint16_t>(static_cast<size_t>(n), 0, 65535, gen);
  std::vector<uint8_t> y(static_cast<size_t>(n));
  std::vector<uint16_t> y16(static_cast<size_t>(n));
  for (int threads : {1, 2}) {
    struct Case {
      const char* name;
      BinaryOp op;
      std::vector<int64_t> b_shape;
    };
    const Case cases[] = {{"add", BinaryOp::kAdd, shape},
                          {"add row-broadcast [64]", BinaryOp::kAdd, row},
                          {"add scalar-broadcast", BinaryOp::kAdd, scalar},
                          {"multiply", BinaryOp::kMultiply, shape},
                          {"maximum", BinaryOp::kMaximum, shape}};
    for (const Case& c : cases) {
      auto k8 = QuantBinary::prepare(c.op, shape, ea, c.b_shape, eb, eo, threads);
      if (k8.ok()) {
        report(std::string("binary ") + c.name + " 56x56x64 u8 (own scales)", threads,
               [&] { (void)k8->run(a.data(), b.data(), y.data()); });
      }
      auto k16 = QuantBinary::prepare(c.op, shape, ea16, c.b_shape, eb16, eo16, threads);
      if (k16.ok()) {
        report(std::string("binary ") + c.name + " 56x56x64 u16 (own scales)", threads,
               [&] { (void)k16->run(a16.data(), b16.data(), y16.data()); });
      }
    }

    // resnet18's stem pool: 112x112x64 -> 56x56x64, 3x3 stride 2 pad 1.
    Pool2dParams pp;
    pp.in_h = pp.in_w = 112;
    pp.channels = 64;
    pp.kernel_h = pp.kernel_w = 3;
    pp.stride_h = pp.stride_w = 2;
    pp.pad_top = pp.pad_left = pp.pad_bottom = pp.pad_right = 1;
    pp.threads = threads;
    auto x = random_codes<uint8_t>(112 * 112 * 64, 0, 255, gen);
    auto x16 = random_codes<uint16_t>(112 * 112 * 64, 0, 65535, gen);
    for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage}) {
      const std::string kn = kind == PoolKind::kMax ? "max_pool" : "avg_pool";
      auto p8 = QuantPool2d::prepare(kind, pp, ea, kind == PoolKind::kMax ? ea : eo);
      if (p8.ok()) {
        report(kn + " 3x3 s2 112x112x64 u8", threads, [&] { (void)p8->run(x.data(), y.data()); });
      }
      auto p16 = QuantPool2d::prepare(kind, pp, ea16, kind == PoolKind::kMax ? ea16 : eo16);
      if (p16.ok()) {
        report(kn + " 3x3 s2 112x112x64 u16", threads,
               [&] { (void)p16->run(x16.data(), y16.data()); });
      }
    }

    // The input quantize (1x224x224x3) and a dequantize of 56x56x64 codes.
    std::uniform_real_distribution<float> d(-2.5f, 2.5f);
    std::vector<float> img(224 * 224 * 3), f(static_cast<size_t>(n));
    for (auto& v : img) v = d(gen);
    std::vector<uint8_t> qimg(img.size());
    std::vector<uint16_t> qimg16(img.size());
    std::vector<int64_t> img_shape = {1, 224, 224, 3};
    Encoding ein = make_encoding(DType::kU8, 0.0187f, 114);
    Encoding ein16 = make_encoding(DType::kU16, 0.0000763f, 32768);
    report("quantize f32->u8 1x224x224x3", threads,
           [&] { (void)quantize(img.data(), qimg.data(), img_shape, ein, threads); });
    report("quantize f32->u16 1x224x224x3", threads,
           [&] { (void)quantize(img.data(), qimg16.data(), img_shape, ein16, threads); });
    report("dequantize u8->f32 56x56x64", threads,
           [&] { (void)dequantize(a.data(), f.data(), shape, ea, threads); });
    report("dequantize u16->f32 56x56x64", threads,
           [&] { (void)dequantize(a16.data(), f.data(), shape, ea16, threads); });
  }

  // The HTP runtime's Transpose of codes used to be the portable permute (plus a copy into the
  // planned output); its own permute lives in the runtime (kiln run --profile times it).
  Tensor nchw(DType::kU8, {1, 3, 224, 224});
  std::vector<uint8_t> nhwc(static_cast<size_t>(nchw.numel()));
  portable::SimpleKernelContext ctx;
  portable::KernelArgs args;
  args.inputs.push_back(portable::KernelInput::of(&nchw));
  args.attrs.push_back({"dims", std::vector<int64_t>{0, 2, 3, 1}});
  const portable::KernelFn permute = portable::find_kernel("permute");
  report("transpose u8 1x3x224x224 NCHW->NHWC (portable permute)", 1, [&] {
    std::vector<Tensor> outs;
    (void)permute(ctx, args, &outs);
    std::memcpy(nhwc.data(), outs[0].data(), nhwc.size());
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_runs = std::max(1, std::atoi(argv[1]));
  if (argc > 2) g_filter = argv[2];
  std::mt19937 gen(1);
  Conv2dParams r18;
  r18.in_h = r18.in_w = 56;
  r18.in_c = r18.out_c = 64;
  r18.kernel_h = r18.kernel_w = 3;
  r18.pad_top = r18.pad_left = r18.pad_bottom = r18.pad_right = 1;
  bench_conv("conv3x3 56x56x64->64 u8 x i8", r18, DType::kU8, DType::kI8, -127, 127, gen);
  bench_conv("conv3x3 56x56x64->64 u8 x i4", r18, DType::kU8, DType::kI8, -8, 7, gen);
  bench_conv("conv3x3 56x56x64->64 u16 x i8", r18, DType::kU16, DType::kI8, -127, 127, gen);
  bench_conv("conv3x3 56x56x64->64 u16 x i16", r18, DType::kU16, DType::kI16, -32767, 32767, gen);
  Conv2dParams stem;  // resnet18's first conv: 7x7 stride 2 over 3 channels, 112x112x64 out
  stem.in_h = stem.in_w = 224;
  stem.in_c = 3;
  stem.out_c = 64;
  stem.kernel_h = stem.kernel_w = 7;
  stem.stride_h = stem.stride_w = 2;
  stem.pad_top = stem.pad_left = stem.pad_bottom = stem.pad_right = 3;
  bench_conv("conv7x7 s2 224x224x3->64 u8 x i8", stem, DType::kU8, DType::kI8, -127, 127, gen);
  Conv2dParams dw;
  dw.in_h = dw.in_w = 112;
  dw.in_c = dw.out_c = dw.groups = 32;
  dw.kernel_h = dw.kernel_w = 3;
  dw.pad_top = dw.pad_left = dw.pad_bottom = dw.pad_right = 1;
  bench_conv("dwconv3x3 112x112x32 u8", dw, DType::kU8, DType::kI8, -127, 127, gen);
  Conv2dParams dw2 = dw;
  dw2.in_h = dw2.in_w = 56;
  dw2.in_c = dw2.out_c = dw2.groups = 144;
  dw2.stride_h = dw2.stride_w = 2;
  bench_conv("dwconv3x3 s2 56x56x144 u8", dw2, DType::kU8, DType::kI8, -127, 127, gen);
  bench_conv("dwconv3x3 s2 56x56x144 u16", dw2, DType::kU16, DType::kI8, -127, 127, gen);
  Conv2dParams pw;
  pw.in_h = pw.in_w = 56;
  pw.in_c = 24;
  pw.out_c = 144;
  bench_conv("conv1x1 56x56x24->144 u8", pw, DType::kU8, DType::kI8, -127, 127, gen);

  // fp16 precision: the float conv through oneDNN f32 plus rounding every output to half.
  for (int threads : {1, 2}) {
    Conv2dParams p = r18;
    p.threads = threads;
    std::uniform_real_distribution<float> d(-1, 1);
    std::vector<float> w(9 * 64 * 64), x(56 * 56 * 64), y(56 * 56 * 64);
    for (auto& v : w) v = d(gen);
    for (auto& v : x) v = d(gen);
    round_to_half(x.data(), x.size());
    for (bool fp16 : {false, true}) {
      auto conv = FloatConv2d::prepare(p, w, {}, fp16);
      if (conv.ok()) {
        report(fp16 ? "conv3x3 56x56x64->64 fp16" : "conv3x3 56x56x64->64 f32", threads,
               [&] { (void)conv->run(x.data(), y.data()); });
      }
    }
  }

  // Fully connected 64x512 -> 1000 (a classifier head on a batch) and add / LUT / pool.
  for (int threads : {1, 2}) {
    FullyConnectedParams fp{64, 512, 1000, threads};
    Encoding in = make_encoding(DType::kU8, 0.02f, 128), out = make_encoding(DType::kU8, 0.1f, 128);
    Encoding w = make_encoding(DType::kI8, 0.003f, 0);
    auto wv = random_codes<int8_t>(512 * 1000, -127, 127, gen);
    auto x = random_codes<uint8_t>(64 * 512, 0, 255, gen);
    std::vector<uint8_t> y(64 * 1000);
    auto fc = QuantFullyConnected::prepare(fp, in, std::as_bytes(std::span(wv)), w, {}, out);
    if (fc.ok())
      report("fully_connected 64x512 -> 1000 u8", threads,
             [&] { (void)fc->run(x.data(), y.data()); });

    std::vector<int64_t> shape = {1, 56, 56, 64};
    auto a = random_codes<uint8_t>(56 * 56 * 64, 0, 255, gen), b = a;
    std::vector<uint8_t> s(a.size());
    auto add = QuantBinary::prepare(BinaryOp::kAdd, shape, in, shape, out, out, threads);
    if (add.ok())
      report("add 56x56x64 u8", threads, [&] { (void)add->run(a.data(), b.data(), s.data()); });
    Encoding in16 = make_encoding(DType::kU16, 0.001f, 30000);
    auto a16 = random_codes<uint16_t>(56 * 56 * 64, 0, 65535, gen), b16 = a16;
    std::vector<uint16_t> s16(a16.size());
    auto add16 = QuantBinary::prepare(BinaryOp::kAdd, shape, in16, shape, in16, in16, threads);
    if (add16.ok())
      report("add 56x56x64 u16", threads,
             [&] { (void)add16->run(a16.data(), b16.data(), s16.data()); });
    auto lut = Lut::prepare(in, out, unary_function(UnaryFunction::kSigmoid), threads);
    if (lut.ok())
      report("lut sigmoid 56x56x64 u8", threads,
             [&] { (void)lut->run(a.data(), s.data(), static_cast<int64_t>(a.size())); });
    Pool2dParams pp;
    pp.in_h = pp.in_w = 56;
    pp.channels = 64;
    pp.kernel_h = pp.kernel_w = 3;
    pp.stride_h = pp.stride_w = 2;
    pp.pad_top = pp.pad_left = pp.pad_bottom = pp.pad_right = 1;
    pp.threads = threads;
    auto mp = QuantPool2d::prepare(PoolKind::kMax, pp, in, in);
    if (mp.ok())
      report("max_pool 3x3 s2 56x56x64 u8", threads, [&] { (void)mp->run(a.data(), s.data()); });
  }
  bench_elementwise(gen);
  return 0;
}
