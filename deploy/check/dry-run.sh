#!/usr/bin/env bash
# Check Kubernetes manifests against a real API server: start etcd and kube-apiserver (built
# by deploy/check/build-apiserver.sh) on 127.0.0.1 in a temporary directory, submit the
# manifests with `kubectl apply --dry-run=server`, print what the server said, stop both and
# remove the directory.
#
# Usage: deploy/check/dry-run.sh [--bin DIR] [--keep] [--no-negative] [MANIFESTS]
#
#   MANIFESTS       a kustomization directory (default: deploy/kubernetes) or one YAML file
#   --bin DIR       where etcd, kube-apiserver and kubectl are (default: $VMTUNE_K8S_CHECK,
#                   else ${CARGO_TARGET_DIR:-target}/k8s-check)
#   --keep          keep the temporary directory (logs, kubeconfig, rendered manifests)
#   --no-negative   skip the checks that broken manifests are rejected
#
# What is checked, in order:
#   1. the manifests render (`kubectl kustomize`, as `kubectl apply -k` renders them);
#   2. their Namespaces, submitted alone with --dry-run=server, then created for real: the
#      server refuses a namespaced object, even in a dry run, in a namespace that does not
#      exist;
#   3. every object with --dry-run=server and --validate=strict: the server's validation, an
#      unknown or misspelt field, defaulting, admission;
#   4. a Pod made of each DaemonSet's (Deployment's, ...) pod template, in its namespace, with
#      --dry-run=server: what the workload's controller would create goes through pod
#      admission too (the priority class must exist; Pod Security: this server enforces the
#      "restricted" level by default, as a hardened cluster does, so a namespace whose pods
#      need more must say so in its labels);
#   5. unless --no-negative: broken copies ARE rejected, so that the check can fail: a
#      DaemonSet whose template does not match its selector, one with a misspelt field, and
#      the pod template of 4 in a namespace without Pod Security labels.
# A warning from the server (a deprecated API, a Pod Security level) fails the check too.
#
# The server: etcd on a free port (fsync off), kube-apiserver with a token file (the user
# is in system:masters), service-account keys from `openssl genrsa`, a self-signed serving
# certificate checked by kubectl, --endpoint-reconciler-type=none,
# --disable-admission-plugins=ServiceAccount (no controller-manager makes the default
# service accounts), and the Pod Security defaults above. Ready in ~5 s.
#
# Needs bash, openssl, jq, and the three binaries. Exit status: 0 when everything was
# accepted (and the broken copies rejected), 1 when something was rejected or warned about
# (or a broken copy accepted), 2 when the check could not run (missing binary, the server
# did not start).
set -euo pipefail

prog=dry-run.sh
die() {
  echo "$prog: $*" >&2
  exit 2
}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

