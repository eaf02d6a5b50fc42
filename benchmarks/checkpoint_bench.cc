// Save and Load throughput of rocksdcp, each against a raw-file baseline
// measured in the same run: these VMs are noisy enough that a ratio to a
// baseline from the same run means much more than MB/s compared across
// runs.
//
//   BM_RawFileWriteFsync  write() one buffer to a new file, then fsync
//   BM_RawFileRead        read() that file back, warm (page cache) or cold
//   BM_SaveLarge          Save() of 8 large fp32 tensors (--large_mib total)
//   BM_LoadLarge          Load() of the same, warm or cold
//   BM_SaveSmall          Save() of many 4 KiB tensors (--small_mib total)
//   BM_LoadSmall          Load() of the same, warm or cold
//
// Own flags, taken out of argv before Google Benchmark parses the rest:
//   --large_mib=N   total size of the large state dict (default 1024)
//   --small_mib=N   total size of the small one, 256 tensors per MiB
//                   (default 80: 20480 tensors)
// The raw baselines run at both sizes. benchmarks/README.md has the how-to,
// and ratios.py turns --benchmark_format=json output into the ratio table.
//
// Every input is built before the timing loop. Where an iteration has
// setup of its own that can't leave the loop without PauseTiming (not used:
// hundreds of ns per call, google/benchmark#179), it stays in and is named:
// cold runs include the posix_fadvise(DONTNEED) that empties the page cache,
// in the raw baseline and in rocksdcp alike.

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "rocksdcp/rocksdcp.h"

namespace {

namespace fs = std::filesystem;
using rocksdcp::Status;

constexpr int kLargeTensors = 8;
constexpr uint64_t kSmallTensorBytes = 4096;
constexpr int kLargeIterations = 3;
constexpr int kSmallIterations = 5;

struct Config {
  int64_t large_mib = 1024;
  int64_t small_mib = 80;
};

// The per-process scratch directory, removed by main at exit.
std::string g_temp_root;

// A new, empty directory for one run of one benchmark.
std::string FreshDir(std::string_view name) {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::path(g_temp_root) /
                       (std::string(name) + "-" + std::to_string(counter++));
  std::error_code ec;
  fs::create_directories(dir, ec);
  return dir.string();
}

void RemoveDir(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);  // Best effort: main removes the root anyway.
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Writes every byte of `data` now, so that no page is first touched inside
// a timed loop (about 20 us per 4 KiB page on these VMs).
void Fill(std::vector<uint8_t>& data, uint64_t seed) {
  uint64_t state = seed;
  size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    const uint64_t r = SplitMix64(state);
    std::memcpy(data.data() + i, &r, 8);
  }
  for (; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(SplitMix64(state));
}

// `count` fp32 tensors of `bytes_each` bytes each, owned here and lent to
// rocksdcp as a state dict of contiguous views.
class TensorSet {
 public:
  // With `seed` 0 the tensors are zeros (a load's destination).
  TensorSet(int count, uint64_t bytes_each, uint64_t seed)
      : buffers_(count, std::vector<uint8_t>(bytes_each)) {
    if (seed != 0) {
      for (int i = 0; i < count; ++i) Fill(buffers_[i], seed + i);
    }
  }

  rocksdcp::StateDict StateDict() {
    rocksdcp::StateDict dict;
    char name[48];
    for (size_t i = 0; i < buffers_.size(); ++i) {
      std::snprintf(name, sizeof(name), "model.layers.%zu.weight", i);
      const int64_t elems = static_cast<int64_t>(buffers_[i].size() / 4);
      std::vector<int64_t> sizes = {elems};
      if (elems > 1024 && elems % 1024 == 0) sizes = {elems / 1024, 1024};
      dict.emplace(name, rocksdcp::TensorView::Contiguous(
                             rocksdcp::DType::kFloat32, std::move(sizes),
                             buffers_[i].data()));
    }
    return dict;
  }

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

Status Errno(std::string_view what, const std::string& path) {
  return Status::IOError(std::string(what) + " " + path + ": " +
                         std::strerror(errno));
}

Status WriteFileFsync(const std::string& path,
                      const std::vector<uint8_t>& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Errno("open", path);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = Errno("write", path);
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Status s = Errno("fsync", path);
    ::close(fd);
    return s;
  }
  if (::close(fd) != 0) return Errno("close", path);
  return Status::OK();
}

// Asks the kernel to drop the file's clean pages from the page cache, so
// that the next read comes from the disk.
Status DropPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Errno("open", path);
  const int err = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (err != 0) {
    return Status::IOError("posix_fadvise " + path + ": " + std::strerror(err));
  }
  return Status::OK();
}

