#include "rl/batch_meta.h"

#include <cmath>

#include "core/error.h"

namespace rf::rl {
namespace {

constexpr const char* kMetricsKey = "metrics";

// verl's list_of_dict_to_dict_of_list, one dict at a time.
void append_metrics(Json& gathered, const Json& metrics, size_t part) {
  RF_CHECK(metrics.is_object(), "concat: meta 'metrics' of part {}: expected an object of metric values, got {}", part,
           metrics.dump());
  for (const auto& [name, value] : metrics.items()) gathered[name].push_back(value);
}

}  // namespace

bool json_equal(const Json& a, const Json& b) {
  if (a.is_number_integer() && b.is_number_integer()) return a == b;  // exactly, beyond 2^53 too
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return x == y || (std::isnan(x) && std::isnan(y));
  }
  if (a.type() != b.type() || a.size() != b.size()) return false;
  if (a.is_array()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    for (const auto& [key, value] : a.items()) {
      const auto it = b.find(key);
      if (it == b.end() || !json_equal(value, *it)) return false;
    }
    return true;
  }
  return a == b;
}

void union_meta(Json& into, const Json& other) {
  for (const auto& [key, value] : other.items()) {
    const auto it = into.find(key);
    if (it == into.end()) {
      into[key] = value;
      continue;
    }
    RF_CHECK(json_equal(*it, value), "union: meta key '{}' differs between the two batches ({} vs {})", key,
             it->dump(), value.dump());
  }
}

Json concat_meta(std::span<const Batch> parts) {
  Json merged = Json::object();
  Json metrics = Json::object();
  bool has_metrics = false;
  for (size_t p = 0; p < parts.size(); ++p) {
    for (const auto& [key, value] : parts[p].meta().items()) {
      if (key == kMetricsKey) {
        if (value.is_null()) continue;
        if (value.is_array()) {
          for (const Json& entry : value) append_metrics(metrics, entry, p);
          has_metrics = has_metrics || !value.empty();
        } else {
          append_metrics(metrics, value, p);
          has_metrics = true;
        }
        continue;
      }
      const auto it = merged.find(key);
      if (it == merged.end()) {
        merged[key] = value;
      } else {
        RF_CHECK(json_equal(*it, value), "concat: meta key '{}' of part {} is {}, an earlier part has {}", key, p,
                 value.dump(), it->dump());
      }
    }
  }
  if (has_metrics) merged[kMetricsKey] = std::move(metrics);
  return merged;
}

}  // namespace rf::rl
