// What the cases of rocksdcp_bench share: the program's own flags,
// scratch directories, raw-file I/O, page-cache control, peak-RSS
// measurement and the counters ratios.py pairs cases by.
//
// The cases: baselines_bench.cc (the baselines), workload_bench.cc (rocksdcp
// on W1-W4, async save, the --rss_gib case), incremental_bench.cc
// (incremental saves: W5, W6 and W2 changed between saves), ranks_bench.cc
// (opt-in rank scaling), tools_bench.cc (opt-in safetensors export and
// import), store_scale_bench.cc (opt-in checkpoints in one store),
// items_bench.cc (opt-in item counts), size_bench.cc (opt-in state dict
// sizes); workloads.h the state dicts; bench_main.cc the order they run
// in. benchmarks/README.md has the how-to.

#ifndef ROCKSDCP_BENCHMARKS_BENCH_UTIL_H_
#define ROCKSDCP_BENCHMARKS_BENCH_UTIL_H_

#include <benchmark/benchmark.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::bench {

// The opt-in ranks cases (ranks_bench.cc): this many fp32 tensors of
// [rows, 1024], in total as many bytes as W1.
inline constexpr int kLargeTensors = 8;
inline constexpr int64_t kLargeCols = 1024;

struct Config {
  // --quick: CI-sized, a 16th of every workload and one iteration per case.
  bool quick = false;
  // --rss_gib=N: also run BM_RssSave / BM_RssLoad on an N GiB state dict.
  int64_t rss_gib = 0;
  // --ranks: also run BM_SaveRanks / BM_LoadRanks (1, 2, 4 thread ranks).
  bool ranks = false;
  // --tools: also run BM_ExportSafetensors / BM_ImportSafetensors
  // (tools_bench.cc; needs the tools built, ROCKSDCP_BUILD_TOOLS).
  bool tools = false;
  // --checkpoints: also run the checkpoints-in-one-store cases
  // (store_scale_bench.cc: stores of 1, 100 and 1,000 checkpoints).
  bool checkpoints = false;
  // --items: also run the item-count cases (items_bench.cc: 1,000, 100,000
  // and 1,000,000 tensors of 1 KiB).
  bool items = false;
  // --sizes=G,...: also run the size cases (size_bench.cc) on a state dict
  // of each of these GiB, in this order; --sizes alone: 1, 4 and 16. Empty:
  // off.
  std::vector<int64_t> sizes_gib;
  // --aged_prepare=DIR: write W1's and W2's files for the aged cold-load
  // cases into DIR (aged_bench.cc); --aged=DIR: run those cases on them,
  // hours later, when the VM's host no longer caches them.
  std::string aged_prepare_dir;
  std::string aged_dir;
  // --piece_kib=N: RocksDBWriterOptions::max_piece_bytes for every save
  // (0: the library's default).
  int64_t piece_kib = 0;
  // --busy: every case runs while one spinning process per core keeps the
  // CPUs busy (BusyMachine), as on a node where the trainer computes.
  bool busy = false;
  // --profile=server|small: the DeviceProfile (rocksdcp/device_profile.h)
  // whose store, writer, reader and AsyncCheckpointer options the cases of
  // workload_bench.cc use (the others use the defaults, the server
  // profile's). Its name goes into the output's context.
  std::string profile_name = "server";
  DeviceProfile profile = ServerProfile();
  // --throttle_mbps=N: the whole run's reads and writes of the scratch
  // directory's disk limited to N MB/s (ThrottledDisk), as on an SD card
  // or eMMC. 0: not limited.
  int64_t throttle_mbps = 0;

  // Derived from the flags by ParseOwnFlags.
  // W1's bytes, and the ranks cases'.
  int64_t large_mib = 1024;
  // W2's hidden size: 1 GiB at 1024, 64 MiB at 256.
  int64_t w2_hidden = 1024;
  int w3_tensors = 50'000;
  int w3_byte_items = 1'000;
  // W6's embedding rows (of 1024 fp32): 512 MiB at 131072, 32 MiB at 8192.
  int64_t w6_rows = 131'072;
  // Iterations of every case but the cheap memcpy baseline (--iterations=N
  // sets it, for profiling one case).
  int iterations = 3;
};

