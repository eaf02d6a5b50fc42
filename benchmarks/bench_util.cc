#include "bench_util.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace rocksdcp::bench {

namespace fs = std::filesystem;

namespace {

// The per-process scratch directory, removed by main at exit.
std::string g_temp_root;

// If `arg` is `prefix` followed by a number, sets *out to it and *ok to
// whether it lies in [min, max] (printing what is wrong if not) and
// returns true; false if `arg` is another flag.
bool IntFlag(std::string_view arg, std::string_view prefix, long long min,
             long long max, int64_t* out, bool* ok) {
  if (!arg.starts_with(prefix)) return false;
  const std::string value(arg.substr(prefix.size()));
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  *ok = !value.empty() && *end == '\0' && v >= min && v <= max;
  if (*ok) {
    *out = v;
  } else {
    std::fprintf(stderr, "rocksdcp_bench: bad value in %.*s (%lld-%lld)\n",
                 static_cast<int>(arg.size()), arg.data(), min, max);
  }
  return true;
}

// Sets *out to the GiB of `list` ("1,4,16"), each in [1, 64]; false, with
// a message, if one is not.
bool GibList(std::string_view list, std::vector<int64_t>* out) {
  out->clear();
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item(list.substr(start, comma - start));
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 64) {
      std::fprintf(stderr,
                   "rocksdcp_bench: bad value in --sizes=%.*s (GiB, 1-64, "
                   "separated by commas)\n",
                   static_cast<int>(list.size()), list.data());
      return false;
    }
    out->push_back(v);
    start = comma + 1;
  }
  return true;
}

}  // namespace

Status Errno(std::string_view what, const std::string& path) {
  return Status::IOError(std::string(what) + " " + path + ": " +
                         std::strerror(errno));
}

benchmark::internal::Benchmark* Register(const char* name, CaseFn fn,
                                         const Config& config) {
  return benchmark::RegisterBenchmark(
      name, [fn, &config](benchmark::State& state) { fn(state, config); });
}

