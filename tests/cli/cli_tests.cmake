# The mmlab command's tests (the top-level CMakeLists.txt includes this
# file where its tests are defined): help, the usage errors of
# usage_errors.txt, the reports and traces its subcommands write, and
# mmlab stress. Paths are the source and build trees'; every test runs in
# the build directory.

# Smoke test of the CLI: help and a bad option.
add_test(NAME cli.help COMMAND mmlab --help)
add_test(NAME cli.bad_option COMMAND mmlab --no-such-option)
set_tests_properties(cli.bad_option PROPERTIES WILL_FAIL TRUE)

# Bad input is an error with exit 2 that names what is wrong, never a pass
# (PASS_REGULAR_EXPRESSION checks the message; the sh wrapper, the status).
function(mmlab_usage_error name regex)
  add_test(NAME cli.${name} COMMAND sh -c "$<TARGET_FILE:mmlab> \"$@\" 2>&1; test $? -eq 2 && echo exit-2" sh ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}.*exit-2")
endfunction()
# An empty argument through sh: add_test drops "" from its arguments.
function(mmlab_usage_error_sh name regex command)
  add_test(NAME cli.${name} COMMAND sh -c "$<TARGET_FILE:mmlab> ${command} 2>&1; test $? -eq 2 && echo exit-2")
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}.*exit-2")
endfunction()
# A size the host cannot hold is refused before anything runs; where the
# host has `gib` GiB available it would not be: skipped (exit 4).
function(mmlab_usage_error_beyond_host name gib regex)
  add_test(NAME cli.${name} COMMAND sh -c
    "a=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo); [ \"$a\" -lt $((${gib} << 20)) ] || exit 4; $<TARGET_FILE:mmlab> \"$@\" 2>&1; test $? -eq 2 && echo exit-2"
    sh ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}.*exit-2" SKIP_RETURN_CODE 4)
endfunction()

# One test per case of usage_errors.txt (its head says the format). A line
# that does not parse stops the configuration, so that no case is lost.
set(_table ${CMAKE_CURRENT_LIST_DIR}/usage_errors.txt)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_table})
file(STRINGS ${_table} _lines)
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^#" OR _line MATCHES "^[ \t]*$")
    continue()
  endif()
  set(_fields)
  set(_rest "${_line}")
  string(FIND "${_rest}" " | " _at)
  while(_at GREATER_EQUAL 0)
    string(SUBSTRING "${_rest}" 0 ${_at} _field)
    list(APPEND _fields "${_field}")
    math(EXPR _at "${_at} + 3")
    string(SUBSTRING "${_rest}" ${_at} -1 _rest)
    string(FIND "${_rest}" " | " _at)
  endwhile()
  list(APPEND _fields "${_rest}")
  list(LENGTH _fields _n)
  if(_n LESS 3 OR _n GREATER 4)
    message(FATAL_ERROR "${_table}: expected NAME | REGEX | ARGS [| host-below NG], not: ${_line}")
  endif()
  list(GET _fields 0 _name)
  list(GET _fields 1 _regex)
  list(GET _fields 2 _args)
  if(NOT _name MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "${_table}: expected a NAME of a-z, 0-9 and _, not '${_name}' in: ${_line}")
  endif()
  string(REPLACE "@SCENARIOS@" "${CMAKE_SOURCE_DIR}/tests/scenarios" _args "${_args}")
  string(REPLACE "@BAD@" "${CMAKE_CURRENT_LIST_DIR}/bad-input" _args "${_args}")
  string(REPLACE "@SRC@" "${CMAKE_SOURCE_DIR}" _args "${_args}")
  string(REPLACE "@BIN@" "${CMAKE_BINARY_DIR}" _args "${_args}")
  if(_n EQUAL 4)
    list(GET _fields 3 _when)
    if(NOT _when MATCHES "^host-below ([0-9]+)G$")
      message(FATAL_ERROR "${_table}: expected 'host-below NG' as the fourth field, not '${_when}' in: ${_line}")
    endif()
    separate_arguments(_argv UNIX_COMMAND "${_args}")
    mmlab_usage_error_beyond_host(${_name} ${CMAKE_MATCH_1} "${_regex}" ${_argv})
  elseif(_args MATCHES "''")
    mmlab_usage_error_sh(${_name} "${_regex}" "${_args}")
  else()
    separate_arguments(_argv UNIX_COMMAND "${_args}")
    mmlab_usage_error(${_name} "${_regex}" ${_argv})
  endif()
endforeach()

set(_bad ${CMAKE_CURRENT_LIST_DIR}/bad-input)
# A GUP count far beyond its 4K region returns the region's page, its pages
# array sized by the mapped run: under a data limit below the array the
# count asks for (2 GiB) beside the 4G System, it still runs. Not under a
# sanitizer, whose shadow memory mapping the data limit refuses.
if(NOT MMLAB_SANITIZE)
  add_test(NAME cli.run_gup_count_beyond_region COMMAND sh -c
    "ulimit -d 5242880 && $<TARGET_FILE:mmlab> run -j 1 ${_bad}/gup_count_beyond_region.mms")
  set_tests_properties(cli.run_gup_count_beyond_region PROPERTIES PASS_REGULAR_EXPRESSION "ok 1 gup-count-beyond-region")
endif()
# A profile that is not JSON is refused before any run.
add_test(NAME cli.cow_bench_profile_malformed COMMAND sh -c
  "printf 'not json\\n' > ${CMAKE_BINARY_DIR}/bad-profile.json; $<TARGET_FILE:mmlab> cow-bench --quick --profile ${CMAKE_BINARY_DIR}/bad-profile.json 2>&1; test $? -eq 2 && echo exit-2")
set_tests_properties(cli.cow_bench_profile_malformed PROPERTIES PASS_REGULAR_EXPRESSION "--profile [^:]*bad-profile.json: .*parse error.*exit-2")
# With a geometry every column's TLB misses during the phase: every column
# misses; under arm64 a 16K folio never folds a contpte block and a 64K one
# does; the sampler saw the children's PSS rise above the parent's region.
add_test(NAME cli.cow_bench_geometry COMMAND sh -c
  "$<TARGET_FILE:mmlab> cow-bench --quick --size 4M --workload usemem,cow-rand --column base,fixed-16K,fixed-64K --geometry arm64 --out ${CMAKE_BINARY_DIR}/cow-bench-geometry > /dev/null && python3 -c \"import json, sys; j = json.load(open(sys.argv[1])); w = j['workloads']; t = lambda wl, c: w[wl][c]['metrics']['tlb']; assert j['params']['geometry'] == 'arm64'; assert all(t(wl, c)['misses'] > 0 and t(wl, c)['lookups'] > 0 for wl in w for c in w[wl]), w; assert t('usemem', 'fixed-16K')['contpte_folds'] == 0 < t('usemem', 'fixed-64K')['contpte_folds'], w; m = w['usemem']['base']['metrics']; assert m['sampled'] and m['pss_peak'] == 3 * 4 << 20 and m['pss_mib_s'] > 0, m\" ${CMAKE_BINARY_DIR}/cow-bench-geometry/report.json")
