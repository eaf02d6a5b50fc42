// Soak (issue #38): one process keeps a store open as a trainer does and,
// cycle after cycle, changes part of its state, saves it incrementally and
// compressed, keeps the last 3 checkpoints, and loads the newest back,
// checking every byte. What it holds must stay flat once the first cycles
// are past: resident memory, open file descriptors, threads, and the
// store's bytes on disk.
//
//   ROCKSDCP_SOAK_CYCLES=N  cycles (default 1,000, some 30 s here; 300
//                           under a sanitizer)
//   ROCKSDCP_SOAK_CURVE=F   writes one line per cycle to F: cycle, RSS
//                           bytes, fds, threads, bytes on disk
//
// Flat means: the largest value of the last tenth of the cycles is within a
// bound of the largest of the tenth after the warm-up tenth (the first
// tenth fills RocksDB's and malloc's caches, and the first checkpoints'
// reference chains). The bounds: 2 descriptors, 1 thread, 8 MiB of RSS
// (less RocksDB's block cache, which fills up to its 8 MiB as checkpoints
// come and go),
// and a quarter of the live checkpoints' bytes for the store's data on
// disk (SST files, staging, OPTIONS). The files that grow by design, until
// a bound makes them start over, are checked against that bound instead:
// the WAL (StoreOptions::max_total_wal_size, a soft bound, so twice it;
// the soak sets 4 MiB), the MANIFEST (kMaxManifestBytes) and the store's
// LOG (twice kStoreLogMaxBytes: LOG and LOG.old).

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rocksdb/checkpoint_content.h"
#include "rocksdb/store_fixture.h"
#include "rocksdb/store_impl.h"
#include "rocksdb/store_log.h"

namespace rocksdcp::testing {
namespace {

struct Sample {
  uint64_t rss = 0;
  // RocksDB's block cache fills up to its capacity (8 MiB) with the blocks
  // of checkpoints that come and go: bounded, and counted apart.
  uint64_t cache = 0;
  uint64_t fds = 0;
  uint64_t threads = 0;
  uint64_t disk = 0;  // Data: everything but the files below.
  uint64_t wal = 0;
  uint64_t manifest = 0;
  uint64_t log = 0;
};

// "VmRSS:" (kB) and "Threads:" of /proc/self/status.
void ReadStatus(Sample* s) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      s->rss = std::stoull(line.substr(6)) * 1024;
    } else if (line.rfind("Threads:", 0) == 0) {
      s->threads = std::stoull(line.substr(8));
    }
  }
}

// The store's files, by kind.
void ReadDisk(const std::string& dir, Sample* s) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const uint64_t size = e.file_size();
    if (e.path().extension() == ".log") {
      s->wal += size;
    } else if (name.rfind("MANIFEST-", 0) == 0) {
      s->manifest += size;
    } else if (name.rfind("LOG", 0) == 0) {
      s->log += size;
    } else {
      s->disk += size;
    }
  }
}

// A trainer's state: 4 float32 tensors of 256 KiB whose values repeat
// enough for zstd to halve them, and an optimizer step as bytes. Cycle i
// changes one 64 KiB piece of one tensor, so an incremental save writes
// that piece and references the 15 others.
constexpr int kTensors = 4;
constexpr int64_t kElems = 64 * 1024;
constexpr uint64_t kPieceBytes = 64 * 1024;

struct State {
  std::vector<std::vector<float>> tensors;
  std::string step;

  State() : tensors(kTensors, std::vector<float>(kElems)) {
    for (int t = 0; t < kTensors; ++t) {
      for (int64_t i = 0; i < kElems; ++i) {
        tensors[t][i] = static_cast<float>((i * 7 + t) % 97) * 0.25f;
      }
    }
  }
  void Advance(uint64_t cycle) {
    std::vector<float>& t = tensors[cycle % kTensors];
    const int64_t piece = static_cast<int64_t>((cycle / kTensors) % 4);
    const int64_t per_piece = kPieceBytes / sizeof(float);
    for (int64_t i = piece * per_piece; i < (piece + 1) * per_piece; i += 64) {
      t[i] = static_cast<float>(cycle);
    }
    step.assign(reinterpret_cast<const char*>(&cycle), sizeof cycle);
  }
  StateDict Dict() {
    StateDict d;
    for (int t = 0; t < kTensors; ++t) {
      d["model.w" + std::to_string(t)] =
          TensorView::Contiguous(DType::kFloat32, {kElems}, tensors[t].data());
    }
    d["optimizer.step"] = step;
    return d;
  }
};

// The largest of `f` over samples [begin, end).
template <typename F>
uint64_t MaxOver(const std::vector<Sample>& s, size_t begin, size_t end, F f) {
  uint64_t m = 0;
  for (size_t i = begin; i < end; ++i) m = std::max<uint64_t>(m, f(s[i]));
  return m;
}

