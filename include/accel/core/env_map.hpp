// accel/core/env_map.hpp — accel::EnvMap: an environment to hand to a child process, name -> value.
//
// A value type of the core: EnvApi (concepts/env.hpp) takes it, and the shared writer of the
// visible-devices variables (detail/visible_devices.hpp) fills it.
#pragma once

#include <map>  // also std::less<>: <functional>, which brings <unordered_map>, is not needed
#include <string>

namespace accel {

/// An environment to hand to a child process, as name -> value.
using EnvMap = std::map<std::string, std::string, std::less<>>;

}  // namespace accel