# A quick run of two workloads and three columns: the report's figures are
# the model's mechanisms (a base CoW copies 4K per fault, fixed-64K 64K; a
# sparse writer under fixed-64K copies bytes it never writes), each run ends
# with the checker.
add_test(NAME cli.cow_bench_quick COMMAND sh -c
  "$<TARGET_FILE:mmlab> cow-bench --quick --workload usemem,cow-rand --column base,fixed-64K,base-dontfork --out ${CMAKE_BINARY_DIR}/cow-bench-quick > /dev/null && python3 -c \"import json, sys; w = json.load(open(sys.argv[1]))['workloads']; u = w['usemem']; r = w['cow-rand']; assert u['base']['bytes_copied'] == u['base']['wp_copy'] * 4096 > 0, u['base']; assert u['fixed-64K']['bytes_copied'] == u['fixed-64K']['wp_copy'] * 65536 > 0, u['fixed-64K']; assert r['base']['copied_never_written'] == 0 < r['fixed-64K']['copied_never_written'], r; assert 'not_run' in u['base-dontfork']; assert u['base']['zero_subpages_copied'] * 4096 == u['base']['bytes_copied'] and u['fixed-64K']['zero_subpages_copied'] * 4096 == u['fixed-64K']['bytes_copied'], u; assert r['base']['zero_subpages_copied'] == r['fixed-64K']['zero_subpages_copied'] == 0 == r['fixed-64K']['anon_fault_fallback'] < r['fixed-64K']['anon_fault_alloc'], r\" ${CMAKE_BINARY_DIR}/cow-bench-quick/report.json")
# base-khugepaged: khugepaged's thread beside the writers, paced by --khugepaged-speedup.
add_test(NAME cli.cow_bench_khugepaged COMMAND sh -c
  "$<TARGET_FILE:mmlab> cow-bench --quick --size 4M --workload usemem,read-then-write,snapshot --column base,base-khugepaged --out ${CMAKE_BINARY_DIR}/cow-bench-khugepaged > /dev/null && python3 ${CMAKE_SOURCE_DIR}/tests/cli/check_cow_bench_khugepaged.py ${CMAKE_BINARY_DIR}/cow-bench-khugepaged/report.json ${CMAKE_BINARY_DIR}/cow-bench-khugepaged/report.md")
# snapshot, fragmented and fork-exec: the open-loop stream ran whole and its
# latency from schedule is never below its service time; a base CoW copies
# only the page being written, so nothing it copied was left untouched at the
# sharer's exit, and under fixed-64K every page copied before the exit was
# written by then or counted untouched; the filler's holes make the region's
# 64K faults fall back (the unfragmented cow-rand above falls back never).
add_test(NAME cli.cow_bench_snapshot_fragmented COMMAND sh -c
  "$<TARGET_FILE:mmlab> cow-bench --quick --workload snapshot,fragmented,fork-exec --column base,fixed-64K --out ${CMAKE_BINARY_DIR}/cow-bench-snapfrag > /dev/null && python3 ${CMAKE_SOURCE_DIR}/tests/cli/check_cow_bench_workloads.py ${CMAKE_BINARY_DIR}/cow-bench-snapfrag/report.json")
# `mmlab variants` lists every tune key and value with a meaning.
add_test(NAME cli.variants_json COMMAND sh -c
  "$<TARGET_FILE:mmlab> variants --json | python3 -c \"import json, sys; k = {x['key']: x for x in json.load(sys.stdin)}; w = [v['name'] for v in k['gup.walk']['values']]; assert w == ['v6.5', 'legacy', 'walk', 'batch', 'batch-ro'] and k['gup.walk']['default'] == 'legacy' and all(x['meaning'] and all(v['meaning'] or v['name'].isdigit() for v in x['values']) for x in k.values()), k\"")
# `mmlab counters` lists what the model counts, each with a meaning.
add_test(NAME cli.counters_json COMMAND sh -c
  "$<TARGET_FILE:mmlab> counters --json | python3 -c \"import json, sys; c = json.load(sys.stdin); n = {x['name'] for x in c}; assert {'gup.descents', 'thp_fault_alloc', 'cow.copy.order<N>'} <= n and all(x['meaning'] for x in c), c\"")
# The language reference's `tune` table lists every key and value the build has.
add_test(NAME docs.tune_table COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/cli/check_tune_table.py $<TARGET_FILE:mmlab>
         ${CMAKE_SOURCE_DIR}/docs/scenario-language.md)
add_test(NAME cli.bad_fake_probe COMMAND mmlab run --backend host --fake-probe no_such_probe ${CMAKE_SOURCE_DIR}/tests/scenarios/basics.mms)
set_tests_properties(cli.bad_fake_probe PROPERTIES WILL_FAIL TRUE)

# A trace that cannot be written whole fails the run, even when the file
# opened (/dev/full: the writes fail at the flush).
add_test(NAME cli.trace_full_device COMMAND sh -c
  "$<TARGET_FILE:mmlab> run --trace /dev/full ${CMAKE_SOURCE_DIR}/tests/scenarios/basics.mms --filter anon-read-maps-zero-page > /dev/null; echo exit-$?")
set_tests_properties(cli.trace_full_device PROPERTIES PASS_REGULAR_EXPRESSION "mmlab run: --trace /dev/full: cannot write the trace file.*exit-1")
# A fifo named as the scenario is refused at once, never waited on (timeout
# 20 s: a read that blocks fails the test).
add_test(NAME cli.run_fifo COMMAND sh -c
  "f=${CMAKE_BINARY_DIR}/scenario.fifo; rm -f $f; mkfifo $f && $<TARGET_FILE:mmlab> run $f 2>&1; echo exit-$?; rm -f $f")
set_tests_properties(cli.run_fifo PROPERTIES PASS_REGULAR_EXPRESSION "scenario.fifo: not a regular file \\(a fifo\\).*exit-2" TIMEOUT 20)

# mmlab stress (docs/STRESS.md): a bounded run in every build (under TSan
# too, which then sees the worker threads, khugepaged and the checker race),
# the planted corruption the data tracker must report (its usage errors are
# in usage_errors.txt).
if(MMLAB_SANITIZE OR CMAKE_BUILD_TYPE STREQUAL "Debug")
  set(MMLAB_STRESS_OPS 1000)
else()
  set(MMLAB_STRESS_OPS 6000)
endif()
# With the default swap devices and ZONE_MOVABLE: long-term pins migrate.
add_test(NAME stress.bounded COMMAND mmlab stress --threads 2 --ops ${MMLAB_STRESS_OPS} --seed 1 --check-every 250)
set_tests_properties(stress.bounded PROPERTIES PASS_REGULAR_EXPRESSION "no violation in ${MMLAB_STRESS_OPS} operations" TIMEOUT 300)
# With fault injection: injected failures are expected outcomes, and the
# run must still end with no violation, no mismatch and nothing leaked.
add_test(NAME stress.inject COMMAND mmlab stress --threads 2 --ops ${MMLAB_STRESS_OPS} --seed 1 --check-every 250 --inject 1%)
set_tests_properties(stress.inject PROPERTIES PASS_REGULAR_EXPRESSION "no violation in ${MMLAB_STRESS_OPS} operations" TIMEOUT 300)
add_test(NAME stress.catches_planted_corruption COMMAND sh -c
  "$<TARGET_FILE:mmlab> stress --threads 1 --ops 500 --seed 1 --swap none --movable 0 --plant-corruption; test $? -eq 1 && echo exit-1")
