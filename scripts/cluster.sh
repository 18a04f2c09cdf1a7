#!/usr/bin/env bash
# A real single-node Kubernetes for the cluster tests, built offline from the Go module proxy (docs/kubernetes.md,
# "Test cluster"). Longer than ~600 lines because it is one procedure: build, bring up and tear down one cluster,
# restoring the host exactly; its steps share the paths and settings defined at the top.
#   cluster.sh build    Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl) and
#                       the agent-sandbox controller, its CRDs and local-path-provisioner into $SANDGATE_K8S_CACHE; a no-op when cached
#   cluster.sh up       etcd, the control plane, containerd, the kubelet, Pod networking, the pause image, our
#                       sandbox images, the agent-sandbox CRDs and controller; waits for the Node to be Ready.
#                       On a running cluster it only prints its status.
#   cluster.sh down     stops all of it, removes the state dir and restores every host setting up or the kubelet
#                       changed (sysctls, cgroups, network namespaces, the bridge, iptables chains, paths)
#   cluster.sh status   what runs, the Node, the images, the memory it uses
#   cluster.sh images   imports our sandbox images that changed in Docker since (up does it too)
#   cluster.sh running  exit status 0 when the whole cluster runs and its Node is Ready
#   cluster.sh env      the exports that point kubectl and the tests at the cluster
# Root on Debian (bookworm). Debian packages it needs are installed with apt only when missing.
# Environment: SANDGATE_K8S_CACHE (/var/cache/sandgate/k8s), SANDGATE_K8S_STATE (/var/lib/sandgate-k8s),
# SANDGATE_K8S_IMAGES (targets to import, e.g. "base browser"; default every tag of the image repository present),
# SANDGATE_K8S_IMAGE_REPO (the Docker repository they come from; default $SANDGATE_IMAGE_REPO or sandgate/sandbox).
# In containerd they are always docker.io/sandgate/sandbox:<target>, the names Pods use (imagePullPolicy Never).
set -euo pipefail

K8S_VERSION=v1.37.2
K8S_MODULE_VERSION=v0.37.2
AGENT_SANDBOX_VERSION=v0.5.6
LOCAL_PATH_VERSION=v0.0.30
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SANDGATE_K8S_CACHE:-/var/cache/sandgate/k8s}
STATE=${SANDGATE_K8S_STATE:-/var/lib/sandgate-k8s}
SRC=$CACHE/src-$K8S_VERSION
BIN=$CACHE/bin-$K8S_VERSION
CTL=$CACHE/controllers-$K8S_VERSION-as-$AGENT_SANDBOX_VERSION-lp-$LOCAL_PATH_VERSION
K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
IMAGE_REPO=${SANDGATE_K8S_IMAGE_REPO:-${SANDGATE_IMAGE_REPO:-sandgate/sandbox}}
CLUSTER_IMAGE_REPO=docker.io/sandgate/sandbox
PAUSE_IMAGE=sandgate.local/k8s/pause:3.10

# Loopback ports: nothing of the cluster listens on another address.
API_PORT=6443
ETCD_PORT=12379
ETCD_PEER_PORT=12380
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
CM_PORT=10257
SCHED_PORT=10259
AS_METRICS_PORT=18480
AS_PROBE_PORT=18481
# PersistentVolumeClaims of this class (the default) get a directory below the state dir, made by Rancher's
# local-path-provisioner (what kind and k3s ship), which runs out of cluster like the agent-sandbox controller.
STORAGE_CLASS=sandgate-local
STORAGE_NAMESPACE=sandgate-storage
SERVICE_CIDR=10.96.0.0/16
# Candidate pod ranges; the first that overlaps no route of the host (Docker's bridges included) is used.
POD_CIDR_CANDIDATES=(10.244.0.0/16 10.245.0.0/16 10.246.0.0/16 10.247.0.0/16 10.88.0.0/16 10.42.0.0/16)
BRIDGE=sandgatek8s0
CNI_NETWORK=sandgate-k8s

PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
SAVED=$STATE/host-saved
CTRD_SOCK=$STATE/containerd/containerd.sock
# containerd's content and snapshots outlive the cluster, in the cache: an image already imported is not imported
# again (docker save of the browser image alone is over a gigabyte), and down does not delete gigabytes of layers.
# down deletes every container first, so nothing of a Pod survives in it.
CTRD_ROOT=$CACHE/containerd-root
ADMIN_KUBECONFIG=$STATE/admin.kubeconfig
# The API server reaches the kubelet by the Node's host name, and the kubelet listens on loopback only: the
# machine's name where it resolves to loopback (Debian's /etc/hosts), else "localhost".
NODE=$(hostname | tr '[:upper:]' '[:lower:]')
case "$(getent ahostsv4 "$NODE" 2>/dev/null | awk 'NR == 1 { print $1 }')" in 127.*) ;; *) NODE=localhost ;; esac
# Host settings the kubelet changes on start (it sets what it needs and never puts them back).
SAVED_SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# Host paths the kubelet or containerd may create whatever their configured roots; down removes those up created.
HOST_PATHS=(/var/log/pods /var/log/containers /var/lib/kubelet /var/run/kubernetes /etc/kubernetes /var/lib/cni /etc/cni /run/netns /opt/containerd)
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet agent-sandbox-controller local-path-provisioner)

