#include "kiln/runtime/program.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "../backends/portable/thread_pool.h"
#include "kiln/backends/portable/control_flow.h"
#include "kiln/core/file.h"
#include "kiln/core/memory.h"
#include "kiln/runtime/program_format.h"
#include "program_generated.h"

namespace kiln::runtime {

uint64_t segment_checksum(std::span<const uint8_t> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  return crc32_z(crc, bytes.data(), bytes.size());
}

namespace {

namespace fb = kiln::fb;
using portable::KernelFn;

Status bad_program(std::string_view where, std::string_view what) {
  return make_error(StatusCode::kInvalidProgram, "invalid program: {}: {}", where, what);
}

bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }

std::string_view home_name(fb::TensorHome h) {
  switch (h) {
    case fb::TensorHome::Arena: return "arena";
    case fb::TensorHome::Input: return "input";
    case fb::TensorHome::Constant: return "constant";
    case fb::TensorHome::Buffer: return "buffer";
    case fb::TensorHome::Output: return "output";
    case fb::TensorHome::Alias: return "alias";
    case fb::TensorHome::Dynamic: return "dynamic";
  }
  return "?";
}

}  // namespace

struct Program::Impl {
  std::shared_ptr<const void> owner;
  std::span<const uint8_t> file;
  const fb::Program* root = nullptr;
  std::vector<SegmentEntry> segments;
  std::vector<SegmentInfo> segment_info;
  std::vector<std::span<const uint8_t>> constants;  // by constant index
  std::unordered_map<std::string, const fb::Method*> methods;
  std::vector<std::string> method_order;

  const NamedDataMap* external = nullptr;  // only during parse()

  Status parse();
  Status check_method(const fb::Method* m, uint32_t index) const;
  Status check_call(uint32_t callee, const char* what, const flatbuffers::Vector<int32_t>* inputs,
                    const flatbuffers::Vector<int32_t>* outputs, size_t extra_inputs,
                    size_t extra_outputs, uint32_t index, const std::string& where) const;
  std::string spec_text(const fb::Method* m, const fb::Tensor* t) const;
};

namespace {

// Everything a tensor value needs that the file does not say twice.
struct ValueSlot {
  const fb::Tensor* tensor = nullptr;  // null: not a tensor value
  fb::TensorHome home = fb::TensorHome::Arena;
  DType dtype = DType::kF32;
  std::vector<int64_t> static_shape;  // when every dim is static
  bool is_static = true;
};

}  // namespace

Status Program::Impl::parse() {
  const uint8_t* p = file.data();
  const uint64_t n = file.size();
  if (n < kHeaderSize) {
    return bad_program("header", fmt::format("the file has {} bytes, fewer than the {}-byte header "
                                             "(truncated?)",
                                             n, kHeaderSize));
  }
  if (std::memcmp(p, kProgramMagic.data(), kProgramMagic.size()) != 0) {
    return bad_program("header", "wrong magic: not a kiln program file (.kpte)");
  }
  FileHeader h;
  h.version = load_u32(p + 8);
  uint32_t header_size = load_u32(p + 12);
  h.flatbuffer_offset = load_u64(p + 16);
  h.flatbuffer_size = load_u64(p + 24);
  h.segment_table_offset = load_u64(p + 32);
  h.segment_count = load_u32(p + 40);
  h.file_size = load_u64(p + 48);
  if (h.version != kProgramVersion) {
    return make_error(StatusCode::kUnsupported,
                      "program file format version {} is not supported (this kiln reads version {})",
                      h.version, kProgramVersion);
  }
  if (header_size != kHeaderSize) {
    return bad_program("header", fmt::format("header size {} (offset 12), expected {}", header_size,
                                             kHeaderSize));
  }
  if (h.file_size != n) {
    return bad_program("header", fmt::format("the header says the file has {} bytes (offset 48), "
                                             "but it has {}{}",
                                             h.file_size, n, h.file_size > n ? " (truncated)" : ""));
  }
  uint64_t fb_end = 0;
  if (h.flatbuffer_offset < kHeaderSize || h.flatbuffer_offset % 8 != 0 ||
      add_overflows(h.flatbuffer_offset, h.flatbuffer_size, &fb_end) || fb_end > n ||
      h.flatbuffer_size < 8) {
    return bad_program("header", fmt::format("flatbuffer range [{}, +{}) (offsets 16, 24) is not "
                                             "inside the file of {} bytes",
                                             h.flatbuffer_offset, h.flatbuffer_size, n));
  }
  uint64_t table_bytes = uint64_t{h.segment_count} * kSegmentEntrySize;
  uint64_t table_end = 0;
  if (h.segment_table_offset < fb_end || h.segment_table_offset % 8 != 0 ||
      add_overflows(h.segment_table_offset, table_bytes, &table_end) || table_end > n) {
    return bad_program("header", fmt::format("segment table of {} entries at {} (offsets 32, 40) "
                                             "is not inside the file of {} bytes after the "
                                             "flatbuffer",
                                             h.segment_count, h.segment_table_offset, n));
  }
  // Segments: inside the file, after the table, not overlapping, of a known kind.
  std::vector<std::pair<uint64_t, uint32_t>> by_offset;
  for (uint32_t i = 0; i < h.segment_count; ++i) {
    SegmentEntry s = decode_segment(p + h.segment_table_offset + i * kSegmentEntrySize);
    uint64_t end = 0;
    std::string where = fmt::format("segment {} (table entry at offset {})", i,
                                    h.segment_table_offset + i * kSegmentEntrySize);
    if (s.offset < table_end || add_overflows(s.offset, s.size, &end) || end > n) {
      return bad_program(where, fmt::format("range [{}, +{}) is not inside the file's data ({} to "
                                            "{})",
                                            s.offset, s.size, table_end, n));
    }
    if (s.kind != static_cast<uint64_t>(SegmentKind::kConstants) &&
        s.kind != static_cast<uint64_t>(SegmentKind::kDelegateBlob)) {
      return bad_program(where, fmt::format("unknown kind {}", s.kind));
    }
    segments.push_back(s);
    by_offset.emplace_back(s.offset, i);
  }
  std::sort(by_offset.begin(), by_offset.end());
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const SegmentEntry& a = segments[by_offset[k - 1].second];
    const SegmentEntry& b = segments[by_offset[k].second];
    if (a.size > 0 && b.size > 0 && a.offset + a.size > b.offset) {
      return bad_program("segment table", fmt::format("segments {} and {} overlap ([{}, +{}) and "
                                                      "[{}, +{}))",
                                                      by_offset[k - 1].second, by_offset[k].second,
                                                      a.offset, a.size, b.offset, b.size));
    }
  }

  // The flatbuffer: the library's verifier, then kiln's own checks.
  const uint8_t* fbp = p + h.flatbuffer_offset;
  size_t fb_size = static_cast<size_t>(h.flatbuffer_size);
  flatbuffers::Verifier verifier(fbp, fb_size, /*max_depth=*/64,
                                 /*max_tables=*/std::max<size_t>(1000000, fb_size / 4));
  if (!fb::VerifyProgramBuffer(verifier)) {
    return bad_program("flatbuffer", fmt::format("the {}-byte Program table at offset {} does not "
                                                 "verify (corrupt or not a kiln program)",
                                                 fb_size, h.flatbuffer_offset));
  }
  root = fb::GetProgram(fbp);
  if (root->version() != kProgramVersion) {
    return bad_program("Program.version", fmt::format("{} differs from the header's {}",
                                                      root->version(), kProgramVersion));
  }
  uint64_t align = root->segment_alignment();
  if (align < 8 || (align & (align - 1)) != 0) {
    return bad_program("Program.segment_alignment", fmt::format("{} is not a power of two of at "
                                                                "least 8",
                                                                align));
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].offset % align != 0) {
      return bad_program(fmt::format("segment {}", i),
                         fmt::format("offset {} is not a multiple of the alignment {}",
                                     segments[i].offset, align));
    }
  }
  if (root->constants() != nullptr) {
    for (uint32_t i = 0; i < root->constants()->size(); ++i) {
      const fb::ConstantData* c = root->constants()->Get(i);
      std::string where = fmt::format("Program.constants[{}]", i);
      if (c->key() != nullptr) {  // external: named data the loader was given
        auto bytes = external != nullptr ? external->get(c->key()->string_view())
                                         : Result<std::span<const uint8_t>>(not_found(
                                               "named data '{}' is needed but none was given",
                                               c->key()->string_view()));
        if (!bytes.ok()) return bad_program(where, bytes.status().message());
        if (bytes->size() != c->nbytes()) {
          return bad_program(where, fmt::format("named data '{}' has {} bytes, the constant {}",
                                                c->key()->string_view(), bytes->size(), c->nbytes()));
        }
        constants.push_back(*bytes);
        continue;
      }
      if (c->segment() >= segments.size() ||
          segments[c->segment()].kind != static_cast<uint64_t>(SegmentKind::kConstants)) {
        return bad_program(where, fmt::format("segment {} is not a constant segment (the file has "
                                              "{} segments)",
                                              c->segment(), segments.size()));
      }
      const SegmentEntry& s = segments[c->segment()];
      uint64_t end = 0;
      if (add_overflows(c->offset(), c->nbytes(), &end) || end > s.size) {
        return bad_program(where, fmt::format("range [{}, +{}) is past the end of segment {} ({} "
                                              "bytes)",
                                              c->offset(), c->nbytes(), c->segment(), s.size));
      }
      constants.emplace_back(p + s.offset + c->offset(), static_cast<size_t>(c->nbytes()));
    }
  }
  if (root->methods() == nullptr || root->methods()->size() == 0) {
    return bad_program("Program.methods", "the program has no methods");
  }
  for (uint32_t i = 0; i < root->methods()->size(); ++i) {
    const fb::Method* m = root->methods()->Get(i);
    std::string name = m->name()->str();
    if (!methods.emplace(name, m).second) {
      return bad_program("Program.methods", fmt::format("method '{}' appears twice", name));
    }
    method_order.push_back(name);
    KILN_RETURN_IF_ERROR(check_method(m, i));
  }

  // Who uses each segment (for inspect).
  for (size_t i = 0; i < segments.size(); ++i) {
    SegmentInfo info;
    info.offset = segments[i].offset;
    info.size = segments[i].size;
    info.checksum = segments[i].checksum;
    info.kind = segments[i].kind == static_cast<uint64_t>(SegmentKind::kConstants) ? "constants"
                                                                                   : "delegate blob";
    segment_info.push_back(std::move(info));
  }
  for (const std::string& name : method_order) {
    const fb::Method* m = methods.at(name);
    if (m->delegates() != nullptr) {
      for (const fb::Delegate* d : *m->delegates()) {
        segment_info[d->segment()].users.push_back(
            fmt::format("{}/{}", name, d->name() ? d->name()->str() : std::string("?")));
      }
    }
    std::set<uint32_t> constant_segments;  // check_method checked these data indices
    for (const fb::ValueEntry* v : *m->values()) {
      const fb::Tensor* t = v->value_as_Tensor();
      if (t != nullptr && (t->home() == fb::TensorHome::Constant || t->home() == fb::TensorHome::Buffer)) {
        const fb::ConstantData* c = root->constants()->Get(static_cast<uint32_t>(t->data()));
        if (c->key() == nullptr) constant_segments.insert(c->segment());  // external: no segment
      }
    }
    if (m->delegates() != nullptr) {
      for (const fb::Delegate* d : *m->delegates()) {
        if (d->named_data() == nullptr) continue;
        for (const fb::NamedData* nd : *d->named_data()) {
          const fb::ConstantData* c = root->constants()->Get(nd->constant());
          if (c->key() == nullptr) constant_segments.insert(c->segment());
        }
      }
    }
    for (uint32_t seg : constant_segments) segment_info[seg].users.push_back(name);
  }
  return Status::Ok();
}

