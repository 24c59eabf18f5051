// ONNX's sequence ops over sequences whose length and order are known at import time: the
// importer keeps a sequence as the list of values it holds (SequenceEmpty / Construct / Insert /
// Erase / At / Length, SplitToSequence, ConcatFromSequence), so no sequence reaches kiln's graph.
// Positions must be constants; a sequence where a tensor is needed (a graph output, a tensor op's
// input) is refused by name.
#include <fmt/format.h>

#include <memory>
#include <numeric>

#include "convert_util.h"
#include "fold.h"
#include "onnx_tensor.h"
#include "shape_util.h"

namespace kiln::onnx_import {
namespace {

using Seq = std::vector<Value>;

Status set_sequence(Importer& im, Seq items) {
  Value v;
  v.sequence = std::make_shared<const Seq>(std::move(items));
  im.set_output_value(0, v);
  return Status::Ok();
}

// Position input `i`, a constant in [-n, n - 1] (or [-n, n] when `end_ok`), counted from the start.
Result<size_t> position(Importer& im, size_t i, size_t n, bool end_ok) {
  KILN_ASSIGN_OR_RETURN(auto v, im.require_ints(i, "input 'position'"));
  if (v.size() != 1) return invalid_argument("input 'position' must hold one value");
  const int64_t len = static_cast<int64_t>(n), hi = end_ok ? len : len - 1;
  int64_t p = v[0];
  if (p < -len || p > hi) {
    return invalid_argument("input 'position': {} is outside [{}, {}] for a sequence of {} tensors",
                            p, -len, hi, n);
  }
  return static_cast<size_t>(p < 0 ? p + len : p);
}

// Input `i` as a sequence element: a tensor value, of `dtype` when the sequence has one.
Result<Value> element(Importer& im, size_t i, const Seq& seq) {
  Value* v = im.input_value(i);
  if (v == nullptr) return invalid_argument("input {} is missing", i);
  if (v->sequence) {
    return invalid_argument("input {} ('{}') is a sequence, expected a tensor", i, v->onnx_name);
  }
  if (!seq.empty()) {
    KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(i));
    Value first = seq.front();
    DType want = first.constant ? first.constant->dtype()
                 : first.dims   ? first.dims->dtype
                                : first.node->spec().dtype;
    if (s.dtype != want) {
      return invalid_argument("input {} ('{}') is {}, but the sequence holds {} tensors", i,
                              v->onnx_name, s.to_string(), dtype_name(want));
    }
  }
  return *v;
}

Status convert_sequence_empty(Importer& im) { return set_sequence(im, {}); }

Status convert_sequence_construct(Importer& im) {
  Seq items;
  for (size_t i = 0; i < im.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, element(im, i, items));
    items.push_back(std::move(v));
  }
  return set_sequence(im, std::move(items));
}

Status convert_sequence_insert(Importer& im) {
  KILN_ASSIGN_OR_RETURN(auto seq, im.sequence_input(0));
  Seq items = *seq;
  KILN_ASSIGN_OR_RETURN(Value v, element(im, 1, items));
  size_t at = items.size();
  if (im.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(at, position(im, 2, items.size(), true));
  }
  items.insert(items.begin() + static_cast<std::ptrdiff_t>(at), std::move(v));
  return set_sequence(im, std::move(items));
}

Status convert_sequence_erase(Importer& im) {
  KILN_ASSIGN_OR_RETURN(auto seq, im.sequence_input(0));
  Seq items = *seq;
  if (items.empty()) return invalid_argument("input 0 is an empty sequence: nothing to erase");
  size_t at = items.size() - 1;
  if (im.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(at, position(im, 1, items.size(), false));
  }
  items.erase(items.begin() + static_cast<std::ptrdiff_t>(at));
  return set_sequence(im, std::move(items));
}

Status convert_sequence_at(Importer& im) {
  KILN_ASSIGN_OR_RETURN(auto seq, im.sequence_input(0));
  if (seq->empty()) return invalid_argument("input 0 is an empty sequence");
  KILN_ASSIGN_OR_RETURN(size_t at, position(im, 1, seq->size(), false));
  im.set_output_value(0, (*seq)[at]);
  return Status::Ok();
}

Status convert_sequence_length(Importer& im) {
  KILN_ASSIGN_OR_RETURN(auto seq, im.sequence_input(0));
  Tensor n(DType::kI64, {});
  n.mutable_data_as<int64_t>()[0] = static_cast<int64_t>(seq->size());
  im.set_output_const(0, std::move(n));
  return Status::Ok();
}

