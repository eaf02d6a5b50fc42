// The reader's parallel read path: several read threads load exactly what
// one does, whole and resharded; corruption is still caught before any
// byte of a bad piece lands; errors and progress keep their sequential
// meaning; and read buffers are recycled through the store's pool.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "keys/keys.h"
#include "rocksdb/store_fixture.h"
#include "rocksdb/store_impl.h"
#include "util/page_cache.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class ReaderTest : public StoreTest {
 protected:
  // Loads checkpoint `id` into `sd` through a reader made with `options`,
  // which it returns so the test can look at its stats.
  Result<std::unique_ptr<RocksDBStorageReader>> LoadWith(
      StateDict* sd, const std::string& id, const RocksDBReaderOptions& options,
      LoadPlanner* planner = nullptr) {
    ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store_->NewReader(options));
    LoadOptions lo;
    lo.checkpoint_id = id;
    lo.planner = planner;
    ROCKSDCP_RETURN_IF_ERROR(Load(sd, *reader, lo));
    return reader;
  }

  static RocksDBReaderOptions Threads(int n) {
    RocksDBReaderOptions o;
    o.read_threads = n;
    return o;
  }

  // Threads(n), every piece read through RocksDB's blocks (not in place).
  static RocksDBReaderOptions ThroughBlocks(int n) {
    RocksDBReaderOptions o = Threads(n);
    o.read_in_place = false;
    return o;
  }

  BlockBufferPool& pool() {
    return *dynamic_cast<StoreImpl&>(*store_).block_buffer_pool();
  }
};

// A state dict with something of every shape the read path treats apart:
// a tensor of many pieces (split into one task per piece), runs of small
// tensors and byte items (fetched in batches), a byte item of several
// pieces, a 0-d and an empty tensor.
struct MixedState {
  std::vector<OwnedTensor> tensors;
  StateDict dict;
};

MixedState MixedStateDict(uint64_t seed, bool zero) {
  MixedState s;
  auto add = [&](const std::string& fqn, DType dtype,
                 std::vector<int64_t> sizes) {
    s.tensors.push_back(zero ? ZeroTensor(dtype, std::move(sizes))
                             : RandomTensor(dtype, std::move(sizes), ++seed));
    s.dict[fqn] = s.tensors.back().view;
  };
  s.tensors.reserve(64);
  add("big", DType::kFloat32, {96, 257});  // 98688 bytes: 25 pieces.
  for (int i = 0; i < 40; ++i) {
    add("small." + std::to_string(i), DType::kInt16, {3, 7 + i});
    s.dict["bytes." + std::to_string(i)] =
        zero ? std::string() : RandomBytes(1 + 13 * i, ++seed);
  }
  add("scalar", DType::kFloat64, {});
  add("empty", DType::kInt8, {0, 5});
  s.dict["long.bytes"] = zero ? std::string() : RandomBytes(20000, ++seed);
  return s;
}

