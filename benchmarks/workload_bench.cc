// rocksdcp's Save() and Load() on the workloads (workloads.h), each
// paired by ratios.py with the baselines of the same workload
// (baselines_bench.cc), measured just before it in the same run.
//
//   BM_Save/wl:N/reuse:R        Save() as a new checkpoint id, with
//                               RocksDBWriterOptions::reuse_buffers = R
//                               (both on W1 and W2; W3 runs the default)
//   BM_Load/wl:N/cold:C/reuse:R Load() into zeroed buffers, warm or cold;
//                               reuse:0 opens the store with
//                               read_buffer_pool_bytes = 0 (W1 and W2,
//                               warm only)
//   BM_LoadResharded/wl:4/cold:C  W4: W2 saved by 2 thread ranks, each
//                               holding half the rows of every tensor,
//                               loaded by 3 ranks holding a third each
//   BM_AsyncSaveW2              AsyncCheckpointer::Save of W2 next to a
//                               synchronous Save() of it, in one case
//   BM_RssSave/gib:N, BM_RssAsyncSave/gib:N, BM_RssLoad/gib:N
//                               (--rss_gib=N only) an N GiB state dict,
//                               saved, saved through an AsyncCheckpointer,
//                               and loaded cold, once each
//
// --profile=small runs these cases with SmallDeviceProfile()'s options
// (rocksdcp/device_profile.h) instead of the defaults.
//
// Every case reports peak_rss_mib and rss_added_mib (bench_util.h,
// RssMeter): what the case added above its inputs, which are allocated
// before it starts. For loads the window opens before the untimed first
// load, so that buffers the store keeps between loads count. A save uses one
// writer for all its iterations, as a trainer does (with reuse_buffers, the
// writer keeps its buffers from one save to the next); a load makes a new
// reader per iteration, as a restarted trainer does.

#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "rocksdcp/rocksdcp.h"
#include "workloads.h"

namespace rocksdcp::bench {
namespace {

// AsyncSaveW2 wants a clock for its phases; ratios.py uses its counters.
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

Status SaveOnce(Store& store, const StateDict& dict, const std::string& id,
                const Config& config) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer,
                            store.NewWriter(WriterOptions(config)));
  return Save(dict, *writer, {.checkpoint_id = id}).status();
}

Status LoadOnce(Store& store, StateDict& dict, const std::string& id,
                const Config& config) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader,
                            store.NewReader(config.profile.reader));
  return Load(&dict, *reader, {.checkpoint_id = id});
}

// A writer with the profile's options, once `*s` is OK (else null; `*s`
// says why it failed).
std::unique_ptr<RocksDBStorageWriter> MakeWriter(Store& store,
                                                 const Config& config,
                                                 Status* s) {
  if (!s->ok()) return nullptr;
  auto made = store.NewWriter(WriterOptions(config));
  *s = made.status();
  return made.ok() ? std::move(*made) : nullptr;
}

// The profile's AsyncCheckpointer, once `*s` is OK; if making it fails,
// null, with the case skipped.
std::unique_ptr<AsyncCheckpointer> MakeCheckpointer(benchmark::State& state,
                                                    const Config& config,
                                                    Status* s) {
  if (!s->ok()) return nullptr;
  auto made = AsyncCheckpointer::Create(config.profile.async);
  *s = made.status();
  if (!made.ok()) {
    state.SkipWithError(s->ToString().c_str());
    return nullptr;
  }
  return std::move(*made);
}