say() { echo "cluster: $*" >&2; }
fail() { echo "cluster: $*" >&2; exit 1; }

need_root() {
	[ "$(id -u)" = 0 ] || fail "run as root: the cluster runs containerd and a kubelet on this host."
}

# --- Debian packages --------------------------------------------------------------------------------------------

apt_updated=0
apt_install() {
	[ -r /etc/debian_version ] && command -v apt-get >/dev/null || fail "$* missing and this is not Debian: install it yourself."
	if [ "$apt_updated" = 0 ] && [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n 1)" ]; then
		apt-get update -qq >&2
	fi
	apt_updated=1
	# Debian's postinst scripts would start etcd and containerd as services; policy-rc.d, where present, stops that,
	# and the cluster runs its own instances anyway, on their own ports and sockets.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 || fail "could not install $* with apt-get."
}

ensure_packages() {
	local missing=() p
	for p in etcd-server containerd runc containernetworking-plugins openssl gcc libc6-dev iptables iproute2 curl; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} = 0 ] || apt_install "${missing[@]}"
}

# --- build ------------------------------------------------------------------------------------------------------

# A build of Kubernetes anywhere on this machine (ours, or a one-off prebuild filling the same Go build cache)
# writes into $BIN.tmp; while one runs, nobody starts another, so two builds never compete for the cores.
k8s_build_running() {
	pgrep -f -- "go build .*-o $BIN.tmp/" >/dev/null || pgrep -f -- "bash .*$CACHE/prebuild.sh" >/dev/null
}

binary_ok() { # a truncated binary (an interrupted copy) fails to run
	local args=(--version)
	[ "${1##*/}" != kubectl ] || args=(version --client)
	local out
	[ -x "$1" ] && out=$("$1" "${args[@]}" 2>/dev/null) && [[ "$out" == *"$K8S_VERSION"* ]]
}

k8s_binaries_ok() {
	local b
	for b in "${K8S_BINARIES[@]}"; do binary_ok "$BIN/$b" || return 1; done
}

