#!/bin/sh
# Tests vm-launcher without a real QEMU: its helpers (sourced with VM_LAUNCHER_LIB=1), and, where
# qemu-img, genisoimage and socat are installed (as in the image), its whole run against a fake
# qemu-system-x86_64 that answers SIGTERM's power-off request as a guest would.
#
#   sh images/vm-launcher/test.sh             runs the tests under every shell found:
#                                             sh, dash, busybox sh, bash
#   TEST_SHELL=dash dash images/vm-launcher/test.sh   runs them under one shell
#
# The launcher must work under whichever shell the image's /bin/sh is, hence several shells.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)

# Without TEST_SHELL: run this file once per shell available, and sum up.
if [ -z "${TEST_SHELL:-}" ]; then
	failed_shells=0
	for shell in sh dash "busybox sh" bash; do
		command -v "${shell%% *}" >/dev/null 2>&1 || continue
		printf '== %s\n' "$shell"
		# shellcheck disable=SC2086 # "busybox sh" is a command and its argument.
		TEST_SHELL=$shell $shell "$HERE/test.sh" || failed_shells=$((failed_shells + 1))
	done
	[ "$failed_shells" -eq 0 ] && echo "all shells passed"
	exit "$failed_shells"
fi

PASS=0
FAIL=0
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# check NAME WANT GOT
check() {
	if [ "$2" = "$3" ]; then
		PASS=$((PASS + 1))
	else
		FAIL=$((FAIL + 1))
		printf 'FAIL %s: want [%s], got [%s]\n' "$1" "$2" "$3"
	fi
}

# Only the functions: nothing starts. The launcher's `set -eu` applies to this shell from here,
# so every call that may fail is written `x=$(f) || x=ERR`.
VM_LAUNCHER_LIB=1
VM_RUN_DIR=$WORK/run
# shellcheck source=vm-launcher source-path=SCRIPTDIR
. "$HERE/vm-launcher"

# --- VM_MEMORY and VM_DATA_DISK_SIZE: quantity -> MiB, rounded up. ERR: refused.
while read -r quantity want; do
	got=$(to_mib "$quantity" 2>/dev/null) || got=ERR
	check "to_mib $quantity" "$want" "$got"
done <<'EOF'
2G 1908
1Gi 1024
1536Mi 1536
512M 489
3000000000 2862
0 0
1 1
1048576 1
1048577 2
1k 1
1K 1
1Ki 1
1025Ki 2
10Gi 10240
020Gi 20480
1T 953675
1Ti 1048576
1P 953674317
1Pi 1073741824
1.5Gi ERR
1e9 ERR
1Ei ERR
1500m ERR
-1Gi ERR
Gi ERR
2GB ERR
9999999999999999Gi ERR
EOF
got=$(to_mib "" 2>/dev/null) || got=ERR
check "to_mib empty" ERR "$got"

# --- VM_PORTS -> user-mode networking's hostfwd options.
while read -r ports want; do
	got=$(hostfwd_args "$ports" 2>/dev/null) || got=ERR
	check "hostfwd_args $ports" "$want" "$got"
done <<'EOF'
tcp:22,tcp:8080,udp:53 ,hostfwd=tcp:0.0.0.0:22-:22,hostfwd=tcp:0.0.0.0:8080-:8080,hostfwd=udp:0.0.0.0:53-:53
tcp:22 ,hostfwd=tcp:0.0.0.0:22-:22
tcp:22, ,hostfwd=tcp:0.0.0.0:22-:22
tcp:022 ,hostfwd=tcp:0.0.0.0:22-:22
udp:65535 ,hostfwd=udp:0.0.0.0:65535-:65535
sctp:22 ERR
TCP:22 ERR
tcp:0 ERR
tcp:65536 ERR
tcp ERR
22 ERR
tcp:ssh ERR
tcp:22:22 ERR
EOF
got=$(hostfwd_args "" 2>/dev/null) || got=ERR
check "hostfwd_args empty" "" "$got"

check "ports_below 1024" "22 53" "$(ports_below tcp:22,tcp:8080,udp:53 1024)"
check "ports_below 0" "" "$(ports_below tcp:22 0)"
check "qemu_escape" "/boot-disk/a,,b.img" "$(qemu_escape /boot-disk/a,b.img)"

# --- Data disk size: 95% of the claim, capped by what the volume can hold (less 64 MiB).
check "data disk, free space unknown" 9728 "$(data_disk_target_mib 10240 "" 0)"
check "data disk, roomy volume" 9728 "$(data_disk_target_mib 10240 100000 0)"
check "data disk, ext4 reserve" 9336 "$(data_disk_target_mib 10240 9400 0)"
check "data disk, counts its own blocks" 8936 "$(data_disk_target_mib 10240 5000 4000)"