::testing::AssertionResult SameState(const StateDict& a, const StateDict& b) {
  for (const auto& [fqn, value] : b) {
    auto it = a.find(fqn);
    if (it == a.end()) return ::testing::AssertionFailure() << "no " << fqn;
    if (const auto* t = std::get_if<TensorView>(&value)) {
      auto r = SameTensor(std::get<TensorView>(it->second), *t);
      if (!r) return r << " (" << fqn << ")";
    } else if (std::get<std::string>(it->second) !=
               std::get<std::string>(value)) {
      return ::testing::AssertionFailure() << "bytes differ: " << fqn;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(ReaderTest, ParallelReadsLoadWhatOneThreadLoads) {
  MixedState saved = MixedStateDict(1, false);
  ASSERT_OK(SaveDict(saved.dict, "m", {.max_piece_bytes = 4096}));
  for (int threads : {1, 2, 4}) {
    MixedState into = MixedStateDict(0, true);
    ASSERT_OK_AND_ASSIGN(auto reader,
                         LoadWith(&into.dict, "m", Threads(threads)));
    EXPECT_TRUE(SameState(into.dict, saved.dict)) << threads << " threads";
    EXPECT_EQ(reader->stats().read_threads, static_cast<uint32_t>(threads));
  }
}

TEST_F(ReaderTest, ParallelReshardedReadsFetchOnlyOverlappingPieces) {
  OwnedTensor whole = RandomTensor(DType::kInt32, {40, 24}, 7);
  // Saved as three uneven row shards, in pieces of 40 bytes (10 elements),
  // so that rows straddle pieces.
  ShardedTensor rows;
  rows.dtype = DType::kInt32;
  rows.global_size = {40, 24};
  rows.local_shards.push_back({{0, 0}, whole.view.Narrow({0, 0}, {17, 24})});
  rows.local_shards.push_back({{17, 0}, whole.view.Narrow({17, 0}, {9, 24})});
  rows.local_shards.push_back({{26, 0}, whole.view.Narrow({26, 0}, {14, 24})});
  ASSERT_OK(SaveDict({{"m", rows}}, "rows", {.max_piece_bytes = 40}));

  // Loaded as two column blocks and a row block of a third tensor: boxes
  // that cut across the saved chunks and skip most of their pieces.
  OwnedTensor left = ZeroTensor(DType::kInt32, {40, 5});
  OwnedTensor right = ZeroTensor(DType::kInt32, {30, 7});
  ShardedTensor cols;
  cols.dtype = DType::kInt32;
  cols.global_size = {40, 24};
  cols.local_shards.push_back({{0, 2}, left.view});
  cols.local_shards.push_back({{5, 17}, right.view});
  StateDict sd{{"m", cols}};
  ASSERT_OK_AND_ASSIGN(auto reader, LoadWith(&sd, "rows", Threads(4)));
  EXPECT_TRUE(SameTensor(left.view, whole.view.Narrow({0, 2}, {40, 5})));
  EXPECT_TRUE(SameTensor(right.view, whole.view.Narrow({5, 17}, {30, 7})));

  // The same load on one thread reads the same pieces.
  OwnedTensor left1 = ZeroTensor(DType::kInt32, {40, 5});
  OwnedTensor right1 = ZeroTensor(DType::kInt32, {30, 7});
  cols.local_shards[0].tensor = left1.view;
  cols.local_shards[1].tensor = right1.view;
  StateDict sd1{{"m", cols}};
  ASSERT_OK_AND_ASSIGN(auto reader1, LoadWith(&sd1, "rows", Threads(1)));
  EXPECT_TRUE(SameTensor(left1.view, left.view));
  EXPECT_TRUE(SameTensor(right1.view, right.view));
  EXPECT_EQ(reader->stats().pieces_read, reader1->stats().pieces_read);
  EXPECT_EQ(reader->stats().bytes_read, reader1->stats().bytes_read);
  // The chunks hold 97 pieces; each box touches a piece or two per row,
  // and skips the rest.
  EXPECT_LT(reader->stats().pieces_read, 2u * 97u);
}

TEST_F(ReaderTest, ParallelReadsIntoStridedDestinations) {
  OwnedTensor saved = RandomTensor(DType::kBFloat16, {33, 65}, 11);
  ASSERT_OK(SaveDict({{"t", saved.view}}, "s", {.max_piece_bytes = 128}));
  // A transposed destination: every element lands at a stride.
  OwnedTensor base = ZeroTensor(DType::kBFloat16, {65, 33});
  TensorView transposed = base.view;
  transposed.sizes = {33, 65};
  transposed.strides = {1, 33};
  StateDict sd{{"t", transposed}};
  ASSERT_OK(LoadWith(&sd, "s", Threads(3)));
  EXPECT_TRUE(SameTensor(transposed, saved.view));
}

TEST_F(ReaderTest, CorruptPieceIsCaughtWithParallelReads) {
  // One piece per 64 KiB row: 16 pieces, read by 4 threads.
  OwnedTensor big = RandomTensor(DType::kUInt8, {16, 65536}, 3);
  ASSERT_OK(SaveDict({{"t", big.view}}, "c", {.max_piece_bytes = 65536}));
  CloseStore();
  std::vector<std::string> ssts = SstFiles();
  ASSERT_FALSE(ssts.empty());
  FlipByte(ssts[0], 9 * 65536 + 30000);  // Inside piece 9's data.
  OpenStore();

  OwnedTensor into = ZeroTensor(DType::kUInt8, {16, 65536});
  StateDict sd{{"t", into.view}};
  EXPECT_THAT(LoadWith(&sd, "c", Threads(4)),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'c'"), HasSubstr("'t@[0, 0]'"),
                             HasSubstr("piece 9 of 16"))));
  // Other pieces may have landed; the bad one never did.
  for (size_t i = 0; i < into.bytes.size(); ++i) {
    if (into.bytes[i] != 0 && into.bytes[i] != big.bytes[i]) {
      FAIL() << "wrong byte at " << i;
    }
  }
  for (size_t i = 9 * 65536; i < 10 * 65536; ++i) {
    ASSERT_EQ(into.bytes[i], 0) << "byte " << i << " of the corrupt piece";
  }
}

TEST_F(ReaderTest, PiecesOfFourKiBOrMoreAreReadInPlace) {
  // 12 pieces of 64 KiB, the last one short; and small items around it.
  OwnedTensor big = RandomTensor(DType::kFloat32, {12, 16383}, 21);
  MixedState saved = MixedStateDict(2, false);
  saved.dict["zbig"] = big.view;
  ASSERT_OK(SaveDict(saved.dict, "p", {.max_piece_bytes = 65536}));
  for (bool in_place : {true, false}) {
    RocksDBReaderOptions options = Threads(3);
    options.read_in_place = in_place;
    MixedState into = MixedStateDict(0, true);
    OwnedTensor big_into = ZeroTensor(DType::kFloat32, {12, 16383});
    into.dict["zbig"] = big_into.view;
    ASSERT_OK_AND_ASSIGN(auto reader, LoadWith(&into.dict, "p", options));
    EXPECT_TRUE(SameState(into.dict, saved.dict)) << in_place;
    EXPECT_TRUE(SameTensor(big_into.view, big.view)) << in_place;
    // Every piece of 4 KiB or more: zbig's 12, big's 2 (98688 bytes in
    // pieces of 65536 and 33152) and long.bytes (20000 bytes, one piece,
    // read in a batch with the small items).
    EXPECT_EQ(reader->stats().pieces_read_in_place, in_place ? 15u : 0u);
    EXPECT_EQ(reader->stats().in_place_misses, 0u);
  }
}

TEST_F(ReaderTest, PrefetchAsksForAtMostItsBytesAndTheLoadIsBitExact) {
  // 4 MiB in pieces of 64 KiB, and small items around it.
  OwnedTensor big = RandomTensor(DType::kUInt8, {64, 65536}, 31);
  MixedState saved = MixedStateDict(2, false);
  saved.dict["zbig"] = big.view;
  ASSERT_OK(SaveDict(saved.dict, "f", {.max_piece_bytes = 65536}));
  uint64_t file_bytes = 0;
  for (const std::string& sst : SstFiles()) {
    file_bytes += std::filesystem::file_size(sst);
  }
  for (uint64_t cap : {uint64_t{0}, uint64_t{1} << 20, uint64_t{256} << 20}) {
    RocksDBReaderOptions options = Threads(2);
    options.prefetch_bytes = cap;
    MixedState into = MixedStateDict(0, true);
    OwnedTensor big_into = ZeroTensor(DType::kUInt8, {64, 65536});
    into.dict["zbig"] = big_into.view;
    ASSERT_OK_AND_ASSIGN(auto reader, LoadWith(&into.dict, "f", options));
    EXPECT_TRUE(SameState(into.dict, saved.dict)) << cap;
    EXPECT_TRUE(SameTensor(big_into.view, big.view)) << cap;
    // How much it asked for depends on how long the load planned; never
    // more than the cap, or than the checkpoint's files hold.
    EXPECT_LE(reader->stats().bytes_prefetched, cap);
    EXPECT_LE(reader->stats().bytes_prefetched, file_bytes);
  }
}

TEST_F(ReaderTest, AReaderLeftAfterReadMetadataStopsItsPrefetch) {
  OwnedTensor big = RandomTensor(DType::kUInt8, {64, 65536}, 32);
  ASSERT_OK(SaveDict({{"t", big.view}}, "g", {.max_piece_bytes = 65536}));
  {
    // Destroyed while it may still be asking: it waits for its thread.
    ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader({}));
    ASSERT_OK(reader->Reset("g"));
    ASSERT_OK(reader->ReadMetadata().status());
  }
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader({}));
  ASSERT_OK(reader->Reset("g"));
  ASSERT_OK(reader->ReadMetadata().status());
  // Reset stops it too; the same reader then loads.
  OwnedTensor into = ZeroTensor(DType::kUInt8, {64, 65536});
  StateDict sd{{"t", into.view}};
  ASSERT_OK(Load(&sd, *reader, {.checkpoint_id = "g"}));
  EXPECT_TRUE(SameTensor(into.view, big.view));
  // The checkpoint can go, and the store close, with the reader still
  // there.
  ASSERT_OK(store_->Delete("g"));
  reader.reset();
  CloseStore();
}

