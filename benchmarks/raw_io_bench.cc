// The best raw I/O this machine does with a workload's bytes: what a save
// and a cold load are held against (ratios.py takes the fastest row of
// each kind in the run). BM_RawFileWriteFsync and BM_RawFileRead
// (baselines_bench.cc) are two of them; these are the rest.
//
//   BM_RawWriteSyncRange/wl:N        buffered write, 8 MiB at a time, each
//                                    block's writeback started as soon as it
//                                    is written (sync_file_range WRITE,
//                                    RocksDB's bytes_per_sync), then fsync
//   BM_RawWriteDirect/wl:N/writers:K O_DIRECT: K threads each gather 8 MiB
//                                    blocks of the payload into an aligned
//                                    buffer and pwrite them, then fsync
//   BM_DdWrite/wl:N                  `dd if=<payload file> of=<new file>
//                                    oflag=direct conv=fsync bs=8M`, a
//                                    subprocess (its input file warm)
//   BM_RawReadDirect/wl:N/qd:Q       O_DIRECT: Q threads, one 8 MiB pread
//                                    each in flight, scatter each block into
//                                    the destination: a cold read at queue
//                                    depth Q
//   BM_DdRead/wl:N                   `dd if=<payload file> iflag=direct
//                                    bs=8M of=/dev/null`, a subprocess
//
// Every write case writes a new file per iteration; the reads read one file
// written before the loop. Conventions: README.md.

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "workloads.h"

extern char** environ;

namespace rocksdcp::bench {
namespace {

constexpr size_t kBlock = 8u << 20;
constexpr size_t kAlign = 4096;

// The payload as one byte stream over its iovecs: copies any range of it
// out of them (Gather) or into them (Scatter).
class Stream {
 public:
  explicit Stream(std::vector<iovec> iov) : iov_(std::move(iov)) {
    starts_.reserve(iov_.size());
    for (const iovec& v : iov_) {
      starts_.push_back(total_);
      total_ += v.iov_len;
    }
  }
  uint64_t size() const { return total_; }

  void Gather(uint64_t offset, size_t n, uint8_t* out) const {
    Walk(offset, n, [&](uint8_t* p, size_t len) {
      std::memcpy(out, p, len);
      out += len;
    });
  }
  void Scatter(uint64_t offset, size_t n, const uint8_t* in) const {
    Walk(offset, n, [&](uint8_t* p, size_t len) {
      std::memcpy(p, in, len);
      in += len;
    });
  }

 private:
  template <typename Fn>
  void Walk(uint64_t offset, size_t n, Fn fn) const {
    size_t i = static_cast<size_t>(
        std::upper_bound(starts_.begin(), starts_.end(), offset) -
        starts_.begin() - 1);
    while (n > 0 && i < iov_.size()) {
      const uint64_t in = offset - starts_[i];
      const size_t len =
          static_cast<size_t>(std::min<uint64_t>(n, iov_[i].iov_len - in));
      fn(static_cast<uint8_t*>(iov_[i].iov_base) + in, len);
      offset += len;
      n -= len;
      ++i;
    }
  }

  std::vector<iovec> iov_;
  std::vector<uint64_t> starts_;
  uint64_t total_ = 0;
};

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, AlignedFree>;

AlignedBuffer NewBlockBuffer() {
  void* p = nullptr;
  // Nothing to measure without it: fail loudly rather than write through
  // a null buffer.
  if (::posix_memalign(&p, kAlign, kBlock) != 0) throw std::bad_alloc();
  std::memset(p, 0, kBlock);  // Touched here, not in the timing loop.
  return AlignedBuffer(static_cast<uint8_t*>(p));
}

// Runs `fn(thread)` on `threads` threads and returns the first error.
Status OnThreads(int threads, const std::function<Status(int)>& fn) {
  std::vector<Status> statuses(threads);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] { statuses[t] = fn(t); });
  }
  statuses[0] = fn(0);
  for (std::thread& t : pool) t.join();
  for (Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return Status::OK();
}

// One aligned buffer per thread, made before the timing loop.
std::vector<AlignedBuffer> Buffers(int n) {
  std::vector<AlignedBuffer> buffers;
  for (int i = 0; i < n; ++i) buffers.push_back(NewBlockBuffer());
  return buffers;
}