k8s_source() {
	[ -d "$SRC" ] && return 0
	local dir
	dir=$(cd "$CACHE" && GOFLAGS=-mod=mod GOWORK=off go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
	[ -n "$dir" ] || fail "go mod download k8s.io/kubernetes@$K8S_VERSION gave no module directory."
	rm -rf "$SRC.tmp"
	cp -r "$dir" "$SRC.tmp"
	chmod -R u+w "$SRC.tmp"
	rm -f "$SRC.tmp/go.work" "$SRC.tmp/go.work.sum"
	# The staging modules are published on their own as k8s.io/X v0.N.M: the module proxy has them, the module zip
	# of k8s.io/kubernetes has no staging tree.
	sed -i -E "s#(k8s.io/[a-z0-9-]+) => ./staging/src/k8s.io/[a-z0-9-]+#\\1 => \\1 $K8S_MODULE_VERSION#" "$SRC.tmp/go.mod"
	mv "$SRC.tmp" "$SRC"
}

build_k8s() {
	k8s_binaries_ok && return 0
	if k8s_build_running; then
		say "a Kubernetes build is running (log: $CACHE/prebuild.log); waiting for it to end"
		local pid
		while k8s_build_running; do
			pid=$(pgrep -f -- "bash .*$CACHE/prebuild.sh" | head -n 1)
			[ -n "$pid" ] || pid=$(pgrep -f -- "go build .*-o $BIN.tmp/" | head -n 1)
			if [ -n "$pid" ]; then tail --pid="$pid" -f /dev/null; fi
		done
	fi
	k8s_binaries_ok && return 0
	k8s_source
	mkdir -p "$BIN.tmp"
	local b start
	for b in "${K8S_BINARIES[@]}"; do
		binary_ok "$BIN.tmp/$b" && continue
		start=$SECONDS
		say "building $b $K8S_VERSION (cold: many minutes; with a warm Go build cache: a relink)"
		(cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOWORK=off go build -trimpath \
			-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" \
			-o "$BIN.tmp/$b" "./cmd/$b") || fail "building $b failed."
		say "built $b in $((SECONDS - start)) s"
	done
	for b in "${K8S_BINARIES[@]}"; do binary_ok "$BIN.tmp/$b" || fail "$BIN.tmp/$b does not run."; done
	rm -rf "$BIN"
	mv "$BIN.tmp" "$BIN"
}

controllers_ok() {
	[ -x "$CTL/bin/agent-sandbox-controller" ] && [ -x "$CTL/bin/local-path-provisioner" ] &&
		[ "$(find "$CTL/crds" -name '*.yaml' 2>/dev/null | wc -l)" -ge 4 ]
}

# The two controllers are built in one scratch module made from Kubernetes' own go.mod, so they compile against the
# very k8s.io/* v0.37.2 packages (and every other dependency at the version) Kubernetes was built with: those are
# hits in the Go build cache, and a fresh machine compiles the controllers' own code only, not a second client-go of
# another version each. Not `go install pkg@version` either: that asks the proxy for the module's version list
# (deprecation notices), which the proxy here refuses for agent-sandbox.
build_controllers() {
	controllers_ok && return 0
	k8s_source
	local start=$SECONDS mod=$CTL.tmp/src
	rm -rf "$CTL.tmp"
	mkdir -p "$CTL.tmp/bin" "$CTL.tmp/crds" "$mod"
	sed 's#^module k8s.io/kubernetes$#module sandgate.local/cluster-controllers#' "$SRC/go.mod" >"$mod/go.mod"
	cp "$SRC/go.sum" "$mod/go.sum"
	say "building the agent-sandbox controller $AGENT_SANDBOX_VERSION and local-path-provisioner $LOCAL_PATH_VERSION against Kubernetes' modules"
	local before
	before=$(module_versions "$mod")
	local out
	out=$(cd "$mod" && go_mod get "sigs.k8s.io/agent-sandbox@$AGENT_SANDBOX_VERSION" "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION" 2>&1) ||
		fail "go get of the controllers failed: $out"
	# go get raises shared dependencies to what the controllers ask for; hold each at Kubernetes' version.
	local path version
	while read -r path version; do
		[ -n "$path" ] && echo "replace $path => $path $version" >>"$mod/go.mod"
	done < <(LC_ALL=C comm -23 <(echo "$before") <(module_versions "$mod"))
	(cd "$mod" && CGO_ENABLED=0 go_mod build -trimpath -ldflags "-s -w" -o "$CTL.tmp/bin/" \
		sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller github.com/rancher/local-path-provisioner) ||
		fail "building the controllers failed."
	cp "$(cd "$mod" && go_mod list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)"/k8s/crds/*.yaml "$CTL.tmp/crds/"
	rm -rf "$mod" "$CTL"
	mv "$CTL.tmp" "$CTL"
	say "built the controllers in $((SECONDS - start)) s"
}

go_mod() { GOFLAGS=-mod=mod GOWORK=off go "$@"; }

# module_versions DIR: "path version" of every module of DIR's build list not replaced, sorted for comm.
module_versions() { (cd "$1" && go_mod list -m -f '{{if not .Replace}}{{.Path}} {{.Version}}{{end}}' all | LC_ALL=C sort); }

cmd_build() {
	command -v go >/dev/null || fail "go is not installed."
	mkdir -p "$CACHE"
	exec 8>"$CACHE/.build.lock"
	flock 8
	build_k8s
	build_controllers
	say "binaries: $BIN, $CTL/bin"
}

# --- processes ----------------------------------------------------------------------------------------------------

# Every process the cluster starts is recorded as "pid binary": down stops exactly these, never anything by name,
# and never a process that reused a recorded pid.
start_proc() {
	local name=$1
	shift
	setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
	local pid=$! exe start=$SECONDS
	exe=$(readlink -f "$1")
	echo "$pid $exe" >"$PIDS/$name.pid"
	# Until the child has exec'd, /proc/$pid/exe is still bash or setsid, and alive would call a starting
	# component dead (on a busy machine that took longer than a refused curl: "exited while waiting", empty log).
	while kill -0 "$pid" 2>/dev/null && [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" != "$exe" ]; do
		((SECONDS - start < 30)) || break
		sleep 0.05
	done
}

proc_pid() { # prints the pid of a recorded component that still runs
	local pid exe
	[ -r "$PIDS/$1.pid" ] || return 1
	read -r pid exe <"$PIDS/$1.pid"
	[ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] || return 1
	echo "$pid"
}

alive() { proc_pid "$1" >/dev/null; }

stop_proc() {
	local pid
	pid=$(proc_pid "$1") || return 0
	kill -TERM "$pid" 2>/dev/null || true
	local start=$SECONDS
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS - start >= 30)); then
			kill -KILL "$pid" 2>/dev/null || true
		fi
		((SECONDS - start < 60)) || { say "$1 ($pid) does not stop"; return 1; }
		sleep 0.2
	done
}

# wait_for WHAT SECONDS COMPONENT COMMAND...: polls COMMAND until it succeeds; fails early, with the component's
# log, if the component it waits on has died.
wait_for() {
	local what=$1 limit=$2 comp=$3 start=$SECONDS
	shift 3
	until "$@" >/dev/null 2>&1; do
		if [ -n "$comp" ] && ! alive "$comp"; then
			tail -n 30 "$LOGS/$comp.log" >&2 || true
			fail "$comp exited while waiting for $what (log: $LOGS/$comp.log)."
		fi
		((SECONDS - start < limit)) || {
			[ -z "$comp" ] || tail -n 30 "$LOGS/$comp.log" >&2 || true
			fail "$what: not within ${limit} s."
		}
		sleep 0.5
	done
}

kubectl() { "$BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
ctr_k8s() { ctr --address "$CTRD_SOCK" --namespace k8s.io "$@"; }

api_ready() {
	curl -sf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://127.0.0.1:$API_PORT/readyz" | grep -qx ok
}

node_ready() {
	[ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# --- host settings ------------------------------------------------------------------------------------------------

save_host() {
	mkdir -p "$SAVED"
	local s
	for s in "${SAVED_SYSCTLS[@]}"; do
		echo "$s=$(sysctl -n "$s")" >>"$SAVED/sysctl"
	done
	for s in "${HOST_PATHS[@]}"; do
		[ -e "$s" ] && echo "$s" >>"$SAVED/paths"
	done
	touch "$SAVED/paths"
	ls /run/netns 2>/dev/null >"$SAVED/netns" || true
	local t
	for t in filter nat mangle raw; do
		iptables-save -t "$t" 2>/dev/null | sed -n 's/^:\([^ ]*\) .*/\1/p' | sed "s/^/$t /" >>"$SAVED/chains" || true
	done
}

restore_host() {
	local t chain line
	# iptables: the chains the kubelet (or anything of the cluster) added, and every rule that jumps to them.
	if [ -r "$SAVED/chains" ]; then
		for t in filter nat mangle raw; do
			iptables-save -t "$t" 2>/dev/null | sed -n 's/^:\([^ ]*\) .*/\1/p' | while read -r chain; do
				case "$chain" in KUBE-* | CNI-*) ;; *) continue ;; esac
				grep -qx "$t $chain" "$SAVED/chains" && continue
				{ iptables-save -t "$t" | grep -E -- "^-A .* -j $chain( |\$)" || true; } | sed 's/^-A/-D/' | while read -r line; do
					eval "iptables -w -t $t $line" || true
				done
				iptables -w -t "$t" -F "$chain" 2>/dev/null || true
				iptables -w -t "$t" -X "$chain" 2>/dev/null || say "could not remove iptables chain $t/$chain"
			done
		done
	fi
	if [ -r "$SAVED/sysctl" ]; then
		while IFS= read -r line; do sysctl -q -w "$line" >/dev/null || say "could not restore sysctl $line"; done <"$SAVED/sysctl"
	fi
	# The kubelet links every container's log into /var/log/containers whatever its own directories are.
	find /var/log/containers -maxdepth 1 -type l -lname "$STATE/*" -delete 2>/dev/null || true
	if [ -r "$SAVED/paths" ]; then
		local p
		for p in "${HOST_PATHS[@]}"; do
			[ -e "$p" ] || continue
			grep -qx "$p" "$SAVED/paths" && continue
			# Only what the cluster left there: a path something else created meanwhile is not ours to remove.
			if [ "$p" = /run/netns ] || [ "$p" = /var/log/containers ] || [ "$p" = /var/log/pods ]; then
				rmdir "$p" 2>/dev/null || say "$p is not empty; left in place"
			else
				rm -rf "$p"
			fi
		done
	fi
}

