#!/bin/sh
# Tests vm-launcher without a real QEMU: its helpers (sourced with VM_LAUNCHER_LIB=1), and, where
# qemu-img, genisoimage and socat are installed (as in the image), its whole run against a fake
# qemu-system-x86_64 that answers SIGTERM's power-off request as a guest would. The activity
# endpoint's handler reads fake kernel TCP tables; its TLS server is tested where openssl is
# installed too, to make its key and certificate (the image has no openssl).
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

# --- VM_CPU_MODEL -> -cpu: host under kvm and max under tcg by default; a model with its
# feature flags, nothing that could make QEMU do something else (`help` lists the models and
# exits 0, which the pod would take for a guest that powered off). ERR: refused.
while read -r accel model want; do
	[ "$model" != '""' ] || model=
	got=$(cpu_model "$accel" "$model" 2>/dev/null) || got=ERR
	check "cpu_model $accel '$model'" "$want" "$got"
done <<'EOF'
kvm "" host
tcg "" max
kvm host host
tcg max max
tcg Skylake-Server-v4 Skylake-Server-v4
kvm host,pmu=off,host-phys-bits=on host,pmu=off,host-phys-bits=on
tcg EPYC-Rome,x2apic=off EPYC-Rome,x2apic=off
tcg qemu64_v1.x qemu64_v1.x
tcg host ERR
kvm help ERR
kvm help,x=y ERR
tcg ? ERR
tcg -S ERR
tcg ,max ERR
tcg =max ERR
tcg max,+vmx,-svm max,+vmx,-svm
kvm EPYC,+avx2 EPYC,+avx2
tcg +max ERR
tcg max;reboot ERR
tcg max$(id) ERR
tcg max,x=/etc/passwd ERR
tcg max,x=a:b ERR
tcg max' ERR
tcg Haswellé ERR
EOF
got=$(cpu_model tcg "max -S" 2>/dev/null) || got=ERR
check "cpu_model with a space" ERR "$got"
got=$(cpu_model tcg "$(printf 'max\nhelp')" 2>/dev/null) || got=ERR
check "cpu_model with a newline" ERR "$got"

# --- The accelerator: TCG's translation cache is bounded (QEMU's default is 1 GiB, or an
# eighth of the node's memory, whatever the pod's limit).
check "accel_option kvm" kvm "$(accel_option kvm)"
check "accel_option tcg" "tcg,tb-size=128" "$(accel_option tcg)"
# KVM on a node that is not x86-64 (an arm64 one, whose KVM cannot run the x86-64 guest): refused
# with the reason, before QEMU would fail.
uname() { echo aarch64; }
got=$( (check_accel kvm) 2>&1) && got="passed: $got"
case $got in *"this node is aarch64: KVM runs the x86-64 guest only on an x86-64 node"*) got=refused ;; esac
check "check_accel kvm on an arm64 node" refused "$got"
unset -f uname

# --- The SSH port the readiness probe reads a banner from: VM_SSH_PORT, else tcp:22 of VM_PORTS.
while read -r ports setting want; do
	[ "$setting" != '""' ] || setting=
	[ "$want" != '""' ] || want=
	got=$(ssh_port "$ports" "$setting" 2>/dev/null) || got=ERR
	check "ssh_port $ports '$setting'" "$want" "$got"
done <<'EOF'
tcp:22,udp:53 "" 22
tcp:8080,tcp:022 "" 22
udp:22 "" ""
tcp:2222,udp:53 "" ""
tcp:2222,udp:53 2222 2222
tcp:22,tcp:2222 2222 2222
tcp:22,tcp:2222 02222 2222
tcp:22 2222 ERR
udp:2222 2222 ERR
tcp:22 none ""
tcp:22 ssh ERR
tcp:22 -1 ERR
EOF

# --- The guest's activity (VM_ACTIVITY_PORT): its port must not be a forwarded tcp one.
check "tcp_ports" "22 8080 65535" "$(tcp_ports tcp:22,udp:53,tcp:08080,tcp:65535,udp:22)"
check "tcp_ports_hex" "0016 1F90 FFFF" "$(tcp_ports_hex tcp:22,udp:53,tcp:08080,tcp:65535,udp:22)"
check "tcp_ports_hex, none" "" "$(tcp_ports_hex udp:53)"
while read -r ports setting want; do
	[ "$setting" != '""' ] || setting=
	[ "$want" != '""' ] || want=
	got=$(activity_port "$ports" "$setting" 2>/dev/null) || got=ERR
	check "activity_port $ports '$setting'" "$want" "$got"
done <<'EOF'
tcp:22 "" ""
tcp:22,udp:8443 8443 8443
tcp:22 08443 8443
tcp:22 65535 65535
tcp:22,tcp:8443 8443 ERR
tcp:022,udp:53 22 ERR
tcp:22 00022 ERR
tcp:22 0 ERR
tcp:22 65536 ERR
tcp:22 100000000000000000000 ERR
tcp:22 https ERR
tcp:22 -1 ERR
EOF

# Fake kernel TCP tables, as /proc/net/tcp and tcp6 write them (addresses as 32-bit words in the
# host's byte order: 10.42.0.7 is 07002A0A), for VM_PORTS=tcp:22,tcp:2222,udp:8080 on a pod at
# 10.42.0.7. Counted: an SSH session from a pod (10.42.1.5) through the Service, one through
# `kubectl port-forward` (from 127.0.0.1), one to port 2222, and in tcp6 a v4-mapped session
# from a pod and one from 127.0.0.1. Not counted: the listeners, the readiness probe (from
# 127.0.0.2) and its own end, a TIME_WAIT and a CLOSE_WAIT, a connection to 8080 (forwarded as
# udp only), the guest's own outgoing connection (to 8.8.8.8:443), and the v4-mapped probe.
act=$WORK/activity
mkdir -p "$act/busy" "$act/quiet" "$act/v4only" "$act/none" "$act/run"
rest='00000000:00000000 00:00000000 00000000   107        0 2000 1 0000000000000000 20 4 30 10 -1'
header='  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode'
header6='  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode'
{
	echo "$header"
	echo "   0: 00000000:0016 00000000:0000 0A $rest"
	echo "   1: 00000000:08AE 00000000:0000 0A $rest"
	echo "   2: 07002A0A:0016 05012A0A:D431 01 $rest"
	echo "   3: 0100007F:0016 0100007F:A1B2 01 $rest"
	echo "   4: 0100007F:0016 0200007F:B1C2 01 $rest"
	echo "   5: 0200007F:B1C2 0100007F:0016 01 $rest"
	echo "   6: 07002A0A:0016 05012A0A:D430 06 $rest"
	echo "   7: 07002A0A:1F90 05012A0A:D433 01 $rest"
	echo "   8: 07002A0A:C350 08080808:01BB 01 $rest"
	echo "   9: 07002A0A:08AE 05012A0A:D434 01 $rest"
} >"$act/busy/tcp"
{
	echo "$header6"
	echo "   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A $rest"
	echo "   1: 0000000000000000FFFF000007002A0A:0016 0000000000000000FFFF000005012A0A:D435 01 $rest"
	echo "   2: 0000000000000000FFFF00000100007F:0016 0000000000000000FFFF00000200007F:B1C3 01 $rest"
	echo "   3: 0000000000000000FFFF00000100007F:0016 0000000000000000FFFF00000100007F:A1B3 01 $rest"
	echo "   4: 0000000000000000FFFF000007002A0A:0016 0000000000000000FFFF000005012A0A:D436 08 $rest"
} >"$act/busy/tcp6"
# Nobody but the probe; and a kernel without IPv6 (no tcp6).
{
	echo "$header"
	echo "   0: 00000000:0016 00000000:0000 0A $rest"
	echo "   1: 0100007F:0016 0200007F:B1C2 01 $rest"
	echo "   2: 0200007F:B1C2 0100007F:0016 01 $rest"
} >"$act/quiet/tcp"
echo "$header6" >"$act/quiet/tcp6"
cp "$act/busy/tcp" "$act/v4only/tcp"
count() {
	got=$(PROC_NET_DIR=$act/$1 count_connections "$2" 2>/dev/null) || got=ERR
	check "count_connections $1 $2" "$3" "$got"
}
count busy tcp:22,tcp:2222,udp:8080 5
count busy tcp:22 4
count busy tcp:2222,tcp:8443 1
count busy udp:22,udp:8080 0
count busy "" 0
count quiet tcp:22,tcp:2222 0
count v4only tcp:22,tcp:2222 3
count none tcp:22 ERR

