// CompressionPolicy::kWhenDiskBound: a writer thread compresses only while
// the disk, not the CPU, bounds its save.
//
// Compressing trades CPU for bytes. It pays when the thread waits for the
// disk: there, each byte compression saves is disk time saved, and the CPU
// it costs would otherwise sit idle. It costs when the disk keeps up: the
// save then runs at the speed of the CPU, which compression slows.
//
// So a thread writes its staging files with write-behind that blocks when
// the disk falls behind (strict_bytes_per_sync: at most bytes_per_sync
// under writeback; with direct writes, the writes themselves wait), and a
// StallClock times those waits. Every window of payload, the thread's
// CompressionGovernor looks at how long the window took and how much of
// it was spent waiting, and picks the mode of the next one.

#ifndef ROCKSDCP_SRC_ROCKSDB_ADAPTIVE_COMPRESSION_H_
#define ROCKSDCP_SRC_ROCKSDB_ADAPTIVE_COMPRESSION_H_

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace rocksdcp {

// One window of a writer thread's save, as its governor sees it.
struct WindowSample {
  // Whether the window's pieces were offered to the codec.
  bool compressed = false;
  // From the window's first piece to its last.
  uint64_t wall_ns = 0;
  // Of which the thread waited for the disk.
  uint64_t stall_ns = 0;
  // The payload bytes written in the window, and what they were stored as.
  uint64_t payload_bytes = 0;
  uint64_t stored_bytes = 0;
  // A thread's first window: its time includes starting up (the first
  // file, fresh buffers), so it overstates what compressing costs.
  bool first = false;
};

// Picks, window by window, whether a writer thread compresses. Pure logic,
// fed measured windows, from which it keeps (averaged over recent
// windows) what the thread's own work costs per payload byte in each mode
// (the window's time less its waits), what share of the payload
// compressed pieces store, and, once a window waited for more than a
// tenth of its time, what the disk takes per stored byte (the window's
// time over its stored bytes; an uncompressed window that did not wait
// only bounds it).
// It then predicts a byte's time in each mode as the larger of the CPU's
// and the disk's, and compresses if that predicts at least a tenth less
// time. With no wait seen yet, the disk keeps up: it does not compress.
//
// The first window compresses (DiskBoundCompression makes it small), so
// a save too small to judge is stored compressed; the second does not, to
// time the other mode. As the first window overstates compression's cost
// (several times, measured), a thread whose uncompressed windows wait for
// half their time, twice in a row, compresses one window anyway, to time
// it; and one that has compressed for kRecheckEvery windows without
// waiting writes one uncompressed, in case the disk got faster.
class CompressionGovernor {
 public:
  // Over this share of a window spent waiting, the disk bounded it.
  static constexpr double kStallShare = 0.1;
  // Compressing must predict at most this share of the uncompressed time.
  static constexpr double kMargin = 0.9;
  // Two uncompressed windows in a row waiting for this share of their
  // time make a thread that has timed compression only in its first
  // window time it again.
  static constexpr double kRetimeShare = 0.5;
  // Compressed windows that did not wait before one without compression.
  static constexpr int kRecheckEvery = 16;

  bool compress() const { return compress_; }
  void EndWindow(const WindowSample& window);

 private:
  bool compress_ = true;
  // Nanoseconds of the thread's own work per payload byte in each mode;
  // < 0: not seen.
  double cpu_compressed_ = -1;
  double cpu_plain_ = -1;
  // Whether cpu_compressed_ comes from the first window alone.
  bool provisional_ = true;
  // Stored over payload bytes when compressing.
  double stored_share_ = -1;
  // Nanoseconds the disk takes per stored byte; < 0: it has kept up.
  double disk_ = -1;
  // Uncompressed windows in a row waiting over kRetimeShare of their time.
  int slow_plain_windows_ = 0;
  // Compressed windows since the last uncompressed one that did not wait.
  int unchecked_ = 0;
};

// A rocksdb::FileSystem over `target` that counts the time its writable
// files spend waiting for the disk: in RangeSync (which blocks under
// strict_bytes_per_sync while earlier writeback is in flight), Sync and
// Fsync, and, for a file opened for direct writes, in every write. Reads
// and everything else pass through untimed.
class StallClock : public rocksdb::FileSystemWrapper {
 public:
  explicit StallClock(const std::shared_ptr<rocksdb::FileSystem>& target);

  static const char* kClassName() { return "RocksdcpStallClock"; }
  const char* Name() const override { return kClassName(); }

  // Nanoseconds waited so far, by every file this opened.
  uint64_t stall_ns() const {
    return stall_ns_.load(std::memory_order_relaxed);
  }

  rocksdb::IOStatus NewWritableFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override;

 private:
  std::atomic<uint64_t> stall_ns_{0};
};

// One writer thread's kWhenDiskBound: a StallClock over the store's file
// system, for the thread's staging files, and a governor fed a window of
// payload at a time: window_bytes, the first an eighth of that.
class DiskBoundCompression {
 public:
  // `fs` outlives this.
  DiskBoundCompression(rocksdb::FileSystem* fs, uint64_t window_bytes);
  ~DiskBoundCompression();

  // What the thread's SstFileWriters write through.
  rocksdb::Env* env() const { return env_.get(); }
  // Whether the thread's next piece is offered to the codec.
  bool compress() const { return window_.compressed; }
  // After each piece: its payload bytes, and the bytes stored for it.
  void Wrote(uint64_t payload_bytes, uint64_t stored_bytes);

 private:
  void StartWindow();

  static constexpr uint64_t kFirstWindowShare = 8;

  const uint64_t window_bytes_;
  bool first_ = true;
  bool first_piece_ = true;
  std::shared_ptr<StallClock> clock_;
  std::unique_ptr<rocksdb::Env> env_;
  CompressionGovernor governor_;
  WindowSample window_;
  uint64_t window_start_ns_ = 0;
  uint64_t window_start_stall_ns_ = 0;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_ADAPTIVE_COMPRESSION_H_