std::string Program::Impl::spec_text(const fb::Method* m, const fb::Tensor* t) const {
  std::vector<std::string> dims;
  for (const fb::Dim* d : *t->dims()) {
    if (d->symbol() >= 0) {
      dims.push_back(m->symbols()->Get(static_cast<uint32_t>(d->symbol()))->name()->str());
    } else {
      dims.push_back(std::to_string(d->size()));
    }
  }
  return fmt::format("{}[{}]", dtype_name(static_cast<DType>(t->dtype())), fmt::join(dims, ", "));
}

namespace {
template <typename V>
size_t size_of(const V* v) {
  return v != nullptr ? v->size() : 0;
}
}  // namespace

// A method that method `index` calls (a cond's branch, a loop's body): it comes after its
// caller, so a chain of calls always ends, and takes the call's inputs (and `extra_inputs`
// more) and returns its outputs (and `extra_outputs` more).
Status Program::Impl::check_call(uint32_t callee, const char* what,
                                 const flatbuffers::Vector<int32_t>* inputs,
                                 const flatbuffers::Vector<int32_t>* outputs, size_t extra_inputs,
                                 size_t extra_outputs, uint32_t index,
                                 const std::string& where) const {
  const uint32_t nmethods = root->methods()->size();
  if (callee <= index || callee >= nmethods) {
    return bad_program(where, fmt::format("{} method {} is not after this method (#{}) in the "
                                          "program's {} methods",
                                          what, callee, index, nmethods));
  }
  const fb::Method* m = root->methods()->Get(callee);
  size_t in = size_of(m->inputs()), out = size_of(m->outputs());
  if (in != size_of(inputs) + extra_inputs || out != size_of(outputs) + extra_outputs) {
    return bad_program(
        where, fmt::format("{} method '{}' takes {} inputs and returns {} outputs; "
                           "the call passes {} and expects {}",
                           what, m->name()->string_view(), in, out, size_of(inputs) + extra_inputs,
                           size_of(outputs) + extra_outputs));
  }
  return Status::Ok();
}

