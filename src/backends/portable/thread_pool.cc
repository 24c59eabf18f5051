#include "thread_pool.h"

#include <algorithm>
#include <utility>

namespace kiln::portable {

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// Runs one chunk; an exception is kept in `*error` (the first one wins) instead of escaping a
// worker thread, which would terminate the process.
void run_chunk(const std::function<void(int64_t, int64_t)>& fn, int64_t n, int index, int parts,
               std::mutex& mu, std::exception_ptr* error) {
  int64_t begin = n * index / parts, end = n * (index + 1) / parts;
  if (begin >= end) return;
  try {
    fn(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu);
    if (!*error) *error = std::current_exception();
  }
}
}  // namespace

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (threads_ == 1 || n == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    n_ = n;
    pending_ = threads_ - 1;
    ++generation_;
  }
  wake_.notify_all();
  run_chunk(fn, n, 0, threads_, mu_, &error_);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = n_;
    }
    run_chunk(*job, n, index, threads_, mu_, &error_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace kiln::portable
