// Quantized conv2d and fully connected: validation, weight preparation, the oneDNN u8s8s32 path.
//
// Exactness of the oneDNN path. Every input code is made unsigned (u = x + shift, zu = zx +
// shift, so x - zx = u - zu) and split into 8-bit planes u = sum_p 256^p u_p; the weights minus
// their zero points w' are split into balanced signed digits w' = sum_q B^q d_q with
// d_q in [-B/2, B/2). The input is padded with zu, so
//   acc = bias + sum (u - zu) w' = bias - zu * sum w' + sum_{p,q} 256^p B^q (sum u_p d_q),
// where each inner sum is one u8 x s8 -> s32 oneDNN convolution over the same taps. With VNNI
// (vpdpbusd: four u8*s8 products summed in int32, no intermediate saturation) B = 256 and each
// inner sum is exact when 255 * sum |d_q| < 2^31, which prepare checks per output channel.
// Without VNNI oneDNN multiplies with vpmaddubsw, which saturates the sum of two u8*s8 products
// to int16; B = 128 keeps |d| <= 64 and 2 * 255 * 64 < 2^15, so that is exact too.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "conv_engine.h"

namespace kiln::htp {

using detail::Range;

int64_t Conv2dParams::out_h() const {
  const int64_t ext = dilation_h * (kernel_h - 1) + 1;
  const int64_t span = in_h + pad_top + pad_bottom - ext;
  if (stride_h <= 0 || span < 0) return 0;
  return span / stride_h + 1;
}

int64_t Conv2dParams::out_w() const {
  const int64_t ext = dilation_w * (kernel_w - 1) + 1;
  const int64_t span = in_w + pad_left + pad_right - ext;
  if (stride_w <= 0 || span < 0) return 0;
  return span / stride_w + 1;
}

std::string_view algorithm_name(ConvAlgorithm a) {
  switch (a) {
    case ConvAlgorithm::kAuto:
      return "auto";
    case ConvAlgorithm::kOneDnn:
      return "onednn";
    case ConvAlgorithm::kDirect:
      return "direct";
  }
  return "?";
}

Status detail::check_conv_geometry(const char* op, const Conv2dParams& p) {
  const std::pair<const char*, int64_t> positive[] = {{"batch", p.batch},
                                                      {"in_h", p.in_h},
                                                      {"in_w", p.in_w},
                                                      {"in_c", p.in_c},
                                                      {"out_c", p.out_c},
                                                      {"kernel_h", p.kernel_h},
                                                      {"kernel_w", p.kernel_w},
                                                      {"stride_h", p.stride_h},
                                                      {"stride_w", p.stride_w},
                                                      {"dilation_h", p.dilation_h},
                                                      {"dilation_w", p.dilation_w},
                                                      {"groups", p.groups}};
  for (auto [name, v] : positive) {
    if (v < 1 || v > (int64_t{1} << 31)) {
      return invalid_argument("{}: {} is {}, expected 1 to 2^31", op, name, v);
    }
  }
  const std::pair<const char*, int64_t> pads[] = {{"pad_top", p.pad_top},
                                                  {"pad_left", p.pad_left},
                                                  {"pad_bottom", p.pad_bottom},
                                                  {"pad_right", p.pad_right}};
  for (auto [name, v] : pads) {
    if (v < 0 || v > (int64_t{1} << 20)) {
      return invalid_argument("{}: {} is {}, expected 0 to 2^20", op, name, v);
    }
  }
  if (p.in_c % p.groups != 0 || p.out_c % p.groups != 0) {
    return invalid_argument("{}: groups {} does not divide in_c {} and out_c {}", op, p.groups,
                            p.in_c, p.out_c);
  }
  if (p.out_h() < 1 || p.out_w() < 1) {
    return invalid_argument(
        "{}: output would be {}x{}: the dilated {}x{} kernel does not fit the padded {}x{} input",
        op, p.out_h(), p.out_w(), p.kernel_h, p.kernel_w, p.in_h + p.pad_top + p.pad_bottom,
        p.in_w + p.pad_left + p.pad_right);
  }
  const int64_t dims_in[] = {p.batch, p.in_h + p.pad_top + p.pad_bottom,
                             p.in_w + p.pad_left + p.pad_right, p.in_c, 2};
  const int64_t dims_out[] = {p.batch, p.out_h(), p.out_w(), p.out_c, 8};
  const int64_t dims_w[] = {p.kernel_h, p.kernel_w, p.in_c / p.groups, p.out_c};
  for (auto dims : {std::span<const int64_t>(dims_in), std::span<const int64_t>(dims_out),
                    std::span<const int64_t>(dims_w)}) {
    auto n = detail::checked_numel(dims, op);
    if (!n.ok()) return n.status();
  }
  if (p.threads < 1) return invalid_argument("{}: threads is {}, expected >= 1", op, p.threads);
  return Status::Ok();
}

namespace {

// Balanced base-`base` digits of every value: digits[q][i], as few as represent all values.
std::vector<std::vector<int8_t>> signed_digits(const std::vector<int32_t>& values, int64_t base) {
  std::vector<std::vector<int8_t>> digits;
  std::vector<int64_t> rest(values.begin(), values.end());
  const int64_t half = base / 2;
  for (;;) {
    bool all_zero = true;
    for (int64_t r : rest) all_zero = all_zero && r == 0;
    if (all_zero && !digits.empty()) break;
    std::vector<int8_t> d(rest.size());
    for (size_t i = 0; i < rest.size(); ++i) {
      const int64_t v = ((rest[i] + half) % base + base) % base - half;
      d[i] = static_cast<int8_t>(v);
      rest[i] = (rest[i] - v) / base;
    }
    digits.push_back(std::move(d));
  }
  return digits;
}

}  // namespace

Status ConvEngine::prepare(const Encoding& input, std::span<const std::byte> weights,
                           const Encoding& weight, std::span<const int32_t> bias_values,
                           const Encoding& output, ConvAlgorithm requested) {
  KILN_RETURN_IF_ERROR(detail::check_conv_geometry(op, p));
  oh = p.out_h();
  ow = p.out_w();
  cig = p.in_c / p.groups;
  cog = p.out_c / p.groups;
  depthwise = !fc && p.groups > 1 && cig == 1;
  const std::string what = std::string(op);

  // Encodings.
  KILN_RETURN_IF_ERROR(validate_encoding(input, what + ": input"));
  KILN_RETURN_IF_ERROR(validate_encoding(weight, what + ": weight"));
  KILN_RETURN_IF_ERROR(validate_encoding(output, what + ": output"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(input, what + ": input"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(output, what + ": output"));
  if (detail::storage_bits(input.dtype) > 16) {
    return unsupported("{}: input dtype {} is not supported (u8, i8, u16, i16)", op,
                       dtype_name(input.dtype));
  }
  if (detail::storage_bits(weight.dtype) > 16) {
    return unsupported("{}: weight dtype {} is not supported (i8, u8, i16, u16)", op,
                       dtype_name(weight.dtype));
  }
  const int64_t cout = p.out_c;
  const int32_t channel_axis = fc ? 0 : 3;
  if (weight.is_per_axis()) {
    if (weight.axis != channel_axis) {
      return invalid_argument("{}: weight encoding axis is {}, expected {} (output channels)", op,
                              weight.axis, channel_axis);
    }
    if (static_cast<int64_t>(weight.size()) != cout) {
      return invalid_argument(
          "{}: weight encoding has {} scales, expected {} (one per output "
          "channel)",
          op, weight.size(), cout);
    }
  }

  // Weights: HWIO (fully connected: [N, K], stored transposed as [1, 1, K, N]).
  const int64_t taps = p.kernel_h * p.kernel_w * cig;
  const int64_t count = taps * cout;
  const size_t esize = dtype_size(weight.dtype);
  if (weights.size() != static_cast<size_t>(count) * esize) {
    return invalid_argument("{}: weights have {} bytes, expected {} ({} values of {})", op,
                            weights.size(), static_cast<size_t>(count) * esize, count,
                            dtype_name(weight.dtype));
  }
  w.assign(static_cast<size_t>(count), 0);
  Status bad;
  detail::dispatch_storage(weight.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < count && bad.ok(); ++i) {
      T v;
      std::memcpy(&v, weights.data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
      const int64_t c = fc ? i / taps : i % cout;
      const int64_t k = fc ? i % taps : i / cout;
      if (v < weight.qmin || v > weight.qmax) {
        bad = invalid_argument(
            "{}: weight value {} at index {} is outside the encoding's range "
            "[{}, {}]",
            op, static_cast<int64_t>(v), i, weight.qmin, weight.qmax);
        return;
      }
      w[static_cast<size_t>(k * cout + c)] =
          static_cast<int32_t>(static_cast<int64_t>(v) - weight.zero_point(static_cast<size_t>(c)));
    }
  });
  KILN_RETURN_IF_ERROR(bad);
  if (!bias_values.empty() && static_cast<int64_t>(bias_values.size()) != cout) {
    return invalid_argument("{}: bias has {} values, expected {} (one per output channel)", op,
                            bias_values.size(), cout);
  }
  bias.assign(static_cast<size_t>(cout), 0);
  for (size_t c = 0; c < bias_values.size(); ++c) bias[c] = bias_values[c];

  // Input.
  in_dtype = input.dtype;
  const Range in_range = detail::storage_range(input.dtype);
  in_shift = -in_range.lo;
  zx = input.zero_point();
  maxabs_x = detail::max_abs_centered(input);
  planes = detail::storage_bits(input.dtype) > 8 ? 2 : 1;

  // Per-channel sums and the bounds that pick the arithmetic.
  std::vector<int64_t> sum_w(static_cast<size_t>(cout), 0), sum_abs(static_cast<size_t>(cout), 0);
  for (int64_t k = 0; k < taps; ++k) {
    for (int64_t c = 0; c < cout; ++c) {
      const int64_t v = w[static_cast<size_t>(k * cout + c)];
      sum_w[c] += v;
      sum_abs[c] += v < 0 ? -v : v;
    }
  }
  int64_t max_acc = 0;
  for (int64_t c = 0; c < cout; ++c) {
    max_acc = std::max(max_acc, maxabs_x * sum_abs[c] + std::abs(bias[c]));
  }
  if (max_acc >= (int64_t{1} << 62)) {
    return unsupported(
        "{}: accumulators could reach {} (> 2^62): too many taps ({}) for {}-bit "
        "operands",
        op, max_acc, taps, detail::storage_bits(weight.dtype));
  }

  std::vector<double> real(static_cast<size_t>(cout));
  for (int64_t c = 0; c < cout; ++c) {
    real[c] = static_cast<double>(input.scale()) * weight.scale(static_cast<size_t>(c)) /
              static_cast<double>(output.scale());
  }
  stage.set_output(real, output);
  bool all_fast = true;
  for (const auto& m : stage.m) all_fast = all_fast && detail::fast_requant_ok(m);
  stage.fast = all_fast && max_acc < (int64_t{1} << 31);
  stage.max_abs_acc = max_acc;
  stage.finish();

  algo = requested;
  if (requested == ConvAlgorithm::kAuto) {
    // Depthwise: oneDNN's u8 kernel beats kiln's loop on 8-bit inputs; 16-bit inputs would
    // need two oneDNN passes and the int64 combination, where the direct kernel is ~10x faster.
    algo = depthwise && planes > 1 ? ConvAlgorithm::kDirect : ConvAlgorithm::kOneDnn;
  }
  if (algo == ConvAlgorithm::kOneDnn) {
    Status s = prepare_onednn();
    if (!s.ok()) {
      if (requested == ConvAlgorithm::kOneDnn) return s;
      algo = ConvAlgorithm::kDirect;
    }
  }
  if (algo == ConvAlgorithm::kDirect) {
    stage.c0 = bias;
    dnnl.reset();
    if (depthwise) {
      int64_t max_raw = 0;
      for (int64_t c = 0; c < cout; ++c) max_raw = std::max(max_raw, maxabs_x * sum_abs[c]);
      depthwise_i32 = max_raw < (int64_t{1} << 31);
    }
  } else {
    const int64_t zu = zx + in_shift;
    stage.c0.resize(static_cast<size_t>(cout));
    for (int64_t c = 0; c < cout; ++c) stage.c0[c] = bias[c] - zu * sum_w[c];
  }
  return Status::Ok();
}

Status ConvEngine::prepare_onednn() {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  auto state = std::make_unique<DnnlState>();
  state->base = detail::dnnl_has_vnni() ? 256 : 128;
  auto digits = signed_digits(w, state->base);
  const int64_t taps = p.kernel_h * p.kernel_w * cig, cout = p.out_c;
  for (size_t q = 0; q < digits.size(); ++q) {
    for (int64_t c = 0; c < cout; ++c) {
      int64_t s = 0;
      for (int64_t k = 0; k < taps; ++k) s += std::abs(int64_t{digits[q][k * cout + c]});
      if (255 * s >= (int64_t{1} << 31)) {
        return unsupported("{}: onednn: output channel {} could overflow int32 ({} taps)", op, c,
                           taps);
      }
    }
  }
  hp = p.in_h + p.pad_top + p.pad_bottom;
  wp = p.in_w + p.pad_left + p.pad_right;
  const int64_t pn = planes * p.batch;
  try {
    detail::OmpThreadsScope threads(p.threads);
    state->engine = detail::cpu_engine();
    state->stream = dnnl::stream(state->engine);
    dnnl::memory::desc user_w;
    dnnl::memory::desc packed_w;
    if (fc) {
      state->src_md = dnnl::memory::desc({pn * p.in_w, p.in_c}, dt::u8, tag::nc);
      state->dst_md = dnnl::memory::desc({pn * p.in_w, cout}, dt::s32, tag::nc);
      dnnl::memory::desc w_any({cout, p.in_c}, dt::s8, tag::any);
      dnnl::inner_product_forward::desc d(dnnl::prop_kind::forward_inference, state->src_md, w_any,
                                          state->dst_md);
      dnnl::inner_product_forward::primitive_desc pd(d, state->engine);
      state->prim = dnnl::inner_product_forward(pd);
      user_w = dnnl::memory::desc({cout, p.in_c}, dt::s8, {1, cout});
      packed_w = pd.weights_desc();
    } else {
      dnnl::memory::dims wdims, wstrides;
      const int64_t sh = p.kernel_w * cig * cout, sw = cig * cout;
      if (p.groups > 1) {
        wdims = {p.groups, cog, cig, p.kernel_h, p.kernel_w};
        wstrides = {cog, 1, cout, sh, sw};
      } else {
        wdims = {cout, cig, p.kernel_h, p.kernel_w};
        wstrides = {1, cout, sh, sw};
      }
      // The primitive for `rows` output rows, reading the padded input rows they need.
      // Banded primitives run side by side on several threads: each gets its scratchpad from
      // the running thread (oneDNN's library scratchpad is one buffer for all).
      dnnl::primitive_attr attr;
      auto conv_pd = [&](int64_t rows, dnnl::memory::desc* src, dnnl::memory::desc* dst) {
        const int64_t in_rows = rows == oh ? hp : (rows - 1) * p.stride_h + (p.kernel_h - 1) * p.dilation_h + 1;
        *src = dnnl::memory::desc({pn, p.in_c, in_rows, wp}, dt::u8, tag::nhwc);
        *dst = dnnl::memory::desc({pn, cout, rows, ow}, dt::s32, tag::nhwc);
        dnnl::memory::desc w_any(wdims, dt::s8, tag::any);
        dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::convolution_direct, *src, w_any, *dst,
                                          {p.stride_h, p.stride_w},
                                          {p.dilation_h - 1, p.dilation_w - 1}, {0, 0}, {0, 0});
        return dnnl::convolution_forward::primitive_desc(d, attr, state->engine);
      };
      // Bands whose int32 sums take about a third of L2 (1 MiB here), with the input rows
      // and output codes beside them. With several threads each runs whole bands on its own
      // (a multiple of the thread count, so that they finish together).
      const int64_t most = std::max<int64_t>(1, (int64_t{384} << 10) / (ow * cout * 4));
      const int64_t threads = std::max(1, p.threads);
      int64_t bands = (oh + most - 1) / most;
      if (bands > 1) bands = (bands + threads - 1) / threads * threads;
      const int64_t band = (oh + bands - 1) / bands;  // even sizes
      if (planes == 1 && digits.size() == 1 && p.batch == 1 && band < oh) {
        state->band = band;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        if (oh % band != 0) {
          auto tail = conv_pd(oh % band, &state->tail_src_md, &state->tail_dst_md);
          state->tail_scratchpad_md = tail.scratchpad_desc();
          state->tail_prim = dnnl::convolution_forward(tail);
          dnnl::memory user(dnnl::memory::desc(wdims, dt::s8, wstrides), state->engine, digits[0].data());
          state->tail_weights = dnnl::memory(tail.weights_desc(), state->engine);
          dnnl::reorder(user, state->tail_weights).execute(state->stream, user, state->tail_weights);
        }
      }
      auto pd = conv_pd(state->band > 0 ? state->band : oh, &state->src_md, &state->dst_md);
      state->prim = dnnl::convolution_forward(pd);
      state->scratchpad_md = pd.scratchpad_desc();
      user_w = dnnl::memory::desc(wdims, dt::s8, wstrides);
      packed_w = pd.weights_desc();
    }
    for (auto& dq : digits) {
      dnnl::memory user(user_w, state->engine, dq.data());
      dnnl::memory packed(packed_w, state->engine);
      dnnl::reorder(user, packed).execute(state->stream, user, packed);
      state->weights.push_back(packed);
    }
    state->stream.wait();
  } catch (const dnnl::error& e) {
    return unsupported("{}: onednn: {}", op, e.what());
  }
  const bool direct_src = planes == 1 && in_shift == 0 && hp == p.in_h && wp == p.in_w;
  padded_size = direct_src ? 0 : static_cast<size_t>(pn * hp * wp * p.in_c);
  raw_size = digits.size() * static_cast<size_t>(pn * (state->band > 0 ? state->band : oh) * ow * cout);
  if (digits.size() > 1 || planes > 1) stage.fast = false;
  dnnl = std::move(state);
  return Status::Ok();
}

Status ConvEngine::run(const void* in, void* out) {
  if (in == nullptr || out == nullptr) return invalid_argument("{}: null buffer", op);
  if (algo == ConvAlgorithm::kOneDnn) return run_onednn(in, out);
  if (depthwise) {
    run_depthwise(in, out);
  } else {
    run_direct(in, out);
  }
  return Status::Ok();
}

// Scratch shared by the convolutions run on this thread, one buffer per element type: it stays
// warm in the caches from one conv of a graph to the next, where a buffer per conv is cold each
// time (resnet18 int8: 20 convs, up to 3.2 MiB of int32 sums each). Grows to the largest use
// and lives as long as the thread.
namespace {

template <typename T, int kSlot = 0>
T* thread_scratch(size_t count) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < count) {
    buffer = std::vector<T>();
    try {
      buffer.resize(count);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
  }
  return buffer.data();
}

}  // namespace

