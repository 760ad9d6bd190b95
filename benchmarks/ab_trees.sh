#!/usr/bin/env bash
# Side-by-side timing of fp8moe source trees in one device call: the same forced launch configs
# (benchmarks/tune_configs.py --replace) timed under each tree's fp8moe in turn, on one GPU, so that a kernel change
# is measured against the code it replaces in the same run (each tree's run checks its outputs against fp8ref).
#
#   mkdir -p ab/base && git archive <commit> fp8moe | tar -x -C ab/base      # a tree: a folder holding fp8moe/
#   echo /ab/ >> .git/info/exclude                                           # ignored, and named in the call's carry
#   TREES="base=ab/base new=" bash benchmarks/ab_trees.sh                    # new= : the checkout's own fp8moe
#
# Knobs: TREES (name=folder pairs, run in that order), AB_CANDIDATES (tune_configs --candidates arguments, one per
# list, space-separated; AB_CANDIDATES_<name> instead for the tree of that name), AB_ARGS (more tune_configs
# arguments; default --only per_group), AB_TIMEOUT (seconds per tree), AB_TESTS (test paths run on the checkout's
# own fp8moe after the timings; empty: none), AB_TEST_TIMEOUT.
# Logs land in $OUT: <name>.md (the table), <name>.log, env.txt (which fp8moe each tree imported), pytest.log.
source "$(dirname "$0")/device_setup.sh"

default_candidates=${AB_CANDIDATES:-"per_group_scales=4x1024/w8,32x128/w8,64x64/w4,64x128/w4,128x32/w4 per_group_colwise_scales_dual=64x64/w4,128x32/w4"}
for pair in ${TREES:?name=folder pairs}; do
  name=${pair%%=*}
  tree=${pair#*=}
  own="AB_CANDIDATES_$name"
  args=()
  for c in ${!own:-$default_candidates}; do args+=(--candidates "$c"); done
  # A script's own folder comes first on sys.path, then PYTHONPATH: the tree's fp8moe shadows the installed one.
  (cd benchmarks && PYTHONPATH=${tree:+../$tree} python3 -c "import fp8moe; print('$name', fp8moe.__file__)") \
    >>"$OUT/env.txt" 2>&1
  PYTHONPATH=$tree timeout "${AB_TIMEOUT:-140}" python3 benchmarks/tune_configs.py ${AB_ARGS:---only per_group} \
    --replace "${args[@]}" --out "$OUT/$name.md" >"$OUT/$name.log" 2>&1
  echo "$name exit $? after ${SECONDS}s" >>"$OUT/env.txt"
done

if [ -n "${AB_TESTS:-}" ]; then
  timeout "${AB_TEST_TIMEOUT:-110}" python3 -m pytest -n 12 -q -p no:cacheprovider --device cuda $AB_TESTS \
    >"$OUT/pytest.log" 2>&1
  echo "pytest exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
cat "$OUT/env.txt"
tail -3 "$OUT/pytest.log" 2>/dev/null
