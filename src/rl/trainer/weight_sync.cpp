#include "rl/trainer/weight_sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace rf::rl {
namespace {

constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t fnv(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * kFnvPrime;
  return hash;
}

bool holds(const std::vector<int>& ranks, int rank) {
  return ranks.empty() || std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// Every broadcast step of the stream starts with [kind, table bytes, data bytes]: kind 1 a bucket, 0 the
// end (followed by the sender's checksum).
enum : int64_t { kEnd = 0, kBucket = 1 };

void broadcast_header(dist::ProcessGroup& group, int64_t (&header)[3]) {
  group.broadcast(TensorView(header, DType::i64, {3}), 0);
}

void broadcast_bytes(dist::ProcessGroup& group, std::vector<uint8_t>& bytes) {
  if (!bytes.empty()) group.broadcast(TensorView(bytes.data(), DType::u8, {int64_t(bytes.size())}), 0);
}

std::string hex(uint64_t value) { return fmt::format("{:016x}", value); }

// The tensors added since the last flush: their table and, on the sender, their bytes.
class Bucket {
 public:
  explicit Bucket(bool sender) : sender_(sender) {}
  int64_t bytes() const { return bytes_; }
  bool empty() const { return count_ == 0; }
  void add(const std::string& name, TensorView full) {
    ++count_;
    bytes_ += int64_t(full.nbytes());
    if (!sender_) return;  // an actor rank beside the sender: it follows the stream, its rollout fed already
    table_.push_back({{"name", name},
                      {"dtype", int(full.dtype())},
                      {"shape", std::vector<int64_t>(full.shape().begin(), full.shape().end())}});
    const auto* data = static_cast<const uint8_t*>(full.raw());
    data_.insert(data_.end(), data, data + full.nbytes());
  }
  // One bucket to the group; returns the bytes a receiver took in.
  int64_t flush(dist::ProcessGroup& group) {
    std::vector<uint8_t> table = sender_ ? nlohmann::json::to_cbor(table_) : std::vector<uint8_t>();
    int64_t header[3] = {kBucket, int64_t(table.size()), bytes_};
    broadcast_header(group, header);
    table.resize(size_t(header[1]));
    broadcast_bytes(group, table);
    data_.resize(size_t(header[2]));  // the sender's own bytes; scratch on the others
    broadcast_bytes(group, data_);
    const int64_t received = sender_ ? 0 : header[1] + header[2];
    *this = Bucket(sender_);
    return received;
  }

 private:
  bool sender_;
  int64_t count_ = 0, bytes_ = 0;
  nlohmann::json table_ = nlohmann::json::array();
  std::vector<uint8_t> data_;
};

}  // namespace

uint64_t weight_checksum(uint64_t hash, const std::string& name, TensorView full) {
  hash = fnv(hash, name.data(), name.size());
  const int64_t dtype = int64_t(full.dtype());
  hash = fnv(hash, &dtype, sizeof dtype);
  for (const int64_t d : full.shape()) hash = fnv(hash, &d, sizeof d);
  return fnv(hash, full.raw(), size_t(full.nbytes()));
}

WeightSync::WeightSync(dist::ProcessGroup& world, const std::vector<int>& actor_ranks,
                       const std::vector<int>& rollout_ranks, int64_t bucket_bytes)
    : world_(world), colocated_(true), bucket_bytes_(bucket_bytes) {
  RF_CHECK(bucket_bytes > 0, "WeightSync: bucket of {} bytes", bucket_bytes);
  for (int r = 0; r < world.size(); ++r)
    if (holds(rollout_ranks, r) && !holds(actor_ranks, r)) colocated_ = false;
  if (colocated_) return;
  const int sender = actor_ranks.empty() ? 0 : actor_ranks.front();
  const int rank = world.rank();
  const bool member = rank == sender || holds(rollout_ranks, rank);
  // The sender is the group's rank 0 (key -1 sorts first).
  group_ = world.split(member ? 0 : -1, rank == sender ? -1 : rank, "weight_sync");
}

WeightSync::~WeightSync() = default;

WeightSync::Report WeightSync::sync(const Export* actor_export, const Sink* rollout_sink) {
  return colocated_ ? sync_colocated(actor_export, rollout_sink) : sync_streamed(actor_export, rollout_sink);
}

WeightSync::Report WeightSync::sync_colocated(const Export* actor_export, const Sink* rollout_sink) {
  Report report;
  report.checksum = kFnvOffset;
  if (actor_export)
    (*actor_export)([&](const std::string& name, TensorView full) {
      report.checksum = weight_checksum(report.checksum, name, full);
      if (rollout_sink) (*rollout_sink)(name, full);
    });
  // Every actor rank exported the same whole tensors: their checksums agree, or an export went wrong.
  int64_t low = actor_export ? int64_t(report.checksum) : std::numeric_limits<int64_t>::max();
  int64_t high = actor_export ? int64_t(report.checksum) : std::numeric_limits<int64_t>::min();
  world_.all_reduce(TensorView(&low, DType::i64, {1}), dist::ReduceOp::min);
  world_.all_reduce(TensorView(&high, DType::i64, {1}), dist::ReduceOp::max);
  if (low != high)
    throw Error(fmt::format("weight sync: the actor's ranks exported different weights (checksums {} .. {})",
                            hex(uint64_t(low)), hex(uint64_t(high))));
  return report;
}

WeightSync::Report WeightSync::sync_streamed(const Export* actor_export, const Sink* rollout_sink) {
  Report report;
  report.checksum = kFnvOffset;
  if (!group_) {  // neither the sender nor a rollout rank: export (collective over the actor) and drop it
    if (actor_export) (*actor_export)([](const std::string&, TensorView) {});
    return report;
  }
  dist::ProcessGroup& group = *group_;
  if (actor_export) {  // the sender, or an actor rank that also holds a rollout: both follow the stream
    Bucket bucket(group.rank() == 0);
    (*actor_export)([&](const std::string& name, TensorView full) {
      report.checksum = weight_checksum(report.checksum, name, full);
      if (rollout_sink) (*rollout_sink)(name, full);
      if (!bucket.empty() && bucket.bytes() + int64_t(full.nbytes()) > bucket_bytes_) {
        report.bytes_received += bucket.flush(group);
        ++report.buckets;
      }
      bucket.add(name, full);
    });
    if (!bucket.empty()) {
      report.bytes_received += bucket.flush(group);
      ++report.buckets;
    }
  } else {  // a rollout rank without an actor: unpack every bucket into the rollout
    for (;;) {
      int64_t header[3] = {};
      broadcast_header(group, header);
      if (header[0] == kEnd) break;
      std::vector<uint8_t> table(static_cast<size_t>(header[1])), data(static_cast<size_t>(header[2]));
      broadcast_bytes(group, table);
      broadcast_bytes(group, data);
      report.bytes_received += header[1] + header[2];
      ++report.buckets;
      int64_t offset = 0;
      for (const nlohmann::json& entry : nlohmann::json::from_cbor(table)) {
        const std::vector<int64_t> dims = entry.at("shape").get<std::vector<int64_t>>();
        const TensorView full(data.data() + offset, DType(entry.at("dtype").get<int>()), Shape(dims.begin(), dims.end()));
        const std::string name = entry.at("name").get<std::string>();
        report.checksum = weight_checksum(report.checksum, name, full);
        if (rollout_sink) (*rollout_sink)(name, full);
        offset += int64_t(full.nbytes());
      }
    }
  }
  if (actor_export) {
    int64_t end[3] = {kEnd, 0, 0};
    broadcast_header(group, end);
  }
  uint64_t sent = report.checksum;  // the sender's, to every member
  group.broadcast(TensorView(&sent, DType::i64, {1}), 0);
  if (sent != report.checksum)
    throw Error(fmt::format("weight sync: rank {} received weights with checksum {}, the actor sent {}", world_.rank(),
                            hex(report.checksum), hex(sent)));
  return report;
}

}  // namespace rf::rl