// Takes this program's own flags out of argv (Google Benchmark rejects
// flags it does not know) and derives the sizes. False, with a message, on
// a bad value.
bool ParseOwnFlags(int* argc, char** argv, Config* config);

// Registration, called by main in the order the cases run: every case of a
// workload together, so that its data is built once (workloads.h).
void RegisterBaselineBenchmarks(const Config& config, int workload);
// The best raw writes and cold reads (raw_io_bench.cc), after those.
void RegisterRawIoBenchmarks(const Config& config, int workload);
// W2's also registers W4 and the async save.
void RegisterWorkloadBenchmarks(const Config& config, int workload);
void RegisterRssBenchmarks(const Config& config);
void RegisterRanksBenchmarks(const Config& config);
// With --tools, on W1-W3 (tools_bench.cc).
void RegisterToolsBenchmarks(const Config& config, int workload);
// Incremental saves and their loads: W5, W6, W2 (incremental_bench.cc).
void RegisterIncrementalBenchmarks(const Config& config);
// The piece codec alone, and saves and loads of a trained model's state
// with and without it (codec_bench.cc).
void RegisterCodecBenchmarks(const Config& config);
void RegisterStoreScaleBenchmarks(const Config& config);
void RegisterItemsBenchmarks(const Config& config);
void RegisterSizeBenchmarks(const Config& config);
void RegisterAgedBenchmarks(const Config& config);

// A case: its state, and the program's flags.
using CaseFn = void (*)(benchmark::State&, const Config&);

// Registers `fn` as case `name`. REQUIRES: `config` outlives the run.
benchmark::internal::Benchmark* Register(const char* name, CaseFn fn,
                                         const Config& config);

// What every case sets: a fixed iteration count, wall-clock time (this is
// I/O), milliseconds.
void SetCommon(benchmark::internal::Benchmark* b, int iterations);

// ---- Cases on any workload's data ----

struct WorkloadData;  // workloads.h

// The bodies of cases registered on a workload id, for the case files that
// choose their data otherwise (size_bench.cc): each runs on `data` as the
// case named runs on its workload. Reads go to data.destination().
// The loop of every raw write case (raw_io_bench.cc): `setup`'s status,
// then `write(path)` into a new file under a fresh directory `name` each
// iteration; the files go after the loop.
void TimeWrites(benchmark::State& state, WorkloadData& data, const char* name,
                Status setup,
                const std::function<Status(const std::string&)>& write);
// BM_RawFileWriteFsync and BM_RawFileRead (baselines_bench.cc).
void RawFileWriteFsync(benchmark::State& state, WorkloadData& data);
void RawFileRead(benchmark::State& state, WorkloadData& data, bool cold);
// BM_RawWriteDirect and BM_RawReadDirect (raw_io_bench.cc).
void RawWriteDirect(benchmark::State& state, WorkloadData& data, int writers);
void RawReadDirect(benchmark::State& state, WorkloadData& data,
                   int queue_depth);
// BM_RawReadDirect's read of a payload file into `iov` in order: O_DIRECT,
// `queue_depth` threads with one 8 MiB pread each in flight. Its aligned
// buffers are allocated (and touched) here, not in the returned call.
std::function<Status(const std::string&)> DirectReadInto(std::vector<iovec> iov,
                                                         int queue_depth);
// BM_RssSave and BM_RssLoad (workload_bench.cc). RssLoad loads back into
// data.source, checks it against its seed and frees the slot
// (DropWorkload): the next user of it must not find the zeroes of a failed
// load.
void RssSave(benchmark::State& state, WorkloadData& data, const Config& config);
void RssLoad(benchmark::State& state, WorkloadData& data, const Config& config);