# `vm-launcher activity`, the endpoint's handler, run as socat runs it: the request on its input,
# the response on its output, with the container's environment. The token is a file of the
# cloud-init Secret (a symlink), with a newline at its end.
aci=$WORK/cloud-init-activity
mkdir -p "$aci/..2024_01_01"
printf 's3cret-T0ken\n' >"$aci/..2024_01_01/activity-token"
ln -s ..2024_01_01 "$aci/..data"
ln -s ..data/activity-token "$aci/activity-token"
# run_activity REQUEST [VAR=VALUE...]: feeds REQUEST (printf's format) to the handler and prints
# its response, CR as ~ and LF as |.
run_activity() {
	# shellcheck disable=SC2059 # the request is a format, for its \r\n.
	printf "$1" >"$WORK/request"
	shift
	# shellcheck disable=SC2086 # "busybox sh" is a command and its argument.
	env -u VM_LAUNCHER_LIB -u VM_LAUNCHER_TTY VM_RUN_DIR="$act/run" VM_CLOUD_INIT_DIR="$aci" \
		VM_PROC_NET_DIR="$act/busy" VM_PORTS=tcp:22,tcp:2222,udp:8080 "$@" \
		$TEST_SHELL "$HERE/vm-launcher" activity <"$WORK/request" 2>>"$WORK/activity.err" | tr '\r\n' '~|'
}
# status_of RESPONSE prints its status code.
status_of() {
	set -- "${1#HTTP/1.1 }"
	printf '%s\n' "${1%% *}"
}
# idle_of RESPONSE prints its idleSeconds.
idle_of() {
	set -- "${1##*\"idleSeconds\":}"
	printf '%s\n' "${1%\}}"
}
# within NAME LOW HIGH GOT
within() {
	if is_uint "$4" && [ "$4" -ge "$2" ] && [ "$4" -le "$3" ]; then
		check "$1" ok ok
	else
		check "$1" "$2 to $3" "$4"
	fi
}
now=$(date +%s)
touch -d "@$((now - 100))" "$act/run/activity"
good='GET /activity HTTP/1.1\r\nHost: 10.42.0.7:8443\r\nAuthorization: Bearer s3cret-T0ken\r\n\r\n'
check "activity: connected" \
	'HTTP/1.1 200 OK~|Content-Type: application/json~|Content-Length: 33~|Connection: close~|~|{"connections":5,"idleSeconds":0}' \
	"$(run_activity "$good")"
