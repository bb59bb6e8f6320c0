#include "client/interruptible_input.h"

#include <unistd.h>

#include <istream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace octo {
namespace {

TEST(InterruptibleInputTest, ReadsLinesThenEndOfInput) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string text = "one\ntwo\n";
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  InterruptibleInput buffer(fds[0]);
  std::istream in(&buffer);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "one");
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "two");
  EXPECT_FALSE(std::getline(in, line));
  ::close(fds[0]);
}

// A read waiting for a line that never comes ends when interrupted.
TEST(InterruptibleInputTest, InterruptEndsABlockedRead) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  InterruptibleInput buffer(fds[0]);
  std::istream in(&buffer);
  std::thread interrupter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    buffer.Interrupt();
  });
  std::string line;
  EXPECT_FALSE(std::getline(in, line));
  interrupter.join();
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace octo