Status ConvEngine::run_onednn(const void* in, void* out) {
  const int64_t c = p.in_c, n = p.batch;
  const uint8_t* src = static_cast<const uint8_t*>(in);
  int32_t* raw = thread_scratch<int32_t>(raw_size);
  uint8_t* padded = padded_size != 0 ? thread_scratch<uint8_t>(padded_size) : nullptr;
  if (raw == nullptr || (padded_size != 0 && padded == nullptr)) {
    return resource_exhausted("{}: cannot allocate {} bytes of scratch", op, raw_size * 4 + padded_size);
  }
  if (padded != nullptr) {
    const int64_t zu = zx + in_shift;
    const uint8_t pad0 = static_cast<uint8_t>(zu & 255), pad1 = static_cast<uint8_t>(zu >> 8);
    const int64_t plane = n * hp * wp * c;
    // One pass per plane (plane-major chunks): with two threads each writes one plane, which
    // is how oneDNN splits the batch of planes too, so few cache lines move between cores.
    detail::dispatch_storage(in_dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in);
      detail::parallel_for(
          p.threads, planes * n * hp, std::max<int64_t>(1, 8192 / (wp * c)),
          [&](int64_t b, int64_t e) {
            const int64_t left = p.pad_left * c, inner = p.in_w * c,
                          right = (wp - p.pad_left - p.in_w) * c;
            for (int64_t prow = b; prow < e; ++prow) {
              const int64_t pl = prow / (n * hp), row = prow % (n * hp);
              const int64_t y = row % hp - p.pad_top;
              const int shift = 8 * static_cast<int>(pl);
              const uint8_t pad = pl == 0 ? pad0 : pad1;
              uint8_t* d = padded + pl * plane + row * wp * c;
              if (y < 0 || y >= p.in_h) {
                std::memset(d, pad, static_cast<size_t>(wp * c));
                continue;
              }
              std::memset(d, pad, static_cast<size_t>(left));
              std::memset(d + left + inner, pad, static_cast<size_t>(right));
              const T* xr = x + ((row / hp) * p.in_h + y) * inner;
              uint8_t* dst = d + left;
              if constexpr (sizeof(T) == 1) {
                // One plane: u8 as is, i8 shifted by 128 (its top bit flipped).
                if (in_shift == 0) {
                  std::memcpy(dst, xr, static_cast<size_t>(inner));
                } else {
                  for (int64_t i = 0; i < inner; ++i) dst[i] = static_cast<uint8_t>(xr[i]) ^ 0x80;
                }
              } else {
                const int64_t bias = in_shift;
                for (int64_t i = 0; i < inner; ++i) {
                  dst[i] = static_cast<uint8_t>((static_cast<int64_t>(xr[i]) + bias) >> shift);
                }
              }
            }
          });
    });
    src = padded;
  }
  if (dnnl->band > 0) return run_bands(src, out);
  const int64_t rows = n * oh * ow, plane_out = rows * p.out_c;
  try {
    detail::OmpThreadsScope threads(p.threads);
    dnnl::memory src_mem(dnnl->src_md, dnnl->engine, const_cast<uint8_t*>(src));
    for (size_t q = 0; q < dnnl->weights.size(); ++q) {
      dnnl::memory dst_mem(dnnl->dst_md, dnnl->engine,
                           raw + q * static_cast<size_t>(planes * plane_out));
      dnnl->prim.execute(
          dnnl->stream,
          {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, dnnl->weights[q]}, {DNNL_ARG_DST, dst_mem}});
    }
    dnnl->stream.wait();
  } catch (const dnnl::error& e) {
    return internal_error("{}: onednn execution failed: {}", op, e.what());
  }
  std::vector<const int32_t*> raws;
  std::vector<int64_t> coef;
  int64_t wq = 1;
  for (size_t q = 0; q < dnnl->weights.size(); ++q, wq *= dnnl->base) {
    for (int pl = 0; pl < planes; ++pl) {
      raws.push_back(raw + (q * planes + pl) * static_cast<size_t>(plane_out));
      coef.push_back(wq << (8 * pl));
    }
  }
  stage.run(raws, coef, rows, p.out_c, p.out_c, nullptr, nullptr, out, p.threads);
  return Status::Ok();
}