// Args: wl, reuse.
void BM_Save(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const StateDict dict = data.source.Dict();
  ScratchStore store("save", config.profile.store);
  Status s = store.status();
  std::unique_ptr<RocksDBStorageWriter> writer;
  if (s.ok()) {
    RocksDBWriterOptions options = WriterOptions(config);
    options.reuse_buffers = state.range(1) != 0;
    auto w = store->NewWriter(options);
    s = w.status();
    if (w.ok()) writer = std::move(*w);
  }
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  std::vector<std::string> ids;
  const RssMeter rss;
  for (auto _ : state) {
    const std::string id = "iter-" + std::to_string(ids.size());
    s = Save(dict, *writer, {.checkpoint_id = id}).status();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    ids.push_back(id);
  }
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id);
  // The directory goes next; a failed delete changes nothing here.
  writer.reset();
  for (const std::string& id : ids) store->Delete(id).IgnoreError();
}

// Args: wl, cold, reuse (of read buffers: StoreOptions::
// read_buffer_pool_bytes at its default, or 0).
void BM_Load(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const bool cold = state.range(1) != 0;
  StoreOptions options = config.profile.store;
  if (state.range(2) == 0) options.read_buffer_pool_bytes = 0;
  ScratchStore store("load", options);
  Status s = store.status();
  if (s.ok()) s = SaveOnce(*store, data.source.Dict(), "ckpt", config);
  data.dest->Zero();
  StateDict dict = data.dest->Dict();
  // From before the first load: the buffers the store keeps from one load
  // to the next are rocksdcp's memory too.
  const RssMeter rss;
  s = TimeLoads(state, store, cold, s,
                [&] { return LoadOnce(*store, dict, "ckpt", config); });
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id, cold);
  data.dest->TakeBytes(dict);
  if (s.ok() && !data.dest->SameAs(data.source)) {
    state.SkipWithError("loaded data differ from the saved data");
  }
}

// Every rank r of `ranks` saves (or loads) ShardDict(r, ranks) of `data`.
Status SaveSharded(Store& store, StateData& data, int ranks,
                   const std::string& id, const Config& config) {
  std::vector<StateDict> dicts;
  for (int r = 0; r < ranks; ++r) dicts.push_back(data.ShardDict(r, ranks));
  return RunRanks(ranks, [&](int r, Collective& c) -> Status {
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer,
                              store.NewWriter(WriterOptions(config)));
    return Save(dicts[r], *writer, {.checkpoint_id = id, .collective = &c})
        .status();
  });
}

Status LoadSharded(Store& store, std::vector<StateDict>& dicts,
                   const std::string& id, const Config& config) {
  return RunRanks(static_cast<int>(dicts.size()),
                  [&](int r, Collective& c) -> Status {
                    ROCKSDCP_ASSIGN_OR_RETURN(
                        auto reader, store.NewReader(config.profile.reader));
                    return Load(&dicts[r], *reader,
                                {.checkpoint_id = id, .collective = &c});
                  });
}

// Args: wl (4), cold. An iteration is one collective load: starting the 3
// threads, each making its reader, to joining the last.
void BM_LoadResharded(benchmark::State& state, const Config& config) {
  constexpr int kSaveRanks = 2;
  constexpr int kLoadRanks = 3;
  WorkloadData& data = GetWorkload(4, config);
  const bool cold = state.range(1) != 0;
  ScratchStore store("load-resharded", config.profile.store);
  Status s = store.status();
  if (s.ok()) s = SaveSharded(*store, data.source, kSaveRanks, "ckpt", config);
  data.dest->Zero();
  std::vector<StateDict> dicts;
  for (int r = 0; r < kLoadRanks; ++r) {
    dicts.push_back(data.dest->ShardDict(r, kLoadRanks));
  }
  const RssMeter rss;  // Before the first load, as in BM_Load.
  s = TimeLoads(state, store, cold, s,
                [&] { return LoadSharded(*store, dicts, "ckpt", config); });
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              /*workload=*/4, cold);
  data.dest->TakeBytes(dicts[0]);
  if (s.ok() && !data.dest->SameAs(data.source)) {
    state.SkipWithError("loaded data differ from the saved data");
  }
}