set_tests_properties(stress.catches_planted_corruption PROPERTIES
  PASS_REGULAR_EXPRESSION "DATA MISMATCH: .*data mismatches: [1-9].*exit-1" TIMEOUT 300)
# A swap-in failure that sticks to a page between its MADV_PAGEOUT and the
# tracker's mark (forced each time): the SIGBUS must be an expected outcome,
# and the regex asks that some were met, so the test cannot pass idle. zram
# frees the folio at swap-out, so the next touch reads the device.
add_test(NAME stress.swapin_failure_racing_the_pageout_mark COMMAND mmlab stress --threads 1 --ops 2000 --seed 1
         --types anon-16K --mix pageout=40 --swap zram --race-swapin-failure)
set_tests_properties(stress.swapin_failure_racing_the_pageout_mark PROPERTIES
  PASS_REGULAR_EXPRESSION "read: injected swap-in SIGBUS +[1-9].*no violation in 2000 operations" TIMEOUT 300)
# A hang anywhere in the run, the teardown included, is reported with what
# the run has so far (here a teardown planted to block for good).
add_test(NAME stress.hang_in_teardown_prints_what_it_has COMMAND sh -c
  "$<TARGET_FILE:mmlab> stress --threads 2 --ops 400 --seed 1 --types anon-64K --plant-teardown-hang --hang-seconds 2; echo exit-$?")
set_tests_properties(stress.hang_in_teardown_prints_what_it_has PROPERTIES
  PASS_REGULAR_EXPRESSION "operations \\(2 threads.*memory types run: anon-64K\nHANG: the teardown made no progress for 2 s.*the report is partial.*FAILED\nexit-1" TIMEOUT 120)
# Every CoW policy, under the sanitizers too (the rfc policy's lost entries
# freed an anon_vma under a mapped folio: a use-after-free, then a hang in
# the teardown's shrinkers). rfc's findings are violations of the posting,
# recorded; the model's own memory stays sound and nothing leaks. The
# others must run clean.
add_test(NAME stress.cow_policy_rfc_ends_sound COMMAND sh -c
  "$<TARGET_FILE:mmlab> stress --threads 2 --ops ${MMLAB_STRESS_OPS} --seed 23 --ram 8G --variants cow.policy=rfc --hang-seconds 60; echo exit-$?")
set_tests_properties(stress.cow_policy_rfc_ends_sound PROPERTIES
  PASS_REGULAR_EXPRESSION "VIOLATION: model warning: rfc: .*frames leaked: 0\n.*FAILED\nexit-1"
  FAIL_REGULAR_EXPRESSION "HANG:|ERROR: AddressSanitizer|runtime error" TIMEOUT 300)
add_test(NAME stress.cow_policies COMMAND mmlab stress --threads 2 --ops ${MMLAB_STRESS_OPS} --seed 1 --check-every 250
         --variants cow.policy=base,fixed --variants cow.reuse=all --variants cow.max_order=all --mix variant=10)
set_tests_properties(stress.cow_policies PROPERTIES PASS_REGULAR_EXPRESSION "no violation in ${MMLAB_STRESS_OPS} operations" TIMEOUT 300)
# The report names only the memory types that ran: a 1G hugetlb pool that
# 4G of RAM cannot fill is "not run", and not among the types run.
add_test(NAME stress.types_run_are_the_ones_that_ran COMMAND mmlab stress --threads 2 --ops 200 --seed 1
         --types hugetlb-2M,hugetlb-1G --ram 4G --swap none --movable 0)
set_tests_properties(stress.types_run_are_the_ones_that_ran PROPERTIES
  PASS_REGULAR_EXPRESSION "not run: hugetlb-1G \\(the hugetlb pool got [0-9]+ of 6 pages.*memory types run: hugetlb-2M\n" TIMEOUT 300)
# KEY=all takes every registered value of the key (the documented form).
add_test(NAME stress.variants_key_all COMMAND mmlab stress --threads 2 --ops 600 --seed 3 --types anon-64K
         --variants cow.max_order=all --mix variant=20)
set_tests_properties(stress.variants_key_all PROPERTIES PASS_REGULAR_EXPRESSION "no violation in 600 operations" TIMEOUT 300)
# Under the deterministic scheduler (docs/STRESS.md "Under the scheduler"):
# the seed alone gives the same run in two processes (the run hash is over
# every round's step hash), another seed another run. These run in the
# release build only: the sanitizer builds run the same runs and replays in
# one process (StressSchedTest.*), and what a second process adds is
# another heap, the allocator's, not another path through the model.
if(NOT MMLAB_SANITIZE)
set(_sched_args "--threads 3 --ops 600 --check-every 100 --ram 512M --types anon-64K,thp,shmem --sched pct")
add_test(NAME stress.sched_same_seed_same_run COMMAND sh -c
  "a=$($<TARGET_FILE:mmlab> stress ${_sched_args} --seed 7 | grep -o 'run hash [0-9a-f]*'); b=$($<TARGET_FILE:mmlab> stress ${_sched_args} --seed 7 | grep -o 'run hash [0-9a-f]*'); c=$($<TARGET_FILE:mmlab> stress ${_sched_args} --seed 8 | grep -o 'run hash [0-9a-f]*'); test -n \"$a\" && test \"$a\" = \"$b\" && test \"$a\" != \"$c\" && echo same-$a")
set_tests_properties(stress.sched_same_seed_same_run PROPERTIES PASS_REGULAR_EXPRESSION "same-run hash [0-9a-f]+" TIMEOUT 300)
# A run's schedule line, saved, replays it in another process to the same
# report (a planted corruption: both fail) and run hash.
add_test(NAME stress.sched_schedule_replays_a_planted_corruption COMMAND sh -c
  "f=${CMAKE_BINARY_DIR}/stress-sched-planted.line; strip() { grep -v -e 'ops/s' -e '^schedule' ; }; $<TARGET_FILE:mmlab> stress ${_sched_args} --seed 3 --plant-corruption --schedule-out $f > $f.a; test $? -eq 1 || exit 9; $<TARGET_FILE:mmlab> stress --schedule @$f > $f.b; test $? -eq 1 || exit 8; grep -q 'DATA MISMATCH' $f.a && strip < $f.a > $f.a2 && strip < $f.b > $f.b2 && diff $f.a2 $f.b2 && grep -o 'run hash [0-9a-f]*' $f.a > $f.h && grep -q \"$(cat $f.h)\" $f.b && echo replayed-same")
set_tests_properties(stress.sched_schedule_replays_a_planted_corruption PROPERTIES PASS_REGULAR_EXPRESSION "replayed-same" TIMEOUT 300)
# The same with shared anonymous memory and both 2 MiB hugetlb types: the
# replaying process parses other options first, so its heap lies otherwise,
# and a walk of a file's i_mmap in host-address order took other steps in
# round 1 (docs/NOTES.md "Stress under the scheduler"; with this seed the
# replay diverged in round 0 at step 263461). Every round's hash must replay.
set(_sched_all_args "--threads 3 --ops 900 --check-every 100 --ram 512M --types anon-64K,thp,anon-shared,shmem,hugetlb-2M,hugetlb-2M-shared --sched pct")
add_test(NAME stress.sched_schedule_replays_anon_shared_and_hugetlb COMMAND sh -c
  "f=${CMAKE_BINARY_DIR}/stress-sched-shared.line; strip() { grep -v -e 'ops/s' -e '^schedule' ; }; $<TARGET_FILE:mmlab> stress ${_sched_all_args} --seed 4 --plant-corruption --schedule-out $f > $f.a; test $? -eq 1 || exit 9; grep -q 'memory types run: .*anon-shared.*hugetlb-2M,hugetlb-2M-shared' $f.a || exit 7; $<TARGET_FILE:mmlab> stress --schedule @$f > $f.b; test $? -eq 1 || exit 8; ! grep -q 'replay diverged\\|ended diverged' $f.b && strip < $f.a > $f.a2 && strip < $f.b > $f.b2 && diff $f.a2 $f.b2 && grep -o 'run hash [0-9a-f]*' $f.a > $f.h && grep -q \"$(cat $f.h)\" $f.b && echo replayed-same")