// Reads the files into the page cache.
void ReadIntoPageCache(const std::vector<std::string>& files) {
  std::vector<char> buffer(1 << 20);
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    while (
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()))) {
    }
    ASSERT_TRUE(in.eof()) << f;
  }
}

// Whether the file system under `path` takes O_DIRECT opens.
bool TakesODirect(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Whether a cold load reads `path` with O_DIRECT: the file system takes it
// (tmpfs before Linux 6.6 does not), and the file's pages leave the page
// cache when dropped. tmpfs's never do, they are the file: a load finds
// them cached and rightly reads them from memory.
bool ReadsColdWithODirect(const std::string& path) {
  if (!TakesODirect(path)) return false;
  DropFromPageCache(path);
  const std::optional<util::CachedPages> cached =
      util::PagesInCache(path, 0, std::filesystem::file_size(path));
  return !cached.has_value() || cached->cached * 2 <= cached->total;
}

// What a load reads in place and finds out of the page cache it reads
// with O_DIRECT, in spans of up to direct_span_bytes; what it finds cached
// it reads through the page cache. Both load the same bytes.
TEST_F(ReaderTest, UncachedPiecesAreReadWithODirectAndCachedOnesFromMemory) {
  // 4 MiB in pieces of 64 KiB, alone: a read through the page cache (of
  // small items, say) has the kernel read ahead up to read_ahead_kb
  // around it, into the page cache, which would make what is read with
  // O_DIRECT depend on timing.
  OwnedTensor big = RandomTensor(DType::kUInt8, {64, 65536}, 41);
  ASSERT_OK(SaveDict({{"t", big.view}}, "d", {.max_piece_bytes = 65536}));
  CloseStore();
  const std::vector<std::string> ssts = SstFiles();
  ASSERT_FALSE(ssts.empty());
  if (!ReadsColdWithODirect(ssts[0])) {
    GTEST_SKIP() << "no cold O_DIRECT reads under " << ssts[0]
                 << ": O_DIRECT refused, or the files live in memory (tmpfs)";
  }
  struct Case {
    bool cached;
    uint64_t span;
    uint64_t want_direct;
  };
  // Spans of 1 MiB take 16 pieces at a time, of 64 KiB one; spans smaller
  // than a piece read none so.
  constexpr uint64_t kAll = 64 * 65536;
  for (const Case& c : {Case{false, 8 << 20, kAll}, Case{false, 1 << 20, kAll},
                        Case{false, 65536, kAll}, Case{false, 4096, 0},
                        Case{false, 0, 0}, Case{true, 8 << 20, 0}}) {
    SCOPED_TRACE(::testing::Message()
                 << "cached " << c.cached << ", span " << c.span);
    if (c.cached) {
      ReadIntoPageCache(ssts);
    } else {
      for (const std::string& sst : ssts) DropFromPageCache(sst);
    }
    OpenStore();
    RocksDBReaderOptions options = Threads(3);
    options.direct_span_bytes = c.span;
    options.prefetch_bytes = 0;  // It would bring the files into the cache.
    OwnedTensor into = ZeroTensor(DType::kUInt8, {64, 65536});
    StateDict sd{{"t", into.view}};
    ASSERT_OK_AND_ASSIGN(auto reader, LoadWith(&sd, "d", options));
    EXPECT_TRUE(SameTensor(into.view, big.view));
    const ReaderStats stats = reader->stats();
    // RocksDB reads the file's tail (its index, some hundreds of KiB)
    // through the page cache as it opens it, and the kernel reads ahead
    // from there: the pieces at the end may be cached.
    if (c.want_direct == 0) {
      EXPECT_EQ(stats.bytes_read_direct, 0u);
    } else {
      EXPECT_GT(stats.bytes_read_direct, c.want_direct / 2);
      EXPECT_LE(stats.bytes_read_direct, c.want_direct);
    }
    EXPECT_EQ(stats.in_place_misses, 0u);
    EXPECT_EQ(stats.pieces_read_in_place, 64u);
    // The O_DIRECT buffers went back to the store's pool.
    EXPECT_EQ(pool().stats().outstanding_bytes, 0u);
    reader.reset();
    CloseStore();
  }
}

TEST_F(ReaderTest, APieceReadWithODirectThatFailsIsReadAgainThroughRocksDB) {
  // 64 pieces: whatever of the file's end is cached once the store is
  // open (see above), the first span, pieces 0-63, is mostly not.
  OwnedTensor big = RandomTensor(DType::kUInt8, {64, 65536}, 43);
  ASSERT_OK(SaveDict({{"t", big.view}}, "c", {.max_piece_bytes = 65536}));
  CloseStore();
  std::vector<std::string> ssts = SstFiles();
  ASSERT_FALSE(ssts.empty());
  if (!ReadsColdWithODirect(ssts[0])) {
    GTEST_SKIP() << "no cold O_DIRECT reads under " << ssts[0]
                 << ": O_DIRECT refused, or the files live in memory (tmpfs)";
  }
  FlipByte(ssts[0], 4 * 65536 + 1000);  // Inside piece 4's data.
  for (const std::string& sst : ssts) DropFromPageCache(sst);
  OpenStore();

  RocksDBReaderOptions options = Threads(1);
  options.prefetch_bytes = 0;
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader(options));
  OwnedTensor into = ZeroTensor(DType::kUInt8, {64, 65536});
  StateDict sd{{"t", into.view}};
  EXPECT_THAT(Load(&sd, *reader, {.checkpoint_id = "c"}),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'c'"), HasSubstr("'t@[0, 0]'"),
                             HasSubstr("piece 4 of 64"))));
  // One read of the whole tensor: pieces 0-3 verified in it and were
  // copied; piece 4 did not, and nothing of it reached the destination.
  EXPECT_EQ(reader->stats().bytes_read_direct, 4u * 65536);
  EXPECT_EQ(reader->stats().in_place_misses, 1u);
  for (size_t i = 4 * 65536; i < 5 * 65536; ++i) {
    ASSERT_EQ(into.bytes[i], 0) << "byte " << i << " of the corrupt piece";
  }
  EXPECT_EQ(std::memcmp(into.bytes.data(), big.bytes.data(), 4 * 65536), 0);
}

