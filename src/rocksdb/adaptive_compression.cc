#include "rocksdb/adaptive_compression.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace rocksdcp {

namespace {

void Average(double* mean, double x) {
  *mean = *mean < 0 ? x : (*mean + x) / 2;
}

}  // namespace

void CompressionGovernor::EndWindow(const WindowSample& window) {
  if (window.payload_bytes == 0 || window.stored_bytes == 0 ||
      window.wall_ns == 0) {
    return;
  }
  const double wall = static_cast<double>(window.wall_ns);
  const double stall = std::min(static_cast<double>(window.stall_ns), wall);
  const double payload = static_cast<double>(window.payload_bytes);
  const double stored = static_cast<double>(window.stored_bytes);
  const double cpu = (wall - stall) / payload;
  if (window.compressed) {
    if (provisional_ && !window.first) {
      cpu_compressed_ = -1;  // The first window's figure goes.
      provisional_ = false;
    }
    Average(&cpu_compressed_, cpu);
    Average(&stored_share_, stored / payload);
  } else {
    Average(&cpu_plain_, cpu);
  }
  const bool disk_bound = stall > kStallShare * wall;
  const double disk_seen = wall / stored;
  if (disk_bound) {
    // The disk bounded the window. Averaged over more windows than the
    // rest, so that one stall of the file system does not swing it.
    disk_ = disk_ < 0 ? disk_seen : (3 * disk_ + disk_seen) / 4;
  } else if (!window.compressed && disk_ >= 0) {
    disk_ = std::min(disk_, disk_seen);  // It kept up: at least this fast.
  }
  // (A compressed window that did not wait says only that the disk keeps
  // up with compressed pieces: nothing of how it would do without.)
  slow_plain_windows_ = !window.compressed && stall > kRetimeShare * wall
                            ? slow_plain_windows_ + 1
                            : 0;

  if (cpu_plain_ < 0 || disk_ < 0) {
    // Time the other mode first; or the disk has kept up so far.
    compress_ = false;
    return;
  }
  const double plain = std::max(cpu_plain_, disk_);
  const double packed = std::max(cpu_compressed_, disk_ * stored_share_);
  compress_ = packed < kMargin * plain;
  if (!compress_ && provisional_ && slow_plain_windows_ >= 2) {
    compress_ = true;  // Time compression past the first window.
  } else if (compress_ && window.compressed && !disk_bound &&
             ++unchecked_ >= kRecheckEvery) {
    // Compressing while the disk keeps up, for a while: check that the
    // disk has not become faster than compression.
    unchecked_ = 0;
    compress_ = false;
  }
}

namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

class TimedWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  TimedWritableFile(std::unique_ptr<rocksdb::FSWritableFile> target,
                    bool direct, std::atomic<uint64_t>* stall_ns)
      : FSWritableFileOwnerWrapper(std::move(target)),
        direct_(direct),
        stall_ns_(stall_ns) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    return Timed(direct_, [&] { return target()->Append(data, options, dbg); });
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    return Timed(direct_,
                 [&] { return target()->Append(data, options, info, dbg); });
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data,
                                     uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    return Timed(direct_, [&] {
      return target()->PositionedAppend(data, offset, options, dbg);
    });
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data,
                                     uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     const rocksdb::DataVerificationInfo& info,
                                     rocksdb::IODebugContext* dbg) override {
    return Timed(direct_, [&] {
      return target()->PositionedAppend(data, offset, options, info, dbg);
    });
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    return Timed(true, [&] {
      return target()->RangeSync(offset, nbytes, options, dbg);
    });
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    return Timed(true, [&] { return target()->Sync(options, dbg); });
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    return Timed(true, [&] { return target()->Fsync(options, dbg); });
  }

 private:
  template <typename Op>
  rocksdb::IOStatus Timed(bool waits, Op&& op) {
    if (!waits) return op();
    const uint64_t start = NowNs();
    rocksdb::IOStatus s = op();
    stall_ns_->fetch_add(NowNs() - start, std::memory_order_relaxed);
    return s;
  }

  const bool direct_;
  std::atomic<uint64_t>* const stall_ns_;
};

}  // namespace

StallClock::StallClock(const std::shared_ptr<rocksdb::FileSystem>& target)
    : FileSystemWrapper(target) {}

rocksdb::IOStatus StallClock::NewWritableFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s = target()->NewWritableFile(f, o, &file, dbg);
  if (!s.ok()) return s;
  *r = std::make_unique<TimedWritableFile>(std::move(file), o.use_direct_writes,
                                           &stall_ns_);
  return s;
}

DiskBoundCompression::DiskBoundCompression(rocksdb::FileSystem* fs,
                                           uint64_t window_bytes)
    : window_bytes_(window_bytes),
      clock_(std::make_shared<StallClock>(
          std::shared_ptr<rocksdb::FileSystem>(fs, [](auto*) {}))),
      env_(rocksdb::NewCompositeEnv(clock_)) {
  StartWindow();
}

DiskBoundCompression::~DiskBoundCompression() = default;

void DiskBoundCompression::StartWindow() {
  window_ = WindowSample{governor_.compress(), 0, 0, 0, 0, first_};
  window_start_ns_ = NowNs();
  window_start_stall_ns_ = clock_->stall_ns();
}

void DiskBoundCompression::Wrote(uint64_t payload_bytes,
                                 uint64_t stored_bytes) {
  if (first_piece_) {
    // The thread's first piece pays for starting up: its file, and its
    // buffers' first touch (zstd's context among them), which would make
    // compression look several times dearer than it is. Untimed.
    first_piece_ = false;
    window_start_ns_ = NowNs();
    window_start_stall_ns_ = clock_->stall_ns();
    return;
  }
  window_.payload_bytes += payload_bytes;
  window_.stored_bytes += stored_bytes;
  // The first window is an eighth of the others: compressing it costs a
  // fast disk's save little, and a small save is compressed whole.
  const uint64_t size =
      first_ ? window_bytes_ / kFirstWindowShare : window_bytes_;
  if (window_.payload_bytes < size) return;
  first_ = false;
  window_.wall_ns = NowNs() - window_start_ns_;
  window_.stall_ns = clock_->stall_ns() - window_start_stall_ns_;
  governor_.EndWindow(window_);
  StartWindow();
}

}  // namespace rocksdcp