got=$(run_activity "$good" VM_PROC_NET_DIR="$act/quiet")
check "activity: nobody, body" '{"connections":0,"idleSeconds":S}' "$(printf '%s\n' "${got##*|}" | sed 's/:[0-9]*}$/:S}/')"
within "activity: nobody, idle since the mark" 100 110 "$(idle_of "$got")"
check "activity: no tcp port forwarded" 0 "$(run_activity "$good" VM_PORTS=udp:53 | sed 's/.*"connections":\([0-9]*\).*/\1/')"
# The console's terminal: its access time is its last input.
: >"$WORK/tty"
touch -a -d "@$((now - 30))" "$WORK/tty"
within "activity: console typed into since" 30 40 "$(idle_of "$(run_activity "$good" VM_PROC_NET_DIR="$act/quiet" VM_LAUNCHER_TTY="$WORK/tty")")"
touch -a -d "@$((now - 500))" "$WORK/tty"
within "activity: console idle longer than the mark" 100 110 "$(idle_of "$(run_activity "$good" VM_PROC_NET_DIR="$act/quiet" VM_LAUNCHER_TTY="$WORK/tty")")"
within "activity: console gone" 100 110 "$(idle_of "$(run_activity "$good" VM_PROC_NET_DIR="$act/quiet" VM_LAUNCHER_TTY="$WORK/nowhere")")"
touch -a -d "@$((now - 30))" "$WORK/tty"
check "activity: connected, the console does not matter" 0 "$(idle_of "$(run_activity "$good" VM_LAUNCHER_TTY="$WORK/tty")")"
touch -d "@$((now + 1000))" "$act/run/activity"
check "activity: never negative" 0 "$(idle_of "$(run_activity "$good" VM_PROC_NET_DIR="$act/quiet")")"
touch -d "@$((now - 100))" "$act/run/activity"
check "activity: HTTP/1.0, bare LF, names and scheme in any case" 200 \
	"$(status_of "$(run_activity 'GET /activity HTTP/1.0\nAUTHORIZATION:\tbEaReR   s3cret-T0ken \n\n')")"
# Refused: the token is never written back.
unauthorized='HTTP/1.1 401 Unauthorized~|WWW-Authenticate: Bearer~|Content-Length: 0~|Connection: close~|~|'
check "activity: wrong token" "$unauthorized" \
	"$(run_activity 'GET /activity HTTP/1.1\r\nAuthorization: Bearer s3cret-T0ke\r\n\r\n')"
check "activity: token and more" "$unauthorized" \
	"$(run_activity 'GET /activity HTTP/1.1\r\nAuthorization: Bearer s3cret-T0ken2\r\n\r\n')"
check "activity: no token" "$unauthorized" "$(run_activity 'GET /activity HTTP/1.1\r\nHost: x\r\n\r\n')"
check "activity: another scheme" "$unauthorized" \
	"$(run_activity 'GET /activity HTTP/1.1\r\nAuthorization: Basic s3cret-T0ken\r\n\r\n')"
check "activity: the token alone" "$unauthorized" \
	"$(run_activity 'GET /activity HTTP/1.1\r\nAuthorization: s3cret-T0ken\r\n\r\n')"
check "activity: the token in another header" "$unauthorized" \
	"$(run_activity 'GET /activity HTTP/1.1\r\nX-Authorization: Bearer s3cret-T0ken\r\n\r\n')"
mkdir -p "$WORK/empty-token"
: >"$WORK/empty-token/activity-token"
check "activity: empty token file, empty token" "$unauthorized" \
	"$(run_activity 'GET /activity HTTP/1.1\r\nAuthorization: Bearer \r\n\r\n' VM_CLOUD_INIT_DIR="$WORK/empty-token")"
check "activity: no token file" "$unauthorized" "$(run_activity "$good" VM_CLOUD_INIT_DIR="$WORK/nowhere")"
check "activity: another path" 'HTTP/1.1 404 Not Found~|Content-Length: 0~|Connection: close~|~|' \
	"$(run_activity 'GET /activity/x HTTP/1.1\r\nAuthorization: Bearer s3cret-T0ken\r\n\r\n')"
check "activity: another method" 'HTTP/1.1 405 Method Not Allowed~|Allow: GET~|Content-Length: 0~|Connection: close~|~|' \
	"$(run_activity 'POST /activity HTTP/1.1\r\nAuthorization: Bearer s3cret-T0ken\r\nContent-Length: 0\r\n\r\n')"
check "activity: another method, another path" 404 "$(status_of "$(run_activity 'DELETE / HTTP/1.1\r\n\r\n')")"
# Requests it cannot read: too long, too many headers, cut short, not HTTP/1.x.
long=$(printf '%01017d' 0)
check "activity: a header line of 1024 bytes" 200 \
	"$(status_of "$(run_activity "GET /activity HTTP/1.1\r\nX-Pad: $long\r\nAuthorization: Bearer s3cret-T0ken\r\n\r\n")")"
check "activity: a header line of 1025 bytes" 400 \
	"$(status_of "$(run_activity "GET /activity HTTP/1.1\r\nX-Pad: ${long}0\r\nAuthorization: Bearer s3cret-T0ken\r\n\r\n")")"
check "activity: a longer request line" 400 \
	"$(status_of "$(run_activity "GET /activity?$long HTTP/1.1\r\nAuthorization: Bearer s3cret-T0ken\r\n\r\n")")"
pad=
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31; do
	pad="${pad}X-Pad: x\r\n"
done
check "activity: 32 headers" 200 \
	"$(status_of "$(run_activity "GET /activity HTTP/1.1\r\n${pad}Authorization: Bearer s3cret-T0ken\r\n\r\n")")"
check "activity: 33 headers" 400 \
	"$(status_of "$(run_activity "GET /activity HTTP/1.1\r\n${pad}X-Pad: x\r\nAuthorization: Bearer s3cret-T0ken\r\n\r\n")")"
check "activity: no empty line" 400 \
	"$(status_of "$(run_activity 'GET /activity HTTP/1.1\r\nAuthorization: Bearer s3cret-T0ken\r\n')")"
check "activity: nothing" 400 "$(status_of "$(run_activity '')")"
for request in 'GET /activity\r\n\r\n' 'GET /activity HTTP/2\r\n\r\n' 'GET  /activity HTTP/1.1\r\n\r\n' \
	'GET /activity HTTP/1.1 x\r\n\r\n' '\r\nGET /activity HTTP/1.1\r\n\r\n' 'HTTP/1.1\r\n\r\n' \
	'GET /activity HTTP/1.1\r\nAuthorization Bearer s3cret-T0ken\r\n\r\n' \
	'GET /activity HTTP/1.1\r\nAuthorization : Bearer s3cret-T0ken\r\n\r\n' \
	'GET /activity HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n'; do
	check "activity: bad request $request" 400 "$(status_of "$(run_activity "$request")")"
done
check "activity: no mark" 500 "$(status_of "$(run_activity "$good" VM_PROC_NET_DIR="$act/quiet" VM_RUN_DIR="$WORK/nowhere")")"
check "activity: no table" 500 "$(status_of "$(run_activity "$good" VM_PROC_NET_DIR="$act/none")")"
check "activity: never says the token" absent "$(grep -rl s3cret "$WORK/activity.err" || echo absent)"

# --- A disk's size: 95% of the claim, capped by what the volume can hold (less 64 MiB).
check "disk size, free space unknown" 9728 "$(disk_target_mib 10240 "" 0)"
check "disk size, roomy volume" 9728 "$(disk_target_mib 10240 100000 0)"
check "disk size, ext4 reserve" 9336 "$(disk_target_mib 10240 9400 0)"
check "disk size, counts its own blocks" 8936 "$(disk_target_mib 10240 5000 4000)"

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

# --- Persistent root disk: made once from the container disk's copy in import/ (a qcow2 moved, a
# raw image converted), grown to 95% of its claim, never shrunk, and checked at every start.
# raw_head FILE N: the first N bytes of the disk FILE holds, whatever its format.
raw_head() {
	qemu-img convert -f "$(probe_format "$1")" -O raw "$1" "$WORK/head.raw" && head -c "$2" "$WORK/head.raw"
	rm -f "$WORK/head.raw"
}
VM_ROOT_DIR=$WORK/root
ROOT_DIR=$VM_ROOT_DIR
root=$ROOT_DIR/root.qcow2
mkdir -p "$ROOT_DIR/import"
qemu-img create -q -f raw "$ROOT_DIR/import/disk.img" 16M
printf 'the image' | dd of="$ROOT_DIR/import/disk.img" conv=notrunc 2>/dev/null
prepare_root_disk "$root" 100Mi 2>/dev/null
check "root disk: a raw image converted to qcow2" qcow2 "$(probe_format "$root" 2>/dev/null)"
check "root disk: grown to 95% of its claim" 95 "$(virtual_mib "$root")"
check "root disk: the image's content" "the image" "$(raw_head "$root" 9)"
check "root disk: the import's copy removed" gone "$([ -e "$ROOT_DIR/import" ] || echo gone)"
# The guest writes to its disk (here, through a raw round trip); the next start boots from it.
qemu-img convert -f qcow2 -O raw "$root" "$WORK/guest.raw"
printf 'the guest' | dd of="$WORK/guest.raw" conv=notrunc 2>/dev/null
qemu-img convert -q -f raw -O qcow2 "$WORK/guest.raw" "$root"
rm -f "$WORK/guest.raw"
mkdir -p "$ROOT_DIR/import"
qemu-img create -q -f raw "$ROOT_DIR/import/disk.img" 16M
prepare_root_disk "$root" 100Mi 2>/dev/null
check "root disk: kept, not imported again" "the guest" "$(raw_head "$root" 9)"
rm -rf "$ROOT_DIR/import"
prepare_root_disk "$root" 200Mi 2>/dev/null
check "root disk: grown with its claim" 190 "$(virtual_mib "$root")"
got=$(prepare_root_disk "$root" 100Mi 2>&1) && got=ok
check "root disk: never shrunk, the size to ask for" "raise spec.rootDisk.size to at least 200Mi" "$(printf '%s' "$got" | grep -o 'raise .*')"
check "root disk: not shrunk" 190 "$(virtual_mib "$root")"
check "root disk: still the guest's" "the guest" "$(raw_head "$root" 9)"
# With hibernation, the guest's memory is kept free for its state: the disk grows less, and a
# disk that leaves less than that (the memory raised) is kept as it is.
prepare_root_disk "$root" 300Mi 50 2>/dev/null
check "root disk: grown less the room kept for a state" 235 "$(virtual_mib "$root")"
got=$(prepare_root_disk "$root" 300Mi 100 2>&1) && got=ok
check "root disk: more memory, the disk kept" "ok 235" "$got $(virtual_mib "$root")"
# Changed outside the VM: a raw file in its place, a qcow2 leaning on another file.
mv "$root" "$WORK/root.keep"
qemu-img create -q -f raw "$root" 16M
got=$(prepare_root_disk "$root" 100Mi 2>/dev/null) || got=ERR
check "root disk: a raw file in its place refused" ERR "$got"
qemu-img create -q -f qcow2 -b "$WORK/root.keep" -F qcow2 "$root"
got=$(prepare_root_disk "$root" 300Mi 2>/dev/null) || got=ERR
check "root disk: a backing file refused" ERR "$got"
rm -f "$root" "$WORK/root.keep"
# A qcow2 image is moved, not copied; one larger than the claim allows, or leaning on another
# file, is refused, and nothing is made from it.
mkdir -p "$ROOT_DIR/import"
qemu-img create -q -f qcow2 "$ROOT_DIR/import/disk.qcow2" 16M
inode=$(stat -c %i "$ROOT_DIR/import/disk.qcow2")
prepare_root_disk "$root" 100Mi 2>/dev/null
check "root disk: a qcow2 image moved" "$inode" "$(stat -c %i "$root" 2>/dev/null)"
rm -f "$root"
mkdir -p "$ROOT_DIR/import"
qemu-img create -q -f qcow2 "$ROOT_DIR/import/disk.qcow2" 16M
got=$(prepare_root_disk "$root" 10Mi 2>&1) && got=ok
check "root disk: an image larger than its claim" "raise spec.rootDisk.size to at least 17Mi" "$(printf '%s' "$got" | grep -o 'raise .*')"
rm -rf "$root" "$ROOT_DIR/import"
mkdir -p "$ROOT_DIR/import"
cp "$fmt/overlay.qcow2" "$ROOT_DIR/import/"
got=$(prepare_root_disk "$root" 100Mi 2>/dev/null) || got=ERR
check "root disk: an image with a backing file refused" ERR "$got"
check "root disk: nothing made of it" none "$(ls "$ROOT_DIR" | grep root || echo none)"
qemu-img create -q -f qcow2 -o data_file="$WORK/external.raw" "$fmt/external.qcow2" 16M
got=$(probe_format "$fmt/external.qcow2" 2>/dev/null) || got=ERR
check "probe_format refuses an external data file" ERR "$got"
rm -rf "$ROOT_DIR"

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

# --- `vm-launcher probe`, the readiness probe, run as the kubelet runs it: a command of its own,
# with the container's environment. With an SSH port it wants an SSH banner from 127.0.0.1:PORT
# (QEMU's user networking accepts a connection to a forwarded port as soon as QEMU runs, long
# before the guest's sshd does); without one, cloud-init's final message on the console.
#
# listen MODE: a one-connection listener on PROBE_PORT (found free here) that sends an SSH banner
# (ssh), an HTTP status line (http), closes at once (close) or says nothing (silent).
cat >"$WORK/listener" <<'EOF'
#!/bin/sh
# Where the connection came from (socat tells the programs it runs).
printf '%s\n' "${SOCAT_PEERADDR:-}" >"$(dirname "$0")/peer"
case $1 in
ssh) printf 'SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n' ;;
http) printf 'HTTP/1.1 400 Bad Request\r\n' ;;
close) exit 0 ;;
esac
sleep 5
EOF
LISTENER_PID=
listen() {
	socat "TCP-LISTEN:$PROBE_PORT,bind=127.0.0.1,reuseaddr,fork" "EXEC:sh $WORK/listener $1" 2>/dev/null &
	LISTENER_PID=$!
	# Until it listens: a connection that sends nothing and reads nothing.
	tries=0
	while [ "$tries" -lt 50 ] && ! socat -u /dev/null "TCP:127.0.0.1:$PROBE_PORT,connect-timeout=1" 2>/dev/null; do
		sleep 0.1
		tries=$((tries + 1))
	done
}
unlisten() {
	kill "$LISTENER_PID" 2>/dev/null
	wait "$LISTENER_PID" 2>/dev/null || :
	LISTENER_PID=
}
# free_port FROM prints a port nothing listens on, FROM or one of the next nine, found by binding
# it; nothing when all are taken.
free_port() {
	p=$1
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		socat "TCP-LISTEN:$p,bind=127.0.0.1,reuseaddr" /dev/null >/dev/null 2>&1 &
		sleep 0.2
		if kill "$!" 2>/dev/null; then
			wait "$!" 2>/dev/null || :
			echo "$p"
			return 0
		fi
		p=$((p + 1))
	done
}
PROBE_PORT=$(free_port $((20000 + $$ % 20000)))
# The activity endpoint's, in the tests further down.
ENDPOINT_PORT=$(free_port $((${PROBE_PORT:-20000} + 100)))

