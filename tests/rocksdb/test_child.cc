// A child process for the store tests: holds a store's lock, or saves a
// checkpoint and dies (_exit, no cleanup) at a chosen point, as a crash would.
//
//   rocksdcp_test_child hold STORE
//       opens STORE read-write, prints "ready", waits for stdin to close.
//   rocksdcp_test_child save STORE ID SEED STAGE
//       saves the state dict ExampleStateDict(SEED) as ID (overwrite on) and
//       _exits at STAGE: before_finish, after_create_cf, after_ingest,
//       after_write, or never.
//   rocksdcp_test_child open STORE rw|ro
//       opens STORE read-write or read-only and lists it; prints "OK" and
//       the ids, or the Status, and exits 0 or 3.
//   rocksdcp_test_child churn STORE N
//       saves checkpoints c0 .. c<N-1> (ExampleStateDict(i % 7 + 1)),
//       keeping the newest 2 after each and collecting garbage every 4th:
//       commits and deletes for the readers of another process to race.
//   rocksdcp_test_child save-mib STORE ID MIB
//       saves MIB MiB of RandomTensor(uint8, seed 7) as ID; exits 0 when
//       it committed, 3 (printing the Status) when a call failed.
//   rocksdcp_test_child load-capped STORE ID FQN MIB
//       opens STORE read-only, caps its address space (RLIMIT_AS) at what
//       it uses then plus MIB MiB, and loads byte item FQN of ID; prints
//       "OK" or the Status and exits 0 or 3. Running out of memory must
//       be a Status, never an abort.

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "rocksdb/store_fixture.h"
#include "rocksdb/store_impl.h"

namespace rocksdcp::testing {
namespace {

// Forwards to a real writer, but dies instead of finishing.
class DieBeforeFinish final : public StorageWriterWrapper {
 public:
  using StorageWriterWrapper::StorageWriterWrapper;
  Status Finish(Metadata*,
                const std::vector<std::vector<WriteResult>>&) override {
    _exit(0);
  }
};

int Hold(const std::string& path) {
  auto store = Store::Open(path);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 2;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  return 0;
}

int SaveAndDie(const std::string& path, const std::string& id, uint64_t seed,
               const std::string& stage) {
  auto store = Store::Open(path);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 2;
  }
  static_cast<StoreImpl*>(store->get())
      ->TEST_SetCommitHook([stage](std::string_view at) {
        if (at == stage) _exit(0);
      });
  RocksDBWriterOptions wo;
  wo.overwrite = true;
  wo.max_piece_bytes = 4096;
  auto writer = (*store)->NewWriter(wo);
  if (!writer.ok()) return 2;
  ExampleState state = ExampleStateDict(seed);
  DieBeforeFinish dying(writer->get());
  StorageWriter& w = stage == "before_finish"
                         ? static_cast<StorageWriter&>(dying)
                         : static_cast<StorageWriter&>(**writer);
  SaveOptions so;
  so.checkpoint_id = id;
  auto saved = Save(state.dict, w, so);
  if (!saved.ok()) {
    std::fprintf(stderr, "%s\n", saved.status().ToString().c_str());
    return 3;
  }
  return stage == "never" ? 0 : 4;  // The stage was never reached.
}

int OpenAndList(const std::string& path, const std::string& mode) {
  StoreOptions options;
  options.read_only = mode == "ro";
  options.create_if_missing = false;
  auto store = Store::Open(path, options);
  Result<std::vector<CheckpointInfo>> list =
      store.ok() ? (*store)->List()
                 : Result<std::vector<CheckpointInfo>>(store.status());
  if (!list.ok()) {
    std::printf("%s\n", list.status().ToString().c_str());
    return 3;
  }
  std::printf("OK");
  for (const CheckpointInfo& c : *list) std::printf(" %s", c.id.c_str());
  std::printf("\n");
  return 0;
}

int Churn(const std::string& path, int n) {
  Status s = [&]() -> Status {
    ROCKSDCP_ASSIGN_OR_RETURN(auto store, Store::Open(path));
    for (int i = 0; i < n; ++i) {
      ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
      ExampleState state = ExampleStateDict(i % 7 + 1);
      SaveOptions so;
      so.checkpoint_id = "c" + std::to_string(i);
      ROCKSDCP_RETURN_IF_ERROR(Save(state.dict, *writer, so).status());
      ROCKSDCP_RETURN_IF_ERROR(store->KeepLast(2).status());
      if (i % 4 == 3)
        ROCKSDCP_RETURN_IF_ERROR(store->CollectGarbage().status());
    }
    return Status::OK();
  }();
  if (s.ok()) return 0;
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 3;
}

int SaveMib(const std::string& path, const std::string& id, int64_t mib) {
  Status s = [&]() -> Status {
    ROCKSDCP_ASSIGN_OR_RETURN(auto store, Store::Open(path));
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
    OwnedTensor data = RandomTensor(DType::kUInt8, {mib << 20}, 7);
    SaveOptions so;
    so.checkpoint_id = id;
    return Save({{"data", data.view}}, *writer, so).status();
  }();
  if (s.ok()) return 0;
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 3;
}

// This process's address space (VmSize), in bytes.
uint64_t AddressSpaceBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) {
      return std::stoull(line.substr(7)) << 10;  // "VmSize:  1234 kB"
    }
  }
  return 0;
}

int LoadCapped(const std::string& path, const std::string& id,
               const std::string& fqn, int64_t mib) {
  auto store =
      Store::Open(path, {.create_if_missing = false, .read_only = true});
  if (!store.ok()) {
    std::printf("%s\n", store.status().ToString().c_str());
    return 2;
  }
  auto reader = (*store)->NewReader();
  if (!reader.ok()) return 2;
  StateDict dict = {{fqn, std::string()}};
  const rlim_t cap = AddressSpaceBytes() + (static_cast<uint64_t>(mib) << 20);
  const rlimit limit{cap, cap};
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 2;
  Status s = Load(&dict, **reader, {.checkpoint_id = id});
  std::printf("%s\n", s.ToString().c_str());
  return s.ok() ? 0 : 3;
}

}  // namespace
}  // namespace rocksdcp::testing

int main(int argc, char** argv) {
  using namespace rocksdcp::testing;
  if (argc == 3 && std::strcmp(argv[1], "hold") == 0) return Hold(argv[2]);
  if (argc == 4 && std::strcmp(argv[1], "churn") == 0) {
    return Churn(argv[2], std::stoi(argv[3]));
  }
  if (argc == 4 && std::strcmp(argv[1], "open") == 0) {
    return OpenAndList(argv[2], argv[3]);
  }
  if (argc == 5 && std::strcmp(argv[1], "save-mib") == 0) {
    return SaveMib(argv[2], argv[3], std::stoll(argv[4]));
  }
  if (argc == 6 && std::strcmp(argv[1], "load-capped") == 0) {
    return LoadCapped(argv[2], argv[3], argv[4], std::stoll(argv[5]));
  }
  if (argc == 6 && std::strcmp(argv[1], "save") == 0) {
    return SaveAndDie(argv[2], argv[3], std::stoull(argv[4]), argv[5]);
  }
  std::fprintf(stderr, "usage: see the comment at the top of test_child.cc\n");
  return 64;
}
