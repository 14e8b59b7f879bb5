#!/usr/bin/env bash
# Builds the kernel lab's two kernels and caches them outside the work tree:
#
#   patched  Debian's linux-source-6.12 with hack/kernel/patches/*.patch applied
#            (the proposed PR_PREFERRED_NID prctl and the cpuset-skip series),
#            configured from `make tinyconfig` + hack/kernel/config.fragment.
#   control  Debian's own unpatched linux-image-6.12.*-amd64-unsigned, the
#            "mainline-like" kernel on which the prctl must be absent.
#
# Each lands in ${NUMAPREF_CACHE:-$HOME/.cache/numapref}/kernel/<kind>-<key>/,
# where <key> hashes everything the result depends on, and is rebuilt only when
# the key changes. The patched directory holds bzImage, config, vmlinux,
# gen_init_cpio (the kernel's own initramfs tool, which run.sh uses) and the
# build and patch logs; the control directory holds bzImage, the package name
# it came from, and modules/: the xz-compressed modules its virtio-net device
# needs (Debian builds them as modules; the lab's /init loads them in order).
#
# Usage: hack/kernel/build.sh [--path patched|control] [patched|control ...]
#   With no kind, builds both. --path prints the cached directory of a kind
#   and exits 1 if it has not been built for the current key.
# Environment: NUMAPREF_CACHE, NUMAPREF_KERNEL_JOBS (default 2),
#   NUMAPREF_KERNEL_KEEP_TREE=1 to keep the build tree for incremental work.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib/progress.sh
source "$here/../lib/progress.sh"
cache="${NUMAPREF_CACHE:-$HOME/.cache/numapref}/kernel"
source_pkg=linux-source-6.12
source_tarball=/usr/src/linux-source-6.12.tar.xz
jobs="${NUMAPREF_KERNEL_JOBS:-2}"

