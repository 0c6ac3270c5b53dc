// Environment variables changed for one scope and restored when it ends — also when a REQUIRE or an
// exception ends it early, so a failing case cannot leave CXX or a cache directory pointing elsewhere
// for every case after it.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <stdlib.h>

class ScopedEnv {
 public:
  /// Sets each (name, value); a nullptr value unsets the variable.
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> values = {}) {
    for (const auto& [name, value] : values) set(name, value);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

  /// Sets (or, with nullptr, unsets) one more variable; its value before the scope's first change to it
  /// is what the destructor puts back.
  void set(const char* name, const char* value) {
    if (!saved_.contains(name)) {
      const char* old = std::getenv(name);
      saved_.emplace(name, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
    }
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  void unset(const char* name) { set(name, nullptr); }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};
