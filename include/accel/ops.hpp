// accel/ops.hpp — deprecated name of <accel/op_builders.hpp> (the op builders of every enabled
// backend); it forwards there. Renamed because it stood beside the folder ops/, the op machinery one
// floor below the backends, of which it is not a part: it includes the backends' ops.
#pragma once

#include <accel/op_builders.hpp>
