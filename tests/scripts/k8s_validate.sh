#!/bin/sh
# k8s_validate.sh — validates every manifest of deploy/k8s/ against the
# Kubernetes JSON schemas bundled with PyPI's kubernetes-validate (offline:
# the schemas ship in the package), strictly (unknown fields fail), for the
# oldest and the newest Kubernetes version the manifests claim to support;
# the same for the variants of deploy/k8s-* (kustomizations over deploy/k8s,
# e.g. k8s-mps), rendered by kustomize_lite.py (checked against `kubectl
# kustomize` where kubectl is installed), from Kubernetes 1.29.
# Then what the schemas cannot see: mounts name declared volumes, probes
# name declared ports and binaries the image installs (deploy/Containerfile),
# a non-root container can read its Secret/ConfigMap files (a mode without
# o+r needs the pod's fsGroup), and the ConfigMap's zppd.conf, with the
# container's `-o` flags, is one zppd accepts (`zppd --check-config` when
# ZPPD_BIN is given) and fits the manifest: socket inside a mounted
# directory and equal to ZPP_SOCKET and the probe's, TLS files under a
# mount, metrics/peer ports equal to the declared ports and the scrape
# annotation, and a wildcard peer_listen comes with a peer_advertise whose
# $(VARS) the container's env defines. And what zppd's lifecycle needs: its
# DaemonSet replaces no pod by itself (OnDelete: a restart aborts the node's
# jobs), the grace period outlasts zppd's own stop deadline (daemon/main.c),
# the startup probe waits out cuda_start_wait_ms, the /healthz probes GET an
# address zppd listens on, a zppctl probe gives up before the kubelet does,
# and a system-node-critical pod outside kube-system comes with the
# ResourceQuota that admits it (GKE).
#
# Exit status: 0 pass, 1 fail, 77 (ctest: skipped) when kubernetes-validate
# is missing — except under CI=true, where that fails (`make deps`).
# Usage: k8s_validate.sh SOURCE_DIR [ZPPD_BIN]
set -u
src=${1:?usage: k8s_validate.sh SOURCE_DIR [ZPPD_BIN]}
zppd=${2:-}
KUBE_VERSIONS="1.28.0 1.34.0"

kv=""
if command -v kubernetes-validate >/dev/null 2>&1; then
    kv=kubernetes-validate
elif python3 -c 'import kubernetes_validate' >/dev/null 2>&1; then
    kv="python3 -m kubernetes_validate"
fi
if [ -z "$kv" ]; then
    if [ "${CI:-}" = "true" ]; then
        echo "k8s_validate.sh: kubernetes-validate missing (CI=true: make deps must install it)" >&2
        exit 1
    fi
    echo "k8s_validate.sh: skipped: pip install kubernetes-validate"
    exit 77
fi
set --
for f in "$src"/deploy/k8s/*.yaml; do
    [ "${f##*/}" = kustomization.yaml ] || set -- "$@" "$f"
done
[ -f "${1:-}" ] || { echo "k8s_validate.sh: FAIL: no manifests in deploy/k8s"; exit 1; }
rc=0
for v in $KUBE_VERSIONS; do
    echo "== Kubernetes $v"
    # No network: the package must use its bundled schemas.
    $kv --strict -k "$v" "$@" || rc=1
done