set_tests_properties(stress.sched_schedule_replays_anon_shared_and_hugetlb PROPERTIES PASS_REGULAR_EXPRESSION "replayed-same" TIMEOUT 300)
# Three seeds, every default memory type, two processes each: the second
# saves its line (it parses one more option) and runs without glibc's
# tcache, so that its heap lies otherwise (before the file rmap's i_mmap was
# ordered by creation id, seed 4's two runs took other steps). The reports
# are byte for byte the same but for their wall-clock figures and the
# saved line.
add_test(NAME stress.sched_three_seeds_same_report COMMAND sh -c
  "d=${CMAKE_BINARY_DIR}/stress-sched-seeds; mkdir -p $d; wall() { grep -v '^schedule' | sed -E -e 's/[0-9.]+ runs\\/s//' -e 's/[0-9.]+ steps\\/s//' -e 's/[0-9.]+ s, [0-9.]+ ops\\/s//' ; }; a='--threads 3 --ops 900 --check-every 100 --ram 512M --sched pct'; for seed in 4 5 6; do $<TARGET_FILE:mmlab> stress $a --seed $seed | wall > $d/$seed.1 || exit 1; GLIBC_TUNABLES=glibc.malloc.tcache_count=0 $<TARGET_FILE:mmlab> stress $a --seed $seed --schedule-out $d/$seed.line | wall > $d/$seed.2 || exit 1; grep -q 'no violation in 900 operations' $d/$seed.1 || exit 2; cmp $d/$seed.1 $d/$seed.2 || exit 3; done; echo three-seeds-same")