// Every index, range and kind of a method, before anything is used.
Status Program::Impl::check_method(const fb::Method* m, uint32_t index) const {
  const std::string name = m->name()->str();
  auto where = [&](std::string_view field) { return fmt::format("method '{}': {}", name, field); };
  if (m->values() == nullptr) return bad_program(where("values"), "missing");
  const uint32_t nv = m->values()->size();
  const uint32_t nsym = m->symbols() ? m->symbols()->size() : 0;
  const uint32_t nconst = root->constants() ? root->constants()->size() : 0;
  for (uint32_t s = 0; s < nsym; ++s) {
    const fb::Symbol* sym = m->symbols()->Get(s);
    if (sym->min() > sym->max() || sym->max() < -1) {
      return bad_program(where(fmt::format("symbols[{}]", s)),
                         fmt::format("'{}' has range {}..{}", sym->name()->str(), sym->min(), sym->max()));
    }
  }
  auto tensor_at = [&](int64_t idx) -> const fb::Tensor* {
    if (idx < 0 || idx >= nv) return nullptr;
    const fb::ValueEntry* e = m->values()->Get(static_cast<uint32_t>(idx));
    return e == nullptr ? nullptr : e->value_as_Tensor();
  };
  for (uint32_t i = 0; i < nv; ++i) {
    const fb::ValueEntry* e = m->values()->Get(i);
    std::string field = fmt::format("values[{}]", i);
    if (e == nullptr || e->value_type() == fb::Value::NONE) return bad_program(where(field), "empty value");
    if (const fb::TensorList* l = e->value_as_TensorList()) {
      if (l->items() == nullptr) return bad_program(where(field), "tensor list without items");
      for (int32_t item : *l->items()) {
        if (tensor_at(item) == nullptr) {
          return bad_program(where(field), fmt::format("tensor list item {} is not a tensor value "
                                                       "(the method has {} values)",
                                                       item, nv));
        }
      }
      continue;
    }
    const fb::Tensor* t = e->value_as_Tensor();
    if (t == nullptr) continue;  // a scalar: the verifier checked it
    if (t->dtype() >= kNumDTypes) return bad_program(where(field), fmt::format("unknown dtype {}", t->dtype()));
    if (t->dims() == nullptr) return bad_program(where(field), "tensor without dims");
    if (t->dims()->size() > 16) return bad_program(where(field), fmt::format("rank {} is more than 16", t->dims()->size()));
    uint64_t numel = 1;
    bool is_static = true;
    for (const fb::Dim* d : *t->dims()) {
      if (d->symbol() >= 0) {
        if (static_cast<uint32_t>(d->symbol()) >= nsym) {
          return bad_program(where(field), fmt::format("dim names symbol {}, but the method has {}",
                                                       d->symbol(), nsym));
        }
        is_static = false;
        continue;
      }
      if (d->size() < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d->size()), &numel)) {
        return bad_program(where(field), fmt::format("dim size {} is negative or overflows", d->size()));
      }
    }
    uint64_t bytes = 0;
    if (is_static && __builtin_mul_overflow(numel, dtype_size(static_cast<DType>(t->dtype())), &bytes)) {
      return bad_program(where(field), "size overflows");
    }
    auto home = t->home();
    switch (home) {
      case fb::TensorHome::Arena: {
        uint64_t end = 0;
        if (add_overflows(t->offset(), t->nbytes(), &end) || end > m->arena_bytes()) {
          return bad_program(where(field), fmt::format("arena range [{}, +{}) is past the arena of "
                                                       "{} bytes",
                                                       t->offset(), t->nbytes(), m->arena_bytes()));
        }
        if (is_static && t->nbytes() < bytes) {
          return bad_program(where(field), fmt::format("{} needs {} bytes but {} are planned",
                                                       spec_text(m, t), bytes, t->nbytes()));
        }
        break;
      }
      case fb::TensorHome::Constant:
      case fb::TensorHome::Buffer: {
        if (t->data() < 0 || static_cast<uint32_t>(t->data()) >= nconst) {
          return bad_program(where(field), fmt::format("constant {} does not exist (the program has "
                                                       "{})",
                                                       t->data(), nconst));
        }
        if (!is_static) return bad_program(where(field), "a constant must have a static shape");
        if (constants[static_cast<size_t>(t->data())].size() != bytes) {
          return bad_program(where(field), fmt::format("{} needs {} bytes but constant {} has {}",
                                                       spec_text(m, t), bytes, t->data(),
                                                       constants[static_cast<size_t>(t->data())].size()));
        }
        if (home == fb::TensorHome::Buffer && t->buffer() == nullptr) {
          return bad_program(where(field), "a buffer without a name");
        }
        break;
      }
      case fb::TensorHome::Alias: {
        const fb::Tensor* root_t = tensor_at(t->alias_of());
        if (root_t == nullptr || root_t->home() == fb::TensorHome::Alias) {
          return bad_program(where(field), fmt::format("alias of value {}, which is not a tensor "
                                                       "that owns memory",
                                                       t->alias_of()));
        }
        break;
      }
      case fb::TensorHome::Input:
      case fb::TensorHome::Output:
      case fb::TensorHome::Dynamic: break;
      default: return bad_program(where(field), fmt::format("unknown home {}", static_cast<int>(home)));
    }
  }
  auto check_list = [&](const flatbuffers::Vector<int32_t>* list, std::string_view field,
                        auto&& ok) -> Status {
    if (list == nullptr) return Status::Ok();
    for (uint32_t k = 0; k < list->size(); ++k) {
      int32_t v = list->Get(k);
      if (v < 0 || static_cast<uint32_t>(v) >= nv) {
        return bad_program(where(fmt::format("{}[{}]", field, k)),
                           fmt::format("value index {} is out of range (the method has {} values)", v, nv));
      }
      KILN_RETURN_IF_ERROR(ok(v, fmt::format("{}[{}]", field, k)));
    }
    return Status::Ok();
  };
  auto any = [](int32_t, const std::string&) { return Status::Ok(); };
  // `homes` is copied: the lambdas outlive the braced lists they are made from.
  auto tensor_home = [&](std::initializer_list<fb::TensorHome> list, std::string_view what) {
    return [&, homes = std::vector<fb::TensorHome>(list), what](int32_t v, const std::string& field) -> Status {
      const fb::Tensor* t = tensor_at(v);
      if (t == nullptr) return bad_program(where(field), fmt::format("value {} is not a tensor", v));
      if (homes.size() > 0 && std::find(homes.begin(), homes.end(), t->home()) == homes.end()) {
        return bad_program(where(field), fmt::format("value {} lives in {} memory, which cannot be {}",
                                                     v, home_name(t->home()), what));
      }
      return Status::Ok();
    };
  };
  KILN_RETURN_IF_ERROR(check_list(m->inputs(), "inputs", tensor_home({fb::TensorHome::Input}, "an input")));
  KILN_RETURN_IF_ERROR(check_list(m->outputs(), "outputs", tensor_home({}, "an output")));
  size_t n_in = m->inputs() ? m->inputs()->size() : 0, n_out = m->outputs() ? m->outputs()->size() : 0;
  if ((m->input_names() ? m->input_names()->size() : 0) != n_in ||
      (m->output_names() ? m->output_names()->size() : 0) != n_out) {
    return bad_program(where("input_names/output_names"), "as many names as inputs and outputs are needed");
  }
  const uint32_t nops = root->operators() ? root->operators()->size() : 0;
  const uint32_t ndel = m->delegates() ? m->delegates()->size() : 0;
  for (uint32_t d = 0; d < ndel; ++d) {
    const fb::Delegate* del = m->delegates()->Get(d);
    if (del->segment() >= segments.size() ||
        segments[del->segment()].kind != static_cast<uint64_t>(SegmentKind::kDelegateBlob)) {
      return bad_program(where(fmt::format("delegates[{}]", d)),
                         fmt::format("segment {} is not a delegate blob (the file has {} segments)",
                                     del->segment(), segments.size()));
    }
    if (del->named_data() != nullptr) {
      for (uint32_t k = 0; k < del->named_data()->size(); ++k) {
        uint32_t c = del->named_data()->Get(k)->constant();
        if (c >= nconst) {
          return bad_program(where(fmt::format("delegates[{}].named_data[{}]", d, k)),
                             fmt::format("constant {} does not exist (the program has {})", c, nconst));
        }
      }
    }
  }
  auto written = tensor_home({fb::TensorHome::Arena, fb::TensorHome::Output, fb::TensorHome::Alias,
                              fb::TensorHome::Dynamic},
                             "written by an instruction");
  if (m->instructions() == nullptr) return bad_program(where("instructions"), "missing");
  for (uint32_t k = 0; k < m->instructions()->size(); ++k) {
    const fb::InstructionEntry* e = m->instructions()->Get(k);
    std::string field = fmt::format("instructions[{}]", k);
    if (e == nullptr) return bad_program(where(field), "empty instruction");
    if (const fb::KernelCall* c = e->instruction_as_KernelCall()) {
      if (c->op() >= nops) {
        return bad_program(where(field), fmt::format("op id {} is not in the operator table ({} "
                                                     "ops)",
                                                     c->op(), nops));
      }
      KILN_RETURN_IF_ERROR(check_list(c->inputs(), field + ".inputs", any));
      KILN_RETURN_IF_ERROR(check_list(c->outputs(), field + ".outputs", written));
      if (c->attrs() != nullptr) {
        for (const fb::KernelAttr* a : *c->attrs()) {
          if (a->value() < 0 || static_cast<uint32_t>(a->value()) >= nv) {
            return bad_program(where(field), fmt::format("attribute '{}' names value {} (the method "
                                                         "has {})",
                                                         a->name()->str(), a->value(), nv));
          }
        }
      }
    } else if (const fb::DelegateCall* c = e->instruction_as_DelegateCall()) {
      if (c->delegate() >= ndel) {
        return bad_program(where(field), fmt::format("delegate {} does not exist (the method has {})",
                                                     c->delegate(), ndel));
      }
      KILN_RETURN_IF_ERROR(check_list(c->inputs(), field + ".inputs", tensor_home({}, "an input")));
      KILN_RETURN_IF_ERROR(check_list(c->outputs(), field + ".outputs", written));
    } else if (const fb::CopyBuffer* c = e->instruction_as_CopyBuffer()) {
      const fb::Tensor* src = tensor_at(c->src());
      const fb::Tensor* dst = tensor_at(c->dst());
      if (src == nullptr || dst == nullptr || dst->home() != fb::TensorHome::Buffer) {
        return bad_program(where(field), fmt::format("copies value {} into value {}, which is not a "
                                                     "buffer",
                                                     c->src(), c->dst()));
      }
    } else if (const fb::CondCall* c = e->instruction_as_CondCall()) {
      KILN_RETURN_IF_ERROR(tensor_home({}, "a predicate")(c->pred(), field + ".pred"));
      KILN_RETURN_IF_ERROR(check_list(c->inputs(), field + ".inputs", tensor_home({}, "an input")));
      KILN_RETURN_IF_ERROR(check_list(c->outputs(), field + ".outputs", written));
      for (bool taken : {true, false}) {
        if ((taken ? c->true_error() : c->false_error()) != nullptr) continue;  // never run
        KILN_RETURN_IF_ERROR(check_call(taken ? c->true_method() : c->false_method(), "branch",
                                        c->inputs(), c->outputs(), 0, 0, index, where(field)));
      }
    } else if (const fb::LoopCall* c = e->instruction_as_LoopCall()) {
      for (int32_t v : {c->trip_count(), c->cond()}) {
        if (v != -1) {
          KILN_RETURN_IF_ERROR(tensor_home({}, "an input")(v, field + ".trip_count/cond"));
        }
      }
      KILN_RETURN_IF_ERROR(check_list(c->inputs(), field + ".inputs", tensor_home({}, "an input")));
      KILN_RETURN_IF_ERROR(check_list(c->outputs(), field + ".outputs", written));
      // The body also takes the iteration and the condition, and returns the condition.
      KILN_RETURN_IF_ERROR(
          check_call(c->body(), "body", c->inputs(), c->outputs(), 2, 1, index, where(field)));
      if (c->num_carried() > size_of(c->inputs()) || c->num_carried() > size_of(c->outputs())) {
        return bad_program(where(field), fmt::format("the loop carries {} values with {} inputs "
                                                     "and {} outputs",
                                                     c->num_carried(), size_of(c->inputs()),
                                                     size_of(c->outputs())));
      }
    } else {
      return bad_program(where(field), "unknown instruction");
    }
  }
  return Status::Ok();
}

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::~Program() = default;

