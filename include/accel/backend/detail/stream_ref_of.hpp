// accel/backend/detail/stream_ref_of.hpp — the StreamRef type of a backend's Streams, for the shared
// facade parts that take one (backend/graphs.hpp, backend/event_base.hpp). Not a member alias of
// theirs: a backend that derives from several of them and from its Streams would see two StreamRef.
#pragma once

namespace accel::detail {

template <class Streams>
using stream_ref_of = decltype(Streams::current_stream());

}  // namespace accel::detail
