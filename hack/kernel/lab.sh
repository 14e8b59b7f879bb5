#!/usr/bin/env bash
# The whole kernel lab in one command, from a fresh Debian 12 machine:
#
#   1. hack/kernel/build.sh: installs the packages it needs, builds (or reuses
#      the cached) patched 6.12 kernel and fetches Debian's unpatched control.
#   2. One boot of the patched kernel runs the smoke test, the conformance
#      test binary twice: against the real prctl (NUMAPREF_CONFORMANCE_IMPL=prctl)
#      and against the emulator (=emulator), each writing its JSON-lines report,
#      and the node engine test (test/kernellab/engine: hostlab cgroups with
#      cpuset, apply, fork events, undo, all on the real prctl; fork-to-applied
#      latency of 50 fork()ed children with fork events and with 100 ms rescans,
#      whose `latency mode=...` lines the summary prints: informational, no threshold;
#      how often a fork event comes before the child is in its cgroup (`forkrace`
#      lines, informational); and PID reuse with real wraparound: pid_max 1024,
#      thousands of short-lived children in three containers, 0 misapplied values
#      (`pidreuse` line).
#   3. test/kernellab/diffreport compares the two reports call by call.
#   4. One boot of the control kernel runs the smoke test, the conformance
#      suite's prctl case, which must skip as unsupported, and the engine test,
#      whose engine must report KernelUnsupported; a kernel trace witness in each
#      binary fails it if any prctl 78 was issued. The page mover's huge-page test
#      (internal/numa/migrate) moves a helper's transparent huge pages (Debian's
#      kernel has THP always) to the other node and checks what its steps counted.
#   5. The agent binary (numapref agent --kernel=auto) in both kernels, against
#      etcd and kube-apiserver on the host (test/kernellab/apihost: the project's
#      own builds, hack/k8s-binaries.sh), which the VM reaches through qemu's user
#      network with restrict=on and one guestfwd (run.sh --guestfwd): on the
#      patched kernel test/kernellab/agent's TestAgent (Applied through the API,
#      prctl GET and /proc/<tid>/sched agree, forks placed, fork->applied beside its
#      floor (a minimal fork-event reader that SETs the child), /metrics and /inspect,
#      idle cost against the bare floor loop, undo on delete) and TestEffect (the
#      seed's four scenarios and a fifth, 4 with the preference set before the
#      workload's first touch as NRI sets it, 90 s each, then 5 with a memory policy at
#      creation and 4 with page migration, 30 s each; sampled every second from the
#      agent's /metrics); on the control kernel TestAgent (KernelUnsupported in the report,
#      the conditions and an Event; no prctl 78 in the kernel trace), TestCRIPolicy (a
#      selected container created through CRI holds its home's memory policy at its first
#      instruction, an unselected one the default) and TestEffectControl (nothing, a
#      memory policy at creation in each soft mode, page migration after the touch: 30 s
#      each; the pages moved counted in the report).
#      test/kernellab/effectreport prints the tables and writes DIR/effect-locality.svg and
#      DIR/effect-control-locality.svg.
#      The patched boot also runs TestCRIPod: containerd 2.x with NRI and runc
#      (hack/runtime-binaries.sh, static) in the VM, the agent as containerd's NRI plugin,
#      and two host-network pods started through CRI with crictl, whose container's first
#      instruction is a prctl GET of its own node (workload first-node): the pod the
#      NumaPreference selects must read node 1 there, the other -1 (`cripod` line).
#   Every boot's kernel log goes through test/kernellab/kmsgcheck: only the known
#   assert_clock_updated WARNING via prctl_chg_pref_nid is waived (patched kernel),
#   counted per backtrace; any other report fails the lab.
#
# Usage: hack/kernel/lab.sh [--out DIR] [--strict | --no-strict] [--before REV] [--server]
#   --out DIR     results directory (default: a new /tmp/kernellab.XXXXXX);
#                 DIR/patched, DIR/control, DIR/agent-patched, DIR/agent-control
#                 (run.sh results), DIR/diffreport.txt, DIR/effect-table.md,
#                 DIR/effect-locality.svg, DIR/summary; a passing run in a directory
#                 of its own keeps only the last three
#   --strict      the default: fail on every difference, including calls where
#                 the emulator says it assumed a task fresh (its documented,
#                 counted limit, which the clone-flag trace removed from the lab)
#   --no-strict   list such calls as KNOWN, not counted as agreement, without
#                 failing the lab (also KERNEL_LAB_STRICT=0 in the environment,
#                 which `make kernel-lab KERNEL_LAB_STRICT=0` passes on)
#   --before REV  also build the agent binary of commit REV, and run
#                 TestForkLagBeforeAfter in the patched agent boot: fork->applied of
#                 REV's agent, then this tree's, in the same boot (forklag-before and
#                 forklag-after lines in the summary)
#   --server      the forking server alone (make kernel-lab-server), instead of steps 2-5:
#                 one boot of the patched kernel with the agent's files and the container
#                 runtime, and PostgreSQL 15 in a CRI pod (hack/kernel/server-image.sh,
#                 cached); TestForkingServer runs pgbench -C -S from a second pod without
#                 the agent, then with it selecting the server (forkserver line)
# Exit status: 0 when every step passed, 1 otherwise.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

