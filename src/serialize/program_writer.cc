#include "kiln/serialize/program_writer.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <zlib.h>

#include "kiln/core/file.h"
#include "kiln/ir/op_registry.h"
#include "kiln/runtime/program_format.h"
#include "program_generated.h"

namespace kiln {
namespace {

namespace fb = kiln::fb;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

bool power_of_two(size_t v) { return v != 0 && (v & (v - 1)) == 0; }
size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// A segment in the making: its bytes are views of storages (constants packed at an alignment,
// or one delegate blob).
struct Segment {
  runtime::SegmentKind kind;
  std::vector<std::pair<size_t, std::span<const uint8_t>>> pieces;  // offset in segment, bytes
  std::vector<std::shared_ptr<const void>> keep;
  size_t size = 0;
};

// Content key of a byte range: a hash, confirmed by comparing bytes.
uint64_t hash_bytes(std::span<const uint8_t> b) {
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
}

// Constants and blobs of the whole file, each distinct byte string stored once.
class DataTable {
 public:
  DataTable(size_t constant_alignment, bool external)
      : constant_alignment_(constant_alignment), external_mode_(external) {}

  // Index into Program.constants of a tensor's bytes; with external constants, of the named
  // constant `key` (the bytes go to the caller).
  uint32_t constant(const Tensor& t, const std::string& key) {
    if (external_mode_) {
      auto [it, fresh] = external_index_.try_emplace(key, static_cast<uint32_t>(external_.size()));
      if (fresh) external_.emplace_back(key, t);
      return it->second;
    }
    std::span<const uint8_t> b(static_cast<const uint8_t*>(t.data()), t.nbytes());
    if (constant_segment_ < 0) {  // made with the first constant: a file without any has none
      constant_segment_ = static_cast<int32_t>(segments_.size());
      segments_.push_back({runtime::SegmentKind::kConstants, {}, {}, 0});
    }
    auto [it, fresh] = by_hash_.try_emplace(hash_bytes(b));
    for (uint32_t idx : it->second) {
      const auto& [off, bytes] = segments_[constant_segment_].pieces[constants_[idx]];
      if (bytes.size() == b.size() && std::memcmp(bytes.data(), b.data(), b.size()) == 0) {
        ++shared_constants_;
        return idx;
      }
    }
    Segment& seg = segments_[constant_segment_];
    size_t offset = align_up(seg.size, constant_alignment_);
    seg.pieces.emplace_back(offset, b);
    seg.keep.push_back(t.storage());
    seg.size = offset + b.size();
    uint32_t idx = static_cast<uint32_t>(constants_.size());
    constants_.push_back(seg.pieces.size() - 1);
    it->second.push_back(idx);
    return idx;
  }

  // Segment index of a delegate blob.
  uint32_t blob(const std::shared_ptr<const Storage>& s) {
    std::span<const uint8_t> b = s->bytes();
    auto [it, fresh] = blob_by_hash_.try_emplace(hash_bytes(b));
    for (uint32_t seg : it->second) {
      std::span<const uint8_t> have = segments_[seg].pieces[0].second;
      if (have.size() == b.size() && std::memcmp(have.data(), b.data(), b.size()) == 0) {
        ++shared_blobs_;
        return seg;
      }
    }
    uint32_t idx = static_cast<uint32_t>(segments_.size());
    segments_.push_back({runtime::SegmentKind::kDelegateBlob, {{0, b}}, {s}, b.size()});
    it->second.push_back(idx);
    return idx;
  }

  Offset<flatbuffers::Vector<Offset<fb::ConstantData>>> write_constants(FlatBufferBuilder& fbb) const {
    std::vector<Offset<fb::ConstantData>> out;
    for (const auto& [key, t] : external_) {
      out.push_back(fb::CreateConstantData(fbb, 0, 0, t.nbytes(), fbb.CreateString(key)));
    }
    out.reserve(constants_.size());
    for (size_t piece : constants_) {
      const auto& [off, bytes] = segments_[constant_segment_].pieces[piece];
      out.push_back(fb::CreateConstantData(fbb, static_cast<uint32_t>(constant_segment_), off, bytes.size()));
    }
    return fbb.CreateVector(out);
  }

  std::vector<Segment>& segments() { return segments_; }
  std::vector<std::pair<std::string, Tensor>>& external() { return external_; }

