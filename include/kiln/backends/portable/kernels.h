// Portable CPU kernels: an IR-free calling convention and the table from op name to kernel.
//
// Kernels see tensors and attribute values only, never graph nodes, so the runtime can run
// them without the compiler. Semantics follow PyTorch ATen for the op of the same name (the
// schemas in include/kiln/ir/ops.inc).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"

namespace kiln::portable {

/// A keyword attribute value; monostate stands for None.
using AttrValue = std::variant<std::monostate, int64_t, double, bool, std::string,
                               std::vector<int64_t>, std::vector<double>, DType>;

/// One positional argument of a kernel call.
struct KernelInput {
  enum class Kind : uint8_t { kNone, kTensor, kTensorList, kNumber };
  Kind kind = Kind::kNone;
  const Tensor* tensor = nullptr;     ///< kTensor; not owned, valid for the call
  std::vector<const Tensor*> list;    ///< kTensorList; not owned, valid for the call
  double number = 0;                  ///< kNumber (a Scalar parameter given as a number)
  bool number_is_int = false;         ///< kNumber: written as an integer

  static KernelInput none() { return {}; }
  static KernelInput of(const Tensor* t) {
    KernelInput in;
    in.kind = Kind::kTensor;
    in.tensor = t;
    return in;
  }
  static KernelInput of_list(std::vector<const Tensor*> ts) {
    KernelInput in;
    in.kind = Kind::kTensorList;
    in.list = std::move(ts);
    return in;
  }
  static KernelInput of_number(double v, bool is_int) {
    KernelInput in;
    in.kind = Kind::kNumber;
    in.number = v;
    in.number_is_int = is_int;
    return in;
  }
};

/// A named attribute.
struct KernelAttr {
  std::string name;
  AttrValue value;
};

/// The arguments of one kernel call. Attributes missing from `attrs` take the op's default.
struct KernelArgs {
  std::vector<KernelInput> inputs;
  std::vector<KernelAttr> attrs;

  size_t num_inputs() const { return inputs.size(); }
  /// True if input i exists and is a tensor.
  bool has_tensor(size_t i) const {
    return i < inputs.size() && inputs[i].kind == KernelInput::Kind::kTensor;
  }
  /// Input i as a tensor; callers check has_tensor first (required inputs are checked by
  /// check_inputs in the kernel).
  const Tensor& tensor(size_t i) const { return *inputs[i].tensor; }

  /// Attribute `name`, or null when absent or None.
  const AttrValue* attr(std::string_view name) const;
  int64_t attr_int(std::string_view name, int64_t fallback) const;
  std::optional<int64_t> attr_opt_int(std::string_view name) const;
  double attr_float(std::string_view name, double fallback) const;
  std::optional<double> attr_opt_float(std::string_view name) const;
  bool attr_bool(std::string_view name, bool fallback) const;
  std::string attr_str(std::string_view name, std::string_view fallback) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> fallback) const;
  std::optional<std::vector<int64_t>> attr_opt_ints(std::string_view name) const;
  std::optional<std::vector<double>> attr_opt_floats(std::string_view name) const;
  DType attr_dtype(std::string_view name, DType fallback) const;
};

/// Runs `fn(begin, end)` over [0, n) split across the context's threads.
using ParallelFor = std::function<void(int64_t n, const std::function<void(int64_t, int64_t)>& fn)>;

/// What a kernel may ask of its caller: output buffers and threads.
class KernelContext {
 public:
  virtual ~KernelContext() = default;
  /// A tensor whose bytes the kernel may write in place through writable() below. Contents are
  /// unspecified (a reused buffer).
  virtual Tensor allocate(DType dtype, std::vector<int64_t> shape) = 0;
  /// Threads kernels may use (>= 1).
  virtual int num_threads() const { return 1; }
  /// Runs fn over [0, n) in chunks; the default runs it on the calling thread.
  virtual void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (n > 0) fn(0, n);
  }
};

/// A context that allocates fresh zeroed tensors and runs on one thread (tests, tools).
class SimpleKernelContext : public KernelContext {
 public:
  Tensor allocate(DType dtype, std::vector<int64_t> shape) override {
    return Tensor(dtype, std::move(shape));
  }
};

/// Writable bytes of a tensor the kernel got from KernelContext::allocate (not shared yet).
template <typename T>
T* writable(Tensor& t) {
  return static_cast<T*>(const_cast<void*>(t.data()));
}

/// A kernel: reads `args`, appends its outputs (one, or one per element of a list return).
using KernelFn = Status (*)(KernelContext& ctx, const KernelArgs& args,
                            std::vector<Tensor>* outputs);

/// One row of the kernel table.
struct KernelEntry {
  std::string_view op_name;  ///< the schema name in ops.inc ("convolution")
  KernelFn fn;
};

/// Every portable kernel, in ops.inc order (explicit list; no static registration).
std::span<const KernelEntry> kernel_table();
/// Kernel for `op_name`, or null.
KernelFn find_kernel(std::string_view op_name);
/// Sets the threads OpenBLAS uses for GEMM (process-wide).
void set_blas_threads(int n);
/// The CPU kernel set OpenBLAS selected ("Haswell", "SkylakeX", ...); the OPENBLAS_CORETYPE
/// environment variable overrides its detection (and costs ~1.5x on AVX-512 CPUs if set to Haswell).
std::string blas_core_name();
/// The OPENBLAS_CORETYPE this CPU should run when OpenBLAS's own detection fell back to its
/// generic "Prescott" kernels (a CPU model it does not know, as in many VMs: GEMMs 2-3x slower on
/// an AVX-512 machine): "SKYLAKEX" with AVX-512, "HASWELL" with AVX2 and FMA. Null when its choice
/// stands or OPENBLAS_CORETYPE is set. OpenBLAS picks its kernels when it loads, so a program
/// sets the variable and re-executes itself (tools/kiln, kiln-runner).
const char* better_blas_core();

}  // namespace kiln::portable