out="" strict=1 own_out="" before="" server=0
[[ "${KERNEL_LAB_STRICT:-1}" != 0 ]] || strict=0
while (($# > 0)); do
	case "$1" in
	--out) out="${2:?}"; shift 2 ;;
	--strict) strict=1; shift ;;
	--no-strict) strict=0; shift ;;
	--before) before="$(git -C "$repo" rev-parse --verify "${2:?}^{commit}")"; shift 2 ;;
	--server) server=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "lab.sh: unknown argument $1 (see --help)" >&2; exit 1 ;;
	esac
done
if [[ -z "$out" ]]; then
	out="$(mktemp -d /tmp/kernellab.XXXXXX)"
	own_out=1
else
	mkdir -p "$out"
	out="$(realpath "$out")"
fi

log() { printf '[kernel-lab] %s\n' "$*" >&2; }
start=$(date +%s.%N)
declare -a steps=()
failed=0
step() { # NAME STATUS DETAIL
	steps+=("$(printf '%-34s %-4s %s' "$1" "$2" "$3")")
	[[ "$2" == ok ]] || failed=1
}

# --- 1. kernels ------------------------------------------------------------------
log "building or reusing the kernels (hack/kernel/build.sh)"
kinds=()
((!server)) || kinds=(patched) # the forking server boots the patched kernel alone
if "$here/build.sh" "${kinds[@]}"; then
	step "kernels (build.sh)" ok "patched $(basename "$("$here/build.sh" --path patched)")$( ((server)) || echo ", control $(basename "$("$here/build.sh" --path control)")")"
else
	step "kernels (build.sh)" FAIL "see the output above"
	printf '%s\n' "${steps[@]}"
	exit 1
fi
command -v go >/dev/null || { log "error: go is not installed"; exit 1; }

# The test binaries, compiled once: static, as the VM has no libc. The VM runs them as
# root, so the conformance suite's host tier (the cases that need root) is in.
bins="$out/bin"
mkdir -p "$bins"
log "compiling the test binaries"
(cd "$repo" &&
	CGO_ENABLED=0 go test -c -trimpath -tags host,kernellab -o "$bins/conformance.test" ./internal/testutil/conformance &&
	CGO_ENABLED=0 go test -c -trimpath -tags host,kernellab -o "$bins/migrate.test" ./internal/numa/migrate &&
	CGO_ENABLED=0 go test -c -trimpath -tags kernellab -o "$bins/smoke.test" ./test/kernellab/smoke &&
	CGO_ENABLED=0 go test -c -trimpath -tags kernellab -o "$bins/engine.test" ./test/kernellab/engine &&
	CGO_ENABLED=0 go test -c -trimpath -tags kernellab -o "$bins/agent.test" ./test/kernellab/agent &&
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$bins/numapref" ./cmd/numapref &&
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$bins/workload" ./test/e2e/workload &&
	go build -trimpath -o "$bins/diffreport" ./test/kernellab/diffreport &&
	go build -trimpath -o "$bins/kmsgcheck" ./test/kernellab/kmsgcheck &&
	go build -trimpath -o "$bins/effectreport" ./test/kernellab/effectreport &&
	go build -trimpath -o "$bins/apihost" ./test/kernellab/apihost)
