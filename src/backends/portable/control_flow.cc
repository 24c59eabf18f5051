#include "kiln/backends/portable/control_flow.h"

#include <fmt/format.h>

#include <cstring>

namespace kiln::portable {

Result<std::vector<Tensor>> run_loop(KernelContext& ctx, const Tensor* trip_count,
                                     const Tensor* cond, std::span<const Tensor> operands,
                                     size_t num_carried, std::span<const ScanElement> scan,
                                     const LoopBody& body) {
  if (num_carried > operands.size()) {
    return invalid_argument("{} carried values but {} operands", num_carried, operands.size());
  }
  auto one = [](const Tensor* t, const char* what) -> Result<double> {
    if (t->numel() != 1) {
      return invalid_argument("the {} must hold one element, it is {}", what,
                              format_shape(t->dtype(), t->shape()));
    }
    return t->scalar_at(0);
  };
  int64_t max_trips = INT64_MAX;
  if (trip_count != nullptr) {
    if (!is_integral(trip_count->dtype())) {
      return invalid_argument("the trip count must be an integer, it is {}",
                              format_shape(trip_count->dtype(), trip_count->shape()));
    }
    KILN_ASSIGN_OR_RETURN(double m, one(trip_count, "trip count"));
    max_trips = m >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(m);  // no UB past int64's range
  }
  bool go = true;
  if (cond != nullptr) {
    KILN_ASSIGN_OR_RETURN(double c, one(cond, "condition"));
    go = c != 0;
  }
  std::vector<Tensor> ins(operands.begin(), operands.end());
  ins.insert(ins.begin(), {Tensor(DType::kI64, {}), Tensor(DType::kBool, {})});
  std::vector<std::vector<Tensor>> rows(scan.size());
  int64_t i = 0;
  for (; i < max_trips && go; ++i) {
    ins[0] = Tensor(DType::kI64, {});
    ins[0].set_scalar_at(0, static_cast<double>(i));
    ins[1] = Tensor(DType::kBool, {});
    ins[1].set_scalar_at(0, 1);
    auto r = body(ins);
    if (!r.ok()) return r.status().with_context(fmt::format("iteration {}", i));
    std::vector<Tensor>& outs = *r;
    if (outs.size() != 1 + num_carried + scan.size()) {
      return internal_error("iteration {}: the body returned {} values, expected {}", i,
                            outs.size(), 1 + num_carried + scan.size());
    }
    if (cond != nullptr) {  // without one, ONNX ignores the body's condition
      auto c = one(&outs[0], "condition the body returns");
      if (!c.ok()) return c.status().with_context(fmt::format("iteration {}", i));
      go = *c != 0;
    }
    for (size_t k = 0; k < num_carried; ++k) {
      Tensor& in = ins[2 + k];
      Tensor& out = outs[1 + k];
      if (out.dtype() != in.dtype() || out.shape() != in.shape()) {
        return invalid_argument(
            "iteration {}: carried value {} is {} going into the body and {} "
            "coming out; kiln runs loops whose carried values keep their shape",
            i, k, format_shape(in.dtype(), in.shape()), format_shape(out.dtype(), out.shape()));
      }
      in = std::move(out);
    }
    for (size_t k = 0; k < scan.size(); ++k) {
      Tensor& e = outs[1 + num_carried + k];
      if (!rows[k].empty() &&
          (e.dtype() != rows[k][0].dtype() || e.shape() != rows[k][0].shape())) {
        return invalid_argument("iteration {}: scan output {} is {}, in iteration 0 it was {}", i,
                                k, format_shape(e.dtype(), e.shape()),
                                format_shape(rows[k][0].dtype(), rows[k][0].shape()));
      }
      rows[k].push_back(std::move(e));
    }
  }
  std::vector<Tensor> results(std::make_move_iterator(ins.begin() + 2),
                              std::make_move_iterator(ins.begin() + 2 + num_carried));
  for (size_t k = 0; k < scan.size(); ++k) {
    DType dtype = rows[k].empty() ? scan[k].dtype : rows[k][0].dtype();
    std::vector<int64_t> shape = rows[k].empty() ? scan[k].shape : rows[k][0].shape();
    shape.insert(shape.begin(), i);
    Tensor stacked = ctx.allocate(dtype, std::move(shape));
    auto* dst = writable<uint8_t>(stacked);
    for (const Tensor& row : rows[k]) {
      if (row.nbytes() > 0) std::memcpy(dst, row.data(), row.nbytes());
      dst += row.nbytes();
    }
    results.push_back(std::move(stacked));
  }
  return results;
}

}  // namespace kiln::portable
