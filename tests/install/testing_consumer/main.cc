// A backend of the user's own, here a wrapper around rocksdcp's store that
// counts what it writes, checked with rocksdcp's storage contract suite:
// once with every feature, once with none, to show the flags select cases.
// Exits 0 only if every registered case ran and passed.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "rocksdcp/rocksdb_store.h"
#include "rocksdcp/testing/storage_contract.h"

namespace {

using rocksdcp::Result;
using rocksdcp::StorageReader;
using rocksdcp::StorageWriter;

std::atomic<long> g_written_items{0};

// Forwards everything to rocksdcp's writer; counts the items written.
class CountingWriter : public rocksdcp::StorageWriterWrapper {
 public:
  explicit CountingWriter(std::unique_ptr<StorageWriter> inner)
      : StorageWriterWrapper(inner.get()), inner_(std::move(inner)) {}
  rocksdcp::Status Finish(
      rocksdcp::Metadata* metadata,
      const std::vector<std::vector<rocksdcp::WriteResult>>& results) override {
    for (const auto& rank : results) g_written_items += rank.size();
    return StorageWriterWrapper::Finish(metadata, results);
  }

 private:
  std::unique_ptr<StorageWriter> inner_;
};

class WrappedStore : public rocksdcp::testing::StorageBackend {
 public:
  explicit WrappedStore(std::unique_ptr<rocksdcp::Store> store)
      : store_(std::move(store)) {}
  Result<std::unique_ptr<StorageWriter>> NewWriter(bool overwrite) override {
    rocksdcp::RocksDBWriterOptions options;
    options.overwrite = overwrite;
    auto writer = store_->NewWriter(options);
    if (!writer.ok()) return writer.status();
    return std::unique_ptr<StorageWriter>(
        std::make_unique<CountingWriter>(std::move(*writer)));
  }
  Result<std::unique_ptr<StorageReader>> NewReader() override {
    auto reader = store_->NewReader();
    if (!reader.ok()) return reader.status();
    return std::unique_ptr<StorageReader>(std::move(*reader));
  }

 private:
  std::unique_ptr<rocksdcp::Store> store_;
};

Result<std::unique_ptr<rocksdcp::testing::StorageBackend>> Open(
    const std::string& dir) {
  auto store = rocksdcp::Store::Open(dir);
  if (!store.ok()) return store.status();
  return std::unique_ptr<rocksdcp::testing::StorageBackend>(
      std::make_unique<WrappedStore>(std::move(*store)));
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int all = rocksdcp::testing::RegisterStorageContractTests(
      {.name = "Wrapped", .open = Open});
  const int some = rocksdcp::testing::RegisterStorageContractTests(
      {.name = "WrappedNoFeatures",
       .open = Open,
       .features = {.checkpoint_id_rules = false,
                    .overwrite_protection = false,
                    .busy_on_concurrent_saves = false,
                    .storage_meta = false,
                    .multi_rank = false}});
  if (RUN_ALL_TESTS() != 0) return 1;
  const int ran = ::testing::UnitTest::GetInstance()->successful_test_count();
  std::printf(
      "contract: %d cases with every feature, %d with none; %d passed, "
      "%ld items written\n",
      all, some, ran, g_written_items.load());
  return some > 0 && some < all && ran == all + some && g_written_items > 0 ? 0
                                                                            : 1;
}
