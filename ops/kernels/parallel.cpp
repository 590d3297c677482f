#include <xgrad/ops/kernels/parallel.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <pthread.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <xgrad/ops/kernels/blas.hpp>

extern "C" int openblas_get_num_threads(void);
extern "C" void openblas_set_num_threads(int);

namespace xgrad {

namespace {

std::atomic<bool> flush_mode{false};  // set_flush_denormal's last setting, for the workers

// Puts the calling thread's floating-point mode in line with flush_mode (x86-64: MXCSR's FTZ,
// bit 15, and DAZ, bit 6).
void sync_flush_mode() {
#if defined(__x86_64__)
  constexpr unsigned bits = 0x8040;
  const unsigned csr = _mm_getcsr(), want = flush_mode.load(std::memory_order_relaxed) ? csr | bits : csr & ~bits;
  if (want != csr) _mm_setcsr(want);
#endif
}

}  // namespace

bool set_flush_denormal(bool on) {
#if defined(__x86_64__)
  flush_mode = on;
  sync_flush_mode();
  return true;
#else
  return !on;
#endif
}

bool flush_denormal() { return flush_mode; }

}  // namespace xgrad

namespace xgrad::detail {

namespace {

// Below this many elements a pass runs on the calling thread: waking a worker costs a few
// microseconds, the time of about as many elements of a vectorised pass.
constexpr std::size_t min_parallel_work = std::size_t(1) << 16;

// Workers 1 .. n-1 (the calling thread is worker 0), started on first use and grown on demand.
class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
    }
    m_wake.notify_all();
    for (auto& t : m_threads) t.join();
  }

  // Calls f(chunk, begin, end) for each chunk, chunk 0 on the calling thread.
  void run(std::size_t count, std::size_t chunks, const std::function<void(std::size_t, std::size_t, std::size_t)>& f) {
    std::unique_lock<std::mutex> lock(m_mutex);
    while (m_threads.size() + 1 < chunks) {
      const std::size_t id = m_threads.size() + 1;
      m_threads.emplace_back([this, id] {
        // The pool's threads never take SIGINT, SIGTERM or SIGHUP: the thread that runs the
        // program does (lib/files.cpp's writer holds them back while a temporary exists).
        sigset_t set;
        sigemptyset(&set);
        for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        work(id);
      });
    }
    m_job = &f;
    m_count = count;
    m_chunks = chunks;
    m_pending = chunks - 1;
    ++m_generation;
    lock.unlock();
    m_wake.notify_all();
    chunk(0);
    lock.lock();
    m_done.wait(lock, [this] { return m_pending == 0; });
    m_job = nullptr;
    // The first throw of any chunk, on the calling thread: none escapes a worker.
    if (std::exception_ptr thrown = std::exchange(m_thrown, nullptr)) std::rethrow_exception(thrown);
  }

 private:
  void chunk(std::size_t i) {
    if (i > 0) sync_flush_mode();  // a worker: set_flush_denormal's mode, as on the caller
    const std::size_t begin = m_count * i / m_chunks, end = m_count * (i + 1) / m_chunks;
    if (begin >= end) return;
    try {
      (*m_job)(i, begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_thrown_mutex);
      if (!m_thrown) m_thrown = std::current_exception();
    }
  }

  void work(std::size_t id) {
    std::size_t seen = 0;
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
      m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
      if (m_stop) return;
      seen = m_generation;
      if (id >= m_chunks) continue;  // a job with fewer chunks than workers
      lock.unlock();
      chunk(id);
      lock.lock();
      if (--m_pending == 0) m_done.notify_one();
    }
  }

  std::mutex m_mutex;
  std::condition_variable m_wake, m_done;
  std::vector<std::thread> m_threads;
  const std::function<void(std::size_t, std::size_t, std::size_t)>* m_job = nullptr;
  std::size_t m_count = 0, m_chunks = 1, m_pending = 0, m_generation = 0;
  bool m_stop = false;
  std::mutex m_thrown_mutex;
  std::exception_ptr m_thrown;  // the first exception a chunk threw in the current job
};

std::mutex pool_use;  // one job at a time: graphs replayed on several threads take turns

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

std::size_t parallel_threads() { return static_cast<std::size_t>(std::max(1, openblas_get_num_threads())); }

void parallel_for(std::size_t count, std::size_t cost, const std::function<void(std::size_t, std::size_t)>& f) {
  const std::size_t threads = std::min(parallel_threads(), count);
  if (threads <= 1 || count * cost < min_parallel_work) {
    if (count > 0) f(0, count);
    return;
  }
  std::lock_guard<std::mutex> lock(pool_use);
  pool().run(count, threads, [&f](std::size_t, std::size_t begin, std::size_t end) { f(begin, end); });
}

void parallel_blas_chunks(std::size_t count, std::size_t chunks,
                          const std::function<void(std::size_t, std::size_t, std::size_t)>& f) {
  chunks = std::min(chunks, count);
  if (chunks <= 1) {
    if (count > 0) f(0, 0, count);
    return;
  }
  std::lock_guard<std::mutex> lock(pool_use);
  // OpenBLAS at 1 thread until the chunks are done, also if starting a worker throws. This also
  // makes parallel_for inside f run on f's thread.
  struct OneBlasThread {
    int saved = openblas_get_num_threads();
    OneBlasThread() { openblas_set_num_threads(1); }
    ~OneBlasThread() { openblas_set_num_threads(saved); }
  } one;
  pool().run(count, chunks, f);
}

}  // namespace xgrad::detail
