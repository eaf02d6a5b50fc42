// What the cases of rocksdcp_bench share: their inputs, scratch
// directories, the raw-file baseline's I/O, page-cache control, the
// counters ratios.py pairs cases by, and the program's own flags.
//
// The cases are in checkpoint_bench.cc (one rank, and main) and
// ranks_bench.cc (N thread ranks); benchmarks/README.md has the how-to.

#ifndef ROCKSDCP_BENCHMARKS_BENCH_UTIL_H_
#define ROCKSDCP_BENCHMARKS_BENCH_UTIL_H_

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::bench {

// The large state dict is this many fp32 tensors of [rows, 1024], in total
// --large_mib MiB, in every case that uses it (single-rank and sharded), so
// that all of them pair with the same raw baseline.
inline constexpr int kLargeTensors = 8;
inline constexpr int64_t kLargeCols = 1024;
// Iterations of the large cases and of the raw baselines.
inline constexpr int kLargeIterations = 3;

struct Config {
  // --large_mib: total size of the large state dict, in MiB.
  int64_t large_mib = 1024;
  // --small_mib: total size of the small one, 256 tensors of 4 KiB per MiB.
  int64_t small_mib = 80;
};

// Takes this program's own --name=N flags out of argv (Google Benchmark
// rejects flags it does not know). False, with a message, on a bad value.
bool ParseOwnFlags(int* argc, char** argv, Config* config);

// Registration, one function per *_bench.cc, called by main because the
// sizes come from flags.
void RegisterCheckpointBenchmarks(const Config& config);
void RegisterRanksBenchmarks(const Config& config);

// What every case sets: a fixed iteration count, wall-clock time (this is
// I/O), milliseconds.
void SetCommon(benchmark::internal::Benchmark* b, int iterations);

// ---- Scratch directories ----

// Makes the per-process scratch directory under $TMPDIR (default /tmp).
// False, with a message, on failure.
bool CreateTempRoot();
// Removes it with everything in it; main calls this at exit.
void RemoveTempRoot();

// A new, empty directory under the scratch root for one run of one case.
std::string FreshDir(std::string_view name);
// Best effort: RemoveTempRoot removes whatever this leaves.
void RemoveDir(const std::string& dir);

// ---- Inputs ----

uint64_t SplitMix64(uint64_t& state);

// Writes every byte of `data` now, so that no page is first touched inside
// a timed loop (about 20 us per 4 KiB page on these VMs).
void Fill(std::vector<uint8_t>& data, uint64_t seed);

// The fqn of the i-th tensor of a benchmark state dict.
std::string LayerName(size_t i);

// `count` fp32 tensors of `bytes_each` bytes each, owned here and lent to
// rocksdcp as a state dict of contiguous views.
class TensorSet {
 public:
  // With `seed` 0 the tensors are zeros (a load's destination).
  TensorSet(int count, uint64_t bytes_each, uint64_t seed);

  rocksdcp::StateDict StateDict();

  uint64_t total_bytes() const {
    return buffers_.empty() ? 0 : buffers_.size() * buffers_[0].size();
  }
  size_t count() const { return buffers_.size(); }
  bool operator==(const TensorSet& other) const {
    return buffers_ == other.buffers_;
  }

 private:
  std::vector<std::vector<uint8_t>> buffers_;
};

// ---- Raw file I/O, the baseline ----

// Writes `data` to a new file at `path`, fsyncs and closes it.
Status WriteFileFsync(const std::string& path,
                      const std::vector<uint8_t>& data);

// Reads data.size() bytes of `path` into `data`.
Status ReadFile(const std::string& path, std::vector<uint8_t>& data);

// Asks the kernel to drop the file's clean pages from the page cache, so
// that the next read comes from the disk.
Status DropPageCache(const std::string& path);

// Drops every SST file of the store in `dir` from the page cache.
Status DropStoreCache(const std::string& dir);

// ---- Reporting ----

// Throughput and the per-iteration facts ratios.py pairs cases by: a
// rocksdcp case is compared with the raw case of the same bytes (and, for
// reads, the same cold/warm). `cold` < 0 means not a read.
void SetCounters(benchmark::State& state, uint64_t bytes, uint64_t items,
                 int cold = -1);

}  // namespace rocksdcp::bench

#endif  // ROCKSDCP_BENCHMARKS_BENCH_UTIL_H_