 private:
  size_t constant_alignment_;
  bool external_mode_;
  // External constants (SerializeOptions::external_constants): by key, in index order.
  std::vector<std::pair<std::string, Tensor>> external_;
  std::unordered_map<std::string, uint32_t> external_index_;
  std::vector<Segment> segments_;
  int32_t constant_segment_ = -1;  // the one segment of constants, once there is one
  std::vector<size_t> constants_;  // constant index -> piece of the constant segment
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_hash_, blob_by_hash_;
  size_t shared_constants_ = 0, shared_blobs_ = 0;
};

// Program-wide table of kernel names.
class OperatorTable {
 public:
  uint32_t index(std::string_view name) {
    auto [it, fresh] = index_.try_emplace(std::string(name), static_cast<uint32_t>(names_.size()));
    if (fresh) names_.emplace_back(name);
    return it->second;
  }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<std::string> names_;
};

// Writes one method.
class MethodWriter {
 public:
  // `method_index`: where each subgraph program is written (its cond calls run it there).
  MethodWriter(FlatBufferBuilder& fbb, DataTable& data, OperatorTable& ops,
               const SerializeOptions& options, const std::string& name,
               const ExportedProgram& program,
               const std::unordered_map<const ExportedProgram*, uint32_t>& method_index)
      : fbb_(fbb),
        data_(data),
        ops_(ops),
        options_(options),
        name_(name),
        program_(program),
        method_index_(method_index) {}

  Result<Offset<fb::Method>> write() {
    MemoryPlanOptions plan_options;
    plan_options.alignment = options_.arena_alignment;
    plan_options.unbounded_dims_dynamic = options_.unbounded_dims_dynamic;
    for (const auto& [sym, range] : options_.dims) plan_options.dim_bounds.emplace(sym, range.max);
    auto plan = plan_memory(program_, plan_options);
    if (!plan.ok()) return plan.status().with_context(fmt::format("method '{}'", name_));
    plan_ = std::move(plan).value();
    values_.resize(plan_.values.size());
    KILN_RETURN_IF_ERROR(write_tensor_values());
    KILN_RETURN_IF_ERROR(write_instructions());

    std::vector<Offset<fb::ValueEntry>> values;
    values.reserve(values_.size());
    for (const auto& v : values_) values.push_back(v);
    std::vector<Offset<fb::Symbol>> symbols;
    for (const std::string& s : symbol_names_) {
      auto it = options_.dims.find(s);
      // Derived symbols ("batch*12") carry no range of their own: inputs bind plain symbols.
      int64_t lo = it == options_.dims.end() ? -1 : it->second.min;
      int64_t hi = it == options_.dims.end() ? -1 : it->second.max;
      symbols.push_back(fb::CreateSymbol(fbb_, fbb_.CreateString(s), lo, hi));
    }
    auto strings = [&](const std::vector<std::string>& v) {
      std::vector<Offset<flatbuffers::String>> out;
      for (const auto& s : v) out.push_back(fbb_.CreateString(s));
      return fbb_.CreateVector(out);
    };
    return fb::CreateMethod(fbb_, fbb_.CreateString(name_), fbb_.CreateVector(values),
                            fbb_.CreateVector(symbols), fbb_.CreateVector(inputs_),
                            strings(input_names_), fbb_.CreateVector(outputs_),
                            strings(output_names_), fbb_.CreateVector(instructions_),
                            fbb_.CreateVector(delegates_), plan_.arena_bytes,
                            plan_.lower_bound_bytes, plan_.no_reuse_bytes);
  }

 private:
  Status fail_at(const Node* n, std::string_view what) const {
    return invalid_argument("method '{}': node '{}': {}", name_, n->name(), what);
  }

  int32_t symbol(std::string_view name) {
    auto [it, fresh] = symbol_index_.try_emplace(std::string(name),
                                                 static_cast<int32_t>(symbol_names_.size()));
    if (fresh) symbol_names_.emplace_back(name);
    return it->second;
  }

