#!/bin/sh
# Tests a root filesystem built by rootfs.sh the way the workspace chart runs it, without Docker:
#
#   sh images/workspace-ide/test.sh ROOTFS.tar      (as root; needs unshare, chroot, curl)
#
# The tar is unpacked into a temporary directory and every command runs in fresh mount and PID
# namespaces (nothing of the host's mounts changes) on a read-only root, as uid and gid 1000,
# with no new privileges, an empty writable /home/coder and a fresh /tmp, as in
# helm-charts/workspace/templates/deployment.yaml:
#   - the image: the user coder, /tmp, the launcher, no compilers, -dev packages or apt lists;
#   - the clone init container: git clone of a local bare repository into $HOME/project, and its
#     second start, which keeps the checkout; git and rg work as uid 1000;
#   - the ide container: code-server with the chart's arguments (bound to 127.0.0.1 only) answers
#     /healthz, logs in with $PASSWORD and only with it, serves the workbench, and writes nothing
#     outside /home/coder and /tmp; first on a fresh volume (no /home/coder/project), then with
#     the clone.
#   - SIGTERM to dumb-init (the container's PID 1) stops code-server.
#   - a slow start: code-server's inner process takes 15 s to load (as under the pod's CPU limit
#     on a busy node), and code-server still comes up rather than exiting "timed out".
# Every wait has a deadline; every process started is killed by its PID at the end.
set -u

