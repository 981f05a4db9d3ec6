#!/bin/sh
# test.sh boots a VM disk the way the pod backend does and checks it end to end:
#
#   sh images/vm-disk/test.sh DISK.qcow2
#
# It runs images/vm-launcher/vm-launcher itself (VM_* environment, boot, data and cloud-init
# directories, SIGTERM), with a NoCloud seed whose user-data gives the `debian` user an SSH key
# made here. One thing differs from a pod: the launcher forwards the guest's port 22 from port
# 22 of every address, which here is the host's own; a stand-in qemu-system-x86_64, first in
# PATH, rewrites that one forward to 127.0.0.1:PORT and runs the real QEMU with the launcher's
# arguments otherwise untouched. Checked, each with a deadline:
#   1. the kernel starts (its first line on the serial console)
#   2. ssh -i KEY debian@127.0.0.1 -p PORT works (cloud-init put the key in place)
#   3. cloud-init finished without errors, from the NoCloud seed; password logins are refused
#   4. SIGTERM to the launcher (ACPI power button) powers the guest off: QEMU and the launcher
#      exit 0 within POWEROFF_TIMEOUT; or, with TEST_PANIC=1, a kernel panic in the guest
#      (sysrq c) makes them exit non-zero (pvpanic)
# QEMU uses software emulation (VM_ACCEL=tcg) unless VM_ACCEL says otherwise.
#
# Environment: VM_ACCEL (tcg), VM_CPUS (1), VM_MEMORY (1Gi), KERNEL_TIMEOUT (300),
# SSH_TIMEOUT (900), POWEROFF_TIMEOUT (60), KEEP_LOGS (a directory to copy the logs to).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
LAUNCHER=$HERE/../vm-launcher/vm-launcher
KERNEL_TIMEOUT=${KERNEL_TIMEOUT:-300}
SSH_TIMEOUT=${SSH_TIMEOUT:-900}
POWEROFF_TIMEOUT=${POWEROFF_TIMEOUT:-60}

[ $# -eq 1 ] && [ -f "$1" ] || {
	echo "usage: sh test.sh DISK.qcow2" >&2
	exit 2
}
for tool in qemu-system-x86_64 qemu-img genisoimage socat ssh ssh-keygen ss; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "test.sh: $tool is missing" >&2
		exit 2
	}
done
[ -f "$LAUNCHER" ] || {
	echo "test.sh: no launcher at $LAUNCHER" >&2
	exit 2
}

