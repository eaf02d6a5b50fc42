// CompressionPolicy::kWhenDiskBound (issue #17): the governor's choices,
// window by window, for disks of each kind; and whole saves through a file
// system whose write-behind waits as a slow disk's does, or never waits,
// stored compressed or not accordingly, and loading bit-exact either way.

#include "rocksdb/adaptive_compression.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rocksdb/store_fixture.h"
#include "rocksdb/store_impl.h"
#include "weights.h"

namespace rocksdcp::testing {
namespace {

// ---- CompressionGovernor ----

// A window of 1 MiB taking `ns_per_byte`, a share `stall` of it waiting;
// compressed, it stores 0.7 of its bytes.
WindowSample Window(bool compressed, double ns_per_byte, double stall) {
  WindowSample w;
  w.compressed = compressed;
  w.payload_bytes = 1 << 20;
  w.stored_bytes = compressed ? w.payload_bytes * 7 / 10 : w.payload_bytes;
  w.wall_ns = static_cast<uint64_t>(ns_per_byte * w.payload_bytes);
  w.stall_ns = static_cast<uint64_t>(stall * static_cast<double>(w.wall_ns));
  return w;
}

// Runs `n` windows, each as `disk` says a window in the governor's mode
// goes (the first marked first), and returns the modes, in order.
template <typename Disk>
std::vector<bool> RunWindows(CompressionGovernor& g, int n, Disk disk) {
  std::vector<bool> modes;
  for (int i = 0; i < n; ++i) {
    modes.push_back(g.compress());
    WindowSample w = disk(g.compress(), i);
    w.first = i == 0;
    g.EndWindow(w);
  }
  return modes;
}

int Compressed(const std::vector<bool>& modes) {
  int n = 0;
  for (bool m : modes) n += m;
  return n;
}

TEST(CompressionGovernorTest, OnADiskThatKeepsUpItStopsCompressingAtOnce) {
  CompressionGovernor g;
  // Compressing takes 3 ns a byte, writing as it is 1; neither waits.
  const std::vector<bool> modes = RunWindows(g, 40, [](bool compressed, int) {
    return Window(compressed, compressed ? 3 : 1, 0);
  });
  EXPECT_TRUE(modes[0]);  // The first window compresses.
  EXPECT_EQ(Compressed(modes), 1);
}

TEST(CompressionGovernorTest, OnASlowDiskItCompressesThroughout) {
  CompressionGovernor g;
  // 50 MB/s (20 ns a stored byte); compressing costs 3 ns a byte of CPU.
  const std::vector<bool> modes = RunWindows(g, 40, [](bool compressed, int) {
    return compressed ? Window(true, 14, 1 - 3.0 / 14)
                      : Window(false, 20, 0.95);
  });
  // But for the second window, which times the other mode.
  EXPECT_FALSE(modes[1]);
  EXPECT_EQ(Compressed(modes), 39);
}

TEST(CompressionGovernorTest, BetweenTheTwoItCompressesWhereThatIsFaster) {
  CompressionGovernor g;
  // Uncompressed, the disk falls behind (2 ns a byte, waiting half of
  // it); compressed, it keeps up, at 1.5 ns a byte of CPU.
  const std::vector<bool> modes = RunWindows(g, 40, [](bool compressed, int) {
    return compressed ? Window(true, 1.5, 0) : Window(false, 2, 0.5);
  });
  // But for the second window, and one in every kRecheckEvery + 1 after
  // (in case the disk got faster).
  EXPECT_FALSE(modes[1]);
  EXPECT_FALSE(modes[2 + CompressionGovernor::kRecheckEvery]);
  EXPECT_EQ(Compressed(modes), 37);
}

TEST(CompressionGovernorTest, WhenCompressingIsSlowerThanWaitingItWaits) {
  CompressionGovernor g;
  // Uncompressed windows wait (2 ns a byte, a fifth of it waiting), but
  // compressing costs 4 ns a byte: slower still. No window tries it again.
  const std::vector<bool> modes = RunWindows(g, 40, [](bool compressed, int) {
    return compressed ? Window(true, 4, 0) : Window(false, 2, 0.2);
  });
  EXPECT_EQ(Compressed(modes), 1);
}

TEST(CompressionGovernorTest, ADiskThatSlowsDownGetsCompressedPieces) {
  CompressionGovernor g;
  // 1 ns a byte, not waiting, for 10 windows; then the disk takes 20 ns a
  // byte. Compressing costs 3 ns a byte.
  const std::vector<bool> modes = RunWindows(g, 30, [](bool compressed, int i) {
    if (i < 10) return Window(compressed, compressed ? 3 : 1, 0);
    return compressed ? Window(true, 14, 1 - 3.0 / 14)
                      : Window(false, 20, 0.95);
  });
  EXPECT_EQ(Compressed(std::vector<bool>(modes.begin(), modes.begin() + 11)),
            1);
  EXPECT_EQ(Compressed(std::vector<bool>(modes.begin() + 11, modes.end())), 19);
}

TEST(CompressionGovernorTest, ItStopsWhereCompressingSavesNothing) {
  CompressionGovernor g;
  // A slow disk, and then pieces that do not compress (stored whole).
  const std::vector<bool> modes = RunWindows(g, 30, [](bool compressed, int i) {
    WindowSample w =
        compressed ? Window(true, 14, 1 - 3.0 / 14) : Window(false, 20, 0.95);
    if (i >= 10 && compressed) {
      w = Window(true, 23, 1 - 3.0 / 23);
      w.stored_bytes = w.payload_bytes;
    }
    return w;
  });
  EXPECT_TRUE(modes[9]);
  EXPECT_LE(Compressed(std::vector<bool>(modes.begin() + 10, modes.end())), 2);
}

TEST(CompressionGovernorTest, TheFirstWindowsTimeIsRetaken) {
  CompressionGovernor g;
  // The first window, slow with starting up (100 ns a byte), does not
  // wait; compressing really costs 16.
  g.EndWindow([] {
    WindowSample w = Window(true, 100, 0);
    w.first = true;
    return w;
  }());
  EXPECT_FALSE(g.compress());
  // Uncompressed windows wait for 60% of their time, 50 ns a byte: by
  // the first window's figure compressing would lose; after two such
  // windows (not one: a file system's stall), it is timed again.
  g.EndWindow(Window(false, 50, 0.6));
  EXPECT_FALSE(g.compress());
  g.EndWindow(Window(false, 50, 0.6));
  EXPECT_TRUE(g.compress());
  g.EndWindow(Window(true, 40, 0.6));
  EXPECT_TRUE(g.compress());
}

TEST(CompressionGovernorTest, AWindowWithoutBytesChangesNothing) {
  CompressionGovernor g;
  g.EndWindow(WindowSample{true, 1000, 0, 0, 0});
  EXPECT_TRUE(g.compress());
  WindowSample untimed = Window(true, 1, 0);
  untimed.wall_ns = 0;
  g.EndWindow(untimed);
  EXPECT_TRUE(g.compress());
}

// ---- Whole saves ----

// A file system whose write-behind (RangeSync) waits as a disk of
// `bytes_per_second` would, or, with 0, returns at once: a disk that never
// falls behind. Everything else is the local disk's.
class PacedDisk : public rocksdb::FileSystemWrapper {
 public:
  explicit PacedDisk(uint64_t bytes_per_second)
      : FileSystemWrapper(rocksdb::FileSystem::Default()),
        bytes_per_second_(bytes_per_second) {}
  const char* Name() const override { return "PacedDisk"; }

