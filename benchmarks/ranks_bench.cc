// Opt-in (--ranks): Save and Load of a 1 GiB state dict sharded over N
// ranks, as N threads of one process sharing one Store (ThreadCollective):
// the single-node trainer with one thread per device.
//
//   BM_SaveRanks/ranks:N         every rank saves its rows of every tensor
//   BM_LoadRanks/ranks:N/cold:C  every rank loads its rows back, warm or cold
//
// The state dict is 8 fp32 tensors of [rows, 1024], as many bytes as W1
// (--quick shrinks both), each a ShardedTensor whose rows are split evenly
// over the ranks. The bytes are the same at every N, so ratios.py pairs
// every case with W1's raw baselines, and ranks:1 next to BM_Save/wl:1 and
// BM_Load/wl:1 shows what the sharded, collective path costs.
//
// One iteration is one whole collective call, from starting the N threads
// (each making its own writer or reader, as a rank does) to joining the
// last. The conventions of the other cases hold: inputs built and touched
// before the loop, a new checkpoint id per save, cold loads timed with the
// posix_fadvise(DONTNEED) that empties the page cache, no PauseTiming.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "rocksdcp/rocksdcp.h"
#include "workloads.h"

namespace rocksdcp::bench {
namespace {

// One rank's rows of each of the kLargeTensors tensors of [rows, kLargeCols]
// fp32: ranks split the rows evenly, the first ones one row more when they
// don't divide.
class RowShards {
 public:
  // With `seed` 0 the shards are zeros (a load's destination).
  RowShards(int64_t rows, int rank, int ranks, uint64_t seed)
      : rows_(rows),
        first_row_(rank * (rows / ranks) +
                   std::min<int64_t>(rank, rows % ranks)),
        shard_rows_(rows / ranks + (rank < rows % ranks ? 1 : 0)),
        buffers_(kLargeTensors,
                 std::vector<uint8_t>(shard_rows_ * kLargeCols * 4)) {
    if (seed != 0) {
      for (int i = 0; i < kLargeTensors; ++i) Fill(buffers_[i], seed + i);
    }
  }

  rocksdcp::StateDict StateDict() {
    rocksdcp::StateDict dict;
    for (size_t i = 0; i < buffers_.size(); ++i) {
      rocksdcp::ShardedTensor st;
      st.dtype = rocksdcp::DType::kFloat32;
      st.global_size = {rows_, kLargeCols};
      if (shard_rows_ > 0) {
        st.local_shards.push_back(
            {{first_row_, 0},
             rocksdcp::TensorView::Contiguous(rocksdcp::DType::kFloat32,
                                              {shard_rows_, kLargeCols},
                                              buffers_[i].data())});
      }
      dict.emplace(LayerName(i), std::move(st));
    }
    return dict;
  }

  bool operator==(const RowShards& other) const {
    return buffers_ == other.buffers_;
  }

 private:
  const int64_t rows_;
  const int64_t first_row_;
  const int64_t shard_rows_;
  std::vector<std::vector<uint8_t>> buffers_;
};

// Every rank's shards of the state dict, and a dict of views of each.
struct ShardedState {
  ShardedState(int64_t rows, int ranks, bool zeros) {
    shards.reserve(ranks);
    for (int r = 0; r < ranks; ++r) {
      // Distinct data per rank.
      shards.emplace_back(rows, r, ranks,
                          zeros ? 0 : 1 + uint64_t{kLargeTensors} * r);
    }
    for (RowShards& s : shards) dicts.push_back(s.StateDict());
  }

  std::vector<RowShards> shards;
  std::vector<rocksdcp::StateDict> dicts;
};

// Every rank saves its dict as checkpoint `id`, each with its own writer.
Status SaveRanks(Store& store, const ShardedState& state,
                 const std::string& id) {
  return RunRanks(static_cast<int>(state.dicts.size()),
                  [&](int r, rocksdcp::Collective& c) -> Status {
                    ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store.NewWriter());
                    return rocksdcp::Save(
                               state.dicts[r], *writer,
                               {.checkpoint_id = id, .collective = &c})
                        .status();
                  });
}

// Every rank loads its dict from checkpoint `id`, each with its own reader.
Status LoadRanks(Store& store, ShardedState& state, const std::string& id) {
  return RunRanks(static_cast<int>(state.dicts.size()),
                  [&](int r, rocksdcp::Collective& c) -> Status {
                    ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store.NewReader());
                    return rocksdcp::Load(
                        &state.dicts[r], *reader,
                        {.checkpoint_id = id, .collective = &c});
                  });
}

