// The StorageWriter / StorageReader contract as a GoogleTest suite that any
// backend can run, as tensorstore's kvstore/test_util is for its key-value
// stores. rocksdcp runs it against its RocksDB store and its in-memory
// reference storage; a backend of one's own, or a wrapper around
// rocksdcp's store (encryption, a remote copy, metrics), runs the same
// cases:
//
//   #include "rocksdcp/testing/storage_contract.h"
//
//   using rocksdcp::testing::StorageBackend;
//   class MyBackend : public StorageBackend { ... };
//
//   rocksdcp::Result<std::unique_ptr<StorageBackend>> OpenMine(
//       const std::string& dir) {
//     return std::unique_ptr<StorageBackend>(std::make_unique<MyBackend>(dir));
//   }
//   const int kRegistered = rocksdcp::testing::RegisterStorageContractTests(
//       {.name = "Mine",
//        .open = OpenMine,
//        .features = {.checkpoint_id_rules = false}});
//
// and links rocksdcp::testing (find_package(rocksdcp COMPONENTS testing))
// and GTest::gtest_main. The cases are GoogleTest tests named
// StorageContract/<name>.<case>; each gets a fresh backend in a fresh
// directory, and drives it through Save and Load as a trainer would, or
// through the storage calls themselves where the contract is about them.
// A backend that lacks a feature leaves that feature's cases out.
//
// Part of rocksdcp::testing, which links GoogleTest and GoogleMock.

#ifndef ROCKSDCP_TESTING_STORAGE_CONTRACT_H_
#define ROCKSDCP_TESTING_STORAGE_CONTRACT_H_

#include <functional>
#include <memory>
#include <string>

#include "rocksdcp/status.h"
#include "rocksdcp/storage.h"

namespace rocksdcp::testing {

// One open backend: the writers and readers of one store. The suite
// destroys every writer and reader before the backend.
//
// Thread safety: the multi-rank cases make every rank's writer or reader
// on the test's thread, then use each from its rank's thread at once.
class StorageBackend {
 public:
  virtual ~StorageBackend() = default;
  // A fresh writer. With `overwrite`, saving an id that is committed
  // replaces that checkpoint when the save commits.
  virtual Result<std::unique_ptr<StorageWriter>> NewWriter(bool overwrite) = 0;
  virtual Result<std::unique_ptr<StorageReader>> NewReader() = 0;
};

// What a backend promises beyond the contract every backend keeps (saves
// round-trip every dtype, shape, layout and fqn; nothing of a save is
// visible before Finish; a load reshards; a missing checkpoint or fqn is
// NotFound; ReleaseData once per written item). Each flag adds its cases.
struct StorageContractFeatures {
  // Checkpoint ids follow rocksdcp's rule (1-128 bytes, no control
  // characters, not "default"): Reset of another id is InvalidArgument
  // naming the id, on a writer and on a reader.
  // Default: true
  bool checkpoint_id_rules = true;
  // Saving an id that is committed is AlreadyExists and leaves the
  // checkpoint untouched, unless the writer was made with overwrite, whose
  // save replaces it.
  // Default: true
  bool overwrite_protection = true;
  // While one writer saves an id, another coordinator's
  // SetUpStorageWriter for that id is Busy, naming it; other ids save.
  // Default: true
  bool busy_on_concurrent_saves = true;
  // GetStorageMeta() and ReadMetadata() report rocksdcp's StorageMeta: the
  // committed metadata carries the checkpoint id and a save id fresh for
  // each Reset; each ReadMetadata adds a fresh load id.
  // Default: true
  bool storage_meta = true;
  // Many ranks save and load one checkpoint, each with its own writer or
  // reader of the backend, over a ThreadCollective; a load may use a
  // different world size than the save.
  // Default: true
  bool multi_rank = true;
};

struct StorageContractBackend {
  // Names the suite, StorageContract/<name>: letters, digits and '_'.
  std::string name;
  // Opens a fresh backend that keeps its files, if any, under `dir`, a
  // directory that does not exist yet, under a fresh directory of the
  // test's own (removed with everything in it after the test).
  std::function<Result<std::unique_ptr<StorageBackend>>(const std::string& dir)>
      open;
  StorageContractFeatures features;
};

// Registers the suite's cases for `backend` with GoogleTest, and returns
// how many it registered. Call it before RUN_ALL_TESTS, e.g. from a
// namespace-scope initializer of the test program, once per backend.
int RegisterStorageContractTests(const StorageContractBackend& backend);

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTING_STORAGE_CONTRACT_H_
