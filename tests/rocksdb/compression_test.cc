// Compressed pieces (RocksDBWriterOptions::compression, issue #17): saved
// smaller, loaded bit-exact whole, resharded and in part, verified, and
// referenced by incremental saves whatever codec wrote either side; a
// damaged compressed piece fails its load and shows in Verify.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/table_properties.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "rocksdb/store_fixture.h"
#include "weights.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kPiece = 16 << 10;

OwnedTensor Weights(WeightKind kind, DType dtype, std::vector<int64_t> sizes,
                    uint64_t seed) {
  OwnedTensor t = ZeroTensor(dtype, sizes);
  FillWeights(kind, dtype, seed, t.bytes.data(), t.view.numel());
  return t;
}

// What a trainer saves: bf16 and fp32 weights, fp16 activations' scales, a
// norm, Adam's moments, an int64 step table of random bits (which does not
// compress), and byte items.
struct TrainerState {
  std::vector<OwnedTensor> tensors;
  StateDict dict;

  explicit TrainerState(uint64_t seed, bool zero = false) {
    auto add = [&](const std::string& fqn, OwnedTensor t) {
      if (zero) std::memset(t.bytes.data(), 0, t.bytes.size());
      tensors.push_back(std::move(t));
      dict[fqn] = tensors.back().view;
    };
    tensors.reserve(8);
    add("w.bf16",
        Weights(WeightKind::kWeight, DType::kBFloat16, {96, 512}, seed));
    add("w.fp32",
        Weights(WeightKind::kWeight, DType::kFloat32, {64, 300}, seed + 1));
    add("w.fp16",
        Weights(WeightKind::kWeight, DType::kFloat16, {33, 100}, seed + 2));
    add("norm", Weights(WeightKind::kNorm, DType::kFloat32, {512}, seed + 3));
    add("adam.exp_avg_sq", Weights(WeightKind::kAdamExpAvgSq, DType::kFloat32,
                                   {64, 300}, seed + 4));
    add("steps", RandomTensor(DType::kInt64, {40, 100}, seed + 5));
    add("scalar", RandomTensor(DType::kFloat64, {}, seed + 6));
    dict["config"] =
        zero ? std::string() : std::string(5000, 'x') + RandomBytes(100, seed);
    dict["rng"] = zero ? std::string() : RandomBytes(3000, seed + 7);
  }
};

::testing::AssertionResult SameState(const StateDict& got,
                                     const StateDict& want) {
  for (const auto& [fqn, value] : want) {
    const auto& other = got.at(fqn);
    if (const auto* t = std::get_if<TensorView>(&value)) {
      auto r = SameTensor(std::get<TensorView>(other), *t);
      if (!r) return r << " (" << fqn << ")";
    } else if (std::get<std::string>(other) != std::get<std::string>(value)) {
      return ::testing::AssertionFailure() << "bytes differ: " << fqn;
    }
  }
  return ::testing::AssertionSuccess();
}

RocksDBWriterOptions Compressed(std::string base = "") {
  RocksDBWriterOptions o;
  o.max_piece_bytes = kPiece;
  o.compression = Compression::kBytePlaneZstd;
  // Every piece, whatever this disk's speed (adaptive_compression_test.cc
  // tests the other policy).
  o.compression_policy = CompressionPolicy::kAlways;
  o.base = std::move(base);
  return o;
}

RocksDBWriterOptions Plain(std::string base = "") {
  RocksDBWriterOptions o = Compressed(std::move(base));
  o.compression = Compression::kNone;
  return o;
}

class CompressionTest : public StoreTest {
 protected:
  uint64_t StoreSstBytes() {
    uint64_t total = 0;
    for (const std::string& f : SstFiles()) {
      total += std::filesystem::file_size(f);
    }
    return total;
  }

  ::testing::AssertionResult LoadsAs(const std::string& id,
                                     const TrainerState& want) {
    TrainerState got(0, /*zero=*/true);
    Status s = LoadDict(&got.dict, id);
    if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
    return SameState(got.dict, want.dict);
  }
};

TEST_F(CompressionTest, SavesSmallerAndLoadsBitExact) {
  TrainerState state(1);
  ASSERT_OK(SaveDict(state.dict, "plain", Plain()));
  const uint64_t plain = StoreSstBytes();
  ASSERT_OK(SaveDict(state.dict, "packed", Compressed()));
  const uint64_t packed = StoreSstBytes() - plain;
  EXPECT_LT(packed, plain * 85 / 100) << packed << " against " << plain;
  EXPECT_TRUE(LoadsAs("packed", state));
  EXPECT_TRUE(LoadsAs("plain", state));
  ExpectVerifies();
}

TEST_F(CompressionTest, ReshardedAndPartialLoadsReadCompressedPieces) {
  OwnedTensor whole =
      Weights(WeightKind::kWeight, DType::kBFloat16, {64, 700}, 5);
  ShardedTensor rows;
  rows.dtype = DType::kBFloat16;
  rows.global_size = {64, 700};
  rows.local_shards.push_back({{0, 0}, whole.view.Narrow({0, 0}, {23, 700})});
  rows.local_shards.push_back({{23, 0}, whole.view.Narrow({23, 0}, {41, 700})});
  ASSERT_OK(
      SaveDict({{"m", rows}, {"other", whole.view}}, "rows", Compressed()));

  // Column blocks across the row shards; "other" left out.
  OwnedTensor left = ZeroTensor(DType::kBFloat16, {64, 100});
  OwnedTensor right = ZeroTensor(DType::kBFloat16, {30, 333});
  ShardedTensor cols;
  cols.dtype = DType::kBFloat16;
  cols.global_size = {64, 700};
  cols.local_shards.push_back({{0, 7}, left.view});
  cols.local_shards.push_back({{20, 367}, right.view});
  StateDict sd{{"m", cols}};
  ASSERT_OK(LoadDict(&sd, "rows", /*allow_partial_load=*/true));
  EXPECT_TRUE(SameTensor(left.view, whole.view.Narrow({0, 7}, {64, 100})));
  EXPECT_TRUE(SameTensor(right.view, whole.view.Narrow({20, 367}, {30, 333})));
}