[ $# -eq 1 ] || { echo "usage: sh $0 ROOTFS.tar" >&2; exit 2; }
TAR=$1
PORT=${TEST_PORT:-18080}
PASSWORD=secret123
SOURCE_DATE_EPOCH=1735689600
[ "$(id -u)" = 0 ] || { echo "test.sh: run as root (unshare, chroot)" >&2; exit 2; }
for c in unshare chroot curl setpriv tar ps; do
	command -v "$c" >/dev/null || { echo "test.sh: $c not found" >&2; exit 2; }
done

PASS=0
FAIL=0
SERVER=
WORK=$(mktemp -d "${TMPDIR:-/tmp}/workspace-ide-test.XXXXXX")
cleanup() {
	stop_server || :
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
chmod 0755 "$WORK"
ROOT=$WORK/root

ok() { PASS=$((PASS + 1)); printf 'ok   %s\n' "$1"; }
fail() { FAIL=$((FAIL + 1)); printf 'FAIL %s\n' "$1"; [ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/     /'; }
# check NAME COMMAND...: passes when COMMAND succeeds.
check() {
	name=$1 && shift
	if out=$("$@" 2>&1); then ok "$name"; else fail "$name" "$out"; fi
}

# The pod: pod.sh runs as PID 1 of a new PID namespace (unshare --kill-child kills it, and so
# everything in that namespace, when unshare is killed), builds the container's mounts in a
# private mount namespace and runs "$@" on the read-only root as 1000:1000.
cat >"$WORK/pod.sh" <<'EOF'
set -eu
root=$1 home=$2 tmp=$3 && shift 3
mount --bind "$root" "$root"
mount --bind "$home" "$root/home/coder"
mount --bind "$tmp" "$root/tmp"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t tmpfs -o nosuid,mode=0755 dev "$root/dev"
for n in null zero full random urandom tty; do
	: >"$root/dev/$n" && mount --bind "/dev/$n" "$root/dev/$n"
done
mkdir "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$root/dev/shm"
mount -o remount,bind,ro "$root"
setpriv --no-new-privs chroot --userspec=1000:1000 "$root" \
	env -i HOME=/home/coder PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
EOF
# pod ENV=VALUE... COMMAND...: runs in the pod, in the foreground.
pod() {
	unshare --mount --propagation private --pid --fork --kill-child \
		sh "$WORK/pod.sh" "$ROOT" "$WORK/home" "$WORK/tmp" "$@"
}

# start_server [ENV=VALUE...]: code-server as the chart's ide container runs it (bound to
# 127.0.0.1).
start_server() {
	unshare --mount --propagation private --pid --fork --kill-child \
		sh "$WORK/pod.sh" "$ROOT" "$WORK/home" "$WORK/tmp" PASSWORD=$PASSWORD "$@" \
		/usr/bin/dumb-init -- /usr/bin/code-server --bind-addr "127.0.0.1:$PORT" \
		--auth password --disable-update-check --disable-telemetry /home/coder/project \
		>"$WORK/server.log" 2>&1 &
	SERVER=$!
}
# stop_server: SIGTERM to dumb-init, the container's PID 1 (what the kubelet sends), then waits
# for everything to end (10 s); past that, SIGKILL to unshare ends the whole PID namespace. unshare
# itself ignores SIGTERM while it waits. Fails if SIGTERM did not stop the server.
# alive PID: PID runs (an exited child stays a zombie until waited for).
alive() {
	st=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$st" ] && [ "${st#Z}" = "$st" ]
}
stop_server() {
	[ -n "$SERVER" ] || return 0
	pod_sh=$(ps -o pid= --ppid "$SERVER" 2>/dev/null | tr -d ' ')
	init=
	[ -z "$pod_sh" ] || init=$(ps -o pid= --ppid "$pod_sh" 2>/dev/null | tr -d ' ')
	[ -z "$init" ] || kill -TERM "$init" 2>/dev/null
	deadline=$(($(date +%s) + 10))
	while alive "$SERVER" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
	stopped=true
	if alive "$SERVER"; then
		stopped=false
		kill -KILL "$SERVER" 2>/dev/null
	fi
	wait "$SERVER" 2>/dev/null
	SERVER=
	$stopped
}
url() { printf 'http://127.0.0.1:%s%s' "$PORT" "$1"; }
# wait_healthy SECONDS
wait_healthy() {
	deadline=$(($(date +%s) + $1))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		alive "$SERVER" || return 1
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$(url /healthz)") || :
		[ "$code" = 200 ] && return 0
		sleep 0.5
	done
	return 1
}
# login PASSWORD: prints the response's status and Set-Cookie header names.
login() {
	curl -s --max-time 10 -o /dev/null -D - --data-urlencode "password=$1" "$(url /login)" \
		| tr -d '\r' | awk 'NR == 1 { print $2 } tolower($1) == "set-cookie:" { split($2, c, "="); print c[1] }'
}

if curl -s -o /dev/null --max-time 2 "$(url /)"; then
	echo "test.sh: something already listens on 127.0.0.1:$PORT (set TEST_PORT)" >&2
	exit 2
fi

# --- The tar itself.
start=$(date +%s)
mkdir "$ROOT" "$WORK/home" "$WORK/tmp"
chown 1000:1000 "$WORK/home"
chmod 1777 "$WORK/tmp"
tar -xpf "$TAR" -C "$ROOT" --numeric-owner || { echo "test.sh: cannot unpack $TAR" >&2; exit 1; }
tar -tvf "$TAR" --numeric-owner >"$WORK/list"
check "tar: no device nodes" sh -c "! grep -q '^[bc]' '$WORK/list'"
limit=$(date -u -d "@$SOURCE_DATE_EPOCH" '+%Y-%m-%d %H:%M:%S')
check "tar: no mtime after SOURCE_DATE_EPOCH ($limit)" sh -c "! TZ=UTC tar -tvf '$TAR' --full-time | awk -v l='$limit' '\$4 \" \" \$5 > l' | grep ."
check "tar: no ./ prefix, sorted" sh -c "tar -tf '$TAR' | head -1 | grep -qx bin"

# --- The image.
check "passwd: coder is 1000:1000, home /home/coder" grep -qx 'coder:x:1000:1000::/home/coder:/bin/bash' "$ROOT/etc/passwd"
check "group: coder is 1000" grep -qx 'coder:x:1000:' "$ROOT/etc/group"
check "/home/coder owned by 1000:1000" test "$(stat -c %u:%g "$ROOT/home/coder")" = 1000:1000
check "/tmp is 1777" test "$(stat -c %a "$ROOT/tmp")" = 1777
for f in /usr/bin/code-server /usr/bin/dumb-init /usr/bin/node /usr/bin/git /usr/bin/rg /usr/bin/ssh; do
	check "$f is there" test -x "$ROOT$f"
done
check "no compiler or make" sh -c "! ls '$ROOT'/usr/bin/gcc* '$ROOT'/usr/bin/g++* '$ROOT'/usr/bin/cc '$ROOT'/usr/bin/make 2>/dev/null | grep -q ."
check "no -dev package" sh -c "! grep -q '^Package: .*-dev\$' '$ROOT/var/lib/dpkg/status'"
check "no apt lists or package cache" sh -c "! find '$ROOT/var/lib/apt/lists' '$ROOT/var/cache/apt' -type f | grep -q ."
check "no manual pages" sh -c "! find '$ROOT/usr/share/man' -type f 2>/dev/null | grep -q ."
check "no build leftovers or source maps in code-server" sh -c "! find '$ROOT/usr/lib/code-server' \\( -name '*.o' -o -name '*.map' -o -name 'build-tmp-*' -o -path '*/build/Makefile' -o -path '*/build/Release/obj.target' \\) | grep ."

# --- The clone init container, as uid 1000 on the read-only root.
check "git works as 1000" pod git --version
check "rg works as 1000" pod rg --version
check "a bare repository to clone" pod sh -c '
	set -e
	git init -q -b main /tmp/src
	echo "needle" >/tmp/src/hello.txt
	git -C /tmp/src add hello.txt
	git -C /tmp/src -c user.name=test -c user.email=test@example.invalid commit -q -m init
	git clone -q --bare /tmp/src /tmp/repo.git'
# shellcheck disable=SC2016 # expanded by the pod's sh, as in the chart
CLONE='test -d "$HOME/project/.git" || git clone ${GIT_REF:+--branch "$GIT_REF"} -- "$GIT_URL" "$HOME/project"'
check "the init container's clone" pod GIT_URL=/tmp/repo.git GIT_REF=main sh -c "$CLONE"
check "the clone is there, owned by 1000" test "$(stat -c %u "$WORK/home/project/hello.txt" 2>/dev/null)" = 1000
check "a second start keeps the checkout" pod GIT_URL=/nonexistent GIT_REF= sh -c "$CLONE"
check "rg finds in the clone" pod rg -q needle /home/coder/project

# --- The ide container: first on a fresh volume (no /home/coder/project), then on the clone.
mv "$WORK/home/project" "$WORK/project"
for phase in fresh clone; do
	if [ "$phase" = clone ]; then mv "$WORK/project" "$WORK/home/project"; fi
	start_server
	if wait_healthy 90; then
		ok "$phase: /healthz answers 200"
	else
		fail "$phase: /healthz answers 200" "$(tail -n 20 "$WORK/server.log")"
		break
	fi
	got=$(login wrong-password | tr '\n' ' ')
	case $got in *code-server-session*) fail "$phase: a wrong password gets no session" "$got" ;;
	*) ok "$phase: a wrong password gets no session ($got)" ;; esac
	got=$(login "$PASSWORD" | tr '\n' ' ')
	case $got in 302*code-server-session*) ok "$phase: the password logs in ($got)" ;;
	*) fail "$phase: the password logs in" "$got" ;; esac
	# The workbench with the session: code-server redirects / to ?folder=<the argument>.
	cookie=$(curl -s --max-time 10 -o /dev/null -D - --data-urlencode "password=$PASSWORD" "$(url /login)" \
		| tr -d '\r' | sed -n 's/^[Ss]et-[Cc]ookie: \(code-server-session=[^;]*\).*/\1/p')
	loc=$(curl -s --max-time 10 -o /dev/null -w '%{http_code} %{redirect_url}' -b "$cookie" "$(url /)")
	echo "     $phase: GET / -> $loc"
	code=$(curl -s --max-time 20 -o "$WORK/workbench.html" -w '%{http_code}' -b "$cookie" \
		"$(url '/?folder=/home/coder/project')")
	if [ "$code" = 200 ] && grep -q 'vscode-workbench-web-configuration' "$WORK/workbench.html"; then
		ok "$phase: the workbench page is served ($code)"
	else
		fail "$phase: the workbench page is served" "status $code"
	fi
	check "$phase: still healthy" sh -c "curl -sf --max-time 5 -o /dev/null '$(url /healthz)'"
	if stop_server; then ok "$phase: SIGTERM to dumb-init stops code-server"
	else fail "$phase: SIGTERM to dumb-init stops code-server" "$(tail -n 5 "$WORK/server.log")"; fi
	check "$phase: no write error on the read-only root" \
		sh -c "! grep -Ei 'EROFS|read-only file system|EACCES' '$WORK/server.log'"
	if [ "$phase" = fresh ]; then
		if [ -e "$WORK/home/project" ]; then
			echo "     fresh: code-server created /home/coder/project"
		else
			echo "     fresh: /home/coder/project still does not exist (code-server does not create it)"
		fi
		rm -rf "$WORK/home/project"
	fi
done
check "code-server wrote its config in the volume" test -f "$WORK/home/.config/code-server/config.yaml"

# --- A slow start: the inner process code-server forks (out/node/entry) blocks for 15 s before
# it loads, longer than upstream's 10 s wait for it.
cat >"$WORK/tmp/slow-start.js" <<'EOF'
if (process.env.CODE_SERVER_PARENT_PID && /\/out\/node\/entry(\.js)?$/.test(process.argv[1] || ""))
	Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 15000);
EOF
start_server NODE_OPTIONS=--require=/tmp/slow-start.js
if wait_healthy 90; then
	ok "slow start: /healthz answers after an inner start of 15 s"
else
	fail "slow start: /healthz answers after an inner start of 15 s" "$(tail -n 20 "$WORK/server.log")"
fi
stop_server || :

echo "($(($(date +%s) - start)) s)"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