# The CRI's network namespaces live in /run/netns whatever containerd's state dir: remove the ones created since up.
remove_netns() {
	local n
	for n in $(ls /run/netns 2>/dev/null); do
		case "$n" in cni-*) ;; *) continue ;; esac
		[ -r "$SAVED/netns" ] && grep -qx "$n" "$SAVED/netns" && continue
		umount "/run/netns/$n" 2>/dev/null || true
		rm -f "/run/netns/$n"
	done
}

# Unmounts everything below the state dir (the kubelet's volumes, containerd's rootfs and shm mounts), deepest first.
unmount_state() {
	local m
	for _ in 1 2 3; do
		awk -v p="$STATE/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
	done
	if awk -v p="$STATE/" 'index($5, p) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
		say "mounts below $STATE remain:"
		awk -v p="$STATE/" 'index($5, p) == 1 { print "  " $5 }' /proc/self/mountinfo >&2
		return 1
	fi
}

# The kubelet's cgroups (cgroupfs driver: /kubepods/... in every v1 hierarchy), deepest first, once their tasks
# are gone.
remove_cgroups() {
	local d
	for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[ -d "$d" ] || continue
		find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
		[ -d "$d" ] && say "cgroup $d still has tasks; left in place"
	done
	return 0
}

ip4_int() {
	local a b c d
	IFS=. read -r a b c d <<<"$1"
	echo $(((a << 24) | (b << 16) | (c << 8) | d))
}

# cidr_overlap A/LEN B/LEN: whether the two IPv4 ranges share an address.
cidr_overlap() {
	local a=${1%/*} al=${1#*/} b=${2%/*} bl=${2#*/}
	[ "$al" = "$1" ] && al=32
	[ "$bl" = "$2" ] && bl=32
	local short=$((al < bl ? al : bl))
	local mask=$(((0xffffffff << (32 - short)) & 0xffffffff))
	(($(($(ip4_int "$a") & mask)) == $(($(ip4_int "$b") & mask))))
}

