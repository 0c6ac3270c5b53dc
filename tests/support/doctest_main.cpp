// The one doctest main shared by every test binary (compiled once as an object library).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
