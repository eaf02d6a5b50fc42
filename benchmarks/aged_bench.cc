// Cold loads on either kind of disk (issue #39). A "cold" read on this VM,
// after the guest's page cache dropped the file, comes from the host's
// cache when the host has seen the file lately, and from the disk when it
// has not: an O_DIRECT read of 500 MB of a file written 14 hours before ran
// at 520-635 MB/s, and at 920-990 MB/s read again. Nothing inside the guest
// tells the two apart, and nothing in it can empty the host's cache, so
// these cases read files written hours before, on their first read and
// again. Opt-in:
//
//   --aged_prepare=DIR  BM_AgedPrepare/wl:N, for W1 and W2: into DIR/wN,
//                       four copies of the payload (raw-0 .. raw-3) and a
//                       store holding it as checkpoint "ckpt", all synced
//                       and dropped from the page cache, then a READY
//                       stamp (the time, and the payload's size)
//   --aged=DIR          for W1, then W2, every case below once on a file of
//                       its own (regime:0, the first read since DIR was
//                       prepared), then every case again on the same files
//                       (regime:1, a reread, which the host's cache serves):
//     BM_AgedRawFileRead/wl:N/regime:R         readv of raw-0, buffered
//     BM_AgedRawReadDirect/wl:N/qd:Q/regime:R  raw-1, -2, -3 with O_DIRECT
//                                              at queue depth 1, 4, 8
//     BM_AgedLoad/wl:N/regime:R                a read-only open of the
//                                              store and a Load() of it
//
// Before each, the file or store is dropped from the guest's page cache;
// after each, the bytes read are checked against the workload's. Counters:
// a cold read's (SetCounters), `regime`, and `age_s`, the time since DIR/wN
// was prepared. ratios.py pairs each load with the best raw read of the
// same workload and regime. DIR stays: remove it when done.

#include <benchmark/benchmark.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include "bench_util.h"
#include "rocksdcp/rocksdcp.h"
#include "workloads.h"

namespace rocksdcp::bench {
namespace {

constexpr int kRawCopies = 4;

double NowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string WorkloadDir(const std::string& root, int wl) {
  return root + "/w" + std::to_string(wl);
}

std::string RawCopy(int k) { return "raw-" + std::to_string(k); }

Status Prepare(const std::string& dir, StateData& source,
               const Config& config) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  const std::vector<iovec> payload = source.Payload();
  for (int k = 0; k < kRawCopies; ++k) {
    ROCKSDCP_RETURN_IF_ERROR(WriteFileFsync(dir + "/" + RawCopy(k), payload));
  }
  {
    ROCKSDCP_ASSIGN_OR_RETURN(
        auto store, Store::Open(dir + "/store", config.profile.store));
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer,
                              store->NewWriter(WriterOptions(config)));
    ROCKSDCP_RETURN_IF_ERROR(
        Save(source.Dict(), *writer, {.checkpoint_id = "ckpt"}).status());
  }
  ROCKSDCP_RETURN_IF_ERROR(DropDirCache(dir));
  // Last: a directory without it was not prepared whole.
  std::ofstream stamp(dir + "/READY");
  stamp << static_cast<int64_t>(NowSeconds()) << " " << source.total_bytes()
        << "\n";
  stamp.close();
  if (!stamp) return Status::IOError("cannot write " + dir + "/READY");
  return FsyncDir(dir);
}

// Seconds since `dir` was prepared for `source`'s payload; an error if it
// was not.
Result<double> AgeOf(const std::string& dir, const StateData& source) {
  std::ifstream stamp(dir + "/READY");
  int64_t when = 0;
  uint64_t bytes = 0;
  if (!(stamp >> when >> bytes) || bytes != source.total_bytes()) {
    return Status::FailedPrecondition(
        dir +
        " is not prepared for this workload: run rocksdcp_bench "
        "--aged_prepare=DIR with the same flags first");
  }
  return NowSeconds() - static_cast<double>(when);
}

// Args: wl.
void BM_AgedPrepare(benchmark::State& state, const Config& config) {
  const int wl = static_cast<int>(state.range(0));
  WorkloadData& data = GetWorkload(wl, config);
  const std::string dir = WorkloadDir(config.aged_prepare_dir, wl);
  TimeEach(state, Status::OK(), [&](int) {
    return Prepare(dir, data.source, config);
  }).IgnoreError();
}