Status ConvEngine::run_bands(const uint8_t* src, void* out) {
  const int64_t band = dnnl->band, in_row = wp * p.in_c, bands = (oh + band - 1) / band;
  // Band b on the calling thread, into `sums` (that thread's scratch).
  auto run_band = [&](int64_t b, int32_t* sums, dnnl::stream& stream) {
    const int64_t y = b * band, rows = std::min(band, oh - y);
    const bool tail = rows < band;
    auto* in = const_cast<uint8_t*>(src) + y * p.stride_h * in_row;
    const dnnl::memory::desc& scratch_md = tail ? dnnl->tail_scratchpad_md : dnnl->scratchpad_md;
    auto* scratch = thread_scratch<uint8_t, 1>(std::max<size_t>(scratch_md.get_size(), 1));
    if (scratch == nullptr) throw std::bad_alloc();
    dnnl::memory src_mem(tail ? dnnl->tail_src_md : dnnl->src_md, dnnl->engine, in);
    dnnl::memory dst_mem(tail ? dnnl->tail_dst_md : dnnl->dst_md, dnnl->engine, sums);
    dnnl::memory scratch_mem(scratch_md, dnnl->engine, scratch);
    (tail ? dnnl->tail_prim : dnnl->prim)
        .execute(stream, {{DNNL_ARG_SRC, src_mem},
                          {DNNL_ARG_WEIGHTS, tail ? dnnl->tail_weights : dnnl->weights[0]},
                          {DNNL_ARG_DST, dst_mem},
                          {DNNL_ARG_SCRATCHPAD, scratch_mem}});
    stream.wait();
    stage.store(sums, rows * ow, p.out_c, p.out_c, out, y * ow);
  };
  // Bands [b0, b1) on the calling thread, its sums in that thread's scratch; an error's text
  // lands in `error`.
  std::mutex mu;
  std::string error;
  auto run_range = [&](int64_t b0, int64_t b1) {
    try {
      int32_t* sums = thread_scratch<int32_t>(raw_size);
      if (sums == nullptr) throw std::bad_alloc();
      dnnl::stream stream(dnnl->engine);
      for (int64_t b = b0; b < b1; ++b) run_band(b, sums, stream);
    } catch (const std::exception& e) {  // dnnl::error, std::bad_alloc
      std::lock_guard<std::mutex> lock(mu);
      error = e.what();
    }
  };
  if (p.threads <= 1) {
    detail::OmpThreadsScope threads(1);
    run_range(0, bands);
  } else {
    // Each thread runs whole bands with oneDNN on that thread alone (inside the parallel region
    // oneDNN does not fork again).
    detail::parallel_for(p.threads, bands, 1, run_range);
  }
  if (!error.empty()) return internal_error("{}: banded onednn execution failed: {}", op, error);
  return Status::Ok();
}