Result<std::shared_ptr<const Program>> Program::load_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
  auto bytes = mapped->bytes();
  auto r = load_buffer(bytes, std::move(mapped));
  if (!r.ok()) return r.status().with_context(path);
  return r;
}

Result<std::shared_ptr<const Program>> Program::load_buffer(std::span<const uint8_t> bytes,
                                                            std::shared_ptr<const void> owner,
                                                            const NamedDataMap* named_data) {
  auto impl = std::make_unique<Impl>();
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 64 != 0) {
    KILN_RETURN_IF_ERROR(check_memory(bytes.size(), "copying an unaligned program buffer"));
    auto copy = HeapStorage::try_allocate(bytes.size());
    if (copy == nullptr) return resource_exhausted("cannot copy a {}-byte program buffer", bytes.size());
    std::memcpy(copy->mutable_data(), bytes.data(), bytes.size());
    bytes = copy->bytes();
    owner = copy;
  }
  impl->owner = std::move(owner);
  impl->file = bytes;
  impl->external = named_data;
  KILN_RETURN_IF_ERROR(impl->parse());
  impl->external = nullptr;
  return std::shared_ptr<const Program>(new Program(std::move(impl)));
}

std::vector<std::string> Program::method_names() const { return impl_->method_order; }
const std::vector<SegmentInfo>& Program::segments() const { return impl_->segment_info; }
uint64_t Program::file_size() const { return impl_->file.size(); }
uint32_t Program::version() const { return impl_->root->version(); }
uint64_t Program::segment_alignment() const { return impl_->root->segment_alignment(); }

Status Program::verify_checksums() const {
  for (size_t i = 0; i < impl_->segments.size(); ++i) {
    const SegmentEntry& s = impl_->segments[i];
    uint64_t got = segment_checksum(impl_->file.subspan(s.offset, s.size));
    if (got != s.checksum) {
      return bad_program(fmt::format("segment {} ({}, {} bytes at offset {})", i,
                                     impl_->segment_info[i].kind, s.size, s.offset),
                         fmt::format("checksum {:08x} does not match the recorded {:08x} (the file "
                                     "is corrupt)",
                                     got, s.checksum));
    }
  }
  return Status::Ok();
}

Result<MethodInfo> Program::method_info(std::string_view name) const {
  auto it = impl_->methods.find(std::string(name));
  if (it == impl_->methods.end()) {
    return not_found("method '{}' is not in the program (methods: {})", name,
                     fmt::join(impl_->method_order, ", "));
  }
  const fb::Method* m = it->second;
  MethodInfo info;
  info.name = m->name()->str();
  info.values = m->values()->size();
  auto value_info = [&](int32_t v, const flatbuffers::String* n) {
    const fb::Tensor* t = m->values()->Get(static_cast<uint32_t>(v))->value_as_Tensor();
    return ValueInfo{n ? n->str() : std::string(), t ? impl_->spec_text(m, t) : std::string("?")};
  };
  for (uint32_t i = 0; m->inputs() && i < m->inputs()->size(); ++i) {
    info.inputs.push_back(value_info(m->inputs()->Get(i), m->input_names()->Get(i)));
  }
  for (uint32_t i = 0; m->outputs() && i < m->outputs()->size(); ++i) {
    info.outputs.push_back(value_info(m->outputs()->Get(i), m->output_names()->Get(i)));
  }
  for (const fb::InstructionEntry* e : *m->instructions()) {
    switch (e->instruction_type()) {
      case fb::Instruction::KernelCall: ++info.kernel_calls; break;
      case fb::Instruction::DelegateCall: ++info.delegate_calls; break;
      case fb::Instruction::CopyBuffer: ++info.buffer_copies; break;
      case fb::Instruction::CondCall:
        ++info.cond_calls;
        break;
      case fb::Instruction::LoopCall:
        ++info.loop_calls;
        break;
      default: break;
    }
  }
  if (m->delegates()) {
    for (const fb::Delegate* d : *m->delegates()) {
      DelegateInfo di;
      di.name = d->name() ? d->name()->str() : std::string();
      di.backend = d->backend()->str();
      di.segment = d->segment();
      di.blob_bytes = impl_->segments[d->segment()].size;
      if (d->named_data()) {
        for (const fb::NamedData* nd : *d->named_data()) {
          ++di.named_data;
          di.named_data_bytes += impl_->constants[nd->constant()].size();
        }
      }
      if (d->compile_specs()) {
        for (const fb::CompileSpec* s : *d->compile_specs()) {
          std::string value;
          if (s->value()) value.assign(s->value()->begin(), s->value()->end());
          di.compile_specs.emplace_back(s->key()->str(), std::move(value));
        }
      }
      info.delegates.push_back(std::move(di));
    }
  }
  info.arena_bytes = m->arena_bytes();
  info.arena_lower_bound = m->arena_lower_bound();
  info.arena_no_reuse = m->arena_no_reuse();
  if (m->symbols()) {
    for (const fb::Symbol* s : *m->symbols()) {
      if (s->max() >= 0) info.dynamic_dims.push_back(fmt::format("{} in {}..{}", s->name()->str(), s->min(), s->max()));
    }
  }
  return info;
}

// ---- Methods -------------------------------------------------------------------------------

