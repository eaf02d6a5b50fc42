// VetSstFile (src/rocksdb/sst_vet.h) on SST files RocksDB writes, with the
// options a store may use, and on damaged, forged and bomb files. The
// store runs it on every SST file it opens: vetting_fs_test.cc.

#include "rocksdb/sst_vet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rocksdb/convenience.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>

#include "rocksdcp/testing/status_matchers.h"
#include "test_util.h"

namespace rocksdcp {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kGenerous = 1ull << 30;

// An SST file in memory, so that tests can damage it.
class StringFile : public rocksdb::FSRandomAccessFile {
 public:
  explicit StringFile(std::string data) : data_(std::move(data)) {}
  rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions&,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext*) const override {
    if (offset > data_.size()) {
      *result = rocksdb::Slice();
      return rocksdb::IOStatus::OK();
    }
    n = std::min<size_t>(n, data_.size() - offset);
    std::copy_n(data_.data() + offset, n, scratch);
    *result = rocksdb::Slice(scratch, n);
    return rocksdb::IOStatus::OK();
  }

 private:
  std::string data_;
};

Status VetBytes(const std::string& bytes, uint64_t max_block_bytes) {
  StringFile file(bytes);
  SstVetLimits limits;
  limits.max_block_bytes = max_block_bytes;
  return VetSstFile(file, bytes.size(), limits, "forged.sst");
}

bool Supported(rocksdb::CompressionType type) {
  for (auto t : rocksdb::GetSupportedCompressions()) {
    if (t == type) return true;
  }
  return false;
}

struct TableConfig {
  rocksdb::CompressionType compression = rocksdb::kNoCompression;
  int format_version = 5;
  rocksdb::BlockBasedTableOptions::IndexType index_type =
      rocksdb::BlockBasedTableOptions::kBinarySearch;
  size_t block_size = 4096;
};

class SstVetTest : public ::testing::Test {
 protected:
  // A fresh temp directory per test, removed with it.
  void SetUp() override { dir_ = tmp_.path().string(); }

  // Writes `n` keys with values of `value_bytes` (compressible, varied) as
  // an SST file with `config`; returns its path, or "" if RocksDB refuses
  // the options.
  std::string Write(const TableConfig& config, int n, size_t value_bytes) {
    rocksdb::BlockBasedTableOptions table;
    table.format_version = config.format_version;
    table.index_type = config.index_type;
    table.block_size = config.block_size;
    // Small index blocks and partitions, and restart intervals above 1, so
    // that delta-encoded values between restart points are exercised.
    table.metadata_block_size = 256;
    table.index_block_restart_interval = config.block_size < 1024 ? 3 : 1;
    rocksdb::Options options;
    if (config.index_type == rocksdb::BlockBasedTableOptions::kHashSearch) {
      options.prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(4));
    }
    if (config.index_type ==
        rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch) {
      table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
      table.partition_filters = true;
    }
    if (config.block_size >= 4096) {
      table.data_block_index_type =
          rocksdb::BlockBasedTableOptions::kDataBlockBinaryAndHash;
    }
    options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    options.compression = config.compression;
    const std::string path =
        dir_ + "/" + std::to_string(written_.size()) + ".sst";
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), options);
    if (!writer.Open(path).ok()) return "";
    written_.push_back(path);
    std::mt19937 rng(7);
    for (int i = 0; i < n; ++i) {
      char key[32];
      std::snprintf(key, sizeof(key), "key/%03d/%08d", i / 100, i);
      std::string value(value_bytes, 'a' + i % 26);
      for (size_t j = 0; j < value.size(); j += 16) value[j] = char(rng());
      if (!writer.Put(key, value).ok()) return "";
    }
    if (!writer.Finish().ok()) return "";
    return path;
  }

  static Status Vet(const std::string& path, uint64_t max_block_bytes) {
    SstVetLimits limits;
    limits.max_block_bytes = max_block_bytes;
    return VetSstFile(*rocksdb::FileSystem::Default(), path, limits);
  }

  static std::string Contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  rocksdcp::testing::ScopedTempDir tmp_;
  std::string dir_;
  std::vector<std::string> written_;
};

// ---- Files RocksDB writes ----

TEST_F(SstVetTest, AcceptsEveryLayoutAndRefusesBlocksPastTheLimit) {
  const rocksdb::CompressionType compressions[] = {
      rocksdb::kNoCompression, rocksdb::kSnappyCompression,
      rocksdb::kLZ4Compression, rocksdb::kZSTD};
  const rocksdb::BlockBasedTableOptions::IndexType index_types[] = {
      rocksdb::BlockBasedTableOptions::kBinarySearch,
      rocksdb::BlockBasedTableOptions::kHashSearch,
      rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch};
  int files = 0;
  for (auto compression : compressions) {
    if (!Supported(compression)) continue;
    for (int format_version = 2; format_version <= 5; ++format_version) {
      for (auto index_type : index_types) {
        for (size_t block_size : {256, 4096}) {
          const TableConfig config{compression, format_version, index_type,
                                   block_size};
          SCOPED_TRACE(::testing::Message()
                       << "compression " << int(compression) << " fv "
                       << format_version << " index " << int(index_type)
                       << " block " << block_size);
          const std::string path = Write(config, 3000, 100);
          ASSERT_NE(path, "");
          ++files;
          EXPECT_OK(Vet(path, kGenerous));
          // Every data block holds more than 64 bytes decompressed.
          EXPECT_THAT(
              Vet(path, 64),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr(path), HasSubstr("block at offset"),
                             HasSubstr("more than the limit of 64"))));
        }
      }
    }
  }
  EXPECT_GE(files, 48);
}