TEST_F(CompressionTest, IncrementalSavesReferenceUnchangedPiecesAcrossCodecs) {
  TrainerState state(2);
  ASSERT_OK(SaveDict(state.dict, "base", Plain()));
  // Nothing changed: compressed against an uncompressed base, every piece
  // is a reference (identity is the decoded payload's hash).
  ASSERT_OK(SaveDict(state.dict, "next", Compressed("base")));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo next, store_->Info("next"));
  EXPECT_EQ(next.referenced_bytes, next.bytes);
  // One tensor changed: the others stay references, in the other
  // direction too.
  ASSERT_OK(SaveDict(state.dict, "packed", Compressed()));
  auto* w = reinterpret_cast<uint16_t*>(state.tensors[0].bytes.data());
  w[3] ^= 0x0100;
  ASSERT_OK(SaveDict(state.dict, "last", Plain("packed")));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo last, store_->Info("last"));
  EXPECT_LT(last.referenced_bytes, last.bytes);
  EXPECT_GT(last.referenced_bytes, last.bytes / 2);
  EXPECT_TRUE(LoadsAs("last", state));
  ExpectVerifies();
}

TEST_F(CompressionTest, ADamagedCompressedPieceFailsItsLoadAndVerify) {
  TrainerState state(3);
  RocksDBWriterOptions options = Compressed();
  ASSERT_OK(SaveDict(state.dict, "c", options));
  CloseStore();
  // The largest SST holds the pieces; flip a byte in the middle of it.
  const std::vector<std::string> files = SstFiles();
  ASSERT_FALSE(files.empty());
  FlipByte(files[0], std::filesystem::file_size(files[0]) / 2);
  OpenStore();
  TrainerState into(0, /*zero=*/true);
  EXPECT_THAT(LoadDict(&into.dict, "c"),
              StatusIs(StatusCode::kCorruption, HasSubstr("checkpoint 'c'")));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  ASSERT_EQ(report.checkpoints.size(), 1u);
  EXPECT_FALSE(report.checkpoints[0].ok());
}

// Each read thread decodes a compressed piece into two more buffers of
// its size, which the memory budget counts: fewer threads fit.
TEST_F(CompressionTest, DecodeBuffersCountInTheReadersMemoryBudget) {
  OwnedTensor w = Weights(WeightKind::kWeight, DType::kBFloat16, {16, 1 << 20},
                          9);  // 32 MiB in 1 MiB pieces.
  RocksDBWriterOptions plain = Plain();
  plain.max_piece_bytes = 1 << 20;
  RocksDBWriterOptions packed = Compressed();
  packed.max_piece_bytes = 1 << 20;
  ASSERT_OK(SaveDict({{"w", w.view}}, "plain", plain));
  ASSERT_OK(SaveDict({{"w", w.view}}, "packed", packed));
  RocksDBReaderOptions options;
  options.read_threads = 8;
  options.memory_budget = 20 << 20;
  // The budget counts O_DIRECT buffers too: without them, it fits several
  // threads that don't decode, and fewer that do.
  options.direct_span_bytes = 0;
  uint32_t threads[2];
  for (int i = 0; i < 2; ++i) {
    OwnedTensor into = ZeroTensor(DType::kBFloat16, {16, 1 << 20});
    StateDict sd{{"w", into.view}};
    ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader(options));
    ASSERT_OK(
        Load(&sd, *reader, {.checkpoint_id = i == 0 ? "plain" : "packed"}));
    EXPECT_TRUE(SameTensor(into.view, w.view));
    threads[i] = reader->stats().read_threads;
  }
  EXPECT_LT(threads[1], threads[0]);
  EXPECT_GE(threads[1], 1u);
}

// RocksDB's own block compression would compress pieces a second time:
// it stays off for checkpoints, compressed or not, once ingested.
TEST_F(CompressionTest, RocksDBsBlockCompressionStaysOff) {
  TrainerState state(5);
  ASSERT_OK(SaveDict(state.dict, "plain", Plain()));
  ASSERT_OK(SaveDict(state.dict, "packed", Compressed()));
  const std::vector<std::string> files = SstFiles();
  ASSERT_GE(files.size(), 2u);
  for (const std::string& f : files) {
    rocksdb::SstFileReader reader{rocksdb::Options()};
    ASSERT_TRUE(reader.Open(f).ok()) << f;
    auto props = reader.GetTableProperties();
    ASSERT_NE(props, nullptr) << f;
    EXPECT_EQ(props->compression_name, "NoCompression") << f;
  }
}

TEST_F(CompressionTest, OptionsAreChecked) {
  TrainerState state(4);
  RocksDBWriterOptions bad = Compressed();
  bad.compression_level = 99;
  EXPECT_THAT(store_->NewWriter(bad).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("compression_level must be in [-7, 19]")));
  bad = Compressed();
  bad.min_compression_saving = 1;
  EXPECT_THAT(store_->NewWriter(bad).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("min_compression_saving")));
  bad = Compressed();
  bad.compression = static_cast<Compression>(7);
  EXPECT_THAT(store_->NewWriter(bad).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("unknown compression 7")));
}

}  // namespace
}  // namespace rocksdcp::testing