int64_t LargeRows(int64_t mib) {
  return (mib << 20) / kLargeTensors / (kLargeCols * 4);
}

// Args: ranks.
void BM_SaveRanks(benchmark::State& state, int64_t mib) {
  const int ranks = static_cast<int>(state.range(0));
  DropWorkload();  // These cases have data of their own.
  const ShardedState source(LargeRows(mib), ranks, /*zeros=*/false);
  const std::string dir = FreshDir("save-ranks");
  auto store = Store::Open(dir);
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    RemoveDir(dir);
    return;
  }
  std::vector<std::string> ids;
  const RssMeter rss;
  for (auto _ : state) {
    const std::string id = "iter-" + std::to_string(ids.size());
    Status s = SaveRanks(**store, source, id);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    ids.push_back(id);
  }
  rss.Report(state);
  SetCounters(state, static_cast<uint64_t>(mib) << 20, kLargeTensors,
              /*workload=*/1);
  // The directory goes next; a failed delete changes nothing here.
  for (const std::string& id : ids) (*store)->Delete(id).IgnoreError();
  store->reset();
  RemoveDir(dir);
}

// Args: ranks, cold.
void BM_LoadRanks(benchmark::State& state, int64_t mib) {
  const int ranks = static_cast<int>(state.range(0));
  const bool cold = state.range(1) != 0;
  DropWorkload();  // These cases have data of their own.
  const ShardedState source(LargeRows(mib), ranks, /*zeros=*/false);
  ShardedState dest(LargeRows(mib), ranks, /*zeros=*/true);
  const std::string dir = FreshDir("load-ranks");
  auto store = Store::Open(dir);
  Status s = store.status();
  if (s.ok()) s = SaveRanks(**store, source, "ckpt");
  const RssMeter rss;  // Before the first load, as in BM_Load.
  // A warm run's files in the page cache, and one untimed load, which
  // checks the setup (see TimeLoads).
  if (s.ok() && !cold) s = WarmDirCache(dir);
  if (s.ok()) s = LoadRanks(**store, dest, "ckpt");
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    if (store.ok()) store->reset();
    RemoveDir(dir);
    return;
  }
  for (auto _ : state) {
    if (cold) s = DropDirCache(dir);
    if (s.ok()) s = LoadRanks(**store, dest, "ckpt");
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  rss.Report(state);
  SetCounters(state, static_cast<uint64_t>(mib) << 20, kLargeTensors,
              /*workload=*/1, cold);
  if (s.ok()) {
    for (int r = 0; r < ranks; ++r) {
      if (!(dest.shards[r] == source.shards[r])) {
        const std::string msg = "rank " + std::to_string(r) +
                                ": loaded shards differ from the saved ones";
        state.SkipWithError(msg.c_str());
        break;
      }
    }
  }
  store->reset();
  RemoveDir(dir);
}

}  // namespace

void RegisterRanksBenchmarks(const Config& c) {
  const int64_t mib = c.large_mib;
  auto* save = benchmark::RegisterBenchmark(
      "BM_SaveRanks",
      [mib](benchmark::State& state) { BM_SaveRanks(state, mib); });
  auto* load = benchmark::RegisterBenchmark(
      "BM_LoadRanks",
      [mib](benchmark::State& state) { BM_LoadRanks(state, mib); });
  save->ArgNames({"ranks"});
  load->ArgNames({"ranks", "cold"});
  for (int64_t ranks : {1, 2, 4}) {
    save->Arg(ranks);
    load->Args({ranks, 0})->Args({ranks, 1});
  }
  SetCommon(save, c.iterations);
  SetCommon(load, c.iterations);
}

}  // namespace rocksdcp::bench