// ---- A busy machine ----

// While alive, one child process per online CPU spins at the default
// priority (--busy); the destructor kills and reaps them.
class BusyMachine {
 public:
  BusyMachine();
  ~BusyMachine();
  BusyMachine(const BusyMachine&) = delete;
  BusyMachine& operator=(const BusyMachine&) = delete;
  int processes() const { return static_cast<int>(pids_.size()); }

 private:
  std::vector<int> pids_;
};

// ---- A throttled disk ----

// While alive, this process's reads and writes of the disk that holds
// `dir` are limited to `mbps` MB/s (10^6 bytes), direct and buffered,
// fsync's writeback included: the process is moved into a cgroup v1 blkio
// group of its own with blkio.throttle.{read,write}_bps_device set on the
// disk (the whole disk, if `dir` is on a partition). Needs root and the
// blkio controller at /sys/fs/cgroup/blkio; status() says why not. The
// destructor moves the process back and removes the group.
class ThrottledDisk {
 public:
  ThrottledDisk(const std::string& dir, int64_t mbps);
  ~ThrottledDisk();
  ThrottledDisk(const ThrottledDisk&) = delete;
  ThrottledDisk& operator=(const ThrottledDisk&) = delete;
  const Status& status() const { return status_; }
  // "major:minor" of the throttled disk.
  const std::string& device() const { return device_; }

 private:
  std::string group_;
  std::string device_;
  Status status_;
};

// ---- Scratch directories ----

// Makes the per-process scratch directory under $TMPDIR (default /tmp).
// False, with a message, on failure.
bool CreateTempRoot();
// Removes it with everything in it; main calls this at exit.
void RemoveTempRoot();
// Its path.
const std::string& TempRoot();

// A new, empty directory under the scratch root for one run of one case.
std::string FreshDir(std::string_view name);
// Best effort: RemoveTempRoot removes whatever this leaves.
void RemoveDir(const std::string& dir);

// Every save's writer options: the library's defaults, but --piece_kib.
// The profile's writer options, with --piece_kib applied.
RocksDBWriterOptions WriterOptions(const Config& config);

// A fresh store for one case, removed with its directory at the end.
class ScratchStore {
 public:
  explicit ScratchStore(std::string_view name,
                        const StoreOptions& options = {});
  ~ScratchStore();
  ScratchStore(const ScratchStore&) = delete;
  ScratchStore& operator=(const ScratchStore&) = delete;

  // A cold load, as a restarted trainer makes it: the store closed (so
  // that nothing of it stays open or mapped), its files dropped from the
  // page cache, and the store opened again.
  Status ReopenCold();