  Status write_tensor_values() {
    const auto& sig = program_.signature();
    std::unordered_map<std::string_view, const InputSpec*> spec_of;
    for (const InputSpec& s : sig.inputs) spec_of.emplace(s.arg, &s);
    for (size_t i = 0; i < plan_.values.size(); ++i) {
      const PlannedValue& v = plan_.values[i];
      const Node* n = v.node;
      if (v.index >= n->meta.val.size()) return fail_at(n, "value has no spec");
      const TensorSpec& spec = n->meta.val[v.index];
      std::vector<fb::Dim> dims;
      dims.reserve(spec.rank());
      for (const Dim& d : spec.shape) {
        dims.emplace_back(d.is_static() ? d.value() : -1,
                          d.is_static() ? -1 : symbol(d.symbol_name()));
      }
      fb::TensorHome home = fb::TensorHome::Arena;
      int32_t data = -1;
      Offset<flatbuffers::String> buffer;
      switch (v.home) {
        case ValueHome::kArena: home = fb::TensorHome::Arena; break;
        case ValueHome::kInput: home = fb::TensorHome::Input; break;
        case ValueHome::kOutput: home = fb::TensorHome::Output; break;
        case ValueHome::kAlias: home = fb::TensorHome::Alias; break;
        case ValueHome::kDynamic: home = fb::TensorHome::Dynamic; break;
        case ValueHome::kConstant:
        case ValueHome::kBuffer: {
          std::string target;
          if (n->op() == OpKind::kGetAttr) {
            target = std::string(n->target_name());
          } else {
            auto it = spec_of.find(n->name());
            if (it == spec_of.end()) return fail_at(n, "placeholder has no input spec");
            target = it->second->target;
          }
          const Tensor* t = program_.constants().find(target);
          if (t == nullptr) return fail_at(n, fmt::format("constant '{}' is not stored", target));
          if (t->nbytes() > 0 && t->storage() != nullptr && is_elided(*t->storage())) {
            return fail_at(n, fmt::format("constant '{}' has no bytes (a text form gave its size "
                                          "only)", target));
          }
          data = static_cast<int32_t>(data_.constant(*t, target));
          if (v.home == ValueHome::kBuffer) {
            home = fb::TensorHome::Buffer;
            buffer = fbb_.CreateString(target);
          } else {
            home = fb::TensorHome::Constant;
          }
          break;
        }
      }
      auto tensor = fb::CreateTensor(fbb_, static_cast<uint8_t>(spec.dtype),
                                     fbb_.CreateVectorOfStructs(dims), home,
                                     v.offset < 0 ? 0 : static_cast<uint64_t>(v.offset), v.bytes,
                                     data, v.alias_of, buffer);
      values_[i] = fb::CreateValueEntry(fbb_, fb::Value::Tensor, tensor.Union());
    }
    return Status::Ok();
  }

  // A deduplicated non-tensor value.
  template <typename Key, typename MakeFn>
  int32_t scalar(Key key, MakeFn make) {
    auto [it, fresh] = scalars_.try_emplace(std::move(key), 0);
    if (fresh) {
      it->second = static_cast<int32_t>(values_.size());
      values_.push_back(make());
    }
    return it->second;
  }

  int32_t none_value() {
    return scalar(std::string("n"), [&] {
      return fb::CreateValueEntry(fbb_, fb::Value::None, fb::CreateNone(fbb_).Union());
    });
  }
  int32_t int_value(int64_t v) {
    return scalar(fmt::format("i{}", v), [&] {
      return fb::CreateValueEntry(fbb_, fb::Value::Int, fb::CreateInt(fbb_, v).Union());
    });
  }
  int32_t double_value(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return scalar(fmt::format("d{:x}", bits), [&] {
      return fb::CreateValueEntry(fbb_, fb::Value::Double, fb::CreateDouble(fbb_, v).Union());
    });
  }

  // The value index a node argument reads.
  Result<int32_t> value_of(const Node* user, const Node* n) const {
    if (n->is_call(OpId::kGetitem)) {
      const Node* src = n->arg(0).is_node() ? n->arg(0).node() : nullptr;
      int64_t index = n->num_args() > 1 && n->arg(1).kind() == Arg::Kind::kInt ? n->arg(1).to_int() : -1;
      if (src == nullptr || index < 0 || src->id() >= plan_.first_value.size() ||
          plan_.first_value[src->id()] < 0 ||
          static_cast<size_t>(index) >= src->meta.val.size()) {
        return fail_at(user, fmt::format("reads getitem '{}', which does not select an element "
                                         "of a list",
                                         n->name()));
      }
      return plan_.first_value[src->id()] + static_cast<int32_t>(index);
    }
    if (n->id() >= plan_.first_value.size() || plan_.first_value[n->id()] < 0) {
      return fail_at(user, fmt::format("reads '{}', which has no tensor value", n->name()));
    }
    return plan_.first_value[n->id()];
  }