  rocksdb::IOStatus NewWritableFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = target()->NewWritableFile(f, o, &file, dbg);
    if (s.ok()) *r = std::make_unique<File>(std::move(file), bytes_per_second_);
    return s;
  }

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> f, uint64_t rate)
        : FSWritableFileOwnerWrapper(std::move(f)), rate_(rate) {}
    rocksdb::IOStatus RangeSync(uint64_t /*offset*/, uint64_t nbytes,
                                const rocksdb::IOOptions& /*options*/,
                                rocksdb::IODebugContext* /*dbg*/) override {
      if (rate_ > 0) {
        // The disk's pace, not a wait for another thread.
        std::this_thread::sleep_for(
            std::chrono::microseconds(nbytes * 1000000 / rate_));
      }
      return rocksdb::IOStatus::OK();
    }

   private:
    const uint64_t rate_;
  };

  const uint64_t bytes_per_second_;
};

class AdaptiveSaveTest : public StoreTest {
 protected:
  // `rows` rows of 1024 bf16 weights (24 MiB by default), saved with
  // `policy` by one thread in windows of 1 MiB (the first 128 KiB) through
  // a disk of `bytes_per_second` (0: one that keeps up),
  // then loaded and verified. Returns what the checkpoint stores, over its
  // payload.
  double SaveThroughDiskOf(uint64_t bytes_per_second, CompressionPolicy policy,
                           int64_t rows = 12288) {
    store_.reset();
    auto store = StoreImpl::Open(store_path(), StoreOptions(),
                                 std::make_shared<PacedDisk>(bytes_per_second));
    EXPECT_OK(store);
    if (!store.ok()) return 0;
    store_ = std::move(store).value();

    OwnedTensor w = ZeroTensor(DType::kBFloat16, {rows, 1024});
    FillWeights(WeightKind::kWeight, DType::kBFloat16, 7, w.bytes.data(),
                w.view.numel());
    RocksDBWriterOptions o;
    o.compression = Compression::kBytePlaneZstd;
    o.compression_policy = policy;
    o.write_threads = 1;
    // Windows of 1 MiB, with write-behind every 256 KiB (the write buffer
    // must be no larger, as the file syncs only when the buffer goes out).
    o.bytes_per_sync = 256 << 10;
    o.writable_file_max_buffer_size = 64 << 10;
    EXPECT_OK(SaveDict({{"w", w.view}}, "c", o));

    OwnedTensor back = ZeroTensor(DType::kBFloat16, {rows, 1024});
    StateDict sd{{"w", back.view}};
    EXPECT_OK(LoadDict(&sd, "c"));
    EXPECT_TRUE(SameTensor(back.view, w.view));
    ExpectVerifies();
    auto info = store_->Info("c");
    EXPECT_OK(info);
    if (!info.ok()) return 0;
    return static_cast<double>(info->stored_bytes) /
           static_cast<double>(w.bytes.size());
  }
};

