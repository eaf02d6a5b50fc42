// Save and Load throughput of rocksdcp on one rank, each against a
// raw-file baseline measured in the same run: these VMs are noisy enough
// that a ratio to a baseline from the same run means much more than MB/s
// compared across runs.
//
//   BM_RawFileWriteFsync  write() one buffer to a new file, then fsync
//   BM_RawFileRead        read() that file back, warm (page cache) or cold
//   BM_SaveLarge          Save() of 8 large fp32 tensors (--large_mib total)
//   BM_LoadLarge          Load() of the same, warm or cold
//   BM_SaveSmall          Save() of many 4 KiB tensors (--small_mib total)
//   BM_LoadSmall          Load() of the same, warm or cold
//
// ranks_bench.cc has the same large state dict sharded over thread ranks;
// bench_util.h what the cases share, including this program's own flags
// (--large_mib, --small_mib), which main takes out of argv before Google
// Benchmark parses the rest. The raw baselines run at both sizes.
// benchmarks/README.md has the how-to, and ratios.py turns
// --benchmark_format=json output into the ratio table.
//
// Every input is built before the timing loop. Where an iteration has
// setup of its own that can't leave the loop without PauseTiming (not used:
// hundreds of ns per call, google/benchmark#179), it stays in and is named:
// cold runs include the posix_fadvise(DONTNEED) that empties the page cache,
// in the raw baseline and in rocksdcp alike.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::bench {
namespace {

constexpr uint64_t kSmallTensorBytes = 4096;
constexpr int kSmallIterations = 5;

// ---- Benchmarks ----

// Args: mib.
void BM_RawFileWriteFsync(benchmark::State& state) {
  std::vector<uint8_t> data(static_cast<uint64_t>(state.range(0)) << 20);
  Fill(data, 1);
  const std::string dir = FreshDir("raw-write");
  int n = 0;
  for (auto _ : state) {
    // A new file per iteration, as each save writes new files; the files
    // are deleted after the loop, as BM_Save* deletes its checkpoints.
    Status s = WriteFileFsync(dir + "/file-" + std::to_string(n++), data);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  SetCounters(state, data.size(), 1);
  RemoveDir(dir);
}

// Args: mib, cold.
void BM_RawFileRead(benchmark::State& state) {
  const bool cold = state.range(1) != 0;
  std::vector<uint8_t> data(static_cast<uint64_t>(state.range(0)) << 20);
  Fill(data, 1);
  const std::string dir = FreshDir("raw-read");
  const std::string path = dir + "/file";
  Status s = WriteFileFsync(path, data);
  // One untimed read, so a warm run starts warm.
  if (s.ok()) s = ReadFile(path, data);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    RemoveDir(dir);
    return;
  }
  for (auto _ : state) {
    if (cold) s = DropPageCache(path);
    if (s.ok()) s = ReadFile(path, data);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(data.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, data.size(), 1, cold);
  RemoveDir(dir);
}

// Saves `tensors` once per iteration, each time as a new checkpoint id in
// one store; the checkpoints are deleted after the loop.
void RunSave(benchmark::State& state, TensorSet& tensors,
             std::string_view name) {
  const std::string dir = FreshDir(name);
  auto store = rocksdcp::Store::Open(dir);
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    RemoveDir(dir);
    return;
  }
  const rocksdcp::StateDict dict = tensors.StateDict();
  std::vector<std::string> ids;
  for (auto _ : state) {
    const std::string id = "iter-" + std::to_string(ids.size());
    auto writer = (*store)->NewWriter();
    Status s = writer.status();
    if (s.ok())
      s = rocksdcp::Save(dict, **writer, {.checkpoint_id = id}).status();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    ids.push_back(id);
  }
  SetCounters(state, tensors.total_bytes(), tensors.count());
  // The directory goes next; a failed delete changes nothing here.
  for (const std::string& id : ids) (*store)->Delete(id).IgnoreError();
  store->reset();
  RemoveDir(dir);
}

// Saves `tensors` once, then loads the checkpoint once per iteration into
// zeroed buffers allocated (and touched) before the loop.
void RunLoad(benchmark::State& state, TensorSet& tensors, bool cold,
             std::string_view name) {
  const std::string dir = FreshDir(name);
  auto store = rocksdcp::Store::Open(dir);
  Status s = store.status();
  if (s.ok()) {
    auto writer = (*store)->NewWriter();
    s = writer.status();
    if (s.ok()) {
      s = rocksdcp::Save(tensors.StateDict(), **writer,
                         {.checkpoint_id = "ckpt"})
              .status();
    }
  }
  TensorSet dest(static_cast<int>(tensors.count()),
                 tensors.total_bytes() / tensors.count(), /*seed=*/0);
  rocksdcp::StateDict dict = dest.StateDict();
  const rocksdcp::LoadOptions options{.checkpoint_id = "ckpt"};
  // One untimed load: it checks the setup, and since RocksDB's SST writer
  // drops what it writes from the page cache, it is what makes a warm run
  // warm.
  if (s.ok()) {
    auto reader = (*store)->NewReader();
    s = reader.status();
    if (s.ok()) s = rocksdcp::Load(&dict, **reader, options);
  }
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    if (store.ok()) store->reset();
    RemoveDir(dir);
    return;
  }
  for (auto _ : state) {
    if (cold) s = DropStoreCache(dir);
    if (s.ok()) {
      auto reader = (*store)->NewReader();
      s = reader.status();
      if (s.ok()) s = rocksdcp::Load(&dict, **reader, options);
    }
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  SetCounters(state, tensors.total_bytes(), tensors.count(), cold);
  if (s.ok() && !(dest == tensors)) {
    state.SkipWithError("loaded tensors differ from the saved ones");
  }
  store->reset();
  RemoveDir(dir);
}

uint64_t LargeTensorBytes(const benchmark::State& state) {
  return (static_cast<uint64_t>(state.range(0)) << 20) / kLargeTensors;
}

// Args: mib.
void BM_SaveLarge(benchmark::State& state) {
  TensorSet tensors(kLargeTensors, LargeTensorBytes(state), 1);
  RunSave(state, tensors, "save-large");
}

// Args: mib, cold.
void BM_LoadLarge(benchmark::State& state) {
  TensorSet tensors(kLargeTensors, LargeTensorBytes(state), 1);
  RunLoad(state, tensors, state.range(1) != 0, "load-large");
}

// Args: tensors.
void BM_SaveSmall(benchmark::State& state) {
  TensorSet tensors(static_cast<int>(state.range(0)), kSmallTensorBytes, 1);
  RunSave(state, tensors, "save-small");
}

// Args: tensors, cold.
void BM_LoadSmall(benchmark::State& state) {
  TensorSet tensors(static_cast<int>(state.range(0)), kSmallTensorBytes, 1);
  RunLoad(state, tensors, state.range(1) != 0, "load-small");
}

}  // namespace