# run_probe [ENV=VALUE...]: runs `vm-launcher probe` under TEST_SHELL, prints its exit status
# and keeps its output in $WORK/probe.out and its duration in seconds in PROBE_SECONDS_TAKEN.
run_probe() {
	started=$(date +%s)
	status=0
	# shellcheck disable=SC2086 # "busybox sh" is a command and its argument.
	env -u VM_LAUNCHER_LIB -u VM_SSH_PORT VM_RUN_DIR="$VM_RUN_DIR" VM_PORTS="tcp:$PROBE_PORT,udp:53" \
		VM_SSH_PORT="$PROBE_PORT" "$@" $TEST_SHELL "$HERE/vm-launcher" probe >"$WORK/probe.out" 2>&1 || status=$?
	echo "$(($(date +%s) - started))" >"$WORK/probe.seconds"
	echo "$status"
}
# probe_says NAME TEXT: the probe's output mentions TEXT.
probe_says() {
	if grep -q "$2" "$WORK/probe.out"; then
		check "$1" ok ok
	else
		check "$1" "output with '$2'" "$(cat "$WORK/probe.out")"
	fi
}

if [ -z "$PROBE_PORT" ]; then
	check "a free port for the probe tests" found none
else
	check "probe: nothing listens" 1 "$(run_probe)"
	probe_says "probe: nothing listens, says so" "not ready"
	listen ssh
	check "probe: SSH banner" 0 "$(run_probe)"
	# From 127.0.0.2, which the count of the guest's users leaves out.
	check "probe: connects from 127.0.0.2" 127.0.0.2 "$(cat "$WORK/peer")"
	# A guest that runs cloud-init: sshd answers before cloud-init restarts it, so ready waits
	# for cloud-init's final message as well.
	mkdir -p "$VM_RUN_DIR"
	rm -f "$VM_RUN_DIR"/console.log* "$VM_RUN_DIR/cloud-init-finished"
	printf '[   10.1] cloud-init[401]: Cloud-init v. 22.4.2 running '\''init-local'\'' at Mon, 24 Nov 2025 20:00:00 +0000. Up 10.00 seconds.\r\n' >"$VM_RUN_DIR/console.log"
	check "probe: SSH banner, cloud-init running" 1 "$(run_probe)"
	probe_says "probe: SSH banner, cloud-init running, says so" "cloud-init has not finished"
	printf '[   32.0] cloud-init[612]: Cloud-init v. 22.4.2 finished at Mon, 24 Nov 2025 20:00:22 +0000. Up 32.00 seconds\r\n' >>"$VM_RUN_DIR/console.log"
	check "probe: SSH banner, cloud-init finished" 0 "$(run_probe)"
	probe_says "probe: SSH banner, cloud-init finished, says SSH answers" "SSH server answers"
	rm -f "$VM_RUN_DIR"/console.log* "$VM_RUN_DIR/cloud-init-finished"
	unlisten
	listen close
	check "probe: accepted and closed (user networking, guest not listening)" 1 "$(run_probe)"
	probe_says "probe: closed, says why" "without an SSH banner"
	unlisten
	listen http
	check "probe: not SSH" 1 "$(run_probe)"
	probe_says "probe: not SSH, says what came" "HTTP"
	unlisten
	listen silent
	check "probe: silent port" 1 "$(run_probe)"
	check "probe: silent port, within 3 s" yes "$([ "$(cat "$WORK/probe.seconds")" -le 3 ] && echo yes)"
	probe_says "probe: silent, says why" "no SSH banner within"
	unlisten
	check "probe: VM_SSH_PORT not among VM_PORTS" 1 "$(run_probe VM_SSH_PORT=2222)"
	probe_says "probe: VM_SSH_PORT not among VM_PORTS, says so" "VM_SSH_PORT"
fi

# Without an SSH port: cloud-init's final message on the serial console, as Debian's cloud-final
# prints it; remembered once seen, for the launcher keeps only the console's last few MiB.
mkdir -p "$VM_RUN_DIR"
rm -f "$VM_RUN_DIR"/console.log* "$VM_RUN_DIR/cloud-init-finished"
check "probe, no SSH port: no console yet" 1 "$(run_probe VM_PORTS=udp:53 VM_SSH_PORT=)"
probe_says "probe, no SSH port: says what it waits for" "Cloud-init v. ... finished at"
printf '[   10.1] cloud-init[401]: Cloud-init v. 22.4.2 running '\''init-local'\'' at Mon, 24 Nov 2025 20:00:00 +0000. Up 10.00 seconds.\r\n' >"$VM_RUN_DIR/console.log"
printf '[   31.2] cloud-init[612]: Cloud-init v. 22.4.2 running '\''modules:final'\'' at Mon, 24 Nov 2025 20:00:21 +0000. Up 31.00 seconds.\r\n' >>"$VM_RUN_DIR/console.log"
check "probe, no SSH port: cloud-init still running" 1 "$(run_probe VM_PORTS=tcp:2222 VM_SSH_PORT=none)"
printf '[   32.0] cloud-init[612]: Cloud-init v. 22.4.2 finished at Mon, 24 Nov 2025 20:00:22 +0000. Datasource DataSourceNoCloud [seed=/dev/vdc][dsmode=net].  Up 32.00 seconds\r\n' >>"$VM_RUN_DIR/console.log"
check "probe, no SSH port: cloud-init finished" 0 "$(run_probe VM_PORTS=tcp:2222 VM_SSH_PORT=none)"
: >"$VM_RUN_DIR/console.log"
check "probe, no SSH port: remembered after the log was cut" 0 "$(run_probe VM_PORTS=udp:53 VM_SSH_PORT=)"
rm -f "$VM_RUN_DIR"/console.log* "$VM_RUN_DIR/cloud-init-finished"

# --- The activity endpoint over TLS: socat serving on ENDPOINT_PORT with a key and certificate
# as the operator makes them (an ed25519 PKCS#8 key, then its self-signed certificate, in one
# PEM), running the handler for each connection. openssl makes them, and is not in the image.
#
# request TOKEN [TARGET]: GET TARGET (/activity) from the endpoint with TOKEN, and print the
# response's status and its body, "200 {...}"; "none" when nothing answered.
request() {
	printf 'GET %s HTTP/1.1\r\nHost: vm\r\nAuthorization: Bearer %s\r\n\r\n' "${2:-/activity}" "$1" |
		timeout 10 socat -t 5 - "OPENSSL:127.0.0.1:$ENDPOINT_PORT,verify=0" 2>/dev/null | tr -d '\r' >"$WORK/response" || :
	code=$(sed -n '1s/^HTTP\/1\.1 \([0-9]*\) .*/\1/p' "$WORK/response")
	if [ -z "$code" ]; then
		echo none
	else
		printf '%s %s\n' "$code" "$(tail -n 1 "$WORK/response")"
	fi
}
# request_soon TOKEN: request, retried until the server listens (5 s at most).
request_soon() {
	tries=0
	while got=$(request "$1") && [ "$got" = none ] && [ "$tries" -lt 50 ]; do
		sleep 0.1
		tries=$((tries + 1))
	done
	printf '%s\n' "$got"
}
# seconds_since START
seconds_since() {
	echo "$(($(date +%s) - $1))"
}
PEM_MADE=
if [ -z "$ENDPOINT_PORT" ]; then
	check "a free port for the activity endpoint's tests" found none
elif ! command -v openssl >/dev/null 2>&1; then
	echo "openssl missing: skipping the activity endpoint's TLS tests (the launcher itself does not need it)"
elif ! openssl genpkey -algorithm ed25519 -out "$WORK/key.pem" 2>"$WORK/openssl.err" ||
	! openssl req -new -x509 -key "$WORK/key.pem" -subj /CN=vm-activity -days 1 -out "$WORK/cert.pem" 2>>"$WORK/openssl.err"; then
	check "openssl makes an ed25519 key and certificate" ok "$(cat "$WORK/openssl.err")"
else
	cat "$WORK/key.pem" "$WORK/cert.pem" >"$aci/..2024_01_01/activity.pem"
	ln -s ..data/activity.pem "$aci/activity.pem"
	PEM_MADE=1
	# The server as the launcher starts it, with what the handler reads in its environment; on
	# 127.0.0.1 only, and clients held 1 s at most.
	VM_PORTS=tcp:22,tcp:2222,udp:8080 VM_PROC_NET_DIR=$act/busy VM_CLOUD_INIT_DIR=$aci
	export VM_PORTS VM_PROC_NET_DIR VM_CLOUD_INIT_DIR VM_RUN_DIR
	saved_run_dir=$RUN_DIR saved_cloud_init_dir=$CLOUD_INIT_DIR
	RUN_DIR=$act/run CLOUD_INIT_DIR=$aci ACTIVITY_ADDRESS=127.0.0.1 ACTIVITY_CLIENT_SECONDS=1
	VM_RUN_DIR=$act/run
	touch "$act/run/activity"
	start_activity_server "$ENDPOINT_PORT" "$HERE/vm-launcher" 2>"$WORK/server.err"
	check "endpoint: the guest's activity" '200 {"connections":5,"idleSeconds":0}' "$(request_soon s3cret-T0ken)"
	check "endpoint: wrong token" '401 ' "$(request s3cret-T0kem)"
	check "endpoint: another path" '404 ' "$(request s3cret-T0ken /)"
	# Clients that say nothing: not in the handshake, nor after it.
	started=$(date +%s)
	timeout 10 socat -u "TCP:127.0.0.1:$ENDPOINT_PORT" STDOUT >/dev/null 2>&1 || :
	within "endpoint: silent in the handshake, dropped" 0 3 "$(seconds_since "$started")"
	started=$(date +%s)
	timeout 10 socat -u "OPENSSL:127.0.0.1:$ENDPOINT_PORT,verify=0" STDOUT >/dev/null 2>&1 || :
	within "endpoint: silent after the handshake, dropped" 0 3 "$(seconds_since "$started")"
	# As many as it serves at once say nothing: the next client is served once they are dropped.
	silent=
	for _ in 1 2 3 4 5; do
		timeout 10 socat -u "TCP:127.0.0.1:$ENDPOINT_PORT" STDOUT >/dev/null 2>&1 &
		silent="$silent $!"
	done
	started=$(date +%s)
	check "endpoint: served past silent clients" '200 {"connections":5,"idleSeconds":0}' "$(request s3cret-T0ken)"
	within "endpoint: served past silent clients, soon" 0 4 "$(seconds_since "$started")"
	for pid in $silent; do
		wait "$pid" 2>/dev/null || :
	done
	kill "$ACTIVITY_SERVER_PID"
	wait "$ACTIVITY_SERVER_PID" 2>/dev/null || :
	check "endpoint: stopped" none "$(request s3cret-T0ken)"
	unset VM_PORTS VM_PROC_NET_DIR VM_CLOUD_INIT_DIR
	RUN_DIR=$saved_run_dir CLOUD_INIT_DIR=$saved_cloud_init_dir
	VM_RUN_DIR=$RUN_DIR
