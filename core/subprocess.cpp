// Implements: run_program and spawn_logged (see subprocess.h) with posix_spawn(p), a pipe for stdout or a log file.
#include "core/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

extern char** environ;

namespace aobench {

int run_program(const std::vector<std::string>& argv, std::string* out, const std::string& cwd, bool show_stderr) {
  if (argv.empty()) return -1;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipe_fd[2] = {-1, -1};
  if (out && ::pipe2(pipe_fd, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (out) posix_spawn_file_actions_adddup2(&actions, pipe_fd[1], STDOUT_FILENO);
  if (!show_stderr) posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (out) ::close(pipe_fd[1]);
  if (rc != 0) {  // glibc reports a failed exec (ENOENT: not installed) here
    if (out) ::close(pipe_fd[0]);
    return -1;
  }
  if (out) {
    out->clear();
    char buf[4096];
    for (ssize_t n; (n = ::read(pipe_fd[0], buf, sizeof buf)) != 0;) {
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      out->append(buf, static_cast<size_t>(n));
    }
    ::close(pipe_fd[0]);
    while (!out->empty() && (out->back() == '\n' || out->back() == ' ' || out->back() == '\r')) out->pop_back();
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return exit_status(status);
}

int exit_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  return WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status) : -1;
}

namespace {

// This environment with each NAME of `env_set` ("NAME=value") replaced or added.
std::vector<std::string> merged_environment(const std::vector<std::string>& env_set) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& s : env_set) replaced = replaced || s.substr(0, s.find('=')) == name;
    if (!replaced) env_strings.push_back(entry);
  }
  env_strings.insert(env_strings.end(), env_set.begin(), env_set.end());
  return env_strings;
}

// posix_spawn of argv in a process group of its own, stdout and stderr appended to `log_path`, standard input
// from `stdin_fd` when ≥ 0. The child's pid, or −1.
int spawn_in_group(const std::vector<std::string>& argv, const std::vector<std::string>& env_set,
                   const std::string& log_path, int stdin_fd) {
  if (argv.empty()) return -1;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings = merged_environment(env_set);
  std::vector<char*> env;
  for (auto& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdin_fd, STDIN_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &actions, &attr, args.data(), env.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? static_cast<int>(pid) : -1;
}

}  // namespace

int spawn_logged(const std::vector<std::string>& argv, const std::vector<std::string>& env_set,
                 const std::string& log_path) {
  return spawn_in_group(argv, env_set, log_path, -1);
}

int run_logged(const std::vector<std::string>& argv, const std::vector<std::string>& env_set,
               const std::string& log_path, const std::string& input) {
  // The input goes into the pipe before the child starts (it fits the pipe's buffer), so no write can meet a
  // reader that has already gone (SIGPIPE).
  if (input.size() > 4096) return -1;
  int pipe_fd[2] = {-1, -1};
  if (::pipe2(pipe_fd, O_CLOEXEC) != 0) return -1;
  for (size_t done = 0; done < input.size();) {
    const ssize_t n = ::write(pipe_fd[1], input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // the child would see part of its input
      ::close(pipe_fd[0]);
      ::close(pipe_fd[1]);
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  ::close(pipe_fd[1]);
  const int pid = spawn_in_group(argv, env_set, log_path, pipe_fd[0]);
  ::close(pipe_fd[0]);
  if (pid < 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return exit_status(status);
}

std::string find_on_path(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

}  // namespace aobench
