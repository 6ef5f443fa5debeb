#include "cpu_ref/cp_split.h"
#include <gtest/gtest.h>
TEST(X, Y) {}