  Result<int32_t> input_value(const Node* user, const Arg& a) {
    switch (a.kind()) {
      case Arg::Kind::kNode: return value_of(user, a.node());
      case Arg::Kind::kNodeList: {
        std::vector<int32_t> items;
        for (const Node* m : a.nodes()) {
          KILN_ASSIGN_OR_RETURN(int32_t v, value_of(user, m));
          items.push_back(v);
        }
        values_.push_back(fb::CreateValueEntry(
            fbb_, fb::Value::TensorList, fb::CreateTensorList(fbb_, fbb_.CreateVector(items)).Union()));
        return static_cast<int32_t>(values_.size() - 1);
      }
      case Arg::Kind::kInt: return int_value(a.to_int());
      case Arg::Kind::kFloat: return double_value(a.to_float());
      case Arg::Kind::kBool: return int_value(a.to_bool() ? 1 : 0);  // as a number, like the interpreter
      default: return none_value();
    }
  }

  int32_t attr_value(const Arg& a) {
    switch (a.kind()) {
      case Arg::Kind::kInt: return int_value(a.to_int());
      case Arg::Kind::kFloat: return double_value(a.to_float());
      case Arg::Kind::kBool:
        return scalar(fmt::format("b{}", a.to_bool()), [&] {
          return fb::CreateValueEntry(fbb_, fb::Value::Bool, fb::CreateBool(fbb_, a.to_bool()).Union());
        });
      case Arg::Kind::kStr:
        return scalar("s" + a.to_str(), [&] {
          return fb::CreateValueEntry(fbb_, fb::Value::String,
                                      fb::CreateString(fbb_, fbb_.CreateString(a.to_str())).Union());
        });
      case Arg::Kind::kIntList:
        return scalar(fmt::format("I{}", fmt::join(a.to_ints(), ",")), [&] {
          return fb::CreateValueEntry(fbb_, fb::Value::IntList,
                                      fb::CreateIntList(fbb_, fbb_.CreateVector(a.to_ints())).Union());
        });
      case Arg::Kind::kFloatList: {
        std::vector<double> v = a.to_floats();
        std::string key = "D";
        for (double d : v) {
          uint64_t bits;
          std::memcpy(&bits, &d, sizeof bits);
          key += fmt::format("{:x},", bits);
        }
        return scalar(key, [&] {
          return fb::CreateValueEntry(fbb_, fb::Value::DoubleList,
                                      fb::CreateDoubleList(fbb_, fbb_.CreateVector(v)).Union());
        });
      }
      case Arg::Kind::kDType:
        return scalar(fmt::format("t{}", static_cast<int>(a.to_dtype())), [&] {
          return fb::CreateValueEntry(
              fbb_, fb::Value::DTypeValue,
              fb::CreateDTypeValue(fbb_, static_cast<uint8_t>(a.to_dtype())).Union());
        });
      default: return none_value();
    }
  }

  std::vector<int32_t> outputs_of(const Node* n) const {
    std::vector<int32_t> out;
    int32_t first = n->id() < plan_.first_value.size() ? plan_.first_value[n->id()] : -1;
    if (first < 0) return out;
    for (size_t k = 0; k < n->meta.val.size(); ++k) out.push_back(first + static_cast<int32_t>(k));
    return out;
  }

  void add(fb::Instruction type, Offset<void> ins) {
    instructions_.push_back(fb::CreateInstructionEntry(fbb_, type, ins));
  }

  Result<uint32_t> delegate(const Node* call, const Node* module_attr) {
    std::string module(module_attr->target_name());
    auto it = delegate_index_.find(module);
    if (it != delegate_index_.end()) return it->second;
    const LoweredModule* lm = program_.find_lowered_module(module);
    if (lm == nullptr) return fail_at(call, fmt::format("lowered module '{}' is missing", module));
    if (lm->processed_bytes == nullptr || is_elided(*lm->processed_bytes)) {
      return fail_at(call, fmt::format("lowered module '{}': its blob was given by size only "
                                       "(bytes={}, no base64), so there is nothing to run; print "
                                       "the program in full (kiln partition -o)",
                                       module, lm->processed_bytes ? lm->processed_bytes->size() : 0));
    }
    std::vector<Offset<fb::CompileSpec>> specs;
    for (const CompileSpec& s : lm->compile_specs) {
      specs.push_back(fb::CreateCompileSpec(fbb_, fbb_.CreateString(s.key), fbb_.CreateVector(s.value)));
    }
    // Named data: the blob's weights, kept in the owner's constants; identical bytes (two
    // delegates' copies of one weight, or two methods') land in the constant segment once.
    std::vector<Offset<fb::NamedData>> named;
    for (const auto& [key, constant] : lm->named_data) {
      const Tensor* t = program_.constants().find(constant);
      if (t == nullptr) {
        return fail_at(call, fmt::format("lowered module '{}': named data '{}' names constant "
                                         "'{}', which is not stored",
                                         module, key, constant));
      }
      if (t->nbytes() > 0 && t->storage() != nullptr && is_elided(*t->storage())) {
        return fail_at(call, fmt::format("lowered module '{}': named data '{}' (constant '{}') has "
                                         "no bytes (a text form gave its size only)",
                                         module, key, constant));
      }
      named.push_back(fb::CreateNamedData(fbb_, fbb_.CreateString(key), data_.constant(*t, constant)));
    }
    uint32_t segment = data_.blob(lm->processed_bytes);
    delegates_.push_back(fb::CreateDelegate(fbb_, fbb_.CreateString(lm->name),
                                            fbb_.CreateString(lm->backend_id),
                                            fbb_.CreateVector(specs), segment,
                                            fbb_.CreateVector(named)));
    uint32_t idx = static_cast<uint32_t>(delegates_.size() - 1);
    delegate_index_.emplace(module, idx);
    return idx;
  }

