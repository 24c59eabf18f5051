// A small persistent thread pool for the portable kernels' parallel loops (internal).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::portable {

class ThreadPool {
 public:
  /// `threads` includes the calling thread; 1 runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }
  /// Splits [0, n) into one contiguous chunk per thread and waits for all of them. An exception
  /// thrown by a chunk (std::bad_alloc) is rethrown here once every chunk has finished.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;  // the first chunk's exception, under mu_
};

}  // namespace kiln::portable