TEST_F(ReaderTest, BoxesTakingPartOfAPieceReadItInPlaceToo) {
  OwnedTensor whole = RandomTensor(DType::kInt32, {64, 1024}, 23);
  ASSERT_OK(SaveDict({{"m", whole.view}}, "r", {.max_piece_bytes = 65536}));
  // Columns 100-399 of every row: each piece (16 rows) is read, and 300
  // of its 1024 columns copied.
  OwnedTensor cols = ZeroTensor(DType::kInt32, {64, 300});
  ShardedTensor box;
  box.dtype = DType::kInt32;
  box.global_size = {64, 1024};
  box.local_shards.push_back({{0, 100}, cols.view});
  StateDict sd{{"m", box}};
  ASSERT_OK_AND_ASSIGN(auto reader, LoadWith(&sd, "r", Threads(2)));
  EXPECT_TRUE(SameTensor(cols.view, whole.view.Narrow({0, 100}, {64, 300})));
  EXPECT_EQ(reader->stats().pieces_read_in_place, 4u);
  EXPECT_EQ(reader->stats().pieces_read, 4u);
}

TEST_F(ReaderTest, APieceThatFailsInPlaceIsReadAgainThroughRocksDB) {
  OwnedTensor big = RandomTensor(DType::kUInt8, {16, 65536}, 3);
  ASSERT_OK(SaveDict({{"t", big.view}}, "c", {.max_piece_bytes = 65536}));
  CloseStore();
  std::vector<std::string> ssts = SstFiles();
  ASSERT_FALSE(ssts.empty());
  FlipByte(ssts[0], 4 * 65536 + 1000);  // Inside piece 4's data.
  OpenStore();

  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader(Threads(1)));
  OwnedTensor into = ZeroTensor(DType::kUInt8, {16, 65536});
  StateDict sd{{"t", into.view}};
  LoadOptions lo;
  lo.checkpoint_id = "c";
  EXPECT_THAT(Load(&sd, *reader, lo),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'c'"), HasSubstr("'t@[0, 0]'"),
                             HasSubstr("piece 4 of 16"))));
  // Pieces 0-3 were read in place; piece 4 did not verify in place, and
  // RocksDB's read of it named the damage. Nothing of it stayed.
  EXPECT_EQ(reader->stats().pieces_read_in_place, 4u);
  EXPECT_EQ(reader->stats().in_place_misses, 1u);
  for (size_t i = 4 * 65536; i < 5 * 65536; ++i) {
    ASSERT_EQ(into.bytes[i], 0) << "byte " << i << " of the corrupt piece";
  }
  EXPECT_EQ(std::memcmp(into.bytes.data(), big.bytes.data(), 4 * 65536), 0);
}