  // A cond: a CondCall running the methods its subgraphs were written as.
  Status write_cond(const Node* n) {
    if (n->num_args() < 3 || !n->arg(0).is_node()) {
      return fail_at(n, "cond needs pred, true_branch and false_branch");
    }
    uint32_t branch[2] = {0, 0};
    Offset<flatbuffers::String> errors[2];
    for (size_t b = 0; b < 2; ++b) {
      const Arg& a = n->arg(b + 1);
      const Subgraph* sg = a.is_node() && a.node()->op() == OpKind::kGetAttr
                               ? program_.find_subgraph(a.node()->target_name())
                               : nullptr;
      if (sg != nullptr && sg->program == nullptr) {
        errors[b] = fbb_.CreateString(sg->error);
        continue;
      }
      auto it = sg == nullptr ? method_index_.end() : method_index_.find(sg->program.get());
      if (it == method_index_.end()) {
        return fail_at(n, fmt::format("cond's {} does not name a subgraph",
                                      b == 0 ? "true_branch" : "false_branch"));
      }
      branch[b] = it->second;
    }
    KILN_ASSIGN_OR_RETURN(int32_t pred, value_of(n, n->arg(0).node()));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> ins, operand_values(n, 3));
    add(fb::Instruction::CondCall,
        fb::CreateCondCall(fbb_, pred, branch[0], branch[1], fbb_.CreateVector(ins),
                           fbb_.CreateVector(outputs_of(n)), fbb_.CreateString(n->name()),
                           errors[0], errors[1])
            .Union());
    return Status::Ok();
  }

  // A loop: a LoopCall running the method its body was written as.
  Status write_loop(const Node* n) {
    const Arg* body = n->num_args() >= 4 ? &n->arg(2) : nullptr;
    const Subgraph* sg =
        body != nullptr && body->is_node() && body->node()->op() == OpKind::kGetAttr
            ? program_.find_subgraph(body->node()->target_name())
            : nullptr;
    auto it = sg == nullptr ? method_index_.end() : method_index_.find(sg->program.get());
    if (it == method_index_.end() || n->arg(3).kind() != Arg::Kind::kInt) {
      return fail_at(n, "loop needs trip_count, cond, a body subgraph and num_carried");
    }
    int32_t limits[2] = {-1, -1};
    for (size_t i = 0; i < 2; ++i) {
      if (n->arg(i).is_node()) {
        KILN_ASSIGN_OR_RETURN(limits[i], value_of(n, n->arg(i).node()));
      }
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> ins, operand_values(n, 4));
    add(fb::Instruction::LoopCall,
        fb::CreateLoopCall(fbb_, limits[0], limits[1], it->second,
                           static_cast<uint32_t>(n->arg(3).to_int()), fbb_.CreateVector(ins),
                           fbb_.CreateVector(outputs_of(n)), fbb_.CreateString(n->name()))
            .Union());
    return Status::Ok();
  }

  // The values of a control-flow node's tensor operands, from argument `first` on.
  Result<std::vector<int32_t>> operand_values(const Node* n, size_t first) {
    std::vector<int32_t> ins;
    for (size_t i = first; i < n->num_args(); ++i) {
      const Arg& a = n->arg(i);
      std::vector<const Node*> nodes;
      if (a.is_node()) nodes.push_back(a.node());
      if (a.is_node_list()) nodes.assign(a.nodes().begin(), a.nodes().end());
      for (const Node* m : nodes) {
        KILN_ASSIGN_OR_RETURN(int32_t v, value_of(n, m));
        ins.push_back(v);
      }
    }
    return ins;
  }

