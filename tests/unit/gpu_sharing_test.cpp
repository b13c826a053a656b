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

  // A daemon already serving is used, not doubled, and said even for time_slicing (the children inherit it).
  const SharingChoice existing = choose_gpu_sharing(GpuSharing::kAuto, 1, 4, "/tmp/nvidia-mps", control);
  EXPECT_EQ(existing.kind, SharingChoice::kExistingDaemon);
  EXPECT_EQ(existing.said, "MPS (the daemon of /tmp/nvidia-mps, already serving)");
  EXPECT_EQ(choose_gpu_sharing(GpuSharing::kTimeSlicing, 1, 4, "/tmp/nvidia-mps", "").kind,
            SharingChoice::kExistingDaemon);

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

TEST(GpuSharing, APrivateDaemonNumbersTheDevicesItSeesFromZero) {
  const std::vector<std::string> devices = {"3", "1"};  // CUDA_VISIBLE_DEVICES=3,1 for the command
  EXPECT_EQ(lane_visible_devices(SharingChoice::kPrivateDaemon, devices), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(lane_visible_devices(SharingChoice::kTurns, devices), devices);
  EXPECT_EQ(lane_visible_devices(SharingChoice::kExistingDaemon, devices), devices);
}

// A stand-in control program: `-d` makes the control pipe (unless FAKE_MPS_FAIL is set; FAKE_MPS_NO_PIPE: it
// "starts" without one) and records its call; without arguments it records its standard input (the commands).
std::string write_fake_control(const fs::path& dir) {
  const fs::path program = dir / "nvidia-cuda-mps-control";
  testing::write_text(program.string(),
                      "#!/bin/sh\n"
                      "if [ \"$1\" = -d ]; then\n"
                      "  [ -n \"$FAKE_MPS_FAIL\" ] && exit 3\n"
                      "  echo \"start $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY\" >> \"$FAKE_MPS_RECORD\"\n"
                      "  [ -n \"$FAKE_MPS_NO_PIPE\" ] || : > \"$CUDA_MPS_PIPE_DIRECTORY/control\"\n"
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

TEST(GpuSharing, ADaemonThatDoesNotStartIsAnErrorNamingItsLogs) {
  testing::TempDir tmp;
  const std::string control = write_fake_control(tmp.path);
  ::setenv("FAKE_MPS_RECORD", tmp.file("record.txt").c_str(), 1);
  ::setenv("FAKE_MPS_FAIL", "1", 1);
  try {
    const MpsDaemon daemon(control, tmp.path / "mps");
    FAIL() << "a daemon that exited 3 was taken as started";
  } catch (const TrainingError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "-d exited with status 3 (its logs: " + (tmp.path / "mps/control_command.log").string() + ", " +
                  (tmp.path / "mps/control.log").string() + ")"),
              std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("gpu_sharing=time_slicing"), std::string::npos) << e.hint();
  }
  EXPECT_EQ(testing::read_text(tmp.file("record.txt")), "") << "a daemon that did not start was sent commands";
  ::unsetenv("FAKE_MPS_FAIL");

  // Started without making its pipe: an error too, and the daemon that may run is told to quit.
  ::setenv("FAKE_MPS_NO_PIPE", "1", 1);
  try {
    const MpsDaemon daemon(control, tmp.path / "mps");
    FAIL() << "a daemon without a control pipe was taken as started";
  } catch (const TrainingError& e) {
    EXPECT_NE(std::string(e.what()).find("made no control pipe in 5 s"), std::string::npos) << e.what();
  }
  const std::string record = testing::read_text(tmp.file("record.txt"));
  EXPECT_EQ(record.rfind("start /tmp/aobench-mps-", 0), 0u) << record;
  EXPECT_NE(record.find("\ncommand quit /tmp/aobench-mps-"), std::string::npos) << record;
  ::unsetenv("FAKE_MPS_NO_PIPE");
  ::unsetenv("FAKE_MPS_RECORD");
}

TEST(GpuSharing, LaneSharingFallsBackToTurnsUnderAutoWhenTheDaemonDoesNotStart) {
  testing::TempDir tmp;
  write_fake_control(tmp.path);
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (tmp.path.string() + ":" + path).c_str(), 1);  // the stand-in is found first
  ::setenv("FAKE_MPS_RECORD", tmp.file("record.txt").c_str(), 1);
  ::unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  {
    LaneGpuSharing sharing(GpuSharing::kAuto, 1, 4, tmp.path / "logs");
    EXPECT_EQ(sharing.kind(), SharingChoice::kPrivateDaemon);
    EXPECT_EQ(sharing.env().size(), 2u);
    EXPECT_NE(sharing.said().find("MPS (a private control daemon); pipes in /tmp/aobench-mps-"), std::string::npos)
        << sharing.said();
    EXPECT_EQ(sharing.held_signal(), 0);
  }
  EXPECT_NE(testing::read_text(tmp.file("record.txt")).find("command quit"), std::string::npos);
  ::setenv("FAKE_MPS_FAIL", "1", 1);
  {
    LaneGpuSharing sharing(GpuSharing::kAuto, 1, 4, tmp.path / "logs");
    EXPECT_EQ(sharing.kind(), SharingChoice::kTurns);
    EXPECT_TRUE(sharing.env().empty());
    EXPECT_EQ(sharing.said(), "in turns (the MPS daemon did not start: " + (tmp.path / "logs/mps").string() + ")");
  }
  EXPECT_THROW(LaneGpuSharing(GpuSharing::kMps, 1, 4, tmp.path / "logs"), TrainingError);
  ::unsetenv("FAKE_MPS_FAIL");
  ::unsetenv("FAKE_MPS_RECORD");
  ::setenv("PATH", path.c_str(), 1);
}

