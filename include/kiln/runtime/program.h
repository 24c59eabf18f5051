// The program loader and method executor: maps a .kpte file (or takes a caller's buffer),
// checks every index, offset, size and dtype before use, and runs methods with the portable
// kernels and registered delegates in a planned activation arena. No IR, no parser, no ONNX.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/runtime/backend.h"

namespace kiln::runtime {

/// A segment of the file, as `kiln inspect` shows it.
struct SegmentInfo {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0;
  std::string kind;                 ///< "constants" or "delegate blob"
  std::vector<std::string> users;   ///< "forward/lowered_module_0", "constants of forward, decode"
};

struct DelegateInfo {
  std::string name;
  std::string backend;
  uint32_t segment = 0;
  uint64_t blob_bytes = 0;
  size_t named_data = 0;        ///< entries
  uint64_t named_data_bytes = 0;
  std::vector<std::pair<std::string, std::string>> compile_specs;  ///< key, value as text
};

struct ValueInfo {
  std::string name;   ///< signature name
  std::string spec;   ///< "f32[batch, 3, 224, 224]"
};

struct MethodInfo {
  std::string name;
  std::vector<ValueInfo> inputs, outputs;
  size_t values = 0;
  size_t kernel_calls = 0, delegate_calls = 0, buffer_copies = 0, cond_calls = 0, loop_calls = 0;
  std::vector<DelegateInfo> delegates;
  uint64_t arena_bytes = 0, arena_lower_bound = 0, arena_no_reuse = 0;
  std::vector<std::string> dynamic_dims;   ///< "batch in 1..8"
};

/// Activation memory for a method: the default takes it from the heap; a caller may hand out
/// its own (an arena it placed), as ExecuTorch's MemoryAllocator.
class MemoryAllocator {
 public:
  virtual ~MemoryAllocator() = default;
  /// `bytes` of writable memory, 64-byte aligned, or null when there is none.
  virtual std::shared_ptr<Storage> allocate(size_t bytes) = 0;
};

/// A caller's buffer as the arena (it must outlive the method and be 64-byte aligned).
class BufferAllocator final : public MemoryAllocator {
 public:
  BufferAllocator(uint8_t* data, size_t size) : data_(data), size_(size) {}
  std::shared_ptr<Storage> allocate(size_t bytes) override;

 private:
  uint8_t* data_;
  size_t size_;
  bool used_ = false;
};

struct MethodOptions {
  int num_threads = 1;
  /// Null: the arena comes from the heap.
  MemoryAllocator* allocator = nullptr;
  /// Time every instruction of each run (MethodStats::instructions); off, the loop reads no clock.
  bool profile = false;
};

/// One instruction's time in the last run (MethodOptions::profile).
struct InstructionTime {
  std::string op;  ///< the kernel's op ("convolution"), "delegate <name> (<backend>)", or "copy"
  uint64_t ns = 0;
};

/// What the arena and heap fallbacks did in the last run.
struct MethodStats {
  uint64_t arena_bytes = 0;
  size_t heap_allocations = 0;  ///< buffers not served by the plan (kernel temporaries, copies)
  std::vector<InstructionTime> instructions;  ///< with MethodOptions::profile: one per instruction
};

/// A method input's declared type, for callers that make inputs (random feeds, checks).
struct TensorMeta {
  DType dtype = DType::kF32;
  std::vector<int64_t> sizes;        ///< per dim: the static size, or -1 where symbolic
  std::vector<std::string> symbols;  ///< per dim: the symbol's name, or "" where static
  std::vector<int64_t> min, max;     ///< per dim: a symbol's planned range (-1: none)
  std::string text;                  ///< "f32[batch, 3]"

  /// The smallest shape the method accepts: each symbolic dim at its planned minimum (or 1).
  std::vector<int64_t> smallest_shape() const {
    std::vector<int64_t> shape;
    for (size_t d = 0; d < sizes.size(); ++d) {
      shape.push_back(sizes[d] >= 0 ? sizes[d] : std::max<int64_t>(1, min[d]));
    }
    return shape;
  }
};

class Method;

/// A loaded program file. Immutable; methods loaded from it share its constants.
class Program : public std::enable_shared_from_this<Program> {
 public:
  /// Maps `path` read-only.
  static Result<std::shared_ptr<const Program>> load_file(const std::string& path);
  /// Uses `bytes`, kept alive by `owner` (copied when not 64-byte aligned). External constants
  /// (a delegate blob's weights) come from `named_data`, whose bytes must outlive the program.
  static Result<std::shared_ptr<const Program>> load_buffer(std::span<const uint8_t> bytes,
                                                            std::shared_ptr<const void> owner,
                                                            const NamedDataMap* named_data = nullptr);
  ~Program();

  std::vector<std::string> method_names() const;
  /// Method metadata (what `kiln inspect` prints); not_found naming the methods.
  Result<MethodInfo> method_info(std::string_view name) const;
  const std::vector<SegmentInfo>& segments() const;
  uint64_t file_size() const;
  uint32_t version() const;
  uint64_t segment_alignment() const;
  /// Checks every segment's checksum; the error names the segment.
  Status verify_checksums() const;

  /// Prepares method `name` to run: kernels resolved, delegates initialised (their backends
  /// must be in `backends`), constants viewed in place, buffers and arena allocated.
  Result<std::unique_ptr<Method>> load_method(std::string_view name, const BackendRegistry& backends,
                                              const MethodOptions& options = {}) const;

  struct Impl;

 private:
  explicit Program(std::unique_ptr<Impl> impl);
  // load_method, sharing the branch methods already loaded for this call (by method index), so
  // that conds calling one method many times load it once.
  using LoadedBranches = std::map<uint32_t, std::shared_ptr<Method>>;
  Result<std::unique_ptr<Method>> load_method(std::string_view name,
                                              const BackendRegistry& backends,
                                              const MethodOptions& options,
                                              LoadedBranches& loaded) const;
  std::unique_ptr<Impl> impl_;
};

/// A method ready to run. Not thread-safe: one execute at a time.
class Method {
 public:
  ~Method();
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;

  const std::string& name() const;
  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  /// The declared type of each input, in signature order.
  const std::vector<TensorMeta>& input_meta() const;
  /// Runs with user inputs in signature order (checked: count, dtype, shape, symbolic dims
  /// consistent and inside their planned range). Outputs belong to the caller. Mutated buffers
  /// keep their new values for the next run.
  Result<std::vector<Tensor>> execute(std::span<const Tensor> inputs);
  /// The current value of each mutable buffer, by name.
  std::vector<std::pair<std::string, Tensor>> buffers() const;
  const MethodStats& stats() const;

  struct Impl;

 private:
  friend class Program;
  explicit Method(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::runtime
