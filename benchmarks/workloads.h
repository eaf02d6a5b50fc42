// The four workloads, as deterministic state dicts, and the one
// slot that holds the current workload's data for the cases using it.
//
//   W1  1 GiB in 8 large tensors: 4 fp32 and 4 bf16 of 128 MiB, [rows, 1024]
//   W2  LLM-like: 198 tensors of 1-64 MiB, exactly 1 GiB, named and shaped
//       like a 28-layer decoder (hidden 1024, GQA k/v, MLP 2816), attention
//       and down_proj in fp32, the rest in bf16
//   W3  optimizer- and metadata-heavy: 50,000 fp32 tensors of 1-16 KiB
//       (Adam's exp_avg / exp_avg_sq of 25,000 parameters) and 1,000 byte
//       items of 8-1024 bytes
//   W4  W2 saved by 2 thread ranks, each holding half the rows of every
//       tensor, and loaded by 3 (a resharded load). It has no data of its
//       own: its shards are views of W2's buffers.
//   W5  a frozen backbone under fine-tuning: W2 plus, per layer, the two
//       RMSNorm weights and LoRA A/B matrices of rank hidden/16 on q_proj
//       and v_proj, and the final norm, all fp32: 2.2% of its 1.02 GiB
//       (367 tensors). Between saves only those change.
//   W6  a sparse embedding: one [131072, 1024] fp32 table (512 MiB) and a
//       small dense MLP (5 MiB, 6 tensors). Between saves 1% of the
//       table's rows change, at random, and the dense model.
//
// Sizes come from Config (--quick shrinks them). The same arguments always
// give the same names, shapes and bytes. The incremental cases
// (incremental_bench.cc) change a source's bytes between saves: they
// compare what they load with the source, never with its seed, and W2's
// drops its data when done, so that the next user of W2 gets its seed's.

#ifndef ROCKSDCP_BENCHMARKS_WORKLOADS_H_
#define ROCKSDCP_BENCHMARKS_WORKLOADS_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::bench {

struct TensorSpec {
  std::string fqn;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;  // Row-major; dim 0 is what W4 shards.
  uint64_t nbytes() const;
};

struct BytesSpec {
  std::string fqn;
  uint64_t size = 0;
};

struct WorkloadSpec {
  int id = 0;  // 1..3, 5, 6, or 0 for the --rss_gib and --sizes ones.
  std::vector<TensorSpec> tensors;
  std::vector<BytesSpec> byte_items;

  uint64_t total_bytes() const;
  uint64_t items() const { return tensors.size() + byte_items.size(); }
};

// 8 tensors of total_bytes / 8 each, [rows, 1024], fp32 then bf16.
WorkloadSpec W1Spec(uint64_t total_bytes);
// 28 layers of 7 tensors plus embed_tokens and lm_head; every shape is a
// multiple of `hidden`, so the total is 1 GiB * (hidden / 1024)^2.
// REQUIRES: hidden is a multiple of 256.
WorkloadSpec W2Spec(int64_t hidden);
WorkloadSpec W3Spec(int tensors, int byte_items);
// W2Spec(hidden) plus per layer `model.layers.N.{input,post_attention}_
// layernorm.weight` [hidden] and `model.layers.N.self_attn.{q,v}_proj.
// lora_{A,B}.weight` ([rank, hidden] and [out, rank]), and
// `model.norm.weight`; all fp32. IsW5Trainable tells those from the rest.
WorkloadSpec W5Spec(int64_t hidden, int64_t lora_rank);
bool IsW5Trainable(const TensorSpec& tensor);
// `embedding.weight` [rows, 1024] fp32, then the dense model:
// `dense.{0,1,2}.{weight,bias}` of [1024, 1024], [256, 1024], [1, 256].
WorkloadSpec W6Spec(int64_t rows);
inline constexpr int64_t kW6Cols = 1024;
// The spec of workload `id` (1..3, 5, 6; 4 gives W2's) at `config`'s
// sizes.
WorkloadSpec SpecFor(int id, const Config& config);

// The memory of one state dict: a buffer per tensor (each its own
// allocation, as a trainer's tensors are) and the byte values.
class StateData {
 public:
  // With `seed` 0 every byte is zero, byte values included (a load's
  // destination; they have their sizes, so that the raw read baseline has
  // somewhere to read them to). Every page is written here, outside any
  // timing loop.
  StateData(const WorkloadSpec& spec, uint64_t seed);
  StateData(const StateData&) = delete;
  StateData& operator=(const StateData&) = delete;

  // Views of every tensor, plus copies of the byte values.
  StateDict Dict();
  // Rank `rank` of `ranks`: every tensor as a ShardedTensor holding rows
  // [rank * rows / ranks, (rank + 1) * rows / ranks) as a view into this
  // data; byte values go to rank 0.
  StateDict ShardDict(int rank, int ranks);
  // Takes the byte values a load put into `dict` (Dict or ShardDict's).
  void TakeBytes(StateDict& dict);

  // Zeroes the tensors and the byte values.
  void Zero();
  // True if every tensor and byte value equals `other`'s.
  bool SameAs(const StateData& other) const;
  // True if the tensors hold what StateData(spec, seed) would put there
  // (checked piece by piece: no second copy of the data).
  bool MatchesSeed(uint64_t seed) const;

  // The payload in order (tensors, then byte values): what the baselines
  // write, read and copy. The byte values' pointers stay valid until
  // TakeBytes or Zero.
  std::vector<iovec> Payload();

  // Tensor i's bytes (spec().tensors[i]), for the cases that change them.
  uint8_t* tensor(size_t i) { return tensors_[i].get(); }

  const WorkloadSpec& spec() const { return spec_; }
  uint64_t total_bytes() const { return spec_.total_bytes(); }
  uint64_t items() const { return spec_.items(); }

 private:
  WorkloadSpec spec_;
  std::vector<std::unique_ptr<uint8_t[]>> tensors_;
  std::vector<std::string> bytes_;
};

// A workload's source (seeded) and destination (zeroed) data.
struct WorkloadData {
  WorkloadData(const WorkloadSpec& spec, uint64_t seed, bool with_dest)
      : seed(seed),
        source(spec, seed),
        dest(with_dest ? std::make_unique<StateData>(spec, 0) : nullptr) {}
  const uint64_t seed;
  StateData source;
  // Null for the --rss_gib and --sizes state dicts and W6 (saved only).
  std::unique_ptr<StateData> dest;

  // Where a load or a raw read of it goes: `dest`, or back into `source`
  // where it has none.
  StateData& destination() { return dest ? *dest : source; }
};

// The data of workload `id` (4 means W2's) at `config`'s sizes. The cases of
// one workload are registered together, so this builds each workload once:
// asking for another one frees the current one first, so that one
// workload's memory at a time is resident and the RSS before each case is
// that workload's (and its destination's), nothing else. `id` 0 is the
// --rss_gib state dict, which has no destination, nor has W6.
WorkloadData& GetWorkload(int id, const Config& config);
// The --sizes state dict of `gib` GiB (size_bench.cc): the --rss_gib one's
// shape and seed at that size, in the same slot, so that it too is the
// only state dict resident.
WorkloadData& GetSizeWorkload(int64_t gib);
// Frees the current workload (main calls this at exit).
void DropWorkload();

}  // namespace rocksdcp::bench

#endif  // ROCKSDCP_BENCHMARKS_WORKLOADS_H_
