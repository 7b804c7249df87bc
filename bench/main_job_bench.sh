# Sourced by the bench scripts that time the main job (examples/grpo_arith.yaml from the warm start
# scripts/run.sh builds), after `set -euo pipefail`, with `steps` already set: sets repo, rlforge, warm,
# scratch (removed on exit) and `common`, the `rlforge train` arguments of a run of $steps steps without
# validation or checkpoints; exports what mpirun needs as root; defines wait_for_quiet_machine.
#   arguments: [BUILD_DIR] (default build/release); env: WARM (default cache/warm_start/arith3)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-${BUILD_DIR:-$repo/build/release}}
rlforge=$build/apps/rlforge
warm=${WARM:-$repo/cache/warm_start/arith3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
source "$repo/bench/quiet_machine.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
[ -d "$warm" ] || { echo "no warm start at $warm: run scripts/run.sh once (it builds it)" >&2; exit 1; }
common=(train --config "$repo/examples/grpo_arith.yaml" actor_rollout_ref.model.path="$warm"
        trainer.total_training_steps=$steps trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1
        trainer.time_budget_s=null actor_rollout_ref.actor.optim.lr_warmup_steps=0)
