// The typed binder: fills a layer's config struct from a YAML subtree, writes it back, and documents
// it. A struct declares its fields once and every visitor here (reader, validator, writer,
// documenter) walks that one list, so reading, the resolved-config dump and the generated reference
// cannot disagree:
//
//   struct OptimConfig {
//     double lr = 1e-3;
//     std::vector<double> betas = {0.9, 0.999};
//     LrDecayStyle lr_decay_style = LrDecayStyle::constant;
//     template <class Fields> void fields(Fields& f) {
//       f("lr", lr, "peak learning rate");
//       f("betas", betas, "Adam (beta1, beta2)");
//       f("lr_decay_style", lr_decay_style, "constant, linear or cosine");
//     }
//     void validate() const;  // optional; throws ConfigError with a key relative to the struct ("lr")
//   };
//
// The struct's header needs nothing from this layer. Enums bind by name through an ADL-found
// `enum_names(E)` returning (value, name) pairs. Field types: bool, integers, double, std::string,
// such enums, std::optional<T> (null <-> nullopt), std::vector<T>, nested structs with fields(), and
// YAML::Node (a free-form subtree kept as is).
//
// Rules: an absent key keeps the struct's default; null is accepted only by optional and YAML::Node
// fields; a double must be finite (.inf, .nan and 1e999 are errors); a list replaces the default list (it is not merged); unknown keys are errors with a "did
// you mean"; every struct's validate() runs after its fields are read, defaults included. Errors are
// ConfigErrors keyed by the full path ("optim.lr", list elements "optim.betas[1]").
//
// Not here: the run's schema (each layer owns its struct, apps assembles them) and cross-section
// checks (the run config's own validate()).
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "config/path_list.h"
#include "config/yaml_util.h"
#include "core/error.h"

namespace rf::config {

// `path` is the dotted prefix of the node's keys in messages ("optim"; "" for the root).
// Both parameters are by value on purpose: with a std::string argument, C++20 ADL also finds
// std::bind<R>(F&&, Args&&...), which beats reference parameters on conversions; by value, the two
// tie and this more specialized template wins. (A yaml-cpp node is a handle: copying it is cheap.)
template <class T>
T bind(YAML::Node node, std::string path);
// Like bind, starting from `out`'s current values instead of T's defaults.
template <class T>
void bind_into(const YAML::Node& node, const std::string& path, T& out);
// The resolved config: every field, defaults included.
template <class T>
YAML::Node to_yaml(const T& value);
// Markdown reference: "## title", then per struct a "### `dotted.path`" table of
// key | type | default | description; nested structs get their own table after their parent's.
template <class T>
std::string document(const std::string& path, const std::string& title);

namespace detail {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsVector : std::false_type {};
template <class T, class A>
struct IsVector<std::vector<T, A>> : std::true_type {};

// Collects a struct's keys; also what makes a type a config struct.
struct FieldNames {
  std::vector<std::string> names;
  template <class V>
  void operator()(std::string_view key, V&, std::string_view) {
    names.emplace_back(key);
  }
};

template <class T>
concept ConfigStruct = std::is_class_v<T> && requires(T& value, FieldNames& names) { value.fields(names); };
template <class T>
concept NamedEnum = std::is_enum_v<T> && requires(T value) { enum_names(value); };
template <class T>
concept Integer = std::integral<T> && !std::same_as<T, bool>;
template <class T>
concept Scalar = std::same_as<T, bool> || Integer<T> || std::same_as<T, double> || std::same_as<T, std::string> ||
                 NamedEnum<T>;
template <class T>
inline constexpr bool kUnsupportedField = false;

// Non-template pieces (bind.cpp).
std::string join_path(const std::string& prefix, std::string_view key);
std::string element_path(const std::string& prefix, size_t index);
[[noreturn]] void throw_expected(const std::string& path, std::string_view expected, const YAML::Node& got);
void check_known_keys(const YAML::Node& map, const std::string& path, const std::vector<std::string>& known);
[[noreturn]] void rethrow_under(const ConfigError& error, const std::string& path);
bool read_bool(const YAML::Node& node, const std::string& path);
int64_t read_signed(const YAML::Node& node, const std::string& path, int64_t min, int64_t max);
uint64_t read_unsigned(const YAML::Node& node, const std::string& path, uint64_t max);
double read_double(const YAML::Node& node, const std::string& path);
std::string read_string(const YAML::Node& node, const std::string& path);
[[noreturn]] void throw_not_one_of(const std::string& path, const std::vector<std::string>& names,
                                   const YAML::Node& got);
std::string format_double(double value);
std::string integer_type_name(bool is_signed, size_t num_bits);
std::string markdown_cell(std::string_view text);
std::string table_header(const std::string& path);

template <NamedEnum E>
std::vector<std::string> enum_name_list() {
  std::vector<std::string> names;
  for (const auto& entry : enum_names(E{})) names.emplace_back(entry.second);
  return names;
}

template <class T>
void read_value(const YAML::Node& node, const std::string& path, T& out);
template <class T>
void validate_all(T& value, const std::string& path);

// Calls value.validate() if T has one, re-keying its error under `path`.
template <class T>
void run_validate(const T& value, const std::string& path) {
  if constexpr (requires { value.validate(); }) {
    try {
      value.validate();
    } catch (const ConfigError& error) {
      rethrow_under(error, path);
    }
  }
}

class FieldReader {
 public:
  FieldReader(const YAML::Node& map, const std::string& path) : map_(map), path_(path) {}
  template <class V>
  void operator()(std::string_view key, V& value, std::string_view) {
    const YAML::Node child = find_child(map_, key);
    if (child.IsDefined()) {
      read_value(child, join_path(path_, key), value);
    } else {
      validate_all(value, join_path(path_, key));
    }
  }