pick_pod_cidr() {
	local c route used=()
	mapfile -t used < <(ip -4 route show table all | awk '{ w = $1; if (w ~ /^(local|broadcast|unreachable|blackhole|prohibit|throw)$/) w = $2; if (w != "default") print w }')
	for c in "${POD_CIDR_CANDIDATES[@]}"; do
		for route in "${used[@]}"; do
			cidr_overlap "$c" "$route" && continue 2
		done
		echo "$c"
		return 0
	done
	fail "every candidate pod range (${POD_CIDR_CANDIDATES[*]}) overlaps a route of this host."
}

port_free() { ! ss -Hltn "sport = :$1" | grep -q .; }

# --- certificates and kubeconfigs ---------------------------------------------------------------------------------

make_cert() { # name subject ext [sans]
	local name=$1 subj=$2 eku=$3 sans=${4:-}
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/$name.key" \
		-subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$eku"
		[ -z "$sans" ] || echo "subjectAltName=$sans"
	} >"$PKI/$name.ext"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 30 \
		-extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

make_kubeconfig() { # file cert-name
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sandgate-k8s
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: sandgate-k8s
  context:
    cluster: sandgate-k8s
    user: $2
current-context: sandgate-k8s
EOF
	chmod 0600 "$1"
}

make_pki() {
	mkdir -p "$PKI"
	chmod 0700 "$PKI"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj /CN=sandgate-k8s-ca \
		-keyout "$PKI/ca.key" -out "$PKI/ca.crt" -addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
	make_cert apiserver /CN=kube-apiserver serverAuth \
		"DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:${SERVICE_CIDR%.0/*}.1"
	make_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
	make_cert admin "/O=system:masters/CN=sandgate-admin" clientAuth
	make_cert controller-manager /CN=system:kube-controller-manager clientAuth
	make_cert scheduler /CN=system:kube-scheduler clientAuth
	make_cert kubelet "/O=system:nodes/CN=system:node:$NODE" clientAuth
	make_cert kubelet-serving "/CN=$NODE" serverAuth "DNS:$NODE,DNS:localhost,IP:127.0.0.1"
	openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	make_kubeconfig "$ADMIN_KUBECONFIG" admin
	make_kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager
	make_kubeconfig "$STATE/scheduler.kubeconfig" scheduler
	make_kubeconfig "$STATE/kubelet.kubeconfig" kubelet
}

# --- components ---------------------------------------------------------------------------------------------------

start_etcd() {
	mkdir -p "$STATE/etcd"
	chmod 0700 "$STATE/etcd"
	start_proc etcd "$(command -v etcd)" --name sandgate-k8s --data-dir "$STATE/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "sandgate-k8s=http://127.0.0.1:$ETCD_PEER_PORT" \
		--quota-backend-bytes 2147483648 --snapshot-count 10000
	wait_for "etcd health" 120 etcd curl -sf --max-time 3 "http://127.0.0.1:$ETCD_PORT/health"
}

start_control_plane() {
	start_proc kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --secure-port "$API_PORT" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--client-ca-file "$PKI/ca.crt" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types Hostname \
		--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--endpoint-reconciler-type none --profiling=false --cert-dir "$STATE/apiserver-certs"
	wait_for "kube-apiserver /readyz" 300 kube-apiserver api_ready
	start_proc kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig "$STATE/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$CM_PORT" --leader-elect=false \
		--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--use-service-account-credentials --allocate-node-cidrs=false --profiling=false \
		--cert-dir "$STATE/controller-manager-certs"
	start_proc kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig "$STATE/scheduler.kubeconfig" \
		--authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
		--authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --leader-elect=false --profiling=false \
		--cert-dir "$STATE/scheduler-certs"
}

start_containerd() {
	mkdir -p "$STATE/containerd" "$STATE/cni/net.d" "$STATE/cni/ipam" "$CTRD_ROOT"
	cat >"$STATE/containerd/config.toml" <<EOF
# containerd for the test cluster only: its own root, state, socket and runc root, beside Docker's containerd.
version = 2
root = "$CTRD_ROOT"
state = "$STATE/containerd/state"
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$STATE/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The sandbox this runs in lacks CAP_SYS_RESOURCE: without this, runc fails with "can't get final child's PID
  # from pipe" when it lowers a container's oom_score_adj.
  restrict_oom_score_adj = true
  # Pods' network namespaces below our state dir, not in the host's /run/netns.
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$STATE/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
EOF
	cat >"$STATE/cni/net.d/10-$CNI_NETWORK.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$STATE/cni/ipam",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
	start_proc containerd "$(command -v containerd)" --config "$STATE/containerd/config.toml"
	wait_for "containerd" 120 containerd ctr --address "$CTRD_SOCK" version
}