fi

# --- The whole run, against a fake QEMU: it records its arguments, then either exits with
# FAKE_QEMU_EXIT or, as a guest would, exits 0 once QMP has asked FAKE_QEMU_PRESSES times (1 by
# default) for system_powerdown: a guest still booting ignores the first presses. Before that,
# with FAKE_QEMU_STDIN, it reads a line from its input, as the serial console does, and prints
# it; with FAKE_QEMU_FLOOD=N, it writes N rounds of 5000 bytes to the console's log file (as QEMU
# does with logappend=on), cloud-init's final message among them, as a guest that prints forever.
# A round that leaves the log past FAKE_QEMU_FLOOD_LIMIT waits (5 s, once) for the launcher to
# cut it: the launcher looks every VM_CONSOLE_LOG_CHECK_SECONDS, which a busy machine can stretch,
# and the writer must not outrun that (measured: a 20000-byte limit cut at 59388 bytes in CI).
fake=$WORK/bin
mkdir -p "$fake"
cat >"$fake/qemu-system-x86_64" <<'EOF'
#!/bin/sh
if [ "$1" = --version ]; then
	echo "QEMU emulator version ${FAKE_QEMU_VERSION:-7.2.0}"
	exit 0
fi
printf '%s\n' "$@" >"$FAKE_QEMU_ARGS"
sock= log= incoming= prev=
for arg; do
	case $arg in
	unix:*) sock=${arg#unix:} ;;
	stdio,*logfile=*)
		log=${arg#*logfile=}
		log=${log%%,*}
		;;
	esac
	[ "$prev" != -incoming ] || incoming=${arg#exec:}
	prev=$arg
done
# The guest's memory, which a saved state carries: one of its own at each start.
d=$FAKE_QEMU_DIR
rm -f "$d/quit" "$d/events" "$d/loaded"
: >"$d/presses"
echo "guest $$ $(date +%s%N)" >"$d/identity"
echo running >"$d/status"
if [ -n "$incoming" ]; then
	[ -z "${FAKE_QEMU_LOAD_FAIL:-}" ] || exit 1
	sh -c "$incoming" >"$d/loaded"
	echo paused >"$d/status"
fi
if [ -n "${FAKE_QEMU_STDIN:-}" ]; then
	IFS= read -r line || line="(nothing)"
	printf 'fake console read: %s\n' "$line"
fi
if [ -n "${FAKE_QEMU_FLOOD:-}" ]; then
	line=0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789
	chunk=
	for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49; do
		chunk="$chunk$line
"
	done
	round=0
	while [ "$round" -lt "$FAKE_QEMU_FLOOD" ]; do
		printf '%s' "$chunk" >>"$log"
		[ "$round" -ne 3 ] || printf 'cloud-init[612]: Cloud-init v. 22.4.2 finished at Mon, 24 Nov 2025 20:00:22 +0000. Up 32.00 seconds\r\n' >>"$log"
		sleep 0.05
		waited=0
		while [ "$(stat -c %s "$log")" -gt "${FAKE_QEMU_FLOOD_LIMIT:-999999999}" ]; do
			# Never cut: flood on, as a guest would (the test sees the log grow).
			[ "$waited" -lt 100 ] || { FAKE_QEMU_FLOOD_LIMIT= && break; }
			sleep 0.05
			waited=$((waited + 1))
		done
		round=$((round + 1))
	done
	# The launcher's next look at the log.
	sleep 0.5
fi
[ -z "${FAKE_QEMU_EXIT:-}" ] || exit "$FAKE_QEMU_EXIT"
# QMP (fake-qmp answers each client) until the guest has heard FAKE_QEMU_PRESSES presses, or quit.
socat "UNIX-LISTEN:${sock%%,*},fork" "EXEC:$FAKE_QMP" &
listener=$!
while [ ! -e "$d/quit" ] && [ "$(wc -l <"$d/presses")" -lt "${FAKE_QEMU_PRESSES:-1}" ]; do
	sleep 0.1
done
kill "$listener"
exit 0
EOF
# fake-qmp answers one QMP client as QEMU would, its state in FAKE_QEMU_DIR: the status, the
# power button's presses, a migration (to a file through its exec: URI, the guest's identity as
# the state; with FAKE_QEMU_MIGRATE_FAIL it fails) and quit.
cat >"$fake/fake-qmp" <<'EOF'
#!/bin/sh
d=$FAKE_QEMU_DIR
echo '{"QMP": {"version": {}, "capabilities": []}}'
while IFS= read -r line; do
	case $line in
	*'"qmp_capabilities"'*) ;;
	*'"system_powerdown"'*) echo press >>"$d/presses" ;;
	*'"stop"'*) echo paused >"$d/status" ;;
	*'"cont"'*)
		echo running >"$d/status"
		echo cont >>"$d/events"
		;;
	*'"migrate"'*)
		if [ -n "${FAKE_QEMU_MIGRATE_FAIL:-}" ]; then
			echo failed >"$d/migration"
		else
			to=${line#*exec:}
			sh -c "${to%%\"*}" <"$d/identity"
			echo completed >"$d/migration"
		fi
		;;
	*'"query-migrate"'*)
		echo "{\"return\": {\"status\": \"$(cat "$d/migration")\"}}"
		continue
		;;
	*'"query-status"'*)
		echo "{\"return\": {\"status\": \"$(cat "$d/status")\", \"running\": false}}"
		continue
		;;
	*'"quit"'*) touch "$d/quit" ;;
	*)
		echo '{"error": {"class": "CommandNotFound", "desc": "fake"}}'
		continue
		;;
	esac
	echo '{"return": {}}'
done
EOF
chmod +x "$fake/fake-qmp"
chmod +x "$fake/qemu-system-x86_64"
qemu-img create -q -f qcow2 "$boot/z.qcow2" 16M

# start_launcher [VAR=VALUE...]: starts the launcher in the background (LAUNCHER_PID) under
# TEST_SHELL with the variables given added to its environment and T_STDIN (default /dev/null) as
# its input, its output in $WORK/out.
start_launcher() {
	rm -f "$VM_RUN_DIR/qmp.sock" "$WORK/args"
	# shellcheck disable=SC2086 # "busybox sh" is a command and its argument.
	mkdir -p "$WORK/qemu"
	env -u VM_LAUNCHER_LIB PATH="$fake:$PATH" FAKE_QEMU_ARGS="$WORK/args" FAKE_QEMU_DIR="$WORK/qemu" \
		FAKE_QMP="$fake/fake-qmp" VM_POWERDOWN_REPEAT_SECONDS=1 \
		VM_BOOT_DIR="$boot" VM_DATA_DIR="$DATA_DIR" VM_CLOUD_INIT_DIR="$ci" VM_RUN_DIR="$VM_RUN_DIR" \
		VM_CPUS="${T_CPUS:-2}" VM_MEMORY=2G VM_ACCEL=tcg VM_DATA_DISK_SIZE=200Mi VM_PORTS=tcp:2222,udp:5353 \
		"$@" $TEST_SHELL "$HERE/vm-launcher" <"${T_STDIN:-/dev/null}" >"$WORK/out" 2>&1 &
	LAUNCHER_PID=$!
}

# wait_for_qemu: until the fake QEMU is up (its QMP socket), 10 s at most.
wait_for_qemu() {
	tries=0
	while [ ! -S "$VM_RUN_DIR/qmp.sock" ] && [ "$tries" -lt 100 ]; do
		sleep 0.1
		tries=$((tries + 1))
	done
}