// Drops every SST file of a store from the page cache. RocksDB keeps the
// files open in its table cache; the advice applies to the file, not to
// one descriptor.
Status DropStoreCache(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".sst") {
      ROCKSDCP_RETURN_IF_ERROR(DropPageCache(e.path().string()));
    }
  }
  if (ec) return Status::IOError("listing " + dir + ": " + ec.message());
  return Status::OK();
}

Status ReadFile(const std::string& path, std::vector<uint8_t>& data) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Errno("open", path);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = n == 0 ? Status::IOError("short read of " + path)
                        : Errno("read", path);
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::OK();
}

// Throughput and the per-iteration facts ratios.py pairs cases by: a
// rocksdcp case is compared with the raw case of the same bytes (and, for
// reads, the same cold/warm).
void SetCounters(benchmark::State& state, uint64_t bytes, uint64_t items,
                 int cold = -1) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * items));
  state.counters["bytes"] = static_cast<double>(bytes);
  if (cold >= 0) state.counters["cold"] = cold;
}

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

// Registered from main, because the sizes come from flags.
void RegisterAll(const Config& c) {
  const int64_t small_tensors = c.small_mib * ((1 << 20) / kSmallTensorBytes);
  auto common = [](benchmark::internal::Benchmark* b, int iterations) {
    b->Iterations(iterations)->UseRealTime()->Unit(benchmark::kMillisecond);
  };
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
  common(raw_write, kLargeIterations);
  common(raw_read, kLargeIterations);

  common(benchmark::RegisterBenchmark("BM_SaveLarge", BM_SaveLarge)
             ->ArgNames({"mib"})
             ->Arg(c.large_mib),
         kLargeIterations);
  common(benchmark::RegisterBenchmark("BM_LoadLarge", BM_LoadLarge)
             ->ArgNames({"mib", "cold"})
             ->Args({c.large_mib, 0})
             ->Args({c.large_mib, 1}),
         kLargeIterations);
  common(benchmark::RegisterBenchmark("BM_SaveSmall", BM_SaveSmall)
             ->ArgNames({"tensors"})
             ->Arg(small_tensors),
         kSmallIterations);
  common(benchmark::RegisterBenchmark("BM_LoadSmall", BM_LoadSmall)
             ->ArgNames({"tensors", "cold"})
             ->Args({small_tensors, 0})
             ->Args({small_tensors, 1}),
         kSmallIterations);
}

// Takes this program's own --name=N flags out of argv (Google Benchmark
// rejects flags it does not know). False, with a message, on a bad value.
bool ParseOwnFlags(int* argc, char** argv, Config* config) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string_view arg = argv[i];
    int64_t* target = nullptr;
    std::string_view value;
    for (auto [flag, field] :
         {std::pair{std::string_view("--large_mib="), &config->large_mib},
          std::pair{std::string_view("--small_mib="), &config->small_mib}}) {
      if (arg.starts_with(flag)) {
        target = field;
        value = arg.substr(flag.size());
      }
    }
    if (target == nullptr) {
      if (arg == "--help") {
        std::printf(
            "rocksdcp_bench flags:\n"
            "  --large_mib=N  size of BM_SaveLarge/BM_LoadLarge (default "
            "1024)\n"
            "  --small_mib=N  size of BM_SaveSmall/BM_LoadSmall, 256 tensors "
            "of 4 KiB per MiB (default 80)\n\n");
      }
      argv[out++] = argv[i];
      continue;
    }
    char* end = nullptr;
    const long long v = std::strtoll(std::string(value).c_str(), &end, 10);
    if (value.empty() || *end != '\0' || v < 1 || v > (1 << 20)) {
      std::fprintf(stderr, "rocksdcp_bench: bad value in %s\n", argv[i]);
      return false;
    }
    *target = v;
  }
  *argc = out;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  if (!ParseOwnFlags(&argc, argv, &config)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  const char* tmpdir = std::getenv("TMPDIR");
  std::string pattern =
      (fs::path(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") /
       "rocksdcp_bench.XXXXXX")
          .string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "rocksdcp_bench: mkdtemp %s: %s\n", pattern.c_str(),
                 std::strerror(errno));
    return 1;
  }
  g_temp_root = pattern;

  RegisterAll(config);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  RemoveDir(g_temp_root);
  return 0;
}
