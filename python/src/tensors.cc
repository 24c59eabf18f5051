// numpy arrays <-> kiln tensors. Inputs that are C-contiguous and of the right dtype are viewed,
// not copied; outputs own their storage (a capsule keeps it alive).
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common.h"

namespace kiln::python {
namespace {

// Holds an array for a tensor that views it; the tensor may be dropped by a kiln thread, so the
// reference is released under the GIL.
struct ArrayOwner {
  py::object array;
  ~ArrayOwner() {
    if (!Py_IsInitialized()) {
      array.release();  // the interpreter is gone: nothing to release to
      return;
    }
    py::gil_scoped_acquire gil;
    array = py::object();
  }
};

}  // namespace

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return py::dtype::of<float>();
    case DType::kF16: return py::dtype("float16");
    case DType::kF64: return py::dtype::of<double>();
    case DType::kI64: return py::dtype::of<int64_t>();
    case DType::kI32: return py::dtype::of<int32_t>();
    case DType::kI16: return py::dtype::of<int16_t>();
    case DType::kI8: return py::dtype::of<int8_t>();
    case DType::kU8: return py::dtype::of<uint8_t>();
    case DType::kU16: return py::dtype::of<uint16_t>();
    case DType::kU32: return py::dtype::of<uint32_t>();
    case DType::kU64: return py::dtype::of<uint64_t>();
    case DType::kBool: return py::dtype::of<bool>();
    case DType::kBF16: break;
  }
  throw py::type_error("kiln: bf16 tensors have no numpy dtype");
}

DType kiln_dtype(const py::array& array, const std::string& what) {
  const py::dtype dt = array.dtype();
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return DType::kF32;
  if (kind == 'f' && size == 2) return DType::kF16;
  if (kind == 'f' && size == 8) return DType::kF64;
  if (kind == 'i' && size == 8) return DType::kI64;
  if (kind == 'i' && size == 4) return DType::kI32;
  if (kind == 'i' && size == 2) return DType::kI16;
  if (kind == 'i' && size == 1) return DType::kI8;
  if (kind == 'u' && size == 1) return DType::kU8;
  if (kind == 'u' && size == 2) return DType::kU16;
  if (kind == 'u' && size == 4) return DType::kU32;
  if (kind == 'u' && size == 8) return DType::kU64;
  if (kind == 'b') return DType::kBool;
  throw py::type_error(fmt::format("{}: numpy dtype {} has no kiln dtype", what, std::string(py::str(static_cast<py::handle>(dt)))));
}

Tensor to_tensor(const py::array& array, DType want, const std::string& what) {
  py::array a = array;
  if (kiln_dtype(array, what) != want || !(array.flags() & py::array::c_style)) {
    a = py::array::ensure(array.attr("astype")(numpy_dtype(want)), py::array::c_style);
    if (!a) throw py::type_error(fmt::format("{}: cannot convert to {}", what, dtype_name(want)));
  }
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  auto owner = std::make_shared<ArrayOwner>();
  owner->array = a;
  auto storage = std::make_shared<ExternalStorage>(static_cast<const uint8_t*>(a.data()), static_cast<size_t>(a.nbytes()),
                                                   std::shared_ptr<const void>(owner, owner.get()));
  return Tensor(want, std::move(shape), std::move(storage), 0);
}

Tensor to_tensor(const py::array& array, const std::string& what) {
  return to_tensor(array, kiln_dtype(array, what), what);
}

std::vector<std::optional<py::array>> bind_arrays(const std::vector<std::string>& names, const py::args& args,
                                                  const py::kwargs& kwargs, const std::string& who) {
  if (args.size() > names.size()) {
    throw py::type_error(fmt::format("{} takes {} input(s) ({}), {} given", who, names.size(), fmt::join(names, ", "),
                                     args.size()));
  }
  std::vector<std::optional<py::array>> given(names.size());
  auto set = [&](size_t i, py::handle value) {
    if (given[i]) throw py::type_error(fmt::format("{}: input '{}' given twice", who, names[i]));
    py::array a = py::array::ensure(value);
    if (!a) throw py::type_error(fmt::format("{}: input '{}' is not an array", who, names[i]));
    given[i] = std::move(a);
  };
  for (size_t i = 0; i < args.size(); ++i) set(i, args[i]);
  for (auto [key, value] : kwargs) {
    std::string name = py::str(key).cast<std::string>();
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      throw py::type_error(fmt::format("{} has no input '{}' (it has: {})", who, name, fmt::join(names, ", ")));
    }
    set(static_cast<size_t>(it - names.begin()), value);
  }
  return given;
}

py::array to_numpy(const Tensor& tensor) {
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  py::dtype dt = numpy_dtype(tensor.dtype());
  if (tensor.numel() == 0 || tensor.data() == nullptr) return py::array(dt, shape);
  // A tensor that views a caller's array (an output that is an input) is copied: outputs own
  // their memory.
  // So is one whose storage someone else holds too (kiln never writes it again only when the
  // tensor is its one owner).
  bool views_caller = dynamic_cast<const ExternalStorage*>(tensor.storage().get()) != nullptr;
  if (views_caller || tensor.storage().use_count() > 1 || tensor.storage_offset() != 0) {
    py::array out(dt, shape);
    std::memcpy(out.mutable_data(), tensor.data(), tensor.nbytes());
    return out;
  }
  auto* keep = new std::shared_ptr<const Storage>(tensor.storage());
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<const Storage>*>(p); });
  // numpy arrays over kiln's memory are writable: the storage is the caller's alone.
  return py::array(dt, shape, {}, const_cast<void*>(tensor.data()), owner);
}

}  // namespace kiln::python
