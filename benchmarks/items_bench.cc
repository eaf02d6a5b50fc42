// Item counts (issue #39): what a save and a load cost per item as a state
// dict holds more of them. Opt-in (--items): N tensors of 1 KiB each
// (fp32 [256], named as Adam's state is: optim.state.<i>.exp_avg), for N
// of 1,000, 100,000 and 1,000,000 (--quick: 1,000, 10,000, 100,000).
//
//   BM_ItemsSave/items:N  one Save of the N tensors as a new checkpoint,
//                         through a writer that saved them once already
//   BM_ItemsLoad/items:N  a new reader and one Load of them, warm
//                         (TimeLoads: the store's files read into the page
//                         cache, and one load made untimed first)
//
// Counters: time_per_item, bytes_per_second, and the RssMeter's (bench_util.h):
// what the case added above the state dict and its load destination, which
// the metadata of a million items must keep within the memory budget.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "workloads.h"

namespace rocksdcp::bench {
namespace {

constexpr int64_t kItemFloats = 256;

WorkloadSpec ItemsSpec(int64_t n) {
  WorkloadSpec spec;
  spec.tensors.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    spec.tensors.push_back({"optim.state." + std::to_string(i) + ".exp_avg",
                            DType::kFloat32,
                            {kItemFloats}});
  }
  return spec;
}

// The source state dict of `n` items, built on first use and kept.
StateData& Source(int64_t n) {
  static auto* built = new std::map<int64_t, std::unique_ptr<StateData>>();
  auto& slot = (*built)[n];
  if (!slot) slot = std::make_unique<StateData>(ItemsSpec(n), /*seed=*/11);
  return *slot;
}

// time_per_item: the case's real time per iteration over its items, in
// seconds (the console shows it as, say, 7.6us).
void SetItemCounters(benchmark::State& state, const StateData& data) {
  const double items = static_cast<double>(data.items());
  state.counters["items"] = items;
  state.counters["time_per_item"] = benchmark::Counter(
      items,
      benchmark::Counter::kIsIterationInvariantRate |
          benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(data.total_bytes()));
}

Status SaveAs(RocksDBStorageWriter* writer, StateData& data,
              const std::string& id) {
  return Save(data.Dict(), *writer, {.checkpoint_id = id}).status();
}

void BM_ItemsSave(benchmark::State& state, const Config& config) {
  StateData& data = Source(state.range(0));
  ScratchStore store("items-save", config.profile.store);
  auto writer = store.status().ok()
                    ? store->NewWriter(config.profile.writer)
                    : Result<std::unique_ptr<RocksDBStorageWriter>>(
                          store.status());
  if (!writer.ok()) {
    state.SkipWithError(writer.status().ToString().c_str());
    return;
  }
  Status s = SaveAs(writer->get(), data, "warmup");
  const RssMeter rss;
  int64_t i = 0;
  for (auto _ : state) {
    if (!s.ok()) break;
    s = SaveAs(writer->get(), data, "ckpt-" + std::to_string(i++));
  }
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  rss.Report(state);
  SetItemCounters(state, data);
}

void BM_ItemsLoad(benchmark::State& state, const Config& config) {
  StateData& source = Source(state.range(0));
  StateData dest(source.spec(), /*seed=*/0);
  ScratchStore store("items-load", config.profile.store);
  Status s = store.status();
  if (s.ok()) {
    auto writer = store->NewWriter(config.profile.writer);
    s = writer.ok() ? SaveAs(writer->get(), source, "ckpt")
                    : writer.status();
  }
  // From before the first load, as in BM_Load.
  const RssMeter rss;
  s = TimeLoads(state, store, /*cold=*/false, s, [&]() -> Status {
    ROCKSDCP_ASSIGN_OR_RETURN(auto reader,
                              store->NewReader(config.profile.reader));
    StateDict dict = dest.Dict();
    return Load(&dict, *reader, {.checkpoint_id = "ckpt"});
  });
  rss.Report(state);
  if (s.ok() && !dest.SameAs(source)) {
    state.SkipWithError("the load gave other bytes");
  }
  SetItemCounters(state, source);
}

}  // namespace

void RegisterItemsBenchmarks(const Config& config) {
  const std::vector<int64_t> counts =
      config.quick ? std::vector<int64_t>{1'000, 10'000, 100'000}
                   : std::vector<int64_t>{1'000, 100'000, 1'000'000};
  for (auto [name, fn] : std::vector<std::pair<const char*, CaseFn>>{
           {"BM_ItemsSave", BM_ItemsSave}, {"BM_ItemsLoad", BM_ItemsLoad}}) {
    auto* b = Register(name, fn, config);
    SetCommon(b, 1);
    b->ArgName("items");
    for (int64_t n : counts) b->Arg(n);
  }
}

}  // namespace rocksdcp::bench