  Status write_instructions() {
    const auto& sig = program_.signature();
    size_t ph = 0;
    for (const Node* n : program_.graph().nodes()) {
      switch (n->op()) {
        case OpKind::kPlaceholder: {
          if (ph >= sig.inputs.size()) return fail_at(n, "placeholder has no input spec");
          const InputSpec& spec = sig.inputs[ph++];
          if (spec.kind == InputKind::kUserInput) {
            KILN_ASSIGN_OR_RETURN(int32_t v, value_of(n, n));
            inputs_.push_back(v);
            input_names_.push_back(spec.name.empty() ? n->name() : spec.name);
          }
          break;
        }
        case OpKind::kGetAttr: break;  // constants are values; lowered modules are delegates
        case OpKind::kCallFunction: {
          if (n->is_call(OpId::kGetitem)) break;  // its readers read the element directly
          if (n->is_call(OpId::kCond)) {
            KILN_RETURN_IF_ERROR(write_cond(n));
            break;
          }
          if (n->is_call(OpId::kLoop)) {
            KILN_RETURN_IF_ERROR(write_loop(n));
            break;
          }
          if (n->is_call(OpId::kCallDelegate)) {
            if (n->num_args() < 1 || !n->arg(0).is_node() ||
                n->arg(0).node()->op() != OpKind::kGetAttr) {
              return fail_at(n, "call_delegate's first argument must name a lowered module");
            }
            KILN_ASSIGN_OR_RETURN(uint32_t d, delegate(n, n->arg(0).node()));
            std::vector<int32_t> ins;
            for (size_t i = 1; i < n->num_args(); ++i) {
              const Arg& a = n->arg(i);
              if (a.is_node()) {
                KILN_ASSIGN_OR_RETURN(int32_t v, value_of(n, a.node()));
                ins.push_back(v);
              } else if (a.is_node_list()) {
                for (const Node* m : a.nodes()) {
                  KILN_ASSIGN_OR_RETURN(int32_t v, value_of(n, m));
                  ins.push_back(v);
                }
              }
            }
            add(fb::Instruction::DelegateCall,
                fb::CreateDelegateCall(fbb_, d, fbb_.CreateVector(ins),
                                       fbb_.CreateVector(outputs_of(n))).Union());
            break;
          }
          std::vector<int32_t> ins;
          for (const Arg& a : n->args()) {
            KILN_ASSIGN_OR_RETURN(int32_t v, input_value(n, a));
            ins.push_back(v);
          }
          const Schema& schema = n->schema();
          std::vector<Offset<fb::KernelAttr>> attrs;
          for (size_t i = 0; i < schema.keyword.size() && i < n->kwargs().size(); ++i) {
            int32_t v = attr_value(n->kwargs()[i]);
            attrs.push_back(fb::CreateKernelAttr(fbb_, fbb_.CreateString(schema.keyword[i].name), v));
          }
          uint32_t op = ops_.index(op_name(n->target()));
          add(fb::Instruction::KernelCall,
              fb::CreateKernelCall(fbb_, op, fbb_.CreateVector(ins), fbb_.CreateVector(attrs),
                                   fbb_.CreateVector(outputs_of(n)), fbb_.CreateString(n->name()))
                  .Union());
          break;
        }
        case OpKind::kOutput: {
          const std::vector<Node*>& values = n->arg(0).nodes();
          if (values.size() != sig.outputs.size()) {
            return fail_at(n, fmt::format("returns {} values but the signature lists {}",
                                          values.size(), sig.outputs.size()));
          }
          std::unordered_map<std::string_view, const Node*> buffer_ph;
          for (const InputSpec& s : sig.inputs) {
            if (s.kind == InputKind::kBuffer) buffer_ph.emplace(s.target, program_.graph().find(s.arg));
          }
          for (size_t i = 0; i < values.size(); ++i) {
            const OutputSpec& s = sig.outputs[i];
            KILN_ASSIGN_OR_RETURN(int32_t v, value_of(n, values[i]));
            switch (s.kind) {
              case OutputKind::kUserOutput:
                outputs_.push_back(v);
                output_names_.push_back(s.name.empty() ? values[i]->name() : s.name);
                break;
              case OutputKind::kBufferMutation: {
                auto it = buffer_ph.find(s.target);
                if (it == buffer_ph.end() || it->second == nullptr) {
                  return fail_at(n, fmt::format("output {} mutates '{}', which is not a buffer", i,
                                                s.target));
                }
                KILN_ASSIGN_OR_RETURN(int32_t dst, value_of(n, it->second));
                add(fb::Instruction::CopyBuffer, fb::CreateCopyBuffer(fbb_, v, dst).Union());
                break;
              }
              case OutputKind::kUserInputMutation:
                return unsupported("method '{}': output {} mutates user input '{}'; the program "
                                   "file does not carry input mutations",
                                   name_, i, s.target);
            }
          }
          break;
        }
      }
    }
    return Status::Ok();
  }

