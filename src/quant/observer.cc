#include "kiln/quant/observer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::quant {
namespace {

// The tensor's values as floats (a copy only when it is not f32 already).
std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kF32) {
    std::copy_n(t.data_as<float>(), v.size(), v.data());
  } else {
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(t.scalar_at(i));
  }
  return v;
}

// Min and max ignoring NaN and infinities; false when every value is NaN (or there are none).
bool finite_range(const float* data, int64_t n, float* lo, float* hi) {
  float a = std::numeric_limits<float>::infinity(), b = -a;
  for (int64_t i = 0; i < n; ++i) {
    float x = data[i];
    if (!(std::fabs(x) <= std::numeric_limits<float>::max())) continue;  // NaN and infinities
    if (x < a) a = x;
    if (x > b) b = x;
  }
  *lo = a;
  *hi = b;
  return a <= b;
}

}  // namespace

void Observer::observe(const Tensor& t) {
  if (t.numel() == 0) return;
  if (t.dtype() == DType::kF32) {
    observe(t.data_as<float>(), t.numel());
    return;
  }
  std::vector<float> v = as_floats(t);
  observe(v.data(), static_cast<int64_t>(v.size()));
}

void Observer::observe(const float* data, int64_t n) {
  float lo = 0, hi = 0;
  if (!finite_range(data, n, &lo, &hi)) return;
  if (samples_ == 0 || kind_ == ObserverKind::kMinMax || kind_ == ObserverKind::kHistogram) {
    min_ = samples_ == 0 ? lo : std::min(min_, lo);
    max_ = samples_ == 0 ? hi : std::max(max_, hi);
  } else {
    // torch's MovingAverageMinMaxObserver: the first sample sets the range, later ones move it.
    const auto c = static_cast<float>(kAveragingConstant);
    min_ = min_ + c * (lo - min_);
    max_ = max_ + c * (hi - max_);
  }
  if (kind_ == ObserverKind::kHistogram) add_to_histogram(data, n, lo, hi);
  ++samples_;
}

void Observer::add_to_histogram(const float* data, int64_t n, float lo, float hi) {
  const int bins = kHistogramBins;
  if (histogram_.empty()) {
    histogram_.assign(bins, 0.0);
    hist_min_ = lo;
    hist_max_ = hi;
  } else if (lo < hist_min_ || hi > hist_max_) {
    // Widen the range and spread each old bin's count over the new bins it overlaps.
    float new_min = std::min(lo, hist_min_), new_max = std::max(hi, hist_max_);
    std::vector<double> widened(bins, 0.0);
    const double old_w = (static_cast<double>(hist_max_) - hist_min_) / bins;
    const double new_w = (static_cast<double>(new_max) - new_min) / bins;
    for (int i = 0; i < bins; ++i) {
      double count = histogram_[i];
      if (count == 0) continue;
      double b0 = hist_min_ + i * old_w, b1 = b0 + old_w;
      if (old_w <= 0) {
        int j = std::clamp(static_cast<int>((b0 - new_min) / new_w), 0, bins - 1);
        widened[j] += count;
        continue;
      }
      int j0 = std::clamp(static_cast<int>((b0 - new_min) / new_w), 0, bins - 1);
      int j1 = std::clamp(static_cast<int>((b1 - new_min) / new_w), 0, bins - 1);
      for (int j = j0; j <= j1; ++j) {
        double c0 = std::max(b0, new_min + j * new_w), c1 = std::min(b1, new_min + (j + 1) * new_w);
        if (c1 > c0) widened[j] += count * (c1 - c0) / old_w;
      }
    }
    histogram_ = std::move(widened);
    hist_min_ = new_min;
    hist_max_ = new_max;
  }
  const double width = static_cast<double>(hist_max_) - hist_min_;
  for (int64_t i = 0; i < n; ++i) {
    float x = data[i];
    if (!(std::fabs(x) <= std::numeric_limits<float>::max())) continue;
    int b = width > 0 ? static_cast<int>((x - hist_min_) / width * bins) : 0;
    histogram_[std::clamp(b, 0, bins - 1)] += 1;
  }
}

// torch's HistogramObserver._compute_quantization_error: the L2 error of quantizing the
// histogram's mass, assumed uniform within each bin, onto `levels` steps spanning bins
// [start_bin, end_bin].
double Observer::quantization_error(int64_t start_bin, int64_t end_bin, int64_t levels) const {
  const int bins = kHistogramBins;
  const double bin_w = (static_cast<double>(hist_max_) - hist_min_) / bins;
  const double dst_w = bin_w * static_cast<double>(end_bin - start_bin + 1) / static_cast<double>(levels);
  if (dst_w == 0) return 0;
  auto cube_diff = [](double begin, double end) { return (end * end * end - begin * begin * begin) / 3; };
  const double half = dst_w / 2;
  const double inner = cube_diff(-half, half);
  double norm = 0;
  for (int i = 0; i < bins; ++i) {
    if (histogram_[i] == 0) continue;
    const double density = histogram_[i] / bin_w;
    const double src_begin = static_cast<double>(i - start_bin) * bin_w, src_end = src_begin + bin_w;
    const double last = static_cast<double>(levels - 1);
    const double dst_begin = std::clamp(std::floor(src_begin / dst_w), 0.0, last);
    const double dst_end = std::clamp(std::floor(src_end / dst_w), 0.0, last);
    const double begin_center = (dst_begin + 0.5) * dst_w, end_center = (dst_end + 0.5) * dst_w;
    double n = cube_diff(src_begin - begin_center, half);
    n += (dst_end - dst_begin - 1) * inner;
    n += cube_diff(-half, src_end - end_center);
    norm += density * n;
  }
  return norm;
}

