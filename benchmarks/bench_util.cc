#include "bench_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

namespace rocksdcp::bench {

namespace fs = std::filesystem;

namespace {

// The per-process scratch directory, removed by main at exit.
std::string g_temp_root;

Status Errno(std::string_view what, const std::string& path) {
  return Status::IOError(std::string(what) + " " + path + ": " +
                         std::strerror(errno));
}

}  // namespace

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
            "  --large_mib=N  size of BM_SaveLarge/BM_LoadLarge and "
            "BM_SaveRanks/BM_LoadRanks (default 1024)\n"
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

void SetCommon(benchmark::internal::Benchmark* b, int iterations) {
  b->Iterations(iterations)->UseRealTime()->Unit(benchmark::kMillisecond);
}

bool CreateTempRoot() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string pattern =
      (fs::path(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") /
       "rocksdcp_bench.XXXXXX")
          .string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "rocksdcp_bench: mkdtemp %s: %s\n", pattern.c_str(),
                 std::strerror(errno));
    return false;
  }
  g_temp_root = pattern;
  return true;
}

void RemoveTempRoot() {
  if (!g_temp_root.empty()) RemoveDir(g_temp_root);
}

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

std::string LayerName(size_t i) {
  char name[48];
  std::snprintf(name, sizeof(name), "model.layers.%zu.weight", i);
  return name;
}

TensorSet::TensorSet(int count, uint64_t bytes_each, uint64_t seed)
    : buffers_(count, std::vector<uint8_t>(bytes_each)) {
  if (seed != 0) {
    for (int i = 0; i < count; ++i) Fill(buffers_[i], seed + i);
  }
}

rocksdcp::StateDict TensorSet::StateDict() {
  rocksdcp::StateDict dict;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const int64_t elems = static_cast<int64_t>(buffers_[i].size() / 4);
    std::vector<int64_t> sizes = {elems};
    if (elems > kLargeCols && elems % kLargeCols == 0) {
      sizes = {elems / kLargeCols, kLargeCols};
    }
    dict.emplace(LayerName(i), rocksdcp::TensorView::Contiguous(
                                   rocksdcp::DType::kFloat32, std::move(sizes),
                                   buffers_[i].data()));
  }
  return dict;
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

// RocksDB keeps the SST files open in its table cache; the advice applies
// to the file, not to one descriptor, so a fresh descriptor is enough.
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

void SetCounters(benchmark::State& state, uint64_t bytes, uint64_t items,
                 int cold) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * items));
  state.counters["bytes"] = static_cast<double>(bytes);
  if (cold >= 0) state.counters["cold"] = cold;
}

}  // namespace rocksdcp::bench