TEST(GpuSharing, RunLoggedFeedsStandardInputAndFindOnPathLooksUpPrograms) {
  testing::TempDir tmp;
  const std::string log = tmp.file("cat.log");
  EXPECT_EQ(run_logged({find_on_path("cat")}, {}, log, "quit\n"), 0);
  EXPECT_EQ(testing::read_text(log), "quit\n");
  EXPECT_EQ(run_logged({find_on_path("sh"), "-c", "echo $ONLY_HERE; exit 4"}, {"ONLY_HERE=yes"}, log), 4);
  EXPECT_EQ(testing::read_text(log), "quit\nyes\n");
  ::setenv("AOBENCH_TEST_INHERITED", "theirs", 1);  // a variable of this process, replaced for one child
  EXPECT_EQ(
      run_logged({find_on_path("sh"), "-c", "echo $AOBENCH_TEST_INHERITED"}, {"AOBENCH_TEST_INHERITED=mine"}, log), 0);
  EXPECT_EQ(run_logged({find_on_path("sh"), "-c", "echo $AOBENCH_TEST_INHERITED"}, {}, log), 0);
  EXPECT_EQ(testing::read_text(log), "quit\nyes\nmine\ntheirs\n");
  ::unsetenv("AOBENCH_TEST_INHERITED");
  EXPECT_EQ(run_logged({tmp.file("missing")}, {}, log), -1);
  EXPECT_EQ(run_logged({find_on_path("cat")}, {}, log, std::string(5000, 'x')), -1);  // more than the pipe takes
  EXPECT_EQ(find_on_path("no-such-program-aobench"), "");
  EXPECT_EQ(find_on_path("a/b"), "");
  fs::create_directories(tmp.path / "bin" / "notaprogram");  // a directory is not a program
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (tmp.path.string() + "/bin:" + path).c_str(), 1);
  EXPECT_EQ(find_on_path("notaprogram"), "");
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(fs::path(find_on_path("sh")).filename(), "sh");
}

}  // namespace
}  // namespace aobench