namespace {

enum class Kind : uint8_t { kKernel, kDelegate, kCopy, kCond, kLoop };

struct Step {
  Kind kind = Kind::kKernel;
  KernelFn fn = nullptr;
  std::string_view op;
  std::string what;              // "node 'conv1' (convolution)", for messages
  portable::KernelArgs args;     // tensor pointers point into Method::Impl::values
  std::vector<int32_t> inputs;   // delegate inputs
  std::vector<int32_t> outputs;
  size_t delegate = 0;
  int32_t src = -1, dst = -1;                       // copy; cond: src is the predicate; loop:
                                                    // the trip count and condition (-1: none)
  std::array<std::shared_ptr<Method>, 2> branches;  // cond: the false and true branches; loop:
                                                    // the body
  std::array<std::string, 2> branch_errors;         // cond: why a branch (null) cannot run
  size_t num_carried = 0;                           // loop
  std::vector<portable::ScanElement> scan;          // loop: its scan outputs with no iteration
};

// Hands a kernel its instruction's planned output memory, in order; anything else comes from
// the heap (counted against kiln's memory limit).
class RunContext final : public portable::KernelContext {
 public:
  explicit RunContext(int threads) : pool_(threads) {}
  void begin(const std::vector<int32_t>* outputs) {
    outputs_ = outputs;
    next_ = 0;
  }
  // The allocation that failed last: what it was for, and whether the limit refused it.
  struct Failure {
    std::string tensor;
    uint64_t bytes = 0;
    bool over_limit = false;
  };
  const Failure& failure() const { return failure_; }

  Tensor allocate(DType dtype, std::vector<int64_t> shape) override {
    auto n = checked_numel(shape);
    uint64_t bytes64 = 0;
    if (!n || __builtin_mul_overflow(static_cast<uint64_t>(*n), dtype_size(dtype), &bytes64)) {
      failure_ = {format_shape(dtype, shape), UINT64_MAX, true};
      throw std::bad_alloc();
    }
    size_t bytes = static_cast<size_t>(bytes64);
    if (outputs_ != nullptr && next_ < outputs_->size()) {
      const ValueSlot& slot = (*slots_)[static_cast<size_t>((*outputs_)[next_++])];
      if (slot.home == fb::TensorHome::Arena && bytes <= slot.tensor->nbytes()) {
        return Tensor(dtype, std::move(shape), arena_, static_cast<size_t>(slot.tensor->offset()));
      }
    }
    ++stats_->heap_allocations;
    if (bytes > memory_limit()) {
      failure_ = {format_shape(dtype, shape), bytes, true};
      throw std::bad_alloc();
    }
    auto s = HeapStorage::try_allocate(bytes);
    if (s == nullptr) {
      failure_ = {format_shape(dtype, shape), bytes, false};
      throw std::bad_alloc();
    }
    return Tensor(dtype, std::move(shape), std::move(s), 0);
  }
  int num_threads() const override { return pool_.threads(); }
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    pool_.parallel_for(n, fn);
  }

  std::shared_ptr<const Storage> arena_;
  const std::vector<ValueSlot>* slots_ = nullptr;
  MethodStats* stats_ = nullptr;

 private:
  portable::ThreadPool pool_;
  Failure failure_;
  const std::vector<int32_t>* outputs_ = nullptr;
  size_t next_ = 0;
};

portable::AttrValue attr_of(const fb::ValueEntry* e) {
  switch (e->value_type()) {
    case fb::Value::Int: return e->value_as_Int()->value();
    case fb::Value::Double: return e->value_as_Double()->value();
    case fb::Value::Bool: return e->value_as_Bool()->value();
    case fb::Value::String:
      return e->value_as_String()->value() ? e->value_as_String()->value()->str() : std::string();
    case fb::Value::IntList: {
      const auto* l = e->value_as_IntList()->items();
      return l ? std::vector<int64_t>(l->begin(), l->end()) : std::vector<int64_t>();
    }
    case fb::Value::DoubleList: {
      const auto* l = e->value_as_DoubleList()->items();
      return l ? std::vector<double>(l->begin(), l->end()) : std::vector<double>();
    }
    case fb::Value::DTypeValue: {
      uint8_t d = e->value_as_DTypeValue()->dtype();
      return d < kNumDTypes ? portable::AttrValue(static_cast<DType>(d)) : portable::AttrValue();
    }
    default: return std::monostate{};
  }
}

}  // namespace

struct Method::Impl {
  std::shared_ptr<const Program> keep_program;  // the file's bytes stay mapped while it runs
  const Program::Impl* program = nullptr;
  const fb::Method* m = nullptr;
  std::string name;
  std::vector<std::string> input_names, output_names;
  std::vector<TensorMeta> input_meta;
  std::vector<ValueSlot> slots;
  std::vector<Tensor> values;
  std::vector<int32_t> inputs, outputs;
  std::vector<std::pair<int32_t, std::string>> buffers;  // value, name
  std::vector<Step> steps;
  std::vector<std::shared_ptr<const BackendInterface>> backends;  // kept alive by the method
  std::vector<std::unique_ptr<DelegateHandle>> handles;
  std::vector<std::string> delegate_names;
  std::shared_ptr<Storage> arena;
  std::unique_ptr<RunContext> ctx;
  MethodStats stats;
  std::vector<Tensor> scratch;

  ~Impl() {
    for (size_t i = 0; i < handles.size(); ++i) {
      if (handles[i] != nullptr) backends[i]->destroy(std::move(handles[i]));
    }
  }
  Status bind_inputs(std::span<const Tensor> in);
  Status place_outputs(const Step& s, std::vector<Tensor>& produced, std::string_view what);
  Status out_of_memory(std::string_view what) const;
};

// Names the instruction whose kernel could not get memory, the tensor it asked for and the limit.
Status Method::Impl::out_of_memory(std::string_view what) const {
  const RunContext::Failure& f = ctx->failure();
  if (f.bytes == 0) return resource_exhausted("method '{}': {}: out of memory", name, what);
  std::string size = f.bytes == UINT64_MAX ? "more than 2^64 bytes" : format_bytes(f.bytes);
  if (f.over_limit) {
    return resource_exhausted("method '{}': {}: {} needs {} (with {} of activations live), more than "
                              "kiln's memory limit of {} ({})",
                              name, what, f.tensor, size, format_bytes(stats.arena_bytes),
                              format_bytes(memory_limit()), memory_limit_source());
  }
  return resource_exhausted("method '{}': {}: cannot allocate {} for {} (with {} of activations live)",
                            name, what, size, f.tensor, format_bytes(stats.arena_bytes));
}

Result<std::unique_ptr<Method>> Program::load_method(std::string_view name,
                                                     const BackendRegistry& registry,
                                                     const MethodOptions& options) const {
  LoadedBranches loaded;
  return load_method(name, registry, options, loaded);
}

