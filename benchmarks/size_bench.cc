// State dict sizes: whether a save and a cold load keep pace with the disk,
// and add no more memory, as the state dict grows ("throughput at 16 GiB
// within 10% of 1 GiB's, as a ratio to the raw baseline at each size; RSS
// added the same at every size"). Opt-in (--sizes=G,...; --sizes alone: 1,
// 4 and 16 GiB). For each size G in the order given, every case below runs
// on one state dict of G GiB, the --rss_gib one's shape (8 tensors of G/8
// GiB, GetSizeWorkload), the only one resident: it is built for the first
// case of its size and freed by the last, before the next size's.
//
//   BM_SizeRawFileWriteFsync/gib:G         BM_RawFileWriteFsync: writev into
//                                          a new file, fsync
//   BM_SizeRawWriteDirect/gib:G/writers:K  BM_RawWriteDirect: O_DIRECT, K
//                                          threads (1, 2, 4)
//   BM_SizeSave/gib:G                      BM_RssSave: Save() by a new
//                                          writer, as a new checkpoint id
//   BM_SizeRawFileRead/gib:G/cold:1        BM_RawFileRead, cold: readv
//                                          after posix_fadvise(DONTNEED)
//   BM_SizeRawReadDirect/gib:G/qd:Q        BM_RawReadDirect: O_DIRECT at
//                                          queue depth Q (1, 4)
//   BM_SizeLoad/gib:G/cold:1               BM_RssLoad: a cold Load() into
//                                          the same memory, checked against
//                                          the seed
//
// There is no destination: the raw reads read back into the state dict
// too. Each case removes its files and its store when done, so that the
// disk holds at most one copy of the state dict at a time. Counters: those
// of the cases named, and `gib`. ratios.py pairs each save and load with
// the best raw case of the same bytes and compares the sizes.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>

#include "bench_util.h"
#include "workloads.h"

namespace rocksdcp::bench {
namespace {

// A case's iterations move at most this many GiB: --iterations (3 by
// default) at 1 GiB, one from 4 GiB up, so that 16 GiB takes minutes, not
// a quarter of an hour, and one copy of its bytes on disk.
constexpr int64_t kCaseGiB = 4;

// Args: gib, then the case's own. The size's state dict, named in the
// counters.
WorkloadData& SizeData(benchmark::State& state) {
  state.counters["gib"] = static_cast<double>(state.range(0));
  return GetSizeWorkload(state.range(0));
}

void BM_SizeRawFileWriteFsync(benchmark::State& state, const Config&) {
  RawFileWriteFsync(state, SizeData(state));
}

void BM_SizeRawWriteDirect(benchmark::State& state, const Config&) {
  RawWriteDirect(state, SizeData(state), static_cast<int>(state.range(1)));
}

void BM_SizeSave(benchmark::State& state, const Config& config) {
  RssSave(state, SizeData(state), config);
}

void BM_SizeRawFileRead(benchmark::State& state, const Config&) {
  RawFileRead(state, SizeData(state), state.range(1) != 0);
}

void BM_SizeRawReadDirect(benchmark::State& state, const Config&) {
  RawReadDirect(state, SizeData(state), static_cast<int>(state.range(1)));
}

void BM_SizeLoad(benchmark::State& state, const Config& config) {
  RssLoad(state, SizeData(state), config);
}

}  // namespace

void RegisterSizeBenchmarks(const Config& c) {
  for (int64_t gib : c.sizes_gib) {
    const int it =
        static_cast<int>(std::clamp<int64_t>(kCaseGiB / gib, 1, c.iterations));
    SetCommon(Register("BM_SizeRawFileWriteFsync", BM_SizeRawFileWriteFsync, c)
                  ->ArgNames({"gib"})
                  ->Arg(gib),
              it);
    SetCommon(Register("BM_SizeRawWriteDirect", BM_SizeRawWriteDirect, c)
                  ->ArgNames({"gib", "writers"})
                  ->ArgsProduct({{gib}, {1, 2, 4}}),
              it);
    SetCommon(
        Register("BM_SizeSave", BM_SizeSave, c)->ArgNames({"gib"})->Arg(gib),
        it);
    SetCommon(Register("BM_SizeRawFileRead", BM_SizeRawFileRead, c)
                  ->ArgNames({"gib", "cold"})
                  ->Args({gib, 1}),
              it);
    SetCommon(Register("BM_SizeRawReadDirect", BM_SizeRawReadDirect, c)
                  ->ArgNames({"gib", "qd"})
                  ->ArgsProduct({{gib}, {1, 4}}),
              it);
    // Last: it frees the state dict (RssLoad).
    SetCommon(Register("BM_SizeLoad", BM_SizeLoad, c)
                  ->ArgNames({"gib", "cold"})
                  ->Args({gib, 1}),
              it);
  }
}

}  // namespace rocksdcp::bench
