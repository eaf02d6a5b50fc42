// docs/errors.md lists every error a user can meet, each with its exact
// message. This test makes each one happen and checks it against the row of
// that document with the same name, so the two cannot drift apart: a row
// without a scenario here, a scenario without a row, or a message that
// differs by a character fails it. ROCKSDCP_PRINT_ERRORS=1 prints the rows
// as the code produces them, to paste into the document.

#include <dlpack/dlpack.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <regex>

#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/child_process.h"
#include "rocksdb/fault_fs.h"
#include "rocksdb/raw_store.h"
#include "rocksdb/store_fixture.h"
#include "rocksdb/store_impl.h"

namespace rocksdcp::testing {
namespace {

const char kDoc[] = ROCKSDCP_SOURCE_DIR "/docs/errors.md";

using Row = ErrorDocRow;

// The core's rows. Rows named torch-... are the LibTorch adapter's, which
// tests/torch/torch_errors_test.cc checks, and python-... the Python
// package's, which tests/python/torch2/test_errors_doc.py checks.
std::map<std::string, Row> ReadDoc() {
  std::map<std::string, Row> rows = ReadErrorDoc(kDoc, "");
  std::erase_if(rows, [](const auto& r) {
    return r.first.rfind("torch-", 0) == 0 || r.first.rfind("python-", 0) == 0;
  });
  return rows;
}

// The scenarios, by row name, in the document's order.
const char* const kScenarios[] = {
    "id-empty",
    "id-too-long",
    "id-control-character",
    "id-reserved",
    "id-exists",
    "id-unknown",
    "dtype-mismatch",
    "shape-mismatch",
    "fqn-missing",
    "partial-load-with-planner",
    "tensor-too-large",
    "tensor-null-data",
    "tensor-not-on-cpu",
    "piece-size-out-of-range",
    "compression-level-out-of-range",
    "read-threads-negative",
    "save-id-invalid",
    "store-missing",
    "store-not-a-directory",
    "store-permission-denied",
    "store-locked",
    "read-only-save",
    "piece-corrupt",
    "disk-full",
    "catalog-names-another-checkpoint",
    "catalog-column-family-missing",
    "metadata-claims-more-than-stored",
    "metadata-lists-more-than-stored",
    "base-unknown",
    "reference-column-family-missing",
};

class ErrorTableTest : public StoreTest,
                       public ::testing::WithParamInterface<const char*> {
 protected:
  // Saves checkpoints a and b, closes the store, damages it with `forge`,
  // opens it again and loads a.
  Status LoadForged(const std::function<void()>& forge,
                    bool read_only = false) {
    for (const auto& [id, seed] : {std::pair{"a", 1}, std::pair{"b", 2}}) {
      ROCKSDCP_RETURN_IF_ERROR(
          SaveDict(ExampleStateDict(seed).dict, id).status());
    }
    CloseStore();
    forge();
    OpenStore({.read_only = read_only});
    ExampleState into = EmptyExampleStateDict();
    return LoadDict(&into.dict, "a");
  }

  // Runs the scenario, then writes the store path as <store>, the test's
  // temp directory as <tmp> and random names as <random>, so the message
  // does not depend on them.
  Row Produce(const std::function<Status()>& scenario) {
    const Status s = scenario();
    std::string message = s.message();
    for (const auto& [path, name] :
         {std::pair{store_path(), "<store>"},
          std::pair{dir_.path().string(), "<tmp>"}}) {
      for (size_t at; (at = message.find(path)) != std::string::npos;) {
        message.replace(at, path.size(), name);
      }
    }
    // A writer's staging directory is <id>.<random hex>.
    message = std::regex_replace(message, std::regex(R"(\.[0-9a-f]{32}/)"),
                                 ".<random>/");
    return {std::string(StatusCodeName(s.code())), message};
  }

  // Every scenario: a user's call that fails, by row name.
  std::map<std::string, std::function<Status()>> Scenarios() {
    std::map<std::string, std::function<Status()>> s;
    auto save_as = [this](std::string id) {
      return [this, id] {
        ExampleState state = ExampleStateDict(1);
        return SaveDict(state.dict, id).status();
      };
    };
    s["id-empty"] = save_as("");
    s["id-too-long"] = save_as(std::string(129, 'a'));
    s["id-control-character"] = save_as("step\t100");
    s["id-reserved"] = save_as("default");
    s["id-exists"] = [this] {
      ExampleState state = ExampleStateDict(1);
      ROCKSDCP_RETURN_IF_ERROR(SaveDict(state.dict, "step-100").status());
      return SaveDict(state.dict, "step-100").status();
    };
    s["id-unknown"] = [this] {
      ExampleState into = EmptyExampleStateDict();
      return LoadDict(&into.dict, "step-100");
    };
    s["dtype-mismatch"] = [this] {
      OwnedTensor w = RandomTensor(DType::kBFloat16, {4, 8}, 1);
      ROCKSDCP_RETURN_IF_ERROR(SaveDict({{"layer.w", w.view}}, "c").status());
      OwnedTensor into = ZeroTensor(DType::kFloat32, {4, 8});
      StateDict sd{{"layer.w", into.view}};
      return LoadDict(&sd, "c");
    };
    s["shape-mismatch"] = [this] {
      OwnedTensor w = RandomTensor(DType::kBFloat16, {4, 8}, 1);
      ROCKSDCP_RETURN_IF_ERROR(SaveDict({{"layer.w", w.view}}, "c").status());
      OwnedTensor into = ZeroTensor(DType::kBFloat16, {8, 4});
      StateDict sd{{"layer.w", into.view}};
      return LoadDict(&sd, "c");
    };
    s["fqn-missing"] = [this] {
      OwnedTensor w = RandomTensor(DType::kFloat32, {4}, 1);
      ROCKSDCP_RETURN_IF_ERROR(SaveDict({{"layer.w", w.view}}, "c").status());
      OwnedTensor into = ZeroTensor(DType::kFloat32, {4});
      StateDict sd{{"layer.w", into.view}, {"layer.b", into.view}};
      return LoadDict(&sd, "c");
    };
    s["partial-load-with-planner"] = [this]() -> Status {
      OwnedTensor w = RandomTensor(DType::kFloat32, {4}, 1);
      ROCKSDCP_RETURN_IF_ERROR(SaveDict({{"layer.w", w.view}}, "c").status());
      OwnedTensor into = ZeroTensor(DType::kFloat32, {4});
      StateDict sd{{"layer.w", into.view}};
      ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store_->NewReader());
      DefaultLoadPlanner planner;
      return Load(&sd, *reader,
                  {.checkpoint_id = "c",
                   .planner = &planner,
                   .allow_partial_load = true});
    };
    s["store-locked"] = [this] {
      CloseStore();
      LockHolder holder(store_path());
      EXPECT_TRUE(holder.ready());
      return Store::Open(store_path()).status();
    };
    s["store-missing"] = [this] {
      CloseStore();
      return Store::Open(dir_.Sub("nowhere"), {.create_if_missing = false})
          .status();
    };
    s["store-not-a-directory"] = [this] {
      const std::string file = dir_.Sub("file");
      std::ofstream(file) << "not a store";
      return Store::Open(file).status();
    };
    // A directory this process may not read: mode 000 to a user other than
    // root, which reads everything, so root opens it as nobody.
    s["store-permission-denied"] = [this] {
      CloseStore();
      const std::string path = store_path();
      EXPECT_EQ(chmod(dir_.path().c_str(), 0755), 0);
      EXPECT_EQ(chmod(path.c_str(), 0), 0);
      const bool root = geteuid() == 0;
      if (root) {
        EXPECT_EQ(seteuid(65534), 0) << std::strerror(errno);
      }
      Status s = Store::Open(path, {.read_only = true}).status();
      if (root) {
        EXPECT_EQ(seteuid(0), 0) << std::strerror(errno);
      }
      EXPECT_EQ(chmod(path.c_str(), 0755), 0);
      return s;
    };
    s["read-only-save"] = [this] {
      CloseStore();
      OpenStore({.read_only = true});
      ExampleState state = ExampleStateDict(1);
      return SaveDict(state.dict, "c").status();
    };
    s["piece-corrupt"] = [this] {
      OwnedTensor w = RandomTensor(DType::kUInt8, {4, 4096}, 1);
      ROCKSDCP_RETURN_IF_ERROR(
          SaveDict({{"w", w.view}}, "c", {.max_piece_bytes = 4096}).status());
      CloseStore();
      std::vector<std::string> ssts = SstFiles();
      EXPECT_FALSE(ssts.empty());
      if (!ssts.empty()) FlipByte(ssts[0], 2 * 4096 + 100);
      OpenStore();
      OwnedTensor into = ZeroTensor(DType::kUInt8, {4, 4096});
      StateDict sd{{"w", into.view}};
      return LoadDict(&sd, "c");
    };
    s["tensor-too-large"] = [this] {
      std::vector<uint8_t> byte(1);
      TensorView huge;
      huge.dtype = DType::kFloat32;
      huge.sizes = {int64_t{1} << 31, int64_t{1} << 31};
      huge.data = byte.data();
      return SaveDict({{"huge", huge}}, "c").status();
    };
    s["tensor-null-data"] = [this] {
      TensorView t;
      t.dtype = DType::kFloat32;
      t.sizes = {4};
      return SaveDict({{"w", t}}, "c").status();
    };
    s["tensor-not-on-cpu"] = [] {
      float data[4] = {};
      int64_t shape[1] = {4};
      DLTensor t{};
      t.data = data;
      t.device = {kDLCUDA, 0};
      t.ndim = 1;
      t.dtype = {kDLFloat, 32, 1};
      t.shape = shape;
      return FromDLPack(t).status();
    };
    s["disk-full"] = [this] {
      // The disk fills up while the save writes its staging file.
      CloseStore();
      auto fs = std::make_shared<FaultFs>(dir_.path().string());
      ROCKSDCP_ASSIGN_OR_RETURN(store_, StoreImpl::Open(store_path(), {}, fs));
      fs->InjectFault(1, kOpWrite, FaultType::kNoSpace, /*sticky=*/true);
      ExampleState state = ExampleStateDict(1);
      return SaveDict(state.dict, "step-100").status();
    };
    s["piece-size-out-of-range"] = [this] {
      return store_->NewWriter({.max_piece_bytes = 0}).status();
    };
    s["save-id-invalid"] = [this]() -> Status {
      ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store_->NewWriter());
      return writer->ResetWithSaveId("step-100", "../x");
    };
    s["compression-level-out-of-range"] = [this] {
      return store_
          ->NewWriter({.compression = Compression::kBytePlaneZstd,
                       .compression_level = 22})
          .status();
    };
    s["read-threads-negative"] = [this] {
      return store_->NewReader({.read_threads = -1}).status();
    };
    // Stores damaged, or forged, through RocksDB and the schema.
    s["catalog-names-another-checkpoint"] = [this] {
      return LoadForged([this] {
        RawStore raw(store_path());
        raw.Put("default", keys::CatalogKey("a"),
                raw.Get("default", keys::CatalogKey("b")));
      });
    };
    s["catalog-column-family-missing"] = [this] {
      return LoadForged(
          [this] {
            EditCatalogEntry(store_path(), "a", [](CheckpointInfo& e) {
              e.column_family = "gone";
            });
          },
          /*read_only=*/true);
    };
    s["metadata-claims-more-than-stored"] = [this] {
      return LoadForged([this] {
        RewriteMetadata(store_path(), "a", [](Metadata& md) {
          std::string& value =
              md.storage_data.at(MetadataIndex("optimizer/state"));
          format::StorageInfo info = *format::DecodeStorageInfo(value);
          info.length = uint64_t{64} << 30;
          info.piece_bytes = uint64_t{1} << 30;
          info.num_pieces = 64;
          // What numbers the pieces goes, or the decoder refuses it first.
          info.piece_hashes.clear();
          info.piece_offsets.clear();
          info.file_first_key_xxh3 = 0;
          value = format::EncodeStorageInfo(info);
        });
      });
    };
    s["metadata-lists-more-than-stored"] = [this] {
      return LoadForged([this] {
        RewriteMetadata(store_path(), "a", [](Metadata& md) {
          auto& t = std::get<TensorStorageMetadata>(
              md.state_dict_metadata.at("model.norm.bias"));
          t.size = {100000};
          t.chunks.clear();
          for (int64_t i = 0; i < 100000; ++i) t.chunks.push_back({{i}, {1}});
        });
      });
    };
    s["base-unknown"] = [this] {
      ExampleState state = ExampleStateDict(1);
      return SaveDict(state.dict, "step-200", {.base = "step-100"}).status();
    };
    s["reference-column-family-missing"] = [this] {
      ExampleState state = ExampleStateDict(1);
      ROCKSDCP_RETURN_IF_ERROR(SaveDict(state.dict, "step-100").status());
      ROCKSDCP_RETURN_IF_ERROR(
          SaveDict(state.dict, "step-200", {.base = "step-100"}).status());
      CloseStore();
      // A damaged catalog entry that no longer lists what it references.
      EditCatalogEntry(store_path(), "step-200", [](CheckpointInfo& e) {
        e.referenced_column_families = {"gone"};
      });
      OpenStore({.read_only = true});
      ExampleState into = EmptyExampleStateDict();
      return LoadDict(&into.dict, "step-200");
    };
    return s;
  }
};

TEST_P(ErrorTableTest, MessageIsTheDocumentedOne) {
  const std::string name = GetParam();
  auto scenarios = Scenarios();
  ASSERT_TRUE(scenarios.count(name) > 0) << "no scenario " << name;
  EXPECT_TRUE(IsDocumentedError(ReadDoc(), name, Produce(scenarios[name])));
}

INSTANTIATE_TEST_SUITE_P(Docs, ErrorTableTest, ::testing::ValuesIn(kScenarios),
                         ErrorRowTestName);

TEST(ErrorTableDocTest, EveryRowHasAScenario) {
  const std::map<std::string, Row> doc = ReadDoc();
  EXPECT_EQ(doc.size(), std::size(kScenarios));
  for (const char* name : kScenarios) {
    EXPECT_TRUE(doc.count(name) > 0) << "docs/errors.md lacks `" << name << "`";
  }
}

}  // namespace
}  // namespace rocksdcp::testing
