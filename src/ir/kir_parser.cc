// The .kir parser: builds the program through the public Graph / ExportedProgram API, so a
// parsed program obeys the same invariants as a built one. No recursion except one level per
// nested lowered module (bounded), so hostile text cannot exhaust the stack.
#include <algorithm>
#include <memory>
#include <optional>

#include "kir_parser.h"
#include "kiln/core/file.h"
#include "kiln/core/tensor.h"
#include "kiln/ir/kir.h"

namespace kiln::kir {

Status Parser::parse_program(int depth, ExportedProgram* ep) {
  const int base_column = cur_.column;
  std::vector<SigInput> inputs;
  std::vector<SigOutput> outputs;
  bool has_program = at_word("program");
  if (has_program) {
    KILN_RETURN_IF_ERROR(advance());
    KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after 'program'"));
    for (std::string_view section : {"inputs", "outputs", "constants"}) {
      KILN_ASSIGN_OR_RETURN(bool header, at_header(section));
      if (!header) continue;
      KILN_RETURN_IF_ERROR(advance());
      KILN_RETURN_IF_ERROR(advance());
      while (true) {
        if (section == "constants") {
          KILN_ASSIGN_OR_RETURN(bool graph_next, at_header("graph"));
          if (graph_next || (!at(Tok::kIdent) && !at(Tok::kString))) break;
          KILN_RETURN_IF_ERROR(parse_constant(ep));
        } else {
          if (!at(Tok::kNodeRef)) break;
          KILN_RETURN_IF_ERROR(section == "inputs" ? parse_input(&inputs) : parse_output(&outputs));
        }
      }
    }
  }
  Token graph_tok = cur_;
  KILN_RETURN_IF_ERROR(expect_word("graph", has_program ? "after the program sections"
                                                         : "at the start of the program"));
  KILN_RETURN_IF_ERROR(expect(Tok::kLParen, "(", "after 'graph'"));
  KILN_RETURN_IF_ERROR(expect(Tok::kRParen, ")", "after 'graph('"));
  KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after 'graph()'"));
  bool seen_non_placeholder = false;
  declared_users_.clear();
  current_graph_ = &ep->graph();
  while (at(Tok::kNodeRef)) KILN_RETURN_IF_ERROR(parse_node(ep, &seen_non_placeholder));
  Token ret_tok = cur_;
  KILN_RETURN_IF_ERROR(expect_word("return", "or a node line"));
  KILN_RETURN_IF_ERROR(expect(Tok::kLParen, "(", "after 'return'"));
  std::vector<Node*> values;
  while (!at(Tok::kRParen)) {
    if (!at(Tok::kIdent) && !at(Tok::kNodeRef)) {
      return err(cur_, "expected a node name in 'return', got {}", describe(cur_));
    }
    Node* v = ep->graph().find(cur_.text);
    if (v == nullptr) return err(cur_, "unknown node '%{}'", cur_.text);
    values.push_back(v);
    KILN_RETURN_IF_ERROR(advance());
    if (at(Tok::kComma)) {
      KILN_RETURN_IF_ERROR(advance());
    } else if (!at(Tok::kRParen)) {
      return err(cur_, "expected ')' after returned values, got {}", describe(cur_));
    }
  }
  KILN_RETURN_IF_ERROR(advance());
  ep->graph().set_output(std::move(values));
  auto declared = std::move(declared_users_);
  for (const auto& [node, d] : declared) {
    if (static_cast<int64_t>(node->num_users()) != d.first) {
      return err(d.second, "node '%{}' declares num_users={} but has {}", node->name(), d.first,
                 node->num_users());
    }
  }
  // Lowered modules of this program sit at its own indentation; deeper ones belong to a nested
  // program, shallower ones to the enclosing program.
  while (!at(Tok::kEnd) && cur_.column >= base_column) {
    if (cur_.column > base_column) return err(cur_, "unexpected {} after the graph", describe(cur_));
    KILN_RETURN_IF_ERROR(parse_lowered(depth, ep));
  }
  return validate(ep, has_program, inputs, outputs, graph_tok, ret_tok);
}

Status Parser::parse_input(std::vector<SigInput>* inputs) {
  SigInput in;
  in.at = cur_;
  in.spec.arg = cur_.text;
  KILN_RETURN_IF_ERROR(advance());
  KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after the input name"));
  Token kind_tok = cur_;
  std::string kind_name;
  KILN_RETURN_IF_ERROR(parse_name(&kind_name, "an input kind"));
  auto kind = input_kind_from_name(kind_name);
  if (!kind) return err(kind_tok, "unknown input kind '{}'", kind_name);
  in.spec.kind = *kind;
  if (at(Tok::kLParen)) {
    KILN_RETURN_IF_ERROR(advance());
    while (!at(Tok::kRParen)) {
      Token key = cur_;
      KILN_RETURN_IF_ERROR(expect(Tok::kIdent, "option name", "in the input options"));
      KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after the option name"));
      if (key.text == "target") {
        KILN_RETURN_IF_ERROR(parse_name(&in.spec.target, "a constant name"));
      } else if (key.text == "name" && in.spec.kind == InputKind::kUserInput) {
        KILN_RETURN_IF_ERROR(parse_name(&in.spec.name, "the input's name"));
        if (in.spec.name.empty()) return err(key, "user input '%{}' has an empty name", in.spec.arg);
      } else if (key.text == "persistent") {
        KILN_RETURN_IF_ERROR(parse_bool(&in.spec.persistent));
      } else {
        return err(key, "unknown input option '{}'", key.text);
      }
      if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
      else if (!at(Tok::kRParen)) return err(cur_, "expected ')' after the input options, got {}", describe(cur_));
    }
    KILN_RETURN_IF_ERROR(advance());
  }
  if (in.spec.kind != InputKind::kUserInput && in.spec.target.empty()) {
    return err(kind_tok, "{} '%{}' needs a target", kind_name, in.spec.arg);
  }
  if (in.spec.kind == InputKind::kUserInput && in.spec.name.empty()) in.spec.name = in.spec.arg;
  inputs->push_back(std::move(in));
  return Status::Ok();
}

Status Parser::parse_output(std::vector<SigOutput>* outputs) {
  SigOutput o;
  o.at = cur_;
  o.value = cur_.text;
  KILN_RETURN_IF_ERROR(advance());
  KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after the output name"));
  Token kind_tok = cur_;
  std::string kind_name;
  KILN_RETURN_IF_ERROR(parse_name(&kind_name, "an output kind"));
  auto kind = output_kind_from_name(kind_name);
  if (!kind) return err(kind_tok, "unknown output kind '{}'", kind_name);
  o.spec.kind = *kind;
  if (at(Tok::kLParen)) {
    KILN_RETURN_IF_ERROR(advance());
    Token key = cur_;
    bool user = o.spec.kind == OutputKind::kUserOutput;
    KILN_RETURN_IF_ERROR(expect_word(user ? "name" : "target", "in the output options"));
    KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", user ? "after 'name'" : "after 'target'"));
    std::string* field = user ? &o.spec.name : &o.spec.target;
    KILN_RETURN_IF_ERROR(parse_name(field, user ? "the output's name" : "a target name"));
    if (field->empty()) return err(key, "output '%{}' has an empty {}", o.value, key.text);
    KILN_RETURN_IF_ERROR(expect(Tok::kRParen, ")", "after the output options"));
  }
  if (o.spec.kind != OutputKind::kUserOutput && o.spec.target.empty()) {
    return err(kind_tok, "{} '%{}' needs a target", kind_name, o.value);
  }
  outputs->push_back(std::move(o));
  return Status::Ok();
}


Status Parser::parse_node(ExportedProgram* ep, bool* seen_non_placeholder) {
  Graph& g = ep->graph();
  Token name_tok = cur_;
  const std::string& name = name_tok.text;
  if (g.find(name) != nullptr) return err(name_tok, "duplicate node name '%{}'", name);
  KILN_RETURN_IF_ERROR(advance());
  KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after the node name"));
  NodeMeta meta;
  size_t declared_before = declared_users_.size();
  if (at(Tok::kLBracket)) KILN_RETURN_IF_ERROR(parse_meta(&meta, name_tok));
  KILN_RETURN_IF_ERROR(parse_specs(&meta.val));
  KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after the node's type"));
  Token kind_tok = cur_;
  std::string kind;
  KILN_RETURN_IF_ERROR(parse_name(&kind, "a node kind"));
  KILN_RETURN_IF_ERROR(expect(Tok::kLBracket, "[", "after the node kind"));
  KILN_RETURN_IF_ERROR(expect_word("target", "after '['"));
  KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after 'target'"));
  Token target_tok = cur_;
  std::string target;
  KILN_RETURN_IF_ERROR(parse_name(&target, "a target"));
  KILN_RETURN_IF_ERROR(expect(Tok::kRBracket, "]", "after the target"));
  Node* n = nullptr;
  if (kind == "placeholder") {
    if (*seen_non_placeholder) {
      return err(name_tok, "placeholder '%{}' comes after other nodes", name);
    }
    if (target != name) {
      return err(target_tok, "placeholder '%{}' has target '{}': a placeholder's target is its name",
                 name, target);
    }
    n = g.add_placeholder(name, TensorSpec());
  } else if (kind == "get_attr") {
    *seen_non_placeholder = true;
    n = g.add_get_attr(target, name);
  } else if (kind == "call_function") {
    *seen_non_placeholder = true;
    auto op = op_from_name(target);
    if (!op) return err(target_tok, "unknown op '{}'", target);
    KILN_RETURN_IF_ERROR(parse_call(g, name_tok, *op, &n));
  } else {
    return err(kind_tok, "unknown node kind '{}'", kind);
  }
  KILN_CHECK(n->name() == name);  // identifiers are never renamed and duplicates were refused
  n->meta = std::move(meta);
  if (declared_users_.size() > declared_before) declared_users_.back().first = n;
  return Status::Ok();
}

Status Parser::parse_call(Graph& g, const Token& name_tok, OpId op, Node** out) {
  const Schema& s = op_def(op).schema;
  const std::string& name = name_tok.text;
  KILN_RETURN_IF_ERROR(expect(Tok::kLParen, "(", "after the target"));
  KILN_RETURN_IF_ERROR(expect_word("args", "after '('"));
  KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after 'args'"));
  KILN_RETURN_IF_ERROR(expect(Tok::kLParen, "(", "to open the arguments"));
  bool variadic = !s.positional.empty() && s.positional.back().type == ParamType::kVariadicTensor;
  std::vector<Arg> args;
  while (!at(Tok::kRParen)) {
    size_t i = args.size();
    if (i >= s.positional.size() && !variadic) {
      return err(cur_, "node '%{}' ({}): too many arguments, expected at most {}", name, s.name,
                 s.positional.size());
    }
    const Param& p = s.positional[std::min(i, s.positional.size() - 1)];
    Token value_tok = cur_;
    Arg v;
    KILN_RETURN_IF_ERROR(parse_value(p.type, &v));
    if (auto e = coerce_arg(p.type, &v)) {
      return err(value_tok, "node '%{}' ({}): argument '{}': {}", name, s.name, p.name, *e);
    }
    args.push_back(std::move(v));
    if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
    else if (!at(Tok::kRParen)) return err(cur_, "expected ')' after arguments, got {}", describe(cur_));
  }
  Token close = cur_;
  KILN_RETURN_IF_ERROR(advance());
  size_t fixed = variadic ? s.positional.size() - 1 : s.positional.size();
  for (size_t i = args.size(); i < fixed; ++i) {
    if (!s.positional[i].has_default) {
      return err(close, "node '%{}' ({}): missing argument '{}'", name, s.name, s.positional[i].name);
    }
    args.push_back(s.positional[i].default_value);
  }
  KILN_RETURN_IF_ERROR(expect(Tok::kComma, ",", "after the arguments"));
  KILN_RETURN_IF_ERROR(expect_word("kwargs", "after the arguments"));
  KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after 'kwargs'"));
  KILN_RETURN_IF_ERROR(expect(Tok::kLBrace, "{", "to open the keyword arguments"));
  std::vector<Arg> kwargs(s.keyword.size());
  std::vector<bool> given(s.keyword.size(), false);
  while (!at(Tok::kRBrace)) {
    Token key = cur_;
    KILN_RETURN_IF_ERROR(expect(Tok::kIdent, "keyword name", "in the keyword arguments"));
    int idx = s.keyword_index(key.text);
    if (idx < 0) {
      return err(key, "node '%{}' ({}): unknown keyword argument '{}'", name, s.name, key.text);
    }
    auto k = static_cast<size_t>(idx);
    if (given[k]) {
      return err(key, "node '%{}' ({}): keyword argument '{}' given twice", name, s.name, key.text);
    }
    KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after the keyword name"));
    Token value_tok = cur_;
    KILN_RETURN_IF_ERROR(parse_value(s.keyword[k].type, &kwargs[k]));
    if (auto e = coerce_arg(s.keyword[k].type, &kwargs[k])) {
      return err(value_tok, "node '%{}' ({}): argument '{}': {}", name, s.name, key.text, *e);
    }
    given[k] = true;
    if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
    else if (!at(Tok::kRBrace)) return err(cur_, "expected '}}' after keyword arguments, got {}", describe(cur_));
  }
  Token close_kw = cur_;
  KILN_RETURN_IF_ERROR(advance());
  KILN_RETURN_IF_ERROR(expect(Tok::kRParen, ")", "after the keyword arguments"));
  for (size_t k = 0; k < kwargs.size(); ++k) {
    if (given[k]) continue;
    if (!s.keyword[k].has_default) {
      return err(close_kw, "node '%{}' ({}): missing keyword argument '{}'", name, s.name,
                 s.keyword[k].name);
    }
    kwargs[k] = s.keyword[k].default_value;
  }
  // Specs come from the text: lint() checks them against inference later.
  auto r = g.add_call_exact(op, std::move(args), std::move(kwargs), name, false);
  if (!r.ok()) return err(name_tok, "{}", r.status().message());
  *out = *r;
  return Status::Ok();
}

Status Parser::parse_lowered(int depth, ExportedProgram* ep) {
  Token name_tok = cur_;
  LoweredModule m;
  KILN_RETURN_IF_ERROR(parse_name(&m.name, "a lowered module name"));
  if (ep->find_lowered_module(m.name) != nullptr) {
    return err(name_tok, "duplicate lowered module '{}'", m.name);
  }
  KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after the lowered module name"));
  if (at_word("subgraph")) return parse_subgraph(depth, name_tok, std::move(m.name), ep);
  KILN_RETURN_IF_ERROR(expect_word("lowered", "or 'subgraph' after '='"));
  KILN_RETURN_IF_ERROR(expect(Tok::kLParen, "(", "after 'lowered'"));
  bool has_backend = false;
  int64_t bytes = -1;
  Token bytes_tok = cur_;
  std::optional<std::vector<uint8_t>> blob;
  while (!at(Tok::kRParen)) {
    Token key = cur_;
    KILN_RETURN_IF_ERROR(expect(Tok::kIdent, "field name", "in 'lowered(...)'"));
    KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after the field name"));
    if (key.text == "backend") {
      KILN_RETURN_IF_ERROR(parse_name(&m.backend_id, "a backend id"));
      has_backend = true;
    } else if (key.text == "compile_specs") {
      KILN_RETURN_IF_ERROR(expect(Tok::kLBrace, "{", "after 'compile_specs='"));
      while (!at(Tok::kRBrace)) {
        CompileSpec cs;
        KILN_RETURN_IF_ERROR(parse_name(&cs.key, "a compile spec key"));
        KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after the compile spec key"));
        if (!at(Tok::kString)) {
          return err(cur_, "compile spec '{}': expected its value as a string, got {}", cs.key,
                     describe(cur_));
        }
        cs.value.assign(cur_.text.begin(), cur_.text.end());
        KILN_RETURN_IF_ERROR(advance());
        m.compile_specs.push_back(std::move(cs));
        if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
        else if (!at(Tok::kRBrace)) return err(cur_, "expected '}}' after the compile specs, got {}", describe(cur_));
      }
      KILN_RETURN_IF_ERROR(advance());
    } else if (key.text == "debug_handle_map") {
      KILN_RETURN_IF_ERROR(expect(Tok::kLBrace, "{", "after 'debug_handle_map='"));
      while (!at(Tok::kRBrace)) {
        int64_t handle = 0;
        KILN_RETURN_IF_ERROR(parse_int(&handle, "a debug handle"));
        KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after the debug handle"));
        Token value_tok = cur_;
        Arg v;
        KILN_RETURN_IF_ERROR(parse_value(ParamType::kIntList, &v));
        if (v.kind() != Arg::Kind::kIntList) {
          return err(value_tok, "expected a list of debug handles, got {}", arg_kind_name(v.kind()));
        }
        m.debug_handle_map[handle] = v.to_ints();
        if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
        else if (!at(Tok::kRBrace)) return err(cur_, "expected '}}' after the debug handle map, got {}", describe(cur_));
      }
      KILN_RETURN_IF_ERROR(advance());
    } else if (key.text == "named_data") {
      KILN_RETURN_IF_ERROR(expect(Tok::kLBrace, "{", "after 'named_data='"));
      while (!at(Tok::kRBrace)) {
        std::pair<std::string, std::string> entry;
        KILN_RETURN_IF_ERROR(parse_name(&entry.first, "a named data key"));
        KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after the named data key"));
        KILN_RETURN_IF_ERROR(parse_name(&entry.second, "the constant holding the named data"));
        m.named_data.push_back(std::move(entry));
        if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
        else if (!at(Tok::kRBrace)) return err(cur_, "expected '}}' after the named data, got {}", describe(cur_));
      }
      KILN_RETURN_IF_ERROR(advance());
    } else if (key.text == "bytes") {
      bytes_tok = cur_;
      KILN_RETURN_IF_ERROR(parse_int(&bytes, "a byte count"));
      if (bytes < 0 || bytes > kMaxBlobBytes) {
        return err(bytes_tok, "lowered module '{}': bytes={} is outside [0, 2^30]", m.name, bytes);
      }
    } else if (key.text == "base64") {
      if (!at(Tok::kString)) {
        return err(cur_, "lowered module '{}': expected the blob as a base64 string, got {}",
                   m.name, describe(cur_));
      }
      size_t bad = 0;
      blob = base64_decode(cur_.text, &bad);
      if (!blob) {
        return err(cur_, "lowered module '{}': the blob is not valid base64 (at character {} of "
                   "{})", m.name, bad, cur_.text.size());
      }
      KILN_RETURN_IF_ERROR(advance());
    } else {
      return err(key, "unknown lowered module field '{}'", key.text);
    }
    if (at(Tok::kComma)) KILN_RETURN_IF_ERROR(advance());
    else if (!at(Tok::kRParen)) return err(cur_, "expected ')' after the lowered module fields, got {}", describe(cur_));
  }
  KILN_RETURN_IF_ERROR(advance());
  if (!has_backend) return err(name_tok, "lowered module '{}' needs a backend", m.name);
  if (blob) {
    if (bytes >= 0 && static_cast<size_t>(bytes) != blob->size()) {
      return err(bytes_tok, "lowered module '{}': bytes={} but the base64 blob holds {} bytes",
                 m.name, bytes, blob->size());
    }
    m.processed_bytes = std::make_shared<const VectorStorage>(std::move(*blob));
  } else {
    // Only the size was printed: elided zeros that print by size again.
    auto zeros = ElidedStorage::create(static_cast<size_t>(std::max<int64_t>(bytes, 0)));
    if (zeros == nullptr) return err(bytes_tok, "lowered module '{}': cannot map {} bytes", m.name, bytes);
    m.processed_bytes = std::move(zeros);
  }
  if (at(Tok::kColon)) {
    Token colon = cur_;
    KILN_RETURN_IF_ERROR(advance());
    if (depth + 1 >= kMaxNesting) {
      return err(colon, "lowered modules nested more than {} deep", kMaxNesting);
    }
    if (cur_.column <= name_tok.column) {
      return err(cur_, "expected the program of '{}' indented under it, got {}", m.name,
                 describe(cur_));
    }
    auto sub = std::make_shared<ExportedProgram>();
    KILN_RETURN_IF_ERROR(parse_program(depth + 1, sub.get()));
    m.original_module = std::move(sub);
  }
  ep->lowered_modules().push_back(std::move(m));
  return Status::Ok();
}

// "name = subgraph():" and the subgraph's program indented under it (a cond's branch).
Status Parser::parse_subgraph(int depth, const Token& name_tok, std::string name,
                              ExportedProgram* ep) {
  if (ep->find_subgraph(name) != nullptr || ep->find_lowered_module(name) != nullptr) {
    return err(name_tok, "duplicate module '{}'", name);
  }
  KILN_RETURN_IF_ERROR(advance());
  KILN_RETURN_IF_ERROR(expect(Tok::kLParen, "(", "after 'subgraph'"));
  if (at_word("error")) {  // a branch that cannot run on the program's shapes: no program
    KILN_RETURN_IF_ERROR(advance());
    KILN_RETURN_IF_ERROR(expect(Tok::kEquals, "=", "after 'error'"));
    if (!at(Tok::kString)) {
      return err(cur_, "expected the error as a string, got {}", describe(cur_));
    }
    std::string error(cur_.text);
    KILN_RETURN_IF_ERROR(advance());
    KILN_RETURN_IF_ERROR(expect(Tok::kRParen, ")", "after the error"));
    if (error.empty()) return err(name_tok, "subgraph '{}': the error is empty", name);
    ep->subgraphs().push_back({std::move(name), nullptr, std::move(error)});
    return Status::Ok();
  }
  KILN_RETURN_IF_ERROR(expect(Tok::kRParen, ")", "after 'subgraph('"));
  Token colon = cur_;
  KILN_RETURN_IF_ERROR(expect(Tok::kColon, ":", "after 'subgraph()'"));
  if (depth + 1 >= kMaxNesting) return err(colon, "modules nested more than {} deep", kMaxNesting);
  if (cur_.column <= name_tok.column) {
    return err(cur_, "expected the program of '{}' indented under it, got {}", name,
               describe(cur_));
  }
  auto sub = std::make_shared<ExportedProgram>();
  KILN_RETURN_IF_ERROR(parse_program(depth + 1, sub.get()));
  ep->subgraphs().push_back({std::move(name), std::move(sub), ""});
  return Status::Ok();
}

Status Parser::validate(ExportedProgram* ep, bool has_program, std::vector<SigInput>& inputs,
                        std::vector<SigOutput>& outputs, const Token& graph_tok,
                        const Token& ret_tok) {
  Graph& g = ep->graph();
  GraphSignature& sig = ep->signature();
  std::vector<Node*> ph = g.placeholders();
  const std::vector<Node*>& values = g.output_node()->arg(0).nodes();
  if (!has_program) {
    // A bare graph: every placeholder is a user input, every value a user output.
    for (Node* p : ph) sig.inputs.push_back({InputKind::kUserInput, p->name(), "", true, p->name()});
    sig.outputs.assign(values.size(), OutputSpec{});
    name_user_outputs(values, sig.outputs);
  } else {
    if (inputs.size() != ph.size()) {
      return err(inputs.size() > ph.size() ? inputs[ph.size()].at : graph_tok,
                 "the signature lists {} inputs but the graph has {} placeholders", inputs.size(),
                 ph.size());
    }
    for (size_t i = 0; i < ph.size(); ++i) {
      const InputSpec& in = inputs[i].spec;
      if (in.arg != ph[i]->name()) {
        return err(inputs[i].at, "input {} is '%{}' in the signature but placeholder {} is '%{}'",
                   i, in.arg, i, ph[i]->name());
      }
      if (in.kind != InputKind::kUserInput) {
        const Tensor* t = ep->constants().find(in.target);
        if (t == nullptr) {
          return err(inputs[i].at, "{} '%{}' names constant '{}', which is not in the constants "
                     "section", input_kind_name(in.kind), in.arg, in.target);
        }
        TensorSpec cs = TensorSpec::of(t->dtype(), t->shape());
        if (ph[i]->has_spec() && ph[i]->spec() != cs) {
          return err(inputs[i].at, "placeholder '%{}' is {} but constant '{}' is {}", in.arg,
                     ph[i]->spec().to_string(), in.target, cs.to_string());
        }
      }
      sig.inputs.push_back(in);
    }
    if (outputs.size() != values.size()) {
      return err(ret_tok, "the signature lists {} outputs but the graph returns {} values",
                 outputs.size(), values.size());
    }
    for (size_t i = 0; i < values.size(); ++i) {
      if (outputs[i].value != values[i]->name()) {
        return err(outputs[i].at, "output {} is '%{}' in the signature but the graph returns '%{}'",
                   i, outputs[i].value, values[i]->name());
      }
      sig.outputs.push_back(outputs[i].spec);
    }
    name_user_outputs(values, sig.outputs);
  }
  Status st = ep->lint();
  if (!st.ok()) return err(graph_tok, "invalid program: {}", st.message());
  return Status::Ok();
}

}  // namespace kiln::kir

namespace kiln {

Result<ExportedProgram> parse_kir(std::string_view text, std::string_view source_name) {
  kir::Parser parser(text, source_name);
  return parser.parse();
}

Result<ExportedProgram> load_kir_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_kir(text, path);
}

}  // namespace kiln