  FlatBufferBuilder& fbb_;
  DataTable& data_;
  OperatorTable& ops_;
  const SerializeOptions& options_;
  const std::string& name_;
  const ExportedProgram& program_;
  const std::unordered_map<const ExportedProgram*, uint32_t>& method_index_;
  MemoryPlan plan_;
  std::vector<Offset<fb::ValueEntry>> values_;
  std::unordered_map<std::string, int32_t> scalars_;
  std::vector<std::string> symbol_names_;
  std::unordered_map<std::string, int32_t> symbol_index_;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<std::string> input_names_, output_names_;
  std::vector<Offset<fb::InstructionEntry>> instructions_;
  std::vector<Offset<fb::Delegate>> delegates_;
  std::unordered_map<std::string, uint32_t> delegate_index_;
};

}  // namespace

Result<std::map<std::string, DimRange, std::less<>>> parse_dim_ranges(std::string_view text) {
  std::map<std::string, DimRange, std::less<>> out;
  auto number = [](std::string_view s, int64_t* v) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && p == s.data() + s.size() && *v >= 0;
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = std::min(text.find(',', start), text.size());
    std::string_view item = text.substr(start, end - start);
    size_t eq = item.find('=');
    std::string_view name = eq == std::string_view::npos ? item : item.substr(0, eq);
    std::string_view range = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    size_t dots = range.find("..");
    DimRange r;
    bool ok = !name.empty() && !range.empty() &&
              (dots == std::string_view::npos
                   ? number(range, &r.min) && number(range, &r.max)
                   : number(range.substr(0, dots), &r.min) && number(range.substr(dots + 2), &r.max));
    if (!ok) {
      return invalid_argument("dim range '{}': expected NAME=MIN..MAX or NAME=N with integers >= 0",
                              item);
    }
    if (r.max < r.min) {
      return invalid_argument("dim range '{}': the range is empty ({} > {})", item, r.min, r.max);
    }
    if (!out.emplace(std::string(name), r).second) {
      return invalid_argument("dim range '{}': dim '{}' is given twice", item, name);
    }
    start = end + 1;
  }
  return out;
}

std::vector<uint8_t> ProgramImage::bytes() const {
  std::vector<uint8_t> out;
  out.reserve(size);
  for (std::string_view c : chunks) out.insert(out.end(), c.begin(), c.end());
  return out;
}

