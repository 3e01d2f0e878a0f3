#include "gpuq/gpus.h"

#include <gtest/gtest.h>

using namespace gpuq;

TEST(PickGpus, TwoGpuJobTakesFirstFreeNvlinkPair) {
  // 0 and 3 busy: (0,1) and (2,3) are broken, (4,5) is the first whole pair.
  GpuMask free = mask_of({1, 2, 4, 5, 6, 7});
  EXPECT_EQ(pick_gpus(2, free), (std::vector<int>{4, 5}));
}
