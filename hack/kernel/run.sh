#!/usr/bin/env bash
# Boots a kernel-lab kernel under qemu (TCG, two NUMA nodes) with an initramfs
# made of test/kernellab/init as /init and the given Go test binaries, and
# collects what they printed and the report files they wrote.
#
# Usage: hack/kernel/run.sh [options] [NAME=]TEST...
#   TEST is a static test binary (`CGO_ENABLED=0 go test -c`) or a Go package
#   (./test/kernellab/smoke), which is compiled here with CGO_ENABLED=0 and
#   -tags host,kernellab: the VM runs its tests as root, so the host tier is in,
#   and the kernel lab's own in-VM tests (test/kernellab) carry the kernellab tag. NAME
#   (default: the binary's or package's base name) names its results; the same
#   TEST may run twice under two names, with different --test-env.
# Options:
#   --kernel patched|control|FILE  kernel to boot (default patched); patched and
#                           control are the ones hack/kernel/build.sh caches
#   --out DIR               results directory (default: a new /tmp/kernellab-KERNEL.*)
#   --env KEY=VALUE         environment of every test binary (repeatable)
#   --test-env NAME:KEY=VALUE  environment of one test binary (repeatable)
#   --args "ARG ..."        arguments of every test binary (default: -test.v)
#   --test-args "NAME:ARG ..."  arguments of one test binary instead (repeatable): a
#                           boot's choice of tests, e.g. "engine:-test.v -test.run=^TestX$"
#   --test-timeout DURATION per-binary timeout inside the VM (Go syntax, default 10m)
#   --timeout SECONDS       hard limit for the whole VM (default 900)
#   --append "PARAM ..."    extra kernel command line parameters
#   --smp N, --mem MiB      vCPUs and memory, split evenly over the two nodes
#                           (default 2 and 2048)
#   --file NAME=PATH        put PATH into the initramfs as /kernellab/files/NAME
#                           (repeatable): binaries and configs the tests use
#   --guestfwd SPEC         give the VM a virtio-net NIC on qemu's user network with
#                           restrict=on (the guest reaches no host or outside address) and
#                           this one forward, in qemu's guestfwd form, e.g.
#                           "tcp:10.0.2.100:6443-cmd:apihost fwd 127.0.0.1:PORT" (each
#                           guest connection runs the command, its stdin/stdout the
#                           connection); the init sets eth0 to 10.0.2.15/24 and lo up
#   --modules DIR           load DIR's modules (*.ko.xz) at boot in the order of
#                           DIR/order; with --guestfwd on the control kernel, the
#                           virtio-net modules build.sh cached beside it
#   --quiet                 do not echo the serial console while it runs
# Every test binary sees KERNELLAB_KERNEL=patched|control|custom (the --kernel
# kind; --env can override it), CI=true when the host has it (so a test whose
# precondition is missing fails, internal/testutil/testenv), and, from the init, KERNELLAB_REPORT_DIR and
# NUMAPREF_CONFORMANCE_REPORT: every file it leaves in KERNELLAB_REPORT_DIR
# comes back as DIR/reports/NAME/FILE.
# Results in DIR: console.log (the raw serial console), tests/NAME.log,
# reports/NAME/..., kmsg.log (kernel warnings and worse), summary.
# Exit status: 0 every binary passed and the VM powered off; 1 a binary failed
# or the kernel warned; 2 the VM did not finish (timeout, panic, no power-off);
# 3 usage or setup error.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

log() { printf 'kernellab: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 3; }

kernel_kind=patched out="" test_args="-test.v" test_timeout=10m vm_timeout=900
extra_append="" smp=2 mem=2048 quiet=0 guestfwd="" modules=""
envs=() test_envs=() test_argv=() tests=() files=()
while (($# > 0)); do
	case "$1" in
	--kernel) kernel_kind="${2:?}"; shift 2 ;;
	--out) out="${2:?}"; shift 2 ;;
	--env) envs+=("${2:?}"); shift 2 ;;
	--test-env) test_envs+=("${2:?}"); shift 2 ;;
	--args) test_args="${2?}"; shift 2 ;;
	--test-args) test_argv+=("${2:?}"); shift 2 ;;
	--test-timeout) test_timeout="${2:?}"; shift 2 ;;
	--timeout) vm_timeout="${2:?}"; shift 2 ;;
	--append) extra_append="${2?}"; shift 2 ;;
	--smp) smp="${2:?}"; shift 2 ;;
	--mem) mem="${2:?}"; shift 2 ;;
	--quiet) quiet=1; shift ;;
	--file) files+=("${2:?}"); shift 2 ;;
	--guestfwd) guestfwd="${2:?}"; shift 2 ;;
	--modules) modules="${2:?}"; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	--) shift; tests+=("$@"); break ;;
	-*) die "unknown option $1" ;;
	*) tests+=("$1"); shift ;;
	esac
