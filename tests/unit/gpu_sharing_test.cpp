// Implements: GPU sharing of `aobench run`'s lanes (harness/experiment/gpu_sharing.h): the knob, every branch of
// the choice, and a private MPS daemon's life against a stand-in nvidia-cuda-mps-control that records how it was
// called (its arguments, its pipe and log directories, its standard input). The real daemon runs only on a GPU
// machine: docs/results/t128_b16_36k/packing/.
#include "harness/experiment/gpu_sharing.h"

#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/subprocess.h"
#include "tests/test_util.h"

namespace aobench {
namespace {
namespace fs = std::filesystem;

TEST(GpuSharing, TheKnobTakesThreeValues) {
  EXPECT_EQ(parse_gpu_sharing("auto", "x"), GpuSharing::kAuto);
  EXPECT_EQ(parse_gpu_sharing("mps", "x"), GpuSharing::kMps);
  EXPECT_EQ(parse_gpu_sharing("time_slicing", "x"), GpuSharing::kTimeSlicing);
  try {
    parse_gpu_sharing("MPS", "exp.json: 'gpu_sharing'");
    FAIL() << "an unknown value was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("exp.json: 'gpu_sharing': 'MPS' is not a way to share a GPU"),
              std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("time_slicing"), std::string::npos) << e.hint();
  }