// One iteration: a synchronous Save() of W2, then an AsyncCheckpointer
// save of it, waited for until committed. The iteration's time (manual
// time) is the async save's blocking time, so bytes_per_second is how fast
// the trainer gets its state dict back. Counters, per iteration:
//   sync_save_ms    the synchronous Save()
//   blocking_ms     AsyncCheckpointer::Save, until it returned
//   commit_ms       from that call until `committed` completed
//   blocking_ratio  blocking_ms / sync_save_ms (the target: <= 0.2)
// The checkpointer (the profile's options; by default a 1 GiB staging
// pool, prefaulted) is made inside the RSS window: its pool is rocksdcp's
// memory.
void BM_AsyncSaveW2(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(2, config);
  const StateDict dict = data.source.Dict();
  ScratchStore store("async-save", config.profile.store);
  Status s = store.status();
  std::unique_ptr<RocksDBStorageWriter> sync_writer =
      MakeWriter(*store, config, &s);
  std::unique_ptr<RocksDBStorageWriter> async_writer =
      MakeWriter(*store, config, &s);
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  const RssMeter rss;
  std::unique_ptr<AsyncCheckpointer> checkpointer =
      MakeCheckpointer(state, config, &s);
  double sync_s = 0, blocking_s = 0, commit_s = 0;
  AsyncSaveHandle last;
  int n = 0;
  std::vector<std::string> ids;
  for (auto _ : state) {
    const std::string id = std::to_string(n++);
    const Clock::time_point t0 = Clock::now();
    s = Save(dict, *sync_writer, {.checkpoint_id = "sync-" + id}).status();
    const Clock::time_point t1 = Clock::now();
    AsyncSaveHandle handle;
    if (s.ok()) {
      auto saving = checkpointer->Save(dict, *async_writer,
                                       {.checkpoint_id = "async-" + id});
      s = saving.status();
      if (saving.ok()) handle = std::move(*saving);
    }
    const Clock::time_point t2 = Clock::now();
    if (s.ok()) s = handle.committed.get().status();
    const Clock::time_point t3 = Clock::now();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    ids.push_back("sync-" + id);
    ids.push_back("async-" + id);
    state.SetIterationTime(Seconds(t1, t2));
    sync_s += Seconds(t0, t1);
    blocking_s += Seconds(t1, t2);
    commit_s += Seconds(t1, t3);
    last = std::move(handle);
  }
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              /*workload=*/2);
  if (n > 0 && s.ok()) {
    state.counters["sync_save_ms"] = sync_s * 1e3 / n;
    state.counters["blocking_ms"] = blocking_s * 1e3 / n;
    state.counters["commit_ms"] = commit_s * 1e3 / n;
    state.counters["blocking_ratio"] = blocking_s / sync_s;
    state.counters["staged_mib"] = last.staged_bytes / double{1 << 20};
    state.counters["live_mib"] = last.live_bytes / double{1 << 20};
    state.counters["first_touch_mib"] =
        last.first_touch_bytes / double{1 << 20};
  }
  checkpointer.reset();
  sync_writer.reset();
  async_writer.reset();
  for (const std::string& id : ids) store->Delete(id).IgnoreError();
}

// Args: gib. Saves the --rss_gib state dict once.
void BM_RssSave(benchmark::State& state, const Config& config) {
  RssSave(state, GetWorkload(0, config), config);
}

