#include "rl/batch_codec.h"

#include <cstring>

namespace rf::rl {

std::vector<uint8_t> encode_batch(const Batch& batch) {
  Json tensors = Json::array();
  for (const std::string& name : batch.tensor_names()) {
    const TensorView view = batch.tensor(name);  // owned by the batch, so contiguous
    const auto* bytes = static_cast<const uint8_t*>(view.raw());
    tensors.push_back({{"name", name},
                       {"dtype", std::string(dtype_name(view.dtype()))},
                       {"shape", std::vector<int64_t>(view.shape().begin(), view.shape().end())},
                       {"data", Json::binary(std::vector<uint8_t>(bytes, bytes + view.nbytes()))}});
  }
  Json columns = Json::object();
  for (const std::string& name : batch.column_names()) columns[name] = batch.column(name);
  const Json document = {{"size", batch.size()}, {"tensors", tensors}, {"columns", columns}, {"meta", batch.meta()}};
  return Json::to_cbor(document);
}

Batch decode_batch(std::span<const uint8_t> bytes) {
  try {
    const Json document = Json::from_cbor(bytes.begin(), bytes.end());
    Batch batch(document.at("size").get<int64_t>());
    for (const Json& entry : document.at("tensors")) {
      const auto name = entry.at("name").get<std::string>();
      const auto extents = entry.at("shape").get<std::vector<int64_t>>();
      Tensor tensor(Shape(extents.begin(), extents.end()), parse_dtype(entry.at("dtype").get<std::string>()));
      const Json::binary_t& data = entry.at("data").get_binary();
      RF_CHECK(data.size() == tensor.nbytes(), "decode_batch: tensor '{}' has {} bytes, its shape {} needs {}", name,
               data.size(), tensor.shape().to_string(), tensor.nbytes());
      std::memcpy(tensor.view().raw(), data.data(), data.size());
      batch.set_tensor(name, std::move(tensor));
    }
    for (const auto& [name, values] : document.at("columns").items())
      batch.set_column(name, values.get<std::vector<Json>>());
    batch.meta() = document.at("meta");
    return batch;
  } catch (const Json::exception& e) {
    throw Error(fmt::format("decode_batch: {} bytes are not an encoded batch: {}", bytes.size(), e.what()));
  }
}

}  // namespace rf::rl
