// Item counts (issue #39): what a save and a load cost per item as a state
// dict holds more of them. Opt-in (--items): N tensors of 1 KiB each
// (fp32 [256], named as Adam's state is: optim.state.<i>.exp_avg), for N
// of 1,000, 100,000 and 1,000,000 (--quick: 1,000, 10,000, 100,000); and
// the same N beside 8 large tensors of 64 MiB (large:1), a model's
// weights, 512 MiB in all (--quick: 4 MiB each).
//
//   BM_ItemsSave/items:N/large:L  one Save of the tensors as a new
//                                 checkpoint, through a writer that saved
//                                 them once already
//   BM_ItemsLoad/items:N/large:L  a new reader and one Load of them, warm
//                                 (TimeLoads: the store's files read into
//                                 the page cache, and one load made
//                                 untimed first)
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
constexpr int kLargeTensors = 8;

// `n` small tensors, and with `large_rows` > 0 kLargeTensors fp32 tensors of
// [large_rows, 4096] too.
WorkloadSpec ItemsSpec(int64_t n, int64_t large_rows) {
  WorkloadSpec spec;
  spec.tensors.reserve(static_cast<size_t>(n) + kLargeTensors);
  for (int64_t i = 0; i < n; ++i) {
    spec.tensors.push_back({"optim.state." + std::to_string(i) + ".exp_avg",
                            DType::kFloat32,
                            {kItemFloats}});
  }
  for (int i = 0; large_rows > 0 && i < kLargeTensors; ++i) {
    spec.tensors.push_back({"model.layers." + std::to_string(i) + ".weight",
                            DType::kFloat32,
                            {large_rows, 4096}});
  }
  return spec;
}

// The source state dict of the case's args (items, large), built on first
// use and kept while the next case has the same args; one at a time.
StateData& Source(benchmark::State& state, const Config& config) {
  static auto* built =
      new std::pair<std::pair<int64_t, int64_t>, std::unique_ptr<StateData>>();
  const std::pair<int64_t, int64_t> key{state.range(0), state.range(1)};
  if (!built->second || built->first != key) {
    built->second.reset();
    // 64 MiB each, or 4 MiB with --quick.
    const int64_t rows = key.second == 0 ? 0 : config.quick ? 256 : 4096;
    built->second =
        std::make_unique<StateData>(ItemsSpec(key.first, rows), /*seed=*/11);
    built->first = key;
  }
  return *built->second;
}

// time_per_item: the case's real time per iteration over its items, in
// seconds (the console shows it as, say, 7.6us).
void SetItemCounters(benchmark::State& state, const StateData& data) {
  const double items = static_cast<double>(data.items());
  state.counters["items"] = items;
  state.counters["time_per_item"] =
      benchmark::Counter(items, benchmark::Counter::kIsIterationInvariantRate |
                                    benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(data.total_bytes()));
}

Status SaveAs(RocksDBStorageWriter* writer, StateData& data,
              const std::string& id) {
  return Save(data.Dict(), *writer, {.checkpoint_id = id}).status();
}

// Args: items, large.
void BM_ItemsSave(benchmark::State& state, const Config& config) {
  StateData& data = Source(state, config);
  ScratchStore store("items-save", config.profile.store);
  auto writer =
      store.status().ok()
          ? store->NewWriter(config.profile.writer)
          : Result<std::unique_ptr<RocksDBStorageWriter>>(store.status());
  if (!writer.ok()) {
    state.SkipWithError(writer.status().ToString().c_str());
    return;
  }
  const Status warmed = SaveAs(writer->get(), data, "warmup");
  const RssMeter rss;
  TimeEach(state, warmed, [&](int n) {
    return SaveAs(writer->get(), data, "ckpt-" + std::to_string(n));
  }).IgnoreError();
  rss.Report(state);
  SetItemCounters(state, data);
}

// Args: items, large.
void BM_ItemsLoad(benchmark::State& state, const Config& config) {
  StateData& source = Source(state, config);
  StateData dest(source.spec(), /*seed=*/0);
  ScratchStore store("items-load", config.profile.store);
  Status s = store.status();
  if (s.ok()) {
    auto writer = store->NewWriter(config.profile.writer);
    s = writer.ok() ? SaveAs(writer->get(), source, "ckpt") : writer.status();
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
    b->ArgNames({"items", "large"});
    for (int64_t large : {0, 1}) {
      for (int64_t n : counts) b->Args({n, large});
    }
  }
}

}  // namespace rocksdcp::bench