server_image=""
if ((server)); then
	log "building or reusing the forking server's image (hack/kernel/server-image.sh)"
	server_image="$("$here/server-image.sh")"
fi
before_files=() before_tests=""
if [[ -n "$before" ]]; then
	log "compiling the agent of ${before:0:12} (--before)"
	src="$(mktemp -d)"
	git -C "$repo" archive "$before" | tar -x -C "$src"
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$bins/numapref-before" ./cmd/numapref)
	rm -rf "$src"
	before_files=(--file numapref-before="$bins/numapref-before")
	before_tests="|TestForkLagBeforeAfter"
fi

# kernel_log KIND [-no-waiver]: the boot's kernel log through kmsgcheck (exact waiver).
kernel_log() {
	local kind="$1" rc=0 verdict
	shift
	verdict="$("$bins/kmsgcheck" "$@" "$out/$kind/kmsg.log" 2>&1)" || rc=$?
	printf '%s\n' "$verdict" >"$out/$kind/kmsgcheck.txt"
	if ((rc == 0)); then
		step "$kind: kernel log" ok "$(tail -n1 <<<"$verdict" | sed 's/^kernel log: ok: //')$(grep -q '^KNOWN' <<<"$verdict" && echo " ($out/$kind/kmsgcheck.txt)")"
	else
		step "$kind: kernel log" FAIL "$(tail -n1 <<<"$verdict") ($out/$kind/kmsgcheck.txt)"
	fi
}

# run_vm KIND ARGS...: run.sh, quietly, into $out/KIND; prints its summary.
run_vm() {
	local kind="$1" rc=0
	shift
	log "booting the $kind kernel"
	"$here/run.sh" --quiet --kernel "$kind" --out "$out/$kind" "$@" || rc=$?
	return "$rc"
}