repo=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-target}
case "$target" in /*) ;; *) target=$repo/$target ;; esac

bin=${VMTUNE_K8S_CHECK:-$target/k8s-check} keep=false negative=true manifests=
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --bin)
      [ $# -ge 2 ] || die "--bin needs a value (see --help)"
      bin=$2
      shift 2
      ;;
    --bin=*) bin=${1#*=} && shift ;;
    --keep) keep=true && shift ;;
    --no-negative) negative=false && shift ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *)
      [ -z "$manifests" ] || die "one MANIFESTS only (see --help)"
      manifests=$1
      shift
      ;;
  esac
done
manifests=${manifests:-$repo/deploy/kubernetes}
[ -e "$manifests" ] || die "$manifests does not exist"

for b in etcd kube-apiserver kubectl; do
  [ -x "$bin/$b" ] || die "no $bin/$b: run deploy/check/build-apiserver.sh (or give --bin)"
done
for tool in openssl jq; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found on PATH"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmtune-k8s-check.XXXXXX")
pids=()
cleanup() {
  local pid i
  # the API server first, then etcd
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if $keep; then
    echo "kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# A TCP port nobody listens on (from /proc/net/tcp{,6}), among 20000-59999.
listening=
free_port() {
  [ -n "$listening" ] || listening=$(awk 'FNR > 1 && $4 == "0A" { split($2, a, ":"); print a[2] }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u | tr '\n' ' ')
  local p hex
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 40000))
    hex=$(printf '%04X' "$p")
    case " $listening " in *" $hex "*) continue ;; esac
    listening="$listening $hex"
    echo "$p"
    return 0
  done
  die "no free port found"
}

# -- the server --------------------------------------------------------------------------
etcd_port=$(free_port)
peer_port=$(free_port)
api_port=$(free_port)
token=$(openssl rand -hex 16)
echo "$token,vmtune-check,vmtune-check,system:masters" >"$tmp/tokens.csv"
openssl genrsa -out "$tmp/sa.key" 2048 2>/dev/null || die "openssl genrsa failed"
openssl rsa -in "$tmp/sa.key" -pubout -out "$tmp/sa.pub" 2>/dev/null || die "openssl rsa -pubout failed"
cat >"$tmp/admission.yaml" <<'EOF'
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: PodSecurity
    configuration:
      apiVersion: pod-security.admission.config.k8s.io/v1
      kind: PodSecurityConfiguration
      defaults:
        enforce: restricted
        enforce-version: latest
        audit: restricted
        audit-version: latest
        warn: restricted
        warn-version: latest
      exemptions: {}
EOF

t0=$(date +%s.%N)
"$bin/etcd" --name check --data-dir "$tmp/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "check=http://127.0.0.1:$peer_port" --unsafe-no-fsync --log-level warn \
  >"$tmp/etcd.log" 2>&1 &
pids+=($!)

"$bin/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --cert-dir "$tmp/certs" \
  --token-auth-file "$tmp/tokens.csv" --authorization-mode Node,RBAC \
  --service-account-issuer https://kubernetes.default.svc \
  --service-account-key-file "$tmp/sa.pub" --service-account-signing-key-file "$tmp/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 \
  --endpoint-reconciler-type none \
  --disable-admission-plugins ServiceAccount \
  --admission-control-config-file "$tmp/admission.yaml" \
  >"$tmp/kube-apiserver.log" 2>&1 &
pids+=($!)

# kubectl checks the server's self-signed certificate (made in --cert-dir at start)
kc=("$bin/kubectl" --kubeconfig "$tmp/kubeconfig" --cache-dir "$tmp/kube-cache")
ready=false
for _ in $(seq 1200); do # 120 s
  for i in 0 1; do
    if ! kill -0 "${pids[i]}" 2>/dev/null; then
      log=$tmp/etcd.log
      [ "$i" = 0 ] || log=$tmp/kube-apiserver.log
      tail -n 20 "$log" >&2
      die "$(basename "$log" .log) exited at start (the end of its log above)"
    fi
  done
  if [ ! -f "$tmp/kubeconfig" ] && [ -s "$tmp/certs/apiserver.crt" ]; then
    cat >"$tmp/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: check
    cluster:
      server: https://127.0.0.1:$api_port
      certificate-authority: $tmp/certs/apiserver.crt
users:
  - name: check
    user:
      token: $token
contexts:
  - name: check
    context: {cluster: check, user: check}
current-context: check
EOF
  fi
  if [ -f "$tmp/kubeconfig" ] && "${kc[@]}" get --raw /readyz >/dev/null 2>&1; then
    ready=true
    break
  fi
  sleep 0.1
done
if ! $ready; then
  tail -n 20 "$tmp/kube-apiserver.log" >&2
  "${kc[@]}" get --raw '/readyz?verbose' >&2 || true
  die "kube-apiserver was not ready within 120 s (the end of its log above)"
fi
printf 'kube-apiserver %s ready in %.1f s (etcd :%s, API :%s)\n' \
  "$("${kc[@]}" version -o json | jq -r .serverVersion.gitVersion)" \
  "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" "$etcd_port" "$api_port"

# -- the checks --------------------------------------------------------------------------
failed=0
fail() {
  echo "FAILED: $*"
  failed=1
}

# Run kubectl ARGS...; print its output indented; succeed when it exits 0 and the server
# sent no warning.
submit() {
  local out rc=0
  out=$("${kc[@]}" "$@" 2>&1) || rc=$?
  sed 's/^/  /' <<<"$out"
  [ "$rc" = 0 ] || return 1
  ! grep -q '^Warning:' <<<"$out"
}
# Like submit, but the request must be REJECTED with a message matching the regex EXPECT.
reject() {
  local expect=$1 out rc=0
  shift
  out=$("${kc[@]}" "$@" 2>&1) || rc=$?
  sed 's/^/  /' <<<"$out"
  if [ "$rc" = 0 ]; then
    echo "  (accepted)"
    return 1
  fi
  grep -Eq "$expect" <<<"$out" || {
    echo "  (rejected, but not with a message matching /$expect/)"
    return 1
  }
}

# 1. render
if [ -d "$manifests" ]; then
  echo "== kubectl kustomize $manifests"
  "${kc[@]}" kustomize "$manifests" >"$tmp/all.yaml" 2>"$tmp/kustomize.err" || {
    sed 's/^/  /' "$tmp/kustomize.err"
    echo "FAILED: $manifests does not render"
    exit 1
  }
else
  cp "$manifests" "$tmp/all.yaml"
fi
# the objects as one JSON List (client side: parses the YAML, nothing else)
"${kc[@]}" create --dry-run=client -o json -f "$tmp/all.yaml" >"$tmp/all.json" 2>"$tmp/parse.err" || {
  sed 's/^/  /' "$tmp/parse.err"
  echo "FAILED: $manifests does not parse as Kubernetes objects"
  exit 1
}
jq -s '{apiVersion: "v1", kind: "List", items: [.[] | if .kind == "List" then .items[] else . end]}' \
  "$tmp/all.json" >"$tmp/list.json"
jq -r '.items[] | "  \(.kind)/\(.metadata.name)\(if .metadata.namespace then " in \(.metadata.namespace)" else "" end)"' \
  "$tmp/list.json"

# 2. the namespaces
jq '.items |= map(select(.kind == "Namespace"))' "$tmp/list.json" >"$tmp/namespaces.json"
if [ "$(jq '.items | length' "$tmp/namespaces.json")" -gt 0 ]; then
  echo "== kubectl apply --dry-run=server (the Namespaces)"
  submit apply --dry-run=server --validate=strict -f "$tmp/namespaces.json" || fail "a Namespace was rejected"
  "${kc[@]}" apply -f "$tmp/namespaces.json" >/dev/null 2>&1 || fail "the Namespaces could not be created"
fi

# 3. everything
echo "== kubectl apply --dry-run=server --validate=strict (every object)"
submit apply --dry-run=server --validate=strict -f "$tmp/list.json" || fail "an object was rejected or warned about"

# 4. the pod templates as Pods
pod_of_template='{apiVersion: "v1", kind: "Pod",
  metadata: {name: "\(.metadata.name)-template", namespace: (.metadata.namespace // "default"),
             labels: (.spec.template.metadata.labels // {})},
  spec: .spec.template.spec}'
jq "{apiVersion: \"v1\", kind: \"List\", items: [.items[] | select(.spec.template.spec != null) | $pod_of_template]}" \
  "$tmp/list.json" >"$tmp/pods.json"
if [ "$(jq '.items | length' "$tmp/pods.json")" -gt 0 ]; then
  echo "== kubectl create --dry-run=server (a Pod of each pod template)"
  submit create --dry-run=server --validate=strict -f "$tmp/pods.json" || fail "a pod template's Pod was rejected or warned about"
fi

# 5. broken copies must be rejected
if $negative; then
  ds=$(jq -c '[.items[] | select(.kind == "DaemonSet")][0] // empty' "$tmp/list.json")
  if [ -z "$ds" ]; then
    echo "== (no DaemonSet: the rejection checks are skipped)"
  else
    echo "== broken copies, each must be rejected"
    echo "- a DaemonSet whose pod template's labels do not match its selector"
    jq '.spec.template.metadata.labels = {"vmtune-check": "mismatch"}' <<<"$ds" >"$tmp/bad-selector.json"
    reject 'selector.*does not match template|does not match template.*labels' \
      apply --dry-run=server --validate=strict -f "$tmp/bad-selector.json" ||
      fail "a DaemonSet whose template does not match its selector was not rejected"

    echo "- a DaemonSet with a misspelt field (imagePulPolicy)"
    jq '.spec.template.spec.containers[0] |= (.imagePulPolicy = .imagePullPolicy | del(.imagePullPolicy))' \
      <<<"$ds" >"$tmp/bad-field.json"
    reject 'unknown field.*imagePulPolicy' \
      apply --dry-run=server --validate=strict -f "$tmp/bad-field.json" ||
      fail "a misspelt field was not rejected"

    echo "- the DaemonSet's pod template as a Pod, in a namespace without Pod Security labels"
    "${kc[@]}" create namespace vmtune-check-unlabelled >/dev/null 2>&1 ||
      fail "cannot create the namespace vmtune-check-unlabelled"
    jq "$pod_of_template | .metadata.namespace = \"vmtune-check-unlabelled\"" <<<"$ds" >"$tmp/bad-psa.json"
    reject 'violates PodSecurity' \
      create --dry-run=server --validate=strict -f "$tmp/bad-psa.json" ||
      fail "the pod template was admitted at the restricted level"
  fi
fi

if [ "$failed" = 0 ]; then
  echo "OK: every object was accepted by kube-apiserver$($negative && echo ', and every broken copy rejected')"
else
  echo "FAILED: see above"
fi
exit "$failed"
