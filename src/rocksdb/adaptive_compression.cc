#include "rocksdb/adaptive_compression.h"

#include <chrono>
#include <utility>

namespace rocksdcp {

void CompressionGovernor::EndWindow(const WindowSample& window) {
  if (window.payload_bytes == 0 || window.wall_ns == 0) return;
  const double ns = static_cast<double>(window.wall_ns) /
                    static_cast<double>(window.payload_bytes);
  double& mean = window.compressed ? compressed_ns_ : plain_ns_;
  if (!window.first) mean = mean < 0 ? ns : (mean + ns) / 2;
  const bool disk_bound = static_cast<double>(window.stall_ns) >
                          kStallShare * static_cast<double>(window.wall_ns);
  if (window.compressed == disk_bound) {
    // Compressing while the disk still bounds the save, or writing as it
    // is while the disk keeps up: the right mode either way.
    kept_ = 0;
    compress_ = window.compressed;
    return;
  }
  // Otherwise, the other mode if it is untried, was faster, or is due for
  // another try.
  const double other = window.compressed ? plain_ns_ : compressed_ns_;
  if (other < 0 || mean < 0 || other < mean || ++kept_ >= kRetryEvery) {
    kept_ = 0;
    compress_ = !window.compressed;
  } else {
    compress_ = window.compressed;
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
  window_ = WindowSample{governor_.compress(), 0, 0, 0, first_};
  window_start_ns_ = NowNs();
  window_start_stall_ns_ = clock_->stall_ns();
}

void DiskBoundCompression::Wrote(uint64_t payload_bytes) {
  window_.payload_bytes += payload_bytes;
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
