// Scratch file paths that never collide: ctest runs test cases of one binary as parallel
// processes (and CI or a developer may run two build trees at once), so a fixed name under
// TempDir() races. The path carries the process id and the running test's name.
#pragma once

#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace pdist::testing {

// TempDir()/<pid>.<Suite>.<Test>.<name>
inline std::string UniqueTempPath(const std::string& name) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "no_test";
  for (char& c : test) {
    if (c == '/') c = '_';  // parameterised test names
  }
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "." + test + "." + name;
}

}  // namespace pdist::testing