# The pause image, from source: a static binary in a one-layer docker-archive, imported like any image.
import_pause() {
	local dir arch layer config
	[ -z "$(ctr_k8s images ls -q "name==$PAUSE_IMAGE")" ] || return 0
	dir=$(mktemp -d "$STATE/pause.XXXXXX")
	gcc -static -Os -s -o "$dir/pause" "$HERE/cluster/pause.c"
	arch=$(dpkg --print-architecture)
	mkdir "$dir/rootfs" "$dir/archive"
	mv "$dir/pause" "$dir/rootfs/pause"
	tar -C "$dir/rootfs" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$dir/layer.tar" pause
	layer=$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)
	mkdir "$dir/archive/$layer"
	mv "$dir/layer.tar" "$dir/archive/$layer/layer.tar"
	printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$arch" "$layer" >"$dir/archive/config.json"
	config=$(sha256sum "$dir/archive/config.json" | cut -d' ' -f1)
	mv "$dir/archive/config.json" "$dir/archive/$config.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config" "$PAUSE_IMAGE" "$layer" >"$dir/archive/manifest.json"
	tar -C "$dir/archive" -cf "$dir/pause.tar" .
	ctr_k8s images import "$dir/pause.tar" >/dev/null
	rm -rf "$dir"
}

# The image config digest containerd has under a name: the image ID Docker gives the same image (docker save writes
# the config byte for byte), so an unchanged image is recognised without exporting it.
cluster_image_id() {
	local manifest
	manifest=$(ctr_k8s images ls "name==$1" 2>/dev/null | awk 'NR == 2 { print $3 }')
	[ -n "$manifest" ] || return 0
	ctr_k8s content get "$manifest" 2>/dev/null | sed -n 's/.*"config":{[^}]*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p'
}