  std::vector<std::string> sets = {"train.seed=3", "gpu_sharing=mps", "gpu_sharing=mps"};
  EXPECT_EQ(take_gpu_sharing_setting(sets), "mps");
  EXPECT_EQ(sets, std::vector<std::string>{"train.seed=3"});
  sets = {"gpu_sharing=mps", "gpu_sharing=auto"};
  EXPECT_THROW(take_gpu_sharing_setting(sets), ConfigError);
  sets = {"gpu_sharing="};
  EXPECT_THROW(take_gpu_sharing_setting(sets), ConfigError);
  sets = {"seeds=2"};
  EXPECT_EQ(take_gpu_sharing_setting(sets), "");
}

TEST(GpuSharing, TheChoiceFollowsTheModeTheDevicesAndWhatIsInstalled) {
  const std::string control = "/usr/bin/nvidia-cuda-mps-control";
  // Nothing is shared: no GPU, or one run per GPU.
  EXPECT_EQ(choose_gpu_sharing(GpuSharing::kMps, 0, 8, "", "").kind, SharingChoice::kTurns);
  EXPECT_EQ(choose_gpu_sharing(GpuSharing::kMps, 0, 8, "", "").said, "");
  EXPECT_EQ(choose_gpu_sharing(GpuSharing::kMps, 4, 1, "", "").said, "");

  EXPECT_EQ(choose_gpu_sharing(GpuSharing::kAuto, 1, 12, "", control).kind, SharingChoice::kPrivateDaemon);
  EXPECT_EQ(choose_gpu_sharing(GpuSharing::kMps, 2, 12, "", control).kind, SharingChoice::kPrivateDaemon);
  const SharingChoice turns = choose_gpu_sharing(GpuSharing::kTimeSlicing, 1, 12, "", control);
  EXPECT_EQ(turns.kind, SharingChoice::kTurns);
  EXPECT_EQ(turns.said, "in turns (gpu_sharing time_slicing)");

  // A daemon already serving is used, not doubled.
  const SharingChoice existing = choose_gpu_sharing(GpuSharing::kAuto, 1, 4, "/tmp/nvidia-mps", control);
  EXPECT_EQ(existing.kind, SharingChoice::kExistingDaemon);
  EXPECT_EQ(existing.said, "MPS (the daemon of /tmp/nvidia-mps)");

  // Without the program: auto trains in turns and says why, mps is an error.
  const SharingChoice missing = choose_gpu_sharing(GpuSharing::kAuto, 1, 4, "", "");
  EXPECT_EQ(missing.kind, SharingChoice::kTurns);
  EXPECT_EQ(missing.said, "in turns (nvidia-cuda-mps-control is not on PATH)");
  EXPECT_THROW(choose_gpu_sharing(GpuSharing::kMps, 1, 4, "", ""), ConfigError);

  // More runs per GPU than MPS takes.
  EXPECT_EQ(choose_gpu_sharing(GpuSharing::kAuto, 1, kMpsClientsPerGpu + 1, "", control).kind, SharingChoice::kTurns);
  EXPECT_EQ(choose_gpu_sharing(GpuSharing::kAuto, 1, kMpsClientsPerGpu, "", control).kind,
            SharingChoice::kPrivateDaemon);
  EXPECT_THROW(choose_gpu_sharing(GpuSharing::kMps, 1, kMpsClientsPerGpu + 1, "", control), ConfigError);
}

// A stand-in control program: `-d` makes the control pipe (unless FAKE_MPS_FAIL is set) and records its call;
// without arguments it records its standard input (the daemon's commands).
std::string write_fake_control(const fs::path& dir) {
  const fs::path program = dir / "nvidia-cuda-mps-control";
  testing::write_text(program.string(),
                      "#!/bin/sh\n"
                      "if [ \"$1\" = -d ]; then\n"
                      "  [ -n \"$FAKE_MPS_FAIL\" ] && exit 3\n"
                      "  echo \"start $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY\" >> \"$FAKE_MPS_RECORD\"\n"
                      "  : > \"$CUDA_MPS_PIPE_DIRECTORY/control\"\n"
                      "else\n"
                      "  echo \"command $(cat) $CUDA_MPS_PIPE_DIRECTORY\" >> \"$FAKE_MPS_RECORD\"\n"
                      "fi\n");
  ::chmod(program.c_str(), 0755);
  return program.string();
}

TEST(GpuSharing, APrivateDaemonStartsWithItsOwnPipesAndQuitsWhenDone) {
  testing::TempDir tmp;
  const std::string control = write_fake_control(tmp.path);
  const std::string record = tmp.file("record.txt");
  ::setenv("FAKE_MPS_RECORD", record.c_str(), 1);
  ::unsetenv("FAKE_MPS_FAIL");
  fs::path pipes;
  {
    const MpsDaemon daemon(control, tmp.path / "logs" / "mps");
    pipes = daemon.pipe_dir();
    EXPECT_EQ(pipes.parent_path(), fs::path("/tmp"));
    EXPECT_EQ(pipes.filename().string().rfind("aobench-mps-", 0), 0u) << pipes;
    EXPECT_TRUE(fs::exists(pipes / "control"));
    EXPECT_EQ(daemon.client_env(),
              (std::vector<std::string>{"CUDA_MPS_PIPE_DIRECTORY=" + pipes.string(),
                                        "CUDA_MPS_LOG_DIRECTORY=" + (tmp.path / "logs" / "mps").string()}));
    EXPECT_EQ(testing::read_text(record), "start " + pipes.string() + " " + (tmp.path / "logs/mps").string() + "\n");
  }
  EXPECT_EQ(testing::read_text(record), "start " + pipes.string() + " " + (tmp.path / "logs/mps").string() +
                                            "\ncommand quit " + pipes.string() + "\n");
  EXPECT_FALSE(fs::exists(pipes)) << "the pipe folder outlived the daemon";
  ::unsetenv("FAKE_MPS_RECORD");
}

TEST(GpuSharing, ADaemonThatDoesNotStartIsAnErrorNamingItsLog) {
  testing::TempDir tmp;
  const std::string control = write_fake_control(tmp.path);
  ::setenv("FAKE_MPS_RECORD", tmp.file("record.txt").c_str(), 1);
  ::setenv("FAKE_MPS_FAIL", "1", 1);
  try {
    const MpsDaemon daemon(control, tmp.path / "mps");
    FAIL() << "a daemon that exited 3 was taken as started";
  } catch (const TrainingError& e) {
    EXPECT_NE(
        std::string(e.what()).find("-d exited with status 3 (its log: " + (tmp.path / "mps/control.log").string()),
        std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("gpu_sharing=time_slicing"), std::string::npos) << e.hint();
  }
  ::unsetenv("FAKE_MPS_FAIL");
  ::unsetenv("FAKE_MPS_RECORD");
}

TEST(GpuSharing, RunLoggedFeedsStandardInputAndFindOnPathLooksUpPrograms) {
  testing::TempDir tmp;
  const std::string log = tmp.file("cat.log");
  EXPECT_EQ(run_logged({find_on_path("cat")}, {}, log, "quit\n"), 0);
  EXPECT_EQ(testing::read_text(log), "quit\n");
  EXPECT_EQ(run_logged({find_on_path("sh"), "-c", "echo $ONLY_HERE; exit 4"}, {"ONLY_HERE=yes"}, log), 4);
  EXPECT_EQ(testing::read_text(log), "quit\nyes\n");
  EXPECT_EQ(run_logged({tmp.file("missing")}, {}, log), -1);
  EXPECT_EQ(run_logged({find_on_path("cat")}, {}, log, std::string(5000, 'x')), -1);  // more than the pipe takes
  EXPECT_EQ(find_on_path("no-such-program-aobench"), "");
  EXPECT_EQ(find_on_path("a/b"), "");
  EXPECT_EQ(fs::path(find_on_path("sh")).filename(), "sh");
}

}  // namespace
}  // namespace aobench