log() { printf '[kernel-build] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ensure_packages installs, in one apt-get run, whichever of the given Debian
# packages are not installed yet.
ensure_packages() {
	local missing=() p
	for p in "$@"; do
		if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
			missing+=("$p")
		fi
	done
	((${#missing[@]} == 0)) && return 0
	log "installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

pkg_version() { dpkg-query -W -f='${Version}' "$1"; }

# hash_inputs prints one sha256 over the named strings and files, in order.
hash_inputs() {
	{
		local item
		for item in "$@"; do
			if [[ -f "$item" ]]; then
				printf 'file %s %s\n' "$(basename "$item")" "$(sha256sum <"$item" | cut -d' ' -f1)"
			else
				printf 'value %s\n' "$item"
			fi
		done
	} | sha256sum | cut -c1-16
}

# A Kbuild output line for one object (compiled, assembled or generated).
kbuild_object_line='^  (CC|AS|HOSTCC|LD|AR|GEN|CPP|VDSO|UPD|MKCAP|POLICY|SYSTBL|SYSHDR|WRAP|OBJCOPY|RELOCS|ZOFFSET|VOFFSET|MKPIGGY|HOSTLD|BUILD|RSYM)[[:space:]]'

patch_files() { find "$here/patches" -maxdepth 1 -name '*.patch' | LC_ALL=C sort; }

patched_key() {
	local patches
	mapfile -t patches < <(patch_files)
	hash_inputs "$source_pkg=$(pkg_version "$source_pkg")" "${patches[@]}" \
		"$here/config.fragment" "$here/build.sh"
}

# control_package names Debian's unsigned amd64 image of the same upstream
# release as linux-source-6.12, or the newest 6.12 one the archive offers.
control_package() {
	local upstream name
	upstream="$(pkg_version "$source_pkg" | sed 's/-.*//')"
	name="linux-image-${upstream}+deb12-amd64-unsigned"
	if apt-cache show "$name" >/dev/null 2>&1; then
		echo "$name"
		return
	fi
	apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' |
		cut -d' ' -f1 | sort -V | tail -n1
}

control_key() {
	local pkg="$1"
	local version
	version="$(apt-cache show --no-all-versions "$pkg" | awk '/^Version:/ && !v { v = $2 } END { print v }')"
	hash_inputs "$pkg=$version" "$here/build.sh"
}

patched_dir() { echo "$cache/patched-$(patched_key)"; }
control_dir() { echo "$cache/control-$(control_key "$(control_package)")"; }

# verify_config fails, listing them, when options the fragment asks for did not
# survive olddefconfig (an unmet dependency drops them without a word).
verify_config() {
	local config="$1" fragment="$2" line name dropped=()
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*)
			grep -qxF "$line" "$config" || dropped+=("$line (got: $(grep -E "^(# )?${line%%=*}[= ]" "$config" || echo absent))")
			;;
		"# CONFIG_"*" is not set")
			name="${line#\# }"
			name="${name%% *}"
			grep -q "^$name=" "$config" && dropped+=("$line (got: $(grep "^$name=" "$config"))")
			;;
		esac
	done <"$fragment"
	if ((${#dropped[@]} > 0)); then
		log "options from $(basename "$fragment") missing in the final .config:"
		printf '  %s\n' "${dropped[@]}" >&2
		return 1
	fi
	log "all $(grep -c '^CONFIG_' "$fragment") options of $(basename "$fragment") are set"
}

build_patched() {
	local out work tree start end p
	out="$(patched_dir)"
	if [[ -s "$out/bzImage" && -x "$out/gen_init_cpio" ]]; then
		log "patched kernel cached: $out"
		return
	fi
	start=$(date +%s)
	work="$out.tmp"
	rm -rf "$work"
	mkdir -p "$work"
	log "unpacking $source_tarball ($source_pkg $(pkg_version "$source_pkg"))"
	tar -xJf "$source_tarball" -C "$work"
	tree="$work/linux-source-6.12"
	[[ -d "$tree" ]] || die "unexpected layout of $source_tarball"

	log "applying patches"
	while read -r p; do
		# Fuzz is allowed: PATCH 2/2's uapi hunk was posted against a newer
		# prctl.h. A hunk that fails leaves a .rej, which fails the build.
		printf '== %s\n' "$(basename "$p")" >>"$work/patch.log"
		patch -d "$tree" -p1 -N --fuzz=2 --no-backup-if-mismatch <"$p" >>"$work/patch.log" 2>&1 ||
			{ cat "$work/patch.log" >&2; die "patch $(basename "$p") did not apply"; }
	done < <(patch_files)
	if [[ -n "$(find "$tree" -name '*.rej' -print -quit)" ]]; then
		cat "$work/patch.log" >&2
		die "rejected hunks"
	fi
	grep -E 'fuzz|offset' "$work/patch.log" | sed 's/^/  /' >&2 || true

	log "configuring: tinyconfig + config.fragment"
	make -C "$tree" -s ARCH=x86_64 tinyconfig >"$work/config.log" 2>&1
	(cd "$tree" && ARCH=x86_64 scripts/kconfig/merge_config.sh -m .config "$here/config.fragment") >>"$work/config.log" 2>&1
	make -C "$tree" -s ARCH=x86_64 olddefconfig >>"$work/config.log" 2>&1
	verify_config "$tree/.config" "$here/config.fragment"

	log "make -j$jobs bzImage (log: $work/build.log)"
	# Kbuild prints one "  CC      path.o"-style line per object; the total is the count
	# of this machine's last build, or the count a cold build printed on these machines
	# (objects.estimate, kept out of the cache key so that measuring it again rebuilds
	# nothing).
	local objects
	objects="~$(cat "$here/objects.estimate")"
	[[ -s "$cache/patched-objects" ]] && objects="~$(cat "$cache/patched-objects")"
	progress_start "kernel patched" "$work/build.log" "$objects" objects "$kbuild_object_line"
	if ! nice -n 10 make -C "$tree" ARCH=x86_64 -j"$jobs" bzImage >"$work/build.log" 2>&1; then
		progress_stop
		tail -n 40 "$work/build.log" >&2
		die "kernel build failed; full log: $work/build.log"
	fi
	progress_stop
	grep -cE "$kbuild_object_line" "$work/build.log" >"$cache/patched-objects" || true
	# bzImage builds usr/ (the built-in initramfs) and with it this host tool.
	[[ -x "$tree/usr/gen_init_cpio" ]] || die "the build left no usr/gen_init_cpio"

	cp "$tree/arch/x86/boot/bzImage" "$tree/.config" "$tree/vmlinux" "$tree/usr/gen_init_cpio" "$work/"
	mv "$work/.config" "$work/config"
	if [[ "${NUMAPREF_KERNEL_KEEP_TREE:-0}" != 1 ]]; then
		rm -rf "$tree"
	fi
	rm -rf "$out"
	mv "$work" "$out"
	end=$(date +%s)
	log "patched kernel built in $((end - start)) s: $out/bzImage ($(stat -c %s "$out/bzImage") bytes)"
}

fetch_control() {
	local pkg out work dl deb start
	pkg="$(control_package)"
	[[ -n "$pkg" ]] || die "no linux-image-6.12.*+deb12-amd64-unsigned package in the apt lists"
	out="$cache/control-$(control_key "$pkg")"
	if [[ -s "$out/bzImage" ]]; then
		log "control kernel cached: $out ($pkg)"
		return
	fi
	start=$(date +%s)
	work="$out.tmp"
	rm -rf "$work"
	mkdir -p "$work/pkg"
	log "downloading $pkg"
	# apt-get download drops privileges to _apt, which must be able to reach
	# and write the directory: not one under root's home.
	dl="$(mktemp -d)"
	chmod 0777 "$dl"
	(cd "$dl" && apt-get download -qq "$pkg") >&2
	deb="$(find "$dl" -maxdepth 1 -name '*.deb' | head -n1)"
	[[ -n "$deb" ]] || die "apt-get download $pkg produced no .deb"
	dpkg-deb -x "$deb" "$work/pkg"
	cp "$(find "$work/pkg/boot" -name 'vmlinuz-*' | head -n1)" "$work/bzImage"
	cp "$(find "$work/pkg/boot" -name 'config-*' | head -n1)" "$work/config"
	# virtio_net needs net_failover, which needs failover: load order is this list's.
	mkdir -p "$work/modules"
	local m path
	for m in failover net_failover virtio_net; do
		path="$(find "$work/pkg/lib/modules" -name "$m.ko*" | head -n1)"
		[[ -n "$path" ]] || die "$pkg has no $m module"
		cp "$path" "$work/modules/"
		basename "$path" >>"$work/modules/order"
	done
	echo "$pkg $(dpkg-deb -f "$deb" Version)" >"$work/package"
	rm -rf "$work/pkg" "$dl"
	rm -rf "$out"
	mv "$work" "$out"
	log "control kernel ready in $(($(date +%s) - start)) s: $out/bzImage ($pkg)"
}

main() {
	local kinds=() path_of=""
	while (($# > 0)); do
		case "$1" in
		--path) path_of="${2:?--path needs patched or control}"; shift 2 ;;
		patched | control) kinds+=("$1"); shift ;;
		-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
		*) die "unknown argument $1" ;;
		esac
	done

	if [[ -n "$path_of" ]]; then
		local dir
		case "$path_of" in
		patched) dir="$(patched_dir)"; [[ -s "$dir/bzImage" && -x "$dir/gen_init_cpio" ]] ;;
		control) dir="$(control_dir)"; [[ -s "$dir/bzImage" ]] ;;
		*) die "--path takes patched or control" ;;
		esac || die "$path_of kernel not built for the current inputs; run hack/kernel/build.sh $path_of"
		echo "$dir"
		return
	fi

	((${#kinds[@]} > 0)) || kinds=(control patched)
	ensure_packages qemu-system-x86 "$source_pkg" flex bison libelf-dev bc cpio xz-utils patch build-essential
	mkdir -p "$cache"
	exec 9>"$cache/.build.lock"
	flock 9
	local kind
	for kind in "${kinds[@]}"; do
		case "$kind" in
		patched) build_patched ;;
		control) fetch_control ;;
		esac
	done
}

main "$@"
