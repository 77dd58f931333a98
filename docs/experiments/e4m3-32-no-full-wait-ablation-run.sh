#!/usr/bin/env bash
# e4m3-32-no-full-wait-ablation.patch is measured beside e4m3-32-no-refill-ablation.patch in one call: that run
# script (it sources scripts/device_prologue.sh) has both ablations' text and prediction.
#   WHEELS=.whl-kernel bash docs/experiments/e4m3-32-no-full-wait-ablation-run.sh
exec bash docs/experiments/e4m3-32-no-refill-ablation-run.sh "$@"
