// Whole-file reads that name what is wrong with a path, and atomic writes that never follow links.
#include "kiln/core/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_file_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Names in the folder, other than `keep`.
  std::vector<std::string> leftovers(std::initializer_list<std::string> keep) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      std::string n = e.path().filename().string();
      if (std::find(keep.begin(), keep.end(), n) == keep.end()) out.push_back(n);
    }
    return out;
  }

  fs::path dir_;
};

TEST_F(FileTest, ReadsSayWhatIsWrongWithThePath) {
  EXPECT_EQ(read_file(path("nope")).status().message(), fmt::format("'{}': no such file", path("nope")));
  EXPECT_EQ(read_file(dir_.string()).status().message(),
            fmt::format("'{}' is a directory, expected a file", dir_.string()));
  EXPECT_EQ(check_regular_file("").status().message(), "an empty path was given where a file is expected");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_EQ(read_file(path("fifo")).status().message(),
            fmt::format("'{}' is not a regular file (a socket, device or pipe), expected a file",
                        path("fifo")));
  std::ofstream(path("f"), std::ios::binary) << "abc";
  EXPECT_EQ(*read_file(path("f")), "abc");
  EXPECT_EQ(*check_regular_file(path("f")), 3u);
}

TEST_F(FileTest, AtomicWriteReplacesAndLeavesNothingBehind) {
  ASSERT_TRUE(write_file_atomic(path("out"), "one").ok());
  ASSERT_TRUE(write_file_atomic(path("out"), "two").ok());
  EXPECT_EQ(slurp(path("out")), "two");
  EXPECT_TRUE(leftovers({"out"}).empty());
  // The usual permissions, as a plain open() would give.
  mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat(path("out").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST_F(FileTest, AtomicWriteNeverFollowsAPlantedLink) {
  std::ofstream(path("victim"), std::ios::binary) << "precious";
  // The old fixed temporary name, and the output itself, as links to the victim.
  fs::create_symlink(path("victim"), path("out.tmp"));
  fs::create_symlink(path("victim"), path("out"));
  ASSERT_TRUE(write_file_atomic(path("out"), "new").ok());
  EXPECT_EQ(slurp(path("victim")), "precious");
  EXPECT_FALSE(fs::is_symlink(path("out")));  // the link itself was replaced
  EXPECT_EQ(slurp(path("out")), "new");
  EXPECT_TRUE(leftovers({"out", "out.tmp", "victim"}).empty());
}

TEST_F(FileTest, FailedWritesLeaveTheTargetAndNoTemporary) {
  std::ofstream(path("keep"), std::ios::binary) << "old";
  Status missing = write_file_atomic(path("no/such/dir/x"), "data");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find(fmt::format("cannot write '{}'", path("no/such/dir/x"))),
            std::string::npos)
      << missing.message();
  fs::create_directories(path("adir"));
  EXPECT_EQ(write_file_atomic(path("adir"), "data").message(),
            fmt::format("'{}' is a directory, expected a file to write", path("adir")));
  EXPECT_EQ(slurp(path("keep")), "old");
  EXPECT_TRUE(leftovers({"keep", "adir"}).empty());
}

}  // namespace
}  // namespace kiln