// One aged case, in `regime` (its last arg): `read(path)` once into
// data.dest, with the prepared directory `dir` dropped from the page cache
// first.
void TimeAgedRead(benchmark::State& state, WorkloadData& data,
                  const std::string& dir, const std::string& name,
                  int64_t regime,
                  const std::function<Status(const std::string&)>& read) {
  const std::string path = dir + "/" + name;
  const Result<double> age = AgeOf(dir, data.source);
  const RssMeter rss;
  const Status s = TimeEach(state, age.status(), [&](int) {
    const Status dropped = DropDirCache(dir);
    return dropped.ok() ? read(path) : dropped;
  });
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id, /*cold=*/1);
  state.counters["regime"] = static_cast<double>(regime);
  if (age.ok()) state.counters["age_s"] = *age;
  if (s.ok() && !data.dest->SameAs(data.source)) {
    state.SkipWithError("the bytes read differ from the workload's");
  }
  data.dest->Zero();
}

WorkloadData& AgedData(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  data.dest->Zero();
  return data;
}

// Args: wl, regime.
void BM_AgedRawFileRead(benchmark::State& state, const Config& config) {
  WorkloadData& data = AgedData(state, config);
  const std::vector<iovec> into = data.dest->Payload();
  TimeAgedRead(state, data, WorkloadDir(config.aged_dir, data.source.spec().id),
               RawCopy(0), state.range(1),
               [&](const std::string& path) { return ReadFile(path, into); });
}

// Args: wl, qd (1, 4, 8: raw-1, -2, -3), regime.
void BM_AgedRawReadDirect(benchmark::State& state, const Config& config) {
  WorkloadData& data = AgedData(state, config);
  const int qd = static_cast<int>(state.range(1));
  TimeAgedRead(state, data, WorkloadDir(config.aged_dir, data.source.spec().id),
               RawCopy(qd == 1   ? 1
                       : qd == 4 ? 2
                                 : 3),
               state.range(2), DirectReadInto(data.dest->Payload(), qd));
}

// Args: wl, regime. What a restarted trainer does: open the store
// read-only, make a reader, load.
void BM_AgedLoad(benchmark::State& state, const Config& config) {
  WorkloadData& data = AgedData(state, config);
  StoreOptions options = config.profile.store;
  options.read_only = true;
  TimeAgedRead(state, data, WorkloadDir(config.aged_dir, data.source.spec().id),
               "store", state.range(1), [&](const std::string& path) -> Status {
                 ROCKSDCP_ASSIGN_OR_RETURN(auto store,
                                           Store::Open(path, options));
                 ROCKSDCP_ASSIGN_OR_RETURN(
                     auto reader, store->NewReader(config.profile.reader));
                 StateDict dict = data.dest->Dict();
                 ROCKSDCP_RETURN_IF_ERROR(
                     Load(&dict, *reader, {.checkpoint_id = "ckpt"}));
                 data.dest->TakeBytes(dict);
                 return Status::OK();
               });
}

}  // namespace

void RegisterAgedBenchmarks(const Config& c) {
  if (!c.aged_prepare_dir.empty()) {
    SetCommon(Register("BM_AgedPrepare", BM_AgedPrepare, c)
                  ->ArgNames({"wl"})
                  ->Arg(1)
                  ->Arg(2),
              1);
  }
  if (c.aged_dir.empty()) return;
  for (int wl : {1, 2}) {
    for (int regime : {0, 1}) {
      SetCommon(Register("BM_AgedRawFileRead", BM_AgedRawFileRead, c)
                    ->ArgNames({"wl", "regime"})
                    ->Args({wl, regime}),
                1);
      SetCommon(Register("BM_AgedRawReadDirect", BM_AgedRawReadDirect, c)
                    ->ArgNames({"wl", "qd", "regime"})
                    ->Args({wl, 1, regime})
                    ->Args({wl, 4, regime})
                    ->Args({wl, 8, regime}),
                1);
      SetCommon(Register("BM_AgedLoad", BM_AgedLoad, c)
                    ->ArgNames({"wl", "regime"})
                    ->Args({wl, regime}),
                1);
    }
  }
}

}  // namespace rocksdcp::bench
