#include <charconv>
#include <climits>
#include <cstring>
#include <memory>

#include "kir_parser.h"
#include "kiln/core/tensor.h"

namespace kiln::kir {

Status Parser::parse_constant(ExportedProgram* ep) {
  Token name_tok = cur_;
  std::string name = cur_.text;
  KILN_RETURN_IF_ERROR(advance());
  if (ep->constants().contains(name)) return err(name_tok, "duplicate constant '{}'", name);
  KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after the constant name"));
  TensorSpec spec;
  KILN_RETURN_IF_ERROR(parse_spec(&spec, true));
  std::vector<int64_t> shape = *spec.static_shape();
  int64_t numel = *spec.numel();
  size_t elem = dtype_size(spec.dtype);
  size_t nbytes = static_cast<size_t>(numel) * elem;
  KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after the constant's type"));
  if (at(Tok::kLess)) {
    KILN_RETURN_IF_ERROR(advance());
    Token size_tok = cur_;
    int64_t bytes = 0;
    KILN_RETURN_IF_ERROR(parse_int(&bytes, "a byte count"));
    if (bytes < 0 || static_cast<size_t>(bytes) != nbytes) {
      return err(size_tok, "constant '{}' is {} ({} bytes), not {} bytes", name,
                 spec.to_string(), nbytes, bytes);
    }
    KILN_RETURN_IF_ERROR(expect_word("bytes", "after the byte count"));
    KILN_RETURN_IF_ERROR(expect(Tok::kGreater, ">", "after 'bytes'"));
    auto t = Tensor::elided(spec.dtype, std::move(shape), fmt::format("constant '{}'", name));
    if (!t.ok()) return err(size_tok, "constant '{}': {}", name, t.status().message());
    ep->constants().set(name, std::move(t).value());
    return Status::Ok();
  }
  Token list_tok = cur_;
  KILN_RETURN_IF_ERROR(expect(Tok::kLBracket, "[", "or '<' for the constant's values"));
  std::vector<double> floats;
  std::vector<int64_t> ints;
  bool is_float = is_floating(spec.dtype);
  while (!at(Tok::kRBracket)) {
    if (static_cast<int64_t>(floats.size() + ints.size()) >= numel) {
      return err(cur_, "constant '{}' has more than {} values", name, numel);
    }
    if (spec.dtype == DType::kBool) {
      bool b = false;
      KILN_RETURN_IF_ERROR(parse_bool(&b));
      ints.push_back(b ? 1 : 0);
    } else if (at(Tok::kInt)) {
      if (is_float) floats.push_back(static_cast<double>(cur_.int_value));
      else ints.push_back(cur_.int_value);
      KILN_RETURN_IF_ERROR(advance());
    } else if (at(Tok::kFloat) && is_float) {
      floats.push_back(cur_.float_value);
      KILN_RETURN_IF_ERROR(advance());
    } else {
      return err(cur_, "expected a {} value in constant '{}', got {}", dtype_name(spec.dtype), name,
                 describe(cur_));
    }
    if (spec.dtype != DType::kBool && !is_float) {
      int64_t v = ints.back();
      auto [lo, hi] = *integer_range(spec.dtype);
      if (v < lo || v > hi) {
        return err(list_tok, "constant '{}': value {} is out of range for {}", name, v,
                   dtype_name(spec.dtype));
      }
    }
    if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
    else if (!at(Tok::kRBracket)) return err(cur_, "expected ']' after the values, got {}", describe(cur_));
  }
  int64_t count = static_cast<int64_t>(floats.size() + ints.size());
  if (count != numel) {
    return err(list_tok, "constant '{}' has {} values, expected {}", name, count, numel);
  }
  KILN_RETURN_IF_ERROR(advance());
  Tensor t(spec.dtype, std::move(shape));
  auto* p = static_cast<uint8_t*>(t.mutable_data());
  for (int64_t i = 0; i < numel; ++i) {
    auto* e = p + static_cast<size_t>(i) * elem;
    auto put = [&](auto v) { std::memcpy(e, &v, sizeof(v)); };
    size_t k = static_cast<size_t>(i);
    switch (spec.dtype) {
      case DType::kF32: put(static_cast<float>(floats[k])); break;
      case DType::kF16: put(float_to_half(static_cast<float>(floats[k]))); break;
      case DType::kBF16: put(float_to_bf16(static_cast<float>(floats[k]))); break;
      case DType::kF64: put(floats[k]); break;
      case DType::kI64: put(ints[k]); break;
      case DType::kI32: put(static_cast<int32_t>(ints[k])); break;
      case DType::kI16: put(static_cast<int16_t>(ints[k])); break;
      case DType::kU16: put(static_cast<uint16_t>(ints[k])); break;
      case DType::kU32: put(static_cast<uint32_t>(ints[k])); break;
      case DType::kU64: put(static_cast<uint64_t>(ints[k])); break;
      case DType::kI8: put(static_cast<int8_t>(ints[k])); break;
      case DType::kU8:
      case DType::kBool: put(static_cast<uint8_t>(ints[k])); break;
    }
  }
  ep->constants().set(name, std::move(t));
  return Status::Ok();
}

Status Parser::parse_spec(TensorSpec* out, bool static_only) {
  Token dtype_tok = cur_;
  if (!at(Tok::kIdent)) return err(cur_, "expected a tensor type such as f32[2, 3], got {}", describe(cur_));
  auto dtype = dtype_from_name(cur_.text);
  if (!dtype) return err(cur_, "unknown dtype '{}'", cur_.text);
  out->dtype = *dtype;
  out->shape.clear();
  KILN_RETURN_IF_ERROR(advance());
  if (!at(Tok::kLBracket)) return err(cur_, "expected '[' after the dtype, got {}", describe(cur_));
  int64_t numel = 1;
  std::string text;
  while (true) {
    int line = 0, column = 0;
    KILN_RETURN_IF_ERROR(lexer_.scan_dim(&text, &line, &column));
    Token at_dim;
    at_dim.line = line;
    at_dim.column = column;
    if (text.empty()) {
      if (!out->shape.empty()) return err(at_dim, "bad dim: expected a size or a symbol");
      KILN_RETURN_IF_ERROR(advance());
      if (!at(Tok::kRBracket)) return err(cur_, "bad dim: expected a size or a symbol");
      break;
    }
    if (out->shape.size() >= 64) return err(at_dim, "bad dim: more than 64 dims");
    bool digits = text.find_first_not_of("0123456789") == std::string::npos;
    bool has_letter = text.find_first_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_") !=
                      std::string::npos;
    if (digits) {
      int64_t v = 0;
      auto r = std::from_chars(text.data(), text.data() + text.size(), v);
      if (r.ec != std::errc() || v > kMaxElements) {
        return err(at_dim, "bad dim {}: larger than 2^40", text);
      }
      numel = v == 0 ? 0 : (numel > kMaxElements / v ? kMaxElements + 1 : numel * v);
      out->shape.emplace_back(v);
    } else if (has_letter && !static_only) {
      out->shape.push_back(Dim::symbol(text));
    } else if (has_letter) {
      return err(at_dim, "bad dim '{}': constants need static shapes", text);
    } else {
      return err(at_dim, "bad dim '{}'", text);
    }
    KILN_RETURN_IF_ERROR(advance());
    if (at(Tok::kRBracket)) break;
    if (!at(Tok::kComma)) return err(cur_, "expected ',' or ']' in the shape, got {}", describe(cur_));
  }
  if (numel > kMaxElements) {
    return err(dtype_tok, "bad shape {}: more than 2^40 elements", out->to_string());
  }
  return advance();
}

Status Parser::parse_specs(SpecList* out) {
  out->clear();
  if (at(Tok::kQuestion)) return advance();
  if (at(Tok::kEquals)) return Status::Ok();  // no spec written: unknown, like '?'
  if (!at(Tok::kLParen)) {
    out->emplace_back();
    return parse_spec(&out->back(), false);
  }
  KILN_RETURN_IF_ERROR(advance());
  while (!at(Tok::kRParen)) {
    out->emplace_back();
    KILN_RETURN_IF_ERROR(parse_spec(&out->back(), false));
    if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
    else if (!at(Tok::kRParen)) return err(cur_, "expected ')' after the tuple's types, got {}", describe(cur_));
  }
  return advance();
}

Status Parser::parse_quant(QuantAttrs* q) {
  KILN_RETURN_IF_ERROR(expect(Tok::kLParen, "(", "after 'quant='"));
  if (!at(Tok::kIdent) || !dtype_from_name(cur_.text)) {
    return err(cur_, "expected the quantized dtype, got {}", describe(cur_));
  }
  q->dtype = *dtype_from_name(cur_.text);
  KILN_RETURN_IF_ERROR(advance());
  while (at(Tok::kComma)) {
    KILN_RETURN_IF_ERROR(advance());
    Token key = cur_;
    KILN_RETURN_IF_ERROR(expect(Tok::kIdent, "quant field", "in quant"));
    KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after the quant field"));
    if (key.text == "scales" || key.text == "zero_points") {
      Arg v;
      bool scales = key.text == "scales";
      Token vt = cur_;
      KILN_RETURN_IF_ERROR(parse_value(scales ? ParamType::kFloatList : ParamType::kIntList, &v));
      if (auto e = coerce_arg(scales ? ParamType::kFloatList : ParamType::kIntList, &v)) {
        return err(vt, "quant {}: {}", key.text, *e);
      }
      if (scales) q->scales = v.to_floats();
      else q->zero_points = v.to_ints();
    } else if (key.text == "qmin") {
      KILN_RETURN_IF_ERROR(parse_int(&q->quant_min, "an integer"));
    } else if (key.text == "qmax") {
      KILN_RETURN_IF_ERROR(parse_int(&q->quant_max, "an integer"));
    } else if (key.text == "axis") {
      KILN_RETURN_IF_ERROR(parse_int(&q->axis, "an integer"));
    } else {
      return err(key, "unknown quant field '{}'", key.text);
    }
  }
  return expect(Tok::kRParen, ")", "after the quant fields");
}

Status Parser::parse_meta(NodeMeta* meta, const Token& name_tok) {
  KILN_RETURN_IF_ERROR(advance());  // '['
  while (!at(Tok::kRBracket)) {
    Token key = cur_;
    KILN_RETURN_IF_ERROR(expect(Tok::kIdent, "meta field", "in the node's meta"));
    KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after the meta field"));
    if (key.text == "num_users") {
      int64_t n = 0;
      Token at_n = cur_;
      KILN_RETURN_IF_ERROR(parse_int(&n, "an integer"));
      declared_users_.push_back({nullptr, {n, at_n}});
    } else if (key.text == "tag") {
      std::string tag;
      KILN_RETURN_IF_ERROR(parse_name(&tag, "a tag"));
      meta->delegation_tag = std::move(tag);
    } else if (key.text == "debug_handle") {
      KILN_RETURN_IF_ERROR(parse_int(&meta->debug_handle, "an integer"));
    } else if (key.text == "no_copy") {
      KILN_RETURN_IF_ERROR(parse_bool(&meta->no_copy));
    } else if (key.text == "quant") {
      meta->quant.emplace();
      KILN_RETURN_IF_ERROR(parse_quant(&*meta->quant));
    } else if (key.text == "layout") {
      if (!at_word("nhwc")) return err(cur_, "expected layout nhwc, got {}", describe(cur_));
      meta->channels_last = true;
      KILN_RETURN_IF_ERROR(advance());
    } else if (key.text == "source") {
      if (!at(Tok::kString)) return err(cur_, "expected a string, got {}", describe(cur_));
      meta->source = cur_.text;
      KILN_RETURN_IF_ERROR(advance());
    } else {
      return err(key, "unknown meta field '{}' of node '%{}'", key.text, name_tok.text);
    }
    if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
    else if (!at(Tok::kRBracket)) return err(cur_, "expected ']' after the node's meta, got {}", describe(cur_));
  }
  return advance();
}

Status Parser::parse_value(ParamType hint, Arg* out) {
  switch (cur_.kind) {
    case Tok::kNodeRef: {
      Node* n = current_graph_->find(cur_.text);
      if (n == nullptr) return err(cur_, "unknown node '%{}'", cur_.text);
      *out = Arg(n);
      return advance();
    }
    case Tok::kInt: *out = Arg(cur_.int_value); return advance();
    case Tok::kFloat: *out = Arg(cur_.float_value); return advance();
    case Tok::kString: *out = Arg(cur_.text); return advance();
    case Tok::kIdent:
      if (cur_.text == "None") *out = Arg();
      else if (cur_.text == "True") *out = Arg(true);
      else if (cur_.text == "False") *out = Arg(false);
      else if (auto dt = dtype_from_name(cur_.text)) *out = Arg(*dt);
      else return err(cur_, "expected a value, got {}", describe(cur_));
      return advance();
    case Tok::kLBracket: break;
    default: return err(cur_, "expected a value, got {}", describe(cur_));
  }
  KILN_RETURN_IF_ERROR(advance());
  std::vector<Node*> nodes;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  bool any_float = false;
  Token first = cur_;
  while (!at(Tok::kRBracket)) {
    bool node = at(Tok::kNodeRef);
    if (!node && !at(Tok::kInt) && !at(Tok::kFloat)) {
      return err(cur_, "expected a node or a number in the list, got {}", describe(cur_));
    }
    if (node != (first.kind == Tok::kNodeRef)) return err(cur_, "list mixes nodes and numbers");
    if (node) {
      Node* n = current_graph_->find(cur_.text);
      if (n == nullptr) return err(cur_, "unknown node '%{}'", cur_.text);
      nodes.push_back(n);
    } else {
      any_float = any_float || at(Tok::kFloat);
      ints.push_back(cur_.int_value);
      floats.push_back(at(Tok::kFloat) ? cur_.float_value : static_cast<double>(cur_.int_value));
    }
    KILN_RETURN_IF_ERROR(advance());
    if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
    else if (!at(Tok::kRBracket)) return err(cur_, "expected ']' after the list, got {}", describe(cur_));
  }
  bool empty = first.kind == Tok::kRBracket;
  if (first.kind == Tok::kNodeRef || (empty && hint == ParamType::kTensorList)) {
    *out = Arg(std::move(nodes));
  } else if (any_float || (empty && (hint == ParamType::kFloatList ||
                                     hint == ParamType::kOptionalFloatList))) {
    *out = Arg(std::move(floats));
  } else {
    *out = Arg(std::move(ints));
  }
  return advance();
}

}  // namespace kiln::kir
