#include "kir_text.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace kiln::kir {
namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_alpha(c) || is_digit(c); }

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

bool is_identifier(std::string_view s) {
  if (s.empty() || !is_alpha(s[0])) return false;
  for (char c : s) {
    if (!is_ident_char(c)) return false;
  }
  return true;
}

std::string quote(std::string_view s, bool ascii) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f || (ascii && u >= 0x80)) {
          out += "\\x";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;  // UTF-8 stays readable
        }
    }
  }
  out += '"';
  return out;
}

namespace {
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}  // namespace

std::string base64_encode(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = uint32_t{bytes[i]} << 16 | uint32_t{bytes[i + 1]} << 8 | bytes[i + 2];
    for (int shift = 18; shift >= 0; shift -= 6) out += kBase64[(v >> shift) & 63];
  }
  if (size_t rest = bytes.size() - i; rest > 0) {
    uint32_t v = uint32_t{bytes[i]} << 16 | (rest == 2 ? uint32_t{bytes[i + 1]} << 8 : 0);
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += rest == 2 ? kBase64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::vector<uint8_t>> base64_decode(std::string_view text, size_t* bad_at) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  *bad_at = text.size();
  if (text.size() % 4 != 0) return std::nullopt;
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    size_t pad = 0;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = text[i + k];
      if (c == '=' && last && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++pad;
        v <<= 6;
        continue;
      }
      int d = value(c);
      if (d < 0 || pad > 0) {
        *bad_at = i + k;
        return std::nullopt;
      }
      v = v << 6 | static_cast<uint32_t>(d);
    }
    if ((pad == 1 && (v & 0xff) != 0) || (pad == 2 && (v & 0xffff) != 0)) {
      *bad_at = i + 3 - pad;  // bits past the end: not the canonical spelling
      return std::nullopt;
    }
    out.push_back(static_cast<uint8_t>(v >> 16));
    if (pad < 2) out.push_back(static_cast<uint8_t>(v >> 8));
    if (pad < 1) out.push_back(static_cast<uint8_t>(v));
  }
  return out;
}

std::string name_or_quoted(std::string_view s) {
  return is_identifier(s) ? std::string(s) : quote(s);
}

std::string format_float_arg(double v) {
  std::string s = fmt::format("{}", v);
  // Python spells an integral float "1.0"; a bare "1" would read back as an int.
  if (s.find_first_not_of("-0123456789") == std::string::npos) s += ".0";
  return s;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEnd: return "end of input";
    case Tok::kNodeRef: return fmt::format("'%{}'", t.text);
    case Tok::kString: return fmt::format("string {}", quote(t.text));
    default: return fmt::format("'{}'", t.text);
  }
}

Status Lexer::error_here(std::string_view message) const {
  return parse_error("{}:{}:{}: {}", source_, line_, col_, message);
}

void Lexer::advance(size_t n) {
  for (size_t i = 0; i < n && pos_ < text_.size(); ++i) {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
}

void Lexer::skip_space() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance();
    } else if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') advance();
    } else {
      break;
    }
  }
}

Status Lexer::lex_number(Token* out) {
  size_t start = pos_;
  size_t i = pos_;
  if (text_[i] == '-') ++i;
  // "-inf" and "-nan" are floats like their unsigned spellings.
  if (text_.substr(i, 3) == "inf" || text_.substr(i, 3) == "nan") {
    if (i + 3 < text_.size() && is_ident_char(text_[i + 3])) return error_here("malformed number");
    out->kind = Tok::kFloat;
    out->text = std::string(text_.substr(start, i + 3 - start));
    double v = text_.substr(i, 3) == "inf" ? std::numeric_limits<double>::infinity()
                                           : std::numeric_limits<double>::quiet_NaN();
    out->float_value = i > start ? -v : v;
    if (i > start && std::isnan(v)) out->float_value = std::copysign(v, -1.0);
    advance(i + 3 - start);
    return Status::Ok();
  }
  if (i >= text_.size() || !is_digit(text_[i])) return error_here("unexpected character '-'");
  bool is_float = false;
  while (i < text_.size() && is_digit(text_[i])) ++i;
  if (i < text_.size() && text_[i] == '.') {
    is_float = true;
    ++i;
    while (i < text_.size() && is_digit(text_[i])) ++i;
  }
  if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
    is_float = true;
    ++i;
    if (i < text_.size() && (text_[i] == '+' || text_[i] == '-')) ++i;
    if (i >= text_.size() || !is_digit(text_[i])) return error_here("malformed number");
    while (i < text_.size() && is_digit(text_[i])) ++i;
  }
  if (i < text_.size() && is_alpha(text_[i])) return error_here("malformed number");
  std::string_view spelled = text_.substr(start, i - start);
  out->text = std::string(spelled);
  const char* b = spelled.data();
  const char* e = b + spelled.size();
  if (is_float) {
    out->kind = Tok::kFloat;
    auto r = std::from_chars(b, e, out->float_value);
    if (r.ec != std::errc() || r.ptr != e) {
      return error_here(fmt::format("float '{}' out of range", spelled));
    }
  } else {
    out->kind = Tok::kInt;
    auto r = std::from_chars(b, e, out->int_value);
    if (r.ec != std::errc() || r.ptr != e) {
      return error_here(fmt::format("integer '{}' out of range", spelled));
    }
  }
  advance(i - start);
  return Status::Ok();
}

