// Every error path of the .kir parser, with the exact message and its line:column.
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/kir.h"

namespace kiln {
namespace {

// A valid program; each test breaks one thing in it.
constexpr const char* kBase =
    "program:\n"                                                          // 1
    "  inputs:\n"                                                         // 2
    "    %x : user_input\n"                                               // 3
    "    %p_w : parameter(target=w)\n"                                    // 4
    "  outputs:\n"                                                        // 5
    "    %add : user_output\n"                                            // 6
    "  constants:\n"                                                      // 7
    "    w : f32[2] = [1, 2]\n"                                           // 8
    "graph():\n"                                                          // 9
    "    %x : [num_users=1] f32[2] = placeholder[target=x]\n"             // 10
    "    %p_w : [num_users=1] f32[2] = placeholder[target=p_w]\n"         // 11
    "    %add : [num_users=1] f32[2] = call_function[target=add](args = (%x, %p_w), kwargs = {})\n"
    "    return (add,)\n";                                                // 13

std::string replaced(std::string_view from, std::string_view to) {
  std::string s(kBase);
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// The parse error of `text` (empty if it parsed).
std::string error_of(const std::string& text) {
  auto p = parse_kir(text, "model.kir");
  if (p.ok()) return "";
  EXPECT_EQ(p.status().code(), StatusCode::kParseError);
  return p.status().message();
}

TEST(KirParserErrors, BaseProgramParses) { EXPECT_EQ(error_of(kBase), ""); }

TEST(KirParserErrors, BadCharacter) {
  EXPECT_EQ(error_of(replaced("f32[2] = call", "f32[2] $ call")),
            "model.kir:12:33: unexpected character '$'");
}

TEST(KirParserErrors, BadByte) {
  EXPECT_EQ(error_of(replaced("return", "\x01return")), "model.kir:13:5: unexpected byte 0x01");
}

TEST(KirParserErrors, UnexpectedToken) {
  EXPECT_EQ(error_of(replaced("(%x, %p_w)", "(%x, %p_w kwargs")),
            "model.kir:12:78: expected ')' after arguments, got 'kwargs'");
  EXPECT_EQ(error_of(replaced("(%x, %p_w), kwargs", "(%x, %p_w) kwargs")),
            "model.kir:12:79: expected ',' after the arguments, got 'kwargs'");
  EXPECT_EQ(error_of(replaced("graph():", "graph(:")),
            "model.kir:9:7: expected ')' after 'graph(', got ':'");
}

TEST(KirParserErrors, MalformedNumber) {
  EXPECT_EQ(error_of(replaced("[1, 2]", "[1, 2x]")), "model.kir:8:22: malformed number");
  EXPECT_EQ(error_of(replaced("[1, 2]", "[1, 99999999999999999999]")),
            "model.kir:8:22: integer '99999999999999999999' out of range");
}

TEST(KirParserErrors, UnknownOp) {
  EXPECT_EQ(error_of(replaced("target=add]", "target=fooo]")), "model.kir:12:56: unknown op 'fooo'");
}

TEST(KirParserErrors, UnknownNodeKind) {
  EXPECT_EQ(error_of(replaced("= call_function", "= call_method")),
            "model.kir:12:35: unknown node kind 'call_method'");
}

TEST(KirParserErrors, UnknownNode) {
  EXPECT_EQ(error_of(replaced("(%x, %p_w)", "(%x, %foo)")), "model.kir:12:73: unknown node '%foo'");
  EXPECT_EQ(error_of(replaced("return (add,)", "return (sub,)")),
            "model.kir:13:13: unknown node '%sub'");
}

TEST(KirParserErrors, ForwardReference) {
  // Node references must name earlier nodes, even when the name exists later.
  EXPECT_EQ(error_of(replaced("(%x, %p_w)", "(%x, %add)")), "model.kir:12:73: unknown node '%add'");
}

TEST(KirParserErrors, WrongArgType) {
  EXPECT_EQ(error_of(replaced("(%x, %p_w)", "(%x, \"w\")")),
            "model.kir:12:73: node '%add' (add): argument 'other': got str, expected Scalar");
  EXPECT_EQ(error_of(replaced("kwargs = {}", "kwargs = {alpha: [1]}")),
            "model.kir:12:97: node '%add' (add): argument 'alpha': got int[], expected float");
}

TEST(KirParserErrors, TooManyArguments) {
  EXPECT_EQ(error_of(replaced("(%x, %p_w)", "(%x, %p_w, 1)")),
            "model.kir:12:79: node '%add' (add): too many arguments, expected at most 2");
}

TEST(KirParserErrors, MissingArgument) {
  EXPECT_EQ(error_of(replaced("(%x, %p_w)", "(%x,)")),
            "model.kir:12:72: node '%add' (add): missing argument 'other'");
}

TEST(KirParserErrors, MissingKwarg) {
  EXPECT_EQ(error_of(replaced("call_function[target=add](args = (%x, %p_w), kwargs = {})",
                              "call_function[target=softmax](args = (%x,), kwargs = {})")),
            "model.kir:12:89: node '%add' (softmax): missing keyword argument 'dim'");
}

TEST(KirParserErrors, UnknownAndRepeatedKwarg) {
  EXPECT_EQ(error_of(replaced("kwargs = {}", "kwargs = {beta: 2.0}")),
            "model.kir:12:90: node '%add' (add): unknown keyword argument 'beta'");
  EXPECT_EQ(error_of(replaced("kwargs = {}", "kwargs = {alpha: 2.0, alpha: 1.0}")),
            "model.kir:12:102: node '%add' (add): keyword argument 'alpha' given twice");
}

TEST(KirParserErrors, DuplicateName) {
  EXPECT_EQ(error_of(replaced("    %add : [num_users=1] f32[2] = call_function",
                              "    %x : [num_users=1] f32[2] = call_function")),
            "model.kir:12:5: duplicate node name '%x'");
}

TEST(KirParserErrors, BadDType) {
  EXPECT_EQ(error_of(replaced("%add : [num_users=1] f32[2]", "%add : [num_users=1] f33[2]")),
            "model.kir:12:26: unknown dtype 'f33'");
}

TEST(KirParserErrors, BadDim) {
  EXPECT_EQ(error_of(replaced("%add : [num_users=1] f32[2]", "%add : [num_users=1] f32[-2]")),
            "model.kir:12:30: bad dim '-2'");
  EXPECT_EQ(error_of(replaced("%add : [num_users=1] f32[2]", "%add : [num_users=1] f32[2, ]")),
            "model.kir:12:33: bad dim: expected a size or a symbol");
  EXPECT_EQ(error_of(replaced("%add : [num_users=1] f32[2]", "%add : [num_users=1] f32[ba tch]")),
            "model.kir:12:33: bad dim: unexpected space");
  EXPECT_EQ(error_of(replaced("%add : [num_users=1] f32[2]",
                              "%add : [num_users=1] f32[2199023255553]")),
            "model.kir:12:30: bad dim 2199023255553: larger than 2^40");
  EXPECT_EQ(error_of(replaced("%add : [num_users=1] f32[2]",
                              "%add : [num_users=1] f32[1048576, 1048577]")),
            "model.kir:12:26: bad shape f32[1048576, 1048577]: more than 2^40 elements");
  EXPECT_EQ(error_of(replaced("w : f32[2]", "w : f32[n]")),
            "model.kir:8:13: bad dim 'n': constants need static shapes");
}

TEST(KirParserErrors, UnterminatedString) {
  EXPECT_EQ(error_of(replaced("[num_users=1] f32[2] = call", "[num_users=1, source=\"abc] f32[2] = call")),
            "model.kir:12:33: unterminated string");
  EXPECT_EQ(error_of(replaced("[num_users=1] f32[2] = call", "[num_users=1, source=\"a\\q\"] f32[2] = call")),
            "model.kir:12:35: unknown escape in string");
}

TEST(KirParserErrors, UnknownMetaField) {
  EXPECT_EQ(error_of(replaced("%add : [num_users=1]", "%add : [users=1]")),
            "model.kir:12:13: unknown meta field 'users' of node '%add'");
}

TEST(KirParserErrors, NumUsersMismatch) {
  EXPECT_EQ(error_of(replaced("%x : [num_users=1]", "%x : [num_users=3]")),
            "model.kir:10:21: node '%x' declares num_users=3 but has 1");
}

TEST(KirParserErrors, PlaceholderAfterOtherNodes) {
  EXPECT_EQ(error_of(replaced("    return", "    %y : f32[2] = placeholder[target=y]\n    return")),
            "model.kir:13:5: placeholder '%y' comes after other nodes");
}

TEST(KirParserErrors, PlaceholderTargetDiffersFromName) {
  EXPECT_EQ(error_of(replaced("placeholder[target=x]", "placeholder[target=y]")),
            "model.kir:10:52: placeholder '%x' has target 'y': a placeholder's target is its name");
}

TEST(KirParserErrors, SignaturePlaceholderMismatch) {
  EXPECT_EQ(error_of(replaced("    %x : user_input\n", "    %y : user_input\n")),
            "model.kir:3:5: input 0 is '%y' in the signature but placeholder 0 is '%x'");
  EXPECT_EQ(error_of(replaced("    %x : user_input\n", "")),
            "model.kir:8:1: the signature lists 1 inputs but the graph has 2 placeholders");
  EXPECT_EQ(error_of(replaced("    %add : user_output\n", "    %x : user_output\n")),
            "model.kir:6:5: output 0 is '%x' in the signature but the graph returns '%add'");
  EXPECT_EQ(error_of(replaced("    %add : user_output\n", "")),
            "model.kir:12:5: the signature lists 0 outputs but the graph returns 1 values");
}

TEST(KirParserErrors, UnknownSignatureKinds) {
  EXPECT_EQ(error_of(replaced("%x : user_input", "%x : user_inputs")),
            "model.kir:3:10: unknown input kind 'user_inputs'");
  EXPECT_EQ(error_of(replaced("%add : user_output", "%add : user_out")),
            "model.kir:6:12: unknown output kind 'user_out'");
  EXPECT_EQ(error_of(replaced("parameter(target=w)", "parameter")),
            "model.kir:4:12: parameter '%p_w' needs a target");
}

TEST(KirParserErrors, ConstantMissing) {
  EXPECT_EQ(error_of(replaced("    w : f32[2] = [1, 2]\n", "")),
            "model.kir:4:5: parameter '%p_w' names constant 'w', which is not in the constants section");
}

TEST(KirParserErrors, ConstantDoesNotMatchPlaceholder) {
  EXPECT_EQ(error_of(replaced("w : f32[2] = [1, 2]", "w : f32[3] = [1, 2, 3]")),
            "model.kir:4:5: placeholder '%p_w' is f32[2] but constant 'w' is f32[3]");
}

TEST(KirParserErrors, ConstantValues) {
  EXPECT_EQ(error_of(replaced("[1, 2]", "[1]")), "model.kir:8:18: constant 'w' has 1 values, expected 2");
  EXPECT_EQ(error_of(replaced("[1, 2]", "[1, 2, 3]")), "model.kir:8:25: constant 'w' has more than 2 values");
  EXPECT_EQ(error_of(replaced("[1, 2]", "[1, True]")),
            "model.kir:8:22: expected a f32 value in constant 'w', got 'True'");
  EXPECT_EQ(error_of(replaced("[1, 2]", "<4 bytes>")),
            "model.kir:8:19: constant 'w' is f32[2] (8 bytes), not 4 bytes");
  EXPECT_EQ(error_of(replaced("    w : f32[2] = [1, 2]\n", "    w : f32[2] = [1, 2]\n    v : i8[1] = [300]\n")),
            "model.kir:9:17: constant 'v': value 300 is out of range for i8");
  EXPECT_EQ(error_of(replaced("    w : f32[2] = [1, 2]\n", "    w : f32[2] = [1, 2]\n    w : f32[1] = [0]\n")),
            "model.kir:9:5: duplicate constant 'w'");
}

TEST(KirParserErrors, SpecDriftIsALintError) {
  EXPECT_EQ(error_of(replaced("%add : [num_users=1] f32[2]", "%add : [num_users=1] f32[3]")),
            "model.kir:9:1: invalid program: lint: node 'add' (add) has spec f32[3] but its inputs "
            "give f32[2]");
}

TEST(KirParserErrors, GetAttrOfNothing) {
  EXPECT_EQ(error_of(replaced("    return (add,)\n",
                              "    %m : [num_users=0] ? = get_attr[target=nothing]\n"
                              "    return (add,)\n")),
            "model.kir:9:1: invalid program: lint: get_attr 'm' reads 'nothing', which is neither "
            "a constant, a lowered module nor a subgraph");
}

TEST(KirParserErrors, Subgraphs) {
  std::string base = kBase;
  EXPECT_EQ(error_of(base + "s = subgraph(error=\"\")\n"),
            "model.kir:14:1: subgraph 's': the error is empty");
  EXPECT_EQ(error_of(base + "s = subgraph(error=3)\n"),
            "model.kir:14:20: expected the error as a string, got '3'");
  EXPECT_EQ(error_of(base + "s = subgraph(error=\"x\")\ns = subgraph(error=\"y\")\n"),
            "model.kir:15:1: duplicate module 's'");
  EXPECT_EQ(error_of(base + "s = subgraph()\n"),
            "model.kir:15:1: expected ':' after 'subgraph()', got end of input");
  EXPECT_EQ(error_of(base + "s = subgraph():\nt = subgraph(error=\"x\")\n"),
            "model.kir:15:1: expected the program of 's' indented under it, got 't'");
}

TEST(KirParserErrors, LoweredModules) {
  std::string base = kBase;
  EXPECT_EQ(error_of(base + "m = lowered(backend=x, bytes=2000000000)\n"),
            "model.kir:14:30: lowered module 'm': bytes=2000000000 is outside [0, 2^30]");
  EXPECT_EQ(error_of(base + "m = lowered(bytes=1)\n"), "model.kir:14:1: lowered module 'm' needs a backend");
  EXPECT_EQ(error_of(base + "m = lowered(backend=x, compile_specs={k: 7})\n"),
            "model.kir:14:42: compile spec 'k': expected its value as a string, got '7'");
  EXPECT_EQ(error_of(base + "m = lowered(backend=x, base64=\"QUJD*\")\n"),
            "model.kir:14:31: lowered module 'm': the blob is not valid base64 (at character 5 of 5)");
  EXPECT_EQ(error_of(base + "m = lowered(backend=x, base64=\"QR==\")\n"),
            "model.kir:14:31: lowered module 'm': the blob is not valid base64 (at character 1 of 4)");
  EXPECT_EQ(error_of(base + "m = lowered(backend=x, bytes=4, base64=\"QUJD\")\n"),
            "model.kir:14:30: lowered module 'm': bytes=4 but the base64 blob holds 3 bytes");
  EXPECT_EQ(error_of(base + "m = lowered(backend=x, base64=7)\n"),
            "model.kir:14:31: lowered module 'm': expected the blob as a base64 string, got '7'");
  EXPECT_EQ(error_of(base + "m = lowered(backend=x)\nm = lowered(backend=y)\n"),
            "model.kir:15:1: duplicate lowered module 'm'");
  EXPECT_EQ(error_of(base + "  m = lowered(backend=x)\n"), "model.kir:14:3: unexpected 'm' after the graph");
}

TEST(KirParserErrors, LoweredModulesNestTooDeep) {
  std::string text = "graph():\n    return ()\n";
  std::string nested = text;
  for (int i = 0; i < 9; ++i) {
    std::string indented;
    for (size_t start = 0; start < nested.size();) {
      size_t end = nested.find('\n', start);
      indented += "  " + nested.substr(start, end - start) + "\n";
      start = end + 1;
    }
    nested = text + "m = lowered(backend=x, bytes=0):\n" + indented;
  }
  EXPECT_EQ(error_of(nested), "model.kir:24:46: lowered modules nested more than 8 deep");
}

TEST(KirParserErrors, DeepNestingFailsWithoutRecursion) {
  std::string deep = replaced("(%x, %p_w)", "(%x, " + std::string(200000, '[') + ")");
  EXPECT_EQ(error_of(deep), "model.kir:12:74: expected a node or a number in the list, got '['");
  std::string parens = replaced("f32[2] = call", std::string(200000, '(') + " = call");
  EXPECT_EQ(error_of(parens), "model.kir:12:27: expected a tensor type such as f32[2, 3], got '('");
}

TEST(KirParserErrors, TrailingText) {
  EXPECT_EQ(error_of(std::string(kBase) + "junk"), "model.kir:14:5: expected '=' after the lowered module name, got end of input");
  EXPECT_EQ(error_of("graph():\n    return ()\n)"), "model.kir:3:1: expected a lowered module name, got ')'");
}

TEST(KirParserErrors, EmptyText) {
  EXPECT_EQ(error_of(""), "model.kir:1:1: expected 'graph' at the start of the program, got end of input");
}

}  // namespace
}  // namespace kiln