bool ParseOwnFlags(int* argc, char** argv, Config* config) {
  int out = 1;
  int64_t iterations = 0;  // --iterations=N, when given.
  int64_t read_in_place = 1;
  int64_t read_threads = -1;     // --read_threads=N, when given.
  int64_t write_threads = -1;    // --write_threads=N, when given.
  int64_t prefetch_mib = -1;     // --prefetch_mib=N, when given.
  int64_t direct_span_mib = -1;  // --direct_span_mib=N, when given.
  for (int i = 1; i < *argc; ++i) {
    const std::string_view arg = argv[i];
    bool ok = true;
    if (IntFlag(arg, "--rss_gib=", 0, 64, &config->rss_gib, &ok) ||
        IntFlag(arg, "--piece_kib=", 0, 1 << 20, &config->piece_kib, &ok) ||
        IntFlag(arg, "--iterations=", 1, 1000, &iterations, &ok) ||
        IntFlag(arg, "--read_in_place=", 0, 1, &read_in_place, &ok) ||
        IntFlag(arg, "--read_threads=", 0, 64, &read_threads, &ok) ||
        IntFlag(arg, "--write_threads=", 0, 64, &write_threads, &ok) ||
        IntFlag(arg, "--prefetch_mib=", 0, 1 << 20, &prefetch_mib, &ok) ||
        IntFlag(arg, "--direct_span_mib=", 0, 1 << 10, &direct_span_mib, &ok) ||
        IntFlag(arg, "--throttle_mbps=", 0, 100000, &config->throttle_mbps,
                &ok)) {
      if (!ok) return false;
    } else if (arg == "--quick") {
      config->quick = true;
    } else if (arg == "--busy") {
      config->busy = true;
    } else if (arg == "--ranks") {
      config->ranks = true;
    } else if (arg == "--checkpoints") {
      config->checkpoints = true;
    } else if (arg == "--items") {
      config->items = true;
    } else if (arg == "--sizes") {
      config->sizes_gib = {1, 4, 16};
    } else if (arg.starts_with("--sizes=")) {
      if (!GibList(arg.substr(std::strlen("--sizes=")), &config->sizes_gib)) {
        return false;
      }
    } else if (arg.starts_with("--aged_prepare=")) {
      config->aged_prepare_dir = arg.substr(std::strlen("--aged_prepare="));
    } else if (arg.starts_with("--aged=")) {
      config->aged_dir = arg.substr(std::strlen("--aged="));
    } else if (arg == "--tools") {
#ifdef ROCKSDCP_BENCH_TOOLS
      config->tools = true;
#else
      std::fprintf(stderr,
                   "rocksdcp_bench: --tools needs the tools "
                   "(-DROCKSDCP_BUILD_TOOLS=ON)\n");
      return false;
#endif
    } else if (arg.starts_with("--profile=")) {
      const std::string_view value = arg.substr(std::strlen("--profile="));
      if (value == "server") {
        config->profile = ServerProfile();
      } else if (value == "small") {
        config->profile = SmallDeviceProfile();
      } else {
        std::fprintf(stderr,
                     "rocksdcp_bench: bad value in %s (server, small)\n",
                     argv[i]);
        return false;
      }
      config->profile_name = std::string(value);
    } else {
      if (arg == "--help") {
        std::printf(
            "rocksdcp_bench flags:\n"
            "  --quick      CI-sized: every workload a 16th of its size, one "
            "iteration per case\n"
            "  --rss_gib=N  also save and load an N GiB state dict and report "
            "the RSS rocksdcp adds\n"
            "               (BM_RssSave, BM_RssLoad; default 0, off)\n"
            "  --busy       run every case beside one spinning process per "
            "CPU\n"
            "  --ranks      also run BM_SaveRanks / BM_LoadRanks on 1, 2, 4 "
            "thread ranks\n"
            "  --checkpoints  also run the checkpoints-in-one-store cases "
            "(stores of 1, 100, 1,000)\n"
            "  --items      also run BM_ItemsSave / BM_ItemsLoad on 1,000, "
            "100,000 and 1,000,000 tensors of 1 KiB\n"
            "  --sizes[=G,...]  also run the size cases (BM_Size*) on a "
            "state dict of each G GiB,\n"
            "               in order, with raw baselines of the same bytes "
            "(default: 1,4,16)\n"
            "  --aged_prepare=DIR  write W1's and W2's files for the aged "
            "cold loads into DIR\n"
            "  --aged=DIR   run the aged cold loads (BM_Aged*) on DIR's "
            "files, first read and reread\n"
            "  --tools      also run BM_ExportSafetensors / "
            "BM_ImportSafetensors on W1-W3\n"
            "  --piece_kib=N  every save cuts pieces of at most N KiB "
            "(max_piece_bytes;\n"
            "               default 0, the library's default)\n"
            "  --profile=P  the device profile (server, the default, or "
            "small) of the save,\n"
            "               load, async and RSS cases\n"
            "  --iterations=N  iterations of every case but memcpy's "
            "(default 3; 1 with --quick)\n"
            "  --read_in_place=0  loads read every piece through RocksDB "
            "(RocksDBReaderOptions::\n"
            "               read_in_place; default 1)\n"
            "  --read_threads=N  loads read with N threads "
            "(RocksDBReaderOptions::read_threads;\n"
            "               default: the profile's)\n"
            "  --write_threads=N  saves write with N threads "
            "(RocksDBWriterOptions::write_threads;\n"
            "               default: the profile's)\n"
            "  --prefetch_mib=N  loads read up to N MiB ahead while they "
            "plan (RocksDBReaderOptions::\n"
            "               prefetch_bytes; 0 off; default: the profile's)\n"
            "  --direct_span_mib=N  loads read what is not cached with "
            "O_DIRECT, N MiB at a time\n"
            "               (RocksDBReaderOptions::direct_span_bytes; 0 off; "
            "default: the profile's)\n"
            "  --throttle_mbps=N  limit the run's reads and writes of the "
            "scratch disk to N MB/s\n"
            "               (a cgroup v1 blkio group; needs root; default 0, "
            "off)\n\n");
      }
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  if (config->quick) {
    config->large_mib = 64;
    config->w2_hidden = 256;
    config->w3_tensors = 5'000;
    config->w3_byte_items = 100;
    config->w6_rows = 8'192;
    config->iterations = 1;
  }
  if (iterations > 0) config->iterations = static_cast<int>(iterations);
  config->profile.reader.read_in_place = read_in_place != 0;
  if (read_threads >= 0) {
    config->profile.reader.read_threads = static_cast<int>(read_threads);
  }
  if (write_threads >= 0) {
    config->profile.writer.write_threads = static_cast<int>(write_threads);
  }
  if (direct_span_mib >= 0) {
    config->profile.reader.direct_span_bytes =
        static_cast<uint64_t>(direct_span_mib) << 20;
  }
  if (prefetch_mib >= 0) {
    config->profile.reader.prefetch_bytes = static_cast<uint64_t>(prefetch_mib)
                                            << 20;
  }
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

const std::string& TempRoot() { return g_temp_root; }

namespace {

constexpr char kBlkio[] = "/sys/fs/cgroup/blkio";

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) return Errno("writing \"" + text + "\" to", path);
  return Status::OK();
}

// "major:minor" of the whole disk holding `dir`.
Result<std::string> DiskOf(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Errno("stat", dir);
  std::string dev =
      std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  // A partition's parent directory in sysfs is its disk.
  const fs::path sys = fs::path("/sys/dev/block") / dev;
  std::error_code ec;
  if (fs::exists(sys / "partition", ec)) {
    std::ifstream in(fs::canonical(sys, ec).parent_path() / "dev");
    std::getline(in, dev);
  }
  return dev;
}

}  // namespace

ThrottledDisk::ThrottledDisk(const std::string& dir, int64_t mbps) {
  auto disk = DiskOf(dir);
  if (!disk.ok()) {
    status_ = disk.status();
    return;
  }
  device_ = *disk;
  group_ = std::string(kBlkio) + "/rocksdcp_bench." + std::to_string(getpid());
  std::error_code ec;
  if (!fs::create_directory(group_, ec)) {
    status_ =
        Status::IOError("creating blkio group " + group_ + ": " + ec.message() +
                        " (--throttle_mbps needs root and cgroup v1's "
                        "blkio controller)");
    group_.clear();
    return;
  }
  const std::string rule = device_ + " " + std::to_string(mbps * 1000 * 1000);
  for (const char* file :
       {"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"}) {
    status_ = WriteText(group_ + "/" + file, rule);
    if (!status_.ok()) return;
  }
  status_ = WriteText(group_ + "/cgroup.procs", std::to_string(getpid()));
}

ThrottledDisk::~ThrottledDisk() {
  if (group_.empty()) return;
  WriteText(std::string(kBlkio) + "/cgroup.procs", std::to_string(getpid()))
      .IgnoreError();
  ::rmdir(group_.c_str());
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

RocksDBWriterOptions WriterOptions(const Config& config) {
  RocksDBWriterOptions options = config.profile.writer;
  if (config.piece_kib > 0) {
    options.max_piece_bytes = static_cast<uint64_t>(config.piece_kib) << 10;
  }
  return options;
}

ScratchStore::ScratchStore(std::string_view name, const StoreOptions& options)
    : dir_(FreshDir(name)), options_(options) {
  auto store = Store::Open(dir_, options);
  status_ = store.status();
  if (store.ok()) store_ = std::move(*store);
}

ScratchStore::~ScratchStore() {
  store_.reset();
  RemoveDir(dir_);
}

Status ScratchStore::ReopenCold() {
  store_.reset();
  ROCKSDCP_RETURN_IF_ERROR(DropDirCache(dir_));
  ROCKSDCP_ASSIGN_OR_RETURN(store_, Store::Open(dir_, options_));
  return Status::OK();
}

Status TimeEach(benchmark::State& state, Status setup,
                const std::function<Status(int)>& iteration) {
  Status s = std::move(setup);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return s;
  }
  int n = 0;
  for (auto _ : state) {
    s = iteration(n++);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  return s;
}

Status TimeLoads(benchmark::State& state, ScratchStore& store, bool cold,
                 Status setup, const std::function<Status()>& load) {
  Status s = std::move(setup);
  if (s.ok() && !cold) s = WarmDirCache(store.dir());
  if (s.ok()) s = load();
  double reopen_ms = 0;
  s = TimeEach(state, s, [&](int) {
    if (cold) {
      const auto start = std::chrono::steady_clock::now();
      const Status reopened = store.ReopenCold();
      reopen_ms += std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count();
      if (!reopened.ok()) return reopened;
    }
    return load();
  });
  if (cold && state.iterations() > 0) {
    state.counters["reopen_ms"] =
        reopen_ms / static_cast<double>(state.iterations());
  }
  return s;
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t FillBytes(uint8_t* data, size_t n, uint64_t state) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t r = SplitMix64(state);
    std::memcpy(data + i, &r, 8);
  }
  for (; i < n; ++i) data[i] = static_cast<uint8_t>(SplitMix64(state));
  return state;
}

void Fill(std::vector<uint8_t>& data, uint64_t seed) {
  FillBytes(data.data(), data.size(), seed);
}

std::string LayerName(size_t i) {
  char name[48];
  std::snprintf(name, sizeof(name), "model.layers.%zu.weight", i);
  return name;
}

Status RunRanks(int ranks,
                const std::function<Status(int, Collective&)>& body) {
  std::vector<std::unique_ptr<ThreadCollective>> group =
      ThreadCollective::Group(ranks);
  std::vector<Status> results(ranks);
  std::vector<std::thread> threads;
  threads.reserve(ranks);
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] { results[r] = body(r, *group[r]); });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& s : results) ROCKSDCP_RETURN_IF_ERROR(s);
  return Status::OK();
}