Status WriteSyncRange(const std::string& path, const Stream& stream,
                      uint8_t* buffer) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Errno("open", path);
  Status s;
  for (uint64_t off = 0; off < stream.size() && s.ok(); off += kBlock) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(kBlock, stream.size() - off));
    stream.Gather(off, n, buffer);
    size_t done = 0;
    while (done < n && s.ok()) {
      const ssize_t w = ::write(fd, buffer + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) s = Errno("write", path);
      if (w > 0) done += static_cast<size_t>(w);
    }
    if (s.ok() &&
        ::sync_file_range(fd, static_cast<off_t>(off), static_cast<off_t>(n),
                          SYNC_FILE_RANGE_WRITE) != 0) {
      s = Errno("sync_file_range", path);
    }
  }
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync", path);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", path);
  return s;
}

// Runs `fn(buffer, offset, n)` for every 8 MiB block of the stream, the
// blocks taken in order by one thread per buffer; the first error.
Status ForEachBlock(
    const Stream& stream, std::vector<AlignedBuffer>& buffers,
    const std::function<Status(uint8_t*, uint64_t, size_t)>& fn) {
  const uint64_t blocks = (stream.size() + kBlock - 1) / kBlock;
  std::atomic<uint64_t> next{0};
  return OnThreads(static_cast<int>(buffers.size()), [&](int t) {
    for (uint64_t b; (b = next.fetch_add(1)) < blocks;) {
      const uint64_t off = b * kBlock;
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(kBlock, stream.size() - off));
      ROCKSDCP_RETURN_IF_ERROR(fn(buffers[t].get(), off, n));
    }
    return Status::OK();
  });
}

Status WriteDirect(const std::string& path, const Stream& stream,
                   std::vector<AlignedBuffer>& buffers) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0) return Errno("open O_DIRECT", path);
  Status s = ForEachBlock(
      stream, buffers, [&](uint8_t* buffer, uint64_t off, size_t n) {
        stream.Gather(off, n, buffer);
        // The tail is written padded to the alignment and cut off below.
        const size_t padded = (n + kAlign - 1) / kAlign * kAlign;
        std::memset(buffer + n, 0, padded - n);
        size_t done = 0;
        while (done < padded) {
          const ssize_t w = ::pwrite(fd, buffer + done, padded - done,
                                     static_cast<off_t>(off + done));
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) return Errno("pwrite O_DIRECT", path);
          done += static_cast<size_t>(w);
        }
        return Status::OK();
      });
  if (s.ok() && ::ftruncate(fd, static_cast<off_t>(stream.size())) != 0) {
    s = Errno("ftruncate", path);
  }
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync", path);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", path);
  return s;
}

Status ReadDirect(const std::string& path, const Stream& stream,
                  std::vector<AlignedBuffer>& buffers) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) return Errno("open O_DIRECT", path);
  Status s = ForEachBlock(
      stream, buffers, [&](uint8_t* buffer, uint64_t off, size_t n) {
        const size_t padded = (n + kAlign - 1) / kAlign * kAlign;
        size_t done = 0;
        while (done < n) {
          const ssize_t r = ::pread(fd, buffer + done, padded - done,
                                    static_cast<off_t>(off + done));
          if (r < 0 && errno == EINTR) continue;
          if (r < 0) return Errno("pread O_DIRECT", path);
          if (r == 0) return Status::IOError("short read of " + path);
          done += static_cast<size_t>(r);
        }
        stream.Scatter(off, n, buffer);
        return Status::OK();
      });
  ::close(fd);
  return s;
}

// Runs `argv` and waits for it; an error unless it exits with 0.
Status RunCommand(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int err =
      ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (err != 0) {
    return Status::IOError("cannot run " + args[0] + ": " + std::strerror(err));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Errno("waitpid", args[0]);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::IOError(args[0] + " " + args[1] + " ... failed (status " +
                           std::to_string(status) + ")");
  }
  return Status::OK();
}

// The loop of every cold read case: the payload written to a file first,
// then `read(path)` of it each iteration, after dropping it from the page
// cache (O_DIRECT bypasses it; the drop costs nothing then).
void TimeColdReads(benchmark::State& state, WorkloadData& data,
                   const char* name,
                   const std::function<Status(const std::string&)>& read) {
  const std::string dir = FreshDir(name);
  const std::string path = dir + "/file";
  const Status written = WriteFileFsync(path, data.source.Payload());
  const RssMeter rss;
  TimeEach(state, written, [&](int) {
    Status s = DropPageCache(path);
    if (s.ok()) s = read(path);
    benchmark::ClobberMemory();
    return s;
  }).IgnoreError();
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id, /*cold=*/1);
  RemoveDir(dir);
}

