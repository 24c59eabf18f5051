// The .kir parser's internals, shared by kir_parser.cc (program structure, nodes) and
// kir_parser_values.cc (types, values, constants, meta).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kir_text.h"
#include "kiln/ir/exported_program.h"

namespace kiln::kir {

inline constexpr int64_t kMaxElements = int64_t{1} << 40;
inline constexpr int64_t kMaxBlobBytes = int64_t{1} << 30;
inline constexpr int kMaxNesting = 8;

struct SigInput {
  InputSpec spec;
  Token at;
};
struct SigOutput {
  std::string value;
  OutputSpec spec;
  Token at;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : lexer_(text, source), source_(source) {}

  Result<ExportedProgram> parse() {
    KILN_RETURN_IF_ERROR(advance());
    ExportedProgram ep;
    KILN_RETURN_IF_ERROR(parse_program(0, &ep));
    if (cur_.kind != Tok::kEnd) return err(cur_, "unexpected {} after the program", describe(cur_));
    return ep;
  }

 private:
  template <typename... Args>
  Status err(const Token& at, fmt::format_string<Args...> format, Args&&... args) const {
    return parse_error("{}:{}:{}: {}", source_, at.line, at.column,
                       fmt::format(format, std::forward<Args>(args)...));
  }
  Status advance() { return lexer_.next(&cur_); }
  Status peek(Token* t) const {
    Lexer copy = lexer_;
    return copy.next(t);
  }
  bool at(Tok k) const { return cur_.kind == k; }
  bool at_word(std::string_view w) const { return cur_.kind == Tok::kIdent && cur_.text == w; }
  Status expect(Tok k, std::string_view spelled, std::string_view context) {
    if (cur_.kind != k) return err(cur_, "expected '{}' {}, got {}", spelled, context, describe(cur_));
    return advance();
  }
  Status expect_word(std::string_view w, std::string_view context) {
    if (!at_word(w)) return err(cur_, "expected '{}' {}, got {}", w, context, describe(cur_));
    return advance();
  }
  // A section header "word:" (peeks so that a constant named like a header still parses).
  Result<bool> at_header(std::string_view w) const {
    if (!at_word(w)) return false;
    Token t;
    KILN_RETURN_IF_ERROR(peek(&t));
    return t.kind == (w == "graph" ? Tok::kLParen : Tok::kColon);
  }
  // A name that may be bare or quoted: constants, targets, backends, tags.
  Status parse_name(std::string* out, std::string_view what) {
    if (!at(Tok::kIdent) && !at(Tok::kString)) {
      return err(cur_, "expected {}, got {}", what, describe(cur_));
    }
    *out = cur_.text;
    return advance();
  }
  Status parse_bool(bool* out) {
    if (!at_word("True") && !at_word("False")) {
      return err(cur_, "expected True or False, got {}", describe(cur_));
    }
    *out = cur_.text == "True";
    return advance();
  }
  Status parse_int(int64_t* out, std::string_view what) {
    if (!at(Tok::kInt)) return err(cur_, "expected {}, got {}", what, describe(cur_));
    *out = cur_.int_value;
    return advance();
  }

  Status parse_program(int depth, ExportedProgram* ep);
  Status parse_input(std::vector<SigInput>* inputs);
  Status parse_output(std::vector<SigOutput>* outputs);
  Status parse_constant(ExportedProgram* ep);
  Status parse_node(ExportedProgram* ep, bool* seen_non_placeholder);
  Status parse_call(Graph& g, const Token& name_tok, OpId op, Node** out);
  Status parse_value(ParamType hint, Arg* out);
  Status parse_meta(NodeMeta* meta, const Token& name_tok);
  Status parse_quant(QuantAttrs* q);
  Status parse_spec(TensorSpec* out, bool static_only);
  Status parse_specs(SpecList* out);
  Status parse_lowered(int depth, ExportedProgram* ep);
  Status parse_subgraph(int depth, const Token& name_tok, std::string name, ExportedProgram* ep);
  Status validate(ExportedProgram* ep, bool has_program, std::vector<SigInput>& inputs,
                  std::vector<SigOutput>& outputs, const Token& graph_tok, const Token& ret_tok);

  Lexer lexer_;
  std::string_view source_;
  Token cur_;
  // Declared num_users per node, checked once all users exist.
  std::vector<std::pair<Node*, std::pair<int64_t, Token>>> declared_users_;
  Graph* current_graph_ = nullptr;
};

}  // namespace kiln::kir