// Args: gib. Saves the --rss_gib state dict once through an
// AsyncCheckpointer made inside the RSS window (its staging pool counts),
// until committed. Counters: staging_mib, the checkpointer's pool, and
// blocking_ms, how long Save blocked.
void BM_RssAsyncSave(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(0, config);
  const StateDict dict = data.source.Dict();
  ScratchStore store("rss-async-save", config.profile.store);
  Status s = store.status();
  std::unique_ptr<RocksDBStorageWriter> writer = MakeWriter(*store, config, &s);
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  const RssMeter rss;
  std::unique_ptr<AsyncCheckpointer> checkpointer =
      MakeCheckpointer(state, config, &s);
  double blocking_s = 0;
  for (auto _ : state) {
    if (!s.ok()) break;
    const Clock::time_point t0 = Clock::now();
    auto saving = checkpointer->Save(dict, *writer, {.checkpoint_id = "ckpt"});
    blocking_s += Seconds(t0, Clock::now());
    s = saving.status();
    if (s.ok()) s = saving->committed.get().status();
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              /*workload=*/0);
  if (checkpointer != nullptr) {
    state.counters["staging_mib"] =
        static_cast<double>(checkpointer->staging_capacity()) / (1 << 20);
    state.counters["blocking_ms"] = blocking_s * 1e3;
  }
}

// Args: gib. Saves the --rss_gib state dict (untimed), zeroes it, loads it
// back cold into the same memory (there is no second copy of it), and
// checks it against its seed.
void BM_RssLoad(benchmark::State& state, const Config& config) {
  RssLoad(state, GetWorkload(0, config), config);
}

}  // namespace

// Each iteration a new checkpoint id, by a new writer.
void RssSave(benchmark::State& state, WorkloadData& data,
             const Config& config) {
  const StateDict dict = data.source.Dict();
  ScratchStore store("rss-save", config.profile.store);
  const RssMeter rss;
  TimeEach(state, store.status(), [&](int n) {
    return SaveOnce(*store, dict, "ckpt-" + std::to_string(n), config);
  }).IgnoreError();
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id);
}

void RssLoad(benchmark::State& state, WorkloadData& data,
             const Config& config) {
  StateDict dict = data.source.Dict();
  ScratchStore store("rss-load", config.profile.store);
  Status s = store.status();
  if (s.ok()) s = SaveOnce(*store, dict, "ckpt", config);
  data.source.Zero();
  const RssMeter rss;
  s = TimeEach(state, s, [&](int) {
    const Status reopened = store.ReopenCold();
    return reopened.ok() ? LoadOnce(*store, dict, "ckpt", config) : reopened;
  });
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id, /*cold=*/1);
  if (s.ok() && !data.source.MatchesSeed(data.seed)) {
    state.SkipWithError("loaded data differ from the saved data");
  }
  DropWorkload();
}

void RegisterWorkloadBenchmarks(const Config& c, int wl) {
  const int it = c.iterations;
  auto* save = Register("BM_Save", BM_Save, c)->ArgNames({"wl", "reuse"});
  // Buffer reuse matters where pieces are large; W3's are 1-16 KiB.
  if (wl != 3) save->Args({wl, 0});
  save->Args({wl, 1});
  SetCommon(save, it);
  auto* load =
      Register("BM_Load", BM_Load, c)->ArgNames({"wl", "cold", "reuse"});
  // Without read-buffer reuse, warm only: there fresh buffers' page faults
  // weigh most, next to reads from the page cache.
  if (wl != 3) load->Args({wl, 0, 0});
  load->Args({wl, 0, 1})->Args({wl, 1, 1});
  SetCommon(load, it);
  if (wl != 2) return;
  SetCommon(Register("BM_LoadResharded", BM_LoadResharded, c)
                ->ArgNames({"wl", "cold"})
                ->Args({4, 0})
                ->Args({4, 1}),
            it);
  // Manual time: each iteration's time is its async save's blocking time.
  Register("BM_AsyncSaveW2", BM_AsyncSaveW2, c)
      ->Iterations(it)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

void RegisterRssBenchmarks(const Config& c) {
  if (c.rss_gib == 0) return;
  for (const auto& [name, run] :
       {std::pair<const char*, CaseFn>{"BM_RssSave", BM_RssSave},
        {"BM_RssAsyncSave", BM_RssAsyncSave},
        {"BM_RssLoad", BM_RssLoad}}) {
    Register(name, run, c)
        ->ArgNames({"gib"})
        ->Arg(c.rss_gib)
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace rocksdcp::bench