Result<std::unique_ptr<Method>> Program::load_method(std::string_view name,
                                                     const BackendRegistry& registry,
                                                     const MethodOptions& options,
                                                     LoadedBranches& loaded) const {
  auto it = impl_->methods.find(std::string(name));
  if (it == impl_->methods.end()) {
    return not_found("method '{}' is not in the program (methods: {})", name,
                     fmt::join(impl_->method_order, ", "));
  }
  auto mi = std::make_unique<Method::Impl>();
  mi->program = impl_.get();
  mi->keep_program = shared_from_this();
  mi->m = it->second;
  mi->name = std::string(name);
  const fb::Method* m = mi->m;
  auto where = [&](std::string_view field) { return fmt::format("method '{}': {}", name, field); };

  // Delegates first: an unknown backend fails before anything is allocated.
  if (m->delegates()) {
    for (uint32_t d = 0; d < m->delegates()->size(); ++d) {
      const fb::Delegate* del = m->delegates()->Get(d);
      std::string id = del->backend()->str();
      std::string dname = del->name() ? del->name()->str() : fmt::format("delegate {}", d);
      std::shared_ptr<const BackendInterface> b = registry.find(id);
      if (b == nullptr) {
        std::vector<std::string> ids = registry.ids();
        return not_found("method '{}': delegate '{}' needs backend '{}', which is not registered "
                         "(registered: {})",
                         name, dname, id, ids.empty() ? std::string("none") : fmt::format("{}", fmt::join(ids, ", ")));
      }
      if (!b->is_available()) {
        return make_error(StatusCode::kUnsupported, "method '{}': delegate '{}': backend '{}' is not available on this machine",
                          name, dname, id);
      }
      mi->backends.push_back(b);
      mi->delegate_names.push_back(dname);
      mi->handles.emplace_back();
    }
    for (uint32_t d = 0; d < m->delegates()->size(); ++d) {
      const fb::Delegate* del = m->delegates()->Get(d);
      const SegmentEntry& seg = impl_->segments[del->segment()];
      std::vector<CompileSpecView> specs;
      if (del->compile_specs()) {
        for (const fb::CompileSpec* s : *del->compile_specs()) {
          specs.push_back({s->key()->string_view(),
                           s->value() ? std::span<const uint8_t>(s->value()->data(), s->value()->size())
                                      : std::span<const uint8_t>()});
        }
      }
      NamedDataMap named;
      if (del->named_data() != nullptr) {
        for (const fb::NamedData* nd : *del->named_data()) {
          named.add(nd->key()->str(), impl_->constants[nd->constant()]);
        }
      }
      BackendInitContext ctx{name, mi->delegate_names[d], impl_->owner, options.num_threads, &named};
      auto h = mi->backends[d]->init(ctx, impl_->file.subspan(seg.offset, seg.size), specs);
      if (!h.ok()) {
        return make_error(StatusCode::kDelegateFailed, "method '{}': delegate '{}' (backend '{}') failed to initialise: {}",
                          name, mi->delegate_names[d], mi->backends[d]->id(), h.status().message());
      }
      mi->handles[d] = std::move(h).value();
    }
  }

  // Values.
  const uint32_t nv = m->values()->size();
  mi->slots.resize(nv);
  mi->values.resize(nv);
  for (uint32_t i = 0; i < nv; ++i) {
    const fb::Tensor* t = m->values()->Get(i)->value_as_Tensor();
    if (t == nullptr) continue;
    ValueSlot& s = mi->slots[i];
    s.tensor = t;
    s.home = t->home();
    s.dtype = static_cast<DType>(t->dtype());
    for (const fb::Dim* d : *t->dims()) {
      if (d->symbol() >= 0) s.is_static = false;
      s.static_shape.push_back(d->size());
    }
    if (s.home == fb::TensorHome::Constant || s.home == fb::TensorHome::Buffer) {
      std::span<const uint8_t> bytes = impl_->constants[static_cast<size_t>(t->data())];
      if (s.home == fb::TensorHome::Constant) {
        mi->values[i] = Tensor(s.dtype, s.static_shape,
                               std::make_shared<ExternalStorage>(bytes.data(), bytes.size(), impl_->owner), 0);
      } else {
        KILN_RETURN_IF_ERROR(check_memory(bytes.size(), fmt::format("buffer '{}'", t->buffer()->str())));
        auto copy = HeapStorage::try_allocate(bytes.size());
        if (copy == nullptr) return resource_exhausted("{}: cannot allocate buffer '{}' ({} bytes)", where("values"), t->buffer()->str(), bytes.size());
        if (!bytes.empty()) std::memcpy(copy->mutable_data(), bytes.data(), bytes.size());
        mi->values[i] = Tensor(s.dtype, s.static_shape, std::move(copy), 0);
        mi->buffers.emplace_back(static_cast<int32_t>(i), t->buffer()->str());
      }
    }
  }
  if (m->inputs()) mi->inputs.assign(m->inputs()->begin(), m->inputs()->end());
  if (m->outputs()) mi->outputs.assign(m->outputs()->begin(), m->outputs()->end());
  for (uint32_t i = 0; i < mi->inputs.size(); ++i) {
    mi->input_names.push_back(m->input_names()->Get(i)->str());
    const ValueSlot& slot = mi->slots[static_cast<size_t>(mi->inputs[i])];
    TensorMeta meta;
    meta.dtype = slot.dtype;
    meta.text = impl_->spec_text(m, slot.tensor);
    for (const fb::Dim* d : *slot.tensor->dims()) {
      const fb::Symbol* sym = d->symbol() < 0 ? nullptr : m->symbols()->Get(static_cast<uint32_t>(d->symbol()));
      meta.sizes.push_back(sym ? -1 : d->size());
      meta.symbols.push_back(sym ? sym->name()->str() : "");
      meta.min.push_back(sym ? sym->min() : -1);
      meta.max.push_back(sym ? sym->max() : -1);
    }
    mi->input_meta.push_back(std::move(meta));
  }
  for (uint32_t i = 0; i < mi->outputs.size(); ++i) mi->output_names.push_back(m->output_names()->Get(i)->str());

  // A method a cond or loop here calls (its index checked by parse), loaded once per load
  // however many instructions call it.
  auto callee = [&](uint32_t index, const std::string& what) -> Result<std::shared_ptr<Method>> {
    std::shared_ptr<Method>& method = loaded[index];  // a std::map: stays valid as it grows
    if (method == nullptr) {
      const fb::Method* fm = impl_->root->methods()->Get(index);
      auto r = load_method(fm->name()->string_view(), registry, options, loaded);
      if (!r.ok()) return r.status().with_context(fmt::format("method '{}': {}", name, what));
      method = std::move(r).value();
    }
    return method;
  };
  // Steps: kernels resolved by name, arguments bound to the value slots once.
  std::vector<std::string> missing;
  for (uint32_t k = 0; k < m->instructions()->size(); ++k) {
    const fb::InstructionEntry* e = m->instructions()->Get(k);
    Step s;
    if (const fb::KernelCall* c = e->instruction_as_KernelCall()) {
      s.kind = Kind::kKernel;
      s.op = impl_->root->operators()->Get(c->op())->string_view();
      s.what = c->name() != nullptr ? fmt::format("node '{}' ({})", c->name()->string_view(), s.op)
                                    : fmt::format("instruction {} ({})", k, s.op);
      s.fn = portable::find_kernel(s.op);
      if (s.fn == nullptr) {
        missing.push_back(fmt::format("instruction {} ('{}')", k, s.op));
        continue;
      }
      if (c->inputs()) {
        for (int32_t v : *c->inputs()) {
          const fb::ValueEntry* ve = m->values()->Get(static_cast<uint32_t>(v));
          switch (ve->value_type()) {
            case fb::Value::Tensor: s.args.inputs.push_back(portable::KernelInput::of(&mi->values[static_cast<size_t>(v)])); break;
            case fb::Value::TensorList: {
              std::vector<const Tensor*> list;
              for (int32_t item : *ve->value_as_TensorList()->items()) list.push_back(&mi->values[static_cast<size_t>(item)]);
              s.args.inputs.push_back(portable::KernelInput::of_list(std::move(list)));
              break;
            }
            case fb::Value::Int: s.args.inputs.push_back(portable::KernelInput::of_number(static_cast<double>(ve->value_as_Int()->value()), true)); break;
            case fb::Value::Double: s.args.inputs.push_back(portable::KernelInput::of_number(ve->value_as_Double()->value(), false)); break;
            case fb::Value::Bool: s.args.inputs.push_back(portable::KernelInput::of_number(ve->value_as_Bool()->value() ? 1 : 0, true)); break;
            default: s.args.inputs.push_back(portable::KernelInput::none()); break;
          }
        }
      }
      if (c->attrs()) {
        for (const fb::KernelAttr* a : *c->attrs()) {
          s.args.attrs.push_back({a->name()->str(), attr_of(m->values()->Get(static_cast<uint32_t>(a->value())))});
        }
      }
      if (c->outputs()) s.outputs.assign(c->outputs()->begin(), c->outputs()->end());
    } else if (const fb::DelegateCall* c = e->instruction_as_DelegateCall()) {
      s.kind = Kind::kDelegate;
      s.delegate = c->delegate();
      if (c->inputs()) s.inputs.assign(c->inputs()->begin(), c->inputs()->end());
      if (c->outputs()) s.outputs.assign(c->outputs()->begin(), c->outputs()->end());
    } else if (const fb::CopyBuffer* c = e->instruction_as_CopyBuffer()) {
      s.kind = Kind::kCopy;
      s.src = c->src();
      s.dst = c->dst();
    } else if (const fb::CondCall* c = e->instruction_as_CondCall()) {
      s.kind = Kind::kCond;
      s.what = fmt::format("node '{}' (cond)", c->name() ? c->name()->string_view() : "?");
      s.src = c->pred();
      if (c->inputs()) s.inputs.assign(c->inputs()->begin(), c->inputs()->end());
      if (c->outputs()) s.outputs.assign(c->outputs()->begin(), c->outputs()->end());
      for (size_t b = 0; b < 2; ++b) {
        if (const flatbuffers::String* error = b == 1 ? c->true_error() : c->false_error()) {
          s.branch_errors[b] = error->str();
          continue;
        }
        KILN_ASSIGN_OR_RETURN(s.branches[b],
                              callee(b == 1 ? c->true_method() : c->false_method(), s.what));
      }
    } else if (const fb::LoopCall* c = e->instruction_as_LoopCall()) {
      s.kind = Kind::kLoop;
      s.what = fmt::format("node '{}' (loop)", c->name() ? c->name()->string_view() : "?");
      s.src = c->trip_count();
      s.dst = c->cond();
      s.num_carried = c->num_carried();
      if (c->inputs()) s.inputs.assign(c->inputs()->begin(), c->inputs()->end());
      if (c->outputs()) s.outputs.assign(c->outputs()->begin(), c->outputs()->end());
      for (size_t k = s.num_carried; k < s.outputs.size(); ++k) {
        // A loop that runs no iteration: the element's static dims, a symbolic one as 0.
        const fb::Tensor* t = mi->slots[static_cast<size_t>(s.outputs[k])].tensor;
        portable::ScanElement e{mi->slots[static_cast<size_t>(s.outputs[k])].dtype, {}};
        for (uint32_t d = 1; t != nullptr && t->dims() && d < t->dims()->size(); ++d) {
          const fb::Dim* dim = t->dims()->Get(d);
          e.shape.push_back(dim->symbol() < 0 ? std::max<int64_t>(dim->size(), 0) : 0);
        }
        s.scan.push_back(std::move(e));
      }
      KILN_ASSIGN_OR_RETURN(s.branches[0], callee(c->body(), s.what));
    }
    mi->steps.push_back(std::move(s));
  }
  if (!missing.empty()) {
    return unsupported("method '{}': {} instruction(s) call an op with no portable kernel: {}", name,
                       missing.size(), fmt::join(missing, ", "));
  }

  // The arena.
  uint64_t arena_bytes = m->arena_bytes();
  KILN_RETURN_IF_ERROR(check_memory(arena_bytes, fmt::format("the activation arena of method '{}'", name)));
  std::shared_ptr<Storage> arena;
  if (options.allocator != nullptr) {
    arena = options.allocator->allocate(static_cast<size_t>(arena_bytes));
    if (arena == nullptr || arena->size() < arena_bytes) {
      return resource_exhausted("method '{}': the allocator gave no {} bytes for the activation arena",
                                name, arena_bytes);
    }
  } else {
    arena = HeapStorage::try_allocate(static_cast<size_t>(arena_bytes));
    if (arena == nullptr) {
      return resource_exhausted("method '{}': cannot allocate the {}-byte activation arena", name, arena_bytes);
    }
  }
  mi->arena = arena;
  mi->stats.arena_bytes = arena_bytes;
  mi->ctx = std::make_unique<RunContext>(std::max(1, options.num_threads));
  mi->ctx->arena_ = arena;
  mi->ctx->slots_ = &mi->slots;
  mi->ctx->stats_ = &mi->stats;
  if (options.profile) {
    for (const Step& s : mi->steps) {
      std::string op = s.kind == Kind::kKernel ? std::string(s.op)
                       : s.kind == Kind::kCopy ? "copy"
                       : s.kind == Kind::kCond || s.kind == Kind::kLoop
                           ? s.what
                           : fmt::format("delegate {} ({})", mi->delegate_names[s.delegate],
                                         mi->backends[s.delegate]->id());
      mi->stats.instructions.push_back({std::move(op), 0});
    }
  }
  portable::set_blas_threads(1);  // the method's pool splits each GEMM (portable sgemm)
  return std::unique_ptr<Method>(new Method(std::move(mi)));
}