# --- The boot image in /boot-disk.
boot=$WORK/boot
mkdir -p "$boot"
got=$(find_boot_image "$boot" 2>/dev/null) || got=ERR
check "find_boot_image empty" ERR "$got"
: >"$boot/disk"
check "find_boot_image only file" "$boot/disk" "$(find_boot_image "$boot")"
: >"$boot/other"
got=$(find_boot_image "$boot" 2>/dev/null) || got=ERR
check "find_boot_image two files" ERR "$got"
: >"$boot/b.raw"
: >"$boot/a.img"
check "find_boot_image img before raw" "$boot/a.img" "$(find_boot_image "$boot")"
: >"$boot/z.qcow2"
check "find_boot_image qcow2 first" "$boot/z.qcow2" "$(find_boot_image "$boot")"

if ! command -v qemu-img >/dev/null 2>&1 || ! command -v genisoimage >/dev/null 2>&1 ||
	! command -v socat >/dev/null 2>&1; then
	echo "qemu-img, genisoimage or socat missing: skipping the disk, seed and run tests"
	printf '%s passed, %s failed\n' "$PASS" "$FAIL"
	[ "$FAIL" -eq 0 ]
	exit
fi

# --- Boot format: probed once, then remembered, whatever the guest writes into the disk.
mkdir -p "$VM_RUN_DIR"
fmt=$WORK/fmt
mkdir -p "$fmt"
qemu-img create -q -f qcow2 "$fmt/ubuntu.img" 16M
qemu-img create -q -f raw "$fmt/plain.img" 16M
qemu-img create -q -f qcow2 -b "$fmt/ubuntu.img" -F qcow2 "$fmt/overlay.qcow2"
check "probe_format qcow2 named .img" qcow2 "$(probe_format "$fmt/ubuntu.img")"
check "probe_format raw" raw "$(probe_format "$fmt/plain.img")"
got=$(probe_format "$fmt/overlay.qcow2" 2>/dev/null) || got=ERR
check "probe_format refuses a backing file" ERR "$got"
check "boot_format first probe" raw "$(boot_format "$fmt/plain.img")"
# The guest "writes" a qcow2 header over its raw disk: the pod keeps reading it as raw.
cp "$fmt/ubuntu.img" "$fmt/plain.img"
check "boot_format remembered" raw "$(boot_format "$fmt/plain.img")"
rm -f "$VM_RUN_DIR/boot-format"

# --- Data disk: created sparse, grown, never shrunk.
VM_DATA_DIR=$WORK/data
DATA_DIR=$VM_DATA_DIR
mkdir -p "$DATA_DIR"
disk=$DATA_DIR/disk.img
size_mib() { echo $(($(stat -c %s "$1") / 1048576)); }
prepare_data_disk "$disk" 100Mi 2>/dev/null
check "data disk created at 95%" 95 "$(size_mib "$disk")"
# Sparse: qemu-img allocates the first block only.
check "data disk sparse" yes "$([ $(($(stat -c '%b * %B' "$disk"))) -lt 1048576 ] && echo yes)"
printf 'user data' | dd of="$disk" conv=notrunc 2>/dev/null
prepare_data_disk "$disk" 200Mi 2>/dev/null
check "data disk grown" 190 "$(size_mib "$disk")"
prepare_data_disk "$disk" 100Mi 2>/dev/null
check "data disk never shrunk" 190 "$(size_mib "$disk")"
check "data disk kept its data" "user data" "$(head -c 9 "$disk")"

# --- NoCloud seed from the Secret's files, which the kubelet mounts as symlinks.
ci=$WORK/cloud-init
mkdir -p "$ci/..2024_01_01" "$VM_RUN_DIR"
printf '#cloud-config\nhostname: t\n' >"$ci/..2024_01_01/userdata"
printf 'instance-id: 1\n' >"$ci/..2024_01_01/metadata"
ln -s ..2024_01_01 "$ci/..data"
ln -s ..data/userdata "$ci/userdata"
ln -s ..data/metadata "$ci/metadata"
CLOUD_INIT_DIR=$ci
make_seed_iso "$WORK/seed.iso"
check "seed label" "Volume id: cidata" "$(isoinfo -d -i "$WORK/seed.iso" | grep '^Volume id:')"
check "seed user-data" "$(cat "$ci/userdata")" "$(isoinfo -J -i "$WORK/seed.iso" -x /user-data)"
check "seed meta-data" "instance-id: 1" "$(isoinfo -J -i "$WORK/seed.iso" -x /meta-data)"

