// Implements: the one way aobench starts another program (gnuplot, git, nvidia-smi): posix_spawnp with
// an argument vector, never a shell, so no file name or config value is ever parsed as a command.
#pragma once
#include <string>
#include <vector>

namespace aobench {

// Runs argv[0] (looked up on PATH) with the arguments argv[1..] in directory `cwd` ("" = the current one)
// and waits. stdout is captured into *out when `out` is given (trailing whitespace trimmed), else
// inherited; stderr is inherited when `show_stderr`, else discarded. Returns the exit status, 128 + N
// when killed by signal N, and −1 when the program could not be started (not installed).
int run_program(const std::vector<std::string>& argv, std::string* out = nullptr, const std::string& cwd = "",
                bool show_stderr = false);

// Starts argv[0] (a path, not looked up) without waiting, in a process group of its own (a Ctrl-C at the
// terminal reaches the caller, which decides what its children get), with `env_set` ("NAME=value") replacing or
// adding to this process's environment, and stdout and stderr appended to `log_path` (created 0644).
// Returns the child's pid, or −1 when it could not be started.
int spawn_logged(const std::vector<std::string>& argv, const std::vector<std::string>& env_set,
                 const std::string& log_path);

// Runs argv[0] (a path, not looked up) as spawn_logged starts it, with `input` (at most 4 KiB) as its whole
// standard input, and waits. Returns the exit status as run_program does (−1: not started).
int run_logged(const std::vector<std::string>& argv, const std::vector<std::string>& env_set,
               const std::string& log_path, const std::string& input = "");

// The path of program `name` on PATH ("" when none is executable there).
std::string find_on_path(const std::string& name);

// The exit status of a waitpid() status: the exit code, or 128 + N when killed by signal N.
int exit_status(int wait_status);

}  // namespace aobench
