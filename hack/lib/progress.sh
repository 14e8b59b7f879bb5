# shellcheck shell=bash
# Progress lines for long builds, sourced by hack/k8s-binaries.sh and hack/kernel/build.sh.
# A build that prints one line and then nothing for 15 minutes looks like a hang: these
# print, every PROGRESS_EVERY seconds (default 30), what is being built, how far along it
# is, the time since it started and where its log is.
#
#   progress_start LABEL LOG TOTAL UNIT REGEX   count lines of LOG matching REGEX (grep -E)
#                                               as the work done, out of TOTAL (a number,
#                                               or "~N" for an estimate, or "?")
#   progress_stop                               stop the reporter and print the last line

_progress_pid=""
_progress_line() {
	local label=$1 log=$2 total=$3 unit=$4 regex=$5 start=$6 count elapsed
	count=$(grep -cE -- "$regex" "$log" 2>/dev/null || true)
	elapsed=$(($(date +%s) - start))
	printf '[%s] %s of %s %s done, %dm%02ds elapsed (log: %s)\n' \
		"$label" "${count:-0}" "$total" "$unit" $((elapsed / 60)) $((elapsed % 60)) "$log" >&2
}

progress_start() {
	local label=$1 log=$2 total=$3 unit=$4 regex=$5 start parent=$$ every=${PROGRESS_EVERY:-30}
	start=$(date +%s)
	_progress_args=("$label" "$log" "$total" "$unit" "$regex" "$start")
	(
		sleeper=""
		trap '[[ -z "$sleeper" ]] || kill "$sleeper" 2>/dev/null; exit 0' TERM
		while kill -0 "$parent" 2>/dev/null; do
			sleep "$every" &
			sleeper=$!
			wait "$sleeper"
			kill -0 "$parent" 2>/dev/null || break
			_progress_line "$label" "$log" "$total" "$unit" "$regex" "$start"
		done
	) &
	_progress_pid=$!
}

progress_stop() {
	[[ -n "$_progress_pid" ]] || return 0
	kill "$_progress_pid" 2>/dev/null || true
	wait "$_progress_pid" 2>/dev/null || true
	_progress_pid=""
	_progress_line "${_progress_args[@]}"
}