Status Lexer::lex_string(Token* out) {
  out->kind = Tok::kString;
  out->text.clear();
  advance();  // opening quote
  while (true) {
    if (pos_ >= text_.size() || text_[pos_] == '\n') {
      return parse_error("{}:{}:{}: unterminated string", source_, out->line, out->column);
    }
    char c = text_[pos_];
    if (c == '"') {
      advance();
      return Status::Ok();
    }
    if (c != '\\') {
      out->text += c;
      advance();
      continue;
    }
    char e = peek_char(1);
    switch (e) {
      case '"': out->text += '"'; break;
      case '\\': out->text += '\\'; break;
      case 'n': out->text += '\n'; break;
      case 't': out->text += '\t'; break;
      case 'r': out->text += '\r'; break;
      case 'x': {
        auto hex = [](char h) -> int {
          if (h >= '0' && h <= '9') return h - '0';
          if (h >= 'a' && h <= 'f') return h - 'a' + 10;
          if (h >= 'A' && h <= 'F') return h - 'A' + 10;
          return -1;
        };
        int hi = hex(peek_char(2)), lo = hex(peek_char(3));
        if (hi < 0 || lo < 0) return error_here("bad \\x escape in string");
        out->text += static_cast<char>(hi * 16 + lo);
        advance(2);
        break;
      }
      default:
        return error_here("unknown escape in string");
    }
    advance(2);
  }
}

Status Lexer::next(Token* out) {
  skip_space();
  out->line = line_;
  out->column = col_;
  out->int_value = 0;
  out->float_value = 0;
  if (pos_ >= text_.size()) {
    out->kind = Tok::kEnd;
    out->text.clear();
    return Status::Ok();
  }
  char c = text_[pos_];
  if (is_alpha(c)) {
    size_t i = pos_;
    while (i < text_.size() && is_ident_char(text_[i])) ++i;
    out->kind = Tok::kIdent;
    out->text = std::string(text_.substr(pos_, i - pos_));
    if (out->text == "inf" || out->text == "nan") return lex_number(out);
    advance(i - pos_);
    return Status::Ok();
  }
  if (c == '%') {
    size_t i = pos_ + 1;
    while (i < text_.size() && is_ident_char(text_[i])) ++i;
    out->kind = Tok::kNodeRef;
    out->text = std::string(text_.substr(pos_ + 1, i - pos_ - 1));
    if (!is_identifier(out->text)) return error_here("expected a node name after '%'");
    advance(i - pos_);
    return Status::Ok();
  }
  if (is_digit(c) || c == '-') return lex_number(out);
  if (c == '"') return lex_string(out);
  static constexpr struct {
    char c;
    Tok kind;
  } kPunct[] = {{'(', Tok::kLParen},   {')', Tok::kRParen}, {'[', Tok::kLBracket},
                {']', Tok::kRBracket}, {'{', Tok::kLBrace}, {'}', Tok::kRBrace},
                {',', Tok::kComma},    {':', Tok::kColon},  {'=', Tok::kEquals},
                {'?', Tok::kQuestion}, {'<', Tok::kLess},   {'>', Tok::kGreater}};
  for (const auto& p : kPunct) {
    if (p.c == c) {
      out->kind = p.kind;
      out->text = std::string(1, c);
      advance();
      return Status::Ok();
    }
  }
  auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u >= 0x7f) return error_here(fmt::format("unexpected byte 0x{:02x}", u));
  return error_here(fmt::format("unexpected character '{}'", c));
}

Status Lexer::scan_dim(std::string* out, int* line, int* column) {
  skip_space();
  *line = line_;
  *column = col_;
  out->clear();
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ',' || c == ']') break;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      skip_space();
      if (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != ']') {
        return parse_error("{}:{}:{}: bad dim: unexpected space", source_, line_, col_);
      }
      continue;
    }
    if (!is_ident_char(c) && c != '*' && c != '+' && c != '-' && c != '(' && c != ')') {
      return parse_error("{}:{}:{}: bad dim: unexpected character '{}'", source_, line_, col_,
                         c == '\n' ? std::string("\\n") : std::string(1, c));
    }
    if (out->size() >= 256) return parse_error("{}:{}:{}: bad dim: too long", source_, *line, *column);
    *out += c;
    advance();
  }
  return Status::Ok();
}

}  // namespace kiln::kir