TEST(SoakTest, SavesLoadsAndRetentionStayFlat) {
  const uint64_t cycles = std::max<uint64_t>(
      EnvU64("ROCKSDCP_SOAK_CYCLES", kSanitized ? 300 : 1000), 30);
  ScopedTempDir dir;
  const std::string path = dir.Sub("store");
  StoreOptions store_options;
  store_options.max_total_wal_size = 4ull << 20;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                       Store::Open(path, store_options));
  RocksDBWriterOptions writer_options;
  writer_options.base_on_newest = true;
  writer_options.compression = Compression::kBytePlaneZstd;
  writer_options.compression_policy = CompressionPolicy::kAlways;
  writer_options.max_piece_bytes = kPieceBytes;

  State state;
  // The load's destination, reused as a trainer reuses its model.
  State into;
  std::vector<Sample> samples;
  uint64_t live_bytes = 0;
  for (uint64_t cycle = 0; cycle < cycles; ++cycle) {
    state.Advance(cycle);
    char id[32];
    std::snprintf(id, sizeof id, "step-%06" PRIu64, cycle);
    {
      ASSERT_OK_AND_ASSIGN(auto writer, store->NewWriter(writer_options));
      StateDict dict = state.Dict();
      ASSERT_OK(Save(dict, *writer, {.checkpoint_id = id}));
    }
    ASSERT_OK(store->KeepLast(3).status());
    {
      ASSERT_OK_AND_ASSIGN(auto reader, store->NewReader());
      StateDict dict = into.Dict();
      ASSERT_OK(Load(&dict, *reader, {.checkpoint_id = id}));
      for (int t = 0; t < kTensors; ++t) {
        ASSERT_TRUE(into.tensors[t] == state.tensors[t])
            << "cycle " << cycle << ": model.w" << t << " loads other bytes";
      }
      ASSERT_EQ(std::get<std::string>(dict["optimizer.step"]), state.step);
    }
    ASSERT_OK_AND_ASSIGN(auto list, store->List());
    ASSERT_EQ(list.size(), std::min<uint64_t>(cycle + 1, 3));
    live_bytes = 0;
    for (const CheckpointInfo& c : list) live_bytes += c.bytes;
    Sample s;
    ReadStatus(&s);
    s.cache = static_cast<StoreImpl*>(store.get())->block_cache_usage();
    s.rss -= std::min(s.rss, s.cache);
    s.fds = OpenFileDescriptors();
    ReadDisk(path, &s);
    samples.push_back(s);
  }
  // No leftovers: nothing for GC.
  ASSERT_OK_AND_ASSIGN(GcReport gc, store->CollectGarbage(/*dry_run=*/true));
  EXPECT_TRUE(gc.dropped_column_families.empty());
  EXPECT_TRUE(gc.deleted_staging_files.empty());

  if (const char* curve = std::getenv("ROCKSDCP_SOAK_CURVE")) {
    std::ofstream out(curve);
    out << "cycle rss_less_cache_bytes cache_bytes fds threads data_bytes "
           "wal_bytes manifest_bytes log_bytes\n";
    for (size_t i = 0; i < samples.size(); ++i) {
      const Sample& x = samples[i];
      out << i << ' ' << x.rss << ' ' << x.cache << ' ' << x.fds << ' '
          << x.threads << ' ' << x.disk << ' ' << x.wal << ' ' << x.manifest
          << ' ' << x.log << '\n';
    }
  }
  const size_t tenth = samples.size() / 10;
  const size_t n = samples.size();
  auto rss = [](const Sample& s) { return s.rss; };
  auto fds = [](const Sample& s) { return s.fds; };
  auto threads = [](const Sample& s) { return s.threads; };
  auto disk = [](const Sample& s) { return s.disk; };
  struct Row {
    const char* what;
    uint64_t early, late, bound;
  };
  const Row rows[] = {
      {"RSS-cache", MaxOver(samples, tenth, 2 * tenth, rss),
       MaxOver(samples, n - tenth, n, rss), 8ull << 20},
      {"open fds", MaxOver(samples, tenth, 2 * tenth, fds),
       MaxOver(samples, n - tenth, n, fds), 2},
      {"threads", MaxOver(samples, tenth, 2 * tenth, threads),
       MaxOver(samples, n - tenth, n, threads), 1},
      {"data bytes", MaxOver(samples, tenth, 2 * tenth, disk),
       MaxOver(samples, n - tenth, n, disk), live_bytes / 4},
  };
  std::printf("soak: %zu cycles, %" PRIu64 " live bytes at the end\n", n,
              live_bytes);
  for (const Row& r : rows) {
    std::printf("  %-10s cycles %zu-%zu: at most %" PRIu64
                "; last %zu: at "
                "most %" PRIu64 " (bound +%" PRIu64 ")\n",
                r.what, tenth, 2 * tenth - 1, r.early, tenth, r.late, r.bound);
    EXPECT_LE(r.late, r.early + r.bound) << r.what << " grew";
  }
  const Row bounded[] = {
      {"WAL bytes", 0,
       MaxOver(samples, 0, n, [](const Sample& s) { return s.wal; }),
       2 * store_options.max_total_wal_size},
      {"MANIFEST", 0,
       MaxOver(samples, 0, n, [](const Sample& s) { return s.manifest; }),
       kMaxManifestBytes + (1ull << 20)},
      {"LOG bytes", 0,
       MaxOver(samples, 0, n, [](const Sample& s) { return s.log; }),
       2 * kStoreLogMaxBytes},
  };
  for (const Row& r : bounded) {
    std::printf("  %-10s at most %" PRIu64 " (bound %" PRIu64 ")\n", r.what,
                r.late, r.bound);
    EXPECT_LE(r.late, r.bound) << r.what;
  }
}

}  // namespace
}  // namespace rocksdcp::testing