Result<ProgramImage> serialize_program(std::span<const MethodToSerialize> methods,
                                       const SerializeOptions& options) {
  if (methods.empty()) return invalid_argument("a program needs at least one method");
  if (!power_of_two(options.segment_alignment) || options.segment_alignment < 8) {
    return invalid_argument("segment alignment {} is not a power of two of at least 8",
                            options.segment_alignment);
  }
  if (!power_of_two(options.constant_alignment)) {
    return invalid_argument("constant alignment {} is not a power of two", options.constant_alignment);
  }
  for (const auto& [sym, range] : options.dims) {
    if (range.min < 0 || range.max < range.min) {
      return invalid_argument("dim '{}': range {}..{} is empty or negative", sym, range.min, range.max);
    }
  }
  // Each method, then the subgraphs its cond nodes run, as methods of their own named
  // "<method>/<subgraph>" that come after their caller (a loader can then refuse cycles).
  std::vector<MethodToSerialize> all;
  std::unordered_map<const ExportedProgram*, uint32_t> method_index;
  auto add_subgraphs = [&](const std::string& owner, const ExportedProgram& p,
                           auto&& self) -> void {
    for (const Subgraph& sg : p.subgraphs()) {
      if (sg.program == nullptr || method_index.count(sg.program.get())) continue;
      std::string name = owner + "/" + sg.name;
      method_index.emplace(sg.program.get(), static_cast<uint32_t>(all.size()));
      all.push_back({name, sg.program.get()});
      self(name, *sg.program, self);
    }
  };
  for (const MethodToSerialize& m : methods) {
    all.push_back(m);
    if (m.program != nullptr) add_subgraphs(m.name, *m.program, add_subgraphs);
  }
  methods = all;
  std::unordered_set<std::string_view> names;
  for (const MethodToSerialize& m : methods) {
    if (m.name.empty()) return invalid_argument("a method has an empty name");
    if (!names.insert(m.name).second) return invalid_argument("method '{}' is given twice", m.name);
    if (m.program == nullptr) return invalid_argument("method '{}' has no program", m.name);
    if (Status st = m.program->lint(); !st.ok()) {
      return st.with_context(fmt::format("method '{}'", m.name));
    }
  }

  // About 100 bytes per node; a small delegate blob (a nested program) starts small.
  size_t nodes = 0;
  for (const MethodToSerialize& m : methods) nodes += m.program->graph().size();
  FlatBufferBuilder fbb(std::min<size_t>(size_t{1} << 30, 1024 + 128 * nodes));
  DataTable data(options.constant_alignment, options.external_constants);
  OperatorTable ops;
  std::vector<Offset<fb::Method>> method_offsets;
  for (const MethodToSerialize& m : methods) {
    MethodWriter w(fbb, data, ops, options, m.name, *m.program, method_index);
    KILN_ASSIGN_OR_RETURN(auto off, w.write());
    method_offsets.push_back(off);
  }
  std::vector<Offset<flatbuffers::String>> op_names;
  for (const std::string& n : ops.names()) op_names.push_back(fbb.CreateString(n));
  auto constants = data.write_constants(fbb);
  auto root = fb::CreateProgram(fbb, runtime::kProgramVersion, fbb.CreateVector(method_offsets),
                                fbb.CreateVector(op_names), constants, options.segment_alignment);
  fb::FinishProgramBuffer(fbb, root);

  // Lay the file out: header, flatbuffer, segment table, aligned segments.
  std::vector<Segment>& segments = data.segments();
  runtime::FileHeader header;
  header.flatbuffer_offset = runtime::kHeaderSize;
  header.flatbuffer_size = fbb.GetSize();
  header.segment_table_offset = align_up(header.flatbuffer_offset + header.flatbuffer_size, 8);
  header.segment_count = static_cast<uint32_t>(segments.size());
  size_t pos = header.segment_table_offset + segments.size() * runtime::kSegmentEntrySize;
  std::vector<runtime::SegmentEntry> entries;
  for (const Segment& s : segments) {
    pos = align_up(pos, options.segment_alignment);
    entries.push_back({pos, s.size, 0, static_cast<uint64_t>(s.kind)});
    pos += s.size;
  }
  header.file_size = pos;

  ProgramImage image;
  auto own = [&](std::string bytes) {
    image.owned.push_back(std::make_unique<std::string>(std::move(bytes)));
    image.chunks.emplace_back(*image.owned.back());
  };
  std::string head(header.segment_table_offset + segments.size() * runtime::kSegmentEntrySize, '\0');
  auto h = runtime::encode_header(header);
  std::memcpy(head.data(), h.data(), h.size());
  std::memcpy(head.data() + header.flatbuffer_offset, fbb.GetBufferPointer(), fbb.GetSize());
  // Checksums: each segment's bytes as laid out (padding between constants is zeros).
  size_t written = head.size();
  std::string zeros;
  std::vector<std::string_view> body;
  for (size_t i = 0; i < segments.size(); ++i) {
    Segment& s = segments[i];
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t at = 0;
    auto pad = [&](size_t to) {
      if (to <= at) return;
      if (zeros.size() < to - at) zeros.resize(to - at, '\0');
      crc = crc32_z(crc, reinterpret_cast<const Bytef*>(zeros.data()), to - at);
      at = to;
    };
    for (const auto& [off, bytes] : s.pieces) {
      pad(off);
      crc = crc32_z(crc, bytes.data(), bytes.size());
      at += bytes.size();
    }
    pad(s.size);
    entries[i].checksum = crc;
    runtime::encode_segment(entries[i], reinterpret_cast<uint8_t*>(head.data()) +
                                            header.segment_table_offset +
                                            i * runtime::kSegmentEntrySize);
  }
  own(std::move(head));
  for (size_t i = 0; i < segments.size(); ++i) {
    Segment& s = segments[i];
    own(std::string(entries[i].offset - written, '\0'));
    written = entries[i].offset;
    size_t at = 0;
    for (const auto& [off, bytes] : s.pieces) {
      if (off > at) own(std::string(off - at, '\0'));
      image.chunks.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      at = off + bytes.size();
    }
    if (s.size > at) own(std::string(s.size - at, '\0'));
    written += s.size;
    for (auto& k : s.keep) image.keep.push_back(std::move(k));
  }
  image.size = written;
  image.external = std::move(data.external());
  return image;
}

Status write_program(const std::string& path, const ProgramImage& image) {
  return write_file_atomic(path, std::span<const std::string_view>(image.chunks));
}

}  // namespace kiln