latency="" forkrace="" pidreuse="" forkserver=""
if ((!server)); then
	# --- 2. patched: smoke + conformance against the prctl and the emulator -----------
	rc=0
	run_vm patched \
		--test-env prctl:NUMAPREF_CONFORMANCE_IMPL=prctl \
		--test-env emulator:NUMAPREF_CONFORMANCE_IMPL=emulator \
		--test-args 'engine:-test.v -test.skip=^TestEngineKernelUnsupported$' \
		smoke="$bins/smoke.test" prctl="$bins/conformance.test" emulator="$bins/conformance.test" \
		engine="$bins/engine.test" || rc=$?
	for t in smoke prctl emulator engine; do
		line="$(awk -v n="$t" '$1 == n { print $2, "exit=" $3, $4 }' "$out/patched/results")"
		if [[ "$line" == pass* ]]; then
			step "patched: $t" ok "$line"
		else
			step "patched: $t" FAIL "${line:-missing} (log: $out/patched/tests/$t.log)"
		fi
	done
	((rc != 2)) || step "patched: vm" FAIL "$(grep '^vm:' "$out/patched/summary" | head -n1)"
	# The seed patch's prctl calls sched_setnuma() without updating the runqueue clock; with
	# SCHED_DEBUG a SET on a task that is running elsewhere warns "rq->clock_update_flags <
	# RQCF_ACT_SKIP" (assert_clock_updated, via prctl_chg_pref_nid). That is a finding about
	# the patch, waived exactly (kmsgcheck); any other report fails the lab.
	kernel_log patched
	# Every case ran on the prctl: none may skip on the kernel that has it.
	prctl_report="$out/patched/reports/prctl/conformance.jsonl"
	emu_report="$out/patched/reports/emulator/conformance.jsonl"
	if [[ -s "$prctl_report" ]] && ! grep -q '"skipped":true' "$prctl_report"; then
		step "patched: prctl cases ran" ok "$(wc -l <"$prctl_report") cases, none skipped"
	else
		step "patched: prctl cases ran" FAIL "report missing, empty or with skipped cases: $prctl_report"
	fi
	# The engine's case must have run, not skipped.
	elog="$out/patched/tests/engine.log"
	if grep -q -- '--- PASS: TestEngineRealPrctl' "$elog" 2>/dev/null; then
		step "patched: engine on the real prctl" ok "A Applied, B MemoryPinnedElsewhere, C untouched, fork event, undo"
	else
		step "patched: engine on the real prctl" FAIL "TestEngineRealPrctl did not pass ($elog)"
	fi
	# Fork-to-applied latency (TestForkToAppliedLatency): informational figures, TCG-slow and
	# only relative; the test fails only when a child is not applied within 5 s.
	latency="$(grep -E '^latency mode=' "$elog" 2>/dev/null || true)"
	if grep -q -- '--- PASS: TestForkToAppliedLatency' "$elog" 2>/dev/null &&
		grep -q '^latency mode=events ' <<<"$latency" && grep -q '^latency mode=rescan100ms ' <<<"$latency"; then
		step "patched: fork->applied latency" ok "$(awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^(mode|missed|p50_ms|p99_ms)=/) printf "%s ", $i; printf "; " }' <<<"$latency" | sed 's/ ; $//; s/ ;/;/g')"
	else
		step "patched: fork->applied latency" FAIL "TestForkToAppliedLatency did not pass or printed no figures ($elog)"
	fi

	# Why fork events are sometimes early (informational): the event comes before the child is
	# in its cgroup (proc_fork_connector runs before cgroup_post_fork in copy_process).
	forkrace="$(grep -E '^forkrace mode=' "$elog" 2>/dev/null || true)"
	if grep -q -- '--- PASS: TestForkEventBeforeCgroup' "$elog" 2>/dev/null && [[ -n "$forkrace" ]]; then
		step "patched: fork event before cgroup" ok "$(awk '{ printf "%s %s; ", $2, $5 }' <<<"$forkrace" | sed 's/; $//')"
	else
		step "patched: fork event before cgroup" FAIL "TestForkEventBeforeCgroup did not pass or printed no figures ($elog)"
	fi
	# PID reuse with real wraparound: no value may land on the wrong task.
	pidreuse="$(grep -E '^pidreuse ' "$elog" 2>/dev/null || true)"
	if grep -q -- '--- PASS: TestPIDReuseWraparound' "$elog" 2>/dev/null && grep -q ' misapplied=0 ' <<<"$pidreuse"; then
		step "patched: pid reuse, wraparound" ok "$(tr ' ' '\n' <<<"$pidreuse" | grep -E '^(pid_max|churned|reused_pids|misapplied|wrong_sets)=' | paste -sd' ')"
	else
		step "patched: pid reuse, wraparound" FAIL "TestPIDReuseWraparound did not pass or misapplied a value ($elog)"
	fi

	# --- 3. the differential report -------------------------------------------------------
	diff_args=()
	((strict)) || diff_args+=(-accept-assumed-fresh)
	rc=0
	"$bins/diffreport" "${diff_args[@]}" "$prctl_report" "$emu_report" >"$out/diffreport.txt" 2>&1 || rc=$?
	grep -E '^  (DIFF|KNOWN)|MISSING|skipped on' "$out/diffreport.txt" | sed 's/^/  /' >&2 || true
	totals="$(grep -E '^[0-9]+/[0-9]+ calls agree' "$out/diffreport.txt" || echo "no totals")"
	known="$(grep -oE '^[0-9]+ calls differ only because' "$out/diffreport.txt" | cut -d' ' -f1 || true)"
	[[ -z "$known" ]] || totals="$totals; $known known (emulator assumed fresh, counted)"
	if ((rc == 0)); then
		step "diffreport prctl vs emulator" ok "$totals"
	else
		step "diffreport prctl vs emulator" FAIL "$totals (exit $rc; $out/diffreport.txt)"
	fi

	# --- 4. control: smoke + the prctl case, which must skip -----------------------------
	rc=0
	# The prctl witness's trace event is switched on at boot: switching a syscall tracepoint
	# on while test threads run patches kernel text under them, which crashed Debian's 6.12
	# under qemu TCG (int3 in syscall_trace_enter) in one lab run of about ten.
	run_vm control \
		--append "trace_event=syscalls:sys_enter_prctl" \
		--test-env conformance:NUMAPREF_CONFORMANCE_IMPL=prctl \
		--test-args 'engine:-test.v -test.run=^TestEngineKernelUnsupported$' \
		--test-args 'migrate:-test.v -test.run=^TestMoveHugePagesToAnotherNode$' \
		smoke="$bins/smoke.test" conformance="$bins/conformance.test" engine="$bins/engine.test" \
		migrate="$bins/migrate.test" || rc=$?
	for t in smoke conformance engine migrate; do
		line="$(awk -v n="$t" '$1 == n { print $2, "exit=" $3, $4 }' "$out/control/results")"
		if [[ "$line" == pass* ]]; then
			step "control: $t" ok "$line"
		else
			step "control: $t" FAIL "${line:-missing} (log: $out/control/tests/$t.log)"
		fi
	done
	((rc != 2)) || step "control: vm" FAIL "$(grep '^vm:' "$out/control/summary" | head -n1)"
	kernel_log control -no-waiver
	clog="$out/control/tests/conformance.log"
	if grep -q -- '--- SKIP: TestPrctl' "$clog" 2>/dev/null && grep -q 'SKIP (precondition not met)' "$clog"; then
		step "control: prctl case unsupported" ok "TestPrctl skipped: the kernel does not prove PR_PREFERRED_NID"
	else
		step "control: prctl case unsupported" FAIL "TestPrctl did not skip as unsupported ($clog)"
	fi
	if grep -q -- '--- PASS: TestEngineKernelUnsupported' "$out/control/tests/engine.log" 2>/dev/null; then
		step "control: engine unsupported" ok "prctl.New unsupported, A reports KernelUnsupported"
	else
		step "control: engine unsupported" FAIL "TestEngineKernelUnsupported did not pass ($out/control/tests/engine.log)"
	fi
	# Debian's kernel gives the workload transparent huge pages (THP always): the page
	# mover's steps move them to the other node and count every page that moved.
	mlog="$out/control/tests/migrate.log"
	if grep -q -- '--- PASS: TestMoveHugePagesToAnotherNode' "$mlog" 2>/dev/null; then
		step "control: huge pages moved" ok "$(grep -o 'AnonHugePages.*' "$mlog" | head -n1)"
	else
		step "control: huge pages moved" FAIL "TestMoveHugePagesToAnotherNode did not pass ($mlog)"
	fi
	for t in smoke conformance engine; do
		if grep -q '^prctl witness: the kernel traced [0-9]* canary' "$out/control/tests/$t.log" 2>/dev/null; then
			step "control: no prctl 78 ($t)" ok "$(grep -o 'traced.*' "$out/control/tests/$t.log" | head -n1)"
		else
			step "control: no prctl 78 ($t)" FAIL "no witness verdict in $out/control/tests/$t.log"
		fi
	done
