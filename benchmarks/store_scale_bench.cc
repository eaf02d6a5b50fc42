// Checkpoints in one store (issue #39): what a new process pays to use a
// store as the checkpoints in it multiply. Opt-in (--checkpoints): each
// count's store is built first, 1,000 saves for the largest.
//
//   BM_StoreOpenList/checkpoints:N  Store::Open (read-only), List, close:
//                                   what `rocksdcp ls` does
//   BM_StoreOpenLoad/checkpoints:N  Store::Open (read-only), Load of the
//                                   newest checkpoint, close: a resuming
//                                   trainer's load
//   BM_StoreOpenSave/checkpoints:N  Store::Open (read-write), Save of one
//                                   more checkpoint, close: a trainer's
//                                   first save after a restart (manual
//                                   time; the checkpoint is then deleted
//                                   again, untimed, so N stays N)
//   BM_StoreOpenDelete/checkpoints:N  Store::Open (read-write), Delete of
//                                   the newest checkpoint, close (it is
//                                   saved again, untimed)
//   BM_StoreOpenGc/checkpoints:N    Store::Open (read-write),
//                                   CollectGarbage (nothing to collect),
//                                   close: `rocksdcp gc`
//   BM_RocksDBOpen/checkpoints:N    the baseline: RocksDB's own
//                                   DB::OpenForReadOnly of the store's
//                                   column families with the store's
//                                   options, then close
//
// N is 1, 100 and 1,000 (--quick: 1, 10, 100). Each checkpoint is a state
// dict of 1 MiB (W1's shape at 1 MiB, 8 tensors), saved whole; the store
// is warm (the page cache holds it), as on a node that keeps its disk.
// Counters: checkpoints, and ms per iteration.

#include <benchmark/benchmark.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "rocksdb/store_impl.h"
#include "workloads.h"

namespace rocksdcp::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kStateBytes = 1 << 20;

std::string Id(int64_t i) {
  char id[32];
  std::snprintf(id, sizeof(id), "step-%06lld", static_cast<long long>(i));
  return id;
}

StateData& Source() {
  static auto* data = new StateData(W1Spec(kStateBytes), /*seed=*/7);
  return *data;
}

// The store of `n` checkpoints, built on first use and kept for the run.
Result<std::string> StoreOf(int64_t n) {
  static auto* built = new std::map<int64_t, std::string>();
  if (auto it = built->find(n); it != built->end()) return it->second;
  const std::string dir = FreshDir("scale-" + std::to_string(n));
  {
    ROCKSDCP_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(dir));
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
    const StateDict dict = Source().Dict();
    for (int64_t i = 0; i < n; ++i) {
      ROCKSDCP_RETURN_IF_ERROR(
          Save(dict, *writer, {.checkpoint_id = Id(i)}).status());
    }
  }
  (*built)[n] = dir;
  return dir;
}

void Finish(benchmark::State& state, int64_t n, double seconds) {
  state.counters["checkpoints"] = static_cast<double>(n);
  if (state.iterations() > 0) {
    state.counters["ms"] =
        1e3 * seconds / static_cast<double>(state.iterations());
  }
}

// Runs `body` per iteration on the store of range(0) checkpoints.
template <typename Body>
void Run(benchmark::State& state, Body body) {
  const int64_t n = state.range(0);
  auto dir = StoreOf(n);
  if (!dir.ok()) {
    state.SkipWithError(dir.status().ToString().c_str());
    return;
  }
  double seconds = 0;
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    Status s = body(*dir, n);
    const double took =
        std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(took);
    seconds += took;
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  Finish(state, n, seconds);
}

StoreOptions ReadOnly() {
  StoreOptions options;
  options.read_only = true;
  return options;
}

void BM_StoreOpenList(benchmark::State& state, const Config&) {
  Run(state, [](const std::string& dir, int64_t n) -> Status {
    ROCKSDCP_ASSIGN_OR_RETURN(auto store, Store::Open(dir, ReadOnly()));
    ROCKSDCP_ASSIGN_OR_RETURN(auto list, store->List());
    if (static_cast<int64_t>(list.size()) != n) {
      return Status::Internal("listed " + std::to_string(list.size()));
    }
    return Status::OK();
  });
}