# --- The whole run, against a fake QEMU: it records its arguments, then either exits with
# FAKE_QEMU_EXIT or, as a guest would, exits 0 once QMP has asked FAKE_QEMU_PRESSES times (1 by
# default) for system_powerdown: a guest still booting ignores the first presses.
fake=$WORK/bin
mkdir -p "$fake"
cat >"$fake/qemu-system-x86_64" <<'EOF'
#!/bin/sh
printf '%s\n' "$@" >"$FAKE_QEMU_ARGS"
[ -z "${FAKE_QEMU_EXIT:-}" ] || exit "$FAKE_QEMU_EXIT"
for arg; do
	case $arg in unix:*) sock=${arg#unix:} ;; esac
done
presses=0
while [ "$presses" -lt "${FAKE_QEMU_PRESSES:-1}" ]; do
	socat -u "UNIX-LISTEN:${sock%%,*}" STDOUT | grep -q '"system_powerdown"' && presses=$((presses + 1))
done
exit 0
EOF
chmod +x "$fake/qemu-system-x86_64"
qemu-img create -q -f qcow2 "$boot/z.qcow2" 16M

# run_launcher [SIGNAL]: runs the launcher under TEST_SHELL, signals it once QEMU is up, and
# prints its exit status.
run_launcher() {
	rm -f "$VM_RUN_DIR/qmp.sock" "$WORK/args"
	# shellcheck disable=SC2086 # "busybox sh" is a command and its argument.
	env -u VM_LAUNCHER_LIB PATH="$fake:$PATH" FAKE_QEMU_ARGS="$WORK/args" VM_POWERDOWN_REPEAT_SECONDS=1 \
		VM_BOOT_DIR="$boot" VM_DATA_DIR="$DATA_DIR" VM_CLOUD_INIT_DIR="$ci" VM_RUN_DIR="$VM_RUN_DIR" \
		VM_CPUS="${T_CPUS:-2}" VM_MEMORY=2G VM_ACCEL=tcg VM_DATA_DISK_SIZE=200Mi VM_PORTS=tcp:2222,udp:5353 \
		$TEST_SHELL "$HERE/vm-launcher" >"$WORK/out" 2>&1 &
	pid=$!
	if [ -n "${1:-}" ]; then
		tries=0
		while [ ! -S "$VM_RUN_DIR/qmp.sock" ] && [ "$tries" -lt 100 ]; do
			sleep 0.1
			tries=$((tries + 1))
		done
		kill "-$1" "$pid"
	fi
	status=0
	wait "$pid" || status=$?
	echo "$status"
}

check "SIGTERM: guest powered off, exit 0" 0 "$(run_launcher TERM)"
grep -q 'asked the guest to power off' "$WORK/out" || {
	FAIL=$((FAIL + 1))
	echo "FAIL SIGTERM log:"
	cat "$WORK/out"
}
args=$(tr '\n' ' ' <"$WORK/args")
for want in "-machine q35" "-accel tcg" "-cpu max" "-smp 2" "-m 1908M" "-nographic" \
	"-serial stdio" "-qmp unix:$VM_RUN_DIR/qmp.sock,server=on,wait=off" \
	"user,id=net0,hostfwd=tcp:0.0.0.0:2222-:2222,hostfwd=udp:0.0.0.0:5353-:5353" \
	"file=$boot/z.qcow2,format=qcow2" "file=$disk,format=raw" \
	"file=$VM_RUN_DIR/seed.iso,format=raw,readonly=on" "-action panic=exit-failure"; do
	case $args in
	*"$want"*) check "qemu args: $want" ok ok ;;
	*) check "qemu args: $want" present "missing from: $args" ;;
	esac
done
case $args in
*-no-reboot*) check "no -no-reboot" absent present ;;
*) check "no -no-reboot" absent absent ;;
esac

FAKE_QEMU_PRESSES=3
export FAKE_QEMU_PRESSES
check "SIGTERM: power button pressed until the guest listens" 0 "$(run_launcher TERM)"
check "SIGTERM: presses repeated" 2 "$(grep -c 'pressing the power button again' "$WORK/out")"
unset FAKE_QEMU_PRESSES

FAKE_QEMU_EXIT=1
export FAKE_QEMU_EXIT
check "QEMU fails: its status" 1 "$(run_launcher)"
FAKE_QEMU_EXIT=0
check "guest powers off by itself: 0" 0 "$(run_launcher)"
unset FAKE_QEMU_EXIT

got=$(T_CPUS=0 run_launcher)
check "VM_CPUS=0 refused" 1 "$got"

printf '%s passed, %s failed\n' "$PASS" "$FAIL"
[ "$FAIL" -eq 0 ]