set_tests_properties(stress.sched_three_seeds_same_report PROPERTIES PASS_REGULAR_EXPRESSION "three-seeds-same" TIMEOUT 600)
endif()
# Smoke tests of the main job: bench --quick and gup-test start and write
# well-formed JSON (release build only: instrumented builds refuse timings).
if(CMAKE_BUILD_TYPE STREQUAL "Release")
  add_test(NAME cli.bench_quick_json COMMAND sh -c
    "$<TARGET_FILE:mmlab> bench --quick --suite fault --suite gup --out ${CMAKE_BINARY_DIR}/smoke && python3 -m json.tool ${CMAKE_BINARY_DIR}/smoke/report.json > /dev/null")
  # Plots are drawn without a shell: a quote and a space in --out are just
  # characters of the path (exit 4, a skip, without gnuplot).
  # The cow suite's tables are in the bench report: a base CoW copies 4K, fixed-64K 64K.
  add_test(NAME cli.bench_cow_suite_json COMMAND sh -c
    "$<TARGET_FILE:mmlab> bench --quick --suite cow --out ${CMAKE_BINARY_DIR}/smoke-cow > /dev/null && python3 -c \"import json, sys; c = json.load(open(sys.argv[1]))['cow']; u = c['usemem']; assert set(c) == {'usemem', 'cow-rand'} and set(u) == {'base', 'rfc', 'fixed-64K', 'fixed-512K', 'base-khugepaged'}, c; assert u['base']['bytes_copied'] == u['base']['wp_copy'] * 4096 > 0 and u['fixed-64K']['bytes_copied'] == u['fixed-64K']['wp_copy'] * 65536, u; assert c['cow-rand']['base']['copied_never_written'] == 0 < c['cow-rand']['fixed-512K']['copied_never_written'], c\" ${CMAKE_BINARY_DIR}/smoke-cow/report.json")
  # Every ratio row carries its interval in report.json, the ratio inside it.
  add_test(NAME cli.bench_ratio_intervals COMMAND sh -c
    "$<TARGET_FILE:mmlab> bench --quick --size-mb 8 --repeats 5 --suite fault --suite fork --suite data --suite cow --out ${CMAKE_BINARY_DIR}/smoke-ci > /dev/null && python3 ${CMAKE_SOURCE_DIR}/tests/cli/check_bench_intervals.py ${CMAKE_BINARY_DIR}/smoke-ci/report.json")
  add_test(NAME cli.bench_plots_out_quote_space COMMAND sh -c
    "command -v gnuplot > /dev/null || exit 4; rm -rf \"$1\"; $<TARGET_FILE:mmlab> bench --quick --suite fault --suite sweep --out \"$1\" > /dev/null && test -s \"$1/fault.png\" && test -s \"$1/sweep.png\" && test -s \"$1/sweep_ns_per_page.png\""
    sh "${CMAKE_BINARY_DIR}/bench out's plots")
  set_tests_properties(cli.bench_plots_out_quote_space PROPERTIES SKIP_RETURN_CODE 4)
  add_test(NAME cli.gup_test_json COMMAND sh -c
    "$<TARGET_FILE:mmlab> gup-test -L -m 8 -n -1 -r 2 --walk legacy,batch --json ${CMAKE_BINARY_DIR}/gup.json && python3 -m json.tool ${CMAKE_BINARY_DIR}/gup.json > /dev/null")
  # -j prints what -j 1 prints (tests finish out of order, TAP stays in file order).
  add_test(NAME cli.run_parallel_output COMMAND sh -c
    "$<TARGET_FILE:mmlab> run -j 1 ${CMAKE_SOURCE_DIR}/tests/scenarios/basics.mms ${CMAKE_SOURCE_DIR}/tests/scenarios/gup_variants.mms > ${CMAKE_BINARY_DIR}/j1.tap; $<TARGET_FILE:mmlab> run -j 3 ${CMAKE_SOURCE_DIR}/tests/scenarios/basics.mms ${CMAKE_SOURCE_DIR}/tests/scenarios/gup_variants.mms > ${CMAKE_BINARY_DIR}/j3.tap; grep -q '^# time: ' ${CMAKE_BINARY_DIR}/j1.tap && grep -v '^# time: ' ${CMAKE_BINARY_DIR}/j1.tap > ${CMAKE_BINARY_DIR}/j1.notime && grep -v '^# time: ' ${CMAKE_BINARY_DIR}/j3.tap > ${CMAKE_BINARY_DIR}/j3.notime && cmp ${CMAKE_BINARY_DIR}/j1.notime ${CMAKE_BINARY_DIR}/j3.notime")
  # --states: the same end states whatever -j, and a functional change (a
  # CoW policy that copies large folios) changes them; a path that cannot be
  # written is refused before any test runs.
  add_test(NAME cli.run_states COMMAND sh -c
    "set -e; m=$<TARGET_FILE:mmlab>; f=${CMAKE_SOURCE_DIR}/tests/scenarios/cow_mthp.mms; d=${CMAKE_BINARY_DIR}; $m run -j 1 --states $d/states1.txt $f > /dev/null; $m run -j 2 --states $d/states2.txt $f > /dev/null; cmp $d/states1.txt $d/states2.txt; test $(grep -c '^  ' $d/states1.txt) -gt 100; $m run --variant cow.policy=fixed --states $d/states3.txt $f > /dev/null; sed 's/ cow.policy=fixed//' $d/states3.txt | grep -q . ; ! sed 's/ cow.policy=fixed//' $d/states3.txt | cmp -s - $d/states1.txt; rc=0; $m run --states $d/no-such-dir/s.txt $f > /dev/null 2>&1 || rc=$?; test $rc -eq 2")
  # --trace: Chrome/Perfetto JSON (traceEvents with ph, ts, pid, tid) and
  # ftrace's text lines, with the kernel's tracepoint names and the model's own.
  add_test(NAME cli.trace_json COMMAND sh -c
    "$<TARGET_FILE:mmlab> run --trace ${CMAKE_BINARY_DIR}/trace.json ${CMAKE_SOURCE_DIR}/tests/scenarios/cow.mms --filter 'cow-anon-basic-fork-*' > /dev/null && python3 ${CMAKE_SOURCE_DIR}/tests/trace/check_trace.py json ${CMAKE_BINARY_DIR}/trace.json mm_page_alloc mm_page_free mm_fault mm_fault_anon mm_cow_copy")
  # One trace process per System, named after its test, whatever -j; the
  # khugepaged scans carry their System's pid and its virtual clock.
  add_test(NAME cli.trace_systems COMMAND sh -c
    "$<TARGET_FILE:mmlab> run -j 2 --trace ${CMAKE_BINARY_DIR}/trace-systems.json ${CMAKE_SOURCE_DIR}/tests/scenarios/khugepaged.mms --filter 'khugepaged-khugepaged-*' > /dev/null && python3 -c \"import json, sys; d = json.load(open(sys.argv[1]))['traceEvents']; names = {e['pid']: e['args']['name'] for e in d if e['name'] == 'process_name'}; ev = [e for e in d if e['ph'] == 'i']; k = [e for e in ev if e['name'] == 'mm_khugepaged_scan_pmd']; assert len(names) > 10 and len(set(names.values())) == len(names) and all(n.startswith('khugepaged-khugepaged-') for n in names.values()), names; assert {e['pid'] for e in ev} <= set(names), 'an event outside its System'; assert k and max(int(e['args']['vclock_ns']) for e in k) > 0, 'no virtual clock on the scans'\" ${CMAKE_BINARY_DIR}/trace-systems.json")
  add_test(NAME cli.trace_ftrace COMMAND sh -c
    "$<TARGET_FILE:mmlab> run --trace ${CMAKE_BINARY_DIR}/trace.txt ${CMAKE_SOURCE_DIR}/tests/scenarios/gup_variants.mms > /dev/null && python3 ${CMAKE_SOURCE_DIR}/tests/trace/check_trace.py ftrace ${CMAKE_BINARY_DIR}/trace.txt mm_page_alloc gup_call gup_return")
  # Page cache and swap: a file mapping fills and drops the cache, MADV_PAGEOUT
  # writes to swap, the next read swaps in.
  add_test(NAME cli.trace_pagecache_swap COMMAND sh -c
    "$<TARGET_FILE:mmlab> run --trace ${CMAKE_BINARY_DIR}/trace-swap.txt ${CMAKE_SOURCE_DIR}/tests/scenarios/reclaim.mms --filter 'pageout-*-swap-*' > /dev/null && $<TARGET_FILE:mmlab> run --trace ${CMAKE_BINARY_DIR}/trace-file.txt ${CMAKE_SOURCE_DIR}/tests/scenarios/gup_longterm.mms --filter '*memfd*' > /dev/null && python3 ${CMAKE_SOURCE_DIR}/tests/trace/check_trace.py ftrace ${CMAKE_BINARY_DIR}/trace-swap.txt mm_vmscan_write_folio swap_read_folio && python3 ${CMAKE_SOURCE_DIR}/tests/trace/check_trace.py ftrace ${CMAKE_BINARY_DIR}/trace-file.txt mm_filemap_add_to_page_cache mm_filemap_delete_from_page_cache")
  add_test(NAME cli.trace_tlb_flush COMMAND sh -c
    "$<TARGET_FILE:mmlab> run --trace ${CMAKE_BINARY_DIR}/trace-tlb.txt ${CMAKE_SOURCE_DIR}/tests/scenarios/tlb.mms > /dev/null && python3 ${CMAKE_SOURCE_DIR}/tests/trace/check_trace.py ftrace ${CMAKE_BINARY_DIR}/trace-tlb.txt tlb_flush contpte_fold contpte_unfold")
  # Event selection and the ring: only the selected events, the newest kept,
  # what was dropped said in the file and on stderr.
  add_test(NAME cli.trace_select_ring COMMAND sh -c
    "$<TARGET_FILE:mmlab> run --trace ${CMAKE_BINARY_DIR}/trace-ring.txt --trace-events 'mm_fault*' --trace-buffer 16K ${CMAKE_SOURCE_DIR}/tests/scenarios/cow_mthp.mms > /dev/null && python3 ${CMAKE_SOURCE_DIR}/tests/trace/check_trace.py ftrace ${CMAKE_BINARY_DIR}/trace-ring.txt --only 'mm_fault*' --dropped mm_fault mm_fault_anon")
  set_tests_properties(cli.trace_select_ring PROPERTIES PASS_REGULAR_EXPRESSION
    "the buffer kept the newest [0-9]+ of [0-9]+ events \\([0-9]+ dropped\\).*trace-ring.txt: [0-9]+ events")
  # cow-bench's trace: fault, GUP and CoW slices that nest, and the sampler's
  # RSS/PSS/TLB counter tracks as numbers.
  add_test(NAME cli.trace_slices_counters COMMAND sh -c
    "$<TARGET_FILE:mmlab> cow-bench --quick --workload usemem --column base --out ${CMAKE_BINARY_DIR}/trace-cow-bench --trace ${CMAKE_BINARY_DIR}/trace-cow-bench.json > /dev/null && python3 ${CMAKE_SOURCE_DIR}/tests/trace/check_trace.py json ${CMAKE_BINARY_DIR}/trace-cow-bench.json mm_fault mm_cow_copy rss_bytes pss_bytes tlb_lookups")
  add_test(NAME cli.trace_checker_rejects COMMAND sh -c
    "printf 'not a trace line\\n' > ${CMAKE_BINARY_DIR}/bad-trace.txt && python3 ${CMAKE_SOURCE_DIR}/tests/trace/check_trace.py ftrace ${CMAKE_BINARY_DIR}/bad-trace.txt")
  set_tests_properties(cli.trace_checker_rejects PROPERTIES WILL_FAIL TRUE)
  add_test(NAME cli.trace_unwritable COMMAND mmlab run --trace /nonexistent-dir/t.json ${CMAKE_SOURCE_DIR}/tests/scenarios/basics.mms)
  set_tests_properties(cli.trace_unwritable PROPERTIES WILL_FAIL TRUE)
  add_test(NAME cli.gup_test_refuses_z COMMAND mmlab gup-test -z)
  # gup-test says what the kernel's tool cannot: the errno that stopped a
  # round (invalid flags; a writable long-term pin of an ext4-class file) and
  # the folio sizes obtained (64K mTHPs once 2048kB no longer wins).
  add_test(NAME cli.gup_test_errno COMMAND sh -c
    "$<TARGET_FILE:mmlab> gup-test -m 1 -F 0xffffffff | grep -q 'returned -EINVAL' && $<TARGET_FILE:mmlab> gup-test -m 4 -L -n -1 -S -f ext4:data | grep -q 'returned -EFAULT'")
  add_test(NAME cli.gup_test_folio_sizes COMMAND sh -c
    "$<TARGET_FILE:mmlab> gup-test -m 4 -n -1 -t --sysfs transparent_hugepage/hugepages-64kB/enabled=always --sysfs transparent_hugepage/hugepages-2048kB/enabled=never | grep -qx '# folios obtained: 64kB x 64'")
  set_tests_properties(cli.gup_test_refuses_z PROPERTIES WILL_FAIL TRUE)
  # calibrate measures the host: exit 4 (a skip) where it cannot (not root,
  # /sys/kernel/mm read-only). It switches machine-wide THP sizes, so it runs
  # alone, at the smallest sizes (16 MiB regions, one run, two per term:
  # the test checks the profile's form, not its figures). The bench test
  # then uses its profile, skipping if there is none.
  add_test(NAME cli.calibrate_quick_json COMMAND sh -c
    "rm -f ${CMAKE_BINARY_DIR}/cal.json; $<TARGET_FILE:mmlab> calibrate --quick --size-mb 16 --runs 1 --term-runs 2 --name smoke --out ${CMAKE_BINARY_DIR}/cal.json || exit $?; python3 -m json.tool ${CMAKE_BINARY_DIR}/cal.json > /dev/null")
  set_tests_properties(cli.calibrate_quick_json PROPERTIES SKIP_RETURN_CODE 4 RUN_SERIAL TRUE TIMEOUT 300)
  add_test(NAME cli.bench_profile COMMAND sh -c
    "[ -f ${CMAKE_BINARY_DIR}/cal.json ] || exit 4; $<TARGET_FILE:mmlab> bench --quick --suite fault --profile ${CMAKE_BINARY_DIR}/cal.json --out ${CMAKE_BINARY_DIR}/smoke-profile && grep -q 'modelled (profile smoke)' ${CMAKE_BINARY_DIR}/smoke-profile/report.md && python3 -m json.tool ${CMAKE_BINARY_DIR}/smoke-profile/report.json > /dev/null")
  set_tests_properties(cli.bench_profile PROPERTIES SKIP_RETURN_CODE 4 DEPENDS cli.calibrate_quick_json)
  # cow-bench's modelled time: a table of its own and `modelled` per column, beside the measured figures.
  add_test(NAME cli.cow_bench_profile COMMAND sh -c
    "[ -f ${CMAKE_BINARY_DIR}/cal.json ] || exit 4; $<TARGET_FILE:mmlab> cow-bench --quick --size 4M --workload cow-rand --column base,fixed-64K --profile ${CMAKE_BINARY_DIR}/cal.json --out ${CMAKE_BINARY_DIR}/cow-bench-profile > /dev/null && grep -q 'modelled (profile smoke): the measured phase' ${CMAKE_BINARY_DIR}/cow-bench-profile/report.md && python3 -c \"import json, sys; w = json.load(open(sys.argv[1]))['workloads']['cow-rand']; assert w['base']['modelled']['total_ms'] > 0 and not w['base']['modelled']['extrapolated'] and w['fixed-64K']['modelled']['extrapolated'], w\" ${CMAKE_BINARY_DIR}/cow-bench-profile/report.json")
  set_tests_properties(cli.cow_bench_profile PROPERTIES SKIP_RETURN_CODE 4 DEPENDS cli.calibrate_quick_json)
  # The cost model on the host: the quick profile's terms predict two
  # validation cases measured twice; every figure is in the JSON. A profile
  # from another kind of machine is refused (exit 2) and accepted with --force.
  add_test(NAME cost.validate_quick COMMAND sh -c
    "[ -f ${CMAKE_BINARY_DIR}/cal.json ] || exit 4; $<TARGET_FILE:mmlab> validate --profile ${CMAKE_BINARY_DIR}/cal.json --runs 2 --filter 'fault-o[35]' --json ${CMAKE_BINARY_DIR}/validate.json > /dev/null || exit 1; python3 -c \"import json, sys; c = json.load(open(sys.argv[1]))['cases']; assert set(c) == {'fault-o3', 'fault-o5'}, c; assert all(v['predicted_ns'] > 0 and v['host_median_ns'] > 0 and not v['not_calibrated'] for v in c.values()), c\" ${CMAKE_BINARY_DIR}/validate.json")
  set_tests_properties(cost.validate_quick PROPERTIES SKIP_RETURN_CODE 4 RUN_SERIAL TRUE DEPENDS cli.calibrate_quick_json)
  add_test(NAME cost.validate_refuses_other_machine COMMAND sh -c
    "[ -f ${CMAKE_BINARY_DIR}/cal.json ] || exit 4; python3 -c \"import json, sys; p = json.load(open(sys.argv[1])); p['machine']['arch'] = 'riscv64'; json.dump(p, open(sys.argv[2], 'w'))\" ${CMAKE_BINARY_DIR}/cal.json ${CMAKE_BINARY_DIR}/cal-other.json; $<TARGET_FILE:mmlab> validate --profile ${CMAKE_BINARY_DIR}/cal-other.json --runs 2 --filter fault-o3 2>&1 | grep -q 'arch: .* here, riscv64 in the profile' || exit 1; $<TARGET_FILE:mmlab> validate --profile ${CMAKE_BINARY_DIR}/cal-other.json --runs 2 --filter fault-o3 --force | grep -q FORCED")
  set_tests_properties(cost.validate_refuses_other_machine PROPERTIES SKIP_RETURN_CODE 4 RUN_SERIAL TRUE DEPENDS cli.calibrate_quick_json)