// ---- public wrappers

QuantConv2d::QuantConv2d() = default;
QuantConv2d::QuantConv2d(QuantConv2d&&) noexcept = default;
QuantConv2d& QuantConv2d::operator=(QuantConv2d&&) noexcept = default;
QuantConv2d::~QuantConv2d() = default;

Result<QuantConv2d> QuantConv2d::prepare(const Conv2dParams& p, const Encoding& input,
                                         std::span<const std::byte> weights, const Encoding& weight,
                                         std::span<const int32_t> bias, const Encoding& output,
                                         ConvAlgorithm algorithm) {
  auto engine = std::make_unique<ConvEngine>();
  engine->p = p;
  KILN_RETURN_IF_ERROR(engine->prepare(input, weights, weight, bias, output, algorithm));
  QuantConv2d conv;
  conv.engine_ = std::move(engine);
  return conv;
}

Status QuantConv2d::run(const void* input, void* output) {
  if (!engine_) return invalid_argument("conv2d: run on an unprepared object");
  return engine_->run(input, output);
}

ConvAlgorithm QuantConv2d::algorithm() const {
  return engine_ ? engine_->algo : ConvAlgorithm::kAuto;
}

std::array<int64_t, 4> QuantConv2d::output_shape() const {
  if (!engine_) return {0, 0, 0, 0};
  return {engine_->p.batch, engine_->oh, engine_->ow, engine_->p.out_c};
}