// Small items are fetched in batches; a batch reads those of its items
// that lie in place in one file with one read, and the rest (under 4 KiB,
// sharing blocks) through RocksDB.
TEST_F(ReaderTest, ItemsOfABatchAreReadInPlaceTogether) {
  std::vector<OwnedTensor> saved;
  StateDict dict;
  saved.reserve(30);
  for (int i = 0; i < 30; ++i) {
    // 1-15 KiB; the even ones of 4 KiB or more.
    const int64_t kib = i % 2 == 0 ? 4 + i % 12 : 1 + i % 3;
    saved.push_back(RandomTensor(DType::kUInt8, {kib, 1024}, 40 + i));
    dict["t" + std::to_string(100 + i)] = saved.back().view;
  }
  dict["bytes.small"] = RandomBytes(100, 1);
  dict["bytes.large"] = RandomBytes(5000, 2);
  ASSERT_OK(SaveDict(dict, "b"));
  for (int threads : {1, 3}) {
    std::vector<OwnedTensor> into;
    StateDict sd;
    into.reserve(30);
    for (int i = 0; i < 30; ++i) {
      into.push_back(ZeroTensor(DType::kUInt8, saved[i].view.sizes));
      sd["t" + std::to_string(100 + i)] = into.back().view;
    }
    sd["bytes.small"] = std::string();
    sd["bytes.large"] = std::string();
    ASSERT_OK_AND_ASSIGN(auto reader, LoadWith(&sd, "b", Threads(threads)));
    for (int i = 0; i < 30; ++i) {
      EXPECT_TRUE(SameTensor(into[i].view, saved[i].view)) << i;
    }
    EXPECT_EQ(std::get<std::string>(sd["bytes.small"]),
              std::get<std::string>(dict["bytes.small"]));
    EXPECT_EQ(std::get<std::string>(sd["bytes.large"]),
              std::get<std::string>(dict["bytes.large"]));
    EXPECT_EQ(reader->stats().pieces_read, 32u);
    // The 15 even tensors and bytes.large.
    EXPECT_EQ(reader->stats().pieces_read_in_place, 16u) << threads;
    EXPECT_EQ(reader->stats().in_place_misses, 0u);
  }
}