# The kustomizations (deploy/k8s, and the variants deploy/k8s-*, e.g.
# k8s-mps) rendered by tests/scripts/kustomize_lite.py, which fails where
# kubectl is installed and renders them otherwise. Variants use sidecar
# containers: they claim Kubernetes 1.29 and later.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sets="$src/deploy/k8s"
for d in "$src"/deploy/k8s "$src"/deploy/k8s-*; do
    [ -f "$d/kustomization.yaml" ] || continue
    out=$tmp/$(basename "$d").yaml
    echo "== kustomization ${d#"$src"/}"
    python3 "$src/tests/scripts/kustomize_lite.py" "$d" > "$out" || { rc=1; continue; }
    [ "$d" = "$src/deploy/k8s" ] && continue
    for v in 1.29.0 ${KUBE_VERSIONS#* }; do
        $kv --strict -k "$v" "$out" || rc=1
    done
    sets="$sets $out"
done

echo "== manifests against each other, the Containerfile and zppd"
python3 - "$src" "$zppd" $sets <<'PY' || rc=1
import os, posixpath, re, subprocess, sys, tempfile
import yaml

src, zppd = sys.argv[1], sys.argv[2]
kdir = os.path.join(src, "deploy", "k8s")
bad = []


def fail(where, msg):
    bad.append("%s: %s" % (where, msg))


# Every manifest of deploy/k8s but the examples is in its kustomization.
kfile = os.path.join(kdir, "kustomization.yaml")
if os.path.exists(kfile):
    with open(kfile) as fh:
        listed = set(yaml.safe_load(fh).get("resources", []))
    for f in sorted(os.listdir(kdir)):
        if f.endswith(".yaml") and f != "kustomization.yaml" and not f.endswith("-example.yaml") \
                and f not in listed:
            fail("deploy/k8s/kustomization.yaml", "does not list %s" % f)

# What the image installs: `install ... /out/PATH` and COPY destinations.
with open(os.path.join(src, "deploy", "Containerfile")) as fh:
    cf = fh.read()
image_files = set(re.findall(r"/out(/\S+)", cf))
image_files |= set(m for m in re.findall(r"^COPY\s+(?:--\S+\s+)?\S+\s+(/\S+)", cf, re.M))
image_files |= {"/bin/sh"}

# The sets checked: deploy/k8s's files, then each variant's rendering (its
# objects named after the variant's file, e.g. k8s-mps.yaml).
docs, cms_of, quotas_of = [], {}, {}
for s in sys.argv[3:]:
    files = ([os.path.join(s, f) for f in sorted(os.listdir(s))
              if f.endswith(".yaml") and f != "kustomization.yaml"]
             if os.path.isdir(s) else [s])
    sdocs = []
    for path in files:
        with open(path) as fh:
            sdocs += [(os.path.basename(path), d) for d in yaml.safe_load_all(fh) if d]
    docs += sdocs
    cms = {d["metadata"]["name"]: d for _, d in sdocs if d.get("kind") == "ConfigMap"}
    cms_of.update({f: cms for f, _ in sdocs})
    quotas = [d for _, d in sdocs if d.get("kind") == "ResourceQuota"]
    quotas_of.update({f: quotas for f, _ in sdocs})

# zppd's own stop deadline: after SIGTERM it lets calls run this long, then
# aborts the jobs and exits (1 past it); the kubelet's grace period must
# outlast it or the ordered stop is a SIGKILL.
try:
    with open(os.path.join(src, "daemon", "main.c")) as fh:
        stop_deadline_s = int(re.search(r"#define STOP_DEADLINE_MS (\d+)", fh.read()).group(1)) / 1000
except (OSError, AttributeError):
    stop_deadline_s = None
    fail("daemon/main.c", "no STOP_DEADLINE_MS: cannot check the pods' grace periods")
CRITICAL = ("system-node-critical", "system-cluster-critical")

def quota_admits(quotas, ns, pclass):
    for q in quotas:
        if (q.get("metadata", {}).get("namespace", "default")) != ns:
            continue
        for e in ((q.get("spec", {}).get("scopeSelector") or {}).get("matchExpressions") or []):
            if e.get("scopeName") == "PriorityClass" and e.get("operator") == "In" and \
                    pclass in (e.get("values") or []):
                return True
    return False

def probe_budget(pr):
    """Seconds a probe lets a container start before it fails it."""
    return pr.get("initialDelaySeconds", 0) + pr.get("periodSeconds", 10) * pr.get("failureThreshold", 3)

def pod_spec(d):
    s = d.get("spec", {})
    if d.get("kind") == "Pod":
        return s
    if d.get("kind") == "CronJob":
        s = s.get("jobTemplate", {}).get("spec", {})
    return s.get("template", {}).get("spec")

def under(path, mounts):
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)