fi

# --- 5. the agent binary, against a real apiserver on the host ------------------------
apihost_pid=""
stop_apihost() {
	if [[ -n "$apihost_pid" ]] && kill -0 "$apihost_pid" 2>/dev/null; then
		kill -TERM "$apihost_pid"
		wait "$apihost_pid" 2>/dev/null || true
	fi
	apihost_pid=""
}
trap stop_apihost EXIT
k8s_bin="$("$repo/hack/k8s-binaries.sh")"
# kubectl for the VM, without its symbol tables (the initramfs lives in guest RAM).
strip -o "$bins/kubectl" "$k8s_bin/kubectl"
# The container runtime for TestCRIPod, stripped likewise: containerd, its shim, runc, ctr
# and crictl, all static (the initramfs has no libc).
"$repo/hack/install-deps.sh" kernellab # what building runc takes, on a fresh machine
runtime_bin="$("$repo/hack/runtime-binaries.sh")"
runtime_files=()
for b in containerd containerd-shim-runc-v2 runc ctr crictl; do
	strip -o "$bins/$b" "$runtime_bin/$b"
	runtime_files+=(--file "$b=$bins/$b")
done
runtime_files+=(--file "workload=$bins/workload")
api="$out/apihost"
rm -rf "$api"
"$bins/apihost" serve -dir "$api" -bin "$k8s_bin" -repo "$repo" -nodes kernellab-patched,kernellab-control \
	>"$out/apihost.log" 2>&1 &
