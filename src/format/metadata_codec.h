// Encoding and verified decoding of Metadata (schema/checkpoint.fbs).

#ifndef ROCKSDCP_SRC_FORMAT_METADATA_CODEC_H_
#define ROCKSDCP_SRC_FORMAT_METADATA_CODEC_H_

#include <flatbuffers/flatbuffers.h>

#include <string>
#include <string_view>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"

namespace rocksdcp::format {

inline constexpr char kMetadataIdentifier[] = "RDCM";

// REQUIRES: CheckMetadataFits(metadata) is OK. FlatBuffers 2.0.8 does not
// check its 2 GiB limit in release builds.
std::string EncodeMetadata(const Metadata& metadata);

// As above, into `fbb`, which is cleared first and keeps its buffer: a
// caller that encodes again into the same builder reuses warm memory. The
// bytes returned live in `fbb` until its next use.
// REQUIRES: CheckMetadataFits(metadata) is OK.
std::string_view EncodeMetadata(const Metadata& metadata,
                                flatbuffers::FlatBufferBuilder* fbb);

// An upper bound on EncodeMetadata(metadata).size(), computed without
// encoding: every string, vector and table with its largest padding and
// bookkeeping.
uint64_t MetadataBytesBound(const Metadata& metadata);

// The most bytes a Metadata value may take: under FlatBuffers' 2 GiB.
inline constexpr uint64_t kMaxMetadataBytes = (uint64_t{1} << 31) - (1 << 20);

// InvalidArgument if MetadataBytesBound(metadata) exceeds `limit`, saying
// how many items it holds and what to do. Sets *bound to that bound if
// `bound` is not null.
Status CheckMetadataFits(const Metadata& metadata,
                         uint64_t limit = kMaxMetadataBytes,
                         uint64_t* bound = nullptr);

// The fewest bytes a checkpoint stores for each chunk or byte item its
// metadata lists: every one has at least one piece, whose value (header,
// checksum, data vector) takes more than this, plus 16 bytes per dimension
// of its chunk, whose offsets and sizes each piece records.
inline constexpr uint64_t kMinStoredPieceBytes = 32;
inline constexpr uint64_t kStoredBytesPerChunkDim = 16;

// What a Metadata value may make DecodeMetadata build.
struct MetadataLimits {
  // The bytes the checkpoint really holds besides this value (its column
  // family's files and memtables): the chunks, byte items and storage
  // entries the metadata lists must fit in them (kMinStoredPieceBytes
  // each, plus kStoredBytesPerChunkDim per chunk dimension). UINT64_MAX
  // for metadata that comes from another rank rather than from a store.
  uint64_t stored_bytes = UINT64_MAX;
};

// Verifies and decodes a Metadata value. Beyond the FlatBuffers Verifier it
// checks what a loader relies on, so untrusted bytes can't make it misbehave:
// known dtypes; sizes >= 0; every chunk has the tensor's rank, non-negative
// offsets and sizes, and lies within the tensor (no overflow); element
// counts times dtype size fit in 63 bits; no duplicate fqns or indexes.
// Before it builds anything it counts what it would build, and refuses
// (Corruption) what `limits` can't hold, or a value whose tables are
// shared so that it would decode to many times its own size (FlatBuffers
// lets one table be referenced any number of times; no encoder of ours
// does that): the memory and time it takes are bounded by the bytes really
// stored. Returns Corruption saying what is wrong and where (the fqn).
Result<Metadata> DecodeMetadata(std::string_view value,
                                const MetadataLimits& limits = {});

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_METADATA_CODEC_H_