endif()

# The committed case files are what bench/cost/gen_cases.py writes.
add_test(NAME cost.cases_generated COMMAND python3 gen_cases.py --check WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/bench/cost)
# Both case files run on the model (every case passes, with its counts).
add_test(NAME cost.cases_run_on_the_model COMMAND mmlab run ${CMAKE_SOURCE_DIR}/bench/cost/calibrate.mms ${CMAKE_SOURCE_DIR}/bench/cost/validate.mms)


# compare: a folder of two runs against one report, in both forms: a rate
# is a harmonic mean, and both the rate's rise and the time's fall are
# significant gains (the report has 5 samples a value: fewer would leave
# them undecided); pgfault, 4096 against a single 256, is undecided.
add_test(NAME cli.compare_mmtests COMMAND mmlab compare ${CMAKE_SOURCE_DIR}/tests/cli/compare/base
                                          ${CMAKE_SOURCE_DIR}/tests/cli/compare/thp)
set_tests_properties(cli.compare_mmtests PROPERTIES PASS_REGULAR_EXPRESSION
  "# base: 2 runs.*Hmean +fault.anon_4K.faults_per_sec +1966979 \\( +0.00%\\) +3225260 \\* +63.97%\\*.*Amean +fault.anon_4K.us_per_fault +0.51 \\( +0.00%\\) +0.31 \\* +39.02%\\*")
