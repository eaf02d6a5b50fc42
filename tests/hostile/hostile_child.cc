// rocksdcp_hostile_child: the C++ Load of a hostile-store case, run by
// hostile_test.cc as a child process under its limits.
//
//   rocksdcp_hostile_child load STORE ID
//       Loads ID into the state dict the victim was saved from (a trainer
//       resuming its own model), then compares every byte with what was
//       saved.
//   rocksdcp_hostile_child load-mirror STORE ID
//       Reads ID's metadata and loads every item it lists into a state
//       dict shaped after it, as a generic tool would: tensors of up to
//       64 MiB whole, larger ones as a one-element shard at the origin,
//       byte items as whatever the store holds. Items that are also
//       victim items of the saved dtype and shape are compared.
//
// Exit codes: 0 loaded, and every compared byte is what was saved;
// 1 Load (or reading the metadata) returned an error, printed on stderr;
// 4 Load returned OK but a compared item differs from what was saved: a
// wrong answer; 2 bad usage.

#include <cstdio>
#include <string>

#include "hostile/victim.h"

namespace rocksdcp::hostile {
namespace {

int Failed(const Status& s) {
  std::fprintf(stderr, "rocksdcp_hostile_child: %s\n", s.ToString().c_str());
  return 1;
}

int Run(const std::string& mode, const std::string& path,
        const std::string& id) {
  StoreOptions options;
  options.read_only = true;
  options.create_if_missing = false;
  auto store = Store::Open(path, options);
  if (!store.ok()) return Failed(store.status());
  std::string wrong;
  const Status s = mode == "load" ? LoadAsModel(**store, id, &wrong)
                                  : LoadAsMirror(**store, id, &wrong);
  if (!s.ok()) return Failed(s);
  if (wrong.empty()) return 0;
  std::fprintf(stderr,
               "rocksdcp_hostile_child: Load returned OK but item '%s' is "
               "not what was saved\n",
               wrong.c_str());
  return 4;
}

int Main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s load|load-mirror STORE ID\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "load") return Run(mode, argv[2], argv[3]);
  if (mode == "load-mirror") return Run(mode, argv[2], argv[3]);
  std::fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}

}  // namespace
}  // namespace rocksdcp::hostile

int main(int argc, char** argv) {
  // Nothing is caught: a std::bad_alloc from the library ends the child
  // with SIGABRT, which the test reports as the crash it is (the library
  // promises that nothing throws).
  return rocksdcp::hostile::Main(argc, argv);
}
