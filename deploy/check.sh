#!/usr/bin/env bash
# check.sh: the deployment files checked (make deploy-check): the Kubernetes manifests against
# Kubernetes 1.29's schemas, strictly (PyPI's kubernetes-validate, which bundles the schemas: no
# cluster and no network at check time; pinned into the git-ignored deploy/.venv), the
# ConfigMap's tensord.json by tensord --check-config (its paths moved into a temporary
# directory), HAProxy's config by haproxy -c, and the systemd template's instance paths.
# Usage: [BUILD=dir] deploy/check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
VER=1.37.0
fail=0
if ! { [ -x deploy/.venv/bin/kubernetes-validate ] &&
	deploy/.venv/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('kubernetes-validate') != '$VER')" 2>/dev/null; }; then
	python3 -m venv deploy/.venv && deploy/.venv/bin/python -m pip install -q "kubernetes-validate==$VER" ||
		{ echo "deploy-check: cannot install kubernetes-validate $VER"; exit 1; }
fi
if deploy/.venv/bin/kubernetes-validate --strict --quiet -k 1.29.0 deploy/k8s/*.yaml; then
	echo "deploy-check: deploy/k8s/*.yaml valid for Kubernetes 1.29 (kubernetes-validate $VER, strict)"
else
	echo "deploy-check: deploy/k8s FAILED"; fail=1
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/token" "$d/models" "$d/cache" "$d/run"
printf 'a-test-token-of-more-than-16-bytes\n' >"$d/token/token"
chmod 600 "$d/token/token"
deploy/.venv/bin/python - "$d" <<'PY' || fail=1
import sys, yaml
d = sys.argv[1]
cm = yaml.safe_load(open("deploy/k8s/configmap.yaml"))
text = cm["data"]["tensord.json"]
for a, b in (("/etc/tensord/token/token", d + "/token/token"), ('"/models"', '"%s/models"' % d),
             ("/var/cache/tensord", d + "/cache"), ("/run/tensord", d + "/run")):
    assert a in text, a
    text = text.replace(a, b)
open(d + "/tensord.json", "w").write(text)
PY
if "$BUILD/bin/tensord" --config "$d/tensord.json" --check-config >/dev/null; then
	echo "deploy-check: the ConfigMap's tensord.json passes tensord --check-config"
else
	echo "deploy-check: the ConfigMap's tensord.json FAILED tensord --check-config"; fail=1
fi
if haproxy -c -q -f deploy/haproxy/haproxy.cfg; then
	echo "deploy-check: deploy/haproxy/haproxy.cfg valid (haproxy -c)"
else
	echo "deploy-check: deploy/haproxy/haproxy.cfg FAILED haproxy -c"; fail=1
fi
# the systemd template: its unit syntax (systemd-analyze verify, where installed) and its
# ExecStart's flags, with instance 2, over the shipped config (tensord --check-config)
if command -v systemd-analyze >/dev/null; then
	sed "s#/usr/local/bin/tensord#$(readlink -f "$BUILD/bin/tensord")#" systemd/tensord@.service >"$d/tensord@.service"
	cp "$d/tensord@.service" "$d/tensord@2.service"
	out=$(cd "$d" && systemd-analyze verify --man=no ./tensord@2.service 2>&1 | grep -v -e "^$" -e "User=tensord" -e "Group=tensord")
	if [ -z "$out" ]; then echo "deploy-check: systemd/tensord@.service verified (systemd-analyze)"
	else echo "deploy-check: systemd/tensord@.service: $out"; fail=1; fi
fi
mapfile -t args < <(python3 - "$d" <<'PY'
import shlex, sys
text = open("systemd/tensord@.service").read().replace("\\\n", " ")
line = next(l for l in text.splitlines() if l.startswith("ExecStart="))
words = shlex.split(line[len("ExecStart="):].replace("%i", "2"))
d = sys.argv[1]
out, skip = [], False
for i, w in enumerate(words[1:]):
    if skip:
        skip = False
        continue
    if w in ("--config", "--cache_dir"):  # the shipped config, and a directory that exists here
        out += [w, "config/tensord.json" if w == "--config" else d + "/cache"]
        skip = True
        continue
    out.append(w.replace("/run/tensord/2", d + "/run"))
print("\n".join(out))
PY
)
if cfg=$("$BUILD/bin/tensord" "${args[@]}" --check-config) && grep -q "tcp://127.0.0.1:7072" <<<"$cfg" &&
	grep -q "http://127.0.0.1:8012" <<<"$cfg"; then
	echo "deploy-check: tensord@2's flags over config/tensord.json pass --check-config (TSD1 :7072, REST :8012)"
else
	echo "deploy-check: tensord@.service's flags FAILED --check-config: ${args[*]}"; fail=1
fi
exit $fail
