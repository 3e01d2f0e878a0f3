// What run has told the user (notices.h): said once, again only when its condition has gone and
// come back or its text changed, and its end told with what was said.
#include <gtest/gtest.h>

#include "gpuq/core/notices.h"

using namespace gpuq;

TEST(Notices, ALineIsSaidOnceAndAgainOnlyWhenItsConditionCameBackOrItsTextChanged) {
  Notices n;
  EXPECT_TRUE(n.fresh("node dir", "EACCES"));
  EXPECT_FALSE(n.fresh("node dir", "EACCES"));
  EXPECT_TRUE(n.fresh("node dir", "ENOSPC")) << "another problem with the same thing is said";
  EXPECT_FALSE(n.fresh("node dir", "ENOSPC"));
  EXPECT_EQ(n.gone("node dir"), std::optional<std::string>("ENOSPC")) << "its end is told with what was said";
  EXPECT_EQ(n.gone("node dir"), std::nullopt) << "and only once";
  EXPECT_TRUE(n.fresh("node dir", "ENOSPC")) << "back again: said again";
}

TEST(Notices, KeysOfOneKindAreFoundAndForgottenByTheirPrefix) {
  Notices n;
  n.fresh("busy GPU 3", "GPU 3 busy: 2000 MiB");
  n.fresh("busy GPU 12", "GPU 12 busy");
  n.fresh("unsaved:a");
  n.fresh("unsaved:b");
  EXPECT_EQ(n.under("busy GPU "), (std::vector<std::string>{"12", "3"}));
  EXPECT_TRUE(n.active("busy GPU 3"));
  n.forget("unsaved:");
  EXPECT_TRUE(n.under("unsaved:").empty());
  EXPECT_TRUE(n.fresh("unsaved:a")) << "forgotten: said again";
  EXPECT_TRUE(n.active("busy GPU 12")) << "other kinds are kept";
}