void BM_StoreOpenLoad(benchmark::State& state, const Config&) {
  static auto* dest = new StateData(W1Spec(kStateBytes), /*seed=*/0);
  Run(state, [](const std::string& dir, int64_t n) -> Status {
    ROCKSDCP_ASSIGN_OR_RETURN(auto store, Store::Open(dir, ReadOnly()));
    ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store->NewReader());
    StateDict dict = dest->Dict();
    return Load(&dict, *reader, {.checkpoint_id = Id(n - 1)});
  });
  if (!dest->SameAs(Source())) state.SkipWithError("loaded other bytes");
}

// Runs `timed` on a read-write Store of the store of range(0) checkpoints,
// then `restore` on another, untimed, to give the store its N back.
template <typename Timed, typename Restore>
void RunReadWrite(benchmark::State& state, Timed timed, Restore restore) {
  const int64_t n = state.range(0);
  auto dir = StoreOf(n);
  if (!dir.ok()) {
    state.SkipWithError(dir.status().ToString().c_str());
    return;
  }
  double seconds = 0;
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    Status s;
    {
      auto store = Store::Open(*dir);
      s = store.ok() ? timed(**store, n) : store.status();
    }
    const double took =
        std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(took);
    seconds += took;
    if (s.ok()) {
      auto store = Store::Open(*dir);
      s = store.ok() ? restore(**store, n) : store.status();
    }
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  Finish(state, n, seconds);
}

Status SaveAs(Store& store, const std::string& id) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store.NewWriter());
  return Save(Source().Dict(), *writer, {.checkpoint_id = id}).status();
}

void BM_StoreOpenSave(benchmark::State& state, const Config&) {
  RunReadWrite(
      state, [](Store& store, int64_t n) { return SaveAs(store, Id(n)); },
      [](Store& store, int64_t n) { return store.Delete(Id(n)); });
}

void BM_StoreOpenDelete(benchmark::State& state, const Config&) {
  RunReadWrite(
      state, [](Store& store, int64_t n) { return store.Delete(Id(n - 1)); },
      [](Store& store, int64_t n) { return SaveAs(store, Id(n - 1)); });
}

void BM_StoreOpenGc(benchmark::State& state, const Config&) {
  RunReadWrite(
      state,
      [](Store& store, int64_t) -> Status {
        ROCKSDCP_ASSIGN_OR_RETURN(GcReport report, store.CollectGarbage());
        if (!report.dropped_column_families.empty()) {
          return Status::Internal("gc dropped a live checkpoint");
        }
        return Status::OK();
      },
      [](Store&, int64_t) { return Status::OK(); });
}

void BM_RocksDBOpen(benchmark::State& state, const Config&) {
  Run(state, [](const std::string& dir, int64_t) -> Status {
    rocksdb::DBOptions db_options;
    std::vector<std::string> names;
    rocksdb::Status s =
        rocksdb::DB::ListColumnFamilies(db_options, dir, &names);
    const rocksdb::Options cf_options = CheckpointColumnFamilyOptions();
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& name : names) {
      descriptors.emplace_back(name,
                               name == rocksdb::kDefaultColumnFamilyName
                                   ? CatalogColumnFamilyOptions()
                                   : rocksdb::ColumnFamilyOptions(cf_options));
    }
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    if (s.ok()) {
      s = rocksdb::DB::OpenForReadOnly(db_options, dir, descriptors, &handles,
                                       &db);
    }
    for (rocksdb::ColumnFamilyHandle* h : handles) {
      db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    delete db;
    return s.ok() ? Status::OK() : Status::IOError(s.ToString());
  });
}

}  // namespace

void RegisterStoreScaleBenchmarks(const Config& config) {
  const std::vector<int64_t> counts = config.quick
                                          ? std::vector<int64_t>{1, 10, 100}
                                          : std::vector<int64_t>{1, 100, 1000};
  for (auto [name, fn] : std::vector<std::pair<const char*, CaseFn>>{
           {"BM_RocksDBOpen", BM_RocksDBOpen},
           {"BM_StoreOpenList", BM_StoreOpenList},
           {"BM_StoreOpenLoad", BM_StoreOpenLoad},
           {"BM_StoreOpenSave", BM_StoreOpenSave},
           {"BM_StoreOpenDelete", BM_StoreOpenDelete},
           {"BM_StoreOpenGc", BM_StoreOpenGc}}) {
    auto* b = Register(name, fn, config);
    // Manual time (not SetCommon's real time): what gives the store its N
    // back after a save or delete is left out.
    b->ArgName("checkpoints")
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(config.quick ? 1 : 5);
    for (int64_t n : counts) b->Arg(n);
  }
}

}  // namespace rocksdcp::bench