TEST_F(ReaderTest, AnItemOfABatchThatFailsInPlaceIsReadAgainThroughRocksDB) {
  OwnedTensor a = RandomTensor(DType::kUInt8, {8, 1024}, 7);
  OwnedTensor b = RandomTensor(DType::kUInt8, {8, 1024}, 8);
  OwnedTensor c = RandomTensor(DType::kUInt8, {8, 1024}, 9);
  ASSERT_OK(SaveDict({{"a", a.view}, {"b", b.view}, {"c", c.view}}, "d"));
  CloseStore();
  std::vector<std::string> ssts = SstFiles();
  ASSERT_FALSE(ssts.empty());
  // Inside b's data: a's block (8 KiB and a little) comes first.
  FlipByte(ssts[0], 8192 + 4000);
  OpenStore();

  OwnedTensor a2 = ZeroTensor(DType::kUInt8, {8, 1024});
  OwnedTensor b2 = ZeroTensor(DType::kUInt8, {8, 1024});
  OwnedTensor c2 = ZeroTensor(DType::kUInt8, {8, 1024});
  StateDict sd{{"a", a2.view}, {"b", b2.view}, {"c", c2.view}};
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader(Threads(1)));
  LoadOptions lo;
  lo.checkpoint_id = "d";
  EXPECT_THAT(Load(&sd, *reader, lo),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'d'"), HasSubstr("'b@[0, 0]'"))));
  // a and c verified in place; b did not, and RocksDB's read of it named
  // the damage. None of b's bytes landed.
  EXPECT_EQ(reader->stats().pieces_read_in_place, 2u);
  EXPECT_EQ(reader->stats().in_place_misses, 1u);
  EXPECT_TRUE(SameTensor(a2.view, a.view));
  EXPECT_TRUE(SameTensor(c2.view, c.view));
  EXPECT_TRUE(std::all_of(b2.bytes.begin(), b2.bytes.end(),
                          [](uint8_t x) { return x == 0; }));
}

TEST_F(ReaderTest, MissingPieceKeyIsCorruptionNamingThePiece) {
  // 16 pieces of 4 KiB; piece 5's key is deleted. A load reading it in
  // place would find its bytes still in the file, and check them: this one
  // reads through RocksDB.
  OwnedTensor big = RandomTensor(DType::kUInt8, {16, 4096}, 5);
  ASSERT_OK(SaveDict({{"t", big.view}}, "m", {.max_piece_bytes = 4096}));
  auto& impl = dynamic_cast<StoreImpl&>(*store_);
  ASSERT_OK_AND_ASSIGN(CommittedCheckpoint c, impl.LookupCommitted("m"));
  MetadataIndex index;
  index.fqn = "t";
  index.offset = std::vector<int64_t>{0, 0};
  ASSERT_TRUE(impl.db()
                  ->Delete(rocksdb::WriteOptions(), c.cf.get(),
                           keys::PieceKey(index, 5))
                  .ok());

  OwnedTensor into = ZeroTensor(DType::kUInt8, {16, 4096});
  StateDict sd{{"t", into.view}};
  RocksDBReaderOptions options = Threads(1);
  options.read_in_place = false;
  EXPECT_THAT(LoadWith(&sd, "m", options),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'m'"), HasSubstr("piece 5 of 16"),
                             HasSubstr("is missing"))));
  for (size_t i = 5 * 4096; i < 6 * 4096; ++i) {
    ASSERT_EQ(into.bytes[i], 0) << "byte " << i << " of the missing piece";
  }
}

// Refuses the destinations of some fqns, as a planner whose state dict
// lacks them would.
class RefusingPlanner : public DefaultLoadPlanner {
 public:
  explicit RefusingPlanner(std::set<std::string> refuse)
      : refuse_(std::move(refuse)) {}
  Result<TensorView> ResolveTensor(const ReadItem& item) override {
    if (refuse_.count(item.dest_index.fqn) > 0) {
      return Status::InvalidArgument("refused " + item.dest_index.fqn);
    }
    return DefaultLoadPlanner::ResolveTensor(item);
  }

