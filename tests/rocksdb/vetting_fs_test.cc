// The store's vetting of the SST files RocksDB opens (src/rocksdb/
// vetting_fs.h, issue #38): a compressed block that claims more than its
// file can back is refused before RocksDB decompresses it; compressed
// blocks within the bound (a store another tool flushed with its own
// compression) load as before.

#include "rocksdb/vetting_fs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <memory>
#include <string>
#include <vector>

#include "keys/keys.h"
#include "rocksdb/store_fixture.h"
#include "rocksdcp/testing/status_matchers.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

bool Supported(rocksdb::CompressionType type) {
  for (auto t : rocksdb::GetSupportedCompressions()) {
    if (t == type) return true;
  }
  return false;
}

// Opens the store's RocksDB as another tool would (ldb: its own options,
// here `compression` for every column family), runs `change` and flushes
// every column family, so that what `change` wrote lands in blocks of that
// compression.
void FlushedBy(const std::string& path, rocksdb::CompressionType compression,
               const std::function<void(rocksdb::DB&,
                                        rocksdb::ColumnFamilyHandle*)>& change,
               const std::string& cf_name) {
  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.compression = compression;
  std::vector<std::string> names;
  ASSERT_TRUE(
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names)
    descriptors.emplace_back(name, cf_options);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(
      rocksdb::DB::Open(rocksdb::DBOptions(), path, descriptors, &handles, &raw)
          .ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == cf_name) change(*db, handles[i]);
  }
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    EXPECT_TRUE(db->Flush(rocksdb::FlushOptions(), h).ok());
    EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  EXPECT_TRUE(db->Close().ok());
}

class VettingFsTest : public StoreTest {
 protected:
  void SaveExample() {
    OpenStore();
    ExampleState sd = ExampleStateDict(7);
    ASSERT_OK(SaveDict(sd.dict, "a").status());
    CloseStore();
  }

  // Rewrites checkpoint a's metadata as `make(value)`, flushed with
  // `compression`.
  void RewriteMetadata(rocksdb::CompressionType compression,
                       const std::function<std::string(std::string)>& make) {
    FlushedBy(
        store_path(), compression,
        [&](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf) {
          std::string value;
          ASSERT_TRUE(db.Get(rocksdb::ReadOptions(), cf,
                             std::string(keys::kMetadataKey), &value)
                          .ok());
          ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), cf,
                             std::string(keys::kMetadataKey), make(value))
                          .ok());
        },
        "a");
  }

  // Saves checkpoint a, rewrites its metadata followed by `zeros` zero
  // bytes in a zstd block, and loads a.
  Status LoadWithMetadataPaddedBy(size_t zeros) {
    SaveExample();
    RewriteMetadata(rocksdb::kZSTD, [zeros](std::string value) {
      return value + std::string(zeros, '\0');
    });
    OpenStore();
    ExampleState loaded = EmptyExampleStateDict();
    return LoadDict(&loaded.dict, "a");
  }
};

TEST(BlockClaimLimitTest,
     SixteenMiBThenThirtyTwoTimesTheFileThenTheLargestValue) {
  EXPECT_EQ(BlockClaimLimit(0), 16ull << 20);
  EXPECT_EQ(BlockClaimLimit(4096), 16ull << 20);
  EXPECT_EQ(BlockClaimLimit(1ull << 20), 32ull << 20);
  EXPECT_EQ(BlockClaimLimit(64ull << 20), 2048ull << 20);
  EXPECT_EQ(BlockClaimLimit(1ull << 30), kMaxBlockBytes);
  EXPECT_EQ(BlockClaimLimit(UINT64_MAX), kMaxBlockBytes);
  EXPECT_EQ(kMaxBlockBytes, 2048ull << 20);
}

TEST_F(VettingFsTest, MetadataAnotherToolFlushedCompressedStillLoads) {
  SaveExample();
  RewriteMetadata(rocksdb::kSnappyCompression,
                  [](std::string value) { return value; });
  OpenStore();
  ExampleState loaded = EmptyExampleStateDict();
  ASSERT_OK(LoadDict(&loaded.dict, "a"));
  EXPECT_TRUE(IsExampleState(loaded, 7));
}

TEST_F(VettingFsTest, AMetadataBlockThatClaimsMoreThanItsFileIsRefused) {
  if (!Supported(rocksdb::kZSTD)) GTEST_SKIP() << "no ZSTD in this RocksDB";
  // A few KiB stored; RocksDB would allocate 64 MiB to decompress it.
  EXPECT_THAT(LoadWithMetadataPaddedBy(64 << 20),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr(".sst: data block at offset"),
                             HasSubstr("claims to decompress to 671"),
                             HasSubstr("more than the limit of 16777216"))));
}

TEST_F(VettingFsTest, ACatalogBlockThatClaimsMoreThanItsFileIsRefused) {
  if (!Supported(rocksdb::kZSTD)) GTEST_SKIP() << "no ZSTD in this RocksDB";
  SaveExample();
  FlushedBy(
      store_path(), rocksdb::kZSTD,
      [](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf) {
        ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), cf, "checkpoint/bomb",
                           std::string(64 << 20, '\0'))
                        .ok());
      },
      rocksdb::kDefaultColumnFamilyName);
  OpenStore();
  EXPECT_THAT(store_->List().status(),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("catalog scan"),
                             HasSubstr("claims to decompress to 671"))));
  // So does a load of a, whose catalog entry shares the forged block.
  ExampleState loaded = EmptyExampleStateDict();
  EXPECT_THAT(LoadDict(&loaded.dict, "a"),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("claims to decompress to 671")));
}

TEST_F(VettingFsTest, AClaimUnderSixteenMiBIsNotRefused) {
  if (!Supported(rocksdb::kZSTD)) GTEST_SKIP() << "no ZSTD in this RocksDB";
  // 1 MiB of zeros compresses to well under 1/32 of itself, but stays
  // under kMinBlockClaimBytes: allowed. Loaded as far as the metadata: it
  // no longer decodes (trailing zeros change its checksum), which is
  // another error than the vetting's.
  const Status s = LoadWithMetadataPaddedBy(1 << 20);
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("claims to decompress")))
      << s.ToString();
}

}  // namespace
}  // namespace rocksdcp::testing