# Our sandbox images, from the Docker engine (docker save) into containerd's k8s.io namespace, under the names Pods
# use whatever repository they were built under. One `docker save` of all that changed writes shared layers once. A
# tag that moves while it is saved (an image rebuilt beside the cluster's start) is imported again, twice at most.
import_images() {
	local targets=() t attempt
	if [ -n "${SANDGATE_K8S_IMAGES:-}" ]; then
		read -r -a targets <<<"$SANDGATE_K8S_IMAGES"
	else
		mapfile -t targets < <(docker image ls --format '{{.Tag}}' "$IMAGE_REPO" | grep -v '^<none>$' | sort -u)
	fi
	[ ${#targets[@]} -gt 0 ] || fail "no $IMAGE_REPO image in Docker: run make images (or scripts/images.sh base) first."
	for attempt in 1 2 3; do
		import_changed_images "${targets[@]}"
		[ ${#targets[@]} -gt 0 ] || return 0
		say "moved in Docker while imported: ${targets[*]}; importing again"
	done
	fail "$IMAGE_REPO:${targets[0]} kept changing in Docker while it was imported; stop the image builds and start again."
}

# import_changed_images TAG...: imports the tags whose image containerd does not have yet; on return, targets holds
# those whose Docker image changed while they were saved.
import_changed_images() {
	local refs=() changed=() moved=() t id
	for t in "$@"; do
		id=$(docker image inspect -f '{{.Id}}' "$IMAGE_REPO:$t" 2>/dev/null) || fail "$IMAGE_REPO:$t is not in Docker: build it with scripts/images.sh $t."
		if [ "$(cluster_image_id "$CLUSTER_IMAGE_REPO:$t")" = "$id" ]; then
			say "image $CLUSTER_IMAGE_REPO:$t = $IMAGE_REPO:$t (${id:7:12}), imported before"
			continue
		fi
		refs+=("$IMAGE_REPO:$t")
		changed+=("$t")
	done
	targets=()
	[ ${#refs[@]} -gt 0 ] || return 0
	docker save "${refs[@]}" | ctr_k8s images import - >/dev/null
	for t in "${changed[@]}"; do
		if [ "docker.io/$IMAGE_REPO" != "$CLUSTER_IMAGE_REPO" ]; then
			ctr_k8s images tag --force "docker.io/$IMAGE_REPO:$t" "$CLUSTER_IMAGE_REPO:$t" >/dev/null
			ctr_k8s images rm "docker.io/$IMAGE_REPO:$t" >/dev/null
		fi
		id=$(docker image inspect -f '{{.Id}}' "$IMAGE_REPO:$t")
		if [ "$(cluster_image_id "$CLUSTER_IMAGE_REPO:$t")" != "$id" ]; then
			moved+=("$t")
			continue
		fi
		say "image $CLUSTER_IMAGE_REPO:$t = $IMAGE_REPO:$t (${id:7:12}), imported"
	done
	targets=("${moved[@]}")
}

start_kubelet() {
	mkdir -p "$STATE/kubelet/root" "$STATE/kubelet/pki" "$LOGS/pods"
	cat >"$STATE/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host is cgroup v1 (the kubelet refuses it unless told), with the cgroupfs driver like Docker's.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CTRD_SOCK
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
# Pods get no resolver of the host: they reach only what a test gives them.
resolvConf: ""
podLogsDir: $LOGS/pods
# Nothing can be pulled: an image collected for disk space would be gone for good. Eviction only when the disk or
# memory is really out (the default 15 % free image disk is more than a shared CI disk has).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
  imagefs.inodesFree: 1%
maxPods: 110
serializeImagePulls: false
EOF
	start_proc kubelet "$BIN/kubelet" --config "$STATE/kubelet/config.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
		--root-dir "$STATE/kubelet/root" --cert-dir "$STATE/kubelet/pki" --hostname-override "$NODE"
}

start_agent_sandbox() {
	kubectl apply --server-side --force-conflicts -f "$CTL/crds" >/dev/null
	wait_for "the agent-sandbox CRDs" 120 "" kubectl wait --for condition=Established --timeout 5s -f "$CTL/crds"
	start_proc agent-sandbox-controller "$CTL/bin/agent-sandbox-controller" --kubeconfig "$ADMIN_KUBECONFIG" \
		--leader-elect=false --enable-webhook=false --manage-webhook-certs=false --extensions \
		--metrics-bind-address "127.0.0.1:$AS_METRICS_PORT" --health-probe-bind-address "127.0.0.1:$AS_PROBE_PORT"
	wait_for "the agent-sandbox controller" 120 agent-sandbox-controller curl -sf --max-time 3 "http://127.0.0.1:$AS_PROBE_PORT/readyz"
}

start_local_path() {
	local dir=$STATE/local-path
	mkdir -p "$dir" "$STATE/volumes"
	cat >"$dir/config.json" <<EOF
{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$STATE/volumes"]}]}
EOF
	# Its helper Pods make and remove the volume directories: our base image (it has a shell), as root, since
	# the directories belong to root; the volume itself is mode 0777, so sandboxes write it as their own user.
	cat >"$dir/helperPod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  automountServiceAccountToken: false
  containers:
  - name: helper-pod
    image: $CLUSTER_IMAGE_REPO:base
    imagePullPolicy: Never
    securityContext:
      runAsUser: 0
      runAsGroup: 0
EOF
	kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $STORAGE_NAMESPACE
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local-path-config
  namespace: $STORAGE_NAMESPACE
data:
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $STORAGE_CLASS
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
EOF
	wait_for "the ServiceAccount of $STORAGE_NAMESPACE" 120 kube-controller-manager kubectl -n "$STORAGE_NAMESPACE" get serviceaccount default
	start_proc local-path-provisioner "$CTL/bin/local-path-provisioner" start --kubeconfig "$ADMIN_KUBECONFIG" \
		--config "$dir/config.json" --helper-pod-file "$dir/helperPod.yaml" --namespace "$STORAGE_NAMESPACE" \
		--configmap-name local-path-config --service-account-name default --provisioner-name rancher.io/local-path
}

running() {
	[ -d "$STATE" ] || return 1
	local c
	for c in "${COMPONENTS[@]}"; do alive "$c" || return 1; done
	api_ready && node_ready
}

cmd_up() {
	need_root
	if running; then
		say "already up"
		cmd_status
		return 0
	fi
	if [ -d "$STATE" ]; then
		say "$STATE holds a cluster that is not whole; taking it down first"
		cmd_down
	fi
	local start=$SECONDS
	ensure_packages
	command -v docker >/dev/null && docker info >/dev/null 2>&1 || fail "no Docker engine answers: our images are imported from it (scripts/prereqs.sh docker)."
	cmd_build
	local p
	for p in $API_PORT $ETCD_PORT $ETCD_PEER_PORT $KUBELET_PORT $KUBELET_HEALTHZ_PORT $CM_PORT $SCHED_PORT $AS_METRICS_PORT $AS_PROBE_PORT; do
		port_free "$p" || fail "port $p is in use on this host."
	done
	ip link show "$BRIDGE" >/dev/null 2>&1 && fail "the bridge $BRIDGE exists already: a cluster not started by this script, or one not taken down."
	POD_SUBNET=$(pick_pod_cidr)
	POD_SUBNET=${POD_SUBNET%.0.0/16}.0.0/24
	mkdir -p "$STATE" "$LOGS" "$PIDS"
	chmod 0700 "$STATE"
	echo "$POD_SUBNET" >"$STATE/pod-subnet"
	save_host
	say "state $STATE, pod subnet $POD_SUBNET, node $NODE"
	make_pki
	start_containerd
	# The images are imported while the control plane starts: both take tens of seconds, mostly on different
	# resources (disk vs CPU).
	(import_pause && import_images) >"$LOGS/images.log" 2>&1 &
	local images=$!
	start_etcd
	start_control_plane
	start_kubelet
	start_agent_sandbox
	start_local_path
	wait_for "Node $NODE Ready" 300 kubelet node_ready
	wait_for "the default ServiceAccount" 120 kube-controller-manager kubectl -n default get serviceaccount default
	if ! wait "$images"; then
		cat "$LOGS/images.log" >&2
		fail "importing the images failed (log: $LOGS/images.log)."
	fi
	cat "$LOGS/images.log" >&2
	say "up in $((SECONDS - start)) s"
	cmd_status
}

# Pods first, through the API, so the kubelet tears their networks down the ordinary way (CNI DEL); then the
# processes; then whatever a dead or stuck component left behind, by force.
cmd_down() {
	need_root
	[ -d "$STATE" ] || { say "no cluster ($STATE does not exist)"; return 0; }
	local start=$SECONDS c
	if alive kube-apiserver && alive kubelet && api_ready; then
		kubectl delete pods --all --all-namespaces --grace-period 0 --force --wait=false >/dev/null 2>&1 || true
		local until=$((SECONDS + 60))
		while ((SECONDS < until)) && ctr_k8s tasks ls 2>/dev/null | awk 'NR > 1 && $3 == "RUNNING"' | grep -q .; do
			sleep 0.5
		done
	fi
	for c in local-path-provisioner agent-sandbox-controller kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do
		stop_proc "$c" || true
	done
	if alive containerd; then
		local id
		for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
			ctr_k8s tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
		done
		for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
			ctr_k8s tasks delete --force "$id" >/dev/null 2>&1 || true
		done
		for id in $(ctr_k8s containers ls -q 2>/dev/null); do
			ctr_k8s containers delete "$id" >/dev/null 2>&1 || true
		done
		stop_proc containerd || true
	fi
	# Shims outlive containerd by design. Docker's containerd shares /run/containerd/s with ours, so shims are
	# picked by the address of our socket on their command line, never by name.
	local pid
	for pid in $(pgrep -f -- "containerd-shim-runc-v2 .*-address $CTRD_SOCK" || true); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	remove_netns
	ip link del "$BRIDGE" 2>/dev/null || true
	unmount_state || true
	remove_cgroups
	restore_host
	local left
	left=$(host_leftovers)
	rm -rf "$STATE"
	if [ -n "$left" ]; then
		say "down in $((SECONDS - start)) s, but the host is not as before:"
		echo "$left" | sed 's/^/  /' >&2
		return 1
	fi
	say "down in $((SECONDS - start)) s; host settings restored"
}

# host_leftovers prints whatever of the cluster is still on the host after down's clean-up, one thing a line:
# down checks its own work, so a clean-up that misses something fails loudly (make test-k8s runs it every time).
host_leftovers() {
	local key want have t chain c
	if [ -r "$SAVED/sysctl" ]; then
		while IFS='=' read -r key want; do
			have=$(sysctl -n "$key" 2>/dev/null)
			[ "$have" = "$want" ] || echo "sysctl $key is $have, was $want"
		done <"$SAVED/sysctl"
	fi
	for t in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[ -d "$t" ] && echo "cgroup $t"
	done
	ip link show "$BRIDGE" >/dev/null 2>&1 && echo "bridge $BRIDGE"
	{ pgrep -f -- "containerd-shim-runc-v2 .*-address $CTRD_SOCK" || true; } | sed 's/^/shim process /'
	awk -v p="$STATE/" 'index($5, p) == 1 { print "mount " $5 }' /proc/self/mountinfo
	if [ -r "$SAVED/chains" ]; then
		for t in filter nat mangle raw; do
			iptables-save -t "$t" 2>/dev/null | sed -n 's/^:\([^ ]*\) .*/\1/p' | while read -r chain; do
				case "$chain" in KUBE-* | CNI-*) grep -qx "$t $chain" "$SAVED/chains" || echo "iptables chain $t/$chain" ;; esac
			done
		done
	fi
	for c in "${COMPONENTS[@]}"; do
		alive "$c" && echo "process $c"
	done
	return 0
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

cmd_status() {
	if [ ! -d "$STATE" ]; then
		echo "cluster: down"
		return 1
	fi
	local c pid total=0 kb
	for c in "${COMPONENTS[@]}"; do
		if pid=$(proc_pid "$c"); then
			kb=$(rss_kb "$pid")
			total=$((total + kb))
			printf '%-26s pid %-8s RSS %5d MB\n' "$c" "$pid" $((kb / 1024))
		else
			printf '%-26s not running\n' "$c"
		fi
	done
	local shims=0
	for pid in $(pgrep -f -- "containerd-shim-runc-v2 .*-address $CTRD_SOCK" || true); do
		shims=$((shims + $(rss_kb "$pid")))
	done
	printf '%-26s RSS %5d MB (the components above)\n' total $((total / 1024))
	printf '%-26s RSS %5d MB\n' "containerd shims" $((shims / 1024))
	echo "pod subnet: $(cat "$STATE/pod-subnet" 2>/dev/null)  bridge: $BRIDGE  api: https://127.0.0.1:$API_PORT"
	if api_ready 2>/dev/null; then
		kubectl get nodes -o wide 2>/dev/null || true
	fi
	if alive containerd; then
		echo "images:"
		ctr_k8s images ls -q 2>/dev/null | grep -v '^sha256:' | sed 's/^/  /'
	fi
}

cmd_env() {
	echo "export SANDGATE_K8S_KUBECONFIG=$ADMIN_KUBECONFIG"
	echo "export KUBECONFIG=$ADMIN_KUBECONFIG"
	echo "export PATH=$BIN:\$PATH"
}

# Sourced (bash -c 'source scripts/cluster.sh; ...'), it only defines its functions: a step can be run alone.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
case "${1:-}" in
build) cmd_build ;;
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
running) running ;;
images)
	need_root
	alive containerd || fail "the cluster is not up."
	import_images
	;;
env) cmd_env ;;
*)
	echo "usage: $0 build|up|down|status|images|running|env" >&2
	exit 2
	;;
esac