// Args: wl.
void BM_RawWriteSyncRange(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const Stream stream(data.source.Payload());
  AlignedBuffer buffer = NewBlockBuffer();
  TimeWrites(state, data, "raw-sync-range", Status::OK(),
             [&](const std::string& path) {
               return WriteSyncRange(path, stream, buffer.get());
             });
}

// Args: wl, writers.
void BM_RawWriteDirect(benchmark::State& state, const Config& config) {
  RawWriteDirect(state, GetWorkload(static_cast<int>(state.range(0)), config),
                 static_cast<int>(state.range(1)));
}

// Args: wl.
void BM_DdWrite(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const std::string src_dir = FreshDir("dd-src");
  const std::string src = src_dir + "/payload";
  // dd's input, written once and read warm (read once more to be sure).
  Status setup = WriteFileFsync(src, data.source.Payload());
  if (setup.ok()) setup = ReadFile(src, data.dest->Payload());
  TimeWrites(state, data, "dd-write", setup, [&](const std::string& path) {
    return RunCommand({"dd", "if=" + src, "of=" + path, "oflag=direct",
                       "conv=fsync", "bs=8M", "status=none"});
  });
  RemoveDir(src_dir);
}

// Args: wl, qd.
void BM_RawReadDirect(benchmark::State& state, const Config& config) {
  RawReadDirect(state, GetWorkload(static_cast<int>(state.range(0)), config),
                static_cast<int>(state.range(1)));
}

// Args: wl.
void BM_DdRead(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  TimeColdReads(state, data, "dd-read", [](const std::string& path) {
    return RunCommand({"dd", "if=" + path, "of=/dev/null", "iflag=direct",
                       "bs=8M", "status=none"});
  });
}

}  // namespace

void TimeWrites(benchmark::State& state, WorkloadData& data, const char* name,
                Status setup,
                const std::function<Status(const std::string&)>& write) {
  const std::string dir = FreshDir(name);
  const RssMeter rss;
  TimeEach(state, std::move(setup), [&](int n) {
    return write(dir + "/file-" + std::to_string(n));
  }).IgnoreError();
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id);
  RemoveDir(dir);
}

void RawWriteDirect(benchmark::State& state, WorkloadData& data, int writers) {
  const Stream stream(data.source.Payload());
  std::vector<AlignedBuffer> buffers = Buffers(writers);
  TimeWrites(state, data, "raw-direct", Status::OK(),
             [&](const std::string& path) {
               return WriteDirect(path, stream, buffers);
             });
}

void RawReadDirect(benchmark::State& state, WorkloadData& data,
                   int queue_depth) {
  const Stream stream(data.destination().Payload());
  std::vector<AlignedBuffer> buffers = Buffers(queue_depth);
  TimeColdReads(state, data, "raw-read-direct", [&](const std::string& path) {
    return ReadDirect(path, stream, buffers);
  });
}

std::function<Status(const std::string&)> DirectReadInto(std::vector<iovec> iov,
                                                         int queue_depth) {
  auto stream = std::make_shared<const Stream>(std::move(iov));
  auto buffers =
      std::make_shared<std::vector<AlignedBuffer>>(Buffers(queue_depth));
  return [stream, buffers](const std::string& path) {
    return ReadDirect(path, *stream, *buffers);
  };
}

void RegisterRawIoBenchmarks(const Config& c, int wl) {
  const int it = c.iterations;
  SetCommon(Register("BM_RawWriteSyncRange", BM_RawWriteSyncRange, c)
                ->ArgNames({"wl"})
                ->Arg(wl),
            it);
  SetCommon(Register("BM_RawWriteDirect", BM_RawWriteDirect, c)
                ->ArgNames({"wl", "writers"})
                ->ArgsProduct({{wl}, {1, 2, 4}}),
            it);
  SetCommon(Register("BM_DdWrite", BM_DdWrite, c)->ArgNames({"wl"})->Arg(wl),
            it);
  SetCommon(Register("BM_RawReadDirect", BM_RawReadDirect, c)
                ->ArgNames({"wl", "qd"})
                ->ArgsProduct({{wl}, {1, 2, 4, 8}}),
            it);
  SetCommon(Register("BM_DdRead", BM_DdRead, c)->ArgNames({"wl"})->Arg(wl), it);
}

}  // namespace rocksdcp::bench
