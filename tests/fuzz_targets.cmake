# The libFuzzer targets of the input formats, one per format, defined in one place so the library sources
# they instrument are compiled once for all of them (cmake/Fuzzing.cmake). Each is a test of its layer's
# label; the harness and its seed corpus live in that layer's test folder. Skipped without clang.
include(${PROJECT_SOURCE_DIR}/cmake/Fuzzing.cmake)
set(src ${PROJECT_SOURCE_DIR}/src)

# The safetensors reader: the byte-level parser and the core sources its copies use.
rf_add_fuzz_test(formats_fuzz_safetensors LABEL formats SECONDS 10
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/formats/fuzz_safetensors.cpp
          ${src}/formats/safetensors_format.cpp
          ${src}/core/dtype.cpp ${src}/core/error.cpp
          ${src}/core/memory_tracker.cpp ${src}/core/shape.cpp
          ${src}/core/tensor.cpp ${src}/core/tensor_view.cpp
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/formats/fuzz_corpus
  DICT ${CMAKE_CURRENT_SOURCE_DIR}/formats/fuzz_safetensors.dict)

# The YAML config + dotted overrides path: ConfigTree and the binder over real config structs, with the
# few sources those structs need.
rf_add_fuzz_test(config_fuzz_yaml LABEL config SECONDS 5
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/config/fuzz_config.cpp
          ${src}/config/bind.cpp ${src}/config/config_tree.cpp ${src}/config/suggest.cpp
          ${src}/config/yaml_checks.cpp ${src}/config/yaml_json.cpp ${src}/config/yaml_util.cpp
          ${src}/optim/optim_config.cpp ${src}/engine/engine_config.cpp ${src}/model/pipeline_split.cpp
          ${src}/data/data_config.cpp ${src}/model/moe_capacity.cpp
          ${src}/core/dtype.cpp ${src}/core/error.cpp ${src}/core/input_file.cpp
          ${src}/core/memory_tracker.cpp ${src}/core/shape.cpp ${src}/core/tensor.cpp ${src}/core/tensor_view.cpp
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/config/fuzz_corpus_config
  LIBS yaml-cpp)

# JSONL rows into examples, and tokenizer.json loading with encode/decode. PCRE2 and utf8proc are linked as the system builds them (not instrumented).
set(RF_FUZZ_DATA_COMMON ${src}/data/char_tokenizer.cpp ${src}/data/builtin_tasks.cpp ${src}/data/task.cpp
    ${src}/data/index_permutation.cpp ${src}/data/tokenizer_json.cpp ${src}/formats/atomic_file.cpp
    ${src}/formats/json_input.cpp
    ${src}/core/error.cpp ${src}/core/input_file.cpp ${src}/core/philox.cpp ${src}/core/dtype.cpp
    ${src}/core/memory_tracker.cpp ${src}/core/shape.cpp ${src}/core/tensor.cpp ${src}/core/tensor_view.cpp)
rf_add_fuzz_test(data_fuzz_jsonl LABEL data SECONDS 5
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/data/fuzz_jsonl.cpp ${src}/data/jsonl_dataset.cpp ${RF_FUZZ_DATA_COMMON}
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/data/fuzz_corpus_jsonl)
rf_add_fuzz_test(data_fuzz_tokenizer LABEL data SECONDS 5
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/data/fuzz_tokenizer.cpp ${RF_FUZZ_DATA_COMMON}
          ${src}/data/added_tokens.cpp ${src}/data/bpe_model.cpp ${src}/data/bpe_tokenizer.cpp
          ${src}/data/byte_level.cpp ${src}/data/normalizer.cpp ${src}/data/pre_tokenizer.cpp
          ${src}/data/tokenizer_config.cpp ${src}/data/unicode_regex.cpp ${src}/data/utf8.cpp ${src}/core/log.cpp
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/data/fuzz_corpus_tokenizer
  LIBS ${RF_PCRE2_LINK_LIBRARIES} ${RF_UTF8PROC_LINK_LIBRARIES})

# HF config.json reading: the config and its parameter layout.
rf_add_fuzz_test(model_fuzz_config_json LABEL model SECONDS 5
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/model/fuzz_config_json.cpp
          ${src}/model/model_config.cpp ${src}/model/rope_scaling.cpp ${src}/model/param_layout.cpp
          ${src}/model/moe_config.cpp ${src}/model/moe_router.cpp
          ${src}/formats/json_input.cpp ${src}/core/error.cpp ${src}/core/input_file.cpp ${src}/core/dtype.cpp
          ${src}/core/memory_tracker.cpp ${src}/core/shape.cpp ${src}/core/tensor.cpp ${src}/core/tensor_view.cpp
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/model/fuzz_corpus_config_json)

# The checkpoint manifest reader, with the sources its parser uses.
rf_add_fuzz_test(checkpoint_fuzz_manifest LABEL checkpoint SECONDS 5
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/fuzz_manifest.cpp
          ${src}/checkpoint/manifest.cpp ${src}/formats/safetensors_format.cpp ${src}/core/dtype.cpp
          ${src}/core/error.cpp ${src}/core/memory_tracker.cpp ${src}/core/shape.cpp ${src}/core/tensor.cpp
          ${src}/core/tensor_view.cpp
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/fuzz_corpus_manifest)
