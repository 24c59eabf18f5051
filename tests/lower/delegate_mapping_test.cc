// DelegateMappingBuilder: identifiers, handle collection and every error case.
#include "kiln/lower/delegate_mapping.h"

#include <gtest/gtest.h>

#include "lower_test_util.h"
#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::f32;
using Mapping = std::map<DelegateIdentifier, std::vector<int64_t>>;

class DelegateMappingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::LowerBuilder b(p);
    x = b.input("x", f32({2}));
    a = b.relu(x);
    c = b.neg(a);
    d = b.add(a, c);
    b.outputs({d});
    a->meta.debug_handle = 1;
    c->meta.debug_handle = 2;
  }
  ExportedProgram p;
  Node *x = nullptr, *a = nullptr, *c = nullptr, *d = nullptr;
};

TEST_F(DelegateMappingTest, GeneratedIdentifiersCountFromZero) {
  DelegateMappingBuilder b(/*generated_identifiers=*/true);
  auto id0 = b.insert({a, c});
  ASSERT_TRUE(id0.ok()) << id0.status().message();
  EXPECT_EQ(*id0, DelegateIdentifier(int64_t{0}));
  auto id1 = b.insert_handles({7, std::nullopt, 5, 7});
  ASSERT_TRUE(id1.ok());
  EXPECT_EQ(*id1, DelegateIdentifier(int64_t{1}));
  EXPECT_EQ(b.get_delegate_mapping(), (Mapping{{int64_t{0}, {1, 2}}, {int64_t{1}, {5, 7}}}));
  auto ints = b.get_integer_delegate_mapping();
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(ints->at(1), (std::vector<int64_t>{5, 7}));
}

TEST_F(DelegateMappingTest, GivenIdentifiersIntOrString) {
  DelegateMappingBuilder b;
  ASSERT_TRUE(b.insert({c}, DelegateIdentifier(int64_t{10})).ok());
  auto id = b.insert({a, d}, DelegateIdentifier(std::string("fused")));  // d has no handle: skipped
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, DelegateIdentifier(std::string("fused")));
  EXPECT_EQ(b.get_delegate_mapping(),
            (Mapping{{int64_t{10}, {2}}, {std::string("fused"), {1}}}));
  auto ints = b.get_integer_delegate_mapping();
  ASSERT_FALSE(ints.ok());
  EXPECT_EQ(ints.status().message(), "delegate mapping: identifier 'fused' is not an integer");
}

TEST_F(DelegateMappingTest, GeneratedBuilderRejectsGivenIdentifier) {
  DelegateMappingBuilder b(true);
  auto r = b.insert({a}, DelegateIdentifier(int64_t{3}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "delegate mapping: builders using generated identifiers can't manually add "
            "identifiers: 3; failed to add or update entry");
  // A failed insert does not use up a generated identifier.
  auto ok = b.insert({a});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, DelegateIdentifier(int64_t{0}));
}

TEST_F(DelegateMappingTest, DuplicateIdentifier) {
  DelegateMappingBuilder b;
  ASSERT_TRUE(b.insert({a}, DelegateIdentifier(std::string("k"))).ok());
  auto r = b.insert({c}, DelegateIdentifier(std::string("k")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "delegate mapping: identifier 'k' was already inserted; duplicate delegate debug "
            "identifiers are not allowed");
  EXPECT_EQ(b.get_delegate_mapping(), (Mapping{{std::string("k"), {1}}}));
}

TEST_F(DelegateMappingTest, NodesAndHandlesBothOrNeither) {
  DelegateMappingBuilder b(true);
  const std::string msg =
      "delegate mapping: only one of nodes or handles must be provided; either both were "
      "provided or neither were provided; failed to add or update entry";
  DelegateMappingEntry both;
  both.nodes = std::vector<const Node*>{a};
  both.handles = std::vector<std::optional<int64_t>>{1};
  auto r1 = b.insert_delegate_mapping_entry(both);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().message(), msg);
  auto r2 = b.insert_delegate_mapping_entry(DelegateMappingEntry{});
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().message(), msg);
}

TEST_F(DelegateMappingTest, MissingIdentifier) {
  DelegateMappingBuilder b;
  auto r = b.insert({a});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "delegate mapping: no identifier provided; failed to add or update entry");
}

TEST_F(DelegateMappingTest, NoValidDebugHandles) {
  DelegateMappingBuilder b(true);
  const std::string msg = "delegate mapping: no valid debug handles found; failed to add entry";
  auto r1 = b.insert({x, d});  // neither has a debug handle
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().message(), msg);
  auto r2 = b.insert_handles({std::nullopt});
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().message(), msg);
  EXPECT_TRUE(b.get_delegate_mapping().empty());
}

TEST_F(DelegateMappingTest, ChecksRunInTheReferenceOrder) {
  // ExecuTorch checks: given identifier on a generating builder, duplicate identifier, nodes xor
  // handles, missing identifier, no valid handle; the first that fails is the error.
  DelegateMappingEntry both;
  both.nodes = std::vector<const Node*>{a};
  both.handles = std::vector<std::optional<int64_t>>{1};
  both.identifier = DelegateIdentifier(std::string("k"));
  DelegateMappingBuilder gen(true);
  auto r1 = gen.insert_delegate_mapping_entry(both);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("can't manually add identifiers: 'k'"), std::string::npos);

  DelegateMappingBuilder given;
  ASSERT_TRUE(given.insert({a}, DelegateIdentifier(std::string("k"))).ok());
  auto r2 = given.insert_delegate_mapping_entry(both);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("was already inserted"), std::string::npos);

  both.identifier.reset();
  auto r3 = given.insert_delegate_mapping_entry(both);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("only one of nodes or handles"), std::string::npos);

  auto r4 = given.insert({x});  // no identifier, and x has no debug handle
  ASSERT_FALSE(r4.ok());
  EXPECT_NE(r4.status().message().find("no identifier provided"), std::string::npos);
  EXPECT_EQ(given.get_delegate_mapping(), (Mapping{{std::string("k"), {1}}}));
}

TEST_F(DelegateMappingTest, EmptyListsHaveNoValidHandles) {
  DelegateMappingBuilder b(true);
  const std::string msg = "delegate mapping: no valid debug handles found; failed to add entry";
  auto r1 = b.insert({});
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().message(), msg);
  auto r2 = b.insert_handles({});
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().message(), msg);
}

TEST_F(DelegateMappingTest, FailedInsertKeepsTheNextGeneratedIdentifier) {
  // Deliberate difference: ExecuTorch takes the next index before it finds no valid handle, so
  // its next entry would be 1. kiln's failed insert changes nothing.
  DelegateMappingBuilder b(true);
  ASSERT_FALSE(b.insert({x}).ok());
  auto id = b.insert({a});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, DelegateIdentifier(int64_t{0}));
}

TEST_F(DelegateMappingTest, HandleValuesAndIdentifierKinds) {
  DelegateMappingBuilder b;
  a->meta.debug_handle = 0;  // 0 is a handle; only a missing one (-1) is skipped
  ASSERT_TRUE(b.insert({c, a, c, nullptr}, DelegateIdentifier(int64_t{1})).ok());  // null: skipped
  ASSERT_TRUE(
      b.insert_handles({-3, std::nullopt, 9, -3}, DelegateIdentifier(std::string("1"))).ok());
  EXPECT_EQ(b.get_delegate_mapping(),
            (Mapping{{int64_t{1}, {0, 2}}, {std::string("1"), {-3, 9}}}));  // 1 and "1" differ
}

}  // namespace
}  // namespace kiln