QuantFullyConnected::QuantFullyConnected() = default;
QuantFullyConnected::QuantFullyConnected(QuantFullyConnected&&) noexcept = default;
QuantFullyConnected& QuantFullyConnected::operator=(QuantFullyConnected&&) noexcept = default;
QuantFullyConnected::~QuantFullyConnected() = default;

Result<QuantFullyConnected> QuantFullyConnected::prepare(
    const FullyConnectedParams& p, const Encoding& input, std::span<const std::byte> weights,
    const Encoding& weight, std::span<const int32_t> bias, const Encoding& output,
    ConvAlgorithm algorithm) {
  auto engine = std::make_unique<ConvEngine>();
  engine->op = "fully_connected";
  engine->fc = true;
  engine->p.batch = 1;
  engine->p.in_h = 1;
  engine->p.in_w = p.m;
  engine->p.in_c = p.k;
  engine->p.out_c = p.n;
  engine->p.threads = p.threads;
  if (p.m < 1 || p.k < 1 || p.n < 1) {
    return invalid_argument("fully_connected: m {}, k {}, n {}: each must be >= 1", p.m, p.k, p.n);
  }
  KILN_RETURN_IF_ERROR(engine->prepare(input, weights, weight, bias, output, algorithm));
  QuantFullyConnected fc;
  fc.engine_ = std::move(engine);
  return fc;
}

Status QuantFullyConnected::run(const void* input, void* output) {
  if (!engine_) return invalid_argument("fully_connected: run on an unprepared object");
  return engine_->run(input, output);
}

ConvAlgorithm QuantFullyConnected::algorithm() const {
  return engine_ ? engine_->algo : ConvAlgorithm::kAuto;
}

}  // namespace kiln::htp
