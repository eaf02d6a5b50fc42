// Encoding and verified decoding of Metadata (schema/checkpoint.fbs).

#ifndef ROCKSDCP_SRC_FORMAT_METADATA_CODEC_H_
#define ROCKSDCP_SRC_FORMAT_METADATA_CODEC_H_

#include <string>
#include <string_view>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"

namespace rocksdcp::format {

inline constexpr char kMetadataIdentifier[] = "RDCM";

std::string EncodeMetadata(const Metadata& metadata);

// Verifies and decodes a Metadata value. Beyond the FlatBuffers Verifier it
// checks what a loader relies on, so untrusted bytes can't make it misbehave:
// known dtypes; sizes >= 0; every chunk has the tensor's rank, non-negative
// offsets and sizes, and lies within the tensor (no overflow); element
// counts times dtype size fit in 63 bits; no duplicate fqns or indexes.
// Returns Corruption saying what is wrong and where (the fqn).
Result<Metadata> DecodeMetadata(std::string_view value);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_METADATA_CODEC_H_
