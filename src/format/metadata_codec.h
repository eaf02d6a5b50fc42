// Encoding and verified decoding of Metadata (schema/checkpoint.fbs).

#ifndef ROCKSDCP_SRC_FORMAT_METADATA_CODEC_H_
#define ROCKSDCP_SRC_FORMAT_METADATA_CODEC_H_

#include <string>
#include <string_view>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"

namespace rocksdcp::format {

inline constexpr char kMetadataIdentifier[] = "RDCM";

// REQUIRES: CheckMetadataFits(metadata) is OK. FlatBuffers 2.0.8 does not
// check its 2 GiB limit in release builds.
std::string EncodeMetadata(const Metadata& metadata);

// An upper bound on EncodeMetadata(metadata).size(), computed without
// encoding: every string, vector and table with its largest padding and
// bookkeeping.
uint64_t MetadataBytesBound(const Metadata& metadata);

// The most bytes a Metadata value may take: under FlatBuffers' 2 GiB.
inline constexpr uint64_t kMaxMetadataBytes = (uint64_t{1} << 31) - (1 << 20);

// InvalidArgument if MetadataBytesBound(metadata) exceeds `limit`, saying
// how many items it holds and what to do.
Status CheckMetadataFits(const Metadata& metadata,
                         uint64_t limit = kMaxMetadataBytes);

// Verifies and decodes a Metadata value. Beyond the FlatBuffers Verifier it
// checks what a loader relies on, so untrusted bytes can't make it misbehave:
// known dtypes; sizes >= 0; every chunk has the tensor's rank, non-negative
// offsets and sizes, and lies within the tensor (no overflow); element
// counts times dtype size fit in 63 bits; no duplicate fqns or indexes.
// Returns Corruption saying what is wrong and where (the fqn).
Result<Metadata> DecodeMetadata(std::string_view value);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_METADATA_CODEC_H_
