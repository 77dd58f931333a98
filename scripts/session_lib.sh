# Shell pieces the device scripts share (sourced by h200_session.sh, fleet_session.sh, device_prologue.sh).
#   session_start: $OUT/work for results, the whole output also to $OUT/session.log, the run's environment
#   pack: repack $OUT/results.tar.gz from ${KDT_PACK_DIR:-$OUT/work} (a call cut off by its time limit keeps the
#     finished steps; the device returns at most 8 loose files: one-off calls set KDT_PACK_DIR outside $OUT);
#     KDT_PACK_NAME=NAME packs to $OUT/NAME.tar.gz instead, so that one call can run two run scripts
#   step "what": pack, then announce the next step
#   kernels_snapshot / kernels_restore: copy kernels/ aside and back (the device tree's git metadata may lag the
#     local commits, so a call that patches kernels/ between settings restores by copying, not by git checkout)
#   install_wheels: the carried wheels (${WHEELS:-.whl}) into /tmp/site, put on PYTHONPATH / PATH with the tree
#   write_provenance COMMAND FILE: kdtree_lab.lab.provenance of COMMAND as JSON
#   run_sanitizers "TOOLS" IMPLS DIR [SUFFIX]: compute-sanitizer over kdtree_lab.checks.sanitize_cases (IMPLS: a comma list,
#     or empty for its default), one log per tool in DIR/sanitizer-TOOL[SUFFIX].log, a summary line each
#   run_gates PART TAG DIR: one of the three device calls of the gates a change to every configuration passes (PART
#     gates: the parity and graph tests, edge grid + 500 random, 23 capture sizes x 100 replays, calls back to back;
#     gates2: the hook against SGLang and the wgmma tests; gates3: the four sanitizers over every configuration this
#     GPU launches), results DIR/PART-TAG.xml and .log (gate_tests) or DIR/sanitizer-TOOL-TAG.log, then pack (each
#     call ~9 minutes)
#   e4m3_gates MODE PATCH TAG DIR [IMPL]: a change to an e4m3 form, applied (PATCH) and gated by the tests and tools
#     the form reaches (MODE gates: the fp8 and e4m3 parity and graph tests and the hook over fp8, ~9 minutes;
#     gates-sanitize: the four sanitizers on IMPL, cuda_sm120_e4m3 unless named, ~1 minute), results
#     DIR/gates-TAG.* or DIR/sanitizer-TOOL-TAG.log, then pack
#   time_e4m3_64 OUT: the 64-row e4m3 form at its shapes (the headline, B = 8, L = 32k) on the timing library, to OUT
#   build_libs TAG DIR: the normal and the timing library of the tree as it is now (cached by source digest), their
#     reports in DIR/build-TAG.json and DIR/build-timing-TAG.json: a call that times a patch against main builds each
#     before the step that times it, whose timeout a build would eat
#   ab_patch PATCH DIR CASES ONLY IMPL:KV...: a kernels-only PATCH against main (kernels_snapshot taken): for main,
#     then with the patch, build_libs and a digest of each IMPL over its KV pool's grid (edge grid + CASES random);
#     the digests compared (a difference, or a digest missing, ends the call before any timing, rc 1); then
#     time_short_calls for main, the patch and main again (ONLY: fp8, or all); leaves kernels/ as main's
#   phase_clocks_of TAG DIR PATTERN: the phase clocks of the 64-row e4m3 form's short calls (B = 1, H = 8, N = 16,
#     L = 128 and 4k; the phase build of the timing library) on the tree as it is, to DIR/phase-e4m3-64-TAG.json and
#     DIR/build-phase-TAG.json, the output lines matching PATTERN shown
#   phase_ab PATCH DIR PATTERN: phase_clocks_of main, then with PATCH (kernels_snapshot taken) as patch; leaves
#     kernels/ as main's
#   time_short_calls TAG DIR [fp8]: issue 52's short calls (the marginal cost in a graph of ten, B = 1, H = 8, N = 4
#     and 16, L = 128 and 4k: both e4m3 forms over fp8, and without fp8 the bf16 picks too), then the fp8 headline and
#     B = 8 (and the bf16 headline), on the timing library, to DIR/fixed-*-TAG.json and DIR/bench-*-TAG.json, then pack
#   roles_checks DIR: on the tree as it is (a patch to the bf16 role split applied), that configuration's smoke (a hang
#     ends at its 60 s), its parity tests (edge grid + 500 random, the corrupt-indptr flag) and racecheck / synccheck,
#     results DIR/smoke-patch.json, DIR/gpu-parity-patch.xml and DIR/sanitizer-TOOL-patch.log, then pack
#   roles_ab TAG DIR: the bf16 role split of DIR/build-TAG.json (A) against DIR/build-patch.json (B) through
#     kdtree_lab.checks.ab_interleave (eight rounds; the ablations' three shapes, one short call, one memory-bound shape)
#     to DIR/ab-interleave-TAG-patch.json, then pack
#   e4m3_ab A B DIR: the 64-row e4m3 form of DIR/build-timing-A.json (A) against DIR/build-timing-B.json (B) through
#     kdtree_lab.checks.ab_interleave (eight rounds; the fp8 headline, B = 8, 1 x 32k and 1 x 4k) to
#     DIR/ab-interleave-A-B.json, then pack
#   roles_patch PATCH DIR: a patch to the bf16 role split measured against main in one step: applied, build_libs patch,
#     roles_checks, reverted (git apply -R: kernels/ and any other file it touches back to main), roles_ab main (DIR
#     holds main's build-main.json already); rc 1 where the patch does not apply or revert
#   gate_tests STEM PYTEST_ARGS...: GPU tests with a per-test log and, past GATE_TIMEOUT, an interrupted summary.
#     One pytest process: four pytest-xdist workers on one GPU ran each test ~5x slower than alone (2026-12-05,
#     data/results/h100/2026-12-05-landing-gates/), less than serial throughput. The sanitizers' tools run at once
#     (SANITIZE_PARALLEL=0 in turn): four took 43 s together
OUT=${OUT:-/tmp/out}

