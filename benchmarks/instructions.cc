// CPU cost per byte as instruction counts (issue #39): a warm Save() or a
// warm Load() of W1 or W3, or the floor those are measured against: every
// byte copied once and hashed once with XXH3. Run under callgrind with
// instrumentation off at the start; only the measured operation is
// instrumented (CALLGRIND_START_INSTRUMENTATION / _STOP_):
//
//   valgrind --tool=callgrind --instr-atstart=no
//       --callgrind-out-file=w1-load.out rocksdcp_instructions w1 load
//   callgrind_annotate w1-load.out | head -40
//
// Outside valgrind the client requests do nothing, so the program also
// runs (and checks itself) natively.
//
// Usage: rocksdcp_instructions w1|w3 save|load|floor [flags]
//   --w1_mib=N          W1's total size in MiB (default 256)
//   --w3_tensors=N      W3's tensors (default 50,000)
//   --w3_byte_items=N   W3's byte items (default 1,000)
//   --floor_hash=H      the floor's hash: dispatch (XXH3_64bits_dispatch,
//                       the entry point rocksdcp's Xxh3 calls on x86-64:
//                       the default), dispatch128 (XXH3_128bits_dispatch,
//                       its piece hash) or plain (XXH3_64bits, which
//                       Debian builds for baseline x86-64: 2.8x the
//                       instructions of the other two)
//
// What each phase measures, after its untimed setup:
//   save   one Save() as a new checkpoint id, through a writer that has
//          already saved the same state dict once as another id (its
//          buffers are warm), into a fresh store
//   load   NewReader() and one Load() of a checkpoint saved in the
//          setup, whose files were read into the page cache and loaded
//          once already (as the suite's warm BM_Load does: a new reader
//          per load, the store's buffer pool kept); then the loaded bytes
//          are compared with the source, and a difference exits 1
//   floor  for every tensor and byte item in order: memcpy of its bytes
//          into a preallocated destination, then XXH3 of those bytes;
//          the destination is compared with the source afterwards
// Options are the server profile's (the library's defaults).
//
// Callgrind counts user-space instructions of every thread of the process
// (RocksDB's background threads and rocksdcp's write and read threads
// included); what the kernel does for write(), pread() or page faults is
// not counted.

#include <valgrind/callgrind.h>
#include <xxhash.h>
#if defined(__x86_64__)
// Without this the header renames XXH3_64bits to XXH3_64bits_dispatch.
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "rocksdcp/rocksdcp.h"
#include "workloads.h"

namespace rocksdcp::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string workload;  // w1 | w3
  std::string phase;     // save | load | floor
  int64_t w1_mib = 256;
  int w3_tensors = 50'000;
  int w3_byte_items = 1'000;
#if defined(__x86_64__)
  std::string floor_hash = "dispatch";
#else
  std::string floor_hash = "plain";
#endif
};

void Usage() {
  std::fprintf(stderr,
               "usage: rocksdcp_instructions w1|w3 save|load|floor "
               "[--w1_mib=N] [--w3_tensors=N] [--w3_byte_items=N] "
               "[--floor_hash=plain|dispatch|dispatch128]\n");
}

bool ParseInt(std::string_view text, int64_t min, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const std::string s(text);
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == nullptr || *end != '\0' || v < min) return false;
  *out = v;
  return true;
}