// SplitToSequence: pieces of `split` (one size per piece, or one size for all with a smaller
// last piece); without `split`, pieces of 1 along `axis`, squeezed unless keepdims.
Status convert_split_to_sequence(Importer& im) {
  KILN_ASSIGN_OR_RETURN(TensorSpec xs, im.input_spec(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, xs.rank(), "attribute 'axis'"));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, im.attr_int("keepdims", 1));
  const Dim& d = xs.shape[static_cast<size_t>(axis)];
  if (!d.is_static()) {
    return unsupported("splitting {} along its symbolic dim {} into a sequence", xs.to_string(),
                       d.to_string());
  }
  const int64_t n = d.value();
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!im.has_input(1)) {
    sizes.assign(static_cast<size_t>(n), 1);
    squeeze = keepdims == 0;
  } else {
    KILN_ASSIGN_OR_RETURN(Tensor split, im.require_const(1, "input 'split'"));
    KILN_ASSIGN_OR_RETURN(sizes, im.require_ints(1, "input 'split'"));
    if (split.rank() == 0) {
      const int64_t chunk = sizes.at(0);
      if (chunk <= 0)
        return invalid_argument("input 'split': got {}, expected a positive size", chunk);
      sizes.clear();
      for (int64_t at = 0; at < n; at += chunk) sizes.push_back(std::min(chunk, n - at));
    }
    const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    if (total != n || std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s < 0; })) {
      return invalid_argument("input 'split': got [{}], which does not split dim {} of {}",
                              fmt::join(sizes, ", "), axis, xs.to_string());
    }
  }
  KILN_ASSIGN_OR_RETURN(Node * x, im.input(0));
  Seq items;
  if (sizes.size() == 1 && !squeeze) {
    Value v;
    v.node = x;
    items.push_back(std::move(v));
    return set_sequence(im, std::move(items));
  }
  KILN_ASSIGN_OR_RETURN(Node * parts,
                        im.call(OpId::kSplit, {x}, {{"split_sizes", sizes}, {"dim", axis}}));
  for (size_t i = 0; i < sizes.size(); ++i) {
    Value v;
    KILN_ASSIGN_OR_RETURN(v.node, im.call(OpId::kGetitem, {parts, static_cast<int64_t>(i)}));
    if (squeeze) {
      KILN_ASSIGN_OR_RETURN(
          v.node, im.call(OpId::kSqueeze, {v.node}, {{"dim", std::vector<int64_t>{axis}}}));
    }
    items.push_back(std::move(v));
  }
  return set_sequence(im, std::move(items));
}

// ConcatFromSequence: the tensors joined along `axis`, or stacked on a new one (new_axis).
Status convert_concat_from_sequence(Importer& im) {
  KILN_ASSIGN_OR_RETURN(auto seq, im.sequence_input(0));
  if (seq->empty()) return invalid_argument("input 0 is an empty sequence: nothing to concatenate");
  KILN_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t new_axis, im.attr_int("new_axis", 0));
  std::vector<Node*> parts;
  for (const Value& item : *seq) {
    Value copy = item;
    KILN_ASSIGN_OR_RETURN(Node * p, im.materialize(copy, Role::kActivation));
    parts.push_back(p);
  }
  const size_t rank = parts[0]->spec().rank() + (new_axis != 0 ? 1 : 0);
  KILN_RETURN_IF_ERROR(normalize_axis(&axis, rank, "attribute 'axis'"));
  if (new_axis != 0) {
    for (Node*& p : parts) {
      KILN_ASSIGN_OR_RETURN(p, im.call(OpId::kUnsqueeze, {p}, {{"dim", axis}}));
    }
  }
  Node* y = parts[0];
  if (parts.size() > 1) {
    KILN_ASSIGN_OR_RETURN(y, im.call(OpId::kCat, {parts}, {{"dim", axis}}));
  }
  im.set_output(0, y);
  return Status::Ok();
}

constexpr OpEntry kSequenceOps[] = {
    {"SequenceEmpty", convert_sequence_empty},
    {"SequenceConstruct", convert_sequence_construct},
    {"SequenceInsert", convert_sequence_insert},
    {"SequenceErase", convert_sequence_erase},
    {"SequenceAt", convert_sequence_at},
    {"SequenceLength", convert_sequence_length},
    {"SplitToSequence", convert_split_to_sequence},
    {"ConcatFromSequence", convert_concat_from_sequence},
};

}  // namespace

std::span<const OpEntry> sequence_ops() { return kSequenceOps; }

}  // namespace kiln::onnx_import
