// The child process of the kill -9 crash test (crash_test.cc): runs a
// seeded random sequence of saves, overwrites, deletes, GC and reopens on
// one store, forever, until its parent kills it.
//
//   rocksdcp_crash_child STORE SEED GEN_BASE GC_FIRST
//
// Every checkpoint it saves is MakeContent(id, gen) (checkpoint_content.h),
// with gen = GEN_BASE + the operation's number, so the parent knows every
// byte of whatever it finds. With GC_FIRST = 1 the first operation is GC,
// and the store opens without reclaiming torn saves (StoreOptions::
// reclaim_torn_saves), so that GC meets what the last kill left; else every
// open reclaims it, and a kill may land there too.
//
// It tells its parent what it does on stdout, one line each, written
// before the next step begins:
//   B <op> [<id> [<gen>]]   an operation begins (op: save, delete,
//                           materialize, gc, open)
//   D <op> [<id> [<gen>]]   it returned OK
//   P <phase>               a phase is reached; the child then waits for
//                           one byte on stdin before going on, so that the
//                           parent can kill it exactly there
//   E <message>             an operation failed (the child then exits 3)
// Phases: "opened", "write_piece" (a piece is in a staging SST file), the
// store's commit hooks "after_create_cf", "after_ingest", "after_write",
// "delete_after_catalog", "gc_after_drop_cf", "gc_removing_staging" and
// "materialize_copied" (store_impl.h).
// Two saves in three are incremental (based on the newest checkpoint), so
// deletes, overwrites and GC meet referenced column families.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "rocksdb/checkpoint_content.h"
#include "rocksdb/store_impl.h"

namespace rocksdcp::testing {
namespace {

// The ids the child works on: a few, so that saves overwrite and deletes
// hit; with '/', '.' and ' ', which staging directory names escape.
const char* const kIds[] = {"ck-0", "ck-1", "ck-2", "run/step.3", "ck 4"};

std::mutex report_mu;  // Writer threads and the commit hook report at once.

void WriteAll(const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(1, line.data() + done, line.size() - done);
    if (n <= 0) _exit(6);  // The parent is gone.
    done += static_cast<size_t>(n);
  }
}

void Report(const std::string& line) {
  std::lock_guard<std::mutex> lock(report_mu);
  WriteAll(line + "\n");
}

// Reports the phase and waits for the parent's go-ahead (or its SIGKILL).
void Phase(std::string_view phase) {
  std::lock_guard<std::mutex> lock(report_mu);
  WriteAll("P " + std::string(phase) + "\n");
  char go;
  if (read(0, &go, 1) != 1) _exit(6);
}

[[noreturn]] void Fail(const std::string& what, const Status& s) {
  Report("E " + what + ": " + s.ToString());
  std::fprintf(stderr, "crash child: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  _exit(3);
}

std::unique_ptr<Store> OpenStore(const std::string& path, bool reclaim) {
  Report("B open");
  StoreOptions options;
  options.reclaim_torn_saves = reclaim;
  auto store = Store::Open(path, options);
  if (!store.ok()) Fail("open of " + path, store.status());
  static_cast<StoreImpl*>(store->get())->TEST_SetCommitHook(Phase);
  Phase("opened");
  Report("D open");
  return std::move(store).value();
}

void SaveOne(Store& store, const std::string& id, uint64_t gen,
             bool incremental) {
  const std::string what = "save " + id + " " + std::to_string(gen);
  Report("B " + what);
  RocksDBWriterOptions options = ContentWriterOptions(gen);
  options.overwrite = true;
  options.base_on_newest = incremental;
  options.progress = [](const Progress&) { Phase("write_piece"); };
  auto writer = store.NewWriter(options);
  if (!writer.ok()) Fail(what, writer.status());
  const GeneratedContent content = MakeContent(id, gen);
  SaveOptions so;
  so.checkpoint_id = id;
  auto saved = Save(content.dict, **writer, so);
  if (!saved.ok()) Fail(what, saved.status());
  Report("D " + what);
}

int Run(const std::string& path, uint64_t seed, uint64_t gen_base,
        bool gc_first) {
  std::mt19937_64 rng(seed);
  std::unique_ptr<Store> store = OpenStore(path, /*reclaim=*/!gc_first);
  // The parent kills the child long before this; running out means it
  // stopped listening.
  for (uint64_t op = 0; op < 100000; ++op) {
    uint64_t roll = (op == 0 && gc_first) ? 88 : rng() % 100;  // 84-91: GC.
    if (roll < 75 && roll >= 50) {
      auto list = store->List();
      if (!list.ok()) Fail("list", list.status());
      if (!list->empty()) {
        const std::string id = (*list)[rng() % list->size()].id;
        Report("B delete " + id);
        if (Status s = store->Delete(id); !s.ok()) Fail("delete " + id, s);
        Report("D delete " + id);
        continue;
      }
      roll = 0;  // Nothing to delete: save instead.
    }
    if (roll < 75) {
      const std::string& id = kIds[rng() % std::size(kIds)];
      SaveOne(*store, id, gen_base + op, /*incremental=*/rng() % 3 != 0);
    } else if (roll < 84) {
      auto list = store->List();
      if (!list.ok()) Fail("list", list.status());
      if (list->empty()) continue;
      const std::string id = (*list)[rng() % list->size()].id;
      Report("B materialize " + id);
      auto m = store->Materialize(id);
      if (!m.ok()) Fail("materialize " + id, m.status());
      Report("D materialize " + id);
    } else if (roll < 92) {
      Report("B gc");
      auto gc = store->CollectGarbage();
      if (!gc.ok()) Fail("gc", gc.status());
      Report("D gc");
    } else {
      store.reset();
      store = OpenStore(path, /*reclaim=*/true);
    }
  }
  return 5;
}

}  // namespace
}  // namespace rocksdcp::testing

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr,
                 "usage: see the comment at the top of crash_child.cc\n");
    return 64;
  }
  return rocksdcp::testing::Run(argv[1], std::strtoull(argv[2], nullptr, 10),
                                std::strtoull(argv[3], nullptr, 10),
                                std::string(argv[4]) == "1");
}