add_test(NAME cli.compare_lkp COMMAND mmlab compare --form lkp --significant base=${CMAKE_SOURCE_DIR}/tests/cli/compare/base
                                      ${CMAKE_SOURCE_DIR}/tests/cli/compare/thp/report.json)
set_tests_properties(cli.compare_lkp PROPERTIES PASS_REGULAR_EXPRESSION "-39.02%\\* +0.31 ± +2%  fault.anon_4K.us_per_fault"
                                                FAIL_REGULAR_EXPRESSION "pgfault")

# sweep: a 21-job grid through GNU parallel, shards and stdout records,
# merged and compared. bench refuses to time an instrumented build, so
# this runs in the others only.
if(NOT MMLAB_SANITIZE AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  add_test(NAME cli.sweep_parallel COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/cli/check_sweep.py $<TARGET_FILE:mmlab>
                                           ${CMAKE_SOURCE_DIR}/tests/cli/sweep/grid.txt ${CMAKE_CURRENT_BINARY_DIR}/sweep-out)
endif()

# The plots' scripts redraw from the folder they lie in, after the folder
# moved: each names its PNG without a path and holds its data.
if(NOT MMLAB_SANITIZE AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  add_test(NAME cli.bench_plots_redraw_in_place COMMAND sh -c
    "rm -rf plots-a plots-b && $<TARGET_FILE:mmlab> bench --quick --suite fault --size-mb 4 --repeats 2 --out plots-a >/dev/null &&
     mv plots-a plots-b && cd plots-b && rm fault.png && gnuplot fault.gp && test -s fault.png && echo redrawn")
  set_tests_properties(cli.bench_plots_redraw_in_place PROPERTIES PASS_REGULAR_EXPRESSION "^redrawn")
  # cow-bench with every column: charts of at most 6 series in distinct
  # colours, base in each, PSS from 0 saying how few reads it has, and a
  # moved folder redraws.
  add_test(NAME cli.cow_bench_plots_readable COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/cli/check_cow_bench_plots.py
                                                     $<TARGET_FILE:mmlab> ${CMAKE_CURRENT_BINARY_DIR}/cow-bench-plots)
endif()

# cow-bench's modelled columns (the committed profile's costs times the
# counts) are identical in two runs while two busy loops load both CPUs:
# usemem and cow-rand, base, rfc, fixed-16K and fixed-64K.
if(NOT MMLAB_SANITIZE AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  add_test(NAME cli.cow_bench_modelled_deterministic COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/cli/check_modelled_determinism.py
           $<TARGET_FILE:mmlab> ${CMAKE_SOURCE_DIR}/bench/cost/profiles/vm-6.18-2cpu.json ${CMAKE_CURRENT_BINARY_DIR}/modelled-det)
  set_tests_properties(cli.cow_bench_modelled_deterministic PROPERTIES RUN_SERIAL TRUE)
endif()

# run --profile: the kernel's modelled time of each test's part after its
# `counters reset`, from the committed profile.
# --force: the committed profile may be of another kind of machine than the
# one running the test, which marks each line FORCED.
add_test(NAME cli.run_profile COMMAND mmlab run ${CMAKE_SOURCE_DIR}/bench/cost/validate.mms --filter cow-o4
                                      --profile ${CMAKE_SOURCE_DIR}/bench/cost/profiles/vm-6.18-2cpu.json --force)
set_tests_properties(cli.run_profile PROPERTIES PASS_REGULAR_EXPRESSION "# modelled( FORCED)? cow-o4: kernel [1-9][0-9.]* us, program")
# A profile of another kind of machine (here: another architecture) is
# refused by every tool that prices counts, each difference named, exit 2;
# --force takes it and marks the figures.
add_test(NAME cli.profile_refuses_other_machine COMMAND sh -c
  "python3 -c \"import json, sys; p = json.load(open(sys.argv[1])); p['machine']['arch'] = 'riscv64'; json.dump(p, open(sys.argv[2], 'w'))\" ${CMAKE_SOURCE_DIR}/bench/cost/profiles/vm-6.18-2cpu.json ${CMAKE_BINARY_DIR}/other-arch.json || exit 1; \
   for cmd in 'run ${CMAKE_SOURCE_DIR}/bench/cost/validate.mms --filter cow-o4' 'cow-bench --quick --size 4M --workload cow-rand --column base --out ${CMAKE_BINARY_DIR}/other-arch-cb' 'bench --quick --suite fault --out ${CMAKE_BINARY_DIR}/other-arch-b'; do \
     $<TARGET_FILE:mmlab> $cmd --profile ${CMAKE_BINARY_DIR}/other-arch.json > ${CMAKE_BINARY_DIR}/other-arch.log 2>&1; rc=$?; \
     [ $rc -eq 2 ] && grep -q 'another kind of machine' ${CMAKE_BINARY_DIR}/other-arch.log && grep -q 'arch: .* here, riscv64 in the profile' ${CMAKE_BINARY_DIR}/other-arch.log || { echo \"$cmd: exit $rc\"; cat ${CMAKE_BINARY_DIR}/other-arch.log; exit 1; }; done; \
   $<TARGET_FILE:mmlab> run ${CMAKE_SOURCE_DIR}/bench/cost/validate.mms --filter cow-o4 --profile ${CMAKE_BINARY_DIR}/other-arch.json --force | grep -q '# modelled FORCED cow-o4: kernel' && echo forced-marked")
set_tests_properties(cli.profile_refuses_other_machine PROPERTIES PASS_REGULAR_EXPRESSION "forced-marked")

# The main job never touches the machine's settings unasked: the corpus
# suite runs on the host kernel only with --host.
if(NOT MMLAB_SANITIZE AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  add_test(NAME cli.bench_corpus_host_only_when_asked COMMAND sh -c
    "$<TARGET_FILE:mmlab> bench --suite corpus --out ${CMAKE_CURRENT_BINARY_DIR}/corpus-unasked > /dev/null && grep -q '| host | skipped: not asked' ${CMAKE_CURRENT_BINARY_DIR}/corpus-unasked/report.md")
endif()

# bench --form: the run's figures again in the lkp form (as compare prints one side).
if(NOT MMLAB_SANITIZE AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  add_test(NAME cli.bench_form_lkp COMMAND sh -c
    "$<TARGET_FILE:mmlab> bench --quick --suite fault --size-mb 4 --repeats 2 --form lkp --out ${CMAKE_CURRENT_BINARY_DIR}/bench-form > /dev/null && grep -q '## Every figure in the 0-day/lkp form' ${CMAKE_CURRENT_BINARY_DIR}/bench-form/report.md && grep -Eq '^ +[0-9.]+ ± +[0-9]+%  fault\\.4K\\.faults$' ${CMAKE_CURRENT_BINARY_DIR}/bench-form/report.md")
endif()

# --version names the commit and the build.
add_test(NAME cli.version COMMAND mmlab --version)
set_tests_properties(cli.version PROPERTIES PASS_REGULAR_EXPRESSION "^mmlab [0-9a-f]+.*\nbuild: ")

# mmlab diff in TAP: plan, a line per test, model-only counter differences
# counted apart and judged only with --counters all, --json totals, --full.
add_test(NAME cli.diff_tap COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/cli/check_diff_tap.py $<TARGET_FILE:mmlab>
         ${CMAKE_SOURCE_DIR}/tests/scenarios ${CMAKE_CURRENT_BINARY_DIR})
# run --list: the names the filters select; --filter twice and --exclude.
add_test(NAME cli.run_list_filters COMMAND sh -c
  "$<TARGET_FILE:mmlab> run --list --filter 'anon-*' --filter 'mthp-*' --exclude '*zero*' ${CMAKE_SOURCE_DIR}/tests/scenarios/basics.mms | tr '\\n' ' '; echo END")
set_tests_properties(cli.run_list_filters PROPERTIES PASS_REGULAR_EXPRESSION "^mthp-64k-order-and-stats END")
# A glob takes one word: the scenario files after --filter or --exclude stay
# files (both files' tests are listed).
add_test(NAME cli.run_filter_before_files COMMAND sh -c
  "$<TARGET_FILE:mmlab> run --list --filter 'cow-o4' --exclude 'x' ${CMAKE_SOURCE_DIR}/bench/cost/validate.mms ${CMAKE_SOURCE_DIR}/bench/cost/calibrate.mms --filter 'cow-o0-8m' | tr '\\n' ' '; echo END")
set_tests_properties(cli.run_filter_before_files PROPERTIES PASS_REGULAR_EXPRESSION "^cow-o4 cow-o0-8m END")
# run --counters: one table, a column per variant, a row per non-zero counter.
add_test(NAME cli.run_counter_table COMMAND $<TARGET_FILE:mmlab> run --variant cow.policy=base,fixed --counters cow.copy.*
         --filter cow-mthp-max-order ${CMAKE_SOURCE_DIR}/tests/scenarios/cow_mthp.mms)
set_tests_properties(cli.run_counter_table PROPERTIES PASS_REGULAR_EXPRESSION
  "# test +counter +cow.policy=base +cow.policy=fixed\n# cow-mthp-max-order +cow.copy.order0 +2 +1\n# +cow.copy.order2 +0 +1\n# \\(sum, 1 test\\) +cow.copy.order0 +2 +1\n")
# A model warning (pr_warn_once) goes out under the test that caused it, as a
# TAP diagnostic, and never as a bare line on stderr.
add_test(NAME cli.run_dmesg_under_test COMMAND sh -c
  "err=$($<TARGET_FILE:mmlab> run --filter collapse-mthp-max-ptes-none-other-is-zero ${CMAKE_SOURCE_DIR}/tests/scenarios/collapse.mms 2>&1 >/dev/null); [ -z \"$err\" ] || { echo \"stderr: $err\"; exit 1; }; $<TARGET_FILE:mmlab> run --filter collapse-mthp-max-ptes-none-other-is-zero ${CMAKE_SOURCE_DIR}/tests/scenarios/collapse.mms")
set_tests_properties(cli.run_dmesg_under_test PROPERTIES PASS_REGULAR_EXPRESSION
  "\n# dmesg: khugepaged: mTHP collapse only supports max_ptes_none values of 0 or 511\nok 1 collapse-mthp-max-ptes-none-other-is-zero\n")

# mmlab record (docs/RECORD.md) runs only as root on x86-64 with tracefs and
# perf; elsewhere it says why and exits 4. As root, the refusal is shown by
# running it as nobody (setpriv); without setpriv the test is skipped (77).
add_test(NAME record.refuses_where_it_cannot_record COMMAND sh -c
  "if [ \"$(id -u)\" = 0 ]; then command -v setpriv > /dev/null || exit 77; set -- setpriv --reuid=65534 --regid=65534 --clear-groups; else set --; fi; \"$@\" $<TARGET_FILE:mmlab> record --out /dev/null -- true 2>&1; echo \"exit=$?\"")
set_tests_properties(record.refuses_where_it_cannot_record PROPERTIES SKIP_RETURN_CODE 77
  PASS_REGULAR_EXPRESSION "mmlab record: cannot record on this host: [^\n]+\nexit=4")
# Where it can record: issue 31's acceptance program at 1/16, its faults in
# its regions checked exactly by the converter's unit test (exit 4: a skip).
add_test(NAME record.cow_child_live COMMAND sh -c
  "cc -O1 -o cow_child_live ${CMAKE_SOURCE_DIR}/tests/record/cow_child.c || exit 4; $<TARGET_FILE:mmlab> record --out cow_child_live.mmtrace --keep-script cow_child_live.perf.txt -- ./cow_child_live 16 || exit $?; MMLAB_RECORD_CAPTURE=cow_child_live.perf.txt MMLAB_RECORD_DIVISOR=16 $<TARGET_FILE:mmlab_tests> --gtest_filter=RecordConvertTest.LiveCowChildCapture")
set_tests_properties(record.cow_child_live PROPERTIES SKIP_RETURN_CODE 4 RUN_SERIAL TRUE TIMEOUT 120)
# The checked-in capture (cow_child at 1/128) converted, then replayed: every
# exact fidelity line holds (exit 0), the policy table runs every column, and
# an excerpt exported as a scenario runs clean on the model.
add_test(NAME record.replay_checked_in_capture COMMAND sh -c
  "set -e; m=$<TARGET_FILE:mmlab>; $m record --from-script ${CMAKE_SOURCE_DIR}/tests/record/cow_child_128.perf.txt --out replay_capture.mmtrace > /dev/null; $m replay --fidelity replay_capture.mmtrace; $m replay replay_capture.mmtrace --geometry x86-intel > replay_capture.table; grep -c '^fixed-64K ' replay_capture.table; pid=$($m replay --dump replay_capture.mmtrace | awk '$4 == \"exec\" {sub(\"tid=\", \"\", $2); print $2; exit}'); $m replay replay_capture.mmtrace --to-mms replay_capture.mms --pid $pid; $m run replay_capture.mms | tail -1")
set_tests_properties(record.replay_checked_in_capture PROPERTIES
  PASS_REGULAR_EXPRESSION "exact   first touches of private anonymous memory: model [0-9]+, traced [0-9]+: holds.*\n1\n# Totals: pass:1 fail:0"
  FAIL_REGULAR_EXPRESSION "DOES NOT HOLD")

# mmlab explore's reports, replay, --explain, an edited line and the crash
# outcome (docs/RACES.md).
add_test(NAME cli.explore COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/cli/check_explore.py $<TARGET_FILE:mmlab>
         ${CMAKE_SOURCE_DIR}/tests/scenarios/language_examples.mms)
# Each committed profile that stores its calibration runs (format 3) is what
# `calibrate --refit` makes of them with the model's counts now: a change of
# the model that moves a calibration case's counts must refit the profile
# (`mmlab calibrate --refit P --out P`) and commit it with the change. The
# refit is the same arithmetic in every build, so the release build runs it
# (under the sanitizers it costs 5-13 s of CI).
if(NOT MMLAB_SANITIZE)
add_test(NAME cost.committed_profiles_refit COMMAND sh -c
  "for p in ${CMAKE_SOURCE_DIR}/bench/cost/profiles/*.json; do python3 -c \"import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))['version'] >= 3 else 1)\" \$p || continue; $<TARGET_FILE:mmlab> calibrate --refit \$p --out ${CMAKE_BINARY_DIR}/refit.json > /dev/null || exit 1; python3 ${CMAKE_SOURCE_DIR}/tests/cli/same_terms.py \$p ${CMAKE_BINARY_DIR}/refit.json || exit 1; done")
endif()