TEST_F(AdaptiveSaveTest, ItIsTheDefault) {
  EXPECT_EQ(RocksDBWriterOptions().compression_policy,
            CompressionPolicy::kWhenDiskBound);
}

TEST_F(AdaptiveSaveTest, ADiskSlowerThanCompressionGetsCompressedPieces) {
  // 20 MB/s: each 256 KiB of write-behind waits 13 ms, several times
  // what compressing it takes. The file's first MiB is never synced (nor
  // waited for), so up to two uncompressed windows pass before the thread
  // compresses.
  const double stored =
      SaveThroughDiskOf(20'000'000, CompressionPolicy::kWhenDiskBound);
  EXPECT_LT(stored, 0.75);  // bf16 weights compress to about 0.68.
}

TEST_F(AdaptiveSaveTest, ADiskThatKeepsUpGetsPiecesAsTheyAre) {
  // Only the first window (128 KiB of 24 MiB) is compressed.
  EXPECT_GT(SaveThroughDiskOf(0, CompressionPolicy::kWhenDiskBound), 0.95);
}

TEST_F(AdaptiveSaveTest, ASaveWithinTheFirstWindowIsCompressedWhole) {
  // 128 KiB: the first window's size. (The SST file's own tables add a
  // few KiB to the 0.68 of the piece.)
  EXPECT_LT(SaveThroughDiskOf(0, CompressionPolicy::kWhenDiskBound, 64), 0.8);
}

TEST_F(AdaptiveSaveTest, AlwaysCompressesWhateverTheDisk) {
  EXPECT_LT(SaveThroughDiskOf(0, CompressionPolicy::kAlways), 0.75);
}

TEST_F(AdaptiveSaveTest, AnUnknownPolicyIsRefused) {
  RocksDBWriterOptions o;
  o.compression = Compression::kBytePlaneZstd;
  o.compression_policy = static_cast<CompressionPolicy>(7);
  EXPECT_THAT(store_->NewWriter(o).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("unknown compression_policy 7")));
}

}  // namespace
}  // namespace rocksdcp::testing
