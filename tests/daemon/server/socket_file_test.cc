#include "daemon/server/socket_file.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "daemon/server/endpoint.h"
#include "gtest/gtest.h"
#include "tests/temp_dir.h"

namespace octo {
namespace {

// A listening unix socket at `path`; closed (leaving the file) on destruction.
class Listener {
 public:
  explicit Listener(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address = {};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
    EXPECT_EQ(::listen(fd_, 4), 0);
  }
  ~Listener() { ::close(fd_); }

 private:
  int fd_ = -1;
};

TEST(SocketFileTest, CreatesMissingDirectoriesOwnerOnly) {
  testing::TempDir dir;
  const std::string path = dir.Path("run/octo/octod.sock");
  bool stale = true;
  ASSERT_TRUE(PrepareSocketPath(path, &stale).ok());
  EXPECT_FALSE(stale);
  struct stat info = {};
  ASSERT_EQ(::stat(dir.Path("run/octo").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
}

TEST(SocketFileTest, RemovesAStaleSocketButNotALiveOne) {
  testing::TempDir dir;
  const std::string path = dir.Path("octod.sock");
  {
    Listener stale_listener(path);
    EXPECT_TRUE(UnixSocketAnswers(path));
    bool stale = false;
    const absl::Status live = PrepareSocketPath(path, &stale);
    EXPECT_EQ(live.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(live.message().find("already running"), absl::string_view::npos) << live;
  }
  // The listener is gone; its file is left behind as after a crash.
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(UnixSocketAnswers(path));
  bool stale = false;
  ASSERT_TRUE(PrepareSocketPath(path, &stale).ok());
  EXPECT_TRUE(stale);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SocketFileTest, NeverRemovesAFileThatIsNotASocket) {
  testing::TempDir dir;
  const std::string path = dir.Path("octod.sock");
  std::ofstream(path) << "precious";
  bool stale = false;
  const absl::Status status = PrepareSocketPath(path, &stale);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("not a socket"), absl::string_view::npos) << status;
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(EndpointTest, UnixTargetIsAbsoluteAndListenAddressesAreChecked) {
  EXPECT_EQ(UnixTarget("/run/octo/octod.sock"), "unix:/run/octo/octod.sock");
  EXPECT_EQ(UnixTarget("rel.sock"), "unix:" + (std::filesystem::current_path() / "rel.sock").string());
  EXPECT_TRUE(CheckListenAddress("0.0.0.0:7070").ok());
  EXPECT_TRUE(CheckListenAddress("[::1]:1").ok());
  EXPECT_TRUE(CheckListenAddress("localhost:65535").ok());
  EXPECT_FALSE(CheckListenAddress(":7070").ok());
  EXPECT_FALSE(CheckListenAddress("host:65536").ok());
  EXPECT_FALSE(CheckListenAddress("host:http").ok());
  EXPECT_FALSE(CheckUnixSocketPathLength(std::string(108, 'x')).ok());
  EXPECT_TRUE(CheckUnixSocketPathLength(std::string(107, 'x')).ok());
}

}  // namespace
}  // namespace octo
