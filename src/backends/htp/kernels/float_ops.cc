// Quantized softmax and layer norm, computed in double between a dequantize and a quantize
// (HTP's own fixed-point approximations are not public; see the header).
#include <cmath>

#include "internal.h"

namespace kiln::htp {

using detail::Range;

namespace {

Status check_io(const Encoding& in, const Encoding& out, const std::string& op) {
  KILN_RETURN_IF_ERROR(validate_encoding(in, op + ": input"));
  KILN_RETURN_IF_ERROR(validate_encoding(out, op + ": output"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(in, op + ": input"));
  KILN_RETURN_IF_ERROR(detail::require_per_tensor(out, op + ": output"));
  if (detail::storage_bits(in.dtype) > 16) {
    return unsupported("{}: input dtype {} is not supported (8- and 16-bit)", op,
                       dtype_name(in.dtype));
  }
  return Status::Ok();
}

}  // namespace

Result<QuantSoftmax> QuantSoftmax::prepare(std::span<const int64_t> shape, int64_t axis,
                                           const Encoding& in, const Encoding& out, float beta,
                                           int threads) {
  KILN_RETURN_IF_ERROR(check_io(in, out, "softmax"));
  KILN_ASSIGN_OR_RETURN(int64_t numel, detail::checked_numel(shape, "softmax"));
  (void)numel;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank) {
    return invalid_argument("softmax: axis {} is outside the rank-{} shape", axis, rank);
  }
  if (!(beta > 0) || !std::isfinite(beta)) {
    return invalid_argument("softmax: beta {} must be positive and finite", beta);
  }
  QuantSoftmax s;
  for (int64_t d = 0; d < ax; ++d) s.outer_ *= shape[d];
  s.count_ = shape[ax];
  for (int64_t d = ax + 1; d < rank; ++d) s.inner_ *= shape[d];
  s.in_ = in;
  s.out_ = out;
  s.threads_ = std::max(1, threads);
  const Range r = detail::storage_range(in.dtype);
  s.exp_.resize(static_cast<size_t>(r.hi - r.lo + 1));
  const double k = static_cast<double>(beta) * in.scale();
  for (size_t d = 0; d < s.exp_.size(); ++d) s.exp_[d] = std::exp(-k * static_cast<double>(d));
  return s;
}

Status QuantSoftmax::run(const void* in, void* out) const {
  if (in == nullptr || out == nullptr) return invalid_argument("softmax: null buffer");
  if (exp_.empty()) return invalid_argument("softmax: run on an unprepared op");
  detail::dispatch_storage(in_.dtype, [&](auto itag) {
    using I = decltype(itag);
    detail::dispatch_storage(out_.dtype, [&](auto otag) {
      using O = decltype(otag);
      const I* x = static_cast<const I*>(in);
      O* y = static_cast<O*>(out);
      detail::parallel_for(threads_, outer_ * inner_, std::max<int64_t>(1, 4096 / count_),
                           [&](int64_t b, int64_t e) {
                             std::vector<double> v(static_cast<size_t>(count_));
                             for (int64_t row = b; row < e; ++row) {
                               const int64_t o = row / inner_, i = row % inner_;
                               const I* xr = x + o * count_ * inner_ + i;
                               O* yr = y + o * count_ * inner_ + i;
                               I mx = xr[0];
                               for (int64_t c = 1; c < count_; ++c) {
                                 mx = std::max(mx, xr[c * inner_]);
                               }
                               double sum = 0;
                               for (int64_t c = 0; c < count_; ++c) {
                                 v[c] = exp_[static_cast<size_t>(mx - xr[c * inner_])];
                                 sum += v[c];
                               }
                               for (int64_t c = 0; c < count_; ++c) {
                                 yr[c * inner_] = static_cast<O>(
                                     quantize_value(static_cast<float>(v[c] / sum), out_.scale(),
                                                    out_.zero_point(), out_.qmin, out_.qmax));
                               }
                             }
                           });
    });
  });
  return Status::Ok();
}

Result<QuantLayerNorm> QuantLayerNorm::prepare(std::span<const int64_t> shape, int64_t axis,
                                               std::span<const float> gamma,
                                               std::span<const float> beta, float epsilon,
                                               const Encoding& in, const Encoding& out, bool rms,
                                               int threads) {
  const std::string op = rms ? "rms_norm" : "layer_norm";
  KILN_RETURN_IF_ERROR(check_io(in, out, op));
  KILN_ASSIGN_OR_RETURN(int64_t numel, detail::checked_numel(shape, op));
  (void)numel;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank) {
    return invalid_argument("{}: axis {} is outside the rank-{} shape", op, axis, rank);
  }
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return invalid_argument("{}: epsilon {} must be >= 0 and finite", op, epsilon);
  }
  QuantLayerNorm l;
  for (int64_t d = 0; d < ax; ++d) l.rows_ *= shape[d];
  for (int64_t d = ax; d < rank; ++d) l.size_ *= shape[d];
  for (auto [name, v] : {std::pair{"gamma", gamma}, std::pair{"beta", beta}}) {
    if (!v.empty() && static_cast<int64_t>(v.size()) != l.size_) {
      return invalid_argument("{}: {} has {} values, expected {} (the normalized elements)", op,
                              name, v.size(), l.size_);
    }
  }
  l.gamma_.assign(gamma.begin(), gamma.end());
  l.beta_.assign(beta.begin(), beta.end());
  l.epsilon_ = epsilon;
  l.rms_ = rms;
  l.in_ = in;
  l.out_ = out;
  l.threads_ = std::max(1, threads);
  return l;
}

Status QuantLayerNorm::run(const void* in, void* out) const {
  if (in == nullptr || out == nullptr) return invalid_argument("layer_norm: null buffer");
  detail::dispatch_storage(in_.dtype, [&](auto itag) {
    using I = decltype(itag);
    detail::dispatch_storage(out_.dtype, [&](auto otag) {
      using O = decltype(otag);
      const I* x = static_cast<const I*>(in);
      O* y = static_cast<O*>(out);
      const double s = in_.scale();
      const int64_t zp = in_.zero_point();
      detail::parallel_for(
          threads_, rows_, std::max<int64_t>(1, 4096 / std::max<int64_t>(size_, 1)),
          [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
              const I* xr = x + r * size_;
              O* yr = y + r * size_;
              // Sums of integers are exact; the moments follow in double.
              int64_t sum = 0;
              for (int64_t i = 0; i < size_; ++i) sum += static_cast<int64_t>(xr[i]) - zp;
              const double mean =
                  rms_ ? 0.0 : s * static_cast<double>(sum) / static_cast<double>(size_);
              double var = 0;
              for (int64_t i = 0; i < size_; ++i) {
                const double d = s * static_cast<double>(static_cast<int64_t>(xr[i]) - zp) - mean;
                var += d * d;
              }
              var /= static_cast<double>(size_);
              const double inv = 1.0 / std::sqrt(var + epsilon_);
              for (int64_t i = 0; i < size_; ++i) {
                double v = (s * static_cast<double>(static_cast<int64_t>(xr[i]) - zp) - mean) * inv;
                if (!gamma_.empty()) v *= gamma_[i];
                if (!beta_.empty()) v += beta_[i];
                yr[i] = static_cast<O>(quantize_value(static_cast<float>(v), out_.scale(),
                                                      out_.zero_point(), out_.qmin, out_.qmax));
              }
            }
          });
    });
  });
  return Status::Ok();
}

}  // namespace kiln::htp
