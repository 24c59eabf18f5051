// The runtime half of a backend (ExecuTorch's BackendInterface) and the registry the program
// loader finds it in. Depends on core and the kernel calling convention only: no IR.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/portable/kernels.h"
#include "kiln/core/status.h"
#include "kiln/core/tensor.h"

namespace kiln::runtime {

/// A compile spec as stored in the program file.
struct CompileSpecView {
  std::string_view key;
  std::span<const uint8_t> value;
};

/// Bytes by key that a delegate's blob refers to (ExecuTorch's NamedDataMap): weights stored in
/// the program file's constant segment, once however many delegates use them.
class NamedDataMap {
 public:
  void add(std::string key, std::span<const uint8_t> bytes) { data_[std::move(key)] = bytes; }
  /// The bytes of `key`; not_found naming the key when it is absent.
  Result<std::span<const uint8_t>> get(std::string_view key) const;
  size_t size() const { return data_.size(); }

 private:
  std::map<std::string, std::span<const uint8_t>, std::less<>> data_;
};

/// What a backend's init sees.
struct BackendInitContext {
  std::string_view method;        ///< the method that owns the delegate
  std::string_view delegate;      ///< the lowered module's name
  /// Keeps the blob's bytes alive: a backend that keeps views of the blob holds on to it.
  std::shared_ptr<const void> blob_owner;
  int num_threads = 1;            ///< the method's thread option
  /// The delegate's named data (views of the program file, alive as long as blob_owner).
  const NamedDataMap* named_data = nullptr;
};

/// What a backend's execute sees: output buffers (allocate() hands out the planned memory of the
/// delegate's outputs in order) and the method's threads.
using BackendExecutionContext = portable::KernelContext;

/// A delegate instance, made by init and owned by the method until destroy.
class DelegateHandle {
 public:
  virtual ~DelegateHandle() = default;
};

class BackendInterface {
 public:
  virtual ~BackendInterface() = default;
  /// The id programs name ("demo", "xnnpack", "htp").
  virtual std::string_view id() const = 0;
  /// Whether the backend can run on this machine.
  virtual bool is_available() const = 0;
  /// Prepares `blob` (valid as long as ctx.blob_owner) for execution. Errors name what in the
  /// blob or specs is wrong.
  virtual Result<std::unique_ptr<DelegateHandle>> init(const BackendInitContext& ctx,
                                                       std::span<const uint8_t> blob,
                                                       std::span<const CompileSpecView> specs) const = 0;
  /// Runs the delegate: `inputs` in the order of the delegate call, outputs appended in order.
  virtual Status execute(DelegateHandle& handle, BackendExecutionContext& ctx,
                         std::span<const Tensor> inputs, std::vector<Tensor>* outputs) const = 0;
  /// Frees what init made. The default deletes the handle.
  virtual void destroy(std::unique_ptr<DelegateHandle> handle) const { handle.reset(); }
};

/// Backends by id, filled by explicit calls (no static registration). A method keeps the
/// backends it uses alive, so the registry may go before the methods loaded with it.
class BackendRegistry {
 public:
  /// Fails if the id is empty or taken.
  Status add(std::unique_ptr<BackendInterface> backend);
  std::shared_ptr<const BackendInterface> find(std::string_view id) const;
  /// Registered ids, sorted.
  std::vector<std::string> ids() const;

 private:
  std::map<std::string, std::shared_ptr<const BackendInterface>, std::less<>> backends_;
};

}  // namespace kiln::runtime
