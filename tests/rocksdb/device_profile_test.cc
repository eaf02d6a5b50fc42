// The device profiles (include/rocksdcp/device_profile.h): the server one
// is the defaults, and a store, writer, reader and AsyncCheckpointer made
// with the small-device one save and load bit-exact within its budgets.
// What they cost in memory is measured by rocksdcp_bench --profile=small
// (benchmarks/README.md), not asserted here.

#include <cstdint>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

TEST(DeviceProfileTest, ServerProfileIsTheDefaults) {
  const DeviceProfile p = ServerProfile();
  EXPECT_EQ(p.store.read_buffer_pool_bytes,
            StoreOptions{}.read_buffer_pool_bytes);
  EXPECT_EQ(p.store.max_background_jobs, StoreOptions{}.max_background_jobs);
  EXPECT_EQ(p.store.max_open_files, StoreOptions{}.max_open_files);
  EXPECT_EQ(p.writer.memory_budget, RocksDBWriterOptions{}.memory_budget);
  EXPECT_EQ(p.writer.write_threads, RocksDBWriterOptions{}.write_threads);
  EXPECT_EQ(p.reader.memory_budget, RocksDBReaderOptions{}.memory_budget);
  EXPECT_EQ(p.reader.read_threads, RocksDBReaderOptions{}.read_threads);
  EXPECT_TRUE(p.reader.verify_block_checksums);
  EXPECT_EQ(p.async.staging_budget,
            AsyncCheckpointer::Options{}.staging_budget);
}

TEST(DeviceProfileTest, SmallDeviceBudgetsAreSmall) {
  const DeviceProfile p = SmallDeviceProfile();
  EXPECT_LE(p.writer.memory_budget, uint64_t{32} << 20);
  EXPECT_LE(p.reader.memory_budget + p.store.read_buffer_pool_bytes,
            uint64_t{32} << 20);
  EXPECT_LE(p.async.staging_budget, uint64_t{128} << 20);
  EXPECT_EQ(p.reader.read_threads, 2);
  EXPECT_LT(p.store.max_open_files, StoreOptions{}.max_open_files);
  EXPECT_GE(p.store.max_open_files, 20);
  EXPECT_LE(p.reader.prefetch_bytes, uint64_t{64} << 20);
  // Each read thread's O_DIRECT buffer (a little over direct_span_bytes)
  // is kept in the store's pool from one load to the next.
  EXPECT_GT(p.reader.direct_span_bytes, 0u);
  EXPECT_LE(2 * p.reader.direct_span_bytes * uint64_t(p.reader.read_threads),
            p.store.read_buffer_pool_bytes);
  EXPECT_EQ(p.writer.write_threads, 2);
  // Safety is not what a small device saves on.
  EXPECT_TRUE(p.reader.verify_block_checksums);
}

class SmallDeviceTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    OpenStore(profile_.store);
  }

  // 12 MiB in tensors of several sizes, most of many pieces, and a byte
  // item: more than the reader's budget holds, so it streams.
  struct State {
    std::vector<OwnedTensor> tensors;
    std::string extra;
    StateDict dict;
  };
  static State MakeState(bool zero) {
    State s;
    const std::vector<std::vector<int64_t>> shapes = {
        {1024, 1024}, {512, 1024}, {3, 1000, 17}, {100}, {}};
    for (size_t i = 0; i < shapes.size(); ++i) {
      s.tensors.push_back(
          zero ? ZeroTensor(DType::kFloat32, shapes[i])
               : RandomTensor(DType::kFloat32, shapes[i], 100 + i));
    }
    // Moving the vector keeps each tensor's bytes where the views point.
    s.tensors.push_back(zero ? ZeroTensor(DType::kBFloat16, {4096, 512})
                             : RandomTensor(DType::kBFloat16, {4096, 512}, 7));
    for (size_t i = 0; i < s.tensors.size(); ++i) {
      s.dict["t" + std::to_string(i)] = s.tensors[i].view;
    }
    s.extra = zero ? std::string() : RandomBytes(300'000, 9);
    s.dict["extra"] = s.extra;
    return s;
  }
  ::testing::AssertionResult Same(const State& got, const State& want) {
    for (size_t i = 0; i < want.tensors.size(); ++i) {
      auto same = SameTensor(got.tensors[i].view, want.tensors[i].view);
      if (!same) return same << " (t" << i << ")";
    }
    if (std::get<std::string>(got.dict.at("extra")) != want.extra) {
      return ::testing::AssertionFailure() << "extra differs";
    }
    return ::testing::AssertionSuccess();
  }

  const DeviceProfile profile_ = SmallDeviceProfile();
};

TEST_F(SmallDeviceTest, SavesAndLoadsBitExact) {
  const State saved = MakeState(/*zero=*/false);
  ASSERT_OK(SaveDict(saved.dict, "step-1", profile_.writer));

  State into = MakeState(/*zero=*/true);
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader(profile_.reader));
  ASSERT_OK(Load(&into.dict, *reader, {.checkpoint_id = "step-1"}));
  EXPECT_TRUE(Same(into, saved));
  EXPECT_GE(reader->stats().read_threads, 1u);
  EXPECT_LE(reader->stats().read_threads, 2u);
  EXPECT_LE(reader->stats().bytes_prefetched, profile_.reader.prefetch_bytes);
}

TEST_F(SmallDeviceTest, AsyncSaveStagesWithinItsPool) {
  ASSERT_OK_AND_ASSIGN(auto checkpointer,
                       AsyncCheckpointer::Create(profile_.async));
  EXPECT_EQ(checkpointer->staging_capacity(), profile_.async.staging_budget);
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(profile_.writer));
  State saved = MakeState(/*zero=*/false);
  ASSERT_OK_AND_ASSIGN(
      AsyncSaveHandle handle,
      checkpointer->Save(saved.dict, *writer, {.checkpoint_id = "step-2"}));
  // The dict may change once Save returns: the checkpoint keeps the bytes
  // it had.
  const State expected = MakeState(/*zero=*/false);
  for (OwnedTensor& t : saved.tensors) {
    std::fill(t.bytes.begin(), t.bytes.end(), uint8_t{0xee});
  }
  ASSERT_OK(handle.committed.get().status());

  State into = MakeState(/*zero=*/true);
  ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader(profile_.reader));
  ASSERT_OK(Load(&into.dict, *reader, {.checkpoint_id = "step-2"}));
  EXPECT_TRUE(Same(into, expected));
}

}  // namespace
}  // namespace rocksdcp::testing
