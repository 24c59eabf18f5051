// Shared pieces of the .kir printer and parser: the lexer and the spelling of names, strings and
// numbers, so that both sides agree on every token.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"

namespace kiln::kir {

/// True if `s` can be printed bare: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view s);
/// `s` in double quotes with \" \\ \n \t \r and \xHH escapes for other control bytes; with
/// `ascii`, bytes from 0x80 are escaped too (binary values such as compile specs).
std::string quote(std::string_view s, bool ascii = false);
/// RFC 4648 base64 with padding (delegate blobs in text).
std::string base64_encode(std::span<const uint8_t> bytes);
/// Inverse of base64_encode; nullopt (with the offending offset in `*bad_at`) on a character
/// outside the alphabet, misplaced padding or a length that is not a multiple of 4.
std::optional<std::vector<uint8_t>> base64_decode(std::string_view text, size_t* bad_at);
/// `s` bare if it is an identifier, else quoted (names of constants, targets, backends).
std::string name_or_quoted(std::string_view s);
/// Shortest round-trip spelling that always reads back as a float ("1.0", "0.1", "inf").
std::string format_float_arg(double v);

enum class Tok : uint8_t {
  kEnd, kIdent, kNodeRef, kInt, kFloat, kString,
  kLParen, kRParen, kLBracket, kRBracket, kLBrace, kRBrace,
  kComma, kColon, kEquals, kQuestion, kLess, kGreater,
};

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  ///< identifier / node name (without %) / decoded string / number spelling
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int column = 1;
};

/// A pull lexer over the whole text. Whitespace and `#` comments separate tokens.
class Lexer {
 public:
  /// `source` names the text in messages ("model.kir:3:14: ...").
  Lexer(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  /// Reads the next token into `*out`; a malformed token is an error naming its position.
  Status next(Token* out);
  /// Reads the raw text of one dim of a spec (up to ',' or ']'), e.g. "batch*12"; empty when
  /// the next character is ',' or ']'.
  Status scan_dim(std::string* out, int* line, int* column);

  size_t offset() const { return pos_; }
  int line() const { return line_; }
  int column() const { return col_; }

 private:
  void skip_space();
  char peek_char(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void advance(size_t n = 1);
  Status lex_number(Token* out);
  Status lex_string(Token* out);

  Status error_here(std::string_view message) const;

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

/// "'kwargs'", "end of input", "string \"x\"": how a token is named in messages.
std::string describe(const Token& t);

}  // namespace kiln::kir