session_start() {
  mkdir -p "$OUT/work"
  exec > >(tee -a "$OUT/session.log") 2>&1
  export PYTHONUNBUFFERED=1 MPLBACKEND=Agg TRITON_DEFAULT_FP_FUSION=1
}

pack() {
  local t="$OUT/${KDT_PACK_NAME:-results}.tar.gz"
  tar -C "${KDT_PACK_DIR:-$OUT/work}" -czf "$t.tmp" . && mv "$t.tmp" "$t"
}

kernels_snapshot() { rm -rf /tmp/kernels0 && cp -r kernels /tmp/kernels0; }

kernels_restore() { rm -rf kernels && cp -r /tmp/kernels0 kernels; }

step() { pack 2>/dev/null; echo; echo "=== $(date -u +%H:%M:%S) $*"; }

install_wheels() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "${WHEELS:-.whl}"/*.whl || { echo "wheel install failed"; return 1; }
  # pip --target puts the wheels' data files (nbconvert's HTML templates, which the run's index.html pages need) in
  # /tmp/site/share/jupyter, where Jupyter looks only when JUPYTER_PATH names it
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH JUPYTER_PATH=/tmp/site/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}
}

write_provenance() {
  python3 -c "import json, sys; from kdtree_lab.lab.provenance import provenance; print(json.dumps(provenance(sys.argv[1]), indent=2))" \
    "$1" > "$2"
}

run_sanitizers() {
  # The tools at once (SANITIZE_PARALLEL=0: in turn), each its own process on the GPU (the tests' library is built
  # before, and a build appears by rename: kdtree_lab.kernels.build), then the summary lines in the tools' order
  local tools=$1 impls=$2 dir=$3 suffix=${4:-} tool
  for tool in $tools; do
    if [ "${SANITIZE_PARALLEL:-1}" = 1 ]; then
      sanitize_one "$tool" "$impls" "$dir/sanitizer-$tool$suffix.log" > "$dir/.sanitizer-$tool$suffix.line" &
    else
      sanitize_one "$tool" "$impls" "$dir/sanitizer-$tool$suffix.log"
    fi
  done
  if [ "${SANITIZE_PARALLEL:-1}" = 1 ]; then
    wait
    for tool in $tools; do cat "$dir/.sanitizer-$tool$suffix.line"; rm -f "$dir/.sanitizer-$tool$suffix.line"; done
  fi
}

sanitize_one() {  # TOOL IMPLS LOG: one compute-sanitizer tool over kdtree_lab.checks.sanitize_cases, its summary line
  local tool=$1 impls=$2 log=$3 quick="" filter="--kernel-name kns=verify_" rc
  # initcheck: every kernel instrumented (a kernel filter leaves torch's writes untracked, so reads of its
  # outputs look uninitialised), and only two cases with the CUDA kernel, as it is slow.
  [ "$tool" = initcheck ] && quick="--quick" && filter=""
  timeout ${SANITIZE_TIMEOUT:-240} compute-sanitizer --tool $tool $filter --error-exitcode 9 \
    python3 -m kdtree_lab.checks.sanitize_cases $quick ${impls:+--impl "$impls"} > "$log" 2>&1
  rc=$?
  echo "$tool rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
}

gate_tests() {  # STEM PYTEST_ARGS...: the GPU tests named, each result line to STEM.log as it comes, STEM.xml at the end.
  # Past ${GATE_TIMEOUT:-520} s pytest gets SIGINT, not SIGTERM: it stops at the test it is in and still writes its
  # summary and the XML of what ran (marked interrupted), so a call cut short says how far it got.
  local stem=$1 rc; shift
  timeout -s INT -k 30 ${GATE_TIMEOUT:-520} python3 -m pytest -m gpu -v -p no:cacheprovider \
    --junitxml="$stem.xml" "$@" > "$stem.log" 2>&1
  rc=$?
  local cut=""
  [ $rc = 124 ] && cut="INTERRUPTED past ${GATE_TIMEOUT:-520} s: not every test ran" && echo "$cut" >> "$stem.log"
  echo "$(basename "$stem") rc=$rc $(grep -E '(passed|failed|error)' "$stem.log" | tail -1) $cut"
}

e4m3_gates() {
  git apply "$2" || return 1
  case "$1" in
    gates) gate_tests "$4/gates-$3" tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
             -k "e4m3 or fp8_pool or (sglang_on_the_gpu_grid and fp8)" ;;
    gates-sanitize) SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-50} run_sanitizers "memcheck racecheck synccheck initcheck" \
                      "${5:-cuda_sm120_e4m3}" "$4" "-$3" ;;
    *) echo "e4m3_gates: expected gates or gates-sanitize, found '$1'"; return 2 ;;
  esac
  pack
}

time_e4m3_64() {
  echo "== $(basename "$1" .json)"
  KDT_E4M3_TIMING=1 timeout 90 python3 -m kdtree_lab bench --out "$1" --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 \
    --shape 8,200000,16,8,fp8 --shape 1,32768,16,8,fp8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-80
  pack
}

build_libs() {
  python3 -m kdtree_lab build --json > "$2/build-$1.json"; echo "$1 build rc=$?"
  KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$2/build-timing-$1.json"; echo "$1 timing build rc=$?"
}

roles_checks() {
  step "smoke, patch"
  timeout 60 python3 scripts/kernel_profile.py --configs cuda_sm120_roles --smoke 40 --shapes mem --nsplit 131 \
    --out "$1/smoke-patch.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
  step "parity, patch"
  timeout -s INT 200 python3 -m pytest -q -m gpu tests/test_gpu.py \
    -k "(sm120_kernel_edge_grid_and_500_random or corrupt_kv_indptr) and roles" \
    --junitxml="$1/gpu-parity-patch.xml" -p no:cacheprovider 2>&1 | tail -2
  SANITIZE_TIMEOUT=60 run_sanitizers "racecheck synccheck" cuda_sm120_roles "$1" -patch
  pack
}

timing_ab() {  # WHAT IMPL A B DIR SHAPE...: build-timing-A.json (A) against build-timing-B.json (B), eight rounds
  local what=$1 impl=$2 a=$3 b=$4 dir=$5 shape shapes=()
  shift 5
  for shape in "$@"; do shapes+=(--shape "$shape"); done
  step "interleaved A/B: $what, $a (A) and $b (B), timing libraries"
  timeout 170 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$dir/build-timing-$a.json" \
    --lib-b "$dir/build-timing-$b.json" --impl "$impl" "${shapes[@]}" --rounds 8 --out "$dir/ab-interleave-$a-$b.json" \
    2>&1 | grep -E "^cuda|rror" | cut -c1-200
  pack
}

e4m3_ab() {  # A B DIR: the 64-row e4m3 form at the fp8 headline, B = 8, 1 x 32k and 1 x 4k
  timing_ab "the 64-row e4m3 form" cuda_sm120_e4m3 "$1" "$2" "$3" 1,200000,16,8,fp8 8,200000,16,8,fp8 1,32768,16,8,fp8 \
    1,4096,16,8,fp8
}

e4m3_32_ab() {  # A B DIR: the 32-row e4m3 form at issue 52's four ratio shapes
  timing_ab "the 32-row e4m3 form" cuda_sm120_e4m3_32 "$1" "$2" "$3" 1,200000,4,8,fp8 8,200000,4,8,fp8 \
    1,32768,4,8,fp8 8,32768,4,8,fp8
}

roles_ab() {
  step "interleaved A/B: the bf16 role split, $1 (A) and the patch (B)"
  timeout 200 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$2/build-$1.json" --lib-b "$2/build-patch.json" \
    --impl cuda_sm120_roles --shape 1,200000,16,8 --shape 8,200000,16,8 --shape 1,32768,64,16 --shape 1,4096,16,8 \
    --shape 8,32768,4,16 --rounds 8 --out "$2/ab-interleave-$1-patch.json" 2>&1 | tail -6
  pack
}

roles_patch() {
  git apply "$1" || return 1
  build_libs patch "$2"
  roles_checks "$2"
  git apply -R "$1" || return 1
  roles_ab main "$2"
}

time_short_calls() {
  step "timing $1"
  KDT_E4M3_TIMING=1 timeout 100 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 \
    --drafts 4,16 --lengths 128,4096 --nsplit 8 --repeat 10 --out "$2/fixed-fp8-$1.json" 2>&1 | grep -E "^auto" \
    | cut -c1-120
  [ "${3:-}" = fp8 ] || KDT_E4M3_TIMING=1 timeout 80 python3 scripts/fixed_cost.py --impls cuda_sm120,cuda_sm120_roles \
    --drafts 4,16 --lengths 128,4096 --nsplit 8 --repeat 10 --out "$2/fixed-bf16-$1.json" 2>&1 | grep -E "^auto" \
    | cut -c1-120
  KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$2/bench-fp8-$1.json" --impl cuda_sm120_e4m3 \
    --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  [ "${3:-}" = fp8 ] || KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$2/bench-bf16-$1.json" \
    --impl cuda_sm120_roles --shape 1,200000,16,8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  pack
}

digest() {  # TAG IMPL DIR [CASES] [KV]: the outputs' digest of the library built now (checks.output_identity), fp8
  timeout 150 python3 -m kdtree_lab.checks.output_identity --impl "$2" --kv "${5:-fp8}" --cases "${4:-40}" \
    --out "$3/digest-$1-$2.json" 2>&1 | tail -1
}

ab_patch() {
  local patch=$1 dir=$2 cases=$3 only=$4 tag ik
  shift 4
  [ "$only" = fp8 ] || only=
  for tag in main patch; do
    if [ $tag = patch ]; then git apply "$patch" || return 1; fi
    step "libraries and digests, $tag"; build_libs $tag "$dir"
    for ik in "$@"; do digest $tag "${ik%:*}" "$dir" "$cases" "${ik#*:}"; done
  done
  for ik in "$@"; do
    if ! python3 -m kdtree_lab.checks.output_identity --compare "$dir/digest-main-${ik%:*}.json" \
        "$dir/digest-patch-${ik%:*}.json" > "$dir/compare-${ik%:*}.txt" 2>&1; then
      tail -1 "$dir/compare-${ik%:*}.txt"; echo "outputs differ (or a digest is missing): no timing"
      pack; kernels_restore; return 1
    fi
    tail -1 "$dir/compare-${ik%:*}.txt"
  done
  pack
  kernels_restore; time_short_calls main-1 "$dir" $only
  git apply "$patch" || return 1; time_short_calls patch-1 "$dir" $only
  kernels_restore; time_short_calls main-2 "$dir" $only
}

phase_clocks_of() {
  local tag=$1 dir=$2 pattern=$3
  step "phase clocks, $tag"
  KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$dir/build-phase-$tag.json"
  echo "phase build rc=$?"
  KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 timeout 120 python3 -m kdtree_lab.checks.phase_clocks --impl cuda_sm120_e4m3 \
    --shape 1,128,16,8 --shape 1,4096,16,8 --out "$dir/phase-e4m3-64-$tag.json" 2>&1 | grep -E "$pattern" \
    | cut -c1-240
  pack
}

phase_ab() {
  local patch=$1 dir=$2 pattern=$3
  phase_clocks_of main "$dir" "$pattern"
  git apply "$patch" || return 1
  phase_clocks_of patch "$dir" "$pattern"
  kernels_restore
}

run_gates() {
  case "$1" in
    gates) gate_tests "$3/gates-$2" tests/test_gpu.py tests/test_gpu_graphs.py -k "not triton" ;;
    # gates in two calls where one does not hold it (2026-12-06: 509 s of its 520 on one H100, 232 s on another)
    gates-parity) gate_tests "$3/gates-parity-$2" tests/test_gpu.py -k "not triton" ;;
    gates-graphs) gate_tests "$3/gates-graphs-$2" tests/test_gpu_graphs.py -k "not triton" ;;
    gates2) gate_tests "$3/gates2-$2" tests/test_gpu_sglang_hook.py tests/test_gpu_wgmma.py ;;
    gates3) SANITIZE_TIMEOUT=120 run_sanitizers "memcheck racecheck synccheck initcheck" all "$3" "-$2" ;;
    *) echo "run_gates: expected gates, gates-parity, gates-graphs, gates2 or gates3, found '$1'"; return 2 ;;
  esac
  pack
}