Method::Method(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Method::~Method() = default;
const std::string& Method::name() const { return impl_->name; }
const std::vector<std::string>& Method::input_names() const { return impl_->input_names; }
const std::vector<std::string>& Method::output_names() const { return impl_->output_names; }
const std::vector<TensorMeta>& Method::input_meta() const { return impl_->input_meta; }
const MethodStats& Method::stats() const { return impl_->stats; }

std::vector<std::pair<std::string, Tensor>> Method::buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [v, name] : impl_->buffers) out.emplace_back(name, impl_->values[static_cast<size_t>(v)]);
  return out;
}

Status Method::Impl::bind_inputs(std::span<const Tensor> in) {
  if (in.size() != inputs.size()) {
    return invalid_argument("method '{}': expected {} input(s) ({}), got {}", name, inputs.size(),
                            fmt::join(input_names, ", "), in.size());
  }
  std::unordered_map<int32_t, std::pair<int64_t, size_t>> bound;  // symbol -> (size, input)
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    const ValueSlot& s = slots[static_cast<size_t>(inputs[i])];
    auto mismatch = [&]() {
      return invalid_argument("input '{}': got {}, expected {}", input_names[i],
                              format_shape(t.dtype(), t.shape()), program->spec_text(m, s.tensor));
    };
    if (t.dtype() != s.dtype || t.rank() != s.static_shape.size()) return mismatch();
    for (size_t d = 0; d < t.rank(); ++d) {
      const fb::Dim* dim = s.tensor->dims()->Get(static_cast<uint32_t>(d));
      if (dim->symbol() < 0) {
        if (dim->size() != t.dim(d)) return mismatch();
        continue;
      }
      const fb::Symbol* sym = m->symbols()->Get(static_cast<uint32_t>(dim->symbol()));
      if (sym->max() >= 0 && (t.dim(d) < sym->min() || t.dim(d) > sym->max())) {
        return invalid_argument("input '{}': got {}, but dim {} ('{}') was planned for {}..{}",
                                input_names[i], format_shape(t.dtype(), t.shape()), d,
                                sym->name()->str(), sym->min(), sym->max());
      }
      auto [it, fresh] = bound.emplace(dim->symbol(), std::make_pair(t.dim(d), i));
      if (!fresh && it->second.first != t.dim(d)) {
        return invalid_argument("input '{}': dim {} ('{}') is {}, but input '{}' gave it {}",
                                input_names[i], d, sym->name()->str(), t.dim(d),
                                input_names[it->second.second], it->second.first);
      }
    }
    if (!t.defined()) return invalid_argument("input '{}': tensor has no data", input_names[i]);
    values[static_cast<size_t>(inputs[i])] = t;
  }
  return Status::Ok();
}