namespace {

// readv / writev of all of `iov`, IOV_MAX entries at a time, resuming after
// short transfers.
template <typename Op>
Status TransferAll(int fd, const std::vector<iovec>& iov, Op op,
                   std::string_view what, const std::string& path) {
  std::vector<iovec> rest(iov.begin(), iov.end());
  size_t first = 0;
  while (first < rest.size()) {
    if (rest[first].iov_len == 0) {
      ++first;
      continue;
    }
    const int count =
        static_cast<int>(std::min<size_t>(rest.size() - first, IOV_MAX));
    const ssize_t n = op(fd, rest.data() + first, count);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(what, path);
    if (n == 0)
      return Status::IOError("short " + std::string(what) + " of " + path);
    size_t done = static_cast<size_t>(n);
    while (done > 0 && done >= rest[first].iov_len) {
      done -= rest[first].iov_len;
      ++first;
    }
    if (done > 0) {
      rest[first].iov_base = static_cast<char*>(rest[first].iov_base) + done;
      rest[first].iov_len -= done;
    }
  }
  return Status::OK();
}

}  // namespace

BusyMachine::BusyMachine() {
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  for (long i = 0; i < std::max(1L, cpus); ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      // Gone with the benchmark, however it ends.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      volatile uint64_t x = 0;
      for (;;) x = x + 1;
    }
    if (pid > 0) pids_.push_back(pid);
  }
}