bool ParseArgs(int argc, char** argv, Args* args) {
  std::vector<std::string_view> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    int64_t v = 0;
    auto flag = [&](std::string_view name, std::string_view* value) {
      if (a.substr(0, name.size()) != name) return false;
      *value = a.substr(name.size());
      return true;
    };
    std::string_view value;
    if (flag("--w1_mib=", &value)) {
      if (!ParseInt(value, 1, &v)) return false;
      args->w1_mib = v;
    } else if (flag("--w3_tensors=", &value)) {
      if (!ParseInt(value, 1, &v) || v > 10'000'000) return false;
      args->w3_tensors = static_cast<int>(v);
    } else if (flag("--w3_byte_items=", &value)) {
      if (!ParseInt(value, 0, &v) || v > 10'000'000) return false;
      args->w3_byte_items = static_cast<int>(v);
    } else if (flag("--floor_hash=", &value)) {
      if (value != "plain" && value != "dispatch" && value != "dispatch128") {
        return false;
      }
      args->floor_hash = std::string(value);
    } else if (a.substr(0, 2) == "--") {
      return false;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) return false;
  args->workload = std::string(positional[0]);
  args->phase = std::string(positional[1]);
  return (args->workload == "w1" || args->workload == "w3") &&
         (args->phase == "save" || args->phase == "load" ||
          args->phase == "floor");
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Kept from the optimizer: the floor's hashes.
volatile uint64_t g_sink = 0;

// The measured part of `floor`: noinline, so that callgrind_annotate shows
// it (and what it calls) by name.
[[gnu::noinline]] uint64_t CopyAndHash(const std::vector<iovec>& from,
                                       const std::vector<iovec>& to,
                                       const std::string& hash) {
  uint64_t h = 0;
  for (size_t i = 0; i < from.size(); ++i) {
    const size_t n = from[i].iov_len;
    void* dst = to[i].iov_base;
    std::memcpy(dst, from[i].iov_base, n);
#if defined(__x86_64__)
    if (hash == "dispatch") {
      h ^= XXH3_64bits_dispatch(dst, n);
      continue;
    }
    if (hash == "dispatch128") {
      const XXH128_hash_t x = XXH3_128bits_dispatch(dst, n);
      h ^= x.low64 ^ x.high64;
      continue;
    }
#endif
    h ^= XXH3_64bits(dst, n);
  }
  return h;
}

int RunFloor(const Args& args, StateData& source, StateData& dest) {
#if !defined(__x86_64__)
  if (args.floor_hash != "plain") {
    std::fprintf(stderr, "--floor_hash=%s needs x86-64\n",
                 args.floor_hash.c_str());
    return 2;
  }
#endif
  const std::vector<iovec> from = source.Payload();
  const std::vector<iovec> to = dest.Payload();
  const Clock::time_point t0 = Clock::now();
  CALLGRIND_START_INSTRUMENTATION;
  const uint64_t h = CopyAndHash(from, to, args.floor_hash);
  CALLGRIND_STOP_INSTRUMENTATION;
  const double ms = Since(t0);
  g_sink = h;
  std::printf("measured_ms %.1f\nfloor_hash %s\n", ms, args.floor_hash.c_str());
  if (!dest.SameAs(source)) {
    std::fprintf(stderr, "FAILED: the floor's copy differs from the source\n");
    return 1;
  }
  std::printf("verified yes\n");
  return 0;
}

int Fail(const char* what, const Status& s) {
  std::fprintf(stderr, "FAILED: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

int RunSave(const DeviceProfile& profile, StateData& source) {
  ScratchStore store("instr-save", profile.store);
  if (!store.status().ok()) return Fail("open", store.status());
  auto made = store->NewWriter(profile.writer);
  if (!made.ok()) return Fail("NewWriter", made.status());
  std::unique_ptr<RocksDBStorageWriter> writer = std::move(*made);
  const StateDict dict = source.Dict();
  // The warm-up: the writer's buffers, RocksDB's column family machinery
  // and the allocator's arenas are then as a trainer's second save finds
  // them.
  Status s = Save(dict, *writer, {.checkpoint_id = "warmup"}).status();
  if (!s.ok()) return Fail("warm-up save", s);

  const Clock::time_point t0 = Clock::now();
  CALLGRIND_START_INSTRUMENTATION;
  s = Save(dict, *writer, {.checkpoint_id = "measured"}).status();
  CALLGRIND_STOP_INSTRUMENTATION;
  const double ms = Since(t0);
  if (!s.ok()) return Fail("measured save", s);
  std::printf("measured_ms %.1f\n", ms);

  // Check what the measured save committed (untimed, uninstrumented).
  StateData check(source.spec(), /*seed=*/0);
  StateDict into = check.Dict();
  auto reader = store->NewReader(profile.reader);
  if (!reader.ok()) return Fail("NewReader", reader.status());
  s = Load(&into, **reader, {.checkpoint_id = "measured"});
  if (!s.ok()) return Fail("load of the measured save", s);
  check.TakeBytes(into);
  if (!check.SameAs(source)) {
    std::fprintf(stderr, "FAILED: the measured save loads other bytes\n");
    return 1;
  }
  std::printf("verified yes\n");
  writer.reset();
  return 0;
}

Status LoadOnce(Store& store, const RocksDBReaderOptions& options,
                StateDict& dict, ReaderStats* stats) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store.NewReader(options));
  ROCKSDCP_RETURN_IF_ERROR(Load(&dict, *reader, {.checkpoint_id = "ckpt"}));
  if (stats != nullptr) *stats = reader->stats();
  return Status::OK();
}

int RunLoad(const DeviceProfile& profile, StateData& source, StateData& dest) {
  ScratchStore store("instr-load", profile.store);
  if (!store.status().ok()) return Fail("open", store.status());
  {
    auto writer = store->NewWriter(profile.writer);
    if (!writer.ok()) return Fail("NewWriter", writer.status());
    const Status s =
        Save(source.Dict(), **writer, {.checkpoint_id = "ckpt"}).status();
    if (!s.ok()) return Fail("save", s);
  }
  // Saves drop what they write from the page cache: read it back in, as
  // the suite's warm loads do, then load once untimed.
  Status s = WarmDirCache(store.dir());
  if (!s.ok()) return Fail("warming the page cache", s);
  {
    StateDict dict = dest.Dict();
    s = LoadOnce(*store, profile.reader, dict, nullptr);
    if (!s.ok()) return Fail("warm-up load", s);
  }
  dest.Zero();
  StateDict dict = dest.Dict();
  ReaderStats stats;

  const Clock::time_point t0 = Clock::now();
  CALLGRIND_START_INSTRUMENTATION;
  s = LoadOnce(*store, profile.reader, dict, &stats);
  CALLGRIND_STOP_INSTRUMENTATION;
  const double ms = Since(t0);
  if (!s.ok()) return Fail("measured load", s);
  std::printf("measured_ms %.1f\n", ms);
  std::printf(
      "reader pieces_read %llu in_place %llu in_place_misses %llu "
      "bytes_read_direct %llu read_threads %u\n",
      static_cast<unsigned long long>(stats.pieces_read),
      static_cast<unsigned long long>(stats.pieces_read_in_place),
      static_cast<unsigned long long>(stats.in_place_misses),
      static_cast<unsigned long long>(stats.bytes_read_direct),
      stats.read_threads);
  dest.TakeBytes(dict);
  if (!dest.SameAs(source)) {
    std::fprintf(stderr, "FAILED: the loaded bytes differ from the source\n");
    return 1;
  }
  std::printf("verified yes\n");
  return 0;
}

int Main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    Usage();
    return 2;
  }
  const WorkloadSpec spec =
      args.workload == "w1" ? W1Spec(static_cast<uint64_t>(args.w1_mib) << 20)
                            : W3Spec(args.w3_tensors, args.w3_byte_items);
  StateData source(spec, /*seed=*/args.workload == "w1" ? 1 : 3);
  std::unique_ptr<StateData> dest;
  if (args.phase != "save") dest = std::make_unique<StateData>(spec, 0);
  std::printf("workload %s\nphase %s\nbytes %llu\nitems %llu\n",
              args.workload.c_str(), args.phase.c_str(),
              static_cast<unsigned long long>(source.total_bytes()),
              static_cast<unsigned long long>(source.items()));
  std::fflush(stdout);

  if (args.phase == "floor") return RunFloor(args, source, *dest);
  if (!CreateTempRoot()) return 1;
  const DeviceProfile profile = ServerProfile();
  const int rc = args.phase == "save" ? RunSave(profile, source)
                                      : RunLoad(profile, source, *dest);
  RemoveTempRoot();
  return rc;
}

}  // namespace
}  // namespace rocksdcp::bench

int main(int argc, char** argv) { return rocksdcp::bench::Main(argc, argv); }