# run_launcher [SIGNAL] [VAR=VALUE...]: runs the launcher (start_launcher), signals it once QEMU
# is up, and prints its exit status.
run_launcher() {
	sig=
	case ${1:-} in
	TERM | INT)
		sig=$1
		shift
		;;
	esac
	start_launcher "$@"
	if [ -n "$sig" ]; then
		wait_for_qemu
		kill "-$sig" "$LAUNCHER_PID"
	fi
	status=0
	wait "$LAUNCHER_PID" || status=$?
	echo "$status"
}

# has_arg NAME WANT: QEMU's last arguments, one line each, contain WANT.
has_arg() {
	args=$(tr '\n' ' ' <"$WORK/args" 2>/dev/null)
	case $args in
	*"$2"*) check "$1" ok ok ;;
	*) check "$1" "present: $2" "missing from: $args" ;;
	esac
}
# lacks_arg NAME UNWANTED: they do not.
lacks_arg() {
	args=$(tr '\n' ' ' <"$WORK/args" 2>/dev/null)
	case $args in
	*"$2"*) check "$1" "absent: $2" "present in: $args" ;;
	*) check "$1" ok ok ;;
	esac
}

check "SIGTERM: guest powered off, exit 0" 0 "$(run_launcher TERM)"
grep -q 'asked the guest to power off' "$WORK/out" || {
	FAIL=$((FAIL + 1))
	echo "FAIL SIGTERM log:"
	cat "$WORK/out"
}
for want in "-machine q35" "-accel tcg,tb-size=128" "-cpu max" "-smp 2" "-m 1908M" "-nographic" \
	"-chardev stdio,id=console,signal=off,logfile=$VM_RUN_DIR/console.log,logappend=on" \
	"-serial chardev:console" "-qmp unix:$VM_RUN_DIR/qmp.sock,server=on,wait=off" \
	"user,id=net0,hostfwd=tcp:0.0.0.0:2222-:2222,hostfwd=udp:0.0.0.0:5353-:5353" \
	"file=$boot/z.qcow2,format=qcow2" "file=$disk,format=raw" \
	"file=$VM_RUN_DIR/seed.iso,format=raw,readonly=on" "-action panic=exit-failure"; do
	has_arg "qemu args: $want" "$want"
done
lacks_arg "no -no-reboot" "-no-reboot"
lacks_arg "no firmware flash by default (bios)" "if=pflash"
lacks_arg "serial console not on plain stdio" "-serial stdio"

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

# --- The launcher's last words are the termination message; the guest's console never is.
: >"$WORK/termination-log"
check "termination message: refused" 1 "$(T_CPUS=0 run_launcher VM_TERMINATION_LOG="$WORK/termination-log")"
check "termination message: why" "vm-launcher: VM_CPUS must be a positive integer, not '0'" "$(cat "$WORK/termination-log")"
: >"$WORK/termination-log"
check "termination message: QEMU failed" 1 "$(run_launcher FAKE_QEMU_EXIT=1 VM_TERMINATION_LOG="$WORK/termination-log")"
case $(cat "$WORK/termination-log") in
"vm-launcher: QEMU exited with status 1 "*) check "termination message: QEMU's status" ok ok ;;
*) check "termination message: QEMU's status" "QEMU exited with status 1" "$(cat "$WORK/termination-log")" ;;
esac

# --- The serial console reads the launcher's input: `kubectl attach -it` types into the guest.
# (A command started with & reads /dev/null unless told otherwise.)
printf 'root\n' >"$WORK/stdin"
got=$(T_STDIN=$WORK/stdin run_launcher FAKE_QEMU_EXIT=0 FAKE_QEMU_STDIN=1)
check "console input: launcher exit" 0 "$got"
check "console input reaches QEMU" "fake console read: root" "$(grep '^fake console read' "$WORK/out")"

# --- The console log the probe reads: emptied at each start (a previous run's log must not make
# this boot ready), and kept below VM_CONSOLE_LOG_MAX_BYTES (plus one older part) however much the
# guest prints; cloud-init's final message is remembered before the log is cut.
printf 'Cloud-init v. 1 finished at then\n' >"$VM_RUN_DIR/console.log"
printf 'old\n' >"$VM_RUN_DIR/console.log.1"
: >"$VM_RUN_DIR/cloud-init-finished"
run_launcher FAKE_QEMU_EXIT=0 >/dev/null
check "console log: previous run's removed" absent "$([ -s "$VM_RUN_DIR/console.log" ] || [ -e "$VM_RUN_DIR/console.log.1" ] || echo absent)"
check "console log: previous readiness forgotten" absent "$([ -e "$VM_RUN_DIR/cloud-init-finished" ] || echo absent)"
rm -f "$VM_RUN_DIR"/console.log* "$VM_RUN_DIR/cloud-init-finished"
got=$(run_launcher FAKE_QEMU_EXIT=0 FAKE_QEMU_FLOOD=40 FAKE_QEMU_FLOOD_LIMIT=20000 VM_CONSOLE_LOG_MAX_BYTES=20000 VM_CONSOLE_LOG_CHECK_SECONDS=0.1)
check "console log flood: launcher exit" 0 "$got"
size=$(stat -c %s "$VM_RUN_DIR/console.log" 2>/dev/null) || size=missing
check "console log flood: log bounded (200000 bytes written)" yes "$([ "$size" != missing ] && [ "$size" -le 40000 ] && echo yes || echo "$size bytes")"
size=$(stat -c %s "$VM_RUN_DIR/console.log.1" 2>/dev/null) || size=missing
check "console log flood: cut once past the limit, older part kept" yes "$([ "$size" != missing ] && [ "$size" -gt 20000 ] && [ "$size" -le 40000 ] && echo yes || echo "$size bytes")"
check "console log flood: cloud-init's message remembered" yes "$([ -e "$VM_RUN_DIR/cloud-init-finished" ] && echo yes)"
rm -f "$VM_RUN_DIR"/console.log* "$VM_RUN_DIR/cloud-init-finished"

# --- VM_CPU_MODEL.
got=$(run_launcher FAKE_QEMU_EXIT=0 VM_CPU_MODEL=Haswell-v4,pmu=off)
check "VM_CPU_MODEL: exit" 0 "$got"
has_arg "VM_CPU_MODEL: -cpu" "-cpu Haswell-v4,pmu=off -"
got=$(run_launcher FAKE_QEMU_EXIT=0 VM_CPU_MODEL=help)
check "VM_CPU_MODEL=help refused" 1 "$got"
check "VM_CPU_MODEL=help: QEMU not started" absent "$([ -e "$WORK/args" ] || echo absent)"

# --- VM_SSH_PORT must name a forwarded tcp port: the launcher refuses to start otherwise.
check "VM_SSH_PORT not forwarded: refused" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_SSH_PORT=22)"
check "VM_SSH_PORT forwarded" 0 "$(run_launcher FAKE_QEMU_EXIT=0 VM_SSH_PORT=2222)"

# --- VM_FIRMWARE=uefi: OVMF's code read-only, and the guest's own variable store on the data
# volume, made once from the template so that its boot entries survive restarts.
ovmf=$WORK/ovmf
mkdir -p "$ovmf"
printf 'code' >"$ovmf/OVMF_CODE_4M.fd"
printf 'vars template' >"$ovmf/OVMF_VARS_4M.fd"
vars=$DATA_DIR/efivars.fd
rm -f "$vars"
got=$(run_launcher FAKE_QEMU_EXIT=0 VM_FIRMWARE=uefi VM_OVMF_DIR="$ovmf")
check "uefi: exit" 0 "$got"
has_arg "uefi: code flash, read-only" "-drive if=pflash,format=raw,unit=0,readonly=on,file=$ovmf/OVMF_CODE_4M.fd "
has_arg "uefi: variable store flash" "-drive if=pflash,format=raw,unit=1,file=$vars "
check "uefi: variables from the template" "vars template" "$(cat "$vars" 2>/dev/null)"
# The guest writes a boot entry (the flash keeps its size): the next start keeps it.
printf 'VARS' | dd of="$vars" conv=notrunc 2>/dev/null
run_launcher FAKE_QEMU_EXIT=0 VM_FIRMWARE=uefi VM_OVMF_DIR="$ovmf" >/dev/null
check "uefi: variables kept across starts" "VARS template" "$(cat "$vars" 2>/dev/null)"
has_arg "uefi: second start, same store" "-drive if=pflash,format=raw,unit=1,file=$vars "
# A template of another size (a firmware upgrade): QEMU would refuse the old store.
printf 'a new, larger variables template' >"$ovmf/OVMF_VARS_4M.fd"
run_launcher FAKE_QEMU_EXIT=0 VM_FIRMWARE=uefi VM_OVMF_DIR="$ovmf" >/dev/null
check "uefi: store of another size replaced" "a new, larger variables template" "$(cat "$vars" 2>/dev/null)"
check "uefi: old store kept aside" "VARS template" "$(cat "$vars.old" 2>/dev/null)"
check "uefi: firmware missing" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_FIRMWARE=uefi VM_OVMF_DIR="$WORK/nowhere")"
check "VM_FIRMWARE=efi refused" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_FIRMWARE=efi)"
got=$(run_launcher FAKE_QEMU_EXIT=0 VM_FIRMWARE=bios VM_OVMF_DIR="$ovmf")
check "bios: exit" 0 "$got"
lacks_arg "bios: no flash" "if=pflash"
rm -f "$vars" "$vars.old"