std::pair<float, float> Observer::range_for(int64_t levels) const {
  if (kind_ != ObserverKind::kHistogram || histogram_.empty() || hist_max_ <= hist_min_) return {min_, max_};
  // torch's _non_linear_param_search: shrink the range from whichever end holds less mass, one
  // small quantile step at a time, while the quantization error keeps falling.
  const int bins = kHistogramBins;
  std::vector<double> csum(bins);
  double total = 0;
  for (int i = 0; i < bins; ++i) csum[i] = total += histogram_[i];
  const double step = 1e-5;
  double alpha = 0, beta = 1;
  int64_t start = 0, end = bins - 1;
  double best = std::numeric_limits<double>::infinity();
  while (alpha < beta) {
    double next_alpha = alpha + step, next_beta = beta - step;
    int64_t l = start, r = end;
    while (l < end && csum[l] < next_alpha * total) ++l;
    while (r > start && csum[r] > next_beta * total) --r;
    int64_t next_start = start, next_end = end;
    if (l - start > end - r) {
      next_start = l;
      alpha = next_alpha;
    } else {
      next_end = r;
      beta = next_beta;
    }
    if (next_start == start && next_end == end) continue;
    double err = quantization_error(next_start, next_end, levels);
    if (err > best) break;
    best = err;
    start = next_start;
    end = next_end;
  }
  const double bin_w = (static_cast<double>(hist_max_) - hist_min_) / bins;
  return {static_cast<float>(hist_min_ + bin_w * static_cast<double>(start)),
          static_cast<float>(hist_min_ + bin_w * static_cast<double>(end + 1))};
}

QParams Observer::qparams(const QuantSpec& spec) const {
  auto [lo, hi] = range_for(spec.quant_max - spec.quant_min + 1);
  return qparams_for_range(lo, hi, spec);
}

ChannelRanges channel_ranges(const Tensor& t, int64_t axis) {
  ChannelRanges r;
  const int64_t channels = t.rank() == 0 ? 1 : t.dim(static_cast<size_t>(axis));
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < t.rank(); ++d) inner *= t.dim(d);
  r.min.assign(static_cast<size_t>(channels), std::numeric_limits<float>::infinity());
  r.max.assign(static_cast<size_t>(channels), -std::numeric_limits<float>::infinity());
  std::vector<float> v = as_floats(t);
  for (size_t i = 0; i < v.size(); ++i) {
    size_t c = static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels);
    r.min[c] = std::min(r.min[c], v[i]);
    r.max[c] = std::max(r.max[c], v[i]);
  }
  for (size_t c = 0; c < r.min.size(); ++c) {
    if (r.min[c] > r.max[c]) r.min[c] = r.max[c] = 0;  // an empty or all-NaN channel
  }
  return r;
}

QParams weight_qparams(const Tensor& t, const QuantSpec& spec) {
  if (spec.qscheme != QScheme::kPerChannelSymmetric || t.rank() == 0) {
    std::vector<float> v = as_floats(t);
    float lo = 0, hi = 0;
    if (!finite_range(v.data(), static_cast<int64_t>(v.size()), &lo, &hi)) lo = hi = 0;
    QuantSpec s = spec;
    if (s.qscheme == QScheme::kPerChannelSymmetric) s.qscheme = QScheme::kPerTensorSymmetric;
    return qparams_for_range(lo, hi, s);
  }
  ChannelRanges r = channel_ranges(t, spec.ch_axis);
  QParams p;
  p.axis = spec.ch_axis;
  QuantSpec s = spec;
  s.qscheme = QScheme::kPerTensorSymmetric;
  for (size_t c = 0; c < r.min.size(); ++c) {
    QParams one = qparams_for_range(r.min[c], r.max[c], s);
    p.scales.push_back(one.scales[0]);
    p.zero_points.push_back(one.zero_points[0]);
  }
  return p;
}

Tensor quantize_tensor(const Tensor& t, const QParams& params, DType dtype, int64_t quant_min,
                       int64_t quant_max) {
  Tensor out(dtype, t.shape());
  std::vector<float> v = as_floats(t);
  int64_t channels = 1, inner = 1;
  if (params.axis >= 0 && t.rank() > 0) {
    channels = t.dim(static_cast<size_t>(params.axis));
    for (size_t d = static_cast<size_t>(params.axis) + 1; d < t.rank(); ++d) inner *= t.dim(d);
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    size_t c = channels == 1 ? 0 : static_cast<size_t>((i / inner) % channels);
    out.set_scalar_at(i, static_cast<double>(quantize_value(v[static_cast<size_t>(i)], params.scales[c],
                                                            params.zero_points[c], quant_min, quant_max)));
  }
  return out;
}

}  // namespace kiln::quant