def resolves(path, mounts):
    """Whether a file path exists as far as the manifests tell: under the
    deepest mount that holds it, a ConfigMap of deploy/k8s must have it as a
    key (or item path); a Secret's keys are not known here."""
    best = max((m for m in mounts if under(path, [m])), key=len, default=None)
    if best is None:
        return False
    v, rel = mounts[best], posixpath.relpath(path, best)
    src = v.get("configMap") or v.get("secret")
    if src is None:
        return True
    if src.get("items"):
        return rel in [i["path"] for i in src["items"]]
    if "configMap" in v:
        cm = configmaps.get(src["name"])
        return cm is not None and rel in cm.get("data", {})
    return "/" not in rel

def port_of(addr):
    return int(addr.rsplit(":", 1)[1]) if ":" in addr else None

for f, d in docs:
    configmaps = cms_of[f]
    spec = pod_spec(d)
    if not spec:
        continue
    mps_dirs = {}
    name = "%s %s/%s" % (f, d["kind"], d["metadata"]["name"])
    annotations = (d.get("spec", {}).get("template", {}).get("metadata", {}) or {}).get(
        "annotations", {}) or {}
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    psc = spec.get("securityContext", {}) or {}
    ns = d["metadata"].get("namespace", "default")
    pclass = spec.get("priorityClassName")
    if pclass in CRITICAL and ns != "kube-system" and not quota_admits(quotas_of[f], ns, pclass):
        fail(name, "priorityClassName %s in namespace %s, and no ResourceQuota there scoped to "
             "it: where the API server limits the critical classes (GKE), no pod is admitted"
             % (pclass, ns))
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        where = "%s container %s" % (name, c["name"])
        csc = c.get("securityContext", {}) or {}
        uid = csc.get("runAsUser", psc.get("runAsUser"))
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
        mounts = {}
        for m in c.get("volumeMounts", []):
            v = vols.get(m["name"])
            if v is None:
                fail(where, "volumeMount %s names no volume of the pod" % m["name"])
                continue
            mounts[m["mountPath"]] = v
            for kind in ("secret", "configMap"):
                if kind in v:
                    mode = v[kind].get("defaultMode", 0o644)
                    if uid != 0 and not mode & 0o004:
                        if "fsGroup" not in psc:
                            fail(where, "runs as uid %s, but the files of %s volume %s are "
                                 "root:root mode %04o: set the pod's fsGroup" %
                                 (uid, kind, v["name"], mode))
                        elif not mode & 0o040:
                            fail(where, "%s volume %s mode %04o: not readable by fsGroup" %
                                 (kind, v["name"], mode))
        env = {e["name"]: e for e in c.get("env", [])}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            pr = c.get(probe)
            if not pr:
                continue
            for h in ("httpGet", "tcpSocket", "grpc"):
                if h in pr:
                    port = pr[h]["port"]
                    if isinstance(port, str) and port not in ports:
                        fail(where, "%s names port %r, which the container does not declare" %
                             (probe, port))
                    elif isinstance(port, int) and port not in ports.values():
                        fail(where, "%s port %d is not a declared containerPort" % (probe, port))
        hooks = [(p, c.get(p)) for p in ("startupProbe", "livenessProbe", "readinessProbe")]
        hooks += [(h, (c.get("lifecycle") or {}).get(h)) for h in ("postStart", "preStop")]
        for what, pr in hooks:
            if pr and "exec" in pr and c["image"].split("/")[-1].startswith("zppd:"):
                cmd = pr["exec"]["command"][0]
                if cmd.startswith("/") and cmd not in image_files:
                    fail(where, "%s runs %s, which deploy/Containerfile does not install" %
                         (what, cmd))
        # zppctl in a probe: its own timeout (-t, default 10 s) must end it
        # before the kubelet's timeoutSeconds (default 1) abandons the exec.
        for what, pr in hooks[:3]:
            cmd = ((pr or {}).get("exec") or {}).get("command") or []
            if not cmd or posixpath.basename(cmd[0]) != "zppctl":
                continue
            t = 10.0
            for i, a in enumerate(cmd):
                if a in ("-t", "--timeout") and i + 1 < len(cmd):
                    t = float(cmd[i + 1])
                elif a.startswith("--timeout="):
                    t = float(a.split("=", 1)[1])
            limit = pr.get("timeoutSeconds", 1)
            if not 0 < t < limit:
                fail(where, "%s runs zppctl with a %gs timeout (-t; 0 is none), not below the "
                     "probe's timeoutSeconds %s: the kubelet abandons it first" % (what, t, limit))
        # CUDA MPS: a container joins the control daemon through its pipe
        # directory, which must be mounted there, and the same for every
        # container of the pod.
        mps = (env.get("CUDA_MPS_PIPE_DIRECTORY") or {}).get("value")
        if mps:
            if not under(mps, mounts):
                fail(where, "CUDA_MPS_PIPE_DIRECTORY %s is not a mounted directory" % mps)
            elif mounts[max((m for m in mounts if under(mps, [m])), key=len)].get(
                    "hostPath") is None:
                fail(where, "CUDA_MPS_PIPE_DIRECTORY %s is not on a hostPath volume: the "
                     "training pods could not reach it" % mps)
            mps_dirs[c["name"]] = mps
        # zppd itself: its config, from the ConfigMap mounted at -c's directory.
        args = c.get("args", [])
        if "-c" not in args:
            continue
        conf_path = args[args.index("-c") + 1]
        conf_vol = mounts.get(posixpath.dirname(conf_path))
        if not conf_vol or "configMap" not in conf_vol:
            fail(where, "-c %s is not in a mounted ConfigMap" % conf_path)
            continue
        cm = configmaps.get(conf_vol["configMap"]["name"])
        key = posixpath.basename(conf_path)
        if not cm or key not in cm.get("data", {}):
            fail(where, "ConfigMap %s with key %s is not in deploy/k8s" %
                 (conf_vol["configMap"]["name"], key))
            continue
        text = cm["data"][key]
        cfg = {}
        for line in text.splitlines():
            line = line.split("#", 1)[0]
            if "=" in line:
                k, v = line.split("=", 1)
                cfg[k.strip()] = v.strip()
        overrides = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-o", "--set")]
        for o in overrides:
            k, v = o.split("=", 1)
            cfg[k] = v
            for var in re.findall(r"\$\((\w+)\)", v):
                if var not in env:
                    fail(where, "-o %s uses $(%s), which the container's env does not define" %
                         (o, var))
        if zppd:
            with tempfile.NamedTemporaryFile("w", suffix=".conf") as t:
                t.write(text)
                t.flush()
                cmd = [zppd, "--check-config", "-c", t.name]
                for o in overrides:
                    cmd += ["-o", re.sub(r"\$\(\w+\)", "192.0.2.1", o)]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    fail(where, "zppd --check-config refuses the ConfigMap's %s:\n%s%s" %
                         (key, r.stdout, r.stderr))
        sock = cfg.get("socket", "/run/zppd/zppd.sock")
        if not under(posixpath.dirname(sock), mounts):
            fail(where, "socket %s is not in a mounted directory" % sock)
        if "ZPP_SOCKET" in env and env["ZPP_SOCKET"].get("value") != sock:
            fail(where, "ZPP_SOCKET %s differs from the config's socket %s" %
                 (env["ZPP_SOCKET"].get("value"), sock))
        # Its lifecycle: updates, stop and start.
        if d["kind"] == "DaemonSet" and \
                (d["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate") != "OnDelete":
            fail(name, "updateStrategy %s: the DaemonSet would restart zppd on every node by "
                 "itself, aborting every job there; OnDelete, and nodes replaced once drained "
                 "(docs/kubernetes.md, Updates)" %
                 (d["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate"))
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if stop_deadline_s is not None and grace < stop_deadline_s + 10:
            fail(name, "terminationGracePeriodSeconds %s: zppd lets calls run %gs after SIGTERM "
                 "and then aborts its jobs in order; give it at least %g" %
                 (grace, stop_deadline_s, stop_deadline_s + 10))
        if cfg.get("backend", "auto") != "host":
            wait_s = int(cfg.get("cuda_start_wait_ms", "30000")) / 1000
            first = c.get("startupProbe") or c.get("livenessProbe")
            if first and probe_budget(first) < wait_s + 30:
                fail(where, "%s allows %ss to start; zppd may wait cuda_start_wait_ms (%gs) for "
                     "its GPUs before it answers, plus their start: at least %g" %
                     ("startupProbe" if c.get("startupProbe") else "livenessProbe",
                      probe_budget(first), wait_s, wait_s + 30))
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            cmd = (c.get(probe) or {}).get("exec", {}).get("command", [])
            if "-s" in cmd and cmd[cmd.index("-s") + 1] != sock:
                fail(where, "%s asks socket %s, zppd listens on %s" %
                     (probe, cmd[cmd.index("-s") + 1], sock))
        if cfg.get("peer_tls", "false").lower() in ("true", "yes", "on", "1"):
            for k in ("peer_tls_ca", "peer_tls_cert", "peer_tls_key"):
                if not cfg.get(k) or not resolves(cfg[k], mounts):
                    fail(where, "%s = %s is no file of the volumes mounted" % (k, cfg.get(k)))
        ml = cfg.get("metrics_listen", "")
        if ml:
            if port_of(ml) != ports.get("metrics"):
                fail(where, "metrics_listen %s, but containerPort 'metrics' is %s" %
                     (ml, ports.get("metrics")))
            ann = annotations.get("prometheus.io/port")
            if ann is not None and str(port_of(ml)) != str(ann):
                fail(where, "prometheus.io/port %s, but metrics_listen is %s" % (ann, ml))
        # /healthz probes: the kubelet GETs the probe's host (the pod's IP,
        # the node's with hostNetwork, unless `host` says otherwise), which
        # zppd must listen on, or the probes kill a healthy daemon.
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            hg = (c.get(probe) or {}).get("httpGet")
            if not hg:
                continue
            port = hg["port"]
            port = ports.get(port) if isinstance(port, str) else port
            if port != ports.get("metrics"):
                continue
            if not ml:
                fail(where, "%s GETs the metrics port, but metrics_listen is off" % probe)
                continue
            lhost = ml.rsplit(":", 1)[0].strip("[]")
            if lhost not in ("", "0.0.0.0", "::") and lhost != hg.get("host"):
                fail(where, "%s GETs %s, but metrics_listen is %s: zppd does not answer there" %
                     (probe, hg.get("host") or "the pod's IP", ml))
        pl = cfg.get("peer_listen", "127.0.0.1:7399")
        if pl:
            if port_of(pl) != ports.get("peer"):
                fail(where, "peer_listen %s, but containerPort 'peer' is %s" %
                     (pl, ports.get("peer")))
            host = pl.rsplit(":", 1)[0].strip("[]")
            if host in ("", "0.0.0.0", "::") and not cfg.get("peer_advertise"):
                fail(where, "peer_listen %s and no peer_advertise: zppd would advertise %s:%s, "
                     "which other nodes cannot dial" % (pl, host, port_of(pl)))
    if len(set(mps_dirs.values())) > 1:
        fail(name, "containers name different MPS pipe directories: %s" % mps_dirs)

for b in bad:
    print("FAIL: " + b)
print("k8s checks: %d problem(s)" % len(bad))
sys.exit(1 if bad else 0)
PY
[ $rc -eq 0 ] && echo "k8s_validate.sh: ok" || echo "k8s_validate.sh: FAIL"
exit $rc