BusyMachine::~BusyMachine() {
  for (int pid : pids_) ::kill(pid, SIGKILL);
  for (int pid : pids_) ::waitpid(pid, nullptr, 0);
}

Status WriteFileFsync(const std::string& path, const std::vector<iovec>& iov) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Errno("open", path);
  Status s = TransferAll(fd, iov, ::writev, "write", path);
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync", path);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", path);
  return s;
}

Status ReadFile(const std::string& path, const std::vector<iovec>& iov) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Errno("open", path);
  Status s = TransferAll(fd, iov, ::readv, "read", path);
  ::close(fd);
  return s;
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

// RocksDB keeps its files open; the advice applies to the file, not to
// one descriptor, so a fresh descriptor is enough.
Status DropDirCache(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e :
       fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file()) {
      ROCKSDCP_RETURN_IF_ERROR(DropPageCache(e.path().string()));
    }
  }
  if (ec) return Status::IOError("listing " + dir + ": " + ec.message());
  return Status::OK();
}

Status WarmDirCache(const std::string& dir) {
  std::vector<uint8_t> buffer(1 << 20);
  std::error_code ec;
  for (const fs::directory_entry& e :
       fs::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string path = e.path().string();
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return Errno("open", path);
    ssize_t n;
    while ((n = ::read(fd, buffer.data(), buffer.size())) > 0) {
    }
    const int err = n < 0 ? errno : 0;
    ::close(fd);
    if (err != 0) {
      return Status::IOError("read " + path + ": " + std::strerror(err));
    }
  }
  if (ec) return Status::IOError("listing " + dir + ": " + ec.message());
  return Status::OK();
}

Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Errno("open", dir);
  Status s = ::fsync(fd) == 0 ? Status::OK() : Errno("fsync", dir);
  ::close(fd);
  return s;
}