 private:
  std::set<std::string> refuse_;
};

// Plans its items in reverse, as a state dict whose order is not the
// store's key order would (torch's, in insertion order).
class ReversingPlanner : public RefusingPlanner {
 public:
  using RefusingPlanner::RefusingPlanner;
  Result<LoadPlan> CreateLocalPlan() override {
    ROCKSDCP_ASSIGN_OR_RETURN(LoadPlan plan,
                              DefaultLoadPlanner::CreateLocalPlan());
    std::reverse(plan.items.begin(), plan.items.end());
    return plan;
  }
};

// A load reads in the store's key order (the order of the pieces in its
// files), whatever the plan's order, and names the first failure in that
// order, whatever the threads.
TEST_F(ReaderTest, FirstErrorInKeyOrderWinsWhateverThePlanOrderAndThreads) {
  // Single-piece tensors too large to be batched: one task each.
  std::vector<OwnedTensor> saved;
  StateDict sd;
  for (const char* fqn : {"a", "b", "c", "d", "e", "f"}) {
    saved.push_back(RandomTensor(DType::kFloat32, {80, 1024}, fqn[0]));
    sd[fqn] = saved.back().view;
  }
  ASSERT_OK(SaveDict(sd, "e"));
  for (bool reverse : {false, true}) {
    for (int threads : {1, 2, 4}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, reverse " +
                   std::to_string(reverse));
      std::vector<OwnedTensor> into;
      StateDict dest;
      for (const auto& [fqn, value] : sd) {
        into.push_back(ZeroTensor(DType::kFloat32, {80, 1024}));
        dest[fqn] = into.back().view;
      }
      RefusingPlanner forwards({"c", "f"});
      ReversingPlanner backwards({"c", "f"});
      LoadPlanner* planner = reverse ? &backwards : &forwards;
      EXPECT_THAT(LoadWith(&dest, "e", Threads(threads), planner),
                  StatusIs(StatusCode::kInvalidArgument,
                           AllOf(HasSubstr("refused c"), HasSubstr("'e'"))));
    }
  }
  // Without a failure, a reversed plan loads everything.
  std::vector<OwnedTensor> into;
  StateDict dest;
  for (const auto& [fqn, value] : sd) {
    into.push_back(ZeroTensor(DType::kFloat32, {80, 1024}));
    dest[fqn] = into.back().view;
  }
  ReversingPlanner backwards(std::set<std::string>{});
  ASSERT_OK(LoadWith(&dest, "e", Threads(2), &backwards));
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_TRUE(SameTensor(into[i].view, saved[i].view)) << i;
  }
}

TEST_F(ReaderTest, ProgressCallsAreSerializedAndReachTheTotal) {
  MixedState saved = MixedStateDict(5, false);
  ASSERT_OK(SaveDict(saved.dict, "p", {.max_piece_bytes = 4096}));
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::vector<Progress> seen;
  RocksDBReaderOptions options = Threads(4);
  options.progress = [&](const Progress& p) {
    if (inside.fetch_add(1) != 0) overlapped = true;
    seen.push_back(p);
    inside.fetch_sub(1);
  };
  MixedState into = MixedStateDict(0, true);
  ASSERT_OK(LoadWith(&into.dict, "p", options));
  EXPECT_FALSE(overlapped);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
  EXPECT_EQ(seen.back().items_done, seen.back().items_total);
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].bytes_done, seen[i - 1].bytes_done);
    EXPECT_GE(seen[i].items_done, seen[i - 1].items_done);
  }
}

TEST_F(ReaderTest, MemoryBudgetBoundsTheThreads) {
  MixedState saved = MixedStateDict(2, false);
  ASSERT_OK(SaveDict(saved.dict, "b", {.max_piece_bytes = 4096}));
  RocksDBReaderOptions options = Threads(4);
  options.memory_budget = 1;  // Less than a piece: one thread, still loads.
  MixedState into = MixedStateDict(0, true);
  ASSERT_OK_AND_ASSIGN(auto reader, LoadWith(&into.dict, "b", options));
  EXPECT_TRUE(SameState(into.dict, saved.dict));
  EXPECT_EQ(reader->stats().read_threads, 1u);
}