 private:
  const YAML::Node& map_;
  const std::string& path_;
};

class FieldValidator {
 public:
  explicit FieldValidator(const std::string& path) : path_(path) {}
  template <class V>
  void operator()(std::string_view key, V& value, std::string_view) {
    validate_all(value, join_path(path_, key));
  }

 private:
  const std::string& path_;
};

template <class T>
void read_value(const YAML::Node& node, const std::string& path, T& out) {
  if constexpr (ConfigStruct<T>) {
    if (!node.IsMap()) throw_expected(path, "a map", node);
    FieldNames names;
    out.fields(names);
    check_known_keys(node, path, names.names);
    FieldReader reader(node, path);
    out.fields(reader);
    run_validate(out, path);
  } else if constexpr (IsOptional<T>::value) {
    if (node.IsNull()) {
      out.reset();
      return;
    }
    if (!out) out.emplace();
    read_value(node, path, *out);
  } else if constexpr (IsVector<T>::value) {
    if (!node.IsSequence()) throw_expected(path, "a list", node);
    T items;
    for (const YAML::Node& item : node) {
      typename T::value_type value{};  // a local, not items[i]: vector<bool> has no bool&
      read_value(item, element_path(path, items.size()), value);
      items.push_back(std::move(value));
    }
    out = std::move(items);
  } else if constexpr (std::same_as<T, PathList>) {
    if (node.IsScalar()) {
      out.paths = {read_string(node, path)};
    } else {
      if (!node.IsSequence()) throw_expected(path, "a path or a list of paths", node);
      read_value(node, path, out.paths);
    }
  } else if constexpr (std::same_as<T, YAML::Node>) {
    // reset() rebinds the handle; operator= would overwrite a node that copies of `out` share.
    out.reset(YAML::Clone(node));
  } else if constexpr (std::same_as<T, bool>) {
    out = read_bool(node, path);
  } else if constexpr (Integer<T> && std::is_signed_v<T>) {
    out = static_cast<T>(read_signed(node, path, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  } else if constexpr (Integer<T>) {
    out = static_cast<T>(read_unsigned(node, path, std::numeric_limits<T>::max()));
  } else if constexpr (std::same_as<T, double>) {
    out = read_double(node, path);
  } else if constexpr (std::same_as<T, std::string>) {
    out = read_string(node, path);
  } else if constexpr (NamedEnum<T>) {
    if (node.IsScalar()) {
      for (const auto& [value, name] : enum_names(T{})) {
        if (node.Scalar() == name) {
          out = value;
          return;
        }
      }
    }
    throw_not_one_of(path, enum_name_list<T>(), node);
  } else {
    static_assert(kUnsupportedField<T>, "config field type not supported by rf::config::bind");
  }
}

// Runs validate() on every struct inside `value` (children first), for fields the YAML left out.
template <class T>
void validate_all(T& value, const std::string& path) {
  if constexpr (ConfigStruct<T>) {
    FieldValidator validator(path);
    value.fields(validator);
    run_validate(value, path);
  } else if constexpr (IsOptional<T>::value) {
    if (value) validate_all(*value, path);
  } else if constexpr (IsVector<T>::value) {
    if constexpr (!std::same_as<typename T::value_type, bool>) {  // vector<bool> has no bool&
      for (size_t i = 0; i < value.size(); ++i) validate_all(value[i], element_path(path, i));
    }
  }
}

template <class T>
YAML::Node write_value(T& value);

class FieldWriter {
 public:
  explicit FieldWriter(YAML::Node& map) : map_(map) {}
  template <class V>
  void operator()(std::string_view key, V& value, std::string_view) {
    map_[std::string(key)] = write_value(value);
  }

 private:
  YAML::Node& map_;
};

// Takes T& because fields() is not const; to_yaml() hands it a copy.
template <class T>
YAML::Node write_value(T& value) {
  if constexpr (ConfigStruct<T>) {
    YAML::Node map(YAML::NodeType::Map);
    FieldWriter writer(map);
    value.fields(writer);
    return map;
  } else if constexpr (IsOptional<T>::value) {
    return value ? write_value(*value) : YAML::Node(YAML::NodeType::Null);
  } else if constexpr (IsVector<T>::value) {
    YAML::Node items(YAML::NodeType::Sequence);
    for (typename T::value_type item : value) items.push_back(write_value(item));
    if constexpr (Scalar<typename T::value_type>) items.SetStyle(YAML::EmitterStyle::Flow);  // betas: [0.9, 0.999]
    return items;
  } else if constexpr (std::same_as<T, PathList>) {
    return write_value(value.paths);
  } else if constexpr (std::same_as<T, YAML::Node>) {
    // A default-constructed YAML::Node is null but has no node behind it, so it would emit nothing.
    return value.IsNull() ? YAML::Node(YAML::NodeType::Null) : YAML::Clone(value);
  } else if constexpr (std::same_as<T, bool>) {
    return YAML::Node(value);
  } else if constexpr (Integer<T>) {
    return YAML::Node(std::to_string(value));
  } else if constexpr (std::same_as<T, double>) {
    return YAML::Node(format_double(value));
  } else if constexpr (std::same_as<T, std::string>) {
    return YAML::Node(value);
  } else if constexpr (NamedEnum<T>) {
    for (const auto& [candidate, name] : enum_names(T{})) {
      if (candidate == value) return YAML::Node(std::string(name));
    }
    RF_CHECK(false, "enum value {} is missing from its enum_names()", static_cast<int64_t>(value));
  } else {
    static_assert(kUnsupportedField<T>, "config field type not supported by rf::config::to_yaml");
  }
}

template <class T>
std::string type_name() {
  if constexpr (ConfigStruct<T>) {
    return "section";
  } else if constexpr (IsOptional<T>::value) {
    return type_name<typename T::value_type>() + " or null";
  } else if constexpr (IsVector<T>::value) {
    return "list[" + type_name<typename T::value_type>() + "]";
  } else if constexpr (std::same_as<T, PathList>) {
    return "path or list[path]";
  } else if constexpr (std::same_as<T, YAML::Node>) {
    return "any";
  } else if constexpr (std::same_as<T, bool>) {
    return "bool";
  } else if constexpr (Integer<T>) {
    return integer_type_name(std::is_signed_v<T>, sizeof(T) * 8);
  } else if constexpr (std::same_as<T, double>) {
    return "float";
  } else if constexpr (std::same_as<T, std::string>) {
    return "string";
  } else if constexpr (NamedEnum<T>) {
    return fmt::format("enum: {}", fmt::join(enum_name_list<T>(), ", "));
  } else {
    static_assert(kUnsupportedField<T>, "config field type not supported by rf::config::document");
  }
}

template <class T>
void document_struct(const std::string& path, T& value, std::string& out);

// The table of the struct (if any) inside a field: a nested struct, an optional one, or the element
// type of a list ("path[]").
template <class T>
void document_nested(const std::string& path, T& value, std::string& out) {
  if constexpr (ConfigStruct<T>) {
    document_struct(path, value, out);
  } else if constexpr (IsOptional<T>::value) {
    typename T::value_type shown = value ? *value : typename T::value_type{};
    document_nested(path, shown, out);
  } else if constexpr (IsVector<T>::value) {
    typename T::value_type element{};
    document_nested(path + "[]", element, out);
  }
}

class TableRows {
 public:
  TableRows(const std::string& path, std::string& out) : path_(path), out_(out) {}
  template <class V>
  void operator()(std::string_view key, V& value, std::string_view description) {
    const std::string shown_default = ConfigStruct<V> ? fmt::format("see `{}`", join_path(path_, key))
                                                      : fmt::format("`{}`", flow_yaml(write_value(value)));
    out_ += fmt::format("| `{}` | {} | {} | {} |\n", key, markdown_cell(type_name<V>()), markdown_cell(shown_default),
                        markdown_cell(description));
  }

 private:
  const std::string& path_;
  std::string& out_;
};

class NestedTables {
 public:
  NestedTables(const std::string& path, std::string& out) : path_(path), out_(out) {}
  template <class V>
  void operator()(std::string_view key, V& value, std::string_view) {
    document_nested(join_path(path_, key), value, out_);
  }

 private:
  const std::string& path_;
  std::string& out_;
};

template <class T>
void document_struct(const std::string& path, T& value, std::string& out) {
  out += table_header(path);
  TableRows rows(path, out);
  value.fields(rows);
  NestedTables nested(path, out);
  value.fields(nested);
}

}  // namespace detail

template <class T>
void bind_into(const YAML::Node& node, const std::string& path, T& out) {
  if (node.IsDefined()) {
    detail::read_value(node, path, out);
  } else {
    detail::validate_all(out, path);
  }
}

template <class T>
T bind(YAML::Node node, std::string path) {
  T out{};
  bind_into(node, path, out);
  return out;
}

template <class T>
YAML::Node to_yaml(const T& value) {
  T copy = value;
  return detail::write_value(copy);
}

template <class T>
std::string document(const std::string& path, const std::string& title) {
  T defaults{};
  std::string out = fmt::format("## {}\n", title);
  detail::document_struct(path, defaults, out);
  return out;
}

}  // namespace rf::config
