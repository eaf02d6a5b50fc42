// Encoding and verified decoding of the messages that cross between the
// ranks of one save or load (schema/plans.fbs): plans, write results, and
// the StepOutcome envelope each rank sends at each protocol step.
//
// Another rank is another process, possibly another build, so a message is
// decoded like a value read from disk: the Verifier, the identifier, the
// format version, then what a receiver relies on. The decoders check that a
// message is well formed; whether a well-formed plan makes sense (chunks
// within their tensor, no overlaps, ranks agreeing on dtypes) is the
// planner's to check, and it reports InvalidArgument as DCP does.

#ifndef ROCKSDCP_SRC_FORMAT_PLAN_CODEC_H_
#define ROCKSDCP_SRC_FORMAT_PLAN_CODEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"

namespace rocksdcp::format {

inline constexpr char kSavePlanIdentifier[] = "RDSP";
inline constexpr char kWriteResultsIdentifier[] = "RDWR";
inline constexpr char kLoadPlanIdentifier[] = "RDLP";
inline constexpr char kStepOutcomeIdentifier[] = "RDSO";

std::string EncodeSavePlan(const SavePlan& plan);

// Corruption (saying what and where) unless the value verifies and every
// item has a known type; tensor and shard items carry tensor_data with
// properties of a known dtype, layout and memory format, a size and a
// chunk; chunk offsets and sizes have equal rank; and no index offset,
// size, chunk offset or chunk size is negative.
Result<SavePlan> DecodeSavePlan(std::string_view value);

std::string EncodeLoadPlan(const LoadPlan& plan);

// Corruption unless the value verifies and every item has a known type,
// dest_offsets, storage_offsets and lengths of equal rank, and no negative
// offset or length (in them or in either index).
Result<LoadPlan> DecodeLoadPlan(std::string_view value);

std::string EncodeWriteResults(const std::vector<WriteResult>& results);

// Corruption unless the value verifies and no index offset is negative.
Result<std::vector<WriteResult>> DecodeWriteResults(std::string_view value);

// One rank's outcome of one protocol step, as the other ranks receive it.
struct StepOutcome {
  Status status;
  // The step's encoded result (a SavePlan, ...) when `status` is OK; empty
  // otherwise.
  std::string payload;
};

// Sends `status` with its code and message. `payload` goes along only when
// `status` is OK; a failed step has no result to send.
std::string EncodeStepOutcome(const Status& status, std::string_view payload);

// Corruption unless the value verifies, its code is a known StatusCode, an
// OK outcome has no message and a failed one no payload. The Status inside
// a decoded outcome is the sender's, which may itself be a Corruption: the
// Result's own status says only whether the message arrived intact.
Result<StepOutcome> DecodeStepOutcome(std::string_view value);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_PLAN_CODEC_H_
