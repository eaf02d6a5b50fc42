// The pristine store every hostile-store case starts from: three
// checkpoints saved by rocksdcp itself, of which the middle one, "victim",
// is then forged. "before" and "after" stay as saved, so each case can
// check that damage to the victim costs no other checkpoint.
//
// Shared by the test (which saves it) and rocksdcp_hostile_child (which
// loads the victim and compares every byte with what was saved).

#ifndef ROCKSDCP_TESTS_HOSTILE_VICTIM_H_
#define ROCKSDCP_TESTS_HOSTILE_VICTIM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::hostile {

inline constexpr char kBefore[] = "before";
inline constexpr char kVictim[] = "victim";
inline constexpr char kAfter[] = "after";

// The victim is saved in pieces of this many bytes, so that its larger
// items have several; and under 4 KiB, so that every piece shares its data
// block and loads read it through RocksDB, which sees what the forgeries
// write over its key. (A piece of 4 KiB or more is read in place from the
// file the save wrote, and checked against its hash: such a forgery does
// not reach a load, which gets the saved bytes; verify reports it.)
inline constexpr uint64_t kVictimPieceBytes = 3200;

// The victim's state dict, every byte a function of its name, or zeros
// (to load into):
//   w        float16 [48, 100]    9600 bytes, 3 pieces
//   b, b2    float32 [100]        400 bytes each, identical headers
//   s        int64 0-d
//   e        float32 [0, 4]       no bytes, one empty piece
//   sharded  float32 [8, 16]      two chunks, rows 0-3 and 4-7
//   opt      bytes                5000 bytes, 2 pieces
struct VictimState {
  std::vector<std::vector<uint8_t>> storage;
  StateDict dict;
};
VictimState MakeVictimState(bool zero);

// Loads checkpoint `id` of `store` as a trainer resuming its own model
// would: into MakeVictimState(true). Returns Load's status; when it is OK,
// sets *wrong to the first item whose bytes are not those saved ("" if
// none).
Status LoadAsModel(Store& store, const std::string& id, std::string* wrong);

// Loads checkpoint `id` as a generic tool would: reads its metadata and
// loads every item it lists into a state dict shaped after it (tensors of
// up to 64 MiB whole, larger ones as a one-element shard at the origin,
// byte items as whatever the store holds). Returns the status of reading
// the metadata or of Load; when OK, sets *wrong as LoadAsModel does, for
// the items that are victim items of the saved kind, dtype and shape.
Status LoadAsMirror(Store& store, const std::string& id, std::string* wrong);

// Saves before, victim and after, in that order, into a new store at
// `path` (before and after as tests/rocksdb's ExampleStateDict(1) and (3)).
Status SavePristineStore(const std::string& path);

}  // namespace rocksdcp::hostile

#endif  // ROCKSDCP_TESTS_HOSTILE_VICTIM_H_