TEST_F(ReaderTest, BadThreadCountOrSpanIsInvalidArgument) {
  EXPECT_THAT(store_->NewReader(Threads(-1)),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("read_threads"), HasSubstr("-1"))));
  RocksDBReaderOptions options;
  options.direct_span_bytes = (1ull << 30) + 1;
  EXPECT_THAT(
      store_->NewReader(options),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("direct_span_bytes")));
  // The bounds themselves are fine.
  options.direct_span_bytes = 1ull << 30;
  EXPECT_OK(store_->NewReader(options));
  options.direct_span_bytes = 0;
  EXPECT_OK(store_->NewReader(options));
}

TEST_F(ReaderTest, BypassingTheBlockCacheLoadsTheSame) {
  MixedState saved = MixedStateDict(3, false);
  ASSERT_OK(SaveDict(saved.dict, "f", {.max_piece_bytes = 4096}));
  RocksDBReaderOptions options = Threads(2);
  options.fill_cache = false;
  MixedState into = MixedStateDict(0, true);
  ASSERT_OK(LoadWith(&into.dict, "f", options));
  EXPECT_TRUE(SameState(into.dict, saved.dict));
}

TEST_F(ReaderTest, DirectReadsLoadTheSame) {
  MixedState saved = MixedStateDict(4, false);
  ASSERT_OK(SaveDict(saved.dict, "d", {.max_piece_bytes = 4096}));
  CloseStore();
  StoreOptions so;
  so.use_direct_reads = true;
  auto store = Store::Open(store_path(), so);
  // RocksDB's open refuses a directory that does not take O_DIRECT.
  if (!store.ok() &&
      (store.status().IsIOError() ||
       store.status().message().find("Direct I/O is not supported") !=
           std::string::npos)) {
    GTEST_SKIP() << "no O_DIRECT here: " << store.status().ToString();
  }
  ASSERT_OK(store);
  store_ = std::move(store).value();
  MixedState into = MixedStateDict(0, true);
  Status s = LoadWith(&into.dict, "d", Threads(2)).status();
  if (s.IsIOError()) GTEST_SKIP() << "no O_DIRECT here: " << s.ToString();
  ASSERT_OK(s);
  EXPECT_TRUE(SameState(into.dict, saved.dict));
}

TEST_F(ReaderTest, LoadsRecycleReadBuffersThroughTheStorePool) {
  // Two pieces of 12 MiB: more than the 8 MiB block cache, so each block
  // is freed into the pool once read. (Read through RocksDB: pieces read in
  // place need no block.)
  OwnedTensor big = RandomTensor(DType::kUInt8, {2, 12 << 20}, 9);
  ASSERT_OK(SaveDict({{"t", big.view}}, "r", {.max_piece_bytes = 12 << 20}));
  OwnedTensor into = ZeroTensor(DType::kUInt8, {2, 12 << 20});
  StateDict sd{{"t", into.view}};
  ASSERT_OK(LoadWith(&sd, "r", ThroughBlocks(1)));
  const BlockBufferPool::Stats first = pool().stats();
  EXPECT_GT(first.mapped_bytes, 0u);
  EXPECT_GT(first.kept_bytes, 0u);

  ASSERT_OK(LoadWith(&sd, "r", ThroughBlocks(1)));
  ASSERT_OK(LoadWith(&sd, "r", ThroughBlocks(2)));
  const BlockBufferPool::Stats later = pool().stats();
  EXPECT_TRUE(SameTensor(into.view, big.view));
  // The second and third loads read into buffers the first one mapped...
  EXPECT_GE(later.reused, first.reused + 3);
  // ...except the second thread's, mapped once.
  EXPECT_LE(later.mapped_bytes, 2 * first.mapped_bytes);
  EXPECT_EQ(later.outstanding_bytes, 0u);
  EXPECT_LE(later.kept_bytes, StoreOptions().read_buffer_pool_bytes);
}

TEST_F(ReaderTest, ZeroPoolKeepsNoBuffers) {
  OwnedTensor big = RandomTensor(DType::kUInt8, {2, 12 << 20}, 10);
  ASSERT_OK(SaveDict({{"t", big.view}}, "z", {.max_piece_bytes = 12 << 20}));
  CloseStore();
  StoreOptions so;
  so.read_buffer_pool_bytes = 0;
  OpenStore(so);
  OwnedTensor into = ZeroTensor(DType::kUInt8, {2, 12 << 20});
  StateDict sd{{"t", into.view}};
  ASSERT_OK(LoadWith(&sd, "z", ThroughBlocks(2)));
  EXPECT_TRUE(SameTensor(into.view, big.view));
  const BlockBufferPool::Stats stats = pool().stats();
  EXPECT_EQ(stats.reused, 0u);
  EXPECT_EQ(stats.kept_bytes, 0u);
  EXPECT_EQ(stats.outstanding_bytes, 0u);
  EXPECT_EQ(stats.unmapped_bytes, stats.mapped_bytes);
}

}  // namespace
}  // namespace rocksdcp::testing