# --- The persistent root disk in the whole run (VM_ROOT_DISK_SIZE): the guest boots from it.
mkdir -p "$ROOT_DIR/import"
qemu-img create -q -f qcow2 "$ROOT_DIR/import/disk.qcow2" 16M
got=$(run_launcher FAKE_QEMU_EXIT=0 VM_ROOT_DISK_SIZE=100Mi VM_ROOT_DIR="$ROOT_DIR")
check "persistent root disk: exit" 0 "$got"
has_arg "persistent root disk: booted from" "-drive if=none,id=boot,file=$ROOT_DIR/root.qcow2,format=qcow2,discard=unmap"
lacks_arg "persistent root disk: not the ephemeral copy" "$boot/z.qcow2"
check "persistent root disk: the second start boots" 0 "$(run_launcher FAKE_QEMU_EXIT=0 VM_ROOT_DISK_SIZE=100Mi VM_ROOT_DIR="$ROOT_DIR")"
check "persistent root disk: too small, refused" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_ROOT_DISK_SIZE=10Mi VM_ROOT_DIR="$ROOT_DIR")"
rm -rf "$ROOT_DIR"

# term_once_said TEXT TRIES: once the launcher started by start_launcher has said TEXT (or after
# TRIES tenths of a second), SIGTERM it; its exit status in status.
term_once_said() {
	tries=0
	until grep -q -e "$1" "$WORK/out" || [ "$tries" -ge "$2" ]; do
		sleep 0.1
		tries=$((tries + 1))
	done
	kill -TERM "$LAUNCHER_PID"
	status=0
	wait "$LAUNCHER_PID" || status=$?
}

# launcher_says NAME TEXT: the launcher's output mentions TEXT.
launcher_says() {
	if grep -q -e "$2" "$WORK/out"; then
		check "$1" ok ok
	else
		check "$1" "output with '$2'" "$(cat "$WORK/out")"
	fi
}

# --- Hibernation (VM_HIBERNATE=1): SIGTERM saves the guest's state on the root disk's claim
# instead of powering it off; the next start resumes from it when its key still holds, else
# discards it with the reason and boots cold.
mkdir -p "$ROOT_DIR/import"
qemu-img create -q -f qcow2 "$ROOT_DIR/import/disk.qcow2" 16M
hib() { run_launcher TERM VM_HIBERNATE=1 VM_ROOT_DISK_SIZE=100Mi VM_ROOT_DIR="$ROOT_DIR" VM_MEMORY=64Mi "$@"; }
# The first guest has finished cloud-init (its final line on the console) when it hibernates.
: >"$WORK/termination-log"
start_launcher VM_HIBERNATE=1 VM_ROOT_DISK_SIZE=100Mi VM_ROOT_DIR="$ROOT_DIR" VM_MEMORY=64Mi VM_TERMINATION_LOG="$WORK/termination-log"
wait_for_qemu
printf 'cloud-init[612]: Cloud-init v. 22.4.2 finished at Mon, 24 Nov 2025 20:00:22 +0000. Up 32.00 seconds\r\n' >>"$VM_RUN_DIR/console.log"
kill -TERM "$LAUNCHER_PID"
status=0
wait "$LAUNCHER_PID" || status=$?
check "hibernate: exit" 0 "$status"
check "hibernate: cloud-init had finished" yes "$([ -e "$ROOT_DIR/state.cloud-init-finished" ] && echo yes)"
first=$(cat "$WORK/qemu/identity")
check "hibernate: the guest's state saved" "$first" "$(cat "$ROOT_DIR/state" 2>/dev/null)"
check "hibernate: not powered off" 0 "$(wc -l <"$WORK/qemu/presses")"
check "hibernate: its key" yes "$(grep -q '^the disk root.qcow2: ' "$ROOT_DIR/state.key" && grep -q "^the guest's CPUs and memory: tcg max 2 64MiB bios$" "$ROOT_DIR/state.key" && echo yes)"
launcher_says "hibernate: said" "hibernated: the guest's state (0 MiB) is saved"
check "hibernate: the last words the operator reads" "vm-launcher: hibernated: the guest's state (0 MiB) is saved; the next start resumes it" "$(cat "$WORK/termination-log")"
check "hibernate: the disk grown less the memory" 31 "$(virtual_mib "$ROOT_DIR/root.qcow2")"
start_launcher VM_HIBERNATE=1 VM_ROOT_DISK_SIZE=100Mi VM_ROOT_DIR="$ROOT_DIR" VM_MEMORY=64Mi
term_once_said 'resumed the guest' 100
check "resume: exit" 0 "$status"
has_arg "resume: QEMU loads the state" "-incoming exec:cat $ROOT_DIR/state"
check "resume: the state loaded is the one saved" "$first" "$(cat "$WORK/qemu/loaded" 2>/dev/null)"
check "resume: the guest let run" cont "$(cat "$WORK/qemu/events" 2>/dev/null)"
check "resume: ready without cloud-init's line again" yes "$([ -e "$VM_RUN_DIR/cloud-init-finished" ] && echo yes)"
launcher_says "resume: said" "resumed the guest from its saved state"
check "resume: the activity answer tells" ',"resumedMiB":0' "$(start_report)"
# That run hibernated again: its state is the resumed guest's, under the same disks' key.
second=$(cat "$WORK/qemu/identity")
check "resume, then hibernate again" "$second" "$(cat "$ROOT_DIR/state" 2>/dev/null)"
# Another memory size: the state does not fit this guest.
check "other memory: exit" 0 "$(hib VM_MEMORY=96Mi)"
lacks_arg "other memory: booted cold" "-incoming"
launcher_says "other memory: the reason" "discarding the saved state (the guest's CPUs and memory changed): the guest boots cold"
check "other memory: the reason kept for the status" "the guest's CPUs and memory changed" "$(cat "$VM_RUN_DIR/state-discarded" 2>/dev/null)"
check "other memory: the activity answer tells" ",\"discarded\":\"the guest's CPUs and memory changed\"" "$(start_report)"
# A disk written since the state was saved (here its modification time moved).
touch -t 200001010000 "$ROOT_DIR/root.qcow2"
check "disk changed: exit" 0 "$(hib VM_MEMORY=96Mi)"
lacks_arg "disk changed: booted cold" "-incoming"
launcher_says "disk changed: the reason" "discarding the saved state (the disk root.qcow2 changed)"
# A state without its key; a launcher of another version.
rm -f "$ROOT_DIR/state.key"
check "no key: exit" 0 "$(hib)"
launcher_says "no key: the reason" "discarding the saved state (the state has no key)"
check "other QEMU: exit" 0 "$(hib FAKE_QEMU_VERSION=9.2.0)"
launcher_says "other QEMU: the reason" "discarding the saved state (QEMU changed)"
# QEMU cannot load it: the launcher fails, the state is gone, the next start boots cold.
# (The last state was saved by QEMU 9.2.0.)
check "load fails: exit" 1 "$(start_launcher VM_HIBERNATE=1 VM_ROOT_DISK_SIZE=100Mi VM_ROOT_DIR="$ROOT_DIR" VM_MEMORY=64Mi FAKE_QEMU_VERSION=9.2.0 FAKE_QEMU_LOAD_FAIL=1
	status=0
	wait "$LAUNCHER_PID" || status=$?
	echo "$status")"
check "load fails: the state removed" none "$(ls "$ROOT_DIR" | grep state || echo none)"
check "after a failed load: exit" 0 "$(hib)"
lacks_arg "after a failed load: booted cold" "-incoming"
# The migration fails: the guest is powered off instead, and no state is kept.
rm -f "$ROOT_DIR/state" "$ROOT_DIR/state.key"
check "migration fails: exit" 0 "$(hib FAKE_QEMU_MIGRATE_FAIL=1)"
check "migration fails: powered off" 1 "$(wc -l <"$WORK/qemu/presses")"
check "migration fails: no state" none "$(ls "$ROOT_DIR" | grep state || echo none)"
# No room on the volume for the guest's memory: powered off, saying why to the operator.
: >"$WORK/termination-log"
check "no room: exit" 0 "$(hib VM_MEMORY=64T VM_TERMINATION_LOG="$WORK/termination-log")"
check "no room: powered off" 1 "$(wc -l <"$WORK/qemu/presses")"
check "no room: the last words" "vm-launcher: not hibernated: no room for the state:" "$(grep -o '^vm-launcher: not hibernated: no room for the state:' "$WORK/termination-log")"
check "no room: a cold start reports no state" "" "$(start_report)"
# Hibernation turned off with a state saved: the start resumes it, the next stop powers off.
check "saved, then turned off: hibernate" 0 "$(hib)"
check "saved, then turned off: exit" 0 "$(run_launcher TERM VM_ROOT_DISK_SIZE=100Mi VM_ROOT_DIR="$ROOT_DIR" VM_MEMORY=64Mi)"
has_arg "saved, then turned off: resumed" "-incoming exec:cat $ROOT_DIR/state"
check "saved, then turned off: powered off" 1 "$(wc -l <"$WORK/qemu/presses")"
check "saved, then turned off: no state kept" none "$(ls "$ROOT_DIR" | grep state || echo none)"
check "VM_HIBERNATE without the persistent root disk" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_HIBERNATE=1)"
check "VM_HIBERNATE=yes refused" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_HIBERNATE=yes VM_ROOT_DISK_SIZE=100Mi VM_ROOT_DIR="$ROOT_DIR")"
rm -rf "$ROOT_DIR"