START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
say() { printf '[%4ss] %s\n' "$(elapsed)" "$*"; }
FAILED=0
fail() {
	say "FAIL: $*"
	FAILED=1
}

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/vm-disk-test.XXXXXX")
LAUNCHER_PID=
cleanup() {
	# Only the processes this test started, by their pids.
	if [ -n "$LAUNCHER_PID" ] && kill -0 "$LAUNCHER_PID" 2>/dev/null; then
		kill -KILL "$LAUNCHER_PID" 2>/dev/null
	fi
	if [ -s "$WORK/qemu.pid" ]; then
		qpid=$(cat "$WORK/qemu.pid")
		if kill -0 "$qpid" 2>/dev/null; then
			say "killing QEMU ($qpid)"
			kill -KILL "$qpid" 2>/dev/null
		fi
	fi
	if [ -n "${KEEP_LOGS:-}" ]; then
		mkdir -p "$KEEP_LOGS"
		cp "$WORK"/*.log "$KEEP_LOGS"/ 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$WORK/boot" "$WORK/data" "$WORK/cloud-init" "$WORK/run" "$WORK/bin"
cp "$1" "$WORK/boot/disk.qcow2"
ssh-keygen -q -t ed25519 -N '' -C vm-disk-test -f "$WORK/key"

# The cloud-init Secret's keys, as the chart mounts them.
{
	echo '#cloud-config'
	echo 'ssh_authorized_keys:'
	echo "  - $(cat "$WORK/key.pub")"
} >"$WORK/cloud-init/userdata"
printf 'instance-id: vm-disk-test\nlocal-hostname: vm-disk-test\n' >"$WORK/cloud-init/metadata"

# A free port on 127.0.0.1 for the guest's ssh.
PORT=
p=$((20000 + $$ % 20000))
for _ in 1 2 3 4 5 6 7 8 9 10; do
	if [ -z "$(ss -Htln "sport = :$p")" ]; then
		PORT=$p
		break
	fi
	p=$((p + 1))
done
[ -n "$PORT" ] || {
	echo "test.sh: no free port" >&2
	exit 1
}

# The stand-in QEMU: the launcher's arguments, with ssh forwarded from 127.0.0.1:PORT only.
REAL_QEMU=$(command -v qemu-system-x86_64)
cat >"$WORK/bin/qemu-system-x86_64" <<EOF
#!/bin/sh
echo \$\$ >"$WORK/qemu.pid"
for a do
	shift
	case \$a in
	user,*) a=\$(printf '%s\n' "\$a" | sed 's/hostfwd=tcp:0\.0\.0\.0:22-:22/hostfwd=tcp:127.0.0.1:$PORT-:22/') ;;
	esac
	set -- "\$@" "\$a"
done
printf '%s\n' "\$*" >"$WORK/qemu-args.log"
exec "$REAL_QEMU" "\$@"
EOF
chmod +x "$WORK/bin/qemu-system-x86_64"

SSH="ssh -i $WORK/key -p $PORT -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=10"

say "booting $1 with $LAUNCHER (VM_ACCEL=${VM_ACCEL:-tcg}), ssh on 127.0.0.1:$PORT"
PATH=$WORK/bin:$PATH \
	VM_ACCEL=${VM_ACCEL:-tcg} VM_CPUS=${VM_CPUS:-1} VM_MEMORY=${VM_MEMORY:-1Gi} \
	VM_DATA_DISK_SIZE=1Gi VM_PORTS=tcp:22 \
	VM_BOOT_DIR=$WORK/boot VM_DATA_DIR=$WORK/data VM_CLOUD_INIT_DIR=$WORK/cloud-init \
	VM_RUN_DIR=$WORK/run \
	sh "$LAUNCHER" >"$WORK/serial.log" 2>"$WORK/launcher.log" &
LAUNCHER_PID=$!

# wait_for SECONDS COMMAND...: polls COMMAND every 2 s; fails once SECONDS have passed or the
# launcher has exited.
wait_for() {
	deadline=$(($(date +%s) + $1))
	shift
	while ! "$@" >/dev/null 2>&1; do
		if ! kill -0 "$LAUNCHER_PID" 2>/dev/null; then
			say "the launcher exited: $(tail -n 3 "$WORK/launcher.log")"
			return 1
		fi
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 2
	done
}

if wait_for "$KERNEL_TIMEOUT" grep -q 'Linux version' "$WORK/serial.log"; then
	say "kernel started: $(grep -m1 -a 'Linux version' "$WORK/serial.log" | cut -c1-100)"
else
	fail "no kernel within ${KERNEL_TIMEOUT}s"
fi

if [ "$FAILED" -eq 0 ]; then
	# shellcheck disable=SC2086 # SSH is a command and its options.
	if wait_for "$SSH_TIMEOUT" $SSH debian@127.0.0.1 true; then
		say "ssh debian@127.0.0.1 -p $PORT: logged in with the key from cloud-init"
		BOOT_TO_SSH=$(elapsed)
	else
		fail "no ssh login within ${SSH_TIMEOUT}s"
	fi
fi

# guest SECONDS COMMAND runs COMMAND in the guest over ssh, trying again while ssh itself fails
# (status 255: cloud-init restarts sshd once as it applies ssh_pwauth) for up to SECONDS.
guest() (
	deadline=$(($(date +%s) + $1))
	while :; do
		# shellcheck disable=SC2086 # SSH is a command and its options.
		out=$(timeout "$1" $SSH debian@127.0.0.1 "$2" 2>&1)
		rc=$?
		if [ "$rc" -ne 255 ] || [ "$(date +%s)" -ge "$deadline" ]; then
			printf '%s\n' "$out"
			return "$rc"
		fi
		sleep 2
	done
)

if [ "$FAILED" -eq 0 ]; then
	status=$(guest 600 'cloud-init status --wait --long')
	say "cloud-init: $(printf '%s' "$status" | tr '\n' ' ')"
	case $status in
	*'status: done'*) ;;
	*) fail "cloud-init did not finish cleanly" ;;
	esac
	ds=$(guest 60 cloud-id)
	say "cloud-id: $ds"
	[ "$ds" = nocloud ] || fail "cloud-init did not use the NoCloud seed"
	warnings=$(guest 60 'grep -E "WARNING|ERROR|Traceback" /var/log/cloud-init.log')
	[ -z "$warnings" ] || printf '%s\n' "$warnings" | cut -c1-200 | sed 's/^/    cloud-init.log: /'
	facts=$(guest 180 'hostname; sudo -n true && echo sudo-ok; uname -r; ip -4 -o addr show scope global | cut -c1-60; getent hosts deb.debian.org || echo "no DNS answer (informational)"; df -h / | tail -n 1; timeout 120 systemctl is-system-running --wait; systemctl --failed --no-legend --plain; ls /etc/ssh/ssh_host_*_key; cat /etc/machine-id; ls /etc/systemd/network; lsmod | grep -E "^(pvpanic|button)" | cut -d" " -f1' 2>&1)
	printf '%s\n' "$facts" | sed 's/^/    guest: /'
	case $facts in
	*vm-disk-test*) ;;
	*) fail "the hostname from meta-data was not set" ;;
	esac
	case $facts in
	*sudo-ok*) ;;
	*) fail "debian has no password-less sudo" ;;
	esac
	# Password logins: sshd must offer only publickey.
	methods=$(timeout 30 ssh -v -p "$PORT" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o BatchMode=yes -o PreferredAuthentications=none debian@127.0.0.1 true 2>&1 |
		tr -d '\r' | sed -n 's/.*Authentications that can continue: //p' | head -n 1)
	say "sshd offers: $methods"
	[ "$methods" = publickey ] || fail "sshd offers more than publickey: $methods"
	# Host keys: ECDSA and Ed25519 only (an RSA key took 15 s of a first boot to make).
	hostkeys=$(guest 30 'ls /etc/ssh/ssh_host_*_key | tr "\n" " "')
	say "host keys: $hostkeys"
	[ "$hostkeys" = "/etc/ssh/ssh_host_ecdsa_key /etc/ssh/ssh_host_ed25519_key " ] || fail "host keys: $hostkeys, want ECDSA and Ed25519 only"
	offered=$(timeout 30 ssh -p "$PORT" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes \
		-o HostKeyAlgorithms=rsa-sha2-512,rsa-sha2-256 -o ConnectTimeout=10 debian@127.0.0.1 true 2>&1 | tr -d '\r' | head -n 1)
	case $offered in
	*"no matching host key type"*) say "sshd offers no RSA host key" ;;
	*) fail "asked for an RSA host key: $offered" ;;
	esac
fi

TERM_AT=$(date +%s)
if [ "${TEST_PANIC:-0}" = 1 ]; then
	# The guest's kernel panics: pvpanic tells QEMU, which exits with a failure (-action
	# panic=exit-failure), and so does the launcher.
	say "crashing the guest's kernel (sysrq c)"
	guest 10 'sudo sh -c "echo c >/proc/sysrq-trigger"' >/dev/null
	WANT="non-zero"
else
	say "SIGTERM to the launcher (ACPI power button)"
	kill -TERM "$LAUNCHER_PID" 2>/dev/null
	WANT=0
fi
deadline=$((TERM_AT + POWEROFF_TIMEOUT))
while kill -0 "$LAUNCHER_PID" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
	sleep 1
done
if kill -0 "$LAUNCHER_PID" 2>/dev/null; then
	fail "QEMU did not exit within ${POWEROFF_TIMEOUT}s"
else
	wait "$LAUNCHER_PID"
	rc=$?
	LAUNCHER_PID=
	say "the launcher exited $rc, $(($(date +%s) - TERM_AT))s later: $(tail -n 1 "$WORK/launcher.log")"
	if [ "$WANT" = 0 ]; then
		[ "$rc" -eq 0 ] || fail "the launcher exited $rc, not 0"
	else
		[ "$rc" -ne 0 ] || fail "the launcher exited 0 after a kernel panic"
	fi
fi

say "QEMU ran with: $(cat "$WORK/qemu-args.log" 2>/dev/null)"
say "serial console, key lines:"
grep -a -E 'Kernel panic|SeaBIOS|Booting from|GRUB loading|Linux version|Command line|fsck|EXT4-fs \(vda1\)|Cloud-init v\.|login:|Power down|reboot: Power|Reached target.*(Power-Off|Multi-User)|Failed|pvpanic|Power Button' \
	"$WORK/serial.log" | tr -d '\r' | cut -c1-160 | sed 's/^/    /'
if [ "$FAILED" -eq 0 ]; then
	if [ "$WANT" = 0 ]; then
		say "PASS: kernel, cloud-init, ssh in ${BOOT_TO_SSH}s, ACPI power-off"
	else
		say "PASS: kernel, cloud-init, ssh in ${BOOT_TO_SSH}s, kernel panic reported"
	fi
	exit 0
fi
say "launcher log:"
sed 's/^/    /' "$WORK/launcher.log"
exit 1