void RegisterCheckpointBenchmarks(const Config& c) {
  const int64_t small_tensors = c.small_mib * ((1 << 20) / kSmallTensorBytes);
  auto* raw_write =
      benchmark::RegisterBenchmark("BM_RawFileWriteFsync", BM_RawFileWriteFsync)
          ->ArgNames({"mib"});
  auto* raw_read =
      benchmark::RegisterBenchmark("BM_RawFileRead", BM_RawFileRead)
          ->ArgNames({"mib", "cold"});
  // Small first, so a quick look at the output comes quickly.
  raw_write->Arg(c.small_mib)->Arg(c.large_mib);
  raw_read->Args({c.small_mib, 0})
      ->Args({c.small_mib, 1})
      ->Args({c.large_mib, 0})
      ->Args({c.large_mib, 1});
  SetCommon(raw_write, kLargeIterations);
  SetCommon(raw_read, kLargeIterations);

  SetCommon(benchmark::RegisterBenchmark("BM_SaveLarge", BM_SaveLarge)
                ->ArgNames({"mib"})
                ->Arg(c.large_mib),
            kLargeIterations);
  SetCommon(benchmark::RegisterBenchmark("BM_LoadLarge", BM_LoadLarge)
                ->ArgNames({"mib", "cold"})
                ->Args({c.large_mib, 0})
                ->Args({c.large_mib, 1}),
            kLargeIterations);
  SetCommon(benchmark::RegisterBenchmark("BM_SaveSmall", BM_SaveSmall)
                ->ArgNames({"tensors"})
                ->Arg(small_tensors),
            kSmallIterations);
  SetCommon(benchmark::RegisterBenchmark("BM_LoadSmall", BM_LoadSmall)
                ->ArgNames({"tensors", "cold"})
                ->Args({small_tensors, 0})
                ->Args({small_tensors, 1}),
            kSmallIterations);
}

}  // namespace rocksdcp::bench

int main(int argc, char** argv) {
  namespace bench = rocksdcp::bench;
  bench::Config config;
  if (!bench::ParseOwnFlags(&argc, argv, &config)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (!bench::CreateTempRoot()) return 1;

  // Single-rank cases first: their order and names are those of earlier
  // runs, which README.md's tables compare with.
  bench::RegisterCheckpointBenchmarks(config);
  bench::RegisterRanksBenchmarks(config);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  bench::RemoveTempRoot();
  return 0;
}