TEST_F(SstVetTest, LimitAtTheLargestBlock) {
  // One value of 200000 bytes: a data block of about that size.
  const std::string path = Write({rocksdb::kZSTD}, 1, 200000);
  ASSERT_NE(path, "");
  EXPECT_OK(Vet(path, 200100));
  EXPECT_THAT(Vet(path, 199999),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("data block at offset 0"),
                             HasSubstr("claims to decompress to 2000"),
                             HasSubstr("more than the limit of 199999"))));
}

TEST_F(SstVetTest, CompressedIndexBlocksAreDecompressed) {
  // Small blocks of compressible keys: RocksDB compresses the index block,
  // which the vetting must then decompress to parse.
  for (auto compression : {rocksdb::kSnappyCompression, rocksdb::kZSTD,
                           rocksdb::kLZ4Compression}) {
    const std::string path = Write(
        {compression, 5, rocksdb::BlockBasedTableOptions::kBinarySearch, 64},
        5000, 8);
    ASSERT_NE(path, "");
    const std::string bytes = Contents(path);
    // The footer's index handle (format_version 5: 53-byte footer).
    const char* p = bytes.data() + bytes.size() - 53 + 1;
    auto varint = [&p] {
      uint64_t v = 0;
      for (int shift = 0;; shift += 7) {
        const uint8_t b = static_cast<uint8_t>(*p++);
        v |= uint64_t{b & 0x7fu} << shift;
        if (b < 0x80) return v;
      }
    };
    varint();
    varint();  // metaindex
    const uint64_t offset = varint();
    const uint64_t size = varint();
    EXPECT_EQ(static_cast<uint8_t>(bytes[offset + size]), compression)
        << "index block not compressed: the test covers less than it says";
    EXPECT_OK(VetBytes(bytes, kGenerous));
  }
}

TEST_F(SstVetTest, OldFormatVersions) {
  for (int format_version : {0, 1}) {
    const std::string plain =
        Write({rocksdb::kNoCompression, format_version}, 500, 100);
    if (plain.empty())
      GTEST_SKIP() << "RocksDB writes no format_version " << format_version;
    EXPECT_OK(Vet(plain, kGenerous));
    const std::string snappy =
        Write({rocksdb::kSnappyCompression, format_version}, 500, 100);
    ASSERT_NE(snappy, "");
    EXPECT_OK(Vet(snappy, kGenerous));  // snappy records its own size
    const std::string zstd = Write({rocksdb::kZSTD, format_version}, 500, 100);
    ASSERT_NE(zstd, "");
    EXPECT_THAT(Vet(zstd, kGenerous),
                StatusIs(StatusCode::kNotSupported,
                         HasSubstr("records no decompressed size")));
  }
}

TEST_F(SstVetTest, RefusesZlibAndFirstKeyIndex) {
  if (Supported(rocksdb::kZlibCompression)) {
    const std::string path = Write({rocksdb::kZlibCompression}, 500, 100);
    ASSERT_NE(path, "");
    EXPECT_THAT(Vet(path, kGenerous),
                StatusIs(StatusCode::kNotSupported, HasSubstr("zlib")));
  }
  const std::string path =
      Write({rocksdb::kNoCompression, 5,
             rocksdb::BlockBasedTableOptions::kBinarySearchWithFirstKey},
            500, 100);
  ASSERT_NE(path, "");
  EXPECT_THAT(Vet(path, kGenerous),
              StatusIs(StatusCode::kNotSupported,
                       HasSubstr("kBinarySearchWithFirstKey")));
}

// ---- Bombs ----

// The bomb's 64 MiB are never allocated: the vetting reads what the block
// claims, and never decompresses a data block.
TEST_F(SstVetTest, RefusesABombByWhatItClaims) {
  rocksdb::Options options;
  options.compression = rocksdb::kZSTD;
  const std::string path = dir_ + "/bomb.sst";
  {
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), options);
    ASSERT_TRUE(writer.Open(path).ok());
    written_.push_back(path);
    ASSERT_TRUE(writer.Put("bomb", std::string(64 << 20, '\0')).ok());
    ASSERT_TRUE(writer.Finish().ok());
  }
  const std::string bytes = Contents(path);
  ASSERT_LT(bytes.size(), 64u << 10);  // 64 MiB in a few KB
  const Status s = Vet(path, 1 << 20);
  EXPECT_THAT(s, StatusIs(StatusCode::kCorruption,
                          AllOf(HasSubstr("data block at offset 0"),
                                HasSubstr("claims to decompress to 671"),
                                HasSubstr("limit of 1048576"))));
}

// ---- Damaged and forged files: errors, never a crash ----