# --- VM_ACTIVITY_PORT in the whole run: checked before QEMU starts; the endpoint and the count of
# connections start with QEMU and stop with it, and the guest runs on without them.
rm -f "$VM_RUN_DIR/activity"
run_launcher FAKE_QEMU_EXIT=0 >/dev/null
check "VM_ACTIVITY_PORT unset: no activity mark" absent "$([ -e "$VM_RUN_DIR/activity" ] || echo absent)"
check "VM_ACTIVITY_PORT a forwarded tcp port: refused" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_ACTIVITY_PORT=2222)"
launcher_says "VM_ACTIVITY_PORT a forwarded tcp port: says so" "VM_ACTIVITY_PORT=2222 is a tcp port of VM_PORTS"
check "VM_ACTIVITY_PORT a forwarded tcp port: QEMU not started" absent "$([ -e "$WORK/args" ] || echo absent)"
check "VM_ACTIVITY_PORT out of range: refused" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_ACTIVITY_PORT=70000)"
check "VM_ACTIVITY_PORT without its token: refused" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_ACTIVITY_PORT=5353)"
launcher_says "VM_ACTIVITY_PORT without its token: says so" "$ci/activity-token"
nopem=$WORK/cloud-init-no-pem
badpem=$WORK/cloud-init-bad-pem
mkdir -p "$nopem" "$badpem"
printf 's3cret-T0ken\n' >"$nopem/activity-token"
printf 's3cret-T0ken\n' >"$badpem/activity-token"
check "VM_ACTIVITY_PORT without its key: refused" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_ACTIVITY_PORT=5353 VM_CLOUD_INIT_DIR="$nopem")"
launcher_says "VM_ACTIVITY_PORT without its key: says so" "$nopem/activity.pem"
printf 'not a PEM\n' >"$nopem/activity.pem"
check "VM_ACTIVITY_PORT, no PEM: refused" 1 "$(run_launcher FAKE_QEMU_EXIT=0 VM_ACTIVITY_PORT=5353 VM_CLOUD_INIT_DIR="$nopem")"
launcher_says "VM_ACTIVITY_PORT, no PEM: says so" "PRIVATE KEY and its CERTIFICATE"
# A PEM that only looks like one: socat cannot start, which the launcher tells, and the guest
# runs on until it powers off.
printf -- '-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n' >"$badpem/activity.pem"
start_launcher VM_CLOUD_INIT_DIR="$badpem" VM_ACTIVITY_PORT="${ENDPOINT_PORT:-5353}" VM_ACTIVITY_ADDRESS=127.0.0.1 \
	VM_ACTIVITY_CHECK_SECONDS=0.2
wait_for_qemu
term_once_said "activity endpoint's server (socat) exited" 50
check "activity server fails: the guest runs on, powers off, exit 0" 0 "$status"
launcher_says "activity server fails: says so" "activity endpoint's server (socat) exited"

# The launcher's terminal, when it has one (the chart's stdin and tty): `script` gives it one.
if command -v script >/dev/null 2>&1; then
	# shellcheck disable=SC2086 # "busybox sh" is a command and its argument.
	cat >"$WORK/on-tty" <<EOF
exec env -u VM_LAUNCHER_LIB PATH="$fake:$PATH" FAKE_QEMU_ARGS="$WORK/args" FAKE_QEMU_EXIT=0 \
	VM_BOOT_DIR="$boot" VM_DATA_DIR="$DATA_DIR" VM_CLOUD_INIT_DIR="$badpem" VM_RUN_DIR="$VM_RUN_DIR" \
	VM_MEMORY=2G VM_ACCEL=tcg VM_DATA_DISK_SIZE=200Mi VM_PORTS=tcp:2222 VM_ACTIVITY_PORT=5353 \
	VM_ACTIVITY_ADDRESS=127.0.0.1 $TEST_SHELL "$HERE/vm-launcher"
EOF
	script -qec "sh $WORK/on-tty" /dev/null </dev/null >"$WORK/out" 2>&1 || :
	if grep -q 'vm-launcher: starting:' "$WORK/out"; then
		launcher_says "activity: the console's terminal found" 'and input on the console (/dev/pts/[0-9]*)'
	else
		echo "script could not give the launcher a terminal: skipping the console's terminal test"
	fi
fi
run_launcher FAKE_QEMU_EXIT=0 VM_CLOUD_INIT_DIR="$badpem" VM_ACTIVITY_PORT=5353 VM_ACTIVITY_ADDRESS=127.0.0.1 >/dev/null
launcher_says "activity: no terminal, the console does not count" 'and not the console (no terminal)'

# running_with ID prints the processes, but zombies, whose environment has T_RUN_ID=ID.
running_with() {
	for environ in $(grep -l -s -a "T_RUN_ID=$1" /proc/[0-9]*/environ || :); do
		pid=${environ#/proc/}
		pid=${pid%/environ}
		stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
		state=${stat##*) }
		[ "${state%% *}" = Z ] || echo "$pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
	done
}
# The endpoint, live: its mark fresh at the start, touched while someone is connected (the fake
# tables changed under it), not when nobody is; everything stopped with QEMU.
if [ -n "$PEM_MADE" ]; then
	live=$WORK/live-net
	mkdir -p "$live"
	cp "$act/quiet/tcp" "$act/quiet/tcp6" "$live/"
	touch -d @1000000000 "$VM_RUN_DIR/activity"
	run_id=vm-launcher-test-$$-${TEST_SHELL%% *}
	start_launcher VM_CLOUD_INIT_DIR="$aci" VM_PORTS="tcp:2222,udp:$ENDPOINT_PORT" VM_ACTIVITY_PORT="$ENDPOINT_PORT" \
		VM_ACTIVITY_ADDRESS=127.0.0.1 VM_ACTIVITY_CHECK_SECONDS=0.2 VM_CONSOLE_LOG_CHECK_SECONDS=0.2 \
		VM_PROC_NET_DIR="$live" T_RUN_ID="$run_id"
	wait_for_qemu
	got=$(request_soon s3cret-T0ken)
	check "live endpoint: nobody yet" '200 {"connections":0,"idleSeconds":S}' "$(printf '%s\n' "$got" | sed 's/:[0-9]*}$/:S}/')"
	within "live endpoint: idle since the launcher started" 0 10 "$(idle_of "$got")"
	cp "$act/busy/tcp" "$act/busy/tcp6" "$live/"
	touch -d "@$(($(date +%s) - 1000))" "$VM_RUN_DIR/activity"
	sleep 1
	within "live endpoint: someone connected, the mark touched" 0 2 "$(seconds_since "$(stat -c %Y "$VM_RUN_DIR/activity")")"
	check "live endpoint: someone connected" '200 {"connections":1,"idleSeconds":0}' "$(request s3cret-T0ken)"
	cp "$act/quiet/tcp" "$act/quiet/tcp6" "$live/"
	touch -d "@$(($(date +%s) - 1000))" "$VM_RUN_DIR/activity"
	sleep 1
	got=$(request s3cret-T0ken)
	check "live endpoint: they left" '200 {"connections":0,"idleSeconds":S}' "$(printf '%s\n' "$got" | sed 's/:[0-9]*}$/:S}/')"
	within "live endpoint: idle since they left" 1000 1005 "$(idle_of "$got")"
	kill -TERM "$LAUNCHER_PID"
	status=0
	wait "$LAUNCHER_PID" || status=$?
	check "live endpoint: the guest powered off, exit 0" 0 "$status"
	check "live endpoint: stopped with QEMU" none "$(request s3cret-T0ken)"
	# Every process the launcher started is gone (they all carry T_RUN_ID), but for zombies of
	# the last sleeps of its loops, which whoever inherited them has not reaped yet.
	tries=0
	while left=$(running_with "$run_id") && [ -n "$left" ] && [ "$tries" -lt 30 ]; do
		sleep 0.1
		tries=$((tries + 1))
	done
	check "live endpoint: no process left behind" "" "$left"
fi

printf '%s passed, %s failed\n' "$PASS" "$FAIL"
[ "$FAIL" -eq 0 ]
