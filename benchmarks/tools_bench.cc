// The rocksdcp CLI's file transfers (tools/), opt-in with --tools, on W1-W3
// (workloads.h), each paired by ratios.py with BM_RawFileWriteFsync of the
// same workload: the same bytes written to one file and fsync'd.
//
//   BM_ExportSafetensors/wl:N  `rocksdcp export`: ExportSafetensors of the
//                              workload's checkpoint to a safetensors file
//                              (header, tensors streamed through the 64 MiB
//                              buffer, fsync, rename over the previous
//                              iteration's file)
//   BM_ImportSafetensors/wl:N  `rocksdcp import`: ImportSafetensors of that
//                              file as a new checkpoint (the file mapped
//                              and checked, then one Save)
//
// The store is warm: a trainer's checkpoint was just written, or is being
// exported from a host with the page cache to hold it. Both report the RSS
// they add (RssMeter): a few buffers, never the checkpoint.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "rocksdcp/rocksdcp.h"
#include "safetensors.h"
#include "workloads.h"

namespace rocksdcp::bench {
namespace {

// The workload saved as "ckpt" in a fresh store under `dir`.
Result<std::unique_ptr<Store>> SavedStore(const std::string& dir,
                                          const StateDict& dict) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto store, Store::Open(dir));
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
  ROCKSDCP_RETURN_IF_ERROR(
      Save(dict, *writer, {.checkpoint_id = "ckpt"}).status());
  return store;
}

// Every case's end: its RSS and counters, then its store and files gone.
void Finish(benchmark::State& state, const RssMeter& rss, WorkloadData& data,
            Result<std::unique_ptr<Store>>& store, const std::string& dir) {
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id);
  if (store.ok()) store->reset();
  RemoveDir(dir);
}

// Args: wl.
void BM_ExportSafetensors(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const std::string dir = FreshDir("export");
  auto store = SavedStore(dir + "/store", data.source.Dict());
  const std::string out = dir + "/ckpt.safetensors";
  Status s = store.status();
  const RssMeter rss;
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  for (auto _ : state) {
    s = tools::ExportSafetensors(**store, "ckpt", out).status();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  Finish(state, rss, data, store, dir);
}

// Args: wl.
void BM_ImportSafetensors(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const std::string dir = FreshDir("import");
  const std::string file = dir + "/ckpt.safetensors";
  Status s;
  {
    auto source = SavedStore(dir + "/source", data.source.Dict());
    s = source.status();
    if (s.ok()) s = tools::ExportSafetensors(**source, "ckpt", file).status();
  }
  auto store = Store::Open(dir + "/store");
  if (s.ok()) s = store.status();
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  const RssMeter rss;
  int n = 0;
  for (auto _ : state) {
    if (!s.ok()) break;
    s = tools::ImportSafetensors(file, **store, "iter-" + std::to_string(n++))
            .status();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  Finish(state, rss, data, store, dir);
}

}  // namespace

void RegisterToolsBenchmarks(const Config& c, int wl) {
  if (!c.tools) return;
  SetCommon(Register("BM_ExportSafetensors", BM_ExportSafetensors, c)
                ->ArgNames({"wl"})
                ->Arg(wl),
            c.iterations);
  SetCommon(Register("BM_ImportSafetensors", BM_ImportSafetensors, c)
                ->ArgNames({"wl"})
                ->Arg(wl),
            c.iterations);
}

}  // namespace rocksdcp::bench
