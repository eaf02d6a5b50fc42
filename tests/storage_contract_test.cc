// The storage contract suite (rocksdcp/testing/storage_contract.h), written
// once and run on rocksdcp's two backends: the RocksDB store, and the
// in-memory reference storage that core tests use in its place. The cases
// themselves live in rocksdcp::testing, the installed kit, so that a
// backend written outside rocksdcp runs the same ones.

#include "rocksdcp/testing/storage_contract.h"

#include <memory>
#include <string>

#include "memory_storage.h"
#include "rocksdcp/store.h"

namespace rocksdcp {
namespace {

using ::rocksdcp::testing::RegisterStorageContractTests;
using ::rocksdcp::testing::StorageBackend;

class MemoryBackend : public StorageBackend {
 public:
  Result<std::unique_ptr<StorageWriter>> NewWriter(bool overwrite) override {
    return std::unique_ptr<StorageWriter>(
        storage_.NewWriter({.overwrite = overwrite}));
  }
  Result<std::unique_ptr<StorageReader>> NewReader() override {
    return std::unique_ptr<StorageReader>(storage_.NewReader());
  }

 private:
  testing::MemoryStorage storage_;
};

class RocksDBBackend : public StorageBackend {
 public:
  explicit RocksDBBackend(std::unique_ptr<Store> store)
      : store_(std::move(store)) {}
  Result<std::unique_ptr<StorageWriter>> NewWriter(bool overwrite) override {
    RocksDBWriterOptions options;
    options.overwrite = overwrite;
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store_->NewWriter(options));
    return std::unique_ptr<StorageWriter>(std::move(writer));
  }
  Result<std::unique_ptr<StorageReader>> NewReader() override {
    ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store_->NewReader());
    return std::unique_ptr<StorageReader>(std::move(reader));
  }

 private:
  // Outlives every writer and reader: the suite destroys those first.
  std::unique_ptr<Store> store_;
};

// Every feature of the suite: both backends keep all of rocksdcp's promises.
const int kMemoryCases = RegisterStorageContractTests(
    {.name = "Memory",
     .open = [](const std::string&) -> Result<std::unique_ptr<StorageBackend>> {
       return std::unique_ptr<StorageBackend>(
           std::make_unique<MemoryBackend>());
     }});

const int kRocksDBCases = RegisterStorageContractTests(
    {.name = "RocksDB",
     .open =
         [](const std::string& dir) -> Result<std::unique_ptr<StorageBackend>> {
       ROCKSDCP_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                                 Store::Open(dir));
       return std::unique_ptr<StorageBackend>(
           std::make_unique<RocksDBBackend>(std::move(store)));
     }});

}  // namespace
}  // namespace rocksdcp