done
((${#tests[@]} > 0)) || die "no test binary or package given (see --help)"
if ! [[ "$smp" =~ ^[0-9]+$ ]] || ((smp < 2 || smp % 2 != 0)); then
	die "--smp must be even and at least 2 (half the vCPUs per node)"
fi
if ! [[ "$mem" =~ ^[0-9]+$ ]] || ((mem < 256 || mem % 2 != 0)); then
	die "--mem must be an even number of MiB, at least 256"
fi
[[ "$vm_timeout" =~ ^[0-9]+$ ]] || die "--timeout takes seconds"
for e in "${envs[@]}"; do
	[[ "$e" =~ ^[A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*$ ]] || die "--env $e: want KEY=VALUE without blanks"
done
for e in "${test_envs[@]}"; do
	[[ "$e" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*:[A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*$ ]] ||
		die "--test-env $e: want NAME:KEY=VALUE without blanks"
done
for f in "${files[@]}"; do
	[[ "$f" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*=.+$ && -f "${f#*=}" ]] || die "--file $f: want NAME=PATH of an existing file"
done
[[ "$guestfwd" != *,* ]] || die "--guestfwd $guestfwd: a comma would end qemu's option"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: run hack/kernel/build.sh"

# gen_init_cpio prints the kernel's own initramfs tool: the patched build's, or
# else one compiled from the same Debian kernel source.
gen_init_cpio() {
	local dir tool src
	if dir="$("$here/build.sh" --path patched 2>/dev/null)"; then
		echo "$dir/gen_init_cpio"
		return
	fi
	tool="${NUMAPREF_CACHE:-$HOME/.cache/numapref}/kernel/gen_init_cpio-$(dpkg-query -W -f='${Version}' linux-source-6.12)"
	if [[ ! -x "$tool" ]]; then
		log "compiling usr/gen_init_cpio from /usr/src/linux-source-6.12.tar.xz"
		mkdir -p "$(dirname "$tool")"
		src="$(mktemp --suffix=.c)"
		tar -xJOf /usr/src/linux-source-6.12.tar.xz linux-source-6.12/usr/gen_init_cpio.c >"$src"
		gcc -O2 -o "$tool.tmp" "$src" && mv "$tool.tmp" "$tool"
		rm -f "$src"
	fi
	echo "$tool"
}

case "$kernel_kind" in
patched)
	kernel="$("$here/build.sh" --path patched)/bzImage" || die "build the patched kernel first: hack/kernel/build.sh"
	;;
control) kernel="$("$here/build.sh" --path control)/bzImage" || die "build the control kernel: hack/kernel/build.sh control" ;;
*)
	[[ -f "$kernel_kind" ]] || die "--kernel $kernel_kind: not patched, control or a file"
	kernel="$(realpath "$kernel_kind")"
	kernel_kind=custom
	;;
esac
if [[ -n "$guestfwd" && -z "$modules" && "$kernel_kind" == control ]]; then
	modules="$("$here/build.sh" --path control)/modules"
fi
if [[ -n "$modules" ]]; then
	[[ -f "$modules/order" ]] || die "--modules $modules: no order file"
fi
gen_init_cpio="$(gen_init_cpio)" || die "no usr/gen_init_cpio: run hack/kernel/build.sh"

if [[ -z "$out" ]]; then
	out="$(mktemp -d "/tmp/kernellab-$kernel_kind.XXXXXX")"
else
	mkdir -p "$out"
	out="$(realpath "$out")"
	rm -rf "$out/initramfs" "$out/tests" "$out/reports" "$out/results" "$out/kmsg.log" "$out/summary"
fi
stage="$out/initramfs"
mkdir -p "$stage/bin" "$out/tests" "$out/reports"

# --- the initramfs ---------------------------------------------------------

log "building /init"
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$stage/init" ./test/kernellab/init)

is_static() { [[ "$(readelf -lW "$1" 2>/dev/null)" != *"program interpreter"* ]]; }

names=()
add_binary() { # NAME FILE
	local name="$1" file="$2" n=2
	while [[ " ${names[*]-} " == *" $name "* ]]; do
		name="$1-$n"
		n=$((n + 1))
	done
	[[ "$name" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "cannot name a test after $file"
	is_static "$file" || die "$file is dynamically linked: build it with CGO_ENABLED=0"
	cp "$file" "$stage/bin/$name.test"
	names+=("$name")
}
for spec in "${tests[@]}"; do
	name="" t="$spec"
	if [[ ! -e "$spec" && "$spec" =~ ^([A-Za-z0-9][A-Za-z0-9._-]*)=(.+)$ ]]; then
		name="${BASH_REMATCH[1]}" t="${BASH_REMATCH[2]}"
	fi
	if [[ -f "$t" ]]; then
		[[ -x "$t" ]] || die "$t is not executable"
		add_binary "${name:-$(basename "$t" .test)}" "$t"
	else
		log "compiling $t"
		name="${name:-$(basename "$t")}"
		(cd "$repo" && CGO_ENABLED=0 go test -c -trimpath -tags host,kernellab -o "$stage/$name.compiled" "$t") ||
			die "go test -c $t failed"
		[[ -f "$stage/$name.compiled" ]] || die "$t has no tests to compile"
		add_binary "$name" "$stage/$name.compiled"
		rm -f "$stage/$name.compiled"
	fi
done
for e in "${test_envs[@]}"; do
	[[ " ${names[*]} " == *" ${e%%:*} "* ]] || die "--test-env $e: no test named ${e%%:*} (tests: ${names[*]})"
done
declare -A args_of=()
for a in "${test_argv[@]}"; do
	[[ "$a" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*: ]] || die "--test-args $a: want NAME:ARG ..."
	[[ " ${names[*]} " == *" ${a%%:*} "* ]] || die "--test-args $a: no test named ${a%%:*} (tests: ${names[*]})"
	args_of[${a%%:*}]="${a#*:}"
done

{
	echo "# written by hack/kernel/run.sh"
	echo "timeout $test_timeout"
	echo "env KERNELLAB_KERNEL=$kernel_kind"
	[[ "${CI:-}" != true ]] || echo "env CI=true"
	for e in "${envs[@]}"; do echo "env $e"; done
	for n in "${names[@]}"; do echo "test $n /kernellab/bin/$n.test ${args_of[$n]-$test_args}"; done
	for e in "${test_envs[@]}"; do echo "testenv ${e%%:*} ${e#*:}"; done
} >"$stage/manifest"

{
	echo "dir /dev 0755 0 0"
	echo "nod /dev/console 0600 0 0 c 5 1"
	echo "dir /proc 0755 0 0"
	echo "dir /sys 0755 0 0"
	echo "dir /tmp 1777 0 0"
	echo "dir /kernellab 0755 0 0"
	echo "dir /kernellab/bin 0755 0 0"
	echo "file /init $stage/init 0755 0 0"
	echo "file /kernellab/manifest $stage/manifest 0644 0 0"
	for n in "${names[@]}"; do echo "file /kernellab/bin/$n.test $stage/bin/$n.test 0755 0 0"; done
	if ((${#files[@]} > 0)); then
		echo "dir /kernellab/files 0755 0 0"
		for f in "${files[@]}"; do echo "file /kernellab/files/${f%%=*} $(realpath "${f#*=}") 0755 0 0"; done
	fi
	if [[ -n "$guestfwd" ]]; then
		echo "iface eth0 10.0.2.15/24" >"$stage/net"
		echo "file /kernellab/net $stage/net 0644 0 0"
	fi
	if [[ -n "$modules" ]]; then
		echo "dir /kernellab/modules 0755 0 0"
		echo "file /kernellab/modules/order $(realpath "$modules/order") 0644 0 0"
		while read -r m; do
			[[ -n "$m" ]] && echo "file /kernellab/modules/$(basename "$m") $(realpath "$modules/$(basename "$m")") 0644 0 0"
		done <"$modules/order"
	fi
} >"$stage/files.list"
"$gen_init_cpio" "$stage/files.list" | gzip -1 >"$stage/initramfs.cpio.gz"
log "initramfs: $(stat -c %s "$stage/initramfs.cpio.gz") bytes, tests: ${names[*]}"

# --- the VM ------------------------------------------------------------------

half_cpus=$((smp / 2)) half_mem=$((mem / 2))
qemu=(
	qemu-system-x86_64 -accel tcg -m "$mem"
	# One socket per node: with both nodes' CPUs in one socket (qemu's
	# default), the guest WARNs that LLC siblings sit on different nodes.
	-smp "$smp,sockets=2,cores=$half_cpus,threads=1"
	-object "memory-backend-ram,id=m0,size=${half_mem}M"
	-object "memory-backend-ram,id=m1,size=$((mem - half_mem))M"
	-numa "node,nodeid=0,cpus=0-$((half_cpus - 1)),memdev=m0"
	-numa "node,nodeid=1,cpus=$half_cpus-$((smp - 1)),memdev=m1"
	-kernel "$kernel" -initrd "$stage/initramfs.cpio.gz"
	-append "console=ttyS0 panic=-1 $extra_append"
	-nographic -no-reboot
)
if [[ -n "$guestfwd" ]]; then
	# restrict=on: no packet of the guest reaches the host or beyond; only the forward.
	# shellcheck disable=SC2054 # the commas are qemu's option syntax, inside one argument
	qemu+=(-netdev "user,id=n0,restrict=on,net=10.0.2.0/24,guestfwd=$guestfwd" -device virtio-net-pci,netdev=n0)
else
	qemu+=(-nic none)
fi
printf '%q ' "${qemu[@]}" >"$out/qemu.cmd"
echo >>"$out/qemu.cmd"

log "booting $kernel_kind kernel $kernel (timeout ${vm_timeout}s)"
start=$(date +%s.%N)
set +e
if ((quiet)); then
	timeout --kill-after=10 "$vm_timeout" "${qemu[@]}" </dev/null >"$out/console.log" 2>&1
	qemu_rc=$?
else
	timeout --kill-after=10 "$vm_timeout" "${qemu[@]}" </dev/null 2>&1 | tee "$out/console.log"
	qemu_rc=${PIPESTATUS[0]}
fi
set -e
wall=$(echo "$(date +%s.%N) - $start" | bc)

# --- the results -------------------------------------------------------------

# Split the console log along the markers the init prints (see
# test/kernellab/init/console.go) into tests/, reports/, kmsg.log and a results
# table: "name status exit elapsed" per test, then "vm key value" facts.
awk -v out="$out" '
function field(key,   s) {
	if (!match($0, " " key "=[^ >]*")) return ""
	s = substr($0, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
	return s
}
function safe(path) { return path !~ /(^|\/)\.\.(\/|$)/ && path !~ /^\// && path != "" }
{ gsub(/\r/, "") }
intest && index($0, "<<<KERNELLAB END-TEST ") {
	pre = substr($0, 1, index($0, "<<<KERNELLAB END-TEST ") - 1)
	if (pre != "") print pre >> testlog
	close(testlog)
	print name, field("status"), field("exit"), field("elapsed") >> (out "/results")
	intest = 0
	next
}
intest { print >> testlog; next }
inreport && index($0, "<<<KERNELLAB END-REPORT ") == 1 { close(report); inreport = 0; next }
inreport { print >> report; next }
inkmsg && index($0, "<<<KERNELLAB END-KMSG>>>") == 1 { inkmsg = 0; next }
inkmsg { print >> (out "/kmsg.log"); next }
index($0, "<<<KERNELLAB BEGIN-TEST ") == 1 {
	name = field("name"); testlog = out "/tests/" name ".log"
	printf "" > testlog
	intest = 1
	next
}
index($0, "<<<KERNELLAB BEGIN-REPORT ") == 1 {
	file = field("file")
	if (!safe(file)) { print "kernellab: skipping report with unsafe name " file > "/dev/stderr"; next }
	report = out "/reports/" field("name") "/" file
	dir = report; sub(/\/[^\/]*$/, "", dir)
	system("mkdir -p \"" dir "\"")
	printf "" > report
	inreport = 1
	next
}
index($0, "<<<KERNELLAB BEGIN-KMSG>>>") == 1 { inkmsg = 1; printf "" > (out "/kmsg.log"); next }
index($0, "<<<KERNELLAB INIT ") == 1 { print "vm init-uptime", field("uptime") >> (out "/results"); print "vm kernel", field("kernel") >> (out "/results"); print "vm nodes", field("nodes") >> (out "/results") }
index($0, "<<<KERNELLAB PLAN ") == 1 { print "vm plan", field("tests") >> (out "/results") }
index($0, "<<<KERNELLAB SUMMARY ") == 1 { print "vm summary", field("tests") "/" field("passed") "/" field("failed") >> (out "/results") }
index($0, "<<<KERNELLAB POWEROFF ") == 1 { print "vm poweroff-uptime", field("uptime") >> (out "/results") }
/reboot: Power down/ { print "vm powered-off yes" >> (out "/results") }
/Kernel panic/ { print "vm panic yes" >> (out "/results") }
END { if (intest) print name, "incomplete", "-", "-" >> (out "/results") }
' <"$out/console.log"
touch "$out/results" "$out/kmsg.log"

fact() { awk -v k="$1" '$1 == "vm" && $2 == k { v = $3 } END { print v }' "$out/results"; }
status=0
{
	echo "kernel: $kernel_kind $kernel ($(fact kernel), nodes $(fact nodes))"
	# The init's plan is the manifest, unless kernellab.run (--append) chose.
	plan="$(fact plan)"
	if [[ -n "$plan" && "$plan" != - ]]; then
		IFS=, read -r -a planned <<<"$plan"
	else
		planned=("${names[@]}")
	fi
	for n in "${names[@]}"; do
		[[ " ${planned[*]} " == *" $n "* ]] || printf 'test %-20s %s\n' "$n" "not run (kernellab.run)"
	done
	for n in "${planned[@]}"; do
		line="$(awk -v n="$n" '$1 == n { print $2, "exit=" $3, $4 }' "$out/results")"
		[[ -n "$line" ]] || line="missing"
		printf 'test %-20s %s\n' "$n" "$line"
		[[ "$line" == pass* ]] || status=1
	done
	if grep -Eq 'WARNING:|BUG:|INFO:|UBSAN:|Oops|general protection|Call Trace|cut here' "$out/kmsg.log"; then
		echo "kernel warnings (kmsg.log):"
		grep -E 'WARNING:|BUG:|INFO:|UBSAN:|Oops|general protection|Call Trace|cut here' "$out/kmsg.log" | awk 'NR <= 20 { print "  " $0 }'
		status=1
	fi
	vm_ok=1
	if ((qemu_rc == 124 || qemu_rc == 137)); then
		echo "vm: killed after the ${vm_timeout}s timeout"
		vm_ok=0
	elif [[ "$(fact panic)" == yes ]]; then
		echo "vm: kernel panic (see console.log)"
		vm_ok=0
	elif [[ "$(fact powered-off)" != yes ]]; then
		echo "vm: ended without powering off (qemu exit $qemu_rc)"
		vm_ok=0
	elif ((qemu_rc != 0)); then
		echo "vm: qemu exited $qemu_rc"
		vm_ok=0
	fi
	((vm_ok)) || status=2 # a VM that did not finish outranks a failed test
	init_uptime="$(fact init-uptime)" off_uptime="$(fact poweroff-uptime)"
	printf 'vm: boot to power-off %.1f s wall; guest uptime at /init %s s, at power-off %s s\n' \
		"$wall" "${init_uptime:--}" "${off_uptime:--}"
	echo "results: $out"
} >"$out/summary"
sed 's/^/kernellab: /' "$out/summary" >&2
exit "$status"