  const Status& status() const { return status_; }
  Store& operator*() { return *store_; }
  Store* operator->() { return store_.get(); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  StoreOptions options_;
  Status status_;
  std::unique_ptr<Store> store_;
};

// The timing loop of most cases: unless `setup` failed, `iteration(n)` once
// per benchmark iteration, n counting from 0. The first failure, the
// setup's included, skips the case with its message and ends the loop;
// TimeEach returns it (else OK).
Status TimeEach(benchmark::State& state, Status setup,
                const std::function<Status(int)>& iteration);

// The load cases' loop, after their setup (`setup` its status): for a
// warm run, the store's files read into the page cache (WarmDirCache); one
// untimed load, which checks the setup; then
// one timed `load` per iteration, cold ones after ReopenCold. Returns the
// first failure, which also ends the case.
Status TimeLoads(benchmark::State& state, ScratchStore& store, bool cold,
                 Status setup, const std::function<Status()>& load);

// ---- Inputs ----

uint64_t SplitMix64(uint64_t& state);

// Writes `n` pseudo-random bytes from `state` (a seed, or what the previous
// call returned) and returns the state to continue from. Only the last call
// of a stream may have `n` not a multiple of 8. Every page is written: no
// first touch of it is left for a timing loop (about 20 us per 4 KiB page
// on some of these VMs).
uint64_t FillBytes(uint8_t* data, size_t n, uint64_t state);
void Fill(std::vector<uint8_t>& data, uint64_t seed);

// The fqn of the i-th tensor of the ranks cases' state dict.
std::string LayerName(size_t i);

// ---- Ranks ----

// Runs `body(rank, collective)` on one thread per rank of a new
// ThreadCollective group and joins them. Returns the first failing rank's
// error; the driver makes every rank fail when one does, naming it.
Status RunRanks(int ranks, const std::function<Status(int, Collective&)>& body);

// ---- Raw file I/O ----

// IOError "<what> <path>: <strerror(errno)>".
Status Errno(std::string_view what, const std::string& path);

// Writes `iov` in order to a new file at `path` (writev), fsyncs and closes
// it.
Status WriteFileFsync(const std::string& path, const std::vector<iovec>& iov);

// Fills `iov` in order from the start of `path` (readv).
Status ReadFile(const std::string& path, const std::vector<iovec>& iov);

// Asks the kernel to drop the file's clean pages from the page cache, so
// that the next read comes from the disk.
Status DropPageCache(const std::string& path);

// Drops every regular file under `dir` (a store, a checkpoint directory, a
// RocksDB) from the page cache.
Status DropDirCache(const std::string& dir);

// Reads every regular file under `dir` through the page cache, so that
// the next read of it comes from memory. A warm load needs it: saves drop
// what they write from the page cache, and loads read what is not cached
// with O_DIRECT (RocksDBReaderOptions::direct_span_bytes), which leaves it
// uncached.
Status WarmDirCache(const std::string& dir);

// fsyncs a directory, making the names created in it durable.
Status FsyncDir(const std::string& dir);

// ---- Reporting ----

// The bytes this process has caused to be written to storage so far, all
// its threads included: `write_bytes` of /proc/self/io (counted as pages
// are dirtied in the page cache, or written with O_DIRECT). -1 where the
// kernel does not account it (no CONFIG_TASK_IO_ACCOUNTING).
int64_t ProcWriteBytes();

// Throughput, and the per-iteration facts ratios.py pairs cases by:
// `workload` (1-6, 0 for the --rss_gib state dict), `bytes` and, for reads,
// `cold` (< 0 means not a read).
void SetCounters(benchmark::State& state, uint64_t bytes, uint64_t items,
                 int workload, int cold = -1);

// Peak RSS of one case. Made after the case's inputs are built (it does
// not count them) and before the timing loop (loads: before their untimed
// first load, so that what a store keeps from one load to the next counts
// too), it returns freed heap to the kernel (malloc_trim) and resets the
// kernel's high-water mark of RSS (VmHWM) to the current RSS by writing "5"
// to /proc/self/clear_refs. Report then sets `peak_rss_mib` (VmHWM since)
// and `rss_added_mib` (that minus the RSS at the start, which includes the
// state dict and the load destination). A thread samples /proc/self/statm
// every 2 ms meanwhile, for the peaks of anonymous memory (RssAnon) and of
// mapped file pages (RssFile, page cache the kernel can reclaim) above
// their values at the start: `anon_added_mib` and `file_added_mib`
// (sampled, so a peak shorter than 2 ms can be missed; VmHWM is exact for
// their sum), and `file_kept_mib`, the file pages still mapped at Report.
class RssMeter {
 public:
  RssMeter();
  ~RssMeter();
  RssMeter(const RssMeter&) = delete;
  RssMeter& operator=(const RssMeter&) = delete;
  // Sets the counters under `prefix` ("" for the case's own).
  void Report(benchmark::State& state, const std::string& prefix = "") const;
  double before_mib() const { return before_mib_; }

 private:
  struct Sampler;
  double before_mib_ = -1;
  std::shared_ptr<Sampler> sampler_;
};

}  // namespace rocksdcp::bench

#endif  // ROCKSDCP_BENCHMARKS_BENCH_UTIL_H_
