// Where this process stands in a run on many processes, as its launcher said in the environment: mpirun (Open MPI's
// OMPI_COMM_WORLD_*), Slurm's srun (SLURM_*), torchrun-style variables (RANK, WORLD_SIZE, ...), or none of them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "core/choices.h"

namespace ampwb {

enum class Launcher : uint8_t { Single, Mpirun, Srun, Torchrun };

template <>
struct ChoiceTable<Launcher> {
  static constexpr const char* what = "launcher";
  static constexpr std::array<Choice<Launcher>, 4> rows = {{
      {Launcher::Single, "single", "single process", "started on its own: one process, no launcher's variables"},
      {Launcher::Mpirun, "mpirun", "mpirun",
       "started by Open MPI's mpirun or mpiexec, which set OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK and _LOCAL_SIZE"},
      {Launcher::Srun, "srun", "srun",
       "started by Slurm's srun, which sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID (and SLURM_STEP_ID, which an "
       "sbatch script's own process lacks)"},
      {Launcher::Torchrun, "torchrun", "torchrun-style",
       "started with torchrun's variables RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT"},
  }};
};

struct LaunchInfo {
  Launcher launcher = Launcher::Single;
  int rank = 0;  // 0 .. world_size-1
  int world_size = 1;
  int local_rank = 0;                   // among the processes on this machine: picks the GPU
  std::optional<int> local_world_size;  // the processes on this machine, where the launcher says (srun does not)
  std::string master_addr;              // MASTER_ADDR where set: the rendezvous of launches without MPI
  std::optional<uint16_t> master_port;  // MASTER_PORT where set
};

// The environment, one variable at a time: nullopt where it is not set. Tests pass their own.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;

Environment process_environment();  // getenv
Environment environment_of(std::map<std::string, std::string> variables);

// The launcher and ranks from `env`. The most specific launcher wins: mpirun's variables over torchrun's over srun's,
// since mpirun or torchrun inside a Slurm allocation inherit the allocation's SLURM_* variables. Throws Error naming
// the variable and its value where one is malformed (not a whole number, out of range) or its partner is missing.
LaunchInfo read_launch_info(const Environment& env);

// The GPU of `launch`'s rank among the `gpus` this process sees, as torchrun's convention has it (cuda:LOCAL_RANK);
// where each rank sees a single GPU of its own (CUDA_VISIBLE_DEVICES per rank, srun --gpus-per-task=1), that one.
// Throws Error where there is no GPU, or fewer than the local rank needs (two ranks cannot share a GPU in NCCL).
int gpu_of_rank(const LaunchInfo& launch, int gpus);

// "rank 1 of 2 (local rank 1 of 2), launched by mpirun", for messages and logs.
std::string describe(const LaunchInfo& info);

}  // namespace ampwb
