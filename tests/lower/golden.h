// Golden-file comparison for printed graphs; KILN_UPDATE_GOLDEN=1 rewrites the files.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln::testing {

inline void expect_golden(const std::string& text, const std::string& relative_path) {
  std::string path = std::string(KILN_TEST_DATA_DIR) + "/" + relative_path;
  const char* update = std::getenv("KILN_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    ASSERT_TRUE(out.good()) << "cannot write " << path;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing golden file " << path << " (run with KILN_UPDATE_GOLDEN=1)";
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(text, ss.str()) << "golden mismatch: " << path;
}

}  // namespace kiln::testing