class DamagedSstTest : public SstVetTest {
 protected:
  void SetUp() override {
    SstVetTest::SetUp();
    const std::string path =
        Write({rocksdb::kSnappyCompression, 5,
               rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch, 256},
              400, 50);
    ASSERT_NE(path, "");
    good_ = Contents(path);
    ASSERT_OK(VetBytes(good_, kGenerous));
  }
  std::string good_;
};

TEST_F(DamagedSstTest, Truncated) {
  for (size_t size : {size_t{0}, size_t{10}, size_t{47}, size_t{48}, size_t{52},
                      size_t{53}, good_.size() / 2, good_.size() - 1}) {
    EXPECT_FALSE(VetBytes(good_.substr(0, size), kGenerous).ok()) << size;
  }
  // The file's start cut off: every handle now points elsewhere.
  for (size_t cut : {size_t{1}, size_t{100}, good_.size() / 2}) {
    EXPECT_FALSE(VetBytes(good_.substr(cut), kGenerous).ok()) << cut;
  }
}

TEST_F(DamagedSstTest, Garbage) {
  std::mt19937 rng(1);
  for (size_t size : {size_t{53}, size_t{100}, size_t{4096}}) {
    std::string bytes(size, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    EXPECT_THAT(VetBytes(bytes, kGenerous),
                StatusIs(StatusCode::kCorruption, HasSubstr("magic")));
    // Garbage behind a real footer.
    bytes.replace(bytes.size() - 53, 53, good_.substr(good_.size() - 53));
    EXPECT_FALSE(VetBytes(bytes, kGenerous).ok());
  }
}

TEST_F(DamagedSstTest, FlippedFooterBytes) {
  // Any bit of the magic number; of the handles and format_version, many
  // bits (the handles' padding is free to change, and so is format_version
  // 5 to 4 or 1).
  int errors = 0;
  for (size_t i = good_.size() - 53; i < good_.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bytes = good_;
      bytes[i] ^= static_cast<char>(1 << bit);
      const Status s = VetBytes(bytes, kGenerous);
      if (i >= good_.size() - 8) {
        EXPECT_THAT(s, StatusIs(StatusCode::kCorruption, HasSubstr("magic")));
      }
      if (!s.ok()) ++errors;
    }
  }
  EXPECT_GT(errors, 8 * 8 + 8 * 4);
  std::string bytes = good_;
  bytes[bytes.size() - 1] ^= 1;
  EXPECT_THAT(VetBytes(bytes, kGenerous),
              StatusIs(StatusCode::kCorruption, HasSubstr("magic")));
  bytes = good_;
  bytes[bytes.size() - 12] = 9;
  EXPECT_THAT(VetBytes(bytes, kGenerous),
              StatusIs(StatusCode::kCorruption, HasSubstr("format_version 9")));
}

TEST_F(DamagedSstTest, FlippedBytesAnywhere) {
  // Every byte of the file's last 4 KB (index, partitions, meta blocks,
  // footer), each bit: whatever the result, no crash, no sanitizer report.
  const size_t from = good_.size() > 4096 ? good_.size() - 4096 : 0;
  int errors = 0;
  for (size_t i = from; i < good_.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bytes = good_;
      bytes[i] ^= static_cast<char>(1 << bit);
      if (!VetBytes(bytes, kGenerous).ok()) ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

TEST_F(SstVetTest, ForgedClaimInATrailer) {
  // An uncompressed data block made to say zstd and to claim 1 GiB.
  // format_version 3: index values are whole handles, after a value_length.
  const std::string first =
      Write({rocksdb::kNoCompression, 3,
             rocksdb::BlockBasedTableOptions::kBinarySearch, 4096},
            1, 300000);
  ASSERT_NE(first, "");
  std::string bytes = Contents(first);
  ASSERT_OK(VetBytes(bytes, kGenerous));
  // One data block at offset 0, named by the index block's one entry.
  const char* p = bytes.data() + bytes.size() - 53 + 1;
  auto varint = [&p] {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(*p++);
      v |= uint64_t{b & 0x7fu} << shift;
      if (b < 0x80) return v;
    }
  };
  varint();
  varint();
  const uint64_t index_offset = varint();
  // The index block's only entry: shared 0, non_shared k, value_length v,
  // key, then the data block's handle (offset 0, size).
  p = bytes.data() + index_offset;
  ASSERT_EQ(p[0], 0);
  const uint8_t key_length = static_cast<uint8_t>(p[1]);
  p += 3 + key_length;
  ASSERT_EQ(varint(), 0u);
  const uint64_t data_size = varint();
  ASSERT_EQ(static_cast<uint8_t>(bytes[data_size]), 0);  // uncompressed
  bytes[data_size] = rocksdb::kZSTD;
  // 1 GiB as a varint32: 0x80 0x80 0x80 0x80 0x04.
  bytes.replace(0, 5, std::string("\x80\x80\x80\x80\x04", 5));
  EXPECT_THAT(VetBytes(bytes, 1ull << 29),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("data block at offset 0 claims to decompress "
                                 "to 1073741824 bytes")));
}

}  // namespace
}  // namespace rocksdcp
