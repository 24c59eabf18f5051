#include "kiln/core/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "kiln/core/memory.h"

namespace kiln {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

// Closes a descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<uint64_t> check_regular_file(const std::string& path) {
  if (path.empty()) return invalid_argument("an empty path was given where a file is expected");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int e = errno;
    if (e == ENOENT) return io_error("'{}': no such file", path);
    return io_error("cannot read '{}': {}", path, errno_text(e));
  }
  if (S_ISDIR(st.st_mode)) return invalid_argument("'{}' is a directory, expected a file", path);
  if (!S_ISREG(st.st_mode)) {
    return invalid_argument("'{}' is not a regular file (a socket, device or pipe), expected a "
                            "file", path);
  }
  return static_cast<uint64_t>(st.st_size);
}

Result<std::string> read_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(uint64_t size, check_regular_file(path));
  KILN_RETURN_IF_ERROR(check_memory(size, fmt::format("reading '{}'", path)));
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return io_error("cannot read '{}': {}", path, errno_text(errno));
  std::string bytes;
  bytes.resize(static_cast<size_t>(size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(f.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("failed reading '{}': {}", path, errno_text(errno));
    if (n == 0) break;  // the file shrank while being read
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  return write_file_atomic(path, std::span<const std::string_view>(&bytes, 1));
}

Status write_file_atomic(const std::string& path, std::span<const std::string_view> chunks) {
  namespace fs = std::filesystem;
  if (path.empty()) return invalid_argument("an empty output path was given");
  fs::path target(path);
  std::error_code ec;
  if (fs::is_directory(target, ec)) {
    return invalid_argument("'{}' is a directory, expected a file to write", path);
  }
  fs::path dir = target.parent_path();
  std::string stem = target.filename().string();
  // A unique sibling, created exclusively: a planted file or link at any name is never opened.
  std::random_device rd;
  std::mt19937_64 rng((uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(::getpid()));
  Fd f;
  std::string tmp;
  for (int attempt = 0; attempt < 64 && f.fd < 0; ++attempt) {
    tmp = (dir / fmt::format("{}.{:012x}.tmp", stem, rng() & 0xffffffffffffULL)).string();
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (f.fd < 0 && errno != EEXIST) {
      return io_error("cannot write '{}': cannot create a temporary file in '{}': {}", path,
                      dir.empty() ? "." : dir.string(), errno_text(errno));
    }
  }
  if (f.fd < 0) return io_error("cannot write '{}': no free temporary name in its folder", path);
  auto fail = [&](std::string_view what) {
    int e = errno;
    if (f.fd >= 0) ::close(f.fd);
    f.fd = -1;
    ::unlink(tmp.c_str());
    return io_error("cannot write '{}': {}: {}", path, what, errno_text(e));
  };
  for (std::string_view bytes : chunks) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(f.fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail("write failed");
      done += static_cast<size_t>(n);
    }
  }
  if (::fsync(f.fd) != 0) return fail("flush failed");
  int closed = ::close(std::exchange(f.fd, -1));
  if (closed != 0) return fail("close failed");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename failed");
  return Status::Ok();
}

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(uint64_t size, check_regular_file(path));
  std::shared_ptr<MappedFile> m(new MappedFile());
  if (size > 0) {
    Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) return io_error("cannot read '{}': {}", path, errno_text(errno));
    void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (p != MAP_FAILED) {
      m->data_ = static_cast<const uint8_t*>(p);
      m->size_ = static_cast<size_t>(size);
      m->mapped_ = true;
      return std::shared_ptr<const MappedFile>(std::move(m));
    }
  }
  KILN_ASSIGN_OR_RETURN(m->copy_, read_file(path));
  m->data_ = reinterpret_cast<const uint8_t*>(m->copy_.data());
  m->size_ = m->copy_.size();
  return std::shared_ptr<const MappedFile>(std::move(m));
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace kiln