apihost_pid=$!
for _ in $(seq 240); do
	[[ -f "$api/ready" ]] || ! kill -0 "$apihost_pid" 2>/dev/null && break
	sleep 0.5
done
effect_table=""
idlecost=""
forklag=""
if [[ ! -f "$api/ready" ]]; then
	step "agent: apiserver on the host" FAIL "apihost did not get ready ($out/apihost.log)"
else
	port="$(cat "$api/ready")"
	step "agent: apiserver on the host" ok "kube-apiserver + etcd on 127.0.0.1:$port, guestfwd 10.0.2.100:6443 only"
	# agent_vm KIND ARGS...: a boot with the network, the agent binary and the kubeconfigs.
	agent_vm() {
		local kind="$1" rc=0
		shift
		log "booting the $kind kernel with the agent"
		"$here/run.sh" --quiet --kernel "$kind" --out "$out/agent-$kind" --mem 3072 --timeout 1800 --test-timeout 25m \
			--guestfwd "tcp:10.0.2.100:6443-cmd:$bins/apihost fwd 127.0.0.1:$port" \
			--file numapref="$bins/numapref" --file kubectl="$bins/kubectl" \
			--file admin.kubeconfig="$api/guest/admin.kubeconfig" \
			--file "agent-kernellab-$kind.kubeconfig=$api/guest/agent-kernellab-$kind.kubeconfig" \
			"$@" agent="$bins/agent.test" || rc=$?
		return "$rc"
	}
	if ((server)); then
		# The forking server alone: PostgreSQL in a CRI pod, pgbench -C -S without and with the agent.
		rc=0
		agent_vm patched "${runtime_files[@]}" --file "server-image.tar=$server_image" --args "-test.v -test.run ^TestForkingServer$" || rc=$?
		alog="$out/agent-patched/tests/agent.log"
		((rc != 2)) || step "agent-patched: vm" FAIL "$(grep '^vm:' "$out/agent-patched/summary" | head -n1)"
		forkserver="$(grep -E '^forkserver ' "$alog" 2>/dev/null | cut -d' ' -f2- || true)"
		if grep -q -- '^--- PASS: TestForkingServer ' "$alog" 2>/dev/null && [[ -n "$forkserver" ]]; then
			step "agent-patched: forking server" ok "$forkserver"
		else
			step "agent-patched: forking server" FAIL "TestForkingServer did not pass${forkserver:+ ($forkserver)} ($alog)"
		fi
		kernel_log agent-patched
	else
		# Patched: the agent's checks, its idle cost, then the five-scenario experiment.
		rc=0
		agent_vm patched "${before_files[@]}" "${runtime_files[@]}" --args "-test.v -test.run ^(TestAgent|TestCRIPod|TestEffect$before_tests)$" || rc=$?
		alog="$out/agent-patched/tests/agent.log"
		((rc != 2)) || step "agent-patched: vm" FAIL "$(grep '^vm:' "$out/agent-patched/summary" | head -n1)"
		for t in TestAgent TestEffect ${before:+TestForkLagBeforeAfter}; do
			if grep -q -- "^--- PASS: $t " "$alog" 2>/dev/null; then
				step "agent-patched: $t" ok "$(grep -c -- "^    --- PASS: $t/" "$alog") subtests passed ($alog)"
			else
				step "agent-patched: $t" FAIL "$t did not pass ($alog)"
			fi
		done
		# The CRI pod: what its container's first instruction read (TestCRIPod).
		cripod="$(grep -E '^cripod ' "$alog" 2>/dev/null || true)"
		if grep -q -- '^--- PASS: TestCRIPod ' "$alog" 2>/dev/null && [[ -n "$cripod" ]]; then
			step "agent-patched: CRI pod (NRI)" ok "$cripod"
		else
			step "agent-patched: CRI pod (NRI)" FAIL "TestCRIPod did not pass${cripod:+ ($cripod)} ($alog)"
		fi
		idlecost="$(grep -E '^idlecost ' "$alog" 2>/dev/null || true)"
		if [[ -n "$idlecost" ]]; then
			step "agent-patched: idle cost" ok "$(tr ' ' '\n' <<<"$idlecost" | grep -E '^(agent_cpu_s|floor_cpu_s|ratio|tasks)=' | paste -sd' ')"
		else
			step "agent-patched: idle cost" FAIL "no idlecost line ($alog)"
		fi
		forklag="$(grep -E '^forklag ' "$alog" 2>/dev/null || true)"
		if [[ -n "$forklag" ]]; then
			step "agent-patched: fork->applied (agent)" ok "${forklag#forklag }"
		else
			step "agent-patched: fork->applied (agent)" FAIL "no forklag line ($alog)"
		fi
		# forklag_line KEY LABEL STEP: the agent log's line KEY as step STEP, added to forklag.
		forklag_line() {
			local line
			line="$(grep -E "^$1 " "$alog" 2>/dev/null | cut -d' ' -f2- || true)"
			if [[ -n "$line" ]]; then
				step "agent-patched: $3" ok "$line"
				forklag+=$'\n'"    $2: $line"
			else
				step "agent-patched: $3" FAIL "no $1 line ($alog)"
			fi
		}
		# Where that lag goes, from the agent's numapref_fork_apply_stage_seconds.
		forklag_line forkstages stages "fork->applied stages (agent)"
		# The floor in the same boot: a minimal reader of the fork event that SETs the child.
		forklag_line forkfloor floor "fork->applied floor"
		if [[ -n "$before" ]]; then
			for side in before after; do
				line="$(grep -E "^forklag-$side " "$alog" 2>/dev/null | cut -d' ' -f2- || true)"
				what="this tree"
				[[ "$side" == after ]] || what="${before:0:12}"
				if [[ -n "$line" ]]; then
					step "agent-patched: fork->applied, $side" ok "$line"
					forklag+=$'\n'"    $side ($what): $line"
					stages="$(grep -E "^forkstages-$side " "$alog" 2>/dev/null | cut -d' ' -f2- || true)"
					[[ -z "$stages" ]] || forklag+=$'\n'"    $side stages: $stages"
				else
					step "agent-patched: fork->applied, $side" FAIL "no forklag-$side line ($alog)"
				fi
			done
		fi
		reports="$out/agent-patched/reports/agent"
		if "$bins/effectreport" -svg "$out/effect-locality.svg" "$reports/effect.jsonl" "$reports/effect-scenarios.jsonl" \
			>"$out/effect-table.md" 2>"$out/effectreport.err"; then
			effect_table="$(cat "$out/effect-table.md")"
			step "agent-patched: effect experiment" ok "$(wc -l <"$reports/effect-scenarios.jsonl") scenarios; table $out/effect-table.md, picture $out/effect-locality.svg"
		else
			step "agent-patched: effect experiment" FAIL "$(head -c 300 "$out/effectreport.err")"
		fi
		kernel_log agent-patched

		# Control: the same binary reports KernelUnsupported and issues no prctl 78; as
		# containerd's NRI plugin it has the runtime create a selected container with its
		# home's memory policy (TestCRIPolicy).
		rc=0
		agent_vm control --append "trace_event=syscalls:sys_enter_prctl" "${runtime_files[@]}" --args "-test.v -test.run ^(TestAgent|TestCRIPolicy|TestEffectControl)$" || rc=$?
		clog="$out/agent-control/tests/agent.log"
		((rc != 2)) || step "agent-control: vm" FAIL "$(grep '^vm:' "$out/agent-control/summary" | head -n1)"
		if grep -q -- '^--- PASS: TestAgent ' "$clog" 2>/dev/null; then
			step "agent-control: KernelUnsupported" ok "report, conditions and Event say KernelUnsupported"
		else
			step "agent-control: KernelUnsupported" FAIL "TestAgent did not pass ($clog)"
		fi
		if grep -q -- '^--- PASS: TestCRIPolicy ' "$clog" 2>/dev/null; then
			step "agent-control: memory policy at creation" ok "$(grep -o '^cripolicy .*' "$clog" | head -n1)"
		else
			step "agent-control: memory policy at creation" FAIL "TestCRIPolicy did not pass ($clog)"
		fi
		# What mainline offers, against nothing: a memory policy at creation, page migration
		# (TestEffectControl), in a table of its own.
		creports="$out/agent-control/reports/agent"
		if grep -q -- '^--- PASS: TestEffectControl ' "$clog" 2>/dev/null &&
			"$bins/effectreport" -svg "$out/effect-control-locality.svg" "$creports/effect.jsonl" "$creports/effect-scenarios.jsonl" \
				>"$out/effect-control-table.md" 2>"$out/effectreport-control.err"; then
			effect_table+=$'\n\n'"$(cat "$out/effect-control-table.md")"
			step "agent-control: mainline mechanisms' effect" ok "$(wc -l <"$creports/effect-scenarios.jsonl") scenarios; table $out/effect-control-table.md, picture $out/effect-control-locality.svg"
		else
			step "agent-control: mainline mechanisms' effect" FAIL "TestEffectControl did not pass, or its report: $(head -c 300 "$out/effectreport-control.err" 2>/dev/null) ($clog)"
		fi
		if grep -q '^prctl witness: the kernel traced [0-9]* canary' "$clog" 2>/dev/null; then
			step "agent-control: no prctl 78" ok "$(grep -o 'traced.*' "$clog" | head -n1)"
		else
			step "agent-control: no prctl 78" FAIL "no witness verdict in $clog"
		fi
		kernel_log agent-control -no-waiver
	fi