void SetCounters(benchmark::State& state, uint64_t bytes, uint64_t items,
                 int workload, int cold) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * items));
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["wl"] = workload;
  if (cold >= 0) state.counters["cold"] = cold;
}

int64_t ProcWriteBytes() {
  std::ifstream in("/proc/self/io");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("write_bytes:")) {
      return std::strtoll(line.c_str() + std::strlen("write_bytes:"), nullptr,
                          10);
    }
  }
  return -1;
}

namespace {

// A "VmRSS:" or "VmHWM:" line of /proc/self/status, in MiB; -1 if missing.
double StatusMiB(std::string_view field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(field)) {
      return std::strtod(line.c_str() + field.size(), nullptr) / 1024.0;
    }
  }
  return -1;
}

// RssAnon and RssFile now, in MiB: resident minus shared, and shared, of
// /proc/self/statm (shared counts file-backed and shmem pages).
void AnonFileMiB(double* anon, double* file) {
  static const double page_mib =
      static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0, shared = 0;
  const int got =
      f ? std::fscanf(f, "%lu %lu %lu", &size, &resident, &shared) : 0;
  if (f) std::fclose(f);
  *anon = got == 3 ? (resident - shared) * page_mib : -1;
  *file = got == 3 ? shared * page_mib : -1;
}

}  // namespace

// The sampler behind RssMeter's anonymous and file-backed peaks.
struct RssMeter::Sampler {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  double anon_before = 0, file_before = 0;
  double anon_peak = 0, file_peak = 0;
  std::thread thread;

  void Sample() {
    double anon = 0, file = 0;
    AnonFileMiB(&anon, &file);
    std::lock_guard<std::mutex> lock(mu);
    anon_peak = std::max(anon_peak, anon);
    file_peak = std::max(file_peak, file);
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) return;
      stop = true;
    }
    cv.notify_all();
    thread.join();
    Sample();
  }
};

RssMeter::~RssMeter() {
  if (sampler_) sampler_->Stop();
}

RssMeter::RssMeter() {
  ::malloc_trim(0);
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  if (!clear) {
    static bool warned = false;
    if (!warned) {
      std::fprintf(stderr,
                   "rocksdcp_bench: can't write /proc/self/clear_refs; no "
                   "peak RSS counters\n");
    }
    warned = true;
    return;
  }
  before_mib_ = StatusMiB("VmRSS:");
  sampler_ = std::make_shared<Sampler>();
  AnonFileMiB(&sampler_->anon_before, &sampler_->file_before);
  sampler_->anon_peak = sampler_->anon_before;
  sampler_->file_peak = sampler_->file_before;
  Sampler* sp = sampler_.get();
  sampler_->thread = std::thread([sp] {
    std::unique_lock<std::mutex> lock(sp->mu);
    while (!sp->stop) {
      lock.unlock();
      sp->Sample();
      lock.lock();
      // A sampling period, not a synchronisation: Stop wakes it at once.
      sp->cv.wait_for(lock, std::chrono::milliseconds(2));
    }
  });
}

void RssMeter::Report(benchmark::State& state,
                      const std::string& prefix) const {
  if (before_mib_ < 0) return;
  const double peak = StatusMiB("VmHWM:");
  state.counters[prefix + "peak_rss_mib"] = peak;
  state.counters[prefix + "rss_added_mib"] = peak - before_mib_;
  if (!sampler_) return;
  double anon_now = 0, file_now = 0;
  AnonFileMiB(&anon_now, &file_now);
  sampler_->Stop();
  state.counters[prefix + "anon_added_mib"] =
      sampler_->anon_peak - sampler_->anon_before;
  state.counters[prefix + "file_added_mib"] =
      sampler_->file_peak - sampler_->file_before;
  state.counters[prefix + "file_kept_mib"] = file_now - sampler_->file_before;
}

}  // namespace rocksdcp::bench