// Stores what an instruction produced into its output values. A value planned in the arena
// must sit in its own planned range or outside the arena: a result that landed elsewhere in
// the arena (a kernel's view of an input the planner did not expect) is copied out, so the plan
// can never let a later value overwrite it.
Status Method::Impl::place_outputs(const Step& s, std::vector<Tensor>& produced, std::string_view what) {
  if (produced.size() != s.outputs.size()) {
    return internal_error("method '{}': {} returned {} outputs, the program expects {}", name, what,
                          produced.size(), s.outputs.size());
  }
  for (size_t k = 0; k < produced.size(); ++k) {
    size_t v = static_cast<size_t>(s.outputs[k]);
    const ValueSlot& slot = slots[v];
    Tensor& t = produced[k];
    if (t.dtype() != slot.dtype) {  // the declared dtype wins, as in the interpreter
      portable::KernelArgs cast_args;
      cast_args.inputs.push_back(portable::KernelInput::of(&t));
      cast_args.attrs.push_back({"dtype", slot.dtype});
      std::vector<Tensor> casted;
      ctx->begin(nullptr);
      KILN_RETURN_IF_ERROR(portable::find_kernel("cast")(*ctx, cast_args, &casted));
      t = std::move(casted[0]);
    }
    bool in_arena = t.storage() == arena;
    bool in_slot = in_arena && slot.home == fb::TensorHome::Arena &&
                   t.storage_offset() == slot.tensor->offset() && t.nbytes() <= slot.tensor->nbytes();
    if (in_arena && !in_slot && slot.home != fb::TensorHome::Alias) {
      ++stats.heap_allocations;
      t = t.clone();
    }
    values[v] = std::move(t);
  }
  return Status::Ok();
}

Result<std::vector<Tensor>> Method::execute(std::span<const Tensor> inputs) {
  Impl& mi = *impl_;
  KILN_RETURN_IF_ERROR(mi.bind_inputs(inputs));
  mi.stats.heap_allocations = 0;
  const bool profile = !mi.stats.instructions.empty();
  for (size_t k = 0; k < mi.steps.size(); ++k) {
    Step& s = mi.steps[k];
    std::chrono::steady_clock::time_point start;
    if (profile) start = std::chrono::steady_clock::now();
    switch (s.kind) {
      case Kind::kKernel: {
        mi.scratch.clear();
        mi.ctx->begin(&s.outputs);
        Status st;
        try {
          st = s.fn(*mi.ctx, s.args, &mi.scratch);
        } catch (const std::bad_alloc&) {
          return mi.out_of_memory(s.what);
        }
        if (!st.ok()) return st.with_context(fmt::format("method '{}': {}", mi.name, s.what));
        KILN_RETURN_IF_ERROR(mi.place_outputs(s, mi.scratch, s.what));
        break;
      }
      case Kind::kDelegate: {
        std::vector<Tensor> ins;
        ins.reserve(s.inputs.size());
        for (int32_t v : s.inputs) ins.push_back(mi.values[static_cast<size_t>(v)]);
        mi.scratch.clear();
        mi.ctx->begin(&s.outputs);
        Status st;
        try {
          st = mi.backends[s.delegate]->execute(*mi.handles[s.delegate], *mi.ctx, ins, &mi.scratch);
        } catch (const std::bad_alloc&) {
          st = mi.out_of_memory(fmt::format("delegate '{}'", mi.delegate_names[s.delegate]));
        }
        if (!st.ok()) {
          return make_error(StatusCode::kDelegateFailed, "method '{}': delegate '{}' (backend '{}') failed: {}",
                            mi.name, mi.delegate_names[s.delegate], mi.backends[s.delegate]->id(), st.message());
        }
        KILN_RETURN_IF_ERROR(mi.place_outputs(s, mi.scratch, fmt::format("delegate '{}'", mi.delegate_names[s.delegate])));
        break;
      }
      case Kind::kCond: {
        const Tensor& pred = mi.values[static_cast<size_t>(s.src)];
        if (pred.numel() != 1 || !pred.defined()) {
          return invalid_argument("method '{}': {}: the predicate has {} elements, expected one",
                                  mi.name, s.what, pred.numel());
        }
        bool taken = pred.scalar_at(0) != 0;
        if (s.branches[taken ? 1 : 0] == nullptr) {
          return invalid_argument(
              "method '{}': {}: the {} branch cannot run on this program's "
              "shapes: {}",
              mi.name, s.what, taken ? "true" : "false", s.branch_errors[taken ? 1 : 0]);
        }
        std::vector<Tensor> ins;
        ins.reserve(s.inputs.size());
        for (int32_t v : s.inputs) ins.push_back(mi.values[static_cast<size_t>(v)]);
        auto outs = s.branches[taken ? 1 : 0]->execute(ins);
        if (!outs.ok()) {
          return outs.status().with_context(
              fmt::format("method '{}': {}, {} branch", mi.name, s.what, taken ? "true" : "false"));
        }
        KILN_RETURN_IF_ERROR(mi.place_outputs(s, *outs, s.what));
        break;
      }
      case Kind::kLoop: {
        auto value = [&](int32_t v) {
          return v < 0 ? nullptr : &mi.values[static_cast<size_t>(v)];
        };
        std::vector<Tensor> ins;
        ins.reserve(s.inputs.size());
        for (int32_t v : s.inputs) ins.push_back(mi.values[static_cast<size_t>(v)]);
        Method* body = s.branches[0].get();
        std::vector<Tensor> outs;
        mi.ctx->begin(nullptr);
        try {
          auto r = portable::run_loop(
              *mi.ctx, value(s.src), value(s.dst), ins, s.num_carried, s.scan,
              [body](const std::vector<Tensor>& in) { return body->execute(in); });
          if (!r.ok())
            return r.status().with_context(fmt::format("method '{}': {}", mi.name, s.what));
          outs = std::move(r).value();
        } catch (const std::bad_alloc&) {
          return mi.out_of_memory(s.what);
        }
        KILN_RETURN_IF_ERROR(mi.place_outputs(s, outs, s.what));
        break;
      }
      case Kind::kCopy: {
        const Tensor& src = mi.values[static_cast<size_t>(s.src)];
        Tensor& dst = mi.values[static_cast<size_t>(s.dst)];
        if (src.dtype() != dst.dtype() || src.shape() != dst.shape()) {
          return invalid_argument("method '{}': instruction {}: the new value of buffer is {}, but "
                                  "the buffer is {}",
                                  mi.name, k, format_shape(src.dtype(), src.shape()),
                                  format_shape(dst.dtype(), dst.shape()));
        }
        if (src.nbytes() > 0) std::memcpy(dst.mutable_data(), src.data(), src.nbytes());
        break;
      }
    }
    if (profile) {
      mi.stats.instructions[k].ns = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    }
  }
  std::vector<Tensor> out;
  out.reserve(mi.outputs.size());
  for (int32_t v : mi.outputs) {
    Tensor t = mi.values[static_cast<size_t>(v)];
    if (t.storage() == mi.arena) t = t.clone();  // outputs belong to the caller
    out.push_back(std::move(t));
  }
  // Drop everything but constants and buffers.
  for (size_t i = 0; i < mi.values.size(); ++i) {
    fb::TensorHome h = mi.slots[i].home;
    if (mi.slots[i].tensor != nullptr && h != fb::TensorHome::Constant && h != fb::TensorHome::Buffer) {
      mi.values[i] = Tensor();
    }
  }
  return out;
}

Status BackendRegistry::add(std::unique_ptr<BackendInterface> backend) {
  if (backend == nullptr || backend->id().empty()) return invalid_argument("a backend needs an id");
  std::string id(backend->id());
  if (!backends_.emplace(id, std::move(backend)).second) {
    return invalid_argument("backend '{}' is already registered", id);
  }
  return Status::Ok();
}

std::shared_ptr<const BackendInterface> BackendRegistry::find(std::string_view id) const {
  auto it = backends_.find(id);
  return it == backends_.end() ? nullptr : it->second;
}

std::vector<std::string> BackendRegistry::ids() const {
  std::vector<std::string> out;
  for (const auto& [id, b] : backends_) out.push_back(id);
  return out;
}

Result<std::span<const uint8_t>> NamedDataMap::get(std::string_view key) const {
  auto it = data_.find(key);
  if (it == data_.end()) {
    return not_found("named data '{}' is not in the program file ({} entries given)", key, data_.size());
  }
  return it->second;
}

std::shared_ptr<Storage> BufferAllocator::allocate(size_t bytes) {
  if (used_ || bytes > size_ || reinterpret_cast<uintptr_t>(data_) % 64 != 0) return nullptr;
  used_ = true;
  return std::make_shared<ExternalStorage>(data_, bytes, nullptr);
}

}  // namespace kiln::runtime