fi
stop_apihost

# --- summary ---------------------------------------------------------------------------
elapsed=$(printf '%.0f' "$(echo "$(date +%s.%N) - $start" | bc)")
{
	echo
	echo "kernel lab summary ($out, ${elapsed} s)"
	printf '  %s\n' "${steps[@]}"
	if [[ -f "$out/diffreport.txt" ]]; then
		echo "  differential report: $out/diffreport.txt"
		sed -n '/^[0-9]*\/[0-9]* cases agree/,$p' "$out/diffreport.txt" | sed 's/^/    /'
	fi
	if [[ -n "$forkserver" ]]; then
		echo "  a forking server on the real prctl (patched VM, qemu TCG; PostgreSQL 15, pgbench -C -S, without then with the agent):"
		echo "    $forkserver"
	fi
	if [[ -n "$latency" ]]; then
		echo "  fork->applied on the real prctl (patched VM, qemu TCG: relative figures; ms from the fork request):"
		sed 's/^/    /' <<<"$latency"
	fi
	if [[ -n "$forkrace$pidreuse" ]]; then
		echo "  fork events before the child's cgroup, and PID reuse with wraparound (patched VM):"
		sed '/^$/d; s/^/    /' <<<"$forkrace
$pidreuse"
	fi
	if [[ -n "$forklag" ]]; then
		echo "  fork->applied of the agent binary on the real prctl (patched VM, qemu TCG; its own histogram, from the"
		echo "  kernel's fork event to the SET's return, as bucket bounds; the workload's side from the child's creation):"
		echo "    $forklag"
	fi
	if [[ -n "$idlecost" ]]; then
		echo "  agent idle cost on the real prctl (patched VM, same boot, same tasks; CPU seconds over the window):"
		echo "    $idlecost"
	fi
	if [[ -n "$effect_table" ]]; then
		echo "  effect experiment (patched VM, qemu TCG: memory latency is the same on both nodes, so"
		echo "  throughput is not the result; locality, migrations and faults are), picture $out/effect-locality.svg:"
		sed 's/^/    /' <<<"$effect_table"
	fi
	if ((failed)); then echo "KERNEL LAB: FAIL"; else echo "KERNEL LAB: PASS"; fi
} | tee "$out/summary"
# A passing run in a directory of its own keeps only its summary, the effect tables and
# their pictures (the boots' logs and initramfs are ~500 MB).
if ((!failed)) && [[ -n "$own_out" ]]; then
	find "$out" -mindepth 1 -maxdepth 1 ! -name summary ! -name 'effect-*table.md' ! -name 'effect-*locality.svg' -exec rm -rf {} +
	echo "kept: $out/summary and the effect tables and pictures ($out/effect-*)" >&2
fi
exit "$failed"
