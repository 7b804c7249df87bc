# Sourced by the bench scripts. wait_for_quiet_machine returns once the machine is quiet: 3 samples
# 1 s apart with the 1-minute load below 1.5 and no runnable process but the sampler itself (field 4
# of /proc/loadavg counts it), or after QUIET_WAIT_S seconds (default 600). A 2-thread OpenMP run that
# shares a core with another process slows down several-fold, which would make a ratio meaningless.
wait_for_quiet_machine() {
  local quiet=0 waited=0
  while (( quiet < 3 && waited < ${QUIET_WAIT_S:-600} )); do
    if awk '{ split($4, r, "/"); exit !($1 < 1.5 && r[1] <= 1) }' /proc/loadavg; then
      quiet=$((quiet + 1))
    else
      quiet=0
    fi
    sleep 1
    waited=$((waited + 1))
  done
}
